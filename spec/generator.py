"""``replan generate``: write ``controller/_generated.py`` from the declaration.

Owns turning a ``MachineModel`` (spec/model.py) into plain Python: one method per
event, dispatching on the declared state with an ``if``/``elif`` chain per state whose
order is the declaration's priority order. The named bodies of ``controller.run.Run``
(or of the ``model_class`` given, so a subclass's override is what gets copied) are
inlined the way a person would write them out, each named in a comment, so the hot
path makes no Python calls:

- a guard whose body is a single ``return <expression>`` becomes that expression;
- an action or input check whose body is plain statements (assignments, ``if``,
  ``raise``, expression statements) ending in at most one ``return X`` becomes those
  statements plus ``result = X``. Its parameters become the event's argument; its
  locals are renamed when they would clash with the method's own names. A ``raise``
  may stand anywhere: the exception leaves the inlined statements exactly as it would
  leave the call. Any other body (a ``return`` before the end, a loop, ``try``,
  ``with``, a nested definition, a name it cannot resolve) is called instead.

Consecutive transitions whose guards start with the same conjunct, the last of them
being that conjunct alone (``a and b``, ``a and c``, ``a``), are emitted as one nested
``if a:``, so ``a`` is evaluated once. That is the same decision (guards are pure and
the group ends in ``else``), written the way a person would.

Inside one event method, three more rewrites keep the copied code from repeating work;
each is mechanical and preserves meaning:

- the fields of a checked record argument (``obs.key``) read the locals the check
  unpacked it into (``key, version, state, source = obs``), or that the method
  unpacks it into right after the check. An event's input check guarantees that its
  argument has the declared type (a record is a ``NamedTuple``, its fields are its
  positions);
- ``self.<field>`` read at least twice along one path and never rebound by the
  method (nor by any method it still calls) is read once into a local
  (``policy = self.policy``); the field must be one ``__init__`` always sets;
- a tuple of such never-rebound locals that appears at least twice along one path,
  ``(key, version)``, is built once (``key_version = (key, version)``).

Across the module: a module function written as one ``return`` and called with plain
names (``well_formed_plan(plan)``) is copied like a guard, and the ``and``/``or``
nesting that leaves is flattened; an enumeration member (``ExecuteResult.EXECUTED``)
is read from a module constant bound once, because reading it through its class
costs a class attribute lookup on every call.

``translate`` (what ``verification/translate/symbolic.py`` turns into z3) is the guard before
these method-local rewrites; they only change how the same values are read.

The output is deterministic: regenerating an unchanged declaration changes nothing,
which is what ``replan generate --check`` relies on.
"""

from __future__ import annotations

import ast
import builtins
import copy
import hashlib
import inspect
import keyword
import linecache
import sys
import textwrap
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import EnumMeta
from pathlib import Path
from types import ModuleType
from typing import TypeGuard, TypeVar

import replan.controller.fields as _fields_module
import replan.controller.policy as _policy_module
import replan.controller.records as _records_module
import replan.controller.surface as _surface_module
from replan.controller.fields import FIELDS, STATE_FIELDS, export_expression
from replan.controller.records import StopReason
from replan.controller.run import Run
from replan.spec import bodies
from replan.spec.model import MachineModel, StateInfo, TransitionInfo, extract

GENERATED_PATH = Path(__file__).resolve().parent.parent / "controller" / "_generated.py"

#: Names every generated module binds (imports added by ``render``, its constants).
_MODULE_NAMES = frozenset(
    {"DECLARATION_DIGEST", "EVENTS", "LABELS", "TRANSITIONS", "Controller", "annotations"}
)

#: The records the generated module always imports, with the answers' enumerations.
_RECORDS = ("ExecuteResult", "Observation", "Plan", "StopReason")


def diagram_label(model: MachineModel, transition: TransitionInfo) -> str:
    """The label ``replan diagram`` draws on a transition (``verification.report.diagram.graph.
    Edge.text``; a test holds the two equal): ``event #priority`` where several
    transitions leave its state on its event, ``[guard]`` (``[else]`` for the unguarded
    last resort among several), then ``/ action``. Emitted into the generated module,
    so the controller names what fired, for a span, without python-statemachine."""
    ranked = len(model.leaving(transition.source, transition.event)) > 1
    trigger = f"{transition.event} #{transition.priority}" if ranked else transition.event
    guard = f"[{transition.cond}]" if transition.cond else "[else]" if ranked else ""
    return f"{f'{trigger} {guard}'.strip()} / {transition.action}"


class GenerationError(ValueError):
    """The declaration cannot be turned into code (names the guard or transition)."""


# ---- reading the bodies ------------------------------------------------------------


def _single_expression(name: str, model_class: type) -> tuple[list[str], ast.expr] | None:
    """The parameters and returned expression of a guard written as one ``return``."""
    definition = bodies.definition(getattr(model_class, name))
    if definition is None:
        raise GenerationError(f"guard {name!r}: its source cannot be read")
    returned = bodies.returned_expression(definition)
    if returned is None:
        return None
    return [a.arg for a in definition.args.args], returned


#: Statements and expressions that keep a body from being inlined: they bind names in
#: scopes of their own, loop, catch, or depend on being in a frame of their own.
_NOT_INLINED = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Lambda,
    ast.Global,
    ast.Nonlocal,
    ast.Yield,
    ast.YieldFrom,
    ast.Await,
    ast.Try,
    ast.TryStar,
    ast.With,
    ast.AsyncWith,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.Match,
    ast.Import,
    ast.ImportFrom,
    ast.NamedExpr,
)
_FRAME_NAMES = frozenset({"locals", "vars", "eval", "exec", "globals", "super", "__class__"})
_SCOPES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)


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

    def __init__(self, generator: _Generator) -> None:
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
            inlined = self.generator.guard_expression(target.attr, [a.id for a in node.args])  # type: ignore[attr-defined]
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

    def __init__(self, generator: _Generator) -> None:
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

    def __init__(self, generator: _Generator) -> None:
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


# ---- the generated method, before it is written out ----------------------------------


@dataclass
class _Line:
    """One statement (written with ``ast.unparse``), or a comment line when
    ``statement`` is None."""

    statement: ast.stmt | None
    comment: str = ""


@dataclass
class _Arm:
    test: ast.expr | None  # None: the ``else`` arm
    comment: str
    body: list[_Node]


@dataclass
class _Chain:
    """``if``/``elif``/``else``."""

    arms: list[_Arm]


_Node = _Line | _Chain
_Key = TypeVar("_Key", bound=Hashable)


def _unparse(tree: ast.AST) -> str:
    """``ast.unparse``, without the second pair of parentheses it writes around a
    generator that is a call's only argument (``tuple((x for x in y))``)."""
    text = ast.unparse(tree)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and len(node.args) == 1
            and not node.keywords
            and isinstance(node.args[0], ast.GeneratorExp)
        ):
            generator = ast.unparse(node.args[0])
            text = text.replace(f"({generator})", generator)
    return text


def _statement(source: str) -> ast.stmt:
    return ast.parse(source).body[0]


def _trees(nodes: Iterable[_Node]) -> Iterator[ast.AST]:
    """Every statement and test of the nodes."""
    for node in nodes:
        if isinstance(node, _Line):
            if node.statement is not None:
                yield node.statement
        else:
            for arm in node.arms:
                if arm.test is not None:
                    yield arm.test
                yield from _trees(arm.body)


def _rewrite(nodes: Iterable[_Node], rewrite: ast.NodeTransformer) -> None:
    for node in nodes:
        if isinstance(node, _Line):
            if node.statement is not None:
                node.statement = rewrite.visit(node.statement)
        else:
            for arm in node.arms:
                if arm.test is not None:
                    arm.test = rewrite.visit(arm.test)
                _rewrite(arm.body, rewrite)


def _most_on_a_path(
    nodes: Iterable[_Node], count: Callable[[ast.AST], Counter[_Key]]
) -> Counter[_Key]:
    """For each thing ``count`` finds, the most of it along one path through the
    nodes (an arm's test counts for every later arm, which evaluated it first)."""

    def statements(trees: Iterable[ast.stmt]) -> Counter[_Key]:
        total: Counter[_Key] = Counter()
        for tree in trees:
            if isinstance(tree, ast.If):
                total += count(tree.test) + (statements(tree.body) | statements(tree.orelse))
            else:
                total += count(tree)
        return total

    total: Counter[_Key] = Counter()
    for node in nodes:
        if isinstance(node, _Line):
            if node.statement is not None:
                total += statements([node.statement])
            continue
        tested: Counter[_Key] = Counter()
        best: Counter[_Key] = Counter()
        for arm in node.arms:
            if arm.test is not None:
                tested += count(arm.test)
            best |= tested + _most_on_a_path(arm.body, count)
        total += best
    return total


class _Scope:
    """The local names of one generated method: which are taken, which names the
    inlined code reads as globals (a local must never shadow them), and the names
    given to each inlined body's locals (the same body inlined twice reuses them)."""

    def __init__(self, taken: Iterable[str], module_globals: Mapping[str, object]) -> None:
        self.taken = set(taken)
        self.module_globals = module_globals
        self.globals: set[str] = set()
        self.given: dict[tuple[str, str], str] = {}

    def fresh(self, wanted: str) -> str:
        candidate, number = wanted, 2
        while (
            candidate in self.taken
            or candidate in self.globals
            or candidate in self.module_globals
            or keyword.iskeyword(candidate)
            or hasattr(builtins, candidate)
        ):
            candidate, number = f"{wanted}_{number}", number + 1
        self.taken.add(candidate)
        return candidate

    def local(self, owner: str, name: str) -> str:
        if (owner, name) not in self.given:
            self.given[(owner, name)] = self.fresh(name)
        return self.given[(owner, name)]


@dataclass
class _Body:
    """An inlined body: its statements and the expression it returns (None: it
    returns None)."""

    statements: list[ast.stmt]
    answer: ast.expr | None
    #: it ends in ``raise``: nothing after it runs
    raises: bool = False


@dataclass
class _Branch:
    conjuncts: list[ast.expr]  # remaining guard conjuncts, in order
    transition: TransitionInfo


class _Generator:
    def __init__(self, model: MachineModel, model_class: type) -> None:
        self.model = model
        self.model_class = model_class
        self.lines: list[str] = []
        #: module -> names the inlined bodies use from it
        self.imports: dict[str, set[str]] = {}
        #: name -> the object it stands for in the generated module
        self.globals: dict[str, object] = {}
        #: the method being generated (None when only translating guards)
        self.scope: _Scope | None = None
        #: the record fields read from locals in the method being generated
        self.fields: dict[str, str] = {}
        #: every name a generated method binds (no module constant may be one)
        self.bound: set[str] = set()
        #: "Enumeration.MEMBER" -> the module constant the methods read instead
        self.constants: dict[str, str] = {}
        #: the functions being copied right now (a recursive one is then called)
        self.inlining: set[str] = set()
        #: the states whose chain for the event is being emitted once for all of them
        self.sharing: tuple[str, ...] = ()
        for name in _RECORDS:
            self._import(name, _records_module)
        self._import(model_class.__name__, sys.modules[model_class.__module__])

    # -- names ------------------------------------------------------------------------

    def _import(self, name: str, module: ModuleType) -> bool:
        """Make ``name`` (a global of ``module``) a global of the generated module,
        imported from where it is defined when that is known; False when the name
        already stands for something else there."""
        value = getattr(module, name, None)
        if name in self.globals:
            return self.globals[name] is value
        home = sys.modules.get(getattr(value, "__module__", None) or "")
        source = home if home is not None and getattr(home, name, None) is value else module
        self.globals[name] = value
        self.imports.setdefault(source.__name__, set()).add(name)
        return True

    def _globals_of(self, free: Iterable[str], module: ModuleType, what: str) -> str | None:
        """Import the free names of an inlined body; the reason it cannot be inlined,
        or None."""
        for name in sorted(free):
            if hasattr(module, name):
                if not self._import(name, module):
                    return f"{what} uses {name!r}, which names something else here"
            elif not hasattr(builtins, name):
                return f"{what} uses {name!r}, which is not a global"
            if self.scope is not None:
                if name in self.scope.taken:
                    return f"{what} uses the global {name!r}, a local of the generated method"
                self.scope.globals.add(name)
        return None

    # -- expressions ------------------------------------------------------------------

    def _parameters(self, name: str) -> list[str]:
        signature = inspect.signature(getattr(self.model_class, name))
        return [p for p in signature.parameters if p != "self"]

    def _returns_nothing(self, name: str) -> bool:
        annotation = inspect.signature(getattr(self.model_class, name)).return_annotation
        return annotation in (None, "None")

    def guard_expression(self, name: str, arguments: list[str]) -> ast.expr | None:
        found = _single_expression(name, self.model_class)
        if found is None:
            return None
        parameters, expression = found
        mapping = dict(zip(parameters[1:], arguments, strict=True))
        renamed = _Rename(mapping).visit(ast.parse(ast.unparse(expression), mode="eval").body)
        module = inspect.getmodule(getattr(self.model_class, name))
        assert module is not None
        bound = {  # names a comprehension binds are local to the expression
            target.id
            for node in ast.walk(renamed)
            if isinstance(node, ast.comprehension)
            for target in ast.walk(node.target)
            if isinstance(target, ast.Name)
        }
        free = {
            node.id
            for node in ast.walk(renamed)
            if isinstance(node, ast.Name)
            and node.id not in bound
            and node.id not in parameters
            and node.id not in arguments
        }
        problem = self._globals_of(free, module, f"guard {name!r}")
        if problem is not None:
            raise GenerationError(problem)
        return _Simplify().visit(_Inliner(self).visit(renamed))  # type: ignore[no-any-return]

    def function_expression(self, name: str, arguments: list[str]) -> ast.expr | None:
        """The expression a module function ``name`` returns, its parameters being
        ``arguments``; None when it is not a global function written as one ``return``
        (or its body cannot be copied here)."""
        function = self.globals.get(name)
        if not inspect.isfunction(function) or name in self.inlining:
            return None
        definition = bodies.definition(function)
        if definition is None or definition.decorator_list:
            return None
        signature = definition.args
        parameters = [a.arg for a in signature.args]
        body = bodies.statements(definition)
        if (
            signature.posonlyargs
            or signature.vararg
            or signature.kwonlyargs
            or signature.kwarg
            or len(parameters) != len(arguments)
            or len(body) != 1
            or not isinstance(body[0], ast.Return)
            or body[0].value is None
        ):
            return None
        expression = copy.deepcopy(body[0].value)
        names = {n.id for n in ast.walk(expression) if isinstance(n, ast.Name)}
        bound = {
            n.id
            for n in ast.walk(expression)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
        }
        if bound & (set(parameters) | set(arguments)) or any(
            isinstance(n, _NOT_INLINED) or (isinstance(n, ast.Name) and n.id in _FRAME_NAMES)
            for n in ast.walk(expression)
        ):
            return None
        module = inspect.getmodule(function)
        if module is None:
            return None
        free = names - bound - set(parameters)
        if self._globals_of(free, module, f"function {name!r}") is not None:
            return None
        renamed = _Rename(dict(zip(parameters, arguments, strict=True))).visit(expression)
        self.inlining.add(name)  # a function that calls itself is copied once
        try:
            return _FunctionInliner(self).visit(renamed)  # type: ignore[no-any-return]
        finally:
            self.inlining.discard(name)

    def guard_call(self, name: str, event: str) -> ast.expr:
        """The guard as an expression in the event method's scope: inlined if it is a
        single expression, else a call."""
        parameter = self.model.interface[event].parameter
        wanted = self._parameters(name)
        if wanted and wanted != [parameter]:
            raise GenerationError(
                f"guard {name!r} takes {wanted}, but event {event!r} passes {parameter!r}"
            )
        inlined = self.guard_expression(name, wanted)
        if inlined is not None:
            return inlined
        call = self.body_call(name, ", ".join(wanted))
        return ast.parse(call, mode="eval").body

    def body_call(self, name: str, arguments: str) -> str:
        """A call of a body that is not inlined, through the bodies' class: a
        ``Controller`` does not offer its bodies (they are not the contract's API)."""
        return f"{self.model_class.__name__}.{name}(self{', ' if arguments else ''}{arguments})"

    def translate(self, tree: ast.expr, event: str) -> ast.expr:
        """The guard with each named guard's body inlined: what the generated
        controller evaluates, before the method-local rewrites (the z3 translation
        in ``verification/translate/symbolic.py`` reads this)."""
        if isinstance(tree, ast.Name):
            return self.guard_call(tree.id, event)
        if isinstance(tree, ast.UnaryOp):
            negated = ast.UnaryOp(op=ast.Not(), operand=self.translate(tree.operand, event))
            return _Simplify().visit(negated)  # type: ignore[no-any-return]
        if isinstance(tree, ast.BoolOp):
            return ast.BoolOp(op=tree.op, values=[self.translate(v, event) for v in tree.values])
        raise GenerationError(f"unsupported guard node {ast.dump(tree)}")

    def condition(self, conjuncts: list[ast.expr], event: str) -> tuple[ast.expr, str]:
        """(expression, comment naming the guards) for a conjunction."""
        names = " and ".join(ast.unparse(c) for c in conjuncts)
        translated = [self.translate(c, event) for c in conjuncts]
        expression = (
            translated[0] if len(translated) == 1 else ast.BoolOp(op=ast.And(), values=translated)
        )
        if self.fields:
            parameter = self.model.interface[event].parameter
            assert parameter is not None
            expression = _FieldsToLocals(parameter, self.fields).visit(expression)
        return expression, names

    # -- bodies -----------------------------------------------------------------------

    def inline_body(self, name: str, event: str) -> _Body | None:
        """The body of method ``name`` written into the method of ``event`` (see the
        module docstring), or None when it must be called instead."""
        definition = bodies.method_definition(self.model_class, name)
        if definition is None or self.scope is None:
            return None
        arguments = definition.args
        parameters = [a.arg for a in arguments.args]
        parameter = self.model.interface[event].parameter
        if (
            arguments.posonlyargs
            or arguments.vararg
            or arguments.kwonlyargs
            or arguments.kwarg
            or arguments.defaults
            or not 1 <= len(parameters) <= 2
            or (len(parameters) == 2 and parameter is None)
        ):
            return None
        body = bodies.statements(definition)
        last = body[-1] if body else None
        for tree in body:
            for node in ast.walk(tree):
                if (
                    isinstance(node, _NOT_INLINED)
                    or (isinstance(node, ast.Raise) and node.exc is None)
                    or (isinstance(node, ast.Name) and node.id in _FRAME_NAMES)
                    or (isinstance(node, ast.Return) and node is not last)
                ):
                    return None
        answer: ast.expr | None = None
        raises = isinstance(last, ast.Raise)
        if isinstance(last, ast.Return):
            body, answer = body[:-1], last.value
        trees = [*body, *([answer] if answer is not None else [])]
        names = {n.id for t in trees for n in ast.walk(t) if isinstance(n, ast.Name)}
        locals_ = {
            n.id
            for t in trees
            for n in ast.walk(t)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
        }
        if locals_ & set(parameters) or (parameter in names and parameter not in parameters):
            return None
        module = inspect.getmodule(getattr(self.model_class, name))
        if module is None:
            return None
        free = names - locals_ - set(parameters)
        if self._globals_of(free, module, f"{name!r}") is not None:
            return None
        # Parameters become the method's own names; locals get placeholders no source
        # can contain until their final names are chosen.
        mapping = {parameters[0]: "self"}
        if len(parameters) == 2:
            assert parameter is not None
            mapping[parameters[1]] = parameter
        mapping.update({local: f"${local}" for local in locals_})
        rename = _Rename(mapping)
        statements = [rename.visit(s) for s in body]
        if answer is not None:
            answer = rename.visit(answer)
        inline_guards = _Inliner(self)
        try:
            statements = [inline_guards.visit(s) for s in statements]
            if answer is not None:
                answer = inline_guards.visit(answer)
        except GenerationError:  # a guard it calls cannot be copied here: call the body
            return None
        if self.fields and parameter is not None:
            fields = _FieldsToLocals(parameter, self.fields)
            statements = [fields.visit(s) for s in statements]
            answer = None if answer is None else fields.visit(answer)
        statements, answer = _eliminate_aliases(statements, answer, {f"${n}" for n in locals_})
        remaining = sorted(
            {
                n.id
                for t in [*statements, *([answer] if answer is not None else [])]
                for n in ast.walk(t)
                if isinstance(n, ast.Name) and n.id.startswith("$")
            }
        )
        final = _Rename({p: self.scope.local(name, p[1:]) for p in remaining})
        statements = [ast.fix_missing_locations(final.visit(s)) for s in statements]
        if answer is not None:
            answer = final.visit(answer)
        if isinstance(answer, ast.Constant) and answer.value is None:
            answer = None
        return _Body(statements, answer, raises)

    def action_nodes(self, action: str, event: str) -> tuple[list[_Node], bool]:
        """``result = <the action's answer>``, the action inlined when it can be; and
        whether it always raises."""
        body = self.inline_body(action, event)
        if body is None:
            argument = self.model.interface[event].parameter or ""
            arguments = argument if self._parameters(action) else ""
            call = self.body_call(action, arguments)
            if self._returns_nothing(action):
                return [_Line(_statement(call)), _Line(_statement("result = None"))], False
            return [_Line(_statement(f"result = {call}"))], False
        nodes: list[_Node] = [_Line(None, f"action: {action}")]
        nodes.extend(_Line(s) for s in body.statements)
        if not body.raises:
            answer = body.answer if body.answer is not None else ast.Constant(value=None)
            assign = ast.Assign(targets=[ast.Name(id="result", ctx=ast.Store())], value=answer)
            nodes.append(_Line(ast.fix_missing_locations(assign)))
        return nodes, body.raises

    def check_nodes(self, event: str) -> list[_Node]:
        """The event's input check (inlined when it can be), then, for a record
        argument, its fields in locals (``self.fields``)."""
        interface = self.model.interface[event]
        check, parameter = interface.check, interface.parameter
        assert check is not None and parameter is not None and self.scope is not None
        record = getattr(_records_module, interface.parameter_type or "", None)
        fields: tuple[str, ...] = ()
        if isinstance(record, type) and issubclass(record, tuple):
            fields = tuple(getattr(record, "_fields", ()))
        body = self.inline_body(check, event)
        if body is None or body.answer is not None:
            nodes: list[_Node] = [_Line(_statement(self.body_call(check, parameter)))]
            statements: list[ast.stmt] = []
        else:
            nodes = [_Line(None, f"check: {check}")]
            statements = body.statements
        unpacked = next(
            (
                index
                for index, s in enumerate(statements)
                if isinstance(s, ast.Assign)
                and len(s.targets) == 1
                and isinstance(s.targets[0], ast.Tuple)
                and len(s.targets[0].elts) == len(fields)
                and all(isinstance(e, ast.Name) for e in s.targets[0].elts)
                and isinstance(s.value, ast.Name)
                and s.value.id == parameter
                and all(
                    _bindings(statements, e.id) == 1  # type: ignore[attr-defined]
                    for e in s.targets[0].elts
                )
            ),
            None,
        )
        if fields and unpacked is not None:
            target = statements[unpacked].targets[0]  # type: ignore[attr-defined]
            self.fields = dict(zip(fields, (e.id for e in target.elts), strict=True))
            rewrite = _FieldsToLocals(parameter, self.fields)
            statements[unpacked + 1 :] = [rewrite.visit(s) for s in statements[unpacked + 1 :]]
        nodes.extend(_Line(s) for s in statements)
        if fields and unpacked is None:
            self.fields = {f: self.scope.fresh(f) for f in fields}
            nodes.append(_Line(_statement(f"{', '.join(self.fields.values())} = {parameter}")))
        return nodes

    # -- the dispatch -----------------------------------------------------------------

    def transition_nodes(self, transition: TransitionInfo) -> list[_Node]:
        """One transition's code; for a row every state in ``self.sharing`` has (the
        same guard, action and target), one copy with the fired index chosen by state."""
        action, raises = self.action_nodes(transition.action, transition.event)
        rows = self._same_rows(transition)
        if len(rows) == 1:
            comment, fired = f"{transition.index}: {transition.label}", str(transition.index)
        else:
            sources = "|".join(t.source for t in rows)
            label = transition.label.replace(f"{transition.source} --", f"{sources} --", 1)
            if _row(transition)[2] is None:  # each stays where it is
                label = label.rsplit("--> ", 1)[0] + "--> (stays)"
            comment = f"{', '.join(str(t.index) for t in rows)}: {label}"
            fired = str(rows[-1].index)
            for row in reversed(rows[:-1]):
                constant = _state_constant(self.model.state(row.source))
                fired = f"{row.index} if current == {constant} else {fired}"
        nodes: list[_Node] = [_Line(None, comment), _Line(_statement(f"fired = {fired}")), *action]
        moves = _row(transition)[2] is not None and (
            transition.target != transition.source or len(rows) > 1
        )
        if moves and not raises:
            target = _state_constant(self.model.state(transition.target))
            nodes.append(_Line(_statement(f"self._declared_state = {target}")))
        return nodes

    def _same_rows(self, transition: TransitionInfo) -> list[TransitionInfo]:
        """The transition and its copies out of the other states that share its chain
        (the states of ``self.sharing``), in their order."""
        if len(self.sharing) < 2:
            return [transition]
        position = transition.priority - 1
        return [self.model.leaving(s, transition.event)[position] for s in self.sharing]

    def branch_nodes(self, branches: list[_Branch], event: str) -> list[_Node]:
        arms: list[_Arm] = []
        index = 0
        while index < len(branches):
            branch = branches[index]
            if not branch.conjuncts:
                nodes = self.transition_nodes(branch.transition)
                if not arms:
                    return nodes
                arms.append(_Arm(None, "", nodes))
                return [_Chain(arms)]  # anything after it is unreachable
            head = ast.dump(branch.conjuncts[0])
            end = index + 1
            while (
                end < len(branches)
                and branches[end].conjuncts
                and ast.dump(branches[end].conjuncts[0]) == head
            ):
                end += 1
            group = branches[index:end]
            if len(group) > 1 and len(group[-1].conjuncts) == 1:
                test, names = self.condition(branch.conjuncts[:1], event)
                inner = [_Branch(b.conjuncts[1:], b.transition) for b in group]
                arms.append(_Arm(test, names, self.branch_nodes(inner, event)))
                index = end
            else:
                test, names = self.condition(branch.conjuncts, event)
                arms.append(_Arm(test, names, self.transition_nodes(branch.transition)))
                index += 1
        message = f"raise AssertionError(f'no declared transition for {event} in {{current!r}}')"
        arms.append(_Arm(None, "", [_Line(_statement(message))]))
        return [_Chain(arms)]

    def method_body(self, event: str) -> list[_Node]:
        """The statements inside the event method's ``try``."""
        interface = self.model.interface[event]
        parameter = interface.parameter
        nodes: list[_Node] = []
        if interface.check:
            nodes.extend(self.check_nodes(event))
        checked = len(nodes)
        nodes.append(_Line(_statement("current = self._declared_state")))
        arms = []
        for sharing in _sharing_states(self.model, event):
            constants = [_state_constant(self.model.state(s)) for s in sharing]
            test = (
                f"current == {constants[0]}"
                if len(sharing) == 1
                else f"current in ({', '.join(constants)})"
            )
            self.sharing = sharing
            first = self.model.leaving(sharing[0], event)
            branches = self.branch_nodes([_Branch(_conjuncts(t), t) for t in first], event)
            self.sharing = ()
            arms.append(_Arm(ast.parse(test, mode="eval").body, "", branches))
        stopped, _ = self.action_nodes(interface.when_stopped, event)
        if arms:
            arms.append(_Arm(None, "a final state: the run stopped, nothing changes", stopped))
            nodes.append(_Chain(arms))
        else:
            nodes.extend(stopped)
        _rewrite(nodes, _FunctionInliner(self))
        _rewrite(nodes, _Flatten())
        # Fields of self read into locals, for the whole body.
        assert self.scope is not None
        self.scope.taken.update(
            n.id for tree in _trees(nodes) for n in ast.walk(tree) if isinstance(n, ast.Name)
        )
        fields = self._fields_read_once(nodes)
        if fields:
            _rewrite(nodes, _SelfToLocals(fields))
            bindings = [_Line(_statement(f"{local} = self.{f}")) for f, local in fields.items()]
            nodes[:0] = bindings
            checked += len(bindings)
        # Tuples of never-rebound locals, for the dispatch after the check.
        invariant = {parameter, *self.fields.values(), *fields.values()} - {None}
        tuples = self._tuples_built_once(nodes[checked:], invariant)  # type: ignore[arg-type]
        if tuples:
            _rewrite(nodes[checked:], _TuplesToLocals(tuples))
            nodes[checked:checked] = [
                _Line(_statement(f"{local} = ({', '.join(names)})"))
                for names, local in tuples.items()
            ]
        _rewrite(nodes, _MembersToConstants(self))
        return nodes

    def constant(self, enumeration: str, member: str) -> str:
        """The module constant standing for ``enumeration.member`` (declared once)."""
        qualified = f"{enumeration}.{member}"
        if qualified not in self.constants:
            enumerations = [*vars(_records_module).values(), *self.globals.values()]
            shared = any(
                isinstance(other, EnumMeta)
                and other.__name__ != enumeration
                and member in other.__members__
                for other in enumerations
            )
            value = self.globals[enumeration].__members__[member]  # type: ignore[attr-defined]
            same = [n for n, v in self.globals.items() if v is value and n.isupper()]
            if same:
                name = same[0]
            else:
                name = f"{_upper_snake(enumeration)}_{member}" if shared else member
                if name in self.globals or name in self.constants.values():
                    raise GenerationError(f"{qualified}: the constant {name!r} is taken")
            self.constants[qualified] = name
        return self.constants[qualified]

    def _fields_read_once(self, nodes: list[_Node]) -> dict[str, str]:
        """The fields of ``self`` to read into locals: read twice or more along one
        path, always set by ``__init__``, rebound neither here nor by any method still
        called from here. Field -> local, in order of first use."""
        assert self.scope is not None
        candidates = _fields_set_by_init(self.model_class)
        trees = list(_trees(nodes))
        rebound: set[str] = set()
        for tree in trees:
            stores = _self_stores(tree)
            if stores is None:
                return {}
            rebound |= stores
            for call in ast.walk(tree):
                if isinstance(call, ast.Call) and _is_self_attribute(call.func):
                    called = _stores_of_method(self.model_class, call.func.attr, set())
                    if called is None:
                        return {}
                    rebound |= called

        def reads(tree: ast.AST) -> Counter[str]:
            return Counter(
                n.attr
                for n in _walk_outside_scopes(tree)
                if _is_self_attribute(n) and isinstance(n.ctx, ast.Load)
            )

        order = [field for tree in trees for field in reads(tree)]
        most = _most_on_a_path(nodes, reads)
        return {
            field: self.scope.fresh(field.lstrip("_") or field)
            for field in dict.fromkeys(order)
            if field in candidates and field not in rebound and most[field] >= 2
        }

    def _tuples_built_once(
        self, nodes: list[_Node], invariant: set[str]
    ) -> dict[tuple[str, ...], str]:
        assert self.scope is not None

        def built(tree: ast.AST) -> Counter[tuple[str, ...]]:
            return Counter(
                names
                for n in _walk_outside_scopes(tree)
                if (names := _tuple_of_names(n)) is not None and set(names) <= invariant
            )

        order = [names for tree in _trees(nodes) for names in built(tree)]
        most = _most_on_a_path(nodes, built)
        return {
            names: self.scope.fresh("_".join(names))
            for names in dict.fromkeys(order)
            if most[names] >= 2
        }

    # -- writing it out ---------------------------------------------------------------

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text if text else "")

    def emit_nodes(self, indent: int, nodes: list[_Node]) -> None:
        for node in nodes:
            if isinstance(node, _Line):
                if node.statement is None:
                    self.emit(indent, f"# {node.comment}")
                    continue
                suffix = f"  # {node.comment}" if node.comment else ""
                text = _unparse(node.statement).splitlines()
                for line in text[:-1]:
                    self.emit(indent, line)
                self.emit(indent, text[-1] + suffix)
                continue
            for position, arm in enumerate(node.arms):
                suffix = f"  # {arm.comment}" if arm.comment else ""
                if arm.test is None:
                    self.emit(indent, f"else:{suffix}")
                else:
                    keyword_ = "if" if position == 0 else "elif"
                    self.emit(indent, f"{keyword_} {_unparse(arm.test)}:{suffix}")
                self.emit_nodes(indent + 1, arm.body)

    def emit_fields(self) -> None:
        """``__init__`` and ``_export_state`` written out from the field table
        (``controller/fields.py``): the generic ones loop over it, and a run is built
        and exported on every episode and every explored state. A run class with its
        own ``__init__`` keeps it."""
        if _own(self.model_class, "__init__") is _own(Run, "__init__"):
            for name in ("DEFAULT_POLICY", "Policy"):
                self._import(name, _policy_module)
            self.emit(1, "def __init__(self, policy: Policy | None = None) -> None:")
            self.emit(2, '"""A fresh run: the initial values of ``controller/fields.py``."""')
            self.emit(2, "self.policy = DEFAULT_POLICY if policy is None else policy")
            for field in FIELDS:
                self.emit(2, f"self.{field.attribute} = {field.initial!r}")
            self.emit(0, "")
        if _own(self.model_class, "_export_state") is _own(Run, "_export_state"):
            self._import("RunState", _fields_module)
            self._import("UNKNOWN", _fields_module)
            self.emit(1, "def _export_state(self) -> RunState:")
            self.emit(2, '"""``controller.fields.export_state``, written out."""')
            self.emit(2, "return (")
            for field in STATE_FIELDS:
                self.emit(3, f"{export_expression(field, 'self.' + field.attribute)},")
            self.emit(2, ")")
            self.emit(0, "")

    def emit_event(self, event: str) -> None:
        interface = self.model.interface[event]
        parameter = interface.parameter
        signature = f"self, {parameter}: {interface.parameter_type}" if parameter else "self"
        argument = parameter or "None"
        reserved = {"self", "result", "fired", "current", "error", *_MODULE_NAMES}
        self.scope = _Scope(reserved | ({parameter} if parameter else set()), self.globals)
        self.fields = {}
        body = self.method_body(event)
        self._check_no_shadowing(event, body)
        self.scope, self.fields = None, {}
        self.emit(1, f"def {event}({signature}) -> {interface.returns}:")
        sources = [s for s in self.model.active_states if self.model.leaving(s.id, event)]
        self.emit(
            2,
            f'"""Dispatch ``{event}`` over: {", ".join(s.id for s in sources)}; '
            'final states absorb it."""',
        )
        self.emit(2, f"result: {interface.returns}")
        self.emit(2, "fired: int | None = None")
        self.emit(2, "try:")
        self.emit_nodes(3, body)
        self.emit(2, "except Exception as error:")
        self.emit(
            3,
            f"self._trace.append(({event!r}, {argument}, type(error), "
            "self._evidence_revision, self._declared_state, fired))",
        )
        self.emit(3, "raise")
        self.emit(
            2,
            f"self._trace.append(({event!r}, {argument}, result, "
            "self._evidence_revision, self._declared_state, fired))",
        )
        self.emit(2, "return result")
        self.emit(0, "")

    def _check_no_shadowing(self, event: str, nodes: list[_Node]) -> None:
        assert self.scope is not None
        bound = {
            n.id
            for tree in _trees(nodes)
            for n in ast.walk(tree)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
        }
        self.bound |= bound
        shadowed = bound & (self.scope.globals | set(self.globals))
        if shadowed:
            raise GenerationError(
                f"{event}: the generated method binds {sorted(shadowed)}, "
                "which inlined code reads as globals"
            )

    def emit_hidden_bodies(self) -> None:
        """The bodies the event methods run, hidden on a run: they are not the
        contract's API (``replan.controller.surface``)."""
        self._import("hide_bodies", _surface_module)
        emit = self.emit
        emit(0, "")
        emit(0, "")
        emit(0, "#: The declaration's bodies (guards, actions, checks, stopped-run answers): the")
        emit(0, "#: event methods above run them; called on a run they would skip every guard.")
        emit(0, "BODIES = (")
        for line in textwrap.wrap(" ".join(f"{n!r}," for n in self.model.body_names), 84):
            emit(1, line)
        emit(0, ")")
        emit(0, "hide_bodies(Controller, BODIES)")

    def render(self) -> str:
        model = self.model
        emit = self.emit
        emit(0, f"# GENERATED by `replan generate` from {model.module}.{model.name}; do not edit.")
        emit(0, f"# Declaration digest: {model.digest}")
        origin = f"{self.model_class.__module__}.{self.model_class.__qualname__}"
        emit(0, f"# Guard, check and action bodies inlined from {origin} (each named in")
        emit(0, "# a comment). Change the declaration, then run `replan generate`.")
        emit(0, '"""The generated controller: the declaration\'s dispatch as plain Python.')
        emit(0, "")
        emit(0, "Each event method checks its input, then follows the declared state's")
        emit(0, "transitions in priority order; the first whose guard holds runs its action")
        emit(0, "(whose return value is the answer) and sets the target state. Every call")
        emit(0, "appends one trace entry, errors included.")
        emit(0, '"""')
        emit(0, "")
        emit(0, "from __future__ import annotations")
        emit(0, "")
        header_end = len(self.lines)
        emit(0, f'DECLARATION_DIGEST = "{model.digest}"')
        emit(0, "")
        emit(0, "#: Every declared transition, by index (the trace names the one that fired).")
        emit(0, "TRANSITIONS: tuple[str, ...] = (")
        for transition in model.transitions:
            emit(1, f"{transition.label!r},  # {transition.index}")
        emit(0, ")")
        emit(0, "")
        emit(0, "#: The diagram's label of every transition, by index (``replan diagram``: event,")
        emit(0, "#: priority where several compete, guard, action): what a trace span is named.")
        emit(0, "LABELS: tuple[str, ...] = (")
        for transition in model.transitions:
            emit(1, f"{diagram_label(model, transition)!r},  # {transition.index}")
        emit(0, ")")
        emit(0, "")
        emit(0, "#: Every event: (its parameter, the parameter's type, who may call it).")
        emit(0, "EVENTS: dict[str, tuple[str | None, str | None, str]] = {")
        for event, interface in model.interface.items():
            described = (interface.parameter, interface.parameter_type, interface.caller)
            emit(1, f"{event!r}: {described!r},")
        emit(0, "}")
        emit(0, "")
        emit(0, "")
        emit(0, f"class Controller({self.model_class.__name__}):")
        emit(1, '"""One run of the controller (CONTRACT.md), owned by one caller at a time."""')
        emit(0, "")
        emit(1, "__slots__ = ()")
        emit(1, "transitions = TRANSITIONS")
        emit(1, "events = EVENTS")
        emit(0, "")
        self.emit_fields()
        for event in model.events:
            self.emit_event(event)
        while self.lines and not self.lines[-1]:
            self.lines.pop()
        self.emit_hidden_bodies()
        # Imports last: the inlined bodies decide which names are needed (a function
        # inlined after its call was written needs its own names, not its own).
        constants = [
            f"{name} = {qualified}"
            for qualified, name in sorted(self.constants.items(), key=lambda c: c[1])
            if name not in self.globals
        ]
        used = {
            n.id
            for n in ast.walk(ast.parse("\n".join([*self.lines, *constants])))
            if isinstance(n, ast.Name)
        }
        block = []
        for module, names in sorted(self.imports.items()):
            ordered = sorted(names & used, key=_import_order)
            if not ordered:
                continue
            line = f"from {module} import {', '.join(ordered)}"
            if len(line) > 100:  # wrapped the way ruff's isort wraps it
                line = "\n".join([f"from {module} import (", *(f"    {n}," for n in ordered), ")"])
            block.append(line)
        if self.bound & set(self.constants.values()):
            raise GenerationError(
                f"a generated method binds {sorted(self.bound & set(self.constants.values()))}, "
                "which name enumeration members"
            )
        if constants:
            block += [
                "",
                "#: Enumeration members the methods read, bound once (read through its class, a",
                "#: member costs a class attribute lookup every time).",
                *constants,
            ]
        self.lines[header_end:header_end] = [*block, ""]
        source = "\n".join(self.lines) + "\n"
        ast.parse(source)  # the output must at least be Python
        return source


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


def generate_source(machine_class: type | None = None, model_class: type = Run) -> str:
    """The text of ``controller/_generated.py`` for a declaration (default: the
    project's ``replan.spec.declaration.Replanning``)."""
    if machine_class is None:
        from replan.spec.declaration import Replanning

        machine_class = Replanning
    return render_controller(extract(machine_class, model_class), model_class)


def render_controller(model: MachineModel, model_class: type = Run) -> str:
    """The generated source for an already extracted (possibly transformed) model:
    what mutation tests use to build deliberately broken controllers the same way
    the real one is built."""
    return _Generator(model, model_class).render()


#: The module a controller loaded from another declaration or bodies is generated
#: into is this prefix and its name, dashes as underscores (a broken controller of
#: ``verification.subjects.mutants`` is importable there under that name too).
GENERATED_PREFIX = "replan_generated_"


def load_controller(model: MachineModel, model_class: type = Run, name: str = "") -> type[Run]:
    """Generate and load a controller class in memory (never written to disk)."""
    return load_source(render_controller(model, model_class), name or model.name)


def load_source(source: str, name: str) -> type[Run]:
    """The ``Controller`` class a generated module's ``source`` defines, loaded in
    memory. The source is registered like a file's, so its methods can be read back
    (the translation validation translates exactly what runs) and tracebacks show it."""
    filename = f"<generated {name} {hashlib.sha256(source.encode()).hexdigest()[:12]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, object] = {"__name__": GENERATED_PREFIX + name.replace("-", "_")}
    exec(compile(source, filename, "exec"), namespace)
    controller = namespace["Controller"]
    assert isinstance(controller, type) and issubclass(controller, Run)
    return controller


def check_generated(path: Path = GENERATED_PATH) -> bool:
    """True when the file on disk is exactly what the declaration generates."""
    try:
        on_disk = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    return on_disk == generate_source()


def write_generated(path: Path = GENERATED_PATH) -> bool:
    """Write the generated file; True when its content changed."""
    source = generate_source()
    try:
        if path.read_text(encoding="utf-8") == source:
            return False
    except FileNotFoundError:
        pass
    path.write_text(source, encoding="utf-8")
    return True
