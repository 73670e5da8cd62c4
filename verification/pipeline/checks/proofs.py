"""Check 3, proofs: z3 proves every property for every step from any state the
invariants allow, with the limits symbolic; commit equivalence with the fixed
workflow; the generated code equal to the declaration."""

from __future__ import annotations

from replan.verification.pipeline.session import VerifySession
from replan.verification.report.records import CheckResult
from replan.verification.runtime.files import write_json


def check_proofs(session: VerifySession) -> CheckResult:
    from replan.verification.engines.prove.engine import prove_all
    from replan.verification.engines.prove.results import counterexample_document

    subject = session.subject
    report = prove_all(
        session.policy, subject.model, subject.model_class, subject.controller, session.progress
    )
    document = report.to_json()
    if session.deterministic:  # the committed evidence has `replan prove`'s report too
        session.write_json(session.evidence / "prove.json", report.to_json())
    result = CheckResult(
        "proofs",
        "passed" if report.ok else "failed",
        f"{sum(1 for r in report.results if r.proved)} of {len(report.results)} "
        "properties proved"
        + (f"; not proved: {', '.join(r.name for r in report.failures)}" if not report.ok else ""),
        details=document,
        properties=[r.name for r in report.failures],
    )
    if not report.ok:
        counterexample = counterexample_document(report)
        path = write_json(session.evidence / "counterexamples" / "prove.json", counterexample)
        result.counterexamples.append(str(path))
        failure = report.failures[0]
        result.failure_text = failure.message
        if counterexample.get("steps"):
            result.replay.append(f"replan replay {path}")
    return result
