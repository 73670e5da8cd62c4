"""The syntax-tree rewrites the generator applies to a copied body: inlining,
simplifying, renaming, reading fields and records once. Each preserves meaning.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from enum import EnumMeta
from typing import TYPE_CHECKING, TypeGuard

from replan.spec.generator.common import _SCOPES

if TYPE_CHECKING:
    from replan.spec.generator.inlining import Inlining
    from replan.spec.generator.methods import Methods


def _walk_outside_scopes(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes in source order, without entering comprehensions and lambdas (they
    have scopes of their own, where a name may mean something else) except for a
    comprehension's first iterable, which is evaluated outside."""
    yield node
    for child in ast.iter_child_nodes(node):
        if isinstance(child, _SCOPES):
            if not isinstance(child, ast.Lambda):
                yield from _walk_outside_scopes(child.generators[0].iter)
        else:
            yield from _walk_outside_scopes(child)


def _bindings(nodes: Iterable[ast.AST], name: str) -> int:
    return sum(
        1
        for node in nodes
        for child in ast.walk(node)
        if isinstance(child, ast.Name) and child.id == name and not isinstance(child.ctx, ast.Load)
    )


def _uses(nodes: Iterable[ast.AST], name: str) -> bool:
    return any(
        isinstance(child, ast.Name) and child.id == name
        for node in nodes
        for child in ast.walk(node)
    )


def _is_self_attribute(node: ast.AST, name: str | None = None) -> TypeGuard[ast.Attribute]:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and (name is None or node.attr == name)
    )


# ---- rewriting -----------------------------------------------------------------------


class _Inliner(ast.NodeTransformer):
    """Replace ``self.<guard>(<args>)`` calls inside an inlined body by that guard's
    own expression, recursively."""

    def __init__(self, generator: Inlining) -> None:
        self.generator = generator

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        target = node.func
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
            and not node.keywords
            and all(isinstance(a, ast.Name) for a in node.args)
        ):
            names = [a.id for a in node.args if isinstance(a, ast.Name)]
            inlined = self.generator.guard_expression(target.attr, names)
            if inlined is not None:
                return inlined
        return node


_INVERSE: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}


class _Simplify(ast.NodeTransformer):
    """``not (a == b)`` -> ``a != b`` (and the other invertible comparisons), which is
    what a person would write after inlining ``not self.some_guard(...)``."""

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        operand = node.operand
        if (
            isinstance(node.op, ast.Not)
            and isinstance(operand, ast.Compare)
            and len(operand.ops) == 1
            and type(operand.ops[0]) in _INVERSE
        ):
            inverse = _INVERSE[type(operand.ops[0])]()
            return ast.Compare(left=operand.left, ops=[inverse], comparators=operand.comparators)
        return node


_PURE = (
    ast.Name,
    ast.Constant,
    ast.Attribute,
    ast.Compare,
    ast.BoolOp,
    ast.UnaryOp,
    ast.Load,
    ast.boolop,
    ast.cmpop,
    ast.unaryop,
)


def _pure(node: ast.AST) -> bool:
    """Reads only: names, constants, fields, comparisons and ``type``/``isinstance``."""
    return all(
        isinstance(n, _PURE)
        or (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id in ("type", "isinstance")
            and not n.keywords
        )
        for n in ast.walk(node)
    )


class _Flatten(ast.NodeTransformer):
    """``a or (b or c)`` -> ``a or b or c`` (the same value, always), and ``a or a``
    -> ``a`` when ``a`` only reads: what copying ``_is_int(v)`` into
    ``type(v) is int or _is_int(v)`` leaves behind."""

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        values: list[ast.expr] = []
        for value in node.values:
            parts = (
                value.values
                if isinstance(value, ast.BoolOp) and type(value.op) is type(node.op)
                else [value]
            )
            for part in parts:
                if values and ast.dump(values[-1]) == ast.dump(part) and _pure(part):
                    continue
                values.append(part)
        if len(values) == 1:
            return values[0]
        return ast.BoolOp(op=node.op, values=values)


class _Rename(ast.NodeTransformer):
    def __init__(self, mapping: Mapping[str, str]) -> None:
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.mapping:
            return ast.copy_location(ast.Name(id=self.mapping[node.id], ctx=node.ctx), node)
        return node


class _OutsideScopes(ast.NodeTransformer):
    """A rewrite that leaves comprehensions and lambdas alone (a name there may be
    bound by them)."""

    def _comprehension(self, node: ast.ListComp) -> ast.AST:
        first = node.generators[0]
        first.iter = self.visit(first.iter)
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        return node

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension  # type: ignore[assignment]


class _FieldsToLocals(_OutsideScopes):
    """``obs.key`` -> ``key``: the field read from the local it was unpacked into."""

    def __init__(self, parameter: str, fields: Mapping[str, str]) -> None:
        self.parameter = parameter
        self.fields = fields

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if (
            isinstance(node.value, ast.Name)
            and node.value.id == self.parameter
            and node.attr in self.fields
            and isinstance(node.ctx, ast.Load)
        ):
            return ast.copy_location(ast.Name(id=self.fields[node.attr], ctx=ast.Load()), node)
        self.generic_visit(node)
        return node


class _SelfToLocals(_OutsideScopes):
    """``self.policy`` -> ``policy`` for the fields read into locals."""

    def __init__(self, locals_: Mapping[str, str]) -> None:
        self.locals = locals_

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if _is_self_attribute(node) and node.attr in self.locals and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Name(id=self.locals[node.attr], ctx=ast.Load()), node)
        self.generic_visit(node)
        return node


class _FunctionInliner(_OutsideScopes):
    """``well_formed_plan(plan)`` -> its returned expression, for a module function
    written as one ``return`` and called with plain names (the call is what a
    person would not write twice in a hot path)."""

    def __init__(self, generator: Inlining) -> None:
        self.generator = generator

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and not node.keywords:
            arguments = [a.id for a in node.args if isinstance(a, ast.Name)]
            if len(arguments) == len(node.args):
                inlined = self.generator.function_expression(node.func.id, arguments)
                if inlined is not None:
                    return ast.copy_location(inlined, node)
        return node


class _MembersToConstants(ast.NodeTransformer):
    """``ExecuteResult.EXECUTED`` -> ``EXECUTED``, a module constant: reading a member
    through its enumeration class costs an attribute lookup on the class every time."""

    def __init__(self, generator: Methods) -> None:
        self.generator = generator

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        value = node.value
        if (
            isinstance(value, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and isinstance(self.generator.globals.get(value.id), EnumMeta)
            and node.attr in self.generator.globals[value.id].__members__  # type: ignore[attr-defined]
        ):
            name = self.generator.constant(value.id, node.attr)
            return ast.copy_location(ast.Name(id=name, ctx=ast.Load()), node)
        self.generic_visit(node)
        return node


def _upper_snake(name: str) -> str:
    return "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(name)).upper()


class _TuplesToLocals(_OutsideScopes):
    """``(key, version)`` -> ``key_version`` for the tuples built once."""

    def __init__(self, locals_: Mapping[tuple[str, ...], str]) -> None:
        self.locals = locals_

    def visit_Tuple(self, node: ast.Tuple) -> ast.AST:
        names = _tuple_of_names(node)
        if names is not None and names in self.locals:
            return ast.copy_location(ast.Name(id=self.locals[names], ctx=ast.Load()), node)
        self.generic_visit(node)
        return node


def _tuple_of_names(node: ast.AST) -> tuple[str, ...] | None:
    if (
        isinstance(node, ast.Tuple)
        and isinstance(node.ctx, ast.Load)
        and len(node.elts) > 1
        and all(isinstance(e, ast.Name) for e in node.elts)
    ):
        return tuple(e.id for e in node.elts)  # type: ignore[attr-defined]
    return None


def _eliminate_aliases(
    statements: list[ast.stmt], answer: ast.expr | None, locals_: set[str]
) -> tuple[list[ast.stmt], ast.expr | None]:
    """Drop ``x = y`` where ``x`` is a local bound only there and ``y`` a name the body
    never binds (a parameter, an unpacked field, a global): later reads of ``x`` read
    ``y``. Written for ``key = obs.key`` once ``obs.key`` reads the local ``key``."""
    index = 0
    while index < len(statements):
        statement = statements[index]
        everything = [*statements, *([answer] if answer is not None else [])]
        if (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and statement.targets[0].id in locals_
            and isinstance(statement.value, ast.Name)
        ):
            alias, name = statement.targets[0].id, statement.value.id
            if (
                alias != name
                and _bindings(everything, alias) == 1
                and _bindings(everything, name) == 0
                and not _uses(statements[:index], alias)
            ):
                rename = _Rename({alias: name})
                statements = statements[:index] + [rename.visit(s) for s in statements[index + 1 :]]
                answer = None if answer is None else rename.visit(answer)
                continue
        index += 1
    return statements, answer
