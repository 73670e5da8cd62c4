"""``encode_event``: the declared transitions of one event, in priority order, as a
functional transition relation (post-state, answer and fired transition as terms over
the pre-state and the event's argument).
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field
from typing import Any

import z3  # type: ignore[import-untyped]

from replan.controller.run import Run
from replan.spec.generator import Generator
from replan.spec.model import TransitionInfo
from replan.verification.translate.symbolic.states import fresh_record, fresh_state
from replan.verification.translate.symbolic.terms import _inlined_guard, all_of, any_of
from replan.verification.translate.symbolic.translator import Translator
from replan.verification.translate.symbolic.universe import (
    _ERRORS,
    FIELD_KINDS,
    RECORD_FIELDS,
    TranslationError,
    Universe,
)
from replan.verification.translate.symbolic.values import Const, Frame, Obligation, State, TraceLog

# ---- one step ----------------------------------------------------------------------------


@dataclass
class Branch:
    """One way the event can go: a declared transition, or a final state absorbing it,
    or the input check refusing it."""

    label: str
    index: int  # the declared transition's index; -1 absorbed or refused
    condition: z3.BoolRef
    state: State
    answer: z3.ExprRef


@dataclass
class StepEncoding:
    """One event as a function of the pre-state and the argument: the branches in
    priority order, and the merged post-state, answer and fired transition index."""

    universe: Universe
    event: str
    pre: State
    argument: Any
    parameter: str | None
    inputs: dict[str, z3.BoolRef]
    assumptions: list[z3.BoolRef]
    branches: list[Branch]
    post: State
    answer: z3.ExprRef
    fired: z3.ArithRef
    obligations: list[Obligation] = field(default_factory=list)
    #: the trace records the call appended, where the relation models the trace (the
    #: generated dispatch appends them; the declaration's relation does not)
    appended: TraceLog | None = None

    def models(self, prop: Any) -> bool:
        """Whether this relation models everything ``prop`` reads."""
        return self.appended is not None or "appended" not in prop.parameters

    @property
    def raised(self) -> z3.BoolRef:
        return any_of(
            *(
                self.answer == self.universe.answer.members[f"raised {e}"]
                for e in (*_ERRORS, "other")
            )
        )

    def label_of(self, index: int) -> str:
        for branch in self.branches:
            if branch.index == index:
                return branch.label
        return f"#{index}"


def fresh_argument(u: Universe, event: str, prefix: str = "arg") -> tuple[str | None, Any]:
    interface = u.model.interface[event]
    if interface.parameter is None:
        return None, Const(None)
    kind = interface.parameter_type
    if kind in RECORD_FIELDS:
        return interface.parameter, fresh_record(u, kind, f"{prefix}:{interface.parameter}")
    if kind == "str":
        return interface.parameter, z3.Int(f"{prefix}:{interface.parameter}")
    raise TranslationError(f"event {event!r}: parameter type {kind!r} has no z3 abstraction")


def encode_event(
    u: Universe,
    event: str,
    model_class: type = Run,
    pre: State | None = None,
    argument: Any = None,
    prefix: str = "",
) -> StepEncoding:
    """The declared transitions of ``event`` as one functional step relation."""
    # The translator and generator come first, before any fresh term is made, so the
    # terms are created in one fixed order.
    translator = Translator(u, model_class)
    generator = Generator(u.model, model_class)
    if pre is None:
        pre = fresh_state(u, f"{prefix}pre")
    parameter, fresh = fresh_argument(u, event, f"{prefix}arg")
    encoder = _EventEncoder(
        u, event, translator, generator, pre, parameter, fresh if argument is None else argument
    )
    encoder.check_input()
    sources = [s for s in u.model.active_states if u.model.leaving(s.id, event)]
    for source in sources:
        encoder.declared_transitions(source.id)
    encoder.absorbed_when_stopped(sources)
    return encoder.merged()


class _EventEncoder:
    """The translation of one event under way: the pre-state and argument every branch
    starts from, the input check's verdict, and the branches found so far, in
    priority order."""

    def __init__(
        self,
        u: Universe,
        event: str,
        translator: Translator,
        generator: Generator,
        pre: State,
        parameter: str | None,
        argument: Any,
    ) -> None:
        self.u = u
        self.event = event
        self.model_class = generator.model_class
        self.translator = translator
        self.generator = generator
        self.interface = u.model.interface[event]
        self.pre = pre
        self.parameter = parameter
        self.argument = argument
        self.env = {} if parameter is None else {parameter: argument}
        self.parameters = frozenset(self.env)
        self.paths = {} if parameter is None else {parameter: ast.Name(parameter, ast.Load())}
        self.nodes = [] if parameter is None else [ast.Name(parameter, ast.Load())]
        self.mode = pre["_declared_state"]
        self.branches: list[Branch] = []
        self.accepted: z3.BoolRef = z3.BoolVal(True)
        self.refused_answer: z3.ExprRef | None = None
        self.entry_pc: tuple[z3.BoolRef, ...] = ()

    def check_input(self) -> None:
        """The input check runs first: refused means its error is raised and nothing
        changes. Its body is translated like any other (its tests of the argument's
        type are inputs of the step), so a check that lets a malformed input through
        is visible to the properties."""
        check = self.interface.check
        if check is None:
            return
        frame = Frame(
            dict(self.pre), dict(self.env), (), f"check {check!r}", self.parameters, self.paths
        )
        _, checked = self.translator.call(
            check, [self.argument], frame, as_answer=True, nodes=self.nodes
        )
        self.accepted = z3.simplify(checked == self.u.answer.members["None"])
        self.refused_answer = checked
        self.entry_pc = () if z3.is_true(self.accepted) else (self.accepted,)

    def run_action(
        self,
        label: str,
        index: int,
        action: str,
        condition: z3.BoolRef,
        pc: tuple[z3.BoolRef, ...],
        target: str | None,
    ) -> None:
        """Translate ``action`` under ``pc`` and add it as a branch taken when
        ``condition`` holds, entering ``target`` unless the action raised."""
        u = self.u
        frame = Frame(
            dict(self.pre),
            dict(self.env),
            (*self.entry_pc, *pc),
            label,
            self.parameters,
            self.paths,
        )
        wanted = [
            p
            for p in inspect.signature(getattr(self.model_class, action)).parameters
            if p != "self"
        ]
        arguments = [self.argument] if wanted else []
        state, answer = self.translator.call(
            action, arguments, frame, as_answer=True, nodes=self.nodes[: len(arguments)]
        )
        if target is not None:
            # The generated dispatch sets the target after the action returns: an
            # action that raises leaves the declared state as the action left it.
            raised = any_of(
                *(answer == u.answer.members[f"raised {e}"] for e in (*_ERRORS, "other"))
            )
            state = dict(state)
            state["_declared_state"] = z3.simplify(
                z3.If(raised, state["_declared_state"], u.mode_of(target))
            )
        self.branches.append(Branch(label, index, condition, state, answer))

    def declared_transitions(self, source: str) -> None:
        """The transitions leaving ``source`` on this event, each taken when its guard
        holds and no earlier one's did; where the last is guarded, an obligation that
        some guard always holds."""
        event = self.event
        here = self.mode == self.u.mode_of(source)
        earlier: list[z3.BoolRef] = []
        for transition in self.u.model.leaving(source, event):
            pc = (here, *(z3.Not(g) for g in earlier))
            guard = _guard_term(
                self.translator,
                self.generator,
                transition,
                event,
                self.env,
                self.pre,
                (*self.entry_pc, *pc),
                self.parameters,
            )
            target = transition.target if transition.target != transition.source else None
            self.run_action(
                transition.label,
                transition.index,
                transition.action,
                all_of(*pc, guard),
                (*pc, guard),
                target,
            )
            if transition.cond == "":
                return
            earlier.append(guard)
        self.translator.obligations.append(
            Obligation(
                z3.Implies(here, any_of(*earlier)),
                f"{source} --{event}-->: some declared transition applies",
            )
        )

    def absorbed_when_stopped(self, sources: list[Any]) -> None:
        """In every state no transition on this event leaves, the declared action for
        a stopped run answers."""
        stopped = all_of(*(self.mode != self.u.mode_of(s.id) for s in sources))
        when_stopped = self.interface.when_stopped
        self.run_action(
            f"{self.event} in a final state ({when_stopped})",
            -1,
            when_stopped,
            stopped,
            (stopped,),
            None,
        )

    def merged(self) -> StepEncoding:
        """The branches folded, in priority order, into one post-state, answer and
        fired index; the input check's refusal wraps them all."""
        translator, branches, pre = self.translator, self.branches, self.pre
        state, answer = branches[-1].state, branches[-1].answer
        fired = z3.IntVal(branches[-1].index)
        for branch in reversed(branches[:-1]):
            state = translator.merge_states(branch.condition, branch.state, state)
            answer = z3.If(branch.condition, branch.answer, answer)
            fired = z3.If(branch.condition, z3.IntVal(branch.index), fired)
        assumptions = list(self.u.assumptions)
        refused_answer, accepted = self.refused_answer, self.accepted
        if refused_answer is not None:
            state = translator.merge_states(accepted, state, pre)
            answer = z3.If(accepted, answer, refused_answer)
            fired = z3.If(accepted, fired, z3.IntVal(-1))
            branches.append(
                Branch(
                    f"{self.event} refused by {self.interface.check}",
                    -1,
                    z3.Not(accepted),
                    pre,
                    refused_answer,
                )
            )
            for branch in branches[:-1]:
                branch.condition = all_of(accepted, branch.condition)
        return StepEncoding(
            universe=self.u,
            event=self.event,
            pre=pre,
            argument=self.argument,
            parameter=self.parameter,
            inputs=translator.inputs,
            assumptions=assumptions,
            branches=branches,
            post=state,
            answer=answer,
            fired=fired,
            obligations=translator.obligations,
        )


def _guard_term(
    translator: Translator,
    generator: Generator,
    transition: TransitionInfo,
    event: str,
    env: dict[str, Any],
    pre: State,
    pc: tuple[z3.BoolRef, ...],
    parameters: frozenset[str],
) -> z3.BoolRef:
    """The transition's whole guard, with each named guard's body inlined by the
    generator (exactly the expression the generated controller evaluates)."""
    tree = transition.guard_tree
    if tree is None:
        return z3.BoolVal(True)
    try:
        expression = _inlined_guard(generator.model, generator.model_class, transition.index)
    except Exception as error:
        raise TranslationError(
            f"{transition.label}: the generator cannot inline it: {error}"
        ) from None
    paths = {name: ast.Name(name, ast.Load()) for name in parameters}
    frame = Frame(
        dict(pre), env, pc, f"guard [{transition.cond}] of {transition.label}", parameters, paths
    )
    value = translator.boolean(frame, translator.eval(expression, frame))
    for name in FIELD_KINDS:
        if frame.state[name] is not pre[name]:
            raise TranslationError(f"{transition.label}: guard [{transition.cond}] changes {name}")
    return value
