"""Small z3 term builders and the lookups the evaluator shares (a body's
definition, a guard inlined by the generator).
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

import z3  # type: ignore[import-untyped]

from replan.spec import bodies
from replan.spec.generator import Generator
from replan.spec.model import MachineModel
from replan.verification.translate.symbolic.universe import FIELD_KINDS, TranslationError, Universe
from replan.verification.translate.symbolic.values import (
    Const,
    ContentMap,
    FMap,
    FSet,
    IdSet,
    Opt,
    Record,
    State,
    _Bound,
    empty_field,
)

_OPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_BINOPS = {ast.Add: "+", ast.Sub: "-"}


def all_of(*parts: z3.BoolRef) -> z3.BoolRef:
    """``z3.And`` that is True when empty and the part itself when single (and skips
    z3py's per-argument coercion, which dominates for a policy of hundreds of keys)."""
    return _nary(z3.Z3_mk_and, parts, True)


def any_of(*parts: z3.BoolRef) -> z3.BoolRef:
    """``z3.Or`` that is False when empty and the part itself when single."""
    return _nary(z3.Z3_mk_or, parts, False)


def _nary(make: Any, parts: tuple[z3.BoolRef, ...], empty: bool) -> z3.BoolRef:
    if not parts:
        return z3.BoolVal(empty)
    if len(parts) == 1:
        return parts[0]
    context = parts[0].ctx
    array = (z3.Ast * len(parts))(*(p.as_ast() for p in parts))
    return z3.BoolRef(make(context.ref(), len(parts), array), context)


_NO_ENTRY = object()


def _entry_of(container: FSet | FMap, key: object) -> Any:
    """The member (``FSet``) or entry (``FMap``) of a concrete ``key``, False when the
    container has none, ``_NO_ENTRY`` for a key a dict cannot look up (unhashable):
    the disjunction over every key then decides."""
    members: Mapping[str, Any] = (
        container.members if isinstance(container, FSet) else container.entries
    )
    try:
        found = members.get(key)  # type: ignore[call-overload]
    except TypeError:
        return _NO_ENTRY
    return z3.BoolVal(False) if found is None else found


def _self_field(node: ast.AST) -> str | None:
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    ):
        return node.attr
    return None


def _sort_of(value: Any) -> z3.SortRef | None:
    return value.sort() if isinstance(value, z3.ExprRef) else None


@cache
def _guard_names(model: MachineModel) -> frozenset[str]:
    return frozenset(g for t in model.transitions for g in t.guard_names)


@cache
def _inlined_guard(model: MachineModel, model_class: type, index: int) -> ast.expr:
    """The transition's guard with every named guard's body inlined by the generator
    (what the generated controller evaluates), parsed once per declaration."""
    transition = model.transitions[index]
    tree = transition.guard_tree
    assert tree is not None
    return Generator(model, model_class).translate(tree, transition.event)


@cache
def _definition(model_class: type, name: str) -> ast.FunctionDef:
    """The body of ``model_class``'s method ``name`` (read once: the translator does
    not rewrite it)."""
    definition = bodies.definition(getattr(model_class, name))
    if definition is None:
        raise TranslationError(f"{name}: not a plain method whose source can be read")
    return definition


def _is_body_of_class(bound: _Bound) -> bool:
    """``bound`` is a function with readable source, read on a class (a body called
    through the bodies' class)."""
    receiver = bound.receiver
    if not isinstance(receiver, Const) or not isinstance(receiver.value, type):
        return False
    function = getattr(receiver.value, bound.name, None)
    return inspect.isfunction(function) and bodies.has_source(function)


@cache
def _function_definition(function: Callable[..., Any]) -> ast.FunctionDef:
    """A property's or a module function's body (read once)."""
    definition = bodies.definition(function)
    if definition is None:
        raise TranslationError(
            f"{function.__name__}: not a plain function whose source can be read"
        )
    return definition


def _decided(value: Any) -> Any:
    """A test whose outcome is already known, as a ``Const`` (Python then runs only
    the branch taken, and so does the translation)."""
    if isinstance(value, z3.BoolRef):
        simple = z3.simplify(value)
        if z3.is_true(simple) or z3.is_false(simple):
            return Const(z3.is_true(simple))
    return value


def _class_text(kind: object) -> str:
    """How a class reads in an input's text (``str``, ``Observation``)."""
    if isinstance(kind, tuple):
        return "(" + ", ".join(_class_text(k) for k in kind) + ")"
    name = getattr(kind, "__name__", None)
    if not isinstance(kind, type) or name is None:
        raise TranslationError(f"{kind!r} is not a class")
    return str(name)


def _empty(u: Universe, container: Any) -> z3.BoolRef:
    """The container holds nothing."""
    if isinstance(container, FMap):
        return all_of(*(z3.Not(e.some) for e in container.entries.values()))
    if isinstance(container, FSet):
        return all_of(*(z3.Not(m) for m in container.members.values()))
    if isinstance(container, IdSet):
        return container.array == z3.K(z3.IntSort(), z3.BoolVal(False))
    assert isinstance(container, ContentMap)
    return container.array == empty_field(u, "contents").array


def _subset(small: z3.ArrayRef, large: z3.ArrayRef) -> z3.BoolRef:
    """Every member of ``small`` is in ``large`` (sets as arrays to bool), without a
    quantifier: ``large | small == large``."""
    union = z3.Map(z3.Or(z3.Bool("a"), z3.Bool("b")).decl(), large, small)
    return union == large


def same_state(a: State, b: State) -> z3.BoolRef:
    """The two states are equal as the abstraction sees them (a None plan's fields and
    an absent entry's value do not count)."""
    parts: list[z3.BoolRef] = []
    for name in FIELD_KINDS:
        parts.append(same_value(a[name], b[name]))
    return all_of(*parts)


def same_value(a: Any, b: Any) -> z3.BoolRef:
    if isinstance(a, z3.ExprRef):
        return a == b
    if isinstance(a, Opt):
        return all_of(a.some == b.some, z3.Implies(a.some, same_value(a.value, b.value)))
    if isinstance(a, Record):
        return all_of(*(same_value(a.fields[n], b.fields[n]) for n in a.fields))
    if isinstance(a, FMap):
        return all_of(*(same_value(a.entries[k], b.entries[k]) for k in a.entries))
    if isinstance(a, FSet):
        return all_of(*(a.members[k] == b.members[k] for k in a.members))
    if isinstance(a, IdSet | ContentMap):
        return a.array == b.array
    raise TranslationError(f"cannot compare {a!r}")
