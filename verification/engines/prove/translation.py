"""Translation validation: the generated controller proved equal to its declaration.

Owns: translating the generated event methods (``controller/_generated.py``, or any
class ``spec.generator`` renders) with the same z3 translator that reads the
declaration's guard and action bodies, and proving, event by event, that from every
state and for every argument the generated method leaves the same state, gives the
same answer and names the same fired transition as the declaration's step relation
(``verification.translate.symbolic.encode_event``). A generated file with two priorities
swapped, a dropped negation or a hand edit fails here, naming the transition where
the two differ; the campaign's lockstep run only samples that question.

The generated methods also append the trace, which the declaration's relation does
not model: ``trace-one-record-per-call`` is proved on their translation here.
Leaves to ``verification/engines/prove/results.py`` the reporting shape (``PropertyResult``).
"""

from __future__ import annotations

import ast
import time
from typing import Any

import z3  # type: ignore[import-untyped]

from replan.controller.policy import Policy
from replan.controller.run import Run
from replan.spec.contract import Contract
from replan.spec.model import MachineModel
from replan.verification.engines.prove.describe import describe_state
from replan.verification.engines.prove.results import PropertyResult
from replan.verification.runtime import interrupt
from replan.verification.translate.property_terms import Reachable, call_term
from replan.verification.translate.symbolic import (
    FIELD_KINDS,
    SELF,
    Const,
    FMap,
    Frame,
    FSet,
    Opt,
    StepEncoding,
    TraceLog,
    TranslationError,
    Translator,
    Universe,
    encode_event,
    same_value,
)


def encode_generated(
    u: Universe, event: str, controller_class: type[Run], pre: dict[str, Any], argument: Any
) -> StepEncoding:
    """The generated method of ``event`` as a step relation over ``pre`` and
    ``argument`` (the declaration's encoding's own, so the two can be compared)."""
    method = controller_class.__dict__.get(event) or getattr(controller_class, event, None)
    if method is None:
        raise TranslationError(f"{controller_class.__name__} has no method {event!r}")
    translator = Translator(u, controller_class)
    parameter = u.model.interface[event].parameter
    state = {**pre, "_trace": TraceLog(z3.IntVal(0), None)}
    paths = {} if parameter is None else {parameter: ast.Name(parameter, ast.Load())}
    frame = Frame(state, {}, (), f"generated {event}", frozenset(), paths)
    arguments: list[Any] = [SELF] if parameter is None else [SELF, argument]
    nodes: list[Any] = [None] if parameter is None else [None, ast.Name(parameter, ast.Load())]
    post, answer = translator.run_function(
        method,
        arguments,
        frame,
        state=state,
        where=f"generated {controller_class.__name__}.{event}",
        nodes=nodes,
        as_answer=True,
    )
    post = dict(post)
    appended = post.pop("_trace")
    fired = appended.last.items[5] if appended.last is not None else Const(None)
    if isinstance(fired, Const):
        fired = z3.IntVal(-1 if fired.value is None else fired.value)
    return StepEncoding(
        universe=u,
        event=event,
        pre=pre,
        argument=argument,
        parameter=parameter,
        inputs=translator.inputs,
        assumptions=list(u.assumptions),
        branches=[],
        post=post,
        answer=answer,
        fired=fired,
        obligations=translator.obligations,
        appended=appended,
    )


def _label(labels: tuple[str, ...], index: int) -> str:
    if 0 <= index < len(labels):
        return labels[index]
    return "no declared transition (a final state absorbs it, or the input check refuses it)"


def validate(
    policy: Policy,
    controller_class: type[Run],
    model: MachineModel,
    model_class: type = Run,
    *,
    contract: Contract | None = None,
) -> list[PropertyResult]:
    """``generated-matches-declaration`` (every event, every state, every argument)
    and ``trace-one-record-per-call`` (on the generated methods, from every state
    satisfying the invariants of ``contract``, default ``spec.properties.CONTRACT``)."""
    if contract is None:
        from replan.spec.properties import CONTRACT

        contract = CONTRACT
    u = Universe(policy, model, symbolic_limits=True)
    started = time.perf_counter()
    encodings = []
    for event in model.events:
        interrupt.check()
        declared = encode_event(u, event, model_class)
        generated = encode_generated(u, event, controller_class, declared.pre, declared.argument)
        encodings.append((declared, generated))
    generated_labels = tuple(getattr(controller_class, "transitions", ()))
    results = [_equal(u, model, generated_labels, encodings, started)]
    translator = Translator(u, model_class)
    reachable = Reachable(translator, contract)
    for prop in contract.of_kind("call"):
        if "appended" not in prop.parameters:
            continue
        began = time.perf_counter()
        failure = None
        for _, generated in encodings:
            if not prop.applies_to(generated.event):
                continue
            interrupt.check()
            solver = z3.Solver()
            solver.add(*generated.assumptions, *reachable(generated.pre))
            solver.add(z3.Not(call_term(translator, prop, generated)))
            if solver.check() != z3.unsat:
                model_ = solver.model()
                failure = (generated.event, describe_state(model_, u, generated.pre))
                break
        statement = f"{prop.meaning} (the generated methods, every step from a reachable state)"
        results.append(
            PropertyResult(
                prop.name,
                "property",
                failure is None,
                time.perf_counter() - began,
                statement,
                "" if failure is None else f"{failure[0]}: the generated method breaks it",
                None if failure is None else {"event": failure[0], "before": failure[1]},
            )
        )
    return results


def _same_label(
    labels: tuple[str, ...], generated_labels: tuple[str, ...], wanted: Any, fired: Any
) -> Any:
    """The generated code fired the transition the declaration fires, compared by
    label (the two tables may number them differently)."""
    if generated_labels == labels:
        return wanted == fired
    cases = [z3.And(wanted == -1, fired == -1)]
    for index, label in enumerate(labels):
        matches = [i for i, other in enumerate(generated_labels) if other == label]
        cases.append(z3.And(wanted == index, z3.Or(*(fired == i for i in matches))))
    return z3.Or(*cases)


def _sameness(
    labels: tuple[str, ...],
    generated_labels: tuple[str, ...],
    declared: StepEncoding,
    generated: StepEncoding,
) -> list[z3.BoolRef]:
    """The conjuncts of "the generated method does what the declaration does": the
    same transition, the same answer, then each field of the state after it, a map
    or a set field key by key. Proved one by one (their conjunction is the
    statement): one query over every key of a policy with hundreds of them makes z3
    search cases over all of them at once (at 300 keys, 25 s for ``observe``'s
    ``_latest_version`` alone, 4 s key by key). A conjunct whose two sides are the
    same term is true as it stands and left out."""
    parts = [
        _same_label(labels, generated_labels, declared.fired, generated.fired),
        declared.answer == generated.answer,
    ]
    for name in FIELD_KINDS:
        a, b = declared.post[name], generated.post[name]
        if isinstance(a, FMap) and isinstance(b, FMap):
            pairs = [(a.entries[k], b.entries[k]) for k in a.entries]
        elif isinstance(a, FSet) and isinstance(b, FSet):
            pairs = [(a.members[k], b.members[k]) for k in a.members]
        else:
            pairs = [(a, b)]
        parts.extend(same_value(x, y) for x, y in pairs if not _identical(x, y))
    return parts


def _identical(a: Any, b: Any) -> bool:
    """The same value, term for term (so equal whatever the state)."""
    if a is b:
        return True
    if isinstance(a, z3.ExprRef) and isinstance(b, z3.ExprRef):
        return bool(a.eq(b))
    if isinstance(a, Opt) and isinstance(b, Opt):
        return _identical(a.some, b.some) and _identical(a.value, b.value)
    return False


def _equal(
    u: Universe,
    model: MachineModel,
    generated_labels: tuple[str, ...],
    encodings: list[tuple[StepEncoding, StepEncoding]],
    started: float,
) -> PropertyResult:
    """The generated code names transitions by its own table (``TRANSITIONS``): a
    different table is a difference too, reported by label."""
    labels = tuple(t.label for t in model.transitions)
    statement = (
        "each generated event method leaves the same state, gives the same answer and "
        "fires the same transition as the declaration, from every state, for every argument"
    )
    for declared, generated in encodings:
        interrupt.check()
        solver = z3.Solver()
        solver.add(*declared.assumptions)
        verdict = z3.unsat
        for part in _sameness(labels, generated_labels, declared, generated):
            solver.push()
            solver.add(z3.Not(part))
            verdict = solver.check()
            if verdict != z3.unsat:
                break  # the solver keeps the model (and the reason) until the next call
            solver.pop()
        if verdict == z3.unsat:
            continue
        if verdict == z3.unknown:
            message = f"{declared.event}: z3 could not decide ({solver.reason_unknown()})"
            counterexample: dict[str, Any] = {"event": declared.event, "unknown": True}
        else:
            message, counterexample = _difference(
                u, labels, generated_labels, declared, generated, solver.model()
            )
        return PropertyResult(
            "generated-matches-declaration",
            "translation",
            False,
            time.perf_counter() - started,
            statement,
            message,
            counterexample,
        )
    return PropertyResult(
        "generated-matches-declaration",
        "translation",
        True,
        time.perf_counter() - started,
        statement,
    )


def _difference(
    u: Universe,
    labels: tuple[str, ...],
    generated_labels: tuple[str, ...],
    declared: StepEncoding,
    generated: StepEncoding,
    found: z3.ModelRef,
) -> tuple[str, dict[str, Any]]:
    """Where the generated method and the declaration part, in the model z3 found:
    the transition each fires and the answer each gives, from the state before."""
    wanted = found.eval(declared.fired, model_completion=True).as_long()
    fired = found.eval(generated.fired, model_completion=True).as_long()
    expected_answer = u.answer.name_of(found.eval(declared.answer, model_completion=True))
    answer = u.answer.name_of(found.eval(generated.answer, model_completion=True))
    before = describe_state(found, u, declared.pre)
    message = (
        f"{declared.event}: the declaration fires `{_label(labels, wanted)}` "
        f"-> {expected_answer}; the generated code fires "
        f"`{_label(generated_labels, fired)}` -> {answer}"
    )
    counterexample = {
        "event": declared.event,
        "declared": {"transition": _label(labels, wanted), "answer": expected_answer},
        "generated": {"transition": _label(generated_labels, fired), "answer": answer},
        "before": before,
    }
    return message, counterexample
