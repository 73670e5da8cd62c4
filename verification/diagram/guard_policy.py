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
import inspect
import textwrap
from collections.abc import Mapping
from functools import cache

from controller.policy import Policy


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
    if not callable(method):
        return
    try:
        source = textwrap.dedent(inspect.getsource(method))
    except (OSError, TypeError):
        return
    tree = ast.parse(source)
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


def render_value(value: object) -> str:
    """A policy value as the legend shows it. A mapping (``requirements``: step ->
    keys) lists only its non-empty entries; sets are sorted."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Mapping):
        entries = [f"{k}: {render_value(v)}" for k, v in value.items() if v]
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
