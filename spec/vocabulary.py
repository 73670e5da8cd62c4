"""The language the contract's properties are written in, and the registry of them.

Owns: the decorators that name a property (``call_property``, ``state_invariant``,
``auxiliary_invariant``), the registry they fill, the few helpers a property uses
besides plain Python (``raised``, ``unchanged``, ``with_entry``, ``with_member``) with
their Python meaning, and ``Checker``, which evaluates every property on one call or
one state. Leaves to ``spec/properties.py`` what the properties say, and to
``verification/symbolic.py`` the z3 meaning of the same helpers (keyed by these
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
import inspect
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: The observable parts of a run (what ``snapshot()`` shows), and the fields of
#: ``controller.run.Run`` each one is read from. ``unchanged`` compares these.
COMPONENTS: dict[str, tuple[str, ...]] = {
    "declared_state": ("_declared_state",),
    "evidence_revision": ("_evidence_revision",),
    "plan_revision": ("_plan_revision",),
    "steps": ("_steps",),
    "proposals": ("_proposals",),
    "no_progress": ("_no_progress",),
    "pending": ("_pending",),
    "evidence": ("_latest_version", "_known"),
    "contents": ("_contents",),
    "accepted": ("_accepted",),
    "completed": ("_completed",),
}

#: Names a property's parameters may have besides an event's own parameter name.
CALL_PARAMETERS = frozenset({"before", "after", "answer", "event", "argument", "appended"})


# ---- helpers: their Python meaning (the z3 one is verification/symbolic.py's) ------


def raised(answer: object, error: type[BaseException] = Exception) -> bool:
    """The call raised ``error`` (or any error): ``answer`` is its class."""
    return isinstance(answer, type) and issubclass(answer, error)


def unchanged(before: Any, after: Any, *changing: str) -> bool:
    """Every observable component of the run (``COMPONENTS``) except ``changing`` is
    as it was. Evidence compares each key's latest version and state, not how the run
    stores them."""
    for name, fields in COMPONENTS.items():
        if name in changing:
            continue
        if name == "evidence":
            if before._latest_version != after._latest_version or any(
                before.state(key) != after.state(key) for key in before.policy.keys
            ):
                return False
        elif getattr(before, fields[0]) != getattr(after, fields[0]):
            return False
    return True


def with_entry(mapping: Mapping[Any, Any], index: Any, value: Any) -> dict[Any, Any]:
    """``mapping`` with ``index`` set to ``value``, the rest as it was."""
    return {**mapping, index: value}


def with_member(members: Iterable[Any], item: Any) -> set[Any]:
    """``members`` with ``item`` added."""
    return {*members, item}


HELPERS: tuple[Callable[..., Any], ...] = (raised, unchanged, with_entry, with_member)


# ---- the registry --------------------------------------------------------------------


@dataclass(frozen=True)
class Property:
    """One named property: a contract rule, a state invariant or an auxiliary one."""

    name: str
    kind: str  # "call" | "invariant" | "auxiliary"
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
        fixed = {"before", "after", "answer", "event", "appended", "run"}
        return any(p not in fixed for p in self.parameters) or "appended" in self.parameters


#: Every property, in declaration order (``spec/properties.py`` fills it on import).
REGISTRY: dict[str, Property] = {}


def _register(
    name: str, kind: str, rule: str, events: tuple[str, ...] | None
) -> Callable[[Callable[..., bool]], Callable[..., bool]]:
    def decorate(function: Callable[..., bool]) -> Callable[..., bool]:
        if name in REGISTRY:
            raise ValueError(f"property {name!r} is declared twice")
        parameters = tuple(inspect.signature(function).parameters)
        REGISTRY[name] = Property(name, kind, rule, events, function, parameters)
        return function  # unwrapped: the z3 translator reads its source

    return decorate


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


def function_tree(function: Callable[..., Any]) -> ast.FunctionDef:
    """A property's (or helper's) definition, parsed (what the translator reads)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    definition = tree.body[0]
    if not isinstance(definition, ast.FunctionDef):
        raise ValueError(f"{function.__name__}: not a plain function")
    return definition


# ---- evaluating them -----------------------------------------------------------------


class Checker:
    """Evaluates the registered properties on concrete calls and states.

    ``call`` and ``state`` return the names of the properties that do not hold (a
    property that raises does not hold either: its message is kept in ``errors``).
    ``before`` and ``after`` are runs (``controller.run.Run`` objects, or anything with
    the same fields); nothing here changes them."""

    def __init__(self, properties: Iterable[Property] | None = None) -> None:
        chosen = list(REGISTRY.values() if properties is None else properties)
        self.properties = chosen
        self._by_event: dict[str, list[Property]] = {}
        self.invariants = [p for p in chosen if p.kind != "call"]
        self.errors: dict[str, str] = {}

    def for_event(self, event: str) -> list[Property]:
        found = self._by_event.get(event)
        if found is None:
            found = self._by_event[event] = [
                p for p in self.properties if p.kind == "call" and p.applies_to(event)
            ]
        return found

    def call(
        self,
        event: str,
        before: Any,
        argument: Any,
        answer: Any,
        after: Any,
        appended: Any = (),
        only: Iterable[Property] | None = None,
    ) -> list[str]:
        values = {
            "before": before,
            "after": after,
            "answer": answer,
            "event": event,
            "argument": argument,
            "appended": appended,
        }
        failed = []
        for prop in self.for_event(event) if only is None else only:
            try:
                holds = prop.function(*(values.get(p, argument) for p in prop.parameters))
            except Exception as error:  # a property that cannot be evaluated fails
                self.errors[prop.name] = f"{type(error).__name__}: {error}"
                holds = False
            if not holds:
                failed.append(prop.name)
        return failed

    def state(self, run: Any) -> list[str]:
        failed = []
        for prop in self.invariants:
            try:
                holds = prop.function(run)
            except Exception as error:
                self.errors[prop.name] = f"{type(error).__name__}: {error}"
                holds = False
            if not holds:
                failed.append(prop.name)
        return failed
