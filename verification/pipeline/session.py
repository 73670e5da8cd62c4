"""One verify run in progress: its inputs, the report being filled, and what one check
leaves for the next.

The checks run in order and read each other's results through this object only: the
campaign measures its coverage against the explorer's graph, the gaps compare the two,
a proof's counterexample is labelled by the states the explorer reached. A check that
raises is reported as an error and the next one still runs.

A check that needs no other check's result may be started beside the explorer, in a
process of its own (``start_beside``); its turn in the order then collects what that
process computed (``outcome``), so the report reads the same either way.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from replan.controller.policy import Policy
from replan.verification.core.subject import PROJECT, Subject
from replan.verification.pipeline.options import VerifyOptions
from replan.verification.report.records import CheckResult, VerifyReport, stable
from replan.verification.runtime import interrupt
from replan.verification.runtime.beside import Beside, BesideError
from replan.verification.runtime.files import write_json

Progress = Callable[[str], None]
T = TypeVar("T")


def stderr_progress(text: str) -> None:
    """verify's progress lines: on stderr, so that ``--json`` output stays clean."""
    interrupt.say(f"replan verify: {text}")


class VerifySession:
    """The state of one verify run, shared by its checks."""

    def __init__(
        self,
        policy: Policy,
        evidence: Path,
        options: VerifyOptions | None = None,
        subject: Subject = PROJECT,
        progress: Progress = stderr_progress,
    ) -> None:
        options = options or VerifyOptions()
        self.policy = policy
        self.evidence = evidence
        self.options = options
        self.subject = subject
        self.progress = progress
        self.report = VerifyReport(policy=policy, profile=options.profile, evidence=str(evidence))
        self.explored: Any = None  # the explorer's result, kept for the campaign's coverage
        self.campaigned: Any = None  # the campaign's result, kept for the gaps
        self.total = 0
        #: the checks' work started beside the explorer, if any
        self.beside: Beside | None = None
        #: per check: seconds its work took in its own process, less those this
        #: process waited for it (added to the check's time in the report)
        self.elsewhere: dict[str, float] = {}

    @property
    def deterministic(self) -> bool:
        return self.options.deterministic

    def write_json(self, path: Path, document: Any) -> Path:
        return write_json(path, stable(document) if self.deterministic else document)

    def check(self, name: str) -> CheckResult | None:
        """The result of an earlier check of this run, if it ran."""
        return next((c for c in self.report.checks if c.name == name), None)

    def start_beside(self, calls: dict[str, Callable[[], Any]]) -> bool:
        """Start the work of the checks named in ``calls``, in turn, in a process of
        their own, each collected by ``outcome`` in its check's turn; False where that
        cannot be done."""
        started = Beside.start(calls)
        if started is not None:
            self.beside = started
        return started is not None

    def outcome(self, name: str, work: Callable[[], T]) -> T:
        """``work``'s value: collected from the process it was started in beside the
        explorer (``start_beside``), or computed now."""
        if self.beside is None or name not in self.beside:
            return work()
        waiting = time.perf_counter()
        value, seconds = self.beside.collect(name)
        self.elsewhere[name] = seconds - (time.perf_counter() - waiting)
        return value  # type: ignore[no-any-return]

    def cancel_beside(self) -> None:
        """Stop the work started beside that no check collected (a stopped run)."""
        if self.beside is not None:
            self.beside.cancel()
            self.beside = None

    def run(self, number: int, name: str, check: Callable[[], CheckResult]) -> CheckResult:
        interrupt.check()  # Ctrl-C, even one swallowed inside the last check
        self.progress(f"[{number}/{self.total}] {name} ...")
        started = time.perf_counter()
        try:
            result = check()
        except BesideError as error:  # raised in the process the check ran in
            result = CheckResult(
                name, "error", str(error), details={"traceback": error.child_traceback}
            )
        except Exception as error:  # a crashed check is reported, the others still run
            result = CheckResult(
                name,
                "error",
                f"{type(error).__name__}: {error}",
                details={"traceback": traceback.format_exc()},
            )
        result.seconds = time.perf_counter() - started + self.elsewhere.pop(name, 0.0)
        self.report.checks.append(result)
        self.progress(
            f"[{number}/{self.total}] {name}: {result.status} - {result.summary} "
            f"({result.seconds:.1f} s)"
        )
        return result
