"""Concrete runs as abstract states: a controller's state and an argument as z3
values, and formulas evaluated on them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import z3  # type: ignore[import-untyped]

from replan.controller.records import EvidenceState, Plan, StopReason
from replan.controller.run import Run
from replan.verification.translate.symbolic.universe import (
    CONTENT,
    EVIDENCE,
    FIELD_KINDS,
    RECORD_FIELDS,
    RECORD_TYPES,
    UNDECLARED,
    Domain,
    TranslationError,
    Universe,
)
from replan.verification.translate.symbolic.values import (
    Const,
    ContentMap,
    FMap,
    FSet,
    IdSet,
    Opt,
    Record,
    State,
    _blank_plan,
    empty_field,
)

# ---- concrete runs as abstract states ----------------------------------------------------


def abstract_value(u: Universe, kind: str, value: object) -> z3.ExprRef | None:
    """The z3 constant for a concrete value of a field of kind ``kind`` (None when the
    value has no counterpart, e.g. a malformed argument's field)."""
    if kind == "int":
        return z3.IntVal(value) if type(value) is int else None
    if kind == "name":
        return z3.IntVal(u.intern(value))
    domain = {
        "key": u.key,
        "step": u.step,
        "resource": u.resource,
        "evidence": u.evidence,
        "mode": u.mode,
    }[kind]
    if kind in ("key", "step", "resource"):
        if not isinstance(value, str):
            return None
        return _member(domain, value)
    if kind == "evidence" and not isinstance(value, EvidenceState):
        return None
    return domain.const(value)


def _member(domain: Domain, value: object) -> z3.ExprRef:
    found = domain.const(value)
    return domain.members[UNDECLARED] if found is None else found


def abstract_argument(u: Universe, event: str, value: object) -> Any:
    interface = u.model.interface[event]
    kind = interface.parameter_type
    if kind in RECORD_FIELDS:
        if not isinstance(value, RECORD_TYPES[kind]):
            return None
        return Record(
            kind,
            {
                name: abstract_value(u, k, getattr(value, name))
                for name, k in RECORD_FIELDS[kind].items()
            },
        )
    if kind == "str":
        return abstract_value(u, "name", value)
    return Const(None)


def abstract_run(u: Universe, run: Run, fields: Iterable[str] | None = None) -> State:
    """A concrete run's fields as z3 constants (the abstraction function); only
    ``fields`` when given (building every z3 term costs; a formula may need few)."""
    keys = list(u.policy.keys)

    def ids(values: Iterable[object]) -> IdSet:
        array = empty_field(u, "id set").array
        for plan_id in sorted(values, key=repr):
            array = z3.Store(array, z3.IntVal(u.intern(plan_id)), z3.BoolVal(True))
        return IdSet(array)

    def contents(value: Mapping[tuple[str, int], tuple[EvidenceState, str]]) -> ContentMap:
        array = empty_field(u, "contents").array
        for (key, version), (state, source) in sorted(value.items()):
            content = CONTENT.some(EVIDENCE.const(state), z3.IntVal(u.intern(source)))
            array = z3.Store(array, _member(u.key, key), z3.IntVal(version), content)
        return ContentMap(array)

    def pending(plan: Plan | None) -> Opt:
        if plan is None:
            return Opt(z3.BoolVal(False), _blank_plan(u))
        abstract = {
            name: abstract_value(u, kind, getattr(plan, name))
            for name, kind in RECORD_FIELDS["Plan"].items()
        }
        return Opt(z3.BoolVal(True), Record("Plan", abstract))

    unknown = EvidenceState.UNKNOWN

    def build(name: str) -> Any:
        kind = FIELD_KINDS[name]
        value = getattr(run, name)
        if kind == "mode":
            return u.mode.const(value)
        if kind == "int":
            return z3.IntVal(value)
        if kind == "plan?":
            return pending(value)
        if kind == "contents":
            return contents(value)
        if kind == "key->int":
            return FMap(
                u.key, {k: Opt(z3.BoolVal(k in value), z3.IntVal(value.get(k, 0))) for k in keys}
            )
        if kind == "key->evidence":
            return FMap(
                u.key,
                {
                    k: Opt(z3.BoolVal(k in value), EVIDENCE.const(value.get(k, unknown)))
                    for k in keys
                },
            )
        if kind == "key set":
            return FSet(u.key, {k: z3.BoolVal(k in value) for k in keys})
        if kind == "id set":
            return ids(value)
        raise TranslationError(f"no abstraction of a {kind} field")

    wanted = FIELD_KINDS if fields is None else fields
    return {name: build(name) for name in wanted}


def concrete_key(run: Run, name: str) -> object:
    """A hashable rendering of one field's concrete value: equal keys, equal
    abstractions (what memoised evaluation of a formula on runs relies on)."""
    value = getattr(run, name)
    if isinstance(value, dict):
        return tuple(sorted(value.items(), key=repr))
    if isinstance(value, set | frozenset):
        return tuple(sorted(value, key=repr))
    return (type(value).__name__, value)


class FormulaOnRuns:
    """A formula over a fresh state's variables (and free inputs), evaluated on
    concrete runs: the run's abstraction substituted into it, simplified to a
    constant. Memoised by the concrete values of the fields the formula mentions, of
    which it is a function, so evaluating thousands of runs stays cheap."""

    def __init__(self, universe: Universe, state: State, formula: z3.BoolRef) -> None:
        self.universe = universe
        self.state = state
        self.formula = formula
        self.fields = mentioned_fields(state, formula)
        self._memo: dict[object, bool] = {}

    def __call__(self, run: Run, extra: Iterable[tuple[z3.ExprRef, bool | int]] = ()) -> bool:
        extra = list(extra)
        key = (
            tuple(concrete_key(run, name) for name in self.fields),
            tuple((str(term), value) for term, value in extra),
        )
        if key not in self._memo:
            substitution = pairs(self.state, abstract_run(self.universe, run, self.fields))
            for term, value in extra:
                constant = z3.BoolVal(value) if isinstance(value, bool) else z3.IntVal(value)
                substitution.append((term, constant))
            value = z3.simplify(z3.substitute(self.formula, *substitution))
            if not (z3.is_true(value) or z3.is_false(value)):
                value = _decide_closed(value)  # free variables: valid for all values?
            self._memo[key] = z3.is_true(value)
        return self._memo[key]


def _decide_closed(formula: z3.BoolRef) -> z3.BoolRef:
    """Whether a formula over constants and free variables (``any_version``) holds
    for every value of the free variables, decided by the solver."""
    solver = z3.Solver()
    solver.add(z3.Not(formula))
    verdict = solver.check()
    if verdict == z3.unknown:
        raise AssertionError(f"z3 cannot decide {formula} ({solver.reason_unknown()})")
    return z3.BoolVal(verdict == z3.unsat)


def free_constants(term: z3.ExprRef) -> set[str]:
    """The names of the uninterpreted constants a term mentions."""
    seen: set[int] = set()
    found: set[str] = set()
    stack = [term]
    while stack:
        node = stack.pop()
        key = node.get_id()
        if key in seen:
            continue
        seen.add(key)
        if z3.is_const(node) and node.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            found.add(node.decl().name())
        stack.extend(node.children())
    return found


def mentioned_fields(state: State, term: z3.ExprRef) -> list[str]:
    """The fields of a fresh state whose variables ``term`` mentions."""
    names = free_constants(term)
    wanted = []
    for name in FIELD_KINDS:
        variables = {str(v) for v, _ in _variables(state[name])}
        if variables & names:
            wanted.append(name)
    return wanted


def _variables(value: Any) -> list[tuple[z3.ExprRef, None]]:
    if isinstance(value, z3.ExprRef):
        return [(value, None)]
    if isinstance(value, Opt):
        return _variables(value.some) + _variables(value.value)
    if isinstance(value, Record):
        return [p for v in value.fields.values() for p in _variables(v)]
    if isinstance(value, FMap):
        return [p for v in value.entries.values() for p in _variables(v)]
    if isinstance(value, FSet):
        return [p for v in value.members.values() for p in _variables(v)]
    if isinstance(value, IdSet | ContentMap):
        return [(value.array, None)]
    return []


def pairs(symbolic: Any, concrete: Any) -> list[tuple[z3.ExprRef, z3.ExprRef]]:
    """(variable, constant) pairs matching a fresh symbolic value to a concrete one,
    for ``z3.substitute`` (a None plan's or absent entry's fields are left out)."""
    if isinstance(symbolic, dict):
        return [p for name in concrete for p in pairs(symbolic[name], concrete[name])]
    if isinstance(symbolic, z3.ExprRef):
        return [] if concrete is None else [(symbolic, concrete)]
    if isinstance(symbolic, Opt):
        found = pairs(symbolic.some, concrete.some)
        if z3.is_true(concrete.some):
            found += pairs(symbolic.value, concrete.value)
        return found
    if isinstance(symbolic, Record):
        return [p for n in symbolic.fields for p in pairs(symbolic.fields[n], concrete.fields[n])]
    if isinstance(symbolic, FMap):
        return [
            p for k in symbolic.entries for p in pairs(symbolic.entries[k], concrete.entries[k])
        ]
    if isinstance(symbolic, FSet):
        return [
            p for k in symbolic.members for p in pairs(symbolic.members[k], concrete.members[k])
        ]
    if isinstance(symbolic, IdSet | ContentMap):
        return [(symbolic.array, concrete.array)]
    if isinstance(symbolic, Const):
        return []
    raise TranslationError(f"cannot pair {symbolic!r}")


def stop_reason_mode(u: Universe, reason: StopReason) -> z3.ExprRef:
    found = u.mode.const(reason)
    assert found is not None
    return found
