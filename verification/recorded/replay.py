"""Each recorded run through the guard a live run takes, without running any tool.

Per run: the agent SDK's ``Agent`` over its function-invocation loop
(``controller.agent.FunctionInvokingChatClient``), a scripted client
(``verification/subjects/scripted.py``) answering each provider call with the next
recorded assistant message, and the real ``ReplanMiddleware`` (with its ``ModelView``)
in front of one tool per recorded tool name, whose "run" returns the recorded result.
So each recorded call is the step ``adapter.step_of`` names, its resource given an
open slot of the policy (``controller.resource_slots``), a proposal and an execution
through the executor with the recorded result as the effect. A call awaiting approval
is put to ``adapter.approve`` and, approved, performed again (``approve_call``: the
one place an approval is given). A refused call's tool never runs, so the model's
view and the adapter never get its recorded result; every executed result, user
message and text-only assistant message goes to the adapter, and its observations to
the controller. The text that rides along a tool call is dropped: τ-bench never shows
it to the user. The recorded model's next message is replayed whatever the guard
answered: what the model would have done instead is not known.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_framework import Agent, FunctionInvocationContext, FunctionMiddleware, FunctionTool

from replan.controller import Controller
from replan.controller.adapter import Adapter
from replan.controller.agent import FunctionInvokingChatClient
from replan.controller.executor import AsyncEffect, Executor, Grant, Operation, Performed
from replan.controller.middleware import EXECUTED, REPLAYED, GuardedCall, ReplanMiddleware
from replan.controller.policy import RESOURCE_SEPARATOR, Policy
from replan.controller.records import (
    Approval,
    EvidenceState,
    ExecuteResult,
    Observation,
    StopReason,
)
from replan.verification.recorded.tau import RecordedRun
from replan.verification.subjects.scripted import (
    FunctionCallRequest,
    FunctionResult,
    Reply,
    ScriptedChatClient,
)

AdapterFactory = Callable[[], Adapter]


class ReplayError(ValueError):
    """Bad input found while replaying (one line naming the run and the message)."""


@dataclass(frozen=True)
class Refusal:
    call_id: str
    tool: str
    arguments: Mapping[str, Any]
    rule: str
    reason: str
    message: int  # the message's position in the run
    #: the task's ground truth holds this exact call
    needed: bool = False


@dataclass
class RunResult:
    task_id: int
    trial: int
    reward: float
    refusals: list[Refusal] = field(default_factory=list)
    #: (reason, rule, why, call_id) where the guard stopped the run; None: it did not
    stopped: tuple[str, str, str, str | None] | None = None
    #: the call id of the step that completed the run (the handoff), if any
    completed: str | None = None
    calls: int = 0
    approvals: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "trial": self.trial,
            "reward": self.reward,
            "refusals": [
                {
                    "call_id": r.call_id,
                    "tool": r.tool,
                    "arguments": dict(r.arguments),
                    "rule": r.rule,
                    "reason": r.reason,
                    "message": r.message,
                    "needed_by_ground_truth": r.needed,
                }
                for r in self.refusals
            ],
            "stopped": None
            if self.stopped is None
            else {
                "reason": self.stopped[0],
                "rule": self.stopped[1],
                "why": self.stopped[2],
                "call_id": self.stopped[3],
            },
            "completed": self.completed,
            "calls": self.calls,
            "approvals": self.approvals,
        }


def load_adapter(path: str | Path) -> AdapterFactory:
    """The adapter module's ``new_adapter`` (a fresh adapter per run)."""
    file = Path(path)
    if not file.is_file():
        raise ReplayError(f"{file}: no such adapter file")
    spec = importlib.util.spec_from_file_location(
        f"replan_adapter_{abs(hash(str(file.resolve())))}", file
    )
    if spec is None or spec.loader is None:
        raise ReplayError(f"{file}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # the adapter is the host's code: any failure is bad input
        raise ReplayError(
            f"{file}: cannot import the adapter ({type(error).__name__}: {error})"
        ) from None
    factory = getattr(module, "new_adapter", None)
    if not callable(factory):
        raise ReplayError(f"{file}: defines no new_adapter() returning an adapter")
    return factory  # type: ignore[no-any-return]


def approve_call(guard: ReplanMiddleware, operation: Operation) -> bool:
    """The host approves the call awaiting approval (the one place an approval is given):
    the owner's approval of the call by its digest, recorded in the journal before the
    controller approves the plan (``ReplanMiddleware.approve``)."""
    return guard.approve(Approval(operation.plan_id, operation.digest())).accepted


def _canon(tool: str, arguments: Mapping[str, Any]) -> str:
    return json.dumps([tool, arguments], sort_keys=True, default=str)


def _schema() -> dict[str, Any]:
    """A recorded tool's parameters: any object (the record is what the model sent)."""
    return {"type": "object", "properties": {}, "additionalProperties": True}


class _Recorder(FunctionMiddleware):
    """In front of the guard in the SDK's function pipeline: hands the guard the call's
    recorded result, and reads what the guard did with the call."""

    def __init__(self, replay: _Replay) -> None:
        self.replay = replay

    async def process(
        self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]
    ) -> None:
        replay = self.replay
        plan_id = str(context.metadata.get("call_id"))
        call_id, position, recorded, read_at = replay.planned[plan_id]
        replay.current = recorded
        replay.verdict = None
        if replay.error is not None:
            context.result = "replay failed"
            return
        arguments = dict(context.arguments) if isinstance(context.arguments, Mapping) else {}
        name = context.function.name
        replay.position = position
        try:
            step = replay.host("step_of", replay.adapter.step_of, name, arguments)
            if step not in replay.guard.steps:
                raise ReplayError(
                    f"{replay.where}, message {position}: tool {name!r} (step {step!r}) is "
                    "not a declared step of the policy"
                )
        except ReplayError as error:
            replay.error = error
            context.result = "replay failed"
            return
        stopped_before = replay.guard.run.stop_reason
        replay.read_at = read_at  # the message of the result, should the call run
        try:
            await call_next()
        finally:  # also when the guard ends the SDK's loop on a stopped run
            try:
                replay.after(replay.guard.calls[-1], call_id, position, stopped_before)
            except ReplayError as error:
                replay.error = replay.error or error


class _Guard(ReplanMiddleware):
    """The guard whose host approves from the adapter: a call awaiting approval is put
    to ``adapter.approve`` and, approved, performed again (what the call's retry would
    do in a live run)."""

    replay: _Replay

    async def _perform(
        self, operation: Operation, context: FunctionInvocationContext, effect: AsyncEffect
    ) -> Performed:
        performed = await super()._perform(operation, context, effect)
        if performed.answer is ExecuteResult.AWAITING_APPROVAL:
            replay = self.replay
            try:
                verdict = replay.host(
                    "approve", replay.adapter.approve, operation.step, operation.arguments
                )
            except ReplayError as error:
                # inside the SDK's loop: kept, and raised once the loop returns
                replay.error = replay.error or error
                return performed
            replay.verdict = verdict
            if verdict.approved and approve_call(self, operation):
                replay.result.approvals += 1
                performed = await super()._perform(operation, context, effect)
        return performed


class _Replay:
    """One run through the agent SDK's function-invocation loop, a scripted client
    replaying the recorded assistant messages, and the guard."""

    def __init__(self, run: RecordedRun, policy: Policy, factory: AdapterFactory) -> None:
        self.run = run
        self.policy = policy
        self.where = run.label
        self.position = 0
        self.error: ReplayError | None = None
        self.verdict: Any = None
        self.current = ""
        self.read_at = 0
        self.result = RunResult(run.task_id, run.trial, run.reward)
        self.needed = {_canon(tool, arguments) for tool, arguments in run.actions}
        self.adapter: Adapter = self.host("new_adapter", factory)
        steps = [step.name for step in policy.steps]
        self.guard = _Guard(
            Controller(policy),
            executor=Executor(clock=lambda: 0.0),
            grant=Grant(policy.resources, steps),
            observe_result=self.observe_result,
            step_of=lambda tool, arguments: self.adapter.step_of(tool, arguments),
            clock=lambda: 0.0,
        )
        self.guard.replay = self
        #: plan id (the SDK's call id) -> (recorded call id, its message, its result);
        #: the n-th use of a recorded id is planned as ``id#n`` (τ-bench records give
        #: two calls one id, which a live guard would take for a retry of the first)
        self.planned: dict[str, tuple[str, int, str, int]] = {}
        self.replies: list[tuple[int, Reply]] = []
        results: dict[str, list[tuple[str, int]]] = {}
        for position, message in enumerate(run.messages):
            if message.role == "tool" and message.call_id:
                results.setdefault(message.call_id, []).append((message.text, position))
        uses: Counter[str] = Counter()
        for position, message in enumerate(run.messages):
            for call in message.calls:
                uses[call.id] += 1
                use = uses[call.id]
                plan_id = call.id if use == 1 else f"{call.id}#{use}"
                found = results.get(call.id, [])
                self.planned[plan_id] = (
                    call.id,
                    position,
                    *(found[use - 1] if use <= len(found) else ("", position)),
                )
        tools = sorted({call.tool for message in run.messages for call in message.calls})
        self.tools = [
            FunctionTool(name=tool, description=tool, func=self._tool, input_model=_schema())
            for tool in tools
        ]

    def _tool(self, **_arguments: Any) -> str:
        return self.current

    def host(self, what: str, function: Callable[..., Any], *arguments: Any) -> Any:
        """Call the adapter: whatever it raises is bad input, naming the run and message."""
        try:
            return function(*arguments)
        except Exception as error:
            raise ReplayError(
                f"{self.where}, message {self.position}: the adapter's {what} raised "
                f"{type(error).__name__}: {str(error)[:160]}"
            ) from None

    def observe_result(
        self, tool: str, arguments: Mapping[str, Any], result: str
    ) -> list[Observation]:
        """The adapter's observations of an executed call's result (inside the SDK
        loop, an adapter failure is kept and raised once the loop returns)."""
        self.position = self.read_at
        try:
            found = list(
                self.host("observe_result", self.adapter.observe_result, tool, arguments, result)
            )
            self._check(found)
            return found
        except ReplayError as error:
            self.error = self.error or error
            return []

    def _check(self, observations: list[Any]) -> None:
        for observation in observations:
            if type(observation) is not Observation:
                raise ReplayError(
                    f"{self.where}, message {self.position}: the adapter returned "
                    f"{type(observation).__name__}, not an Observation"
                )

    def observe_message(self, role: str, text: str) -> None:
        found = list(self.host("observe_message", self.adapter.observe_message, role, text))
        self._check(found)
        controller = self.guard.run
        for observation in found:
            mapped = self.guard.slotted(observation)
            if mapped is None:
                continue
            was = controller.stop_reason
            try:
                controller.observe(mapped)
            except ValueError as error:
                raise ReplayError(f"{self.where}, message {self.position}: {error}") from None
            self._stopped(was, None)

    def _stopped(self, was: StopReason | None, call_id: str | None) -> None:
        stop = self.guard.run.stop_reason
        if was is None and stop is not None and stop is not StopReason.COMPLETED:
            rule, why = self.host("explain_stop", self.adapter.explain_stop, str(stop))
            self.result.stopped = (str(stop), rule, why, call_id)

    def refuse(
        self, call_id: str, position: int, call: GuardedCall, rule: str, reason: str
    ) -> None:
        self.result.refusals.append(
            Refusal(
                call_id,
                call.tool,
                call.arguments,
                rule,
                reason,
                position,
                _canon(call.tool, call.arguments) in self.needed,
            )
        )

    def after(
        self, call: GuardedCall, call_id: str, position: int, stopped_before: StopReason | None
    ) -> None:
        """What the guard did with one call: ran it, refused it (the rule and why), or
        found the run stopped (the call never happens)."""
        self.result.calls += 1
        if call.outcome in (EXECUTED, REPLAYED):
            if self.guard.run.stop_reason is StopReason.COMPLETED and stopped_before is None:
                self.result.completed = call_id
            self._stopped(stopped_before, call_id)
            return
        if stopped_before is not None:
            return  # the run had stopped: no call happens
        try:
            if call.outcome == str(ExecuteResult.AWAITING_APPROVAL) and self.verdict is not None:
                self.refuse(call_id, position, call, self.verdict.rule, self.verdict.reason)
            elif call.outcome == str(ExecuteResult.PRECONDITION_DENIED) and call.plan is not None:
                rule, reason = self._denied(call.plan.step, call.plan.resource)
                self.refuse(call_id, position, call, rule, reason)
            else:
                self.refuse(call_id, position, call, "guard", call.result)
        except ReplayError as error:
            self.error = self.error or error

    def _denied(self, step: str, slot: str) -> tuple[str, str]:
        """The rule and reason of the first required fact that is not Passed."""
        controller = self.guard.run
        real = slot if self.guard.slots is None else self.guard.slots.real(slot)
        required = (
            *self.policy.requirements[step],
            *self.policy.resource_requirements[step].get(slot, ()),
        )
        for key in required:
            state = controller.evidence_state(key)
            if state is not EvidenceState.PASSED:
                name, separator, _ = key.partition(RESOURCE_SEPARATOR)
                resource = real if separator else None
                rule, reason = self.host("explain", self.adapter.explain, name, resource)
                shown = f"{name}{RESOURCE_SEPARATOR}{resource}" if separator else key
                return str(rule), f"{reason} ({shown} is {state})"
        return "guard", "a prerequisite is not Passed"

    def script(self, _results: Sequence[FunctionResult]) -> Reply:
        """The next recorded assistant message of this turn (the SDK asks after each
        round of results); an empty text ends a turn that ended on a call."""
        if self.error is not None or not self.replies:
            return ""
        position, reply = self.replies.pop(0)
        self.position = position
        if isinstance(reply, str):
            self.observe_message("assistant", reply)
        return reply

    async def replay(self) -> RunResult:
        client = FunctionInvokingChatClient(
            ScriptedChatClient(self.script),
            configuration={"max_iterations": MAX_TURN_CALLS, "allow_concurrent_invocation": False},
        )
        agent = Agent(
            client=client,
            tools=self.tools,
            middleware=[self.guard.model_view, _Recorder(self), self.guard],
        )
        uses: Counter[str] = Counter()
        turn: list[tuple[int, Reply]] = []
        for position, message in enumerate([*self.run.messages, None]):
            if message is not None and message.role == "assistant":
                if message.calls:
                    requests = []
                    for call in message.calls:
                        uses[call.id] += 1
                        plan_id = call.id if uses[call.id] == 1 else f"{call.id}#{uses[call.id]}"
                        requests.append(
                            FunctionCallRequest(call.tool, dict(call.arguments), plan_id)
                        )
                    turn.append((position, requests))
                else:
                    turn.append((position, message.text))
                continue
            if message is not None and message.role == "tool":
                continue
            # a user message (or the end): the agent's turn so far runs first
            while turn:
                cut = next(
                    (i + 1 for i, (_, reply) in enumerate(turn) if isinstance(reply, str)),
                    len(turn),
                )
                self.replies, turn = turn[:cut], turn[cut:]
                await agent.run("(recorded turn)")
                if self.error is not None:
                    raise self.error
            if message is not None and message.role == "user":
                self.position = position
                self.observe_message("user", message.text)
        return self.result


#: The most calls one recorded turn may make before the SDK's loop gives up.
MAX_TURN_CALLS = 10_000


def replay_runs(
    runs: Iterable[RecordedRun], policy: Policy, factory: AdapterFactory
) -> list[RunResult]:
    async def all_runs() -> list[RunResult]:
        return [await _Replay(run, policy, factory).replay() for run in runs]

    return asyncio.run(all_runs())


def signature_stop(run: RecordedRun, repeats: int = 3) -> str | None:
    """The call id at which a plain loop detector stops the run: ``repeats`` identical
    calls (tool and arguments) in a row, as agent frameworks ship it; None: never."""
    last, count = None, 0
    for message in run.messages:
        for call in message.calls:
            signature = _canon(call.tool, call.arguments)
            count = count + 1 if signature == last else 1
            last = signature
            if count >= repeats:
                return call.id
    return None


def summary(runs: list[RecordedRun], results: list[RunResult]) -> dict[str, Any]:
    """The figures: per reward, runs with a refusal (by rule), runs stopped, runs
    flagged (either); every false refusal (a refused call the ground truth holds, in a
    reward-1 run); the signature detector's stops."""
    table: dict[str, Any] = {}
    for reward in (1, 0):
        chosen = [r for r in results if int(r.reward) == reward]
        by_rule = Counter(rule for r in chosen for rule in {x.rule for x in r.refusals})
        table[f"reward_{reward}"] = {
            "runs": len(chosen),
            "with_refusal": sum(1 for r in chosen if r.refusals),
            "by_rule": dict(sorted(by_rule.items())),
            "stopped": sum(1 for r in chosen if r.stopped is not None),
            "flagged": sum(1 for r in chosen if r.refusals or r.stopped is not None),
            "refusals": sum(len(r.refusals) for r in chosen),
            "signature_stops": sum(
                1 for run in runs if int(run.reward) == reward and signature_stop(run) is not None
            ),
        }
    table["false_refusals"] = [
        {
            "task_id": r.task_id,
            "trial": r.trial,
            "call_id": x.call_id,
            "tool": x.tool,
            "rule": x.rule,
            "reason": x.reason,
        }
        for r in results
        if int(r.reward) == 1
        for x in r.refusals
        if x.needed
    ]
    return table
