"""Writing the generated module out: its header, constants, imports and methods."""

from __future__ import annotations

import ast
import textwrap

import replan.controller.fields as _fields_module
import replan.controller.policy as _policy_module
import replan.controller.surface as _surface_module
from replan.controller.fields import FIELDS, STATE_FIELDS, export_expression
from replan.controller.run import Run
from replan.spec.generator.common import _MODULE_NAMES, GenerationError, diagram_label
from replan.spec.generator.methods import Methods
from replan.spec.generator.nodes import _Line, _Node, _Scope, _trees, _unparse
from replan.spec.generator.stores import _import_order, _own


class Writer(Methods):
    """Writes the nodes and the module as text."""

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
        """The generated controller's source: header, tables, the class, then the
        imports its bodies turned out to need, inserted after the header."""
        self.emit_header()
        header_end = len(self.lines)
        self.emit_tables()
        self.emit_class()
        self.lines[header_end:header_end] = [*self.import_block(), ""]
        source = "\n".join(self.lines) + "\n"
        ast.parse(source)  # the output must at least be Python
        return source

    def emit_header(self) -> None:
        """The do-not-edit comment, the module docstring and the future import."""
        model, emit = self.model, self.emit
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

    def emit_tables(self) -> None:
        """The digest, and the transitions, labels and events as module constants."""
        model, emit = self.model, self.emit
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

    def emit_class(self) -> None:
        """The ``Controller`` class: its fields, one method per event, then the bodies
        the methods call rather than inline."""
        emit = self.emit
        emit(0, f"class Controller({self.model_class.__name__}):")
        emit(1, '"""One run of the controller (CONTRACT.md), owned by one caller at a time."""')
        emit(0, "")
        emit(1, "__slots__ = ()")
        emit(1, "transitions = TRANSITIONS")
        emit(1, "events = EVENTS")
        emit(0, "")
        self.emit_fields()
        for event in self.model.events:
            self.emit_event(event)
        while self.lines and not self.lines[-1]:
            self.lines.pop()
        self.emit_hidden_bodies()

    def import_block(self) -> list[str]:
        """The imports and bound enumeration members the emitted lines use. Made last:
        the inlined bodies decide which names are needed (a function inlined after its
        call was written needs its own names, not its own)."""
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
        return block


class Generator(Writer):
    """One generation: the state, the inlining, the methods and the writer together."""
