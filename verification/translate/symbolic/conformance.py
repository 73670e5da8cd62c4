"""Does a concrete step satisfy the relation? ``RelationChecker`` replays a run of
the generated controller through ``encode_event``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import z3  # type: ignore[import-untyped]

from replan.controller.policy import Policy
from replan.controller.run import Run
from replan.spec.model import MachineModel
from replan.verification.translate.symbolic.runs import abstract_argument, pairs
from replan.verification.translate.symbolic.states import fresh_state
from replan.verification.translate.symbolic.step import StepEncoding, encode_event
from replan.verification.translate.symbolic.terms import same_state, same_value
from replan.verification.translate.symbolic.translator import Translator
from replan.verification.translate.symbolic.universe import FIELD_KINDS, Universe
from replan.verification.translate.symbolic.values import State

# ---- conformance: does a concrete step satisfy the relation? -----------------------------


def input_values(
    u: Universe, encoding: StepEncoding, argument: object, names: Mapping[str, Any], checker: Any
) -> dict[str, bool]:
    """Each free input of ``encoding`` (a type test of the argument, the event's input
    check) evaluated on the real ``argument``: what pins the inputs to a concrete call
    (``names``: the bodies' module globals; ``checker``: a run whose input check runs)."""
    check = u.model.interface[encoding.event].check
    values = {}
    for text in encoding.inputs:
        if check is not None and text == f"{check}({encoding.parameter})":
            try:
                getattr(checker, check)(argument)
                values[text] = True
            except ValueError:
                values[text] = False
        else:
            env = {} if encoding.parameter is None else {encoding.parameter: argument}
            try:
                values[text] = bool(eval(text, dict(names), env))
            except Exception:  # a part of an argument that is not there (a field of
                continue  # a non-record): no body reads it, so it stays free
    return values


class RelationChecker:
    """Checks concrete steps of a real controller against the z3 step relation: the
    abstraction of the state before, the argument and the pinned inputs, with the
    relation, must admit exactly the answer, the fired transition and the abstraction
    of the state after that the controller showed."""

    def __init__(self, policy: Policy, model: MachineModel, model_class: type = Run) -> None:
        self.universe = u = Universe(policy, model)
        self.model_class = model_class
        self.encodings = {e: encode_event(u, e, model_class) for e in model.events}
        self.solvers: dict[str, z3.Solver] = {}
        #: per event: fresh variables bound to the post-state, answer and fired terms
        self.outputs: dict[str, tuple[State, z3.ExprRef, z3.ArithRef]] = {}
        for event, encoding in self.encodings.items():
            post = fresh_state(u, f"{event}.post")
            answer = z3.Const(f"{event}.answer", u.answer.sort)
            fired = z3.Int(f"{event}.fired")
            solver = z3.Solver()
            solver.add(*encoding.assumptions)
            solver.add(same_state(post, encoding.post), answer == encoding.answer)
            solver.add(fired == encoding.fired)
            self.solvers[event] = solver
            self.outputs[event] = (post, answer, fired)
        self._globals: Mapping[str, Any] = Translator(u, model_class).globals
        self._checker = model_class(policy)

    def input_values(self, event: str, argument: object) -> dict[str, bool]:
        """Each free input of the step, evaluated on the real argument."""
        return input_values(
            self.universe, self.encodings[event], argument, self._globals, self._checker
        )

    def check(
        self,
        event: str,
        before: State,
        argument: object,
        result: object,
        after: State,
        fired: int | None,
    ) -> str | None:
        """None when the relation admits the step, else what differs."""
        u = self.universe
        encoding = self.encodings[event]
        solver = self.solvers[event]
        post, answer, fired_term = self.outputs[event]
        solver.push()
        try:
            solver.add(*(v == c for v, c in pairs(encoding.pre, before)))
            concrete = abstract_argument(u, event, argument)
            if concrete is not None:
                solver.add(*(v == c for v, c in pairs(encoding.argument, concrete)))
            for text, value in self.input_values(event, argument).items():
                solver.add(encoding.inputs[text] == value)
            expected_answer = u.answer_of(result)
            expected_fired = -1 if fired is None else fired
            solver.push()
            solver.add(answer == expected_answer, fired_term == expected_fired)
            solver.add(*(v == c for v, c in pairs(post, after)))
            verdict = solver.check()
            solver.pop()
            if verdict == z3.sat:
                return None
            if solver.check() != z3.sat:
                return "the relation admits no step from this state and argument"
            model = solver.model()
            problems = []
            predicted = model.eval(answer, model_completion=True)
            if not predicted.eq(expected_answer):
                problems.append(f"answer: relation {predicted}, controller {expected_answer}")
            predicted = model.eval(fired_term, model_completion=True)
            if not predicted.eq(z3.IntVal(expected_fired)):
                problems.append(f"fired: relation {predicted}, controller {expected_fired}")
            for name in FIELD_KINDS:
                same = model.eval(same_value(post[name], after[name]), model_completion=True)
                if not z3.is_true(same):
                    problems.append(f"{name} differs after the step")
            return "; ".join(problems) or "the relation and the controller disagree"
        finally:
            solver.pop()
