"""Compiles a set of call properties into one Python function, their bodies inlined.

Why: the explorer evaluates the properties that read the call's argument on every
transition (8.4 M of them for a new user's three-key policy), and the campaign
evaluates every property after every operation. Called one by one, each property is
a Python call, and each calls its helpers (``considered``, ``active``, ``rejected``,
``unchanged``...) in turn, so on CPython the calls cost more than the comparisons.

The compiled check is generated from the properties' own source, the text the z3
translator reads, so a changed property is what every engine checks, with no other
edit. Each body runs in a one-pass ``while True`` block whose ``return`` becomes an
assignment and a ``break``; its parameters become the call's variables, its locals
are renamed apart, and a helper whose body is a single ``return`` is substituted in
(recursively), as is ``unchanged`` with constant components. Tests of ``event``
against constants are decided for the event the check is compiled for.

The check reads the properties' and helpers' globals, and the helpers' bodies, as
they were when it was compiled (``Checker`` compiles on first use): rebinding one
later needs a new ``Checker``, as every checker in this project is built on import.

Inlining is an optimisation, never a change of meaning: a body or helper the compiler
cannot inline exactly (a loop, a nested function, a rebound parameter, a closure, no
source) is called as it is. ``check_source`` shows what runs, for review.
"""

from __future__ import annotations

import ast
import builtins
import copy
import functools
import inspect
import re
from collections.abc import Callable, Iterable
from typing import Any

from replan.spec.vocabulary import (
    CALL_PARAMETERS,
    Property,
    _binds_event,
    _EventFolder,
    _reachable,
    function_tree,
    unchanged,
    unchanged_expression,
)

#: The compiled function's parameters: the checker's error log, then the call.
CALL_VARIABLES = ("event", "before", "argument", "answer", "after", "appended")
_RESERVED = frozenset(
    {
        *CALL_VARIABLES,
        "_errors",
        "_failed",
        "_ok",
        "_error",
        "_UNSET",
        "_message",
        "check",
        "__builtins__",
    }
)

#: Statements a body may hold to be inlined (anything else: the property is called).
_STATEMENTS = (ast.Return, ast.If, ast.Assign, ast.AnnAssign, ast.Expr, ast.Pass, ast.Assert)
#: Expressions that would bind or suspend in the compiled function's scope.
_FORBIDDEN = (ast.Lambda, ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)
_MAX_DEPTH = 8
#: the compiled function's renamed locals (``_<property number>_<name>``)
_LOCAL = re.compile(r"_\d+_\w+")


class _NotInlinable(Exception):
    """A body or helper the compiler calls as it is instead."""


def _call_variable(parameter: str) -> str:
    """The call's variable a property parameter names (the event's own parameter
    name, ``obs`` or ``plan``, is the argument)."""
    return parameter if parameter in CALL_PARAMETERS else "argument"


class _Namespace:
    """The compiled function's globals: each property's and helper's global names,
    kept as they are unless two modules mean different objects by one name (or it
    would shadow a builtin or a call variable), which then gets an alias."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self._aliases: dict[tuple[str, int], str] = {}

    def name_for(self, name: str, value: Any) -> str:
        known = self._aliases.get((name, id(value)))
        if known is not None:
            return known
        chosen = name
        shadows = hasattr(builtins, name) and getattr(builtins, name) is not value
        number = 0
        while (
            chosen in _RESERVED
            or re.fullmatch(r"_c\d+|_\d+_.*", chosen) is not None  # the check's own locals
            or shadows
            or (chosen in self.values and self.values[chosen] is not value)
        ):
            number += 1
            chosen, shadows = f"_g{number}_{name}", False
        self.values[chosen] = value
        self._aliases[(name, id(value))] = chosen
        return chosen


def _bound_names(node: ast.AST) -> set[str]:
    """Every name a body or expression binds (assignments, comprehension targets)."""
    return {
        child.id
        for child in ast.walk(node)
        if isinstance(child, ast.Name) and not isinstance(child.ctx, ast.Load)
    }


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        return body[1:]
    return body


def _plain_definition(function: Any) -> ast.FunctionDef:
    """``function``'s parsed definition, when the compiler can inline it at all: a
    Python function with source, no free variables (a closure's live in cells) and
    plain positional parameters; ``_NotInlinable`` otherwise."""
    code = getattr(function, "__code__", None)
    if code is None or code.co_freevars:
        raise _NotInlinable("a closure or not a Python function")
    try:
        definition = function_tree(function)
    except (OSError, TypeError, ValueError, SyntaxError) as error:
        raise _NotInlinable(str(error)) from error
    signature = definition.args
    if signature.posonlyargs or signature.vararg or signature.kwonlyargs or signature.kwarg:
        raise _NotInlinable("not plain positional parameters")
    return definition


@functools.cache
def _helper_tree(function: Callable[..., Any]) -> tuple[tuple[str, ...], ast.expr, frozenset[str]]:
    """A helper's parameters, its one returned expression and the names it binds (its
    comprehensions'); ``_NotInlinable`` unless it is exactly that shape."""
    definition = _plain_definition(function)
    signature = definition.args
    body = _without_docstring(definition.body)
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        raise _NotInlinable(f"{function.__name__}: not a single return")
    expression = body[0].value
    if any(isinstance(node, _FORBIDDEN) for node in ast.walk(expression)):
        raise _NotInlinable(f"{function.__name__}: binds or suspends")
    parameters = tuple(a.arg for a in signature.args)
    bound = frozenset(_bound_names(expression))
    if bound & set(parameters):
        raise _NotInlinable(f"{function.__name__}: a parameter is a comprehension variable")
    return parameters, expression, bound


class _Inliner(ast.NodeTransformer):
    """Rewrites one body (or one helper's expression) into the compiled function's
    names: ``mapping`` replaces parameters and renamed locals, ``bound`` names (a
    helper's comprehension variables) stay, and every other name is a global of
    ``module_globals``, aliased into the shared namespace."""

    def __init__(
        self,
        namespace: _Namespace,
        module_globals: dict[str, Any],
        mapping: dict[str, ast.expr],
        bound: frozenset[str],
        depth: int,
    ) -> None:
        self.namespace = namespace
        self.module_globals = module_globals
        self.mapping = mapping
        self.bound = bound
        self.depth = depth

    def visit_Name(self, node: ast.Name) -> ast.AST:
        replacement = self.mapping.get(node.id)
        if replacement is not None:
            replaced = copy.deepcopy(replacement)
            if isinstance(replaced, ast.Name):
                replaced.ctx = node.ctx
            return replaced
        if node.id in self.bound:
            return node  # a helper's comprehension variable
        if node.id not in self.module_globals:
            if hasattr(builtins, node.id):
                return node
            # Unknown where it was written: alone it raises NameError, and here it
            # could find one of the compiled function's own names.
            raise _NotInlinable(f"{node.id} is not defined")
        alias = self.namespace.name_for(node.id, self.module_globals[node.id])
        return ast.Name(id=alias, ctx=node.ctx)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        function = self._global_function(node.func)
        if function is None or self.depth >= _MAX_DEPTH:
            return self.generic_visit(node)
        node.args = [self.visit(argument) for argument in node.args]
        node.keywords = [self.visit(keyword) for keyword in node.keywords]
        try:
            return self._inline(function, node)
        except _NotInlinable:
            # called after all: only then does the helper's name join the namespace
            node.func = self.visit(node.func)
            return node

    def _global_function(self, func: ast.expr) -> Any:
        if not isinstance(func, ast.Name) or func.id in self.mapping or func.id in self.bound:
            return None
        value = self.module_globals.get(func.id)
        return value if inspect.isfunction(value) else None

    def _inline(self, function: Any, call: ast.Call) -> ast.expr:
        if call.keywords or not all(isinstance(a, ast.Name | ast.Constant) for a in call.args):
            raise _NotInlinable("only names and constants are substituted")
        if any(isinstance(a, ast.Name) and _LOCAL.fullmatch(a.id) for a in call.args):
            # a local may be unassigned: alone the call raises before the helper runs
            raise _NotInlinable("a local as an argument")
        if function is unchanged:
            return self._inline_unchanged(call)
        parameters, expression, bound = _helper_tree(function)
        defaults = function.__defaults__ or ()
        missing = len(parameters) - len(call.args)
        if missing < 0 or missing > len(defaults):
            raise _NotInlinable("argument count")
        arguments: list[ast.expr] = list(call.args)
        for value in defaults[len(defaults) - missing :]:
            if type(value) in (str, bool, type(None)) or (type(value) is int and value >= 0):
                arguments.append(ast.Constant(value))
            else:
                arguments.append(ast.Name(id=self.namespace.name_for("_default", value)))
        used = {a.id for a in arguments if isinstance(a, ast.Name)}
        if used & bound:
            raise _NotInlinable("an argument would be captured by a comprehension")
        inner = _Inliner(
            self.namespace,
            function.__globals__,
            dict(zip(parameters, arguments, strict=True)),
            bound,
            self.depth + 1,
        )
        result = inner.visit(copy.deepcopy(expression))
        assert isinstance(result, ast.expr)
        return result

    def _inline_unchanged(self, call: ast.Call) -> ast.expr:
        if len(call.args) < 2:
            raise _NotInlinable("unchanged() takes two runs")
        first, second, *changing = call.args
        if not (isinstance(first, ast.Name) and isinstance(second, ast.Name)) or not all(
            isinstance(c, ast.Constant) and isinstance(c.value, str) for c in changing
        ):
            raise _NotInlinable("unchanged() over names and constant components")
        try:
            text = unchanged_expression(tuple(c.value for c in changing))  # type: ignore[attr-defined]
        except ValueError as error:  # an unknown component: raised when it runs
            raise _NotInlinable(str(error)) from error
        expression = ast.parse(text, mode="eval").body
        if {first.id, second.id} & _bound_names(expression):
            raise _NotInlinable("an argument would be captured by a comprehension")
        inner = _Inliner(
            self.namespace, {}, {"b": first, "a": second}, frozenset({"k"}), self.depth + 1
        )
        result = inner.visit(expression)
        assert isinstance(result, ast.expr)
        return result


class _Body(ast.NodeTransformer):
    """``return value`` as ``_ok = value; break`` (the block is a one-pass loop)."""

    def visit_Return(self, node: ast.Return) -> list[ast.stmt]:
        value = node.value if node.value is not None else ast.Constant(None)
        return [ast.Assign(targets=[ast.Name("_ok", ast.Store())], value=value), ast.Break()]


def _inlined_body(
    prop: Property, number: int, event: str | None, namespace: _Namespace
) -> list[ast.stmt]:
    """``prop``'s body as statements of the compiled function that leave its verdict
    in ``_ok``; ``_NotInlinable`` when it cannot be inlined exactly."""
    function = prop.function
    definition = _plain_definition(function)
    parameters = [a.arg for a in definition.args.args]
    if tuple(parameters) != prop.parameters:
        raise _NotInlinable("the source is not the registered function")
    # Locals by the whole body, before folding and truncation drop any assignment: a
    # name assigned only on a dropped branch is still a local (unbound, not a global).
    locals_ = set().union(*(_bound_names(s) for s in definition.body))
    if event is not None and "event" in parameters and not _binds_event(definition):
        folded = _EventFolder(event).visit(definition)
        assert isinstance(folded, ast.FunctionDef)
        definition = folded
    body = _reachable(_without_docstring(definition.body))
    for statement in body:
        for node in ast.walk(statement):
            if isinstance(node, ast.stmt) and not isinstance(node, _STATEMENTS):
                raise _NotInlinable(f"a {type(node).__name__} statement")
            if isinstance(node, _FORBIDDEN):
                raise _NotInlinable(f"a {type(node).__name__} expression")
    if locals_ & set(parameters):
        raise _NotInlinable("a parameter is rebound")
    mapping: dict[str, ast.expr] = {p: ast.Name(_call_variable(p), ast.Load()) for p in parameters}
    mapping.update({name: ast.Name(f"_{number}_{name}", ast.Load()) for name in locals_})
    inliner = _Inliner(namespace, function.__globals__, mapping, frozenset(), 0)
    rewritten: list[ast.stmt] = []
    for statement in body:
        result = _Body().visit(inliner.visit(copy.deepcopy(statement)))
        rewritten.extend(result if isinstance(result, list) else [result])
    # A local whose every assignment was folded or cut away is still a local (reading
    # it raises UnboundLocalError, not NameError): an assignment that never runs says so.
    dropped = locals_ - set().union(set(), *(_bound_names(s) for s in body))
    declared = [
        ast.parse(f"if False:\n    _{number}_{name} = None\n").body[0] for name in sorted(dropped)
    ]
    return [*declared, *rewritten]


def _always_breaks(body: list[ast.stmt]) -> bool:
    """Whether a rewritten body leaves the one-pass block on every path."""
    return bool(body) and (
        isinstance(body[-1], ast.Break)
        or (
            isinstance(body[-1], ast.If)
            and _always_breaks(body[-1].body)
            and _always_breaks(body[-1].orelse)
        )
    )


def _message(error: Exception) -> str:
    """What ``Checker`` records for a property that raised, as calling it alone gives
    it: a renamed local (``_3_record``) is named as the property wrote it."""
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, NameError):
        text = re.sub(r"'_\d+_(\w+)'", r"'\1'", text)
    return text


def _guarded(name: str, verdict_block: list[ast.stmt]) -> ast.Try:
    """``verdict_block`` (which leaves the verdict in ``_ok``), recording ``name`` as
    failed when the verdict is falsy or evaluating it raises."""
    text = (
        "try:\n"
        "    pass\n"
        "    if not _ok:\n"
        f"        _failed.append({name!r})\n"
        "except Exception as _error:  # a property that cannot be evaluated fails\n"
        f"    _errors[{name!r}] = _message(_error)\n"
        f"    _failed.append({name!r})\n"
    )
    statement = ast.parse(text).body[0]
    assert isinstance(statement, ast.Try)
    statement.body[0:1] = verdict_block
    return statement


_UNSET = object()  # a common subexpression not evaluated yet in this call
#: Repeats cheaper than this (in operations: calls, attributes, comparisons...) cost
#: about as much to look up as to evaluate again.
_MIN_SHARED_COST = 4
_COSTLY = (ast.Call, ast.Attribute, ast.Compare, ast.BoolOp, ast.Subscript, ast.BinOp)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


#: Builtins whose result is an immutable value (never an iterator or a fresh container
#: a later use could exhaust or change): a call of one can be evaluated once and reused.
_IMMUTABLE_RESULTS = frozenset(
    {"type", "isinstance", "issubclass", "len", "bool", "all", "any", "abs", "hash", "callable"}
)


def _reusable(node: ast.expr) -> bool:
    """Whether the value of ``node``, once evaluated, can stand for a second evaluation
    of it in the same call: reads of fields and items (the same object again),
    comparisons and ``not`` (a bool), arithmetic, and the builtins above; a call of
    anything else may give an iterator (``zip``, a generator) a first use exhausts."""
    if isinstance(node, ast.Compare | ast.Name | ast.Constant | ast.Attribute | ast.Subscript):
        return True
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, ast.Not) or _reusable(node.operand)
    if isinstance(node, ast.BinOp):
        return _reusable(node.left) and _reusable(node.right)
    if isinstance(node, ast.BoolOp):
        return all(_reusable(value) for value in node.values)
    if isinstance(node, ast.IfExp):
        return _reusable(node.body) and _reusable(node.orelse)
    if isinstance(node, ast.Tuple):
        return all(_reusable(element) for element in node.elts)
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id in _IMMUTABLE_RESULTS
    return False


def _cost(node: ast.AST) -> int:
    return sum(1 for child in ast.walk(node) if isinstance(child, _COSTLY))


class _SharedSubexpressions(ast.NodeTransformer):
    """Evaluates each largest subexpression that several properties (or several
    places in one) repeat at most once per call: the first evaluation binds ``_cN``,
    the rest read it. Lazily, so short-circuits and errors stay as they were: an
    expression that raises binds nothing, and its next occurrence raises again. Only
    expressions of the call's variables and globals qualify (a local may be
    reassigned, a comprehension's variable differs per iteration, and the check's
    own bookkeeping has effects)."""

    def __init__(self, counts: dict[str, int], local_prefixes: tuple[str, ...]) -> None:
        self.counts = counts
        self.local_prefixes = local_prefixes
        self.shared: dict[str, str] = {}
        self.enclosing: list[set[str]] = []

    def _eligible(self, node: ast.expr) -> bool:
        if isinstance(node, (ast.Name, ast.Constant, ast.Starred, ast.Slice, *_COMPREHENSIONS)):
            return False
        if not isinstance(getattr(node, "ctx", ast.Load()), ast.Load):
            return False
        if self.counts.get(ast.dump(node), 0) < 2 or _cost(node) < _MIN_SHARED_COST:
            return False
        loaded = {
            child.id
            for child in ast.walk(node)
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load)
        }
        free = loaded - _bound_names(node)
        outer = set().union(*self.enclosing) if self.enclosing else set()
        return (
            _reusable(node)
            and not (loaded & outer)
            and not any(
                name.startswith(self.local_prefixes) or name in _RESERVED - set(CALL_VARIABLES)
                for name in free
            )
        )

    def visit(self, node: ast.AST) -> Any:
        if isinstance(node, ast.expr) and self._eligible(node):
            key = ast.dump(node)
            name = self.shared.get(key)
            if name is None:
                name = self.shared[key] = f"_c{len(self.shared)}"
            cached = ast.parse(f"({name} if {name} is not _UNSET else ({name} := _VALUE))")
            expression = cached.body[0].value  # type: ignore[attr-defined]
            expression.orelse.value = copy.deepcopy(node)
            return expression
        if isinstance(node, _COMPREHENSIONS):
            # Python forbids := in a comprehension's iterables: those stay as they are.
            iterables = [generator.iter for generator in node.generators]
            self.enclosing.append(_bound_names(node))
            try:
                visited = self.generic_visit(node)
            finally:
                self.enclosing.pop()
            for generator, iterable in zip(node.generators, iterables, strict=True):
                generator.iter = iterable
            return visited
        return self.generic_visit(node)


def _share_subexpressions(
    blocks: list[ast.stmt], properties: int
) -> tuple[list[ast.stmt], list[str]]:
    """``blocks`` with repeated subexpressions evaluated once per call, and the names
    that then need ``_UNSET`` at the start of the call."""
    counts: dict[str, int] = {}
    for block in blocks:
        for node in ast.walk(block):
            if isinstance(node, ast.expr):
                key = ast.dump(node)
                counts[key] = counts.get(key, 0) + 1
    sharer = _SharedSubexpressions(counts, tuple(f"_{n}_" for n in range(properties)))
    shared = [sharer.visit(block) for block in blocks]
    return shared, list(sharer.shared.values())


def check_source(
    properties: Iterable[Property], event: str | None = None
) -> tuple[str, dict[str, Any]]:
    """The compiled check's source and globals: ``check(_errors, event, before,
    argument, answer, after, appended)`` returning the names of the properties in
    ``properties`` that do not hold (in their order), for calls of ``event`` (any
    event when None)."""
    namespace = _Namespace()
    blocks: list[ast.stmt] = []
    chosen = tuple(properties)
    for number, prop in enumerate(chosen):
        try:
            body = _inlined_body(prop, number, event, namespace)
            verdict: list[ast.stmt] = [
                ast.While(
                    test=ast.Constant(True),
                    body=body
                    if _always_breaks(body)
                    else [*body, *_Body().visit_Return(ast.Return())],
                    orelse=[],
                )
            ]
        except _NotInlinable:
            called = namespace.name_for(f"_called_{number}", prop.function)
            arguments: list[ast.expr] = [
                ast.Name(_call_variable(p), ast.Load()) for p in prop.parameters
            ]
            verdict = [
                ast.Assign(
                    targets=[ast.Name("_ok", ast.Store())],
                    value=ast.Call(ast.Name(called, ast.Load()), arguments, []),
                )
            ]
        blocks.append(_guarded(prop.name, verdict))
    shared_blocks, shared = _share_subexpressions(blocks, len(chosen))
    unset = "".join(f"    {name} = _UNSET\n" for name in shared)
    function = ast.parse(
        f"def check(_errors, {', '.join(CALL_VARIABLES)}):\n{unset}"
        "    _failed = []\n    return _failed\n"
    ).body[0]
    assert isinstance(function, ast.FunctionDef)
    function.body[-1:-1] = shared_blocks
    module = ast.fix_missing_locations(ast.Module(body=[function], type_ignores=[]))
    return ast.unparse(module) + "\n", {**namespace.values, "_UNSET": _UNSET, "_message": _message}


def compile_call_checks(
    properties: Iterable[Property], event: str | None = None
) -> Callable[..., list[str]]:
    """The compiled check of ``check_source``, as a function."""
    source, values = check_source(properties, event)
    namespace = dict(values)
    label = f"<compiled property checks{'' if event is None else ' for ' + event}>"
    exec(compile(source, label, "exec"), namespace)
    check: Callable[..., list[str]] = namespace["check"]
    return check
