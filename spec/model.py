"""The declaration as plain data: states, transitions in priority order, guard trees.

Owns reading a python-statemachine class through its introspection API (``states``,
``state.transitions``, ``transition.cond``/``on``) into frozen dataclasses that
every other layer consumes: the generator, the reference model's transition labels,
the diagram renderers, the campaign's and explorer's coverage targets and the z3
encoding. None of them looks at python-statemachine objects, and none restates the
structure by hand (python-statemachine's own ``contrib/diagram`` does the same:
``extract.py`` builds ``model.py``, renderers read only the model).

Declaration errors (a guard name the model does not define, an unsupported guard
expression, a duplicated transition) are raised here, at load time, as
``DeclarationError`` naming the transition.
"""

from __future__ import annotations

import ast
import hashlib
import json
from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Any, NamedTuple

from statemachine import StateMachine
from statemachine.contrib.diagram.formatter import formatter
from statemachine.spec_parser import replace_operators

from replan.controller.run import Run


class DeclarationError(ValueError):
    """The declaration cannot be used (reported at load time, naming the transition)."""


class EventInterface(NamedTuple):
    """What the declaration says about one event besides its transitions: its one
    parameter (name and type: a record of ``controller.records``, ``str`` for a plan
    id, or None) and answer type, the check run before any transition is chosen, the
    action that answers it in a final state, and who may call it (``"host"``: the
    application only; ``"model"``: also offered to the model as an agent tool).
    Every tool reads events from here: the harness, the sampling, the reference
    model, the agent tools, the diagrams."""

    parameter: str | None
    parameter_type: str | None
    returns: str
    check: str | None
    when_stopped: str
    caller: str = "host"


@dataclass(frozen=True)
class StateInfo:
    id: str
    name: str
    value: str
    initial: bool
    final: bool


@dataclass(frozen=True)
class TransitionInfo:
    """One declared transition. ``cond`` is the whole guard as one expression in the
    declaration's names (``""`` when it always holds); ``priority`` is its 1-based
    rank among the transitions leaving ``source`` on ``event``."""

    index: int
    source: str
    event: str
    target: str
    cond: str
    action: str
    internal: bool
    priority: int

    @property
    def label(self) -> str:
        guard = f"[{self.cond}]" if self.cond else ""
        return f"{self.source} --{self.event}{guard}--> {self.target}"

    @property
    def guard_tree(self) -> ast.expr | None:
        """The guard parsed as a Python boolean expression over guard names."""
        return parse_guard(self.cond) if self.cond else None

    @property
    def guard_names(self) -> tuple[str, ...]:
        tree = self.guard_tree
        if tree is None:
            return ()
        return tuple(dict.fromkeys(n.id for n in ast.walk(tree) if isinstance(n, ast.Name)))


@dataclass(frozen=True)
class MachineModel:
    name: str
    module: str
    states: tuple[StateInfo, ...]
    transitions: tuple[TransitionInfo, ...]
    interface: dict[str, EventInterface] = field(hash=False)

    @property
    def events(self) -> tuple[str, ...]:
        return tuple(self.interface)

    def state(self, state_id: str) -> StateInfo:
        return next(s for s in self.states if s.id == state_id)

    @property
    def active_states(self) -> tuple[StateInfo, ...]:
        return tuple(s for s in self.states if not s.final)

    @property
    def final_states(self) -> tuple[StateInfo, ...]:
        return tuple(s for s in self.states if s.final)

    def leaving(self, source: str, event: str) -> tuple[TransitionInfo, ...]:
        return tuple(t for t in self.transitions if t.source == source and t.event == event)

    @property
    def body_names(self) -> tuple[str, ...]:
        """Every guard, action, check and stopped-run answer the declaration names: the
        bodies behind the events, which are not the contract's API."""
        names: dict[str, None] = {}
        for transition in self.transitions:
            names.update(dict.fromkeys(transition.guard_names))
            if transition.action:
                names[transition.action] = None
        for interface in self.interface.values():
            if interface.check:
                names[interface.check] = None
            names[interface.when_stopped] = None
        return tuple(names)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "states": [asdict(s) for s in self.states],
            "transitions": [asdict(t) | {"label": t.label} for t in self.transitions],
            "interface": {name: i._asdict() for name, i in self.interface.items()},
        }

    @property
    def digest(self) -> str:
        """sha256 over the canonical structure: insensitive to comments and layout,
        sensitive to any state, transition, guard, action or priority change."""
        canonical = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


_ALLOWED_NODES = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.UnaryOp,
    ast.Not,
    ast.Name,
    ast.Load,
)


def parse_guard(expression: str) -> ast.expr:
    """Parse a guard expression (python-statemachine's syntax: ``and``/``or``/``not``
    and its ``!``, ``^``, ``v`` spellings) into a Python AST of names."""
    try:
        tree = ast.parse(replace_operators(expression), mode="eval")
    except SyntaxError as error:
        raise DeclarationError(
            f"guard {expression!r}: not a boolean expression ({error.msg})"
        ) from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise DeclarationError(
                f"guard {expression!r}: {type(node).__name__} is not allowed; guards combine "
                "guard names with and, or, not"
            )
    return tree.body


def _guard_text(transition: Any) -> str:
    parts: list[str] = []
    for spec in transition.cond:
        if spec.is_convention:
            continue
        text = str(spec.func) if isinstance(spec.func, str) else None
        if text is None:
            raise DeclarationError(
                f"{transition.source.id} --{transition.event}-->: guards must be names or "
                "expressions, not callables (the generator and the proofs read them)"
            )
        tree = ast.unparse(parse_guard(text))
        parts.append(tree if spec.expected_value else f"not ({tree})")
    if len(parts) > 1:
        return " and ".join(f"({p})" if " or " in p else p for p in parts)
    return parts[0] if parts else ""


def _action_name(transition: Any) -> str:
    names = [spec.func for spec in transition.on if not spec.is_convention]
    if len(names) != 1 or not isinstance(names[0], str):
        raise DeclarationError(
            f"{transition.source.id} --{transition.event}-->: declare exactly one action by "
            f"name (its return value is the event's answer), found {names!r}"
        )
    return str(names[0])


@cache
def extract(machine_class: type[StateMachine], model_class: type = Run) -> MachineModel:
    """Read a declaration class into a ``MachineModel``, checking every name it uses
    against ``model_class`` (the run's guards and actions)."""
    states = tuple(
        StateInfo(
            id=s.id,
            name=s.name,
            value=str(s.value),
            initial=bool(s.initial),
            final=bool(s.final),
        )
        for s in machine_class.states
    )
    interface = getattr(machine_class, "interface", None)
    if not isinstance(interface, dict) or not interface:
        raise DeclarationError(
            f"{machine_class.__name__}: declare `interface`, a dict of event name -> "
            "EventInterface (parameter, answer type, check, answer when stopped)"
        )
    transitions = _transitions(machine_class, interface)
    _check_names(model_class, transitions, interface)
    return MachineModel(
        name=machine_class.__name__,
        module=machine_class.__module__,
        states=states,
        transitions=tuple(transitions),
        interface=dict(interface),
    )


def _transitions(
    machine_class: type[StateMachine], interface: dict[str, Any]
) -> list[TransitionInfo]:
    """Every declared transition, numbered in declaration order, each with its
    priority among its state's transitions on the same event."""
    transitions: list[TransitionInfo] = []
    priorities: dict[tuple[str, str], int] = {}
    for state in machine_class.states:
        for transition in state.transitions:
            for event in transition.events:
                if event.id not in interface:
                    raise DeclarationError(
                        f"{state.id} --{event.id}-->: event not in the interface (declared: "
                        f"{', '.join(interface)})"
                    )
                rank = priorities.get((state.id, event.id), 0) + 1
                priorities[(state.id, event.id)] = rank
                info = TransitionInfo(
                    index=len(transitions),
                    source=state.id,
                    event=event.id,
                    target=transition.target.id,
                    cond=_guard_text(transition),
                    action=_action_name(transition),
                    internal=bool(transition.internal),
                    priority=rank,
                )
                transitions.append(info)
    return transitions


def _check_names(
    model_class: type, transitions: list[TransitionInfo], interface: dict[str, Any]
) -> None:
    """No transition declared twice, and every guard, action and check a name the
    run's class defines."""
    labels = [t.label for t in transitions]
    for label in labels:
        if labels.count(label) > 1:
            raise DeclarationError(f"{label}: declared twice")
    for info in transitions:
        for name in info.guard_names:
            _require_member(model_class, name, info.label, "guard")
        _require_member(model_class, info.action, info.label, "action")
    for event, entry in interface.items():
        _require_member(model_class, entry.when_stopped, f"final states on {event}", "action")
        if entry.check is not None:
            _require_member(model_class, entry.check, f"{event}'s input check", "check")


def _require_member(model_class: type, name: str, where: str, kind: str) -> None:
    if not callable(getattr(model_class, name, None)):
        import difflib

        close = difflib.get_close_matches(
            name, [n for n in dir(model_class) if not n.startswith("_")]
        )
        hint = f" (closest: {', '.join(close)})" if close else ""
        raise DeclarationError(
            f"{where}: {kind} {name!r} is not defined on {model_class.__name__}{hint}"
        )


def transition_table_markdown(model: MachineModel) -> str:
    """Every declared transition, internal ones included, as a Markdown table."""
    rows = [
        "| # | State | Event | Prio | Guard | Action | Target |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in model.transitions:
        target = "stay" if t.internal and t.target == t.source else t.target
        rows.append(
            f"| {t.index} | {t.source} | {t.event} | {t.priority} | {t.cond or '(always)'} "
            f"| {t.action} | {target} |"
        )
    return "\n".join(rows)


@formatter.register_format("table")
def _render_table(machine_or_class: Any) -> str:
    """``{statechart:table}`` in a declaration's docstring: the full transition table,
    internal transitions included (the stock ``md`` format leaves those out)."""
    machine_class = (
        machine_or_class if isinstance(machine_or_class, type) else type(machine_or_class)
    )
    return transition_table_markdown(extract(machine_class))
