"""Arguments a state derives, stated for the kernel: the calls whose arguments
``spec.inputs`` takes from the run's state (approve's plan id and digest, charge's
amounts) and the plan ids a state offers, each as a fixed call whose fields may be
terms over the state, offered under a condition over the state.

Why: the kernel generates one function per call, so its calls must be the same in
every state; the explorer's are not (``spec.inputs``: an approval of the pending plan's
digest only while a plan is pending, a charge of what remains of a budget, one plan id
of each kind the run mentions). Stating each candidate once as a template (a field is
a constant, or a term over the state as a proposed plan's revision already is) with
the condition under which a state offers it gives, state by state, exactly the
arguments ``spec.inputs`` and the domains give: the kernel evaluates a call only where
its condition holds and counts only those transitions. ``tests/test_kernel_derived.py``
checks the two agree on reachable states.

Every derivation has two readings, kept side by side here: the concrete one (a run's
state gives the value, or says whether the call is offered), used to replay the
kernel's counterexamples on the controller, and the z3 one (a term over the step
relation's pre-state), which the translation substitutes and lowers.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import z3  # type: ignore[import-untyped]

import replan.controller.records as records
from replan.controller.policy import Policy
from replan.controller.records import RECORD_KINDS, plan_digest
from replan.spec import inputs
from replan.verification.translate.symbolic import IdSet, Opt, Record, Universe

#: The digests as z3 values: a string is one positive int per value
#: (``Universe.intern``), so a negative one is a digest no name in the domains equals
#: (a plan's digest is never empty, never an id); the two differ from each other.
_DIGESTS = {"pending digest": -1, "other digest": -2}
#: the value a concrete argument holds in a field the state derives, for the input
#: checks the translation pins (a non-empty string, a positive amount: well formed)
PLACEHOLDER: dict[type, Any] = {str: "derived from the state", int: 1}


@dataclass(frozen=True)
class Derivation:
    """A field's value as a function of the state: ``"pending digest"`` (the pending
    plan's digest), ``"other digest"`` (a digest of no plan: ``inputs.NEVER``), or
    ``"remaining"`` (what is left of ``budget``: (the policy's limit, the run's
    field counting what was charged))."""

    name: str
    budget: tuple[str, str] | None = None

    def value(self, run: Any) -> Any:
        if self.name == "pending digest":
            return plan_digest(run.pending)
        if self.name == "other digest":
            return inputs.NEVER
        assert self.budget is not None
        limit, used = self.budget
        return int(getattr(run.policy, limit)) - int(getattr(run, used))

    def term(self, pre: dict[str, Any], u: Universe) -> z3.ExprRef:
        if self.name in _DIGESTS:
            return z3.IntVal(_DIGESTS[self.name])
        assert self.budget is not None
        limit, used = self.budget
        return u.limits[limit] - pre[used]

    def facts(self, pre: dict[str, Any]) -> list[tuple[z3.ExprRef, z3.ExprRef]]:
        """What else the translation substitutes for this field: for a digest, the
        pending plan's digest as the body computes it (an ``@opaque`` call) becomes
        the value standing for it."""
        if self.name in _DIGESTS:
            return [(_digest_term(pre), z3.IntVal(_DIGESTS["pending digest"]))]
        return []


@dataclass(frozen=True)
class Condition:
    """When a state offers a call: ``"pending"`` (a plan is pending), ``"remaining"``
    (``budget`` is not used up), ``"one of its kind"`` (``plan_id`` is the first id of
    ``order`` of its kind among those the run mentions: accepted, completed, pending),
    or ``"one of its kind or the first unmentioned"`` (that, or the first id of
    ``order`` the run does not mention)."""

    name: str
    plan_id: str = ""
    order: tuple[str, ...] = ()
    budget: tuple[str, str] | None = None

    def holds(self, run: Any) -> bool:
        if self.name == "pending":
            return run.pending is not None
        if self.name == "remaining":
            assert self.budget is not None
            limit, used = self.budget
            return int(getattr(run.policy, limit)) - int(getattr(run, used)) > 0
        kinds = _kinds_of(run, self.order)
        representative = _representative(kinds, self.order, self.plan_id)
        if self.name == "one of its kind":
            return representative
        unmentioned = [
            plan_id for plan_id, kind in zip(self.order, kinds, strict=True) if not any(kind)
        ]
        return representative or unmentioned[:1] == [self.plan_id]

    def term(self, pre: dict[str, Any], u: Universe) -> z3.BoolRef:
        if self.name == "pending":
            pending: Opt = pre["_pending"]
            return pending.some
        if self.name == "remaining":
            assert self.budget is not None
            limit, used = self.budget
            return u.limits[limit] - pre[used] > 0
        kinds = [_kind_term(pre, u.intern(plan_id)) for plan_id in self.order]
        mentioned = [z3.Or(*kind) for kind in kinds]
        at = self.order.index(self.plan_id)
        same = [
            z3.Not(
                z3.And(mentioned[j], *(a == b for a, b in zip(kinds[j], kinds[at], strict=True)))
            )
            for j in range(at)
        ]
        representative = z3.And(mentioned[at], *same)
        if self.name == "one of its kind":
            return representative
        first_unmentioned = z3.And(z3.Not(mentioned[at]), *(mentioned[j] for j in range(at)))
        return z3.Or(representative, first_unmentioned)


#: A call's template: its argument (placeholders where the state derives a field), the
#: fields the state derives, and the conditions under which a state offers it.
Template = tuple[Any, tuple[tuple[str, Derivation], ...], tuple[Condition, ...]]
#: One field's candidates: (value, its derivation or None, conditions).
_Candidate = tuple[Any, Derivation | None, tuple[Condition, ...]]


def templates(parameter_type: str, policy: Policy, pool: Sequence[str]) -> list[Template]:
    """Every template of an event whose argument is a ``parameter_type`` record, with
    plan ids from ``pool``: in each state, the ones offered are exactly
    ``inputs.arguments(parameter_type, run)``. A ``ValueError`` for a record with a
    field whose candidates are not stated here."""
    record = getattr(records, parameter_type)
    kinds = RECORD_KINDS[parameter_type]
    choices = [_candidates(kinds[field], policy, pool) for field in record._fields]
    out: list[Template] = []
    for combination in itertools.product(*choices):
        argument = record(*(value for value, _, _ in combination))
        derived = tuple(
            (field, derivation)
            for field, (_, derivation, _) in zip(record._fields, combination, strict=True)
            if derivation is not None
        )
        offered = tuple(c for _, _, conditions in combination for c in conditions)
        out.append((argument, derived, offered))
    return out


def _candidates(kind: str, policy: Policy, pool: Sequence[str]) -> list[_Candidate]:
    """``inputs.CANDIDATES[kind]`` as templates."""
    if kind == "plan id":
        order = tuple(sorted(pool))  # inputs.plan_ids takes the first of a kind this way
        return [
            *((plan_id, None, (Condition("one of its kind", plan_id, order),)) for plan_id in pool),
            (inputs.NEVER, None, ()),
        ]
    if kind == "digest":
        return [
            (PLACEHOLDER[str], Derivation("pending digest"), (Condition("pending"),)),
            (inputs.NEVER, Derivation("other digest"), ()),
        ]
    if kind in inputs.BUDGETS:
        budget = inputs.BUDGETS[kind]
        if getattr(policy, budget[0]) == 0:
            return [(1, None, ())]
        return [
            (0, None, ()),
            (
                PLACEHOLDER[int],
                Derivation("remaining", budget),
                (Condition("remaining", budget=budget),),
            ),
        ]
    raise ValueError(
        f"arguments of kind {kind!r} depend on the state in a way the kernel does not state "
        "(verification/translate/derived.py); --engine python takes them"
    )


def _kinds_of(run: Any, order: Sequence[str]) -> list[tuple[bool, bool, bool]]:
    pending = run.pending
    return [
        (
            plan_id in run._accepted,
            plan_id in run._completed,
            pending is not None and pending.id == plan_id,
        )
        for plan_id in order
    ]


def _representative(
    kinds: list[tuple[bool, bool, bool]], order: Sequence[str], plan_id: str
) -> bool:
    at = order.index(plan_id)
    return any(kinds[at]) and all(kinds[j] != kinds[at] for j in range(at))


def _kind_term(pre: dict[str, Any], number: int) -> tuple[z3.BoolRef, z3.BoolRef, z3.BoolRef]:
    accepted: IdSet = pre["_accepted"]
    completed: IdSet = pre["_completed"]
    pending: Opt = pre["_pending"]
    plan: Record = pending.value
    identifier = z3.IntVal(number)
    return (
        z3.Select(accepted.array, identifier),
        z3.Select(completed.array, identifier),
        z3.And(pending.some, plan.fields["id"] == identifier),
    )


def _digest_term(pre: dict[str, Any]) -> z3.ExprRef:
    """``plan_digest`` of the pending plan, as the translator states an ``@opaque``
    call: an uninterpreted function of the plan's fields (one int per digest)."""
    pending: Opt = pre["_pending"]
    plan: Record = pending.value
    fields = [plan.fields[name] for name in plan.fields]
    function = z3.Function(plan_digest.__name__, *(t.sort() for t in fields), z3.IntSort())
    return function(*fields)
