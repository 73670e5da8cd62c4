"""A contract's properties as z3 terms over one step of the controller.

Owns the bridge from ``spec/properties.py`` (plain Python predicates) to the step
relation of ``verification/translate/symbolic.py``: a state invariant over a state
(``state_term``), a call property over one step (``call_term``), and the facts every
reachable state satisfies, as premises (``Reachable``). The proofs
(``verification/engines/prove``), translation validation, the Promela model and the
generated kernel all read the properties through here, from the ``Contract`` they are
given.
"""

from __future__ import annotations

import ast
from typing import Any

import z3  # type: ignore[import-untyped]

from replan.spec.contract import Contract
from replan.spec.vocabulary import Property
from replan.verification.translate.symbolic import (
    Const,
    State,
    StateRef,
    StepEncoding,
    TranslationError,
    Translator,
    all_of,
)


def property_frame(translator: Translator, state: State, where: str) -> Any:
    from replan.verification.translate.symbolic import Frame

    return Frame(dict(state), {}, (), where, frozenset())


def state_term(translator: Translator, prop: Property, state: State) -> z3.BoolRef:
    """A state invariant over ``state``, translated from its Python (with the
    conditions its body takes for granted, such as a key being present)."""
    frame = property_frame(translator, state, f"invariant {prop.name!r}")
    before = len(translator.obligations)
    _, value = translator.run_function(
        prop.function, [StateRef(state)], frame, state=state, where=f"invariant {prop.name!r}"
    )
    obligations = [o.condition for o in translator.obligations[before:]]
    del translator.obligations[before:]
    return all_of(translator.boolean(frame, value), *obligations)


def call_term(translator: Translator, prop: Property, step: StepEncoding) -> z3.BoolRef:
    """A call property of one step: ``before`` the pre-state, ``after`` the
    post-state, the step's argument and answer."""
    where = f"property {prop.name!r}"
    frame = property_frame(translator, step.pre, where)
    values: dict[str, Any] = {
        "before": StateRef(step.pre),
        "after": StateRef(step.post),
        "answer": step.answer,
        "event": Const(step.event),
        "appended": step.appended,
    }
    arguments = []
    nodes: list[Any] = []
    for name in prop.parameters:
        if name in values:
            if values[name] is None:
                raise TranslationError(
                    f"{where}: reads {name!r}, which this step relation does not model"
                )
            arguments.append(values[name])
            nodes.append(None)
        else:  # the event's argument, under whatever name the property gives it
            arguments.append(step.argument)
            nodes.append(ast.Name(step.parameter or "argument", ast.Load()))
    frame.paths = {} if step.parameter is None else {step.parameter: ast.Name(step.parameter)}
    before = len(translator.obligations)
    _, value = translator.run_function(
        prop.function, arguments, frame, state=step.pre, where=where, nodes=nodes
    )
    obligations = [o.condition for o in translator.obligations[before:]]
    del translator.obligations[before:]
    return all_of(translator.boolean(frame, value), *obligations)


class Reachable:
    """The facts every reachable state satisfies (the auxiliary and the contract's
    state invariants), as premises, translated once per state."""

    def __init__(self, translator: Translator, contract: Contract) -> None:
        self.translator = translator
        self.invariants = contract.of_kind("auxiliary") + contract.of_kind("invariant")

    def __call__(self, state: State) -> list[z3.BoolRef]:
        return [state_term(self.translator, p, state) for p in self.invariants]
