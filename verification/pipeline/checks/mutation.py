"""Check ``mutation`` (``--mutate``): every non-equivalent mutant of the declaration, the
bodies and the policy defaults is killed by the engines above."""

from __future__ import annotations

import os

from replan.verification.pipeline.session import VerifySession
from replan.verification.report.records import CheckResult


def check_mutation(session: VerifySession) -> CheckResult:
    from replan.verification.subjects.adequacy import run_matrix

    matrix = run_matrix(session.policy, workers=min(2, os.cpu_count() or 1))
    document = matrix.to_json()
    session.write_json(session.evidence / "mutate.json", document)
    summary = (
        f"{len(matrix.verdicts)} mutants: {matrix.count('killed')} killed, "
        f"{matrix.count('equivalent')} equivalent, {matrix.count('survived')} survived "
        f"(score {matrix.score:.1%}) in {matrix.seconds:.0f} s"
    )
    check = CheckResult("mutation", "passed" if matrix.ok else "failed", summary, details=document)
    if not matrix.ok:
        check.failure_text = "\n".join(line for line in matrix.lines() if "SURVIVED" in line)
    return check
