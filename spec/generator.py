"""``replan generate``: write ``controller/_generated.py`` from the declaration.

Owns turning a ``MachineModel`` (spec/model.py) into plain Python: one method per
event, dispatching on the declared state with an ``if``/``elif`` chain per state whose
order is the declaration's priority order. Guard bodies from ``controller.run.Run``
that are a single ``return <expression>`` are inlined (copied, with a comment naming
the guard), so the hot path makes no guard calls; other guards are called. Action
bodies are always called: they are shared with the reference model, so the two
implementations can differ only in dispatch.

Consecutive transitions whose guards start with the same conjunct, the last of them
being that conjunct alone (``a and b``, ``a and c``, ``a``), are emitted as one nested
``if a:``, so ``a`` is evaluated once. That is the same decision (guards are pure and
the group ends in ``else``), written the way a person would.

The output is deterministic: regenerating an unchanged declaration changes nothing,
which is what ``replan generate --check`` relies on.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
from dataclasses import dataclass
from pathlib import Path

from controller.records import StopReason
from controller.run import Run
from spec.model import MachineModel, StateInfo, TransitionInfo, extract

GENERATED_PATH = Path(__file__).resolve().parent.parent / "controller" / "_generated.py"


class GenerationError(ValueError):
    """The declaration cannot be turned into code (names the guard or transition)."""


# ---- guard inlining ----------------------------------------------------------------


def _single_expression(name: str, model_class: type) -> tuple[list[str], ast.expr] | None:
    """The parameters and returned expression of a guard written as one ``return``."""
    function = getattr(model_class, name)
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    definition = tree.body[0]
    assert isinstance(definition, ast.FunctionDef)
    body = list(definition.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # docstring
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None
    parameters = [a.arg for a in definition.args.args]
    return parameters, body[0].value


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


class _Rename(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.mapping:
            return ast.copy_location(ast.Name(id=self.mapping[node.id], ctx=node.ctx), node)
        return node


@dataclass
class _Branch:
    conjuncts: list[ast.expr]  # remaining guard conjuncts, in order
    transition: TransitionInfo


class _Generator:
    def __init__(self, model: MachineModel, model_class: type) -> None:
        self.model = model
        self.model_class = model_class
        self.lines: list[str] = []
        #: module -> names the inlined guard bodies use from it
        self.imports: dict[str, set[str]] = {}

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
        for node in ast.walk(renamed):
            if (
                isinstance(node, ast.Name)
                and node.id not in bound
                and node.id not in parameters
                and node.id not in arguments
                and not hasattr(builtins, node.id)
            ):
                if not hasattr(module, node.id):
                    raise GenerationError(f"guard {name!r} uses {node.id!r}, which is not a global")
                self.imports.setdefault(module.__name__, set()).add(node.id)
        return _Simplify().visit(_Inliner(self).visit(renamed))  # type: ignore[no-any-return]

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
        call = f"self.{name}({', '.join(wanted)})"
        return ast.parse(call, mode="eval").body

    def translate(self, tree: ast.expr, event: str) -> ast.expr:
        if isinstance(tree, ast.Name):
            return self.guard_call(tree.id, event)
        if isinstance(tree, ast.UnaryOp):
            negated = ast.UnaryOp(op=ast.Not(), operand=self.translate(tree.operand, event))
            return _Simplify().visit(negated)  # type: ignore[no-any-return]
        if isinstance(tree, ast.BoolOp):
            return ast.BoolOp(op=tree.op, values=[self.translate(v, event) for v in tree.values])
        raise GenerationError(f"unsupported guard node {ast.dump(tree)}")

    def condition(self, conjuncts: list[ast.expr], event: str) -> tuple[str, str]:
        """(python source, comment naming the guards) for a conjunction."""
        names = " and ".join(ast.unparse(c) for c in conjuncts)
        translated = [self.translate(c, event) for c in conjuncts]
        expression = (
            translated[0] if len(translated) == 1 else ast.BoolOp(op=ast.And(), values=translated)
        )
        return ast.unparse(expression), names

    # -- statements -------------------------------------------------------------------

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text if text else "")

    def emit_transition(self, indent: int, transition: TransitionInfo) -> None:
        event = self.model.interface[transition.event]
        argument = event.parameter or ""
        action_parameters = self._parameters(transition.action)
        call_arguments = argument if action_parameters else ""
        self.emit(indent, f"# {transition.index}: {transition.label}")
        self.emit(indent, f"fired = {transition.index}")
        if self._returns_nothing(transition.action):
            self.emit(indent, f"self.{transition.action}({call_arguments})")
            self.emit(indent, "result = None")
        else:
            self.emit(indent, f"result = self.{transition.action}({call_arguments})")
        target = self.model.state(transition.target)
        if transition.target != transition.source:
            self.emit(indent, f"self._declared_state = {_state_constant(target)}")

    def emit_branches(self, indent: int, branches: list[_Branch], event: str) -> None:
        keyword = "if"
        index = 0
        while index < len(branches):
            branch = branches[index]
            if not branch.conjuncts:
                if keyword == "if":
                    self.emit_transition(indent, branch.transition)
                else:
                    self.emit(indent, "else:")
                    self.emit_transition(indent + 1, branch.transition)
                return  # anything after an unconditional transition is unreachable
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
                source, names = self.condition(branch.conjuncts[:1], event)
                self.emit(indent, f"{keyword} {source}:  # {names}")
                self.emit_branches(
                    indent + 1, [_Branch(b.conjuncts[1:], b.transition) for b in group], event
                )
                index = end
            else:
                source, names = self.condition(branch.conjuncts, event)
                self.emit(indent, f"{keyword} {source}:  # {names}")
                self.emit_transition(indent + 1, branch.transition)
                index += 1
            keyword = "elif"
        self.emit(indent, "else:")
        self.emit(
            indent + 1,
            f"raise AssertionError(f'no declared transition for {event} in {{state!r}}')",
        )

    def emit_event(self, event: str) -> None:
        interface = self.model.interface[event]
        parameter = interface.parameter
        signature = f"self, {parameter}: {interface.parameter_type}" if parameter else "self"
        argument = parameter or "None"
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
        if interface.check:
            self.emit(3, f"self.{interface.check}({parameter})")
        self.emit(3, "state = self._declared_state")
        keyword = "if"
        for source in sources:
            self.emit(3, f"{keyword} state == {_state_constant(source)}:")
            branches = [_Branch(_conjuncts(t), t) for t in self.model.leaving(source.id, event)]
            self.emit_branches(4, branches, event)
            keyword = "elif"
        stopped = self.model.interface[event].when_stopped
        stopped_arguments = parameter if self._parameters(stopped) else ""
        indent = 3
        if sources:
            self.emit(3, "else:  # a final state: the run stopped, nothing changes")
            indent = 4
        if self._returns_nothing(stopped):
            self.emit(indent, f"self.{stopped}({stopped_arguments})")
            self.emit(indent, "result = None")
        else:
            self.emit(indent, f"result = self.{stopped}({stopped_arguments})")
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

    def render(self) -> str:
        model = self.model
        emit = self.emit
        emit(0, f"# GENERATED by `replan generate` from {model.module}.{model.name}; do not edit.")
        emit(0, f"# Declaration digest: {model.digest}")
        emit(0, "# Guard bodies inlined from controller.run.Run (each named in a comment);")
        emit(0, "# actions are called. Change the declaration, then run `replan generate`.")
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
        emit(0, "")
        emit(0, f"class Controller({self.model_class.__name__}):")
        emit(1, '"""One run of the controller (CONTRACT.md), owned by one caller at a time."""')
        emit(0, "")
        emit(1, "__slots__ = ()")
        emit(1, "transitions = TRANSITIONS")
        emit(0, "")
        for event in model.events:
            self.emit_event(event)
        while self.lines and not self.lines[-1]:
            self.lines.pop()
        # Imports last: the inlined guard bodies decide which names are needed.
        run_module = self.model_class.__module__
        imports = {m: set(n) for m, n in self.imports.items()}
        imports.setdefault(run_module, set()).add(self.model_class.__name__)
        imports.setdefault("controller.records", set()).update(
            {"ExecuteResult", "Observation", "Plan", "StopReason"}
        )
        block = [
            f"from {module} import {', '.join(sorted(names, key=_import_order))}"
            for module, names in sorted(imports.items())
        ]
        self.lines[header_end:header_end] = [*block, ""]
        source = "\n".join(self.lines) + "\n"
        ast.parse(source)  # the output must at least be Python
        return source


def _import_order(name: str) -> tuple[int, str]:
    # isort's order: CONSTANTS, Classes, functions
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


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
    project's ``spec.declaration.Replanning``)."""
    if machine_class is None:
        from spec.declaration import Replanning

        machine_class = Replanning
    return render_controller(extract(machine_class, model_class), model_class)


def render_controller(model: MachineModel, model_class: type = Run) -> str:
    """The generated source for an already extracted (possibly transformed) model:
    what mutation tests use to build deliberately broken controllers the same way
    the real one is built."""
    return _Generator(model, model_class).render()


def load_controller(model: MachineModel, model_class: type = Run, name: str = "") -> type[Run]:
    """Generate and load a controller class in memory (never written to disk)."""
    source = render_controller(model, model_class)
    namespace: dict[str, object] = {"__name__": f"replan_generated_{name or model.name}"}
    exec(compile(source, f"<generated {name or model.name}>", "exec"), namespace)
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
