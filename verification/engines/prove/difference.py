"""Comparing two policies: every difference between them by kind, and evidence on
which their commit decisions differ (``replan verify --against``).

``policy_changes`` reads the two policies alone; ``decision_difference`` asks z3 of
the two controllers' commit gates (``gate.py``) over what both policies share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import z3  # type: ignore[import-untyped]

from replan.controller.policy import Policy
from replan.controller.records import EvidenceState
from replan.controller.run import Run
from replan.spec.model import MachineModel
from replan.verification.engines.prove.gate import (
    commit_gate,
    declaration_model,
    evidence_assignment,
    minimal_model,
    render_assignment,
)
from replan.verification.translate.symbolic import (
    EVIDENCE,
)


@dataclass
class DecisionDifference:
    """Evidence on which two policies decide a commit differently."""

    step: str
    assignment: dict[str, str]
    old_commits: bool
    new_commits: bool
    #: keys one policy declares and the other does not, with their state in the
    #: witness (Unknown: never observed in the run of the policy that has them)
    own: dict[str, str] = field(default_factory=dict)

    def text(self) -> str:
        old = "commits" if self.old_commits else "refuses"
        new = "commits" if self.new_commits else "refuses"
        own = f" (of one policy only: {render_assignment(self.own)})" if self.own else ""
        shared = render_assignment(self.assignment)
        return f"{shared}{own}: {self.step}: old policy {old}, new policy {new}"

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "step": self.step,
            "assignment": self.assignment,
            "old": "commits" if self.old_commits else "refuses",
            "new": "commits" if self.new_commits else "refuses",
        }
        if self.own:
            document["own_keys"] = self.own
        return document


#: The limits of a policy, in the file's order, as ``policy_changes`` compares them.
_LIMITS = (
    "max_steps",
    "max_proposals",
    "no_progress_limit",
    "count_duplicate_deliveries",
    "max_tokens",
    "max_cost",
    "max_wall_ms",
    "currency",
)


def _limit_value(policy: Policy, name: str) -> str:
    """A limit as a change names it: a budget left out (0) and no currency are none."""
    value = getattr(policy, name)
    if value is True or value is False:
        return str(value).lower()
    if name in ("max_tokens", "max_cost", "max_wall_ms", "currency") and not value:
        return "none"
    return str(value)


def policy_changes(old: Policy, new: Policy) -> dict[str, list[str]]:
    """Every difference between two policies, by kind: the limits that changed (with
    both values); keys, resources and steps added and removed; the per-resource keys
    and the open slots; steps that complete the
    run under one of them only; of the steps both declare, changed prerequisites,
    approvals and resource arguments; the fixed workflow's keys; and lists that hold
    the same names in another order. Two policies whose normal forms differ differ in
    at least one of these (the commit decisions are compared over what both share,
    ``decision_difference``).

    Long: one table: an entry per kind of difference, each a short comprehension;
    splitting it would hide that the kinds are listed together, in the report's order.
    """
    old_steps = {s.name: s for s in old.steps}
    new_steps = {s.name: s for s in new.steps}
    shared = [s for s in new.steps if s.name in old_steps]

    def names(values: tuple[str, ...]) -> str:
        return ", ".join(values) or "nothing"

    def reordered(label: str, before: list[str], after: list[str]) -> list[str]:
        same = sorted(before) == sorted(after) and before != after
        return [f"{label}: {', '.join(before)} -> {', '.join(after)}"] if same else []

    return {
        "limits_changed": [
            f"{name}: {_limit_value(old, name)} -> {_limit_value(new, name)}"
            for name in _LIMITS
            if _limit_value(old, name) != _limit_value(new, name)
        ],
        "keys_added": [k for k in new.keys if k not in old.keys],
        "keys_removed": [k for k in old.keys if k not in new.keys],
        "resources_added": [r for r in new.resources if r not in old.resources],
        "resources_removed": [r for r in old.resources if r not in new.resources],
        "per_resource_changed": (
            [f"{names(old.per_resource)} -> {names(new.per_resource)}"]
            if old.per_resource != new.per_resource
            else []
        ),
        "open_changed": (
            [f"{names(old.open_resources)} -> {names(new.open_resources)}"]
            if old.open_resources != new.open_resources
            else []
        ),
        "steps_added": [s.name for s in new.steps if s.name not in old_steps],
        "steps_removed": [s.name for s in old.steps if s.name not in new_steps],
        "completes_only_new": [
            s.name for s in shared if s.completes_run and s.name not in old.terminal_steps
        ],
        "completes_only_old": [
            s.name
            for s in old.steps
            if s.completes_run and s.name in new_steps and s.name not in new.terminal_steps
        ],
        "requires_changed": [
            f"{s.name}: {names(old_steps[s.name].requires)} -> {names(s.requires)}"
            for s in shared
            if old_steps[s.name].requires != s.requires
        ],
        "approval_changed": [
            f"{s.name}: "
            + " -> ".join(
                "needs approval" if step.needs_approval else "no approval"
                for step in (old_steps[s.name], s)
            )
            for s in shared
            if old_steps[s.name].needs_approval != s.needs_approval
        ],
        "resource_argument_changed": [
            f"{s.name}: {old_steps[s.name].resource_argument or 'the one resource'} -> "
            f"{s.resource_argument or 'the one resource'}"
            for s in shared
            if old_steps[s.name].resource_argument != s.resource_argument
        ],
        "workflow_changed": (
            [f"ready_when_passed: {names(old.workflow_keys)} -> {names(new.workflow_keys)}"]
            if old.workflow_keys != new.workflow_keys
            else []
        ),
        "order_changed": [
            *reordered("evidence.keys", list(old.keys), list(new.keys)),
            *reordered("resources.allowed", list(old.resources), list(new.resources)),
            *reordered("steps", [s.name for s in old.steps], [s.name for s in new.steps]),
        ],
    }


def decision_difference(
    old: Policy,
    new: Policy,
    model: MachineModel | None = None,
    model_class: type = Run,
    *,
    old_model: MachineModel | None = None,
    old_model_class: type | None = None,
) -> DecisionDifference | None:
    """A (minimal) evidence assignment on which the old and the new policy's controller
    decide a commit plan differently, or None when z3 proves they never do, over what
    both share: the keys both declare, and the steps that complete the run under both
    (``policy_changes`` names the others). A key one policy declares and the other
    does not is first taken as never observed in that policy's run (Unknown, as the
    contract reads a key never observed), so a prerequisite added or removed with its
    key shows as the decision it changes; when no difference shows that way, in any
    state (one gate waiting on ``access``, the other on ``owner``: they differ when
    one is Passed). The witness gives the shared keys and, apart, those keys.
    ``model``/``model_class`` build the new controller's gate, ``old_model``/
    ``old_model_class`` the old one's (default: the same), so an older declaration or
    older bodies can be compared too."""
    model = model or declaration_model()
    builds = {
        "old": (old_model or model, old_model_class or model_class),
        "new": (model, model_class),
    }
    # Over what both policies share (``policy_changes`` reports the rest first): the
    # shared keys, the steps both let complete the run. A key of one policy only is
    # first asked never observed; when that shows no difference, any state.
    keys = [k for k in new.keys if k in old.keys]
    shared = {k: z3.Const(f"evidence[{k}]", EVIDENCE.sort) for k in keys}
    own_keys = [k for k in old.keys if k not in new.keys] + [
        k for k in new.keys if k not in old.keys
    ]
    own = {k: z3.Const(f"evidence[{k}]", EVIDENCE.sort) for k in own_keys}
    unknown = EVIDENCE.const(EvidenceState.UNKNOWN)
    steps = [s.name for s in new.steps if s.completes_run and s.name in old.terminal_steps]
    for never_observed in (True, False) if own else (True,):
        for step in steps:
            constraints, decisions = _both_gates(step, old, new, builds, {**shared, **own})
            if never_observed:
                constraints += [term == unknown for term in own.values()]
            constraints.append(decisions[0] != decisions[1])
            witness = minimal_model(constraints, {**shared, **own})
            if witness is None:
                continue
            return DecisionDifference(
                step,
                evidence_assignment(witness, shared),
                z3.is_true(witness.eval(decisions[0], model_completion=True)),
                z3.is_true(witness.eval(decisions[1], model_completion=True)),
                evidence_assignment(witness, own),
            )
    return None


def _both_gates(
    step: str,
    old: Policy,
    new: Policy,
    builds: dict[str, tuple[MachineModel, type]],
    evidence: dict[str, z3.ExprRef],
) -> tuple[list[z3.BoolRef], list[z3.BoolRef]]:
    """The old and the new policy's commit gates of ``step`` over one shared set of
    evidence terms: their premises (each gate's keys bound to ``evidence``) and
    whether each opens."""
    constraints: list[z3.BoolRef] = []
    decisions: list[z3.BoolRef] = []
    for label, policy in (("old", old), ("new", new)):
        declaration, bodies = builds[label]
        gate = commit_gate(policy, step, declaration, bodies, prefix=f"{label}.{step}.")
        constraints.append(gate.premise)
        constraints += [gate.evidence[k] == evidence[k] for k in policy.keys]
        decisions.append(gate.opens)
    return constraints, decisions
