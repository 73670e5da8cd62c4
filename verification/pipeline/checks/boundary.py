"""Check boundary: the effect boundary (the guard, the executor, the journal and the
durable run log) against its seven rules (CONTRACT.md, "The effect boundary"), with
crashes: the boundary model's explorer, then the real components in lockstep with it
(``verification.boundary.check``), within the profile's bounds."""

from __future__ import annotations

import logging
from typing import Any

from replan.verification.pipeline.session import VerifySession
from replan.verification.report.records import CheckResult


def run_boundary_alone(session: VerifySession) -> Any:
    """The boundary's model and real components checked: needs no other check, so it
    can run beside the explorer."""
    from replan.verification.boundary.check import check_boundary as run_check

    logging.getLogger("agent_framework").setLevel(logging.CRITICAL)  # crashes stop tools
    return run_check(
        session.policy,
        subject=session.subject.boundary,
        seed=session.options.seed,
        profile=session.options.profile,
        out_dir=session.evidence / "counterexamples",
    )


def check_boundary(session: VerifySession) -> CheckResult:
    result = session.outcome("boundary", lambda: run_boundary_alone(session))
    status = "passed" if result.ok else "failed"
    summary = result.summary()
    if not result.ok:
        summary = f"properties broken: {', '.join(result.violated)}; " + summary
    check = CheckResult(
        "boundary", status, summary, details=result.to_json(), properties=list(result.violated)
    )
    if not result.ok:
        from replan.verification.boundary.domains import describe, op_from_json

        steps = [
            f"{number}. {describe(op_from_json(step))}"
            for number, step in enumerate(result.steps, start=1)
        ]
        check.failure_text = "\n".join([f"{result.violated[0]}: {result.message}", *steps])
        if result.counterexample is not None:
            check.counterexamples.append(str(result.counterexample))
            check.replay.append(f"replan boundary --replay {result.counterexample}")
    return check
