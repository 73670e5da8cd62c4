"""Symbolic states: fresh ones, the initial state, and what two states share."""

from __future__ import annotations

import ast
from collections.abc import Callable

import z3  # type: ignore[import-untyped]

from replan.controller.run import Run
from replan.verification.translate.symbolic.runs import abstract_run
from replan.verification.translate.symbolic.terms import _definition, _self_field
from replan.verification.translate.symbolic.translator import Translator
from replan.verification.translate.symbolic.universe import (
    CONTENT,
    EVIDENCE,
    FIELD_KINDS,
    RECORD_FIELDS,
    TranslationError,
    Universe,
)
from replan.verification.translate.symbolic.values import (
    Const,
    ContentMap,
    FMap,
    Frame,
    FSet,
    IdSet,
    LazyEntries,
    Opt,
    Record,
    State,
    _where,
)

# ---- states ------------------------------------------------------------------------------


def _fresh_entry(label: str, sort: z3.SortRef) -> Callable[[str], Opt]:
    def make(key: str) -> Opt:
        return Opt(z3.Bool(f"{label}[{key}]?"), z3.Const(f"{label}[{key}]", sort))

    return make


def fresh_record(u: Universe, kind: str, prefix: str) -> Record:
    return Record(
        kind,
        {
            name: z3.Const(f"{prefix}.{name}", u.kind_sort(k))
            for name, k in RECORD_FIELDS[kind].items()
        },
    )


def fresh_state(u: Universe, prefix: str) -> State:
    """A state whose every field is a fresh z3 constant (named ``prefix.field``)."""
    keys = list(u.policy.keys)
    state: State = {}
    for name, kind in FIELD_KINDS.items():
        label = f"{prefix}.{name.lstrip('_')}"
        if kind in ("int", "mode"):
            state[name] = z3.Const(label, u.kind_sort(kind))
        elif kind == "plan?":
            state[name] = Opt(z3.Bool(f"{label}?"), fresh_record(u, "Plan", label))
        elif kind == "key->int":
            state[name] = FMap(
                u.key,
                LazyEntries(keys, _fresh_entry(label, z3.IntSort())),
            )
        elif kind == "key->evidence":
            state[name] = FMap(
                u.key,
                LazyEntries(keys, _fresh_entry(label, EVIDENCE.sort)),
            )
        elif kind == "key set":
            state[name] = FSet(u.key, {k: z3.Bool(f"{label}[{k}]") for k in keys})
        elif kind == "id set":
            state[name] = IdSet(z3.Array(label, z3.IntSort(), z3.BoolSort()))
        elif kind == "contents":
            state[name] = ContentMap(z3.Array(label, u.key.sort, z3.IntSort(), CONTENT))
    return state


def initial_state(u: Universe, model_class: type = Run) -> State:
    """The state a fresh run of ``model_class`` is in (its ``__init__`` run, the policy
    the universe's), abstracted; checked against the declaration's initial state."""
    translator = Translator(u, model_class)
    definition = _definition(model_class, "__init__")
    _check_policy_kept(translator, definition, model_class)
    fresh = model_class(u.policy)
    missing = [name for name in FIELD_KINDS if not hasattr(fresh, name)]
    if missing:
        raise TranslationError(
            f"{model_class.__name__}.__init__ leaves {', '.join(missing)} unset "
            "(every field of controller/fields.py must be set)"
        )
    state = abstract_run(u, fresh)
    initial = next(s for s in u.model.states if s.initial)
    if not z3.is_true(z3.simplify(state["_declared_state"] == u.mode_of(initial.id))):
        raise TranslationError(
            f"{model_class.__name__}.__init__ does not start in the declaration's initial "
            f"state ({initial.id})"
        )
    return state


class _Given:
    """Stands for the policy a caller passes to ``__init__``."""


def _check_policy_kept(translator: Translator, definition: ast.FunctionDef, cls: type) -> None:
    """``__init__`` keeps the policy it is given, and takes the default for None: the
    z3 universe *is* that policy, so a body that swapped it would be invisible."""
    assignments = [
        s
        for s in definition.body
        if isinstance(s, ast.Assign | ast.AnnAssign) and _self_field(_target(s)) == "policy"
    ]
    parameters = [a.arg for a in definition.args.args]
    if len(assignments) != 1 or "policy" not in parameters or assignments[0].value is None:
        raise TranslationError(f"{cls.__name__}.__init__ must set self.policy once from `policy`")
    from replan.controller.policy import DEFAULT_POLICY

    given = _Given()
    for passed, expected in ((given, given), (None, DEFAULT_POLICY)):
        frame = Frame({}, {"policy": Const(passed)}, (), f"{cls.__name__}.__init__", frozenset())
        value = translator.eval(assignments[0].value, frame)
        if not (isinstance(value, Const) and value.value is expected):
            raise TranslationError(
                f"{cls.__name__}.__init__ does not keep the policy it is given "
                f"(with {'a policy' if passed is given else 'None'}: `{_where(assignments[0])}`)"
            )


def _target(statement: ast.Assign | ast.AnnAssign) -> ast.expr:
    return statement.targets[0] if isinstance(statement, ast.Assign) else statement.target
