"""One verify run in progress: its inputs, the report being filled, and what one check
leaves for the next.

The checks run in order and read each other's results through this object only: the
campaign measures its coverage against the explorer's graph, the gaps compare the two,
a proof's counterexample is labelled by the states the explorer reached. A check that
raises is reported as an error and the next one still runs.
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from replan.controller.policy import Policy
from replan.verification.core.subject import PROJECT, Subject
from replan.verification.pipeline.options import VerifyOptions
from replan.verification.report.records import CheckResult, VerifyReport, stable
from replan.verification.runtime import interrupt
from replan.verification.runtime.files import write_json

Progress = Callable[[str], None]


def stderr_progress(text: str) -> None:
    """verify's progress lines: on stderr, so that ``--json`` output stays clean."""
    print(f"replan verify: {text}", file=sys.stderr, flush=True)


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

    @property
    def deterministic(self) -> bool:
        return self.options.deterministic

    def write_json(self, path: Path, document: Any) -> Path:
        return write_json(path, stable(document) if self.deterministic else document)

    def check(self, name: str) -> CheckResult | None:
        """The result of an earlier check of this run, if it ran."""
        return next((c for c in self.report.checks if c.name == name), None)

    def run(self, number: int, name: str, check: Callable[[], CheckResult]) -> CheckResult:
        interrupt.check()  # Ctrl-C, even one swallowed inside the last check
        self.progress(f"[{number}/{self.total}] {name} ...")
        started = time.perf_counter()
        try:
            result = check()
        except Exception as error:  # a crashed check is reported, the others still run
            result = CheckResult(
                name,
                "error",
                f"{type(error).__name__}: {error}",
                details={"traceback": traceback.format_exc()},
            )
        result.seconds = time.perf_counter() - started
        self.report.checks.append(result)
        self.progress(
            f"[{number}/{self.total}] {name}: {result.status} - {result.summary} "
            f"({result.seconds:.1f} s)"
        )
        return result
