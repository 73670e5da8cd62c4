"""Check ``against`` (``--against OLD``): what changed between an older policy or
declaration and this one. A change is information, not a failure: the other checks
judge safety."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from replan.controller.policy import Policy
from replan.controller.records import PolicyError
from replan.spec.model import MachineModel
from replan.verification.pipeline.session import VerifySession
from replan.verification.report.records import CheckResult

#: The policy differences ``policy_changes`` names, as the check's lines say them.
POLICY_CHANGE_LINES = (
    ("limits_changed", "limits changed"),
    ("keys_added", "keys added"),
    ("keys_removed", "keys removed"),
    ("resources_added", "resources added"),
    ("resources_removed", "resources removed"),
    ("per_resource_changed", "per-resource keys changed"),
    ("open_changed", "open slots changed"),
    ("steps_added", "steps added"),
    ("steps_removed", "steps removed"),
    ("completes_only_new", "now completes the run"),
    ("completes_only_old", "no longer completes the run"),
    ("requires_changed", "prerequisites changed"),
    ("approval_changed", "approval changed"),
    ("resource_argument_changed", "resource argument changed"),
    ("workflow_changed", "fixed workflow changed"),
    ("order_changed", "order changed"),
)
#: What only one version can fire, as the check's lines say it.
BEHAVIOUR_LINES = (
    ("transitions_only_new", "new reachable transitions"),
    ("transitions_only_old", "lost transitions"),
    ("stop_reasons_only_new", "new stop paths"),
    ("stop_reasons_only_old", "lost stop paths"),
)


class AgainstError(ValueError):
    """An --against OLD that names no readable policy or revision (one line)."""


def validate_against(old: str, policy_file: str | None) -> None:
    """Bad OLD is bad input, found before any check runs."""
    from replan.spec.declaration import Replanning
    from replan.spec.model import extract
    from replan.verification.report.diagram.overlays import OverlayError, load_old

    try:
        load_old(old, None, extract(Replanning), policy_file)
    except (OverlayError, PolicyError) as error:
        raise AgainstError(f"--against {old}: {error}") from None


def check_against(session: VerifySession, old: str, policy_file: str | None = None) -> CheckResult:
    """What changed between OLD (a policy file, or a git revision of the repository
    holding ``policy_file``, else of the current directory) and this policy."""
    from replan.spec.declaration import Replanning
    from replan.spec.model import extract
    from replan.verification.engines.prove.engine import decision_difference, policy_changes
    from replan.verification.report.diagram.overlays import load_old

    current = extract(Replanning)
    old_machine = load_old(old, None, current, policy_file)
    changes = policy_changes(old_machine.policy, session.policy)
    witness = decision_difference(old_machine.policy, session.policy)
    details: dict[str, Any] = {
        "old": old_machine.name,
        "policy_changes": changes,
        "commit_decision": None if witness is None else witness.to_json(),
    }
    lines = [f"compared with {old_machine.name}"]
    lines += [
        f"{text}: {', '.join(changes[key])}" for key, text in POLICY_CHANGE_LINES if changes[key]
    ]
    shrunk = any(changes[k] for k in changes if k != "requires_changed")
    over = " over the shared keys and completing steps" if shrunk else ""
    lines.append(
        f"commit decisions: identical for every evidence assignment{over} (z3)"
        if witness is None
        else f"commit decisions differ{over}: {witness.text()}"
    )
    summary = "; ".join(lines)
    behaviour = _behaviour(session, old_machine)
    details["behaviour"] = behaviour
    lines += [
        f"{text}: {', '.join(behaviour[key])}" for key, text in BEHAVIOUR_LINES if behaviour[key]
    ]
    if "states" in behaviour:
        lines.append(f"reachable states (this version): {behaviour['states']['new']:,}")
    _draw_diff(session, old_machine, current, details)
    session.report.against_lines = lines
    return CheckResult("against", "passed", summary, details=details)


def _behaviour(session: VerifySession, old_machine: Any) -> dict[str, Any]:
    """Behaviours only one version has: the declared transitions each version can
    fire, and the stop reasons they enter. Decided by reading the guards under each
    policy and asking z3 of the rest (``can_fire``), the same question for both: no
    second search of the old version's states, so a large policy's comparison costs
    seconds, not another exploration."""
    session.progress("against: which declared transitions each version can fire (z3) ...")
    old = can_fire(old_machine.policy, old_machine.model, old_machine.model_class)
    session.progress("against: the old version done, now this one ...")
    subject = session.subject
    new = can_fire(session.policy, subject.model, subject.model_class)
    behaviour: dict[str, Any] = {
        "transitions_only_old": sorted(old.transitions - new.transitions),
        "transitions_only_new": sorted(new.transitions - old.transitions),
        "stop_reasons_only_old": sorted(old.stop_reasons - new.stop_reasons),
        "stop_reasons_only_new": sorted(new.stop_reasons - old.stop_reasons),
        "decided_by": "the guards under each policy, then z3 from the states the "
        "invariants allow (no second exploration)",
    }
    if session.explored is not None:
        behaviour["states"] = {"new": session.explored.states}
    return behaviour


@dataclass(frozen=True)
class Firing:
    """What one version can do: the declared transitions that can fire, and the stop
    reasons they enter."""

    transitions: frozenset[str]
    stop_reasons: frozenset[str]


def can_fire(policy: Policy, model: MachineModel, model_class: type) -> Firing:
    """The declared transitions of ``model`` that can fire under ``policy``: those a
    reading of the guards does not switch off (``liveness``), less those z3 shows no
    step fires from any state the invariants allow (``prove.cannot_fire``)."""
    from replan.verification.core.liveness import liveness, stop_reasons_entered
    from replan.verification.engines.prove.engine import cannot_fire

    labels = [t.label for t in model.transitions]
    dead = dict(liveness(model_class, policy, labels).not_live)
    candidates = [label for label in labels if label not in dead]
    dead.update(cannot_fire(policy, candidates, model, model_class))
    final = {state.id: str(state.value) for state in model.states if state.final}
    return Firing(
        frozenset(label for label in labels if label not in dead),
        frozenset(stop_reasons_entered(labels, dead, final)),
    )


def _draw_diff(
    session: VerifySession, old_machine: Any, current: Any, details: dict[str, Any]
) -> None:
    """The diagram diff: Mermaid in the report, SVG beside it where Graphviz is."""
    from replan.verification.report.diagram import render
    from replan.verification.report.diagram.dot import dot_available
    from replan.verification.report.diagram.graph import diff
    from replan.verification.runtime.files import write_atomically

    diagram = diff(
        old_machine.model,
        old_machine.policy,
        current,
        session.policy,
        old_machine.name,
        old_machine.model_class,
    )
    session.report.diff_mermaid = render(diagram, "mermaid").decode()
    if dot_available():
        target = session.evidence / "diff.svg"
        write_atomically(target, render(diagram, "svg"))
        details["diagram"] = str(target)
