"""Check 7, workflow: the running controller commits exactly when the fixed workflow's
``decide()`` says ``ReadyToCommit``, for every evidence assignment."""

from __future__ import annotations

import json

from replan.verification.pipeline.session import VerifySession
from replan.verification.report.records import CheckResult


def check_workflow(session: VerifySession) -> CheckResult:
    from replan.verification.subjects.fixed_workflow import fixed_workflow_table

    table = fixed_workflow_table(session.policy, session.subject.controller)
    session.write_json(session.evidence / "fixed-workflow.json", table)
    rows = table.get("rows", [])
    disagree = [row for row in rows if not row.get("agree")]
    summary = (
        f"the running controller and decide() agree on {len(rows) - len(disagree)}/"
        f"{len(rows)} evidence assignments"
    )
    check = CheckResult("workflow", "failed" if disagree else "passed", summary)
    check.details = {"rows": len(rows), "disagreements": disagree[:20]}
    if disagree:
        check.failure_text = "\n".join(json.dumps(row, sort_keys=True) for row in disagree[:5])
    return check
