"""Which policy fields a guard reads, and what they say under a given policy.

A guard's *name* lives in the declaration, its *meaning* partly in the policy:
``prerequisites_passed`` means "parser and access are Passed" only because the
default policy says commit-import requires them. So a policy change can change a
guard's meaning while the declaration stays byte-identical, and a diff must show it.
What a guard reads is found in its body (``self.policy.<field>``, following calls to
other methods of the run), never listed by hand, so a new guard or a new policy field
is picked up without touching this module.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from functools import cache

from replan.controller.policy import Policy
from replan.spec import bodies


@cache
def policy_fields(model_class: type, name: str) -> tuple[tuple[str, bool], ...]:
    """The policy attributes that the method ``name`` of ``model_class`` reads,
    directly or through other methods it calls on ``self``, in first-use order, each
    with whether only its keys matter (``step in self.policy.requirements`` asks
    about step names, not about what they require)."""
    found: dict[str, bool] = {}
    _collect(model_class, name, found, set())
    return tuple(found.items())


def _collect(model_class: type, name: str, found: dict[str, bool], seen: set[str]) -> None:
    if name in seen:
        return
    seen.add(name)
    method = getattr(model_class, name, None)
    tree = bodies.definition(method) if callable(method) else None
    if tree is None:
        return
    membership = {
        id(comparator)
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare)
        and all(isinstance(o, ast.In | ast.NotIn) for o in node.ops)
        for comparator in node.comparators
    }
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        if isinstance(owner, ast.Attribute) and _is_self(owner.value) and owner.attr == "policy":
            keys_only = id(node) in membership
            found[node.attr] = found.get(node.attr, True) and keys_only
        elif _is_self(owner) and node.attr != "policy":
            _collect(model_class, node.attr, found, seen)


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _value(policy: Policy, name: str, keys_only: bool) -> object:
    value = getattr(policy, name, None)
    return tuple(value) if keys_only and isinstance(value, Mapping) else value


def _shown_name(name: str, keys_only: bool, value: object) -> str:
    return f"{name} keys" if keys_only and isinstance(value, tuple) else name


def _empty(value: object) -> bool:
    """No entry worth showing: nothing, or a mapping whose every value is empty (a
    step's per-resource requirements when the policy has no per-resource key)."""
    if isinstance(value, Mapping):
        return all(_empty(item) for item in value.values())
    return not value and not isinstance(value, bool | int)


def render_value(value: object) -> str:
    """A policy value as the legend shows it. A mapping (``requirements``: step ->
    keys) lists only its non-empty entries; sets are sorted."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Mapping):
        entries = [f"{k}: {render_value(v)}" for k, v in value.items() if not _empty(v)]
        return " · ".join(entries) or "none"
    if isinstance(value, frozenset | set):
        return ", ".join(sorted(map(str, value))) or "none"
    if isinstance(value, tuple | list):
        return ", ".join(map(str, value)) or "none"
    return str(value)


def guard_reading(model_class: type, guard: str, policy: Policy) -> str:
    """``max_steps = 4``; ``requirements = commit-import: parser, access``; ``""`` for
    a guard that reads no policy field."""
    parts = []
    for name, keys_only in policy_fields(model_class, guard):
        value = _value(policy, name, keys_only)
        parts.append(f"{_shown_name(name, keys_only, value)} = {render_value(value)}")
    return " · ".join(parts)


def reading_change(old_class: type, new_class: type, guard: str, old: Policy, new: Policy) -> str:
    """How the policy-given meaning of ``guard`` changed from ``old`` to ``new``
    (``""`` when it did not): ``commit-import: parser, access → parser, access,
    schema``, per entry where the field is a mapping."""
    changes = []
    fields = dict(policy_fields(old_class, guard))
    for name, keys_only in policy_fields(new_class, guard):
        fields[name] = fields.get(name, True) and keys_only
    for name, keys_only in fields.items():
        before = _value(old, name, keys_only)
        after = _value(new, name, keys_only)
        if before == after:
            continue
        if isinstance(before, Mapping) and isinstance(after, Mapping):
            for key in dict.fromkeys([*before, *after]):
                if before.get(key) != after.get(key):
                    changes.append(
                        f"{key}: {render_value(before.get(key, ()))} → "
                        f"{render_value(after.get(key, ()))}"
                    )
        else:
            shown = _shown_name(name, keys_only, after)
            changes.append(f"{shown}: {render_value(before)} → {render_value(after)}")
    return " · ".join(changes)


# ---- what a guard tests, written over the policy's values ---------------------------------


def guard_expression(model_class: type, guard: str, policy: Policy) -> str:
    """What ``guard`` tests under ``policy``, read from its body (``return <expr>``):
    the run's fields without ``self._``, each policy field it reads followed by its
    value, ``steps >= max_steps (4)``. A guard whose body is not one ``return`` (the
    generator calls those instead of inlining them) is shown by its name."""
    tree = _returned_expression(model_class, guard)
    if tree is None:
        return guard
    return _readable(_OverPolicy(model_class, guard, policy).visit(tree))


def condition_expression(model_class: type, condition: str, policy: Policy) -> str:
    """A transition's whole guard (``not is_pending_id and was_accepted``) with each
    guard name replaced by what it tests under ``policy``; ``""`` for no guard.
    Precedence is kept by building one syntax tree, not by pasting text."""
    if not condition:
        return ""
    from replan.spec.model import parse_guard

    def expression_of(name: str) -> ast.expr:
        tree = _returned_expression(model_class, name)
        if tree is None:
            return ast.Name(id=name)
        rewritten: ast.expr = _OverPolicy(model_class, name, policy).visit(tree)
        return rewritten

    class _Substitute(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.expr:
            return expression_of(node.id)

    return _readable(_Substitute().visit(parse_guard(condition)))


def _readable(node: ast.expr) -> str:
    """``ast.unparse`` with the parentheses a reader needs and no more: operands of
    one ``and`` (or ``or``) chain are flattened, a different boolean operator inside
    is parenthesised, and so is a comparison or chain under ``not``. (``ast.unparse``
    parenthesises the third operand of a chain whatever it is.)"""
    if isinstance(node, ast.BoolOp):
        operator = " and " if isinstance(node.op, ast.And) else " or "
        parts = []
        for value in node.values:
            if isinstance(value, ast.BoolOp) and type(value.op) is type(node.op):
                parts.append(_readable(value))
            elif isinstance(value, ast.BoolOp):
                parts.append(f"({_readable(value)})")
            else:
                parts.append(_readable(value))
        return operator.join(parts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _readable(node.operand)
        grouped = isinstance(node.operand, ast.BoolOp | ast.Compare)
        return f"not ({inner})" if grouped else f"not {inner}"
    return ast.unparse(node)


def _returned_expression(model_class: type, name: str) -> ast.expr | None:
    """A fresh tree of the expression the method ``name`` returns, when its body (after
    the docstring) is exactly one ``return <expr>``."""
    method = getattr(model_class, name, None)
    definition = bodies.definition(method) if callable(method) else None
    return None if definition is None else bodies.returned_expression(definition)


class _OverPolicy(ast.NodeTransformer):
    """Rewrites a guard body for reading: ``self.policy.max_steps`` becomes the name
    ``max_steps (4)``, ``self.policy.requirements[x]`` becomes ``requirements[x]
    (commit-import: parser, access)``, ``self._steps`` becomes ``steps`` and
    ``self.other_guard(obs)`` becomes ``other_guard(obs)``. A name node may hold any
    text: ``ast.unparse`` writes it as it is, and it binds tightest, as a value does."""

    def __init__(self, model_class: type, guard: str, policy: Policy) -> None:
        self.policy = policy
        self.keys_only = dict(policy_fields(model_class, guard))

    def _policy_field(self, node: ast.expr) -> str | None:
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "policy"
            and _is_self(node.value.value)
        ):
            return node.attr
        return None

    def _shown(self, name: str, keys_only: bool) -> str:
        value = _value(self.policy, name, keys_only)
        return f"{_shown_name(name, keys_only, value)} ({render_value(value)})"

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        name = self._policy_field(node.value)
        if name is None:
            visited: ast.expr = self.generic_visit(node)  # type: ignore[assignment]
            return visited
        index = ast.unparse(self.visit(node.slice))
        value = render_value(_value(self.policy, name, False))
        return ast.Name(id=f"{name}[{index}] ({value})")

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        name = self._policy_field(node)
        if name is not None:
            return ast.Name(id=self._shown(name, self.keys_only.get(name, False)))
        if _is_self(node.value):
            return ast.Name(id=node.attr.lstrip("_"))
        visited: ast.expr = self.generic_visit(node)  # type: ignore[assignment]
        return visited
