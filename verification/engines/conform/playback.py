"""A recorded run played back on the generated controller, one step per call.

Owns turning a recording (a counterexample in the shared format, an episode record
such as ``evidence/replan-trace.json``, or a run's own ``trace`` written as JSON) into
the steps a reviewer walks through: the
call and its answer, the declared transition it fired, the declared state before and
after it, and the run after it (evidence revision, pending plan, counters, stop
reason, evidence). The recording says *what was called*; the values shown are what the
running controller (``controller.Controller``, the generated dispatch) does with those
calls, read from its own ``trace`` and ``snapshot()`` after each one. Where the
recording says otherwise (a counterexample found on a broken controller, a stale
episode record) the step says how it differs, so nothing is silently redrawn.

``replan diagram --trace`` (the path on the diagram) and ``replan review`` (the
step-through player) both read recordings through here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from replan.controller import input_limits
from replan.controller._generated import Controller as Generated
from replan.controller.policy import DEFAULT_POLICY, Policy, policy_to_dict
from replan.controller.records import Observation, Plan
from replan.spec.model import MachineModel
from replan.verification.core.harness import (
    CounterexampleError,
    Operation,
    apply,
    encode_result,
    load_counterexample,
    operations_from_trace,
)
from replan.verification.engines.conform.check import TracePolicyError, policy_of_trace

#: The fields of a trace record a recording and a replay are compared on.
COMPARED = ("op", "args", "result", "evidence_revision", "stop_reason", "transition")


class PlaybackError(ValueError):
    """A recording that cannot be played (one line: the file and what is wrong)."""


@dataclass(frozen=True)
class PlayedStep:
    """One call as the running controller answered it."""

    number: int
    op: str
    #: ``propose(p2: commit-import on input-A, revision 3, cites evidence revision 3)``
    call: str
    args: dict[str, Any]
    #: The answer as the trace renders it (``True``, ``"StalePlan"``, ``{"error": ...}``).
    result: Any
    #: ``True``, ``StalePlan``, ``raises InvalidInput``.
    answer: str
    #: The declared transition it fired (``TransitionInfo.label``), or ``None`` when a
    #: final state absorbed the call or the input check refused it (``note`` says).
    transition: str | None
    state_before: str
    state_after: str
    evidence_revision: int
    stop_reason: str | None
    pending: dict[str, Any] | None
    counters: dict[str, int]
    evidence: dict[str, Any]
    note: str = ""
    #: What the recording says differently (``""`` when it agrees).
    differs: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "op": self.op,
            "call": self.call,
            "args": self.args,
            "result": self.result,
            "answer": self.answer,
            "transition": self.transition,
            "state_before": self.state_before,
            "state_after": self.state_after,
            "evidence_revision": self.evidence_revision,
            "stop_reason": self.stop_reason,
            "pending": self.pending,
            "counters": self.counters,
            "evidence": self.evidence,
            "note": self.note,
            "differs": self.differs,
        }


@dataclass(frozen=True)
class Playback:
    """A recording played back: where it came from, under which policy, its steps."""

    title: str
    source: str
    kind: str  # "episode" | "counterexample"
    policy: Policy
    #: The property a counterexample breaks (``""`` for an episode).
    property_name: str
    steps: list[PlayedStep] = field(default_factory=list)
    #: The run before its first call (``state``, ``evidence_revision``, ``pending``,
    #: ``counters``, ``stop_reason``, ``evidence``), as a step shows the run after it.
    initial: dict[str, Any] = field(default_factory=dict)

    @property
    def differing(self) -> list[int]:
        return [s.number for s in self.steps if s.differs]

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "source": self.source,
            "kind": self.kind,
            "property": self.property_name,
            "policy": policy_to_dict(self.policy),
            "differing": self.differing,
            "initial": self.initial,
            "steps": [s.to_json() for s in self.steps],
        }


def call_text(operation: Operation) -> str:
    """The call as a reviewer reads it (records spelled out, anything else repr'd)."""
    argument = operation.argument
    if operation.op == "cancel":
        return "cancel()"
    if type(argument) is Observation:
        return (
            f"observe({argument.key} v{argument.version} {argument.state}, "
            f"source {argument.source})"
        )
    if type(argument) is Plan:
        return (
            f"propose({argument.id}: {argument.step} on {argument.resource}, revision "
            f"{argument.revision}, cites evidence revision {argument.evidence_revision})"
        )
    return f"{operation.op}({argument!r})"


def answer_text(result: Any) -> str:
    if isinstance(result, type):
        return f"raises {result.__name__}"
    return str(result)


def play(
    policy: Policy,
    operations: list[Operation],
    recorded: list[dict[str, Any] | None],
    model: MachineModel,
    *,
    encoded_results: bool = False,
) -> list[PlayedStep]:
    """Run ``operations`` on a fresh generated controller under ``policy``. Each
    ``recorded`` entry holds what the recording says of that call (any of
    ``COMPARED``, as the trace renders them; ``None``: nothing recorded): a field it
    states otherwise is named in the step's ``differs``. ``encoded_results``: the
    recorded results are in the counterexample encoding (``harness.encode_result``)."""
    from replan.controller import Controller  # the generated dispatch: what applications run

    controller = Controller(policy)
    state_id = {s.value: s.id for s in model.states}
    steps: list[PlayedStep] = []
    for number, (operation, expected) in enumerate(zip(operations, recorded, strict=True), 1):
        before = state_id.get(controller.snapshot()["state"], controller.snapshot()["state"])
        result = apply(controller, operation)
        record = controller.trace[-1]
        snapshot = controller.snapshot()
        transition = record["transition"]
        note = ""
        if transition is None:
            note = f"{operation.op} refused by the input check ({_short(result)})"
        elif transition not in controller.transitions:
            note = f"{operation.op} absorbed, answered {_short(result)}"
            transition = None
        differences = _differences(expected or {}, record, result, encoded_results)
        steps.append(
            PlayedStep(
                number=number,
                op=operation.op,
                call=call_text(operation),
                args=record["args"],
                result=record["result"],
                answer=answer_text(result),
                transition=transition,
                state_before=before,
                state_after=state_id.get(snapshot["state"], snapshot["state"]),
                evidence_revision=snapshot["evidence_revision"],
                stop_reason=snapshot["stop_reason"],
                pending=snapshot["pending"],
                counters={
                    name: snapshot[name]
                    for name in ("steps", "proposals", "no_progress", "plan_revision")
                },
                evidence=snapshot["evidence"],
                note=note,
                differs="; ".join(differences),
            )
        )
    return steps


def _differences(
    expected: dict[str, Any], record: dict[str, Any], result: Any, encoded_results: bool
) -> list[str]:
    """Each field the recording states otherwise than the call's trace record now."""
    differences = []
    for name, value in expected.items():
        mine = record.get(name)
        if name == "result" and encoded_results:
            mine = encode_result(result)
        if value != mine:
            differences.append(f"{name}: recorded {_shown(value)}, now {_shown(mine)}")
    return differences


def initial_run(policy: Policy, model: MachineModel) -> dict[str, Any]:
    """A fresh run under ``policy``, in the fields a step shows of the run after it."""
    from replan.controller import Controller

    snapshot = Controller(policy).snapshot()
    state = next((s.id for s in model.states if s.value == snapshot["state"]), snapshot["state"])
    return {
        "state": state,
        "evidence_revision": snapshot["evidence_revision"],
        "pending": snapshot["pending"],
        "counters": {
            name: snapshot[name] for name in ("steps", "proposals", "no_progress", "plan_revision")
        },
        "stop_reason": snapshot["stop_reason"],
        "evidence": snapshot["evidence"],
    }


def _short(result: Any) -> str:
    return result.__name__ if isinstance(result, type) else str(result)


def _shown(value: Any) -> str:
    return json.dumps(value, sort_keys=True) if not isinstance(value, str) else value


def load_playback(path: str | Path, model: MachineModel, policy: Policy | None = None) -> Playback:
    """Play the recording at ``path``: a counterexample (``{"policy", "property",
    "steps": [{"op", "args", "result"}]}``), an episode record (``{"calls": [trace
    records]}``, as ``replan trace`` writes) or a run's own trace (``Controller.trace``
    as a JSON list). A trace plays under the policy its records name
    (``conform.check.policy_of_trace``): the one it holds, ``policy`` (the page's) or
    the default; one that names none plays under ``policy``."""
    source = Path(path)
    try:
        document = input_limits.load_json(source, what="a recording")
    except FileNotFoundError:
        raise PlaybackError(f"{source}: no such file") from None
    except input_limits.InputLimitError as error:
        raise PlaybackError(str(error)) from None
    except (OSError, ValueError) as error:
        raise PlaybackError(f"{source}: not a JSON recording ({error})") from None
    if isinstance(document, list) or (
        isinstance(document, dict) and isinstance(document.get("calls"), list)
    ):
        return _episode(source, document, model, policy)
    try:
        policy, property_name, operations, results = load_counterexample(source)
    except CounterexampleError as error:
        raise PlaybackError(
            f"{error} (a recording is a counterexample with 'steps' or an episode with 'calls')"
        ) from None
    recorded: list[dict[str, Any] | None] = [
        None if result is None else {"result": result} for result in results
    ]
    title = f"counterexample to {property_name}" if property_name else source.stem
    steps = play(policy, operations, recorded, model, encoded_results=True)
    return Playback(
        title,
        str(source),
        "counterexample",
        policy,
        property_name,
        steps,
        initial_run(policy, model),
    )


def _episode(source: Path, document: Any, model: MachineModel, page: Policy | None) -> Playback:
    """An episode record or a run's own trace: its calls replayed under the policy
    they ran under."""
    calls = document if isinstance(document, list) else document["calls"]
    if not all(isinstance(call, dict) for call in calls):
        raise PlaybackError(f"{source}: a trace is a list of trace records (objects)")
    known = (DEFAULT_POLICY,) if page is None else (page, DEFAULT_POLICY)
    try:
        policy = policy_of_trace(document, calls, None, known, fallback=page or DEFAULT_POLICY)
    except TracePolicyError as error:
        raise PlaybackError(
            f"{source}: {error}".replace("--policy FILE", "--policy FILE (the page's policy)")
        ) from None
    operations = [_operation(index, call, source) for index, call in enumerate(calls)]
    recorded: list[dict[str, Any] | None] = [
        {name: call[name] for name in COMPARED if name in call} for call in calls
    ]
    steps = play(policy, operations, recorded, model)
    notes = [str(call.get("note", "")) for call in calls]
    steps = [
        step if not note else _with_note(step, note)
        for step, note in zip(steps, notes, strict=True)
    ]
    if isinstance(document, list):
        title, kind = f"recorded run {source.stem}", "run"
    else:
        title, kind = f"{document.get('episode', source.stem)} episode", "episode"
    return Playback(title, str(source), kind, policy, "", steps, initial_run(policy, model))


def _operation(index: int, call: dict[str, Any], source: Path) -> Operation:
    """One trace record as the call to replay. An argument the trace could only show
    (a malformed plan, an observation the input check refused: rendered as text) is
    replayed as what the trace shows, which the controller refuses alike."""
    try:
        [operation] = operations_from_trace([call])
    except CounterexampleError as error:
        op, args = call.get("op"), call.get("args")
        if op not in Generated.events or not isinstance(args, dict):
            problem = str(error).removeprefix("calls[0]: ")
            raise PlaybackError(f"{source}: calls[{index}]: {problem}") from None
        parameter = Generated.events[op][0]
        return Operation(op, None if parameter is None else args.get(parameter))
    return operation


def _with_note(step: PlayedStep, note: str) -> PlayedStep:
    return replace(step, note=f"{note}; {step.note}" if step.note else note)


__all__ = [
    "COMPARED",
    "Playback",
    "PlaybackError",
    "PlayedStep",
    "answer_text",
    "call_text",
    "initial_run",
    "load_playback",
    "play",
]
