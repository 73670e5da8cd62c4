"""Which declared transitions can fire under a policy, and what they answer.

Owns the one analysis the campaign's coverage targets and the explorer's report both
read. A declared transition is

- **dead** when no assignment of its guard names makes it fire: its guard can never
  hold, or an earlier transition of the same state and event always fires first
  (priority order, read as a formula over guard names);
- **disabled by the policy** when only the guards that read nothing but the policy
  (constants under it: ``counts_duplicates`` under ``count_duplicate_deliveries =
  true``) make it impossible: configuration, not a defect;
- **out of reach** when the state it leaves cannot be entered under the policy (no
  transition that can fire leads there from the initial state);
- **live** otherwise.

``answers`` gives the answers the live transitions of an event (and a stopped run)
can give, read from the actions' ``return`` statements, so that a result only a
switched-off feature produces (an approval under a policy with none) is not a target.
Works from transition labels and a run class, so a mutant's own transitions are
judged (``verification/subjects/mutants.py``).
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from replan.controller.fields import FIELDS, OPTIONAL_PLAN
from replan.controller.policy import Policy
from replan.controller.records import Plan
from replan.spec import bodies
from replan.spec.model import parse_guard

LABEL = re.compile(r"^(?P<source>\S+) --(?P<event>\w+)(?:\[(?P<cond>.*)\])?--> (?P<target>\S+)$")
INITIAL = next(f.initial for f in FIELDS if f.attribute == "_declared_state")


@dataclass(frozen=True)
class _Transition:
    label: str
    source: str
    event: str
    target: str
    guard: ast.expr | None


@dataclass
class Liveness:
    """label -> why, for every transition that cannot fire under one policy."""

    dead: dict[str, str] = field(default_factory=dict)
    disabled: dict[str, str] = field(default_factory=dict)
    out_of_reach: dict[str, str] = field(default_factory=dict)

    @property
    def not_live(self) -> dict[str, str]:
        return {**self.dead, **self.disabled, **self.out_of_reach}

    @property
    def switched_off(self) -> dict[str, str]:
        """What the policy rules out (disabled, or leaving a state it never enters)."""
        return {**self.disabled, **self.out_of_reach}


def _parse(labels: Iterable[str]) -> list[_Transition]:
    parsed = []
    for label in labels:
        match = LABEL.match(label)
        if match is None:
            raise ValueError(f"{label!r} is not a transition label")
        guard = parse_guard(match["cond"]) if match["cond"] else None
        parsed.append(_Transition(label, match["source"], match["event"], match["target"], guard))
    return parsed


def _reads_only_policy(function: Any, *fields: str) -> bool:
    """Whether a guard is ``return <expression over self.policy only>`` (no calls, no
    parameters, no other field but ``fields``, read as ``self.<field>.<attribute>``):
    under a given policy it is a constant, or a function of those fields."""
    definition = bodies.definition(function)
    if definition is None or len(definition.args.args) != 1:
        return False
    expression = bodies.returned_expression(definition)
    if expression is None:
        return False
    parents = {child: node for node in ast.walk(expression) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(expression):
        if isinstance(node, ast.Call | ast.Lambda | ast.NamedExpr):
            return False
        if isinstance(node, ast.Name):
            if node.id != definition.args.args[0].arg:
                return False
            parent = parents.get(node)
            if not (isinstance(parent, ast.Attribute) and parent.attr in ("policy", *fields)):
                return False
            if parent.attr in fields and not isinstance(parents.get(parent), ast.Attribute):
                return False
    return True


def step_guards(model_class: type, policy: Policy, names: Iterable[str]) -> dict[str, list[bool]]:
    """Guard name -> its value for each step of the policy, in order, for the guards
    that read nothing but the policy and the pending plan's fields (``needs_approval``,
    ``completes_run``): under a policy they are functions of the pending step."""
    instance = model_class(policy)
    pending = next(f for f in FIELDS if f.kind is OPTIONAL_PLAN).attribute
    found: dict[str, list[bool]] = {}
    for name in sorted(names):
        function = getattr(model_class, name, None)
        if function is None or not _reads_only_policy(function, pending):
            continue
        values = []
        for step in policy.steps:
            setattr(instance, pending, Plan("p", 1, 1, step.name, policy.resources[0]))
            values.append(bool(function(instance)))
        found[name] = values
    return found


def policy_switches(model_class: type, policy: Policy, labels: Iterable[str]) -> dict[str, bool]:
    """Guard name -> its constant value under ``policy``, for every guard of these
    transitions that reads nothing but the policy."""
    names = sorted(
        {
            node.id
            for t in _parse(labels)
            if t.guard is not None
            for node in ast.walk(t.guard)
            if isinstance(node, ast.Name)
        }
    )
    instance = model_class(policy)
    switches: dict[str, bool] = {}
    for name in names:
        function = getattr(model_class, name, None)
        if function is not None and _reads_only_policy(function):
            switches[name] = bool(function(instance))  # a body, read on its class
    return switches


def _satisfiable(trees: Sequence[tuple[ast.expr | None, bool]], fixed: Mapping[str, bool]) -> bool:
    """Whether some assignment of the guard names (those in ``fixed`` held at their
    values) makes every (tree, wanted) pair evaluate to ``wanted``; None = always."""
    names = sorted(
        {
            node.id
            for tree, _ in trees
            if tree is not None
            for node in ast.walk(tree)
            if isinstance(node, ast.Name) and node.id not in fixed
        }
    )
    compiled = [
        (None if tree is None else compile(ast.Expression(tree), "<guard>", "eval"), wanted)
        for tree, wanted in trees
    ]
    for values in itertools.product((False, True), repeat=len(names)):
        assignment = {**fixed, **dict(zip(names, values, strict=True))}
        if all(
            (True if code is None else bool(eval(code, {"__builtins__": {}}, assignment))) == wanted
            for code, wanted in compiled
        ):
            return True
    return False


def liveness(model_class: type, policy: Policy, labels: Sequence[str]) -> Liveness:
    """The status of each of the transitions ``labels`` (in priority order per state
    and event) with the bodies of ``model_class`` under ``policy``."""
    switches = policy_switches(model_class, policy, labels)
    parsed = _parse(labels)
    names = {
        n.id
        for t in parsed
        if t.guard is not None
        for n in ast.walk(t.guard)
        if isinstance(n, ast.Name)
    }
    by_step = step_guards(model_class, policy, names - set(switches))
    # one assignment of the policy's constants per step the pending plan can name
    settings = [
        {**switches, **{name: values[index] for name, values in by_step.items()}}
        for index in range(len(policy.steps) if by_step else 1)
    ]
    found = Liveness()
    for position, transition in enumerate(parsed):
        earlier = [
            (t.guard, False)
            for t in parsed[:position]
            if (t.source, t.event) == (transition.source, transition.event)
        ]
        formula = [(transition.guard, True), *earlier]
        if any(tree is None for tree, _ in earlier):
            found.dead[transition.label] = (
                "an earlier transition of the same state and event always fires"
            )
        elif not _satisfiable(formula, {}):
            found.dead[transition.label] = "its guard can never hold"
        elif not any(_satisfiable(formula, fixed) for fixed in settings):
            found.disabled[transition.label] = _why_disabled(formula, switches, by_step)
    found.out_of_reach.update(_out_of_reach(parsed, found))
    return found


def _why_disabled(
    formula: list[tuple[Any, bool]],
    switches: Mapping[str, Any],
    by_step: Mapping[str, Sequence[Any]],
) -> str:
    """Why the policy switches a transition off: each policy constant its guard (or
    an earlier one's) reads, with the value the policy gives it."""
    used = sorted(
        {
            node.id
            for tree, _ in formula
            if tree is not None
            for node in ast.walk(tree)
            if isinstance(node, ast.Name) and (node.id in switches or node.id in by_step)
        }
    )
    return "; ".join(
        f"{name} is always {switches[name]} under this policy"
        if name in switches
        else f"{name} is {', '.join(map(str, by_step[name]))} for the policy's steps, in order"
        for name in used
    )


def _out_of_reach(parsed: Sequence[_Transition], found: Liveness) -> dict[str, str]:
    """The transitions that could fire but leave a state nothing that can fire
    enters (from the initial state)."""
    out: dict[str, str] = {}
    can_fire = [t for t in parsed if t.label not in found.dead and t.label not in found.disabled]
    entered = {INITIAL}
    growing = True
    while growing:
        reached = {t.target for t in can_fire if t.source in entered}
        growing = not reached <= entered
        entered |= reached
    for t in can_fire:
        if t.source not in entered:
            out[t.label] = f"nothing that can fire under this policy enters {t.source}"
    return out


def stop_reasons_entered(
    labels: Iterable[str], not_live: Mapping[str, str], final: Mapping[str, str]
) -> set[str]:
    """The stop reasons (``final``: final state id -> reason) that a transition of
    ``labels`` able to fire enters: no ``BudgetExhausted`` under a policy that sets
    no budget. Coverage targets and the explorer's report both ask this."""
    return {
        final[t.target] for t in _parse(labels) if t.target in final and t.label not in not_live
    }


def returned_members(function: Any, enumeration: type[Enum]) -> set[str]:
    """The members of ``enumeration`` a function's ``return`` statements name."""
    tree = bodies.definition(function)
    if tree is None:
        return {str(member) for member in enumeration}  # unknown: every one
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and node.value is not None:
            for part in ast.walk(node.value):
                if (
                    isinstance(part, ast.Attribute)
                    and isinstance(part.value, ast.Name)
                    and part.value.id == enumeration.__name__
                    and part.attr in enumeration.__members__
                ):
                    found.add(str(enumeration.__members__[part.attr]))
    return found


def answers(
    model_class: type,
    actions: Mapping[str, str],
    when_stopped: str,
    live: Iterable[str],
    enumeration: type[Enum],
) -> tuple[str, ...]:
    """The members of ``enumeration`` an event can answer: those its live
    transitions' actions (``actions``: label -> action) and its answer in a stopped
    run return, in the enumeration's order."""
    found = returned_members(getattr(model_class, when_stopped), enumeration)
    for label in live:
        found |= returned_members(getattr(model_class, actions[label]), enumeration)
    return tuple(str(member) for member in enumeration if str(member) in found)
