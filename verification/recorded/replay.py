"""Each recorded run through the guard, without running any tool.

For every assistant tool call, in order: the step (``adapter.step_of``); the resource
(the step's ``resource_argument``, mapped onto the policy's open slots in order of
first appearance, ``controller.resource_slots``; else the policy's fixed resource); the
proposal (``Plan``: the call id, the next revision, the current evidence revision); the
execution through the executor (``controller.executor.perform``) with the recorded
result as the effect, exactly as ``ReplanMiddleware`` takes a live call; a call
awaiting approval is put to ``adapter.approve`` and, approved, executed again (the
middleware's retry). A refused call's recorded result is dropped (in a guarded run the
model would never have read it); every other result, and every user message and
text-only assistant message, goes to the adapter, and its observations to the
controller. The assistant's text that rides along a tool call is dropped: τ-bench never
shows it to the user.

What it does not do: run the agent SDK's function-invocation loop. The guard's steps
are the middleware's, called directly (the SDK loop would only hand each recorded
call to them).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replan.controller import Controller
from replan.controller.adapter import Adapter
from replan.controller.executor import Executor, Grant, Operation, Outcome, perform
from replan.controller.journal import JSONValue
from replan.controller.policy import RESOURCE_SEPARATOR, Policy
from replan.controller.records import (
    Approval,
    EvidenceState,
    ExecuteResult,
    InvalidInput,
    Observation,
    StopReason,
    plan_digest,
)
from replan.controller.records import Plan as ControllerPlan
from replan.controller.resource_slots import ResourceSlots
from replan.verification.recorded.tau import RecordedRun

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


def approve_call(controller: Controller, executor: Executor, operation: Operation) -> bool:
    """The host approves the call awaiting approval (the one place an approval is given:
    the controller's plan approval, by the pending plan's digest)."""
    pending = controller.pending
    if pending is None or pending.id != operation.plan_id:
        return False
    return controller.approve(Approval(pending.id, plan_digest(pending)))


def _canon(tool: str, arguments: Mapping[str, Any]) -> str:
    return json.dumps([tool, arguments], sort_keys=True, default=str)


class _Replay:
    """One run through the guard."""

    def __init__(self, run: RecordedRun, policy: Policy, factory: AdapterFactory) -> None:
        self.run = run
        self.policy = policy
        self.controller = Controller(policy)
        self.executor = Executor(clock=lambda: 0.0)
        self.steps = {step.name: step for step in policy.steps}
        self.grant = Grant(policy.resources, self.steps)
        self.slots = ResourceSlots(policy)
        fixed = [r for r in policy.resources if r not in policy.open_resources]
        self.fixed = fixed[0] if len(fixed) == 1 else None
        self.needed = {_canon(tool, arguments) for tool, arguments in run.actions}
        self.result = RunResult(run.task_id, run.trial, run.reward)
        self.position = 0
        self.where = run.label
        self.adapter = self._host("new_adapter", factory)
        #: each call id's recorded results, in order (recorded ids repeat within a run)
        self.results: dict[str, list[str]] = {}
        for message in run.messages:
            if message.role == "tool" and message.call_id:
                self.results.setdefault(message.call_id, []).append(message.text)
        self.uses: Counter[str] = Counter()

    def _host(self, what: str, function: Callable[..., Any], *arguments: Any) -> Any:
        """Call the adapter: whatever it raises is bad input, naming the run and message."""
        try:
            return function(*arguments)
        except Exception as error:
            raise ReplayError(
                f"{self.where}, message {self.position}: the adapter's {what} raised "
                f"{type(error).__name__}: {str(error)[:160]}"
            ) from None

    def feed(self, observations: Iterable[Observation], call_id: str | None) -> None:
        for observation in observations:
            if type(observation) is not Observation:
                raise ReplayError(
                    f"{self.where}, message {self.position}: the adapter returned "
                    f"{type(observation).__name__}, not an Observation"
                )
            key = self.slots.key(observation.key)
            if key is None:
                continue  # a fact about a resource with no free slot is no evidence
            was = self.controller.stop_reason
            try:
                self.controller.observe(observation._replace(key=key))
            except (InvalidInput, ValueError) as error:
                raise ReplayError(f"{self.where}, message {self.position}: {error}") from None
            stop = self.controller.stop_reason
            if was is None and stop is not None and stop is not StopReason.COMPLETED:
                rule, why = self._host("explain_stop", self.adapter.explain_stop, str(stop))
                self.result.stopped = (str(stop), rule, why, call_id)

    def refuse(
        self, call_id: str, tool: str, arguments: Mapping[str, Any], rule: str, reason: str
    ) -> None:
        self.result.refusals.append(
            Refusal(
                call_id,
                tool,
                arguments,
                rule,
                reason,
                self.position,
                _canon(tool, arguments) in self.needed,
            )
        )

    def call(self, call_id: str, tool: str, arguments: Mapping[str, Any]) -> bool:
        """Take one call through the guard; True when the tool would run.

        The plan id is the call id, and ``id#n`` for its n-th use: a recorded run may
        give two calls one id (τ-bench records do), which a live guard would take for
        a retry of the first."""
        self.result.calls += 1
        self.uses[call_id] += 1
        use = self.uses[call_id]
        results = self.results.get(call_id, [])
        recorded = results[use - 1] if use <= len(results) else ""
        plan_id = call_id if use == 1 else f"{call_id}#{use}"
        if self.controller.stop_reason is not None:
            return False  # the run has stopped: the call never happens
        step_name = self._host("step_of", self.adapter.step_of, tool, arguments)
        step = self.steps.get(step_name)
        if step is None:
            raise ReplayError(
                f"{self.where}, message {self.position}: tool {tool!r} (step {step_name!r}) "
                f"is not a declared step of the policy"
            )
        if step.resource_argument is None:
            if self.fixed is None:
                raise ReplayError(
                    f"step {step.name!r}: no resource_argument and no single fixed "
                    "resource in the policy"
                )
            resource: str | None = self.fixed
            real = self.fixed
        else:
            value = arguments.get(step.resource_argument)
            if not isinstance(value, str) or not value:
                self.refuse(
                    call_id,
                    tool,
                    arguments,
                    "guard",
                    f"argument {step.resource_argument!r} does not name the resource as a string",
                )
                return False
            real = value
            resource = self.slots.slot(value)
            if resource is None:
                self.refuse(
                    call_id,
                    tool,
                    arguments,
                    "guard",
                    f"resource {value!r} finds no free slot "
                    f"(open: {', '.join(self.policy.open_resources)})",
                )
                return False
        plan = ControllerPlan(
            plan_id,
            self.controller.plan_revision + 1,
            self.controller.evidence_revision,
            step.name,
            resource,
        )
        if not self.controller.propose(plan):
            self.refuse(
                call_id,
                tool,
                arguments,
                "guard",
                f"the proposal was rejected ({self.controller.stop_reason or 'by the controller'})",
            )
            return False
        operation = Operation(plan_id, step.name, resource, dict(arguments))

        def effect(_operation: Operation) -> JSONValue:
            return {"text": recorded, "tool_ms": 0.0}

        performed = perform(self.controller, self.executor, operation, self.grant, effect)
        if performed.answer is ExecuteResult.AWAITING_APPROVAL:
            verdict = self._host("approve", self.adapter.approve, step.name, arguments)
            if not verdict.approved:
                self.refuse(call_id, tool, arguments, verdict.rule, verdict.reason)
                return False
            if not approve_call(self.controller, self.executor, operation):
                self.refuse(
                    call_id, tool, arguments, "guard", "the approval was refused by the controller"
                )
                return False
            self.result.approvals += 1
            performed = perform(self.controller, self.executor, operation, self.grant, effect)
        if performed.outcome is Outcome.EXECUTED:
            if self.controller.stop_reason is StopReason.COMPLETED:
                self.result.completed = call_id
            return True
        if performed.answer is ExecuteResult.PRECONDITION_DENIED:
            rule, reason = self._denied(step.name, resource, real)
            self.refuse(call_id, tool, arguments, rule, reason)
            return False
        answer = performed.answer or (
            performed.execution.outcome if performed.execution else "refused"
        )
        self.refuse(call_id, tool, arguments, "guard", f"{answer}")
        return False

    def _denied(self, step: str, slot: str, real: str) -> tuple[str, str]:
        """The rule and reason of the first required fact that is not Passed."""
        required = (
            *self.policy.requirements[step],
            *self.policy.resource_requirements[step].get(slot, ()),
        )
        for key in required:
            if self.controller.state(key) is not EvidenceState.PASSED:
                name, _, _ = key.partition(RESOURCE_SEPARATOR)
                resource = real if name != key else None
                rule, reason = self._host("explain", self.adapter.explain, name, resource)
                return (
                    str(rule),
                    f"{reason} ({name}{RESOURCE_SEPARATOR}{resource} "
                    f"is {self.controller.state(key)})"
                    if resource
                    else f"{reason} ({key} is {self.controller.state(key)})",
                )
        return "guard", "a prerequisite is not Passed"

    def replay(self) -> RunResult:
        #: call id -> its latest call (tool, arguments, ran); a result answers the latest
        calls: dict[str, tuple[str, Mapping[str, Any], bool]] = {}
        for position, message in enumerate(self.run.messages):
            self.position = position
            if message.role == "user":
                self.feed(
                    self._host(
                        "observe_message", self.adapter.observe_message, "user", message.text
                    ),
                    None,
                )
            elif message.role == "assistant" and not message.calls:
                self.feed(
                    self._host(
                        "observe_message", self.adapter.observe_message, "assistant", message.text
                    ),
                    None,
                )
            elif message.role == "assistant":
                for call in message.calls:
                    ran = self.call(call.id, call.tool, call.arguments)
                    calls[call.id] = (call.tool, call.arguments, ran)
            elif message.role == "tool":
                found = calls.get(message.call_id or "")
                if found is None:
                    raise ReplayError(
                        f"{self.where}, message {position}: a tool result for call "
                        f"{message.call_id!r}, which no earlier message made"
                    )
                tool, arguments, ran = found
                if not ran:
                    continue  # the model would never have read it
                self.feed(
                    self._host(
                        "observe_result", self.adapter.observe_result, tool, arguments, message.text
                    ),
                    message.call_id,
                )
        return self.result


def replay_runs(
    runs: Iterable[RecordedRun], policy: Policy, factory: AdapterFactory
) -> list[RunResult]:
    return [_Replay(run, policy, factory).replay() for run in runs]


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
