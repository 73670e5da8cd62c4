"""What verify adds to an engine's finding: where it breaks, and whether a proof's
counterexample starts from a state anything reached."""

from __future__ import annotations

from typing import Any

from replan.verification.pipeline.session import VerifySession


def fired_transition(session: VerifySession, finding: Any) -> str | None:
    """The declared transition the counterexample's last call fires (replayed on
    the controller under verification, read from its trace): where the property
    breaks. None when no transition fires (a final state, an input check) or the
    trace does not say."""
    from replan.verification.core.harness import appended_since, apply, trace_length

    if not finding.operations:
        return None
    try:
        controller: Any = session.subject.controller(finding.policy)
        for operation in finding.operations[:-1]:
            apply(controller, operation)
        mark = trace_length(controller)
        apply(controller, finding.operations[-1])
        appended = appended_since(controller, mark)
        index = appended[-1][5] if appended and len(appended[-1]) > 5 else None
        labels = getattr(type(controller), "transitions", ())
    except Exception:  # a broken controller may break its replay too: no location
        return None
    if isinstance(index, int) and 0 <= index < len(labels):
        return str(labels[index])
    return None


def label_unreachable_counterexamples(session: VerifySession) -> None:
    """A proof's counterexample to induction from a state the explorer never
    reached (within its bounds) usually means an auxiliary invariant is missing,
    not a reachable bug: say so, with the fields that show it."""
    from replan.verification.engines.explore.coverage import unreachable_fields

    proofs = session.check("proofs")
    if proofs is None or proofs.ok or session.explored is None:
        return
    runs = session.explored.runs or [session.explored]
    for entry in proofs.details.get("properties", []):
        counterexample = entry.get("counterexample") or {}
        before = counterexample.get("before")
        limits = counterexample.get("limits", {})
        if not isinstance(before, dict):
            continue
        if any(limits.get(name) != getattr(session.policy, name) for name in limits):
            entry["reachable"] = "not compared: the counterexample's limits are not the policy's"
            continue
        fields = unreachable_fields(runs, before, session.policy.keys)
        if fields is None:
            continue
        note = (
            f"{entry['name']}: its counterexample starts from a state the explorer never "
            f"reached ({', '.join(fields)}): probably a missing auxiliary invariant "
            "rather than a reachable bug"
        )
        entry["reachable"] = note
        proofs.warnings.append(note)
        proofs.failure_text += f"\n(unreachable: {', '.join(fields)})"
