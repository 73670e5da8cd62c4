"""The language the contract's properties are written in.

Owns: the decorators that name a property (``call_property``, ``state_invariant``,
``auxiliary_invariant``, ...), which tag the function with its ``Property`` and
register it nowhere (``spec/contract.py`` collects a module's tagged functions into a
``Contract``, a value), and the few helpers a property uses besides plain Python
(``raised``, ``unchanged``, ``with_entry``, ``with_member``) with their Python meaning.
Leaves to ``spec/properties.py`` what the properties say, to ``spec/checker.py`` their
evaluation on concrete calls, and to
``verification/translate/symbolic.py`` the z3 meaning of the same helpers (keyed by these
function objects), so one definition is run by the campaign and the explorer and
proved by z3.

A property is a plain function over the run before and after one call. Its
parameters say what it reads, by name: ``before`` and ``after`` (the run, read
through its fields and read-only members), ``answer`` (what the call returned, or the
class of the error it raised), ``event`` (the operation's name), ``argument`` (the
call's argument, whatever the event) or the event's own parameter name (``obs``,
``plan``, ``plan_id``), and ``appended`` (the trace records the call added). A state
invariant takes ``run``. The body is the restricted Python the z3 translator reads:
comparisons, ``and``/``or``/``not``, ``if``/``return``, local names, calls of other
such functions, ``all``/``any`` over the policy's names, and the helpers below.
Stdlib only.
"""

from __future__ import annotations

import ast
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from replan.controller.fields import COMPONENTS as FIELD_COMPONENTS
from replan.spec import bodies

#: The observable parts of a run (what ``snapshot()`` shows), and the fields of
#: ``controller.run.Run`` each one is read from: the field table's
#: (``controller/fields.py``). ``unchanged`` compares these.
COMPONENTS: Mapping[str, tuple[str, ...]] = FIELD_COMPONENTS

#: Names a property's parameters may have besides an event's own parameter name.
CALL_PARAMETERS = frozenset({"before", "after", "answer", "event", "argument", "appended"})


# ---- helpers: their Python meaning (the z3 one is verification/translate/symbolic.py's) ------


def raised(answer: object, error: type[BaseException] = Exception) -> bool:
    """The call raised ``error`` (or any error): ``answer`` is its class."""
    return isinstance(answer, type) and issubclass(answer, error)


def unchanged(before: Any, after: Any, *changing: str) -> bool:
    """Every observable component of the run (``COMPONENTS``) except ``changing`` is
    as it was. Evidence compares each key's latest version and state, not how the run
    stores them."""
    return _comparator(changing)(before, after)


def unchanged_expression(changing: tuple[str, ...]) -> str:
    """``unchanged(b, a, *changing)`` as one Python expression over the names ``b``
    and ``a``: what ``_comparator`` runs and what the compiled checks inline."""
    unknown = set(changing) - set(COMPONENTS)
    if unknown:
        raise ValueError(f"unchanged(): {', '.join(sorted(unknown))} is not a component")
    parts = []
    for name, fields in COMPONENTS.items():
        if name in changing:
            continue
        if name == "evidence":
            parts.append("b._latest_version == a._latest_version")
            parts.append(
                "(b._known == a._known"
                " or all(b.evidence_state(k) == a.evidence_state(k) for k in b.policy.keys))"
            )
        else:
            parts.append(f"b.{fields[0]} == a.{fields[0]}")
    return f"({' and '.join(parts) or 'True'})"


@functools.cache
def _comparator(changing: tuple[str, ...]) -> Callable[[Any, Any], bool]:
    """``unchanged`` for one set of changing components, written out (it runs on
    every transition the explorer makes)."""
    source = f"def same(b, a):\n    return {unchanged_expression(changing)}\n"
    namespace: dict[str, Any] = {}
    exec(
        compile(source, f"<unchanged except {', '.join(changing) or 'nothing'}>", "exec"), namespace
    )
    compared: Callable[[Any, Any], bool] = namespace["same"]
    return compared


def with_entry(mapping: Mapping[Any, Any], index: Any, value: Any) -> dict[Any, Any]:
    """``mapping`` with ``index`` set to ``value``, the rest as it was."""
    return {**mapping, index: value}


def with_member(members: Iterable[Any], item: Any) -> set[Any]:
    """``members`` with ``item`` added."""
    return {*members, item}


HELPERS: tuple[Callable[..., Any], ...] = (raised, unchanged, with_entry, with_member)


# ---- naming a property ---------------------------------------------------------------


@dataclass(frozen=True)
class Property:
    """One named property: a contract rule, a state invariant or an auxiliary one."""

    name: str
    kind: str  # "call" | "initial" | "invariant" | "auxiliary" | "policy"
    rule: str  # where CONTRACT.md states it, e.g. "observe 3"
    events: tuple[str, ...] | None  # the events a call property constrains (None: all)
    function: Callable[..., bool]
    parameters: tuple[str, ...]

    @property
    def meaning(self) -> str:
        """The first paragraph of the docstring, on one line."""
        text = inspect.getdoc(self.function) or ""
        return " ".join(text.split("\n\n")[0].split())

    def applies_to(self, event: str) -> bool:
        return self.events is None or event in self.events

    @property
    def reads_argument(self) -> bool:
        """Whether the verdict may depend on the call's argument (so a checker may
        reuse it for calls that agree on everything else)."""
        fixed = {"before", "after", "answer", "event", "appended"}
        return any(p not in fixed for p in self.parameters) or "appended" in self.parameters

    def reads_argument_on(self, event: str) -> bool:
        """``reads_argument`` for calls of ``event`` alone: the body's tests of
        ``event`` against constants are decided first, so a property that reads the
        argument only on another event's branch (``event == "observe" and
        meaningful(before, argument)``) is argument-free on this one, and the explorer
        evaluates it once per distinct edge instead of once per call."""
        if not self.reads_argument:
            return False
        if "appended" in self.parameters:
            return True
        return _reads_argument_on(self.function, self.parameters, event)


#: The attribute a decorator sets on a property's function: its ``Property``.
PROPERTY_ATTRIBUTE = "__replan_property__"


def _register(
    name: str, kind: str, rule: str, events: tuple[str, ...] | None
) -> Callable[[Callable[..., bool]], Callable[..., bool]]:
    def decorate(function: Callable[..., bool]) -> Callable[..., bool]:
        parameters = tuple(inspect.signature(function).parameters)
        prop = Property(name, kind, rule, events, function, parameters)
        setattr(function, PROPERTY_ATTRIBUTE, prop)
        return function  # unwrapped: the z3 translator reads its source

    return decorate


def property_of(function: object) -> Property | None:
    """The ``Property`` a decorator tagged ``function`` with, if any."""
    found = getattr(function, PROPERTY_ATTRIBUTE, None)
    return found if isinstance(found, Property) else None


def call_property(
    name: str, *events: str, rule: str = ""
) -> Callable[[Callable[..., bool]], Callable[..., bool]]:
    """A property of one call of ``events`` (every event when none is named)."""
    return _register(name, "call", rule, events or None)


def state_invariant(
    name: str, rule: str = ""
) -> Callable[[Callable[..., bool]], Callable[..., bool]]:
    """A predicate every reachable state satisfies (proved inductive)."""
    return _register(name, "invariant", rule, None)


def auxiliary_invariant(name: str) -> Callable[[Callable[..., bool]], Callable[..., bool]]:
    """A fact about the run's bookkeeping that the inductive proofs need; proved the
    same way, checked by the same engines, but not a rule of the contract."""
    return _register(name, "auxiliary", "", None)


def initial_property(
    name: str, rule: str = ""
) -> Callable[[Callable[..., bool]], Callable[..., bool]]:
    """A predicate of a fresh run (``run``, and the ``policy`` it was created with)."""
    return _register(name, "initial", rule, None)


def policy_property(
    name: str, rule: str = ""
) -> Callable[[Callable[..., bool]], Callable[..., bool]]:
    """A property of loading a policy (its one parameter: a function from a policy
    document to a ``Policy``). Checked when a policy is checked, not per call."""
    return _register(name, "policy", rule, None)


def function_tree(function: Callable[..., Any]) -> ast.FunctionDef:
    """A property's (or helper's) definition, parsed (what the translator reads)."""
    definition = bodies.definition(function)
    if definition is None:
        raise ValueError(f"{function.__name__}: not a plain function whose source can be read")
    return definition


@functools.cache
def _reads_argument_on(
    function: Callable[..., bool], parameters: tuple[str, ...], event: str
) -> bool:
    """Whether ``function``'s body, with ``event`` fixed, may still read a parameter
    that is the call's argument. Conservative: a signature that is not plain
    positional parameters counts as reading it, tests of ``event`` are decided only
    when it is a parameter the body never binds again, and every operand the folding
    cannot drop counts as read."""
    definition = function_tree(function)
    signature = definition.args
    if signature.posonlyargs or signature.vararg or signature.kwonlyargs or signature.kwarg:
        return True
    argument_names = {p for p in parameters if p not in CALL_PARAMETERS - {"argument"}}
    if "event" in parameters and not _binds_event(definition):
        # The name is the call's event everywhere in the body: its tests can be decided.
        folded = _EventFolder(event).visit(definition)
        assert isinstance(folded, ast.FunctionDef)
        definition = folded
    definition.body = _reachable(definition.body)
    return any(
        isinstance(node, ast.Name) and node.id in argument_names
        for statement in definition.body
        for node in ast.walk(statement)
    )


def _binds_event(definition: ast.FunctionDef) -> bool:
    """Whether the body gives the name ``event`` another value anywhere (an assignment,
    a loop or comprehension target, a lambda's or a nested function's parameter)."""
    for statement in definition.body:
        for node in ast.walk(statement):
            if (
                isinstance(node, ast.Name)
                and node.id == "event"
                and not isinstance(node.ctx, ast.Load)
            ):
                return True
            if isinstance(node, ast.arg) and node.arg == "event":
                return True
    return False


class _EventFolder(ast.NodeTransformer):
    """Replaces ``event == "x"`` and ``!=`` a constant string, and ``event in`` and
    ``not in`` a tuple, list or set of constant strings, by its value for one event;
    then folds ``not`` of a constant, and ``and``, ``or`` and ``if`` over the results.
    An operand is dropped only when it is a constant: a decided expression may still
    read the argument (and raise)."""

    def __init__(self, event: str) -> None:
        self.event = event

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if not (isinstance(node.left, ast.Name) and node.left.id == "event" and len(node.ops) == 1):
            return node
        operator, right = node.ops[0], node.comparators[0]
        if isinstance(operator, ast.Eq | ast.NotEq):
            if not (isinstance(right, ast.Constant) and isinstance(right.value, str)):
                return node
            equal = self.event == right.value
            return ast.Constant(equal if isinstance(operator, ast.Eq) else not equal)
        if isinstance(operator, ast.In | ast.NotIn):
            if not isinstance(right, ast.Tuple | ast.List | ast.Set) or not all(
                isinstance(element, ast.Constant) and isinstance(element.value, str)
                for element in right.elts
            ):
                return node
            member = self.event in {element.value for element in right.elts}  # type: ignore[attr-defined]
            return ast.Constant(member if isinstance(operator, ast.In) else not member)
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not) and isinstance(node.operand, ast.Constant):
            return ast.Constant(not node.operand.value)
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        deciding = isinstance(node.op, ast.Or)  # the truth value that ends the chain
        kept: list[ast.expr] = []
        for position, value in enumerate(node.values):
            known = _truth(value)
            last = position == len(node.values) - 1
            if isinstance(value, ast.Constant) and known != deciding and not last:
                continue  # a constant that lets the chain go on
            kept.append(value)
            if known == deciding:
                break  # what follows is never evaluated
        if len(kept) == 1:
            return kept[0]
        return ast.BoolOp(op=node.op, values=kept)

    def visit_If(self, node: ast.If) -> Any:
        self.generic_visit(node)
        known = _truth(node.test)
        if known is None:
            return node
        taken = node.body if known else node.orelse
        return [ast.Expr(node.test), *taken]


def _truth(node: ast.AST) -> bool | None:
    """The truth value of a folded expression, when it is decided."""
    if isinstance(node, ast.Constant):
        return bool(node.value)
    if isinstance(node, ast.BoolOp):
        deciding = isinstance(node.op, ast.Or)
        if any(_truth(value) == deciding for value in node.values):
            return deciding
        if all(_truth(value) == (not deciding) for value in node.values):
            return not deciding
    return None


def _reachable(body: list[ast.stmt]) -> list[ast.stmt]:
    """``body`` up to its first statement that always returns."""
    kept: list[ast.stmt] = []
    for statement in body:
        if isinstance(statement, ast.If):
            statement.body = _reachable(statement.body)
            statement.orelse = _reachable(statement.orelse)
        kept.append(statement)
        if isinstance(statement, ast.Return) or (
            isinstance(statement, ast.If)
            and _returns(statement.body)
            and _returns(statement.orelse)
        ):
            break
    return kept


def _returns(body: list[ast.stmt]) -> bool:
    return bool(body) and (
        isinstance(body[-1], ast.Return)
        or (isinstance(body[-1], ast.If) and _returns(body[-1].body) and _returns(body[-1].orelse))
    )
