"""What every part of the generator shares: where the generated file lives, the names
every generated module binds, the diagram's label of a transition, the error, and a
guard read as one expression.
"""

from __future__ import annotations

import ast
from pathlib import Path

from replan.spec import bodies
from replan.spec.model import MachineModel, TransitionInfo

GENERATED_PATH = Path(__file__).resolve().parents[2] / "controller" / "_generated.py"

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
