"""What a campaign records of its runs: the failure a rule raises, the counts kept
across every example Hypothesis runs, and operations written out for a reader.

Kept apart from the state machine (``machine.py``) because the campaign's driver,
its workers and its reports read these without building a machine.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from replan.verification.core.coverage import Coverage
from replan.verification.core.harness import Operation, result_text
from replan.verification.core.visited import Visited
from replan.verification.runtime import interrupt

_ENUM_REPR = re.compile(r"<(EvidenceState|ExecuteResult|StopReason)\.(\w+): '[^']*'>")


def readable(operation: Operation) -> str:
    """An operation as a line of Python a person can read and paste
    (``EvidenceState.PASSED`` rather than its angle-bracket repr)."""
    return _ENUM_REPR.sub(r"\1.\2", str(operation))


def program(operations: Sequence[Operation], results: Sequence[Any]) -> str:
    """Numbered operations with their outcomes, one per line."""
    return "\n".join(
        f"{number:3}. {readable(operation)}  ->  {result_text(result)}"
        for number, (operation, result) in enumerate(zip(operations, results, strict=True), 1)
    )


# ---- the failure a rule raises ------------------------------------------------------------


class PropertyFailure(AssertionError):
    """An invariant broke, or the implementation and the reference diverged. Carries
    the operations of the run so far, so the shrunk example's are at hand."""

    def __init__(
        self, property_name: str, detail: str, operations: list[Operation], results: list[Any]
    ) -> None:
        super().__init__(f"{property_name}: {detail}")
        self.property = property_name
        self.detail = detail
        self.operations = list(operations)
        self.results = list(results)


# ---- what one campaign accumulates across examples --------------------------------------------


@dataclass
class Progress:
    """What a progress display shows (the CLI draws it on stderr)."""

    examples: int
    budget: int
    operations: int
    seconds: float
    failing: bool  # a failure was found; Hypothesis is shrinking it


@dataclass
class Recorder:
    """Counts across every example Hypothesis runs (generation and shrinking)."""

    coverage: Coverage
    budget: int
    collect_visited: bool = True
    progress: Callable[[Progress], None] | None = None
    examples: int = 0
    runs: int = 0
    operations: int = 0
    properties_checked: int = 0  # operations checked against every property
    failures: int = 0  # failing runs seen (the first, then each one while shrinking)
    first_failure_at: int | None = None  # the example in which the first was seen
    visited: Visited = field(default_factory=Visited)
    #: declared state id -> history kind -> the shortest operations of a run that
    #: entered it with that kind of history (what the campaign revisits a rare state
    #: from: ``run.revisit_missed``)
    entered: dict[str, dict[tuple[Any, ...], tuple[Operation, ...]]] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    _last_report: float = 0.0

    def example_started(self) -> None:
        interrupt.check()  # Ctrl-C, even if it landed where it was swallowed
        self.examples += 1
        if self.progress is not None:
            now = time.perf_counter()
            if now - self._last_report >= 0.2:
                self._last_report = now
                self.progress(
                    Progress(
                        self.examples,
                        self.budget,
                        self.operations,
                        now - self.started,
                        self.failures > 0,
                    )
                )
