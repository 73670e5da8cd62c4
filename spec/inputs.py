"""What an event's argument can be, by kind: the explorer's and the campaign's inputs
for an event that no hand-written domain or rule covers.

Owns ``CANDIDATES``: for each kind of value a record field holds
(``controller.records.RECORD_KINDS``), the values worth trying in a given state of a
run, the common valid ones first (Hypothesis shrinks towards the first). A ``str``
parameter is a plan id. ``arguments(parameter_type, run)`` combines them into every
argument of an event. The explorer tries all of them in every state; the campaign
draws among them. So a new event, or a new state that events reach, is explored and
sampled without tuning; a new kind of value is one entry here.

Plan ids are interchangeable (the contract only compares them for equality): one id
of each kind the run mentions (accepted, completed, pending) and one it does not is
every case there is.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import replan.controller.records as _records_module
from replan.controller.records import RECORD_KINDS, EvidenceState, plan_digest
from replan.controller.run import Run

#: A value no run ever holds (an id never proposed, a name the policy lacks).
NEVER = "never-seen"


def plan_ids(run: Run) -> tuple[str, ...]:
    """One id of each kind the run mentions, then one it does not."""
    pending = run.pending
    mentioned = {*run._accepted, *run._completed, *(() if pending is None else (pending.id,))}
    kinds: dict[tuple[bool, bool, bool], str] = {}
    for plan_id in sorted(mentioned):
        kind = (
            plan_id in run._accepted,
            plan_id in run._completed,
            pending is not None and plan_id == pending.id,
        )
        kinds.setdefault(kind, plan_id)
    ordered = sorted(kinds.values(), key=lambda i: (pending is None or i != pending.id, i))
    return (*ordered, NEVER)


def keys(run: Run) -> tuple[str, ...]:
    return (*run.policy.keys, NEVER)


def steps(run: Run) -> tuple[str, ...]:
    return (*(s.name for s in run.policy.steps), NEVER)


def resources(run: Run) -> tuple[str, ...]:
    return (*run.policy.resources, NEVER)


def versions(run: Run) -> tuple[int, ...]:
    highest = max(run._latest_version.values(), default=0)
    return tuple(sorted({1, highest, highest + 1} - {0}))


def evidence(run: Run) -> tuple[EvidenceState, ...]:
    return (EvidenceState.PASSED, EvidenceState.FAILED, EvidenceState.UNKNOWN)


def sources(run: Run) -> tuple[str, ...]:
    return ("host",)


def revisions(run: Run) -> tuple[int, ...]:
    return (run.plan_revision + 1, run.plan_revision)


def evidence_revisions(run: Run) -> tuple[int, ...]:
    return (run.evidence_revision, run.evidence_revision - 1)


def digests(run: Run) -> tuple[str, ...]:
    """The pending plan's digest (what a person who read it approves), and one of no
    plan: an approval is right, or names other content."""
    pending = run.pending
    if pending is None:
        return (NEVER,)
    try:
        digest = _digest_of(pending, tuple(map(type, pending)))
    except TypeError:  # a field that cannot be hashed: computed, not remembered
        digest = plan_digest(pending)
    return (digest, NEVER)


@functools.lru_cache(maxsize=4096)
def _digest_of(plan: Any, types: tuple[type, ...]) -> str:
    """``plan_digest``, remembered: the explorer asks it of every state with a plan
    pending, and few plans are pending in many states. ``types`` keeps apart plans
    that compare equal but digest differently (a revision ``True`` against ``1``)."""
    return plan_digest(plan)


def _budget_amounts(limit: str, used: str) -> Callable[[Run], tuple[int, ...]]:
    """Under a limit: nothing, and the amount that reaches the limit exactly (a charge
    within the budget, and the one that exhausts it; z3 proves every other amount).
    Without one: a small amount, which the run does not count. Amounts in between
    would make the explorer walk every count up to the limit."""

    def amounts(run: Run) -> tuple[int, ...]:
        ceiling = getattr(run.policy, limit)
        if ceiling == 0:
            return (1,)
        remaining = ceiling - getattr(run, used)
        return (0, remaining) if remaining > 0 else (0,)

    return amounts


#: The budget each amount kind is charged against: (the policy's limit, the run's
#: field counting what was charged).
BUDGETS: dict[str, tuple[str, str]] = {
    "tokens": ("max_tokens", "_tokens"),
    "cost": ("max_cost", "_cost"),
    "elapsed ms": ("max_wall_ms", "_elapsed_ms"),
}

#: kind -> the values worth trying in a state of a run, the common valid ones first.
CANDIDATES: dict[str, Callable[[Run], tuple[Any, ...]]] = {
    "plan id": plan_ids,
    "key": keys,
    "step": steps,
    "resource": resources,
    "version": versions,
    "evidence": evidence,
    "source": sources,
    "revision": revisions,
    "evidence revision": evidence_revisions,
    "digest": digests,
    **{kind: _budget_amounts(*budget) for kind, budget in BUDGETS.items()},
}


def arguments(parameter_type: str | None, run: Run) -> tuple[Any, ...]:
    """Every argument of an event whose parameter has this type, in a state of a run:
    None for an event without one, the candidate plan ids for a ``str``, and for a
    record every combination of its fields' candidates."""
    if parameter_type is None:
        return (None,)
    if parameter_type == "str":
        return plan_ids(run)
    record = getattr(_records_module, parameter_type)
    kinds = RECORD_KINDS[parameter_type]
    missing = sorted({kinds[f] for f in record._fields} - set(CANDIDATES))
    if missing:
        raise KeyError(f"{parameter_type}: no candidates for {', '.join(missing)} (spec/inputs.py)")
    choices = tuple(CANDIDATES[kinds[field]](run) for field in record._fields)
    try:
        return _combinations(record, choices, _types_of(choices))
    except TypeError:  # a candidate that cannot be hashed: built, not remembered
        return tuple(record(*values) for values in itertools.product(*choices))


def _types_of(choices: tuple[tuple[Any, ...], ...]) -> tuple[tuple[type, ...], ...]:
    return tuple(tuple(map(type, candidates)) for candidates in choices)


@functools.lru_cache(maxsize=4096)
def _combinations(
    record: Any, choices: tuple[tuple[Any, ...], ...], types: tuple[tuple[type, ...], ...]
) -> tuple[Any, ...]:
    """Every record of these field candidates: many states share them, so they are
    built once (records are immutable). ``types`` keeps apart candidates that compare
    equal but are not the same argument (``True`` and ``1``)."""
    return tuple(record(*values) for values in itertools.product(*choices))
