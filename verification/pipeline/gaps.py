"""What no engine exercised: a gap is not a broken property (``--strict`` makes it one),
but a transition nothing fired is a rule nothing checked."""

from __future__ import annotations

from replan.verification.pipeline.session import VerifySession


def find_gaps(session: VerifySession) -> None:
    """A live declared transition (one the policy does not switch off) or a stop
    reason nothing reached, and a transition or stop reason the explorer reaches that
    the campaign never fired."""
    explored, campaigned = session.explored, session.campaigned
    if explored is None or campaigned is None or not explored.ok or not campaigned.passed:
        return
    coverage = campaigned.coverage
    gaps = session.report.gaps
    reached = set(explored.fired)
    missed = [
        label
        for label in explored.labels
        if label not in explored.disabled_by_policy and not coverage.transitions[label]
    ]
    not_live = cannot_fire(session, [label for label in missed if label not in reached])
    for label in missed:
        if label in reached:
            gaps.append(f"the campaign never fired {label} (the explorer reaches it)")
        elif label in not_live:
            session.report.not_live[label] = not_live[label]
        else:  # within the explorer's bounds or not, nothing exercised it
            gaps.append(
                f"no engine reached {label}"
                + ("" if explored.complete else " (the explorer stopped at its bounds)")
            )
    for reason, explorer_reached in explored.stop_reasons.items():
        if coverage.stop_reasons[reason]:
            continue
        if explorer_reached:
            gaps.append(f"the campaign never stopped a run {reason} (the explorer does)")
        else:
            gaps.append(f"no engine stopped a run {reason}")


def cannot_fire(session: VerifySession, labels: list[str]) -> dict[str, str]:
    """Which of ``labels`` z3 shows cannot fire from any state the invariants
    allow: asked only once the proofs passed (the invariants are then proved)."""
    proofs = session.check("proofs")
    if not labels or proofs is None or not proofs.ok:
        return {}
    from replan.verification.engines.prove.engine import cannot_fire as proved_cannot_fire

    subject = session.subject
    return proved_cannot_fire(session.policy, labels, subject.model, subject.model_class)
