"""Check 8, episode (default policy only): the reference episode through the agent SDK,
with the scripted provider."""

from __future__ import annotations

from replan.verification.pipeline.session import VerifySession
from replan.verification.report.records import CheckResult


def check_episode(session: VerifySession) -> CheckResult:
    from replan.verification.subjects.episode import failing_facts, run_reference_episode

    record = run_reference_episode(session.subject.controller)
    session.write_json(session.evidence / "replan-trace.json", record)
    holds = bool(record.get("holds"))
    totals = record.get("totals", {})
    summary = (
        f"reference episode through the agent SDK (scripted provider): "
        f"{totals.get('executed_steps')} steps, {totals.get('proposals_considered')} "
        f"proposals, {totals.get('provider_calls_in_sdk_request')} provider calls, stop "
        f"{record.get('final', {}).get('stop_reason')}"
    )
    check = CheckResult("episode", "passed" if holds else "failed", summary)
    check.details = {"totals": totals, "facts": record.get("facts")}
    if not holds:
        check.failure_text = "\n".join(failing_facts(record))
    return check
