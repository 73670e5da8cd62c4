"""What methods do to the run's fields: which ones ``__init__`` always sets, which
ones a method stores into (a field read once into a local must not be rebound).
"""

from __future__ import annotations

import ast

from replan.controller.fields import FIELDS
from replan.controller.records import StopReason
from replan.controller.run import Run
from replan.spec import bodies
from replan.spec.generator.rewrite import _is_self_attribute, _Rename
from replan.spec.model import MachineModel, StateInfo, TransitionInfo

# ---- what methods do to the run's fields ---------------------------------------------


def _own(cls: type, name: str) -> object:
    """The function ``cls`` has for ``name`` (its own or inherited)."""
    return getattr(cls, name, None)


def _fields_set_by_init(model_class: type) -> set[str]:
    """The slots ``__init__`` always sets: every field of the table and the policy
    when it is ``Run``'s (which sets them from the table), else its top-level
    assignments to ``self.<slot>``."""
    slots = {s for cls in model_class.__mro__ for s in getattr(cls, "__slots__", ())}
    if _own(model_class, "__init__") is _own(Run, "__init__"):
        return {f.attribute for f in FIELDS} | {"policy"}
    definition = bodies.method_definition(model_class, "__init__")
    if definition is None:
        return set()
    fields: set[str] = set()
    for statement in definition.body:
        targets = (
            statement.targets
            if isinstance(statement, ast.Assign)
            else [statement.target]
            if isinstance(statement, ast.AnnAssign) and statement.value is not None
            else []
        )
        fields.update(t.attr for t in targets if _is_self_attribute(t))
    return fields & slots


def _self_stores(tree: ast.AST) -> set[str] | None:
    """The fields of ``self`` the code rebinds; None when ``self`` escapes (passed
    along or read as a whole), so anything may be rebound."""
    stores: set[str] = set()
    attributes = {id(n.value) for n in ast.walk(tree) if _is_self_attribute(n)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "self" and id(node) not in attributes:
            return None
        if _is_self_attribute(node) and not isinstance(node.ctx, ast.Load):
            stores.add(node.attr)
    return stores


def _stores_of_method(model_class: type, name: str, seen: set[str]) -> set[str] | None:
    """The fields method ``name`` rebinds, with the methods it calls on ``self``; None
    when that cannot be known."""
    if name in seen:
        return set()
    seen.add(name)
    definition = bodies.method_definition(model_class, name)
    if definition is None or not definition.args.args:
        return None
    own = definition.args.args[0].arg
    tree = _Rename({own: "self"}).visit(definition) if own != "self" else definition
    stores = _self_stores(tree)
    if stores is None:
        return None
    slots = {s for cls in model_class.__mro__ for s in getattr(cls, "__slots__", ())}
    if stores - slots:  # a property's setter may rebind anything
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_self_attribute(node.func):
            called = _stores_of_method(model_class, node.func.attr, seen)
            if called is None:
                return None
            stores |= called
    return stores


def _import_order(name: str) -> tuple[int, str]:
    # isort's order: CONSTANTS, Classes, functions
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def _row(transition: TransitionInfo) -> tuple[str, str, str | None]:
    """What a transition does, whatever state it leaves: its guard, its action and
    its target (None: it stays where it is)."""
    stays = transition.internal and transition.target == transition.source
    return (transition.cond, transition.action, None if stays else transition.target)


def _sharing_states(model: MachineModel, event: str) -> list[tuple[str, ...]]:
    """The active states with transitions on ``event``, grouped by chain: states whose
    rows are the same, in the same order, share one copy of the code."""
    groups: dict[tuple[tuple[str, str, str | None], ...], list[str]] = {}
    for state in model.active_states:
        leaving = model.leaving(state.id, event)
        if leaving:
            groups.setdefault(tuple(_row(t) for t in leaving), []).append(state.id)
    return [tuple(states) for states in groups.values()]


def _conjuncts(transition: TransitionInfo) -> list[ast.expr]:
    tree = transition.guard_tree
    if tree is None:
        return []
    if isinstance(tree, ast.BoolOp) and isinstance(tree.op, ast.And):
        return list(tree.values)
    return [tree]


def _state_constant(state: StateInfo) -> str:
    if state.final:
        return f"StopReason.{StopReason(state.value).name}"
    return repr(state.value)
