"""Check ``against`` (``--against OLD``): what changed between an older policy or
declaration and this one. A change is information, not a failure: the other checks
judge safety."""

from __future__ import annotations

from typing import Any

from replan.controller.records import PolicyError
from replan.verification.pipeline.session import VerifySession
from replan.verification.report.records import CheckResult

#: The policy differences ``policy_changes`` names, as the check's lines say them.
POLICY_CHANGE_LINES = (
    ("limits_changed", "limits changed"),
    ("keys_added", "keys added"),
    ("keys_removed", "keys removed"),
    ("resources_added", "resources added"),
    ("resources_removed", "resources removed"),
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
#: What the explorer reaches under one version only, as the check's lines say it.
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
    states = behaviour["states"]
    lines.append(f"reachable states: {states['old']:,} -> {states['new']:,}")
    _draw_diff(session, old_machine, current, details)
    session.report.against_lines = lines
    return CheckResult("against", "passed", summary, details=details)


def _behaviour(session: VerifySession, old_machine: Any) -> dict[str, Any]:
    """Behaviours only one version has: declared transitions and stop reasons the
    explorer reaches under the old machine and policy versus the new."""
    from replan.spec.generator import load_controller
    from replan.verification.engines.explore.engine import explore

    old_controller = load_controller(old_machine.model, old_machine.model_class, "old")
    old_result = explore(old_machine.policy, implementation=old_controller)
    new_result = session.explored or explore(session.policy)
    old_fired, new_fired = set(old_result.fired), set(new_result.fired)
    old_stops = {k for k, v in old_result.stop_reasons.items() if v}
    new_stops = {k for k, v in new_result.stop_reasons.items() if v}
    return {
        "transitions_only_old": sorted(old_fired - new_fired),
        "transitions_only_new": sorted(new_fired - old_fired),
        "stop_reasons_only_old": sorted(old_stops - new_stops),
        "stop_reasons_only_new": sorted(new_stops - old_stops),
        "states": {"old": old_result.states, "new": new_result.states},
    }


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
