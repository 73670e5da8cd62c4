"""Guard any Microsoft Agent Framework agent: every tool call of the model becomes a
proposal, then an execution through the executor, before the tool may run.

Why a function middleware: ``controller.agent`` offers the model two tools of the
controller's own (``propose_plan``, ``execute_step``), which only fits an agent written
for replan. An existing agent already has its tools; ``ReplanMiddleware`` sits in the
SDK's function pipeline (``FunctionMiddleware``) in front of all of them, so the tools
stay as they are and none runs unless the controller and the executor let it:

- the **proposal**: the step is the tool's name, or what the host's ``step_of`` makes
  of the call (a tool that is no declared step is refused), the resource is the
  call's argument the policy names (``[[steps]] resource_argument``; default: the
  policy's one fixed resource), given an open slot when the policy has them
  (``controller.resource_slots``: a resource with no free slot is refused), the plan id is
  the call id (``context.metadata["call_id"]``), the revision follows the last one and
  the evidence revision is the one the model had been shown when it made the call
  (``ModelView``): a call planned before evidence it has not seen is stale;
- the **execution**: ``controller.executor.perform_async`` (grant, content digest,
  intent before the tool and receipt after it, in the host's journal). Only the
  controller's ``Executed`` reaches the tool (``call_next``); a retried call (the same
  call id) is answered from its receipt and the tool does not run again. The tool
  finds the call digest, its idempotency key, in ``context.metadata`` under
  ``IDEMPOTENCY_KEY``;
- the **approval** of a call whose step needs one: the host reads the calls awaiting
  approval (``awaiting()``: each call's arguments and digest) and approves one by its
  digest (``approve``); the call id is then bound to those arguments. The owner's
  word on an in-doubt call goes to the executor (``executor.resolve``,
  ``executor.abandon``).

A refused call never runs the tool: ``call_next`` is not called and the model reads a
one-line refusal, ``Kind: detail`` (``StalePlan: evidence changed, re-plan``,
``PreconditionDenied: access is Failed``, ``Stopped: StepLimit``, ``Refused: tool 'x'
is not a declared step``). The host turns trusted tool results into observations with
``observe_result(tool_name, arguments, result)`` (the result as the model reads it):
the model never observes, but a tool the host wrote and ran is the host's evidence.

Leaves to others: the decisions (``controller.Controller``), the effect's guarantees
(``controller.executor``, ``controller.journal``), the spans' names
(``controller.telemetry``).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from agent_framework import (
    ChatContext,
    ChatMiddleware,
    Content,
    FunctionInvocationContext,
    FunctionMiddleware,
    MiddlewareTermination,
    ResponseStream,
)
from opentelemetry.trace import SpanKind, TracerProvider
from pydantic import BaseModel, ValidationError

from replan.controller.approval import Approved, approve_call
from replan.controller.composite import (
    UnguardedPath,
    agent_behind,
    handoff_tools,
    is_handoff,
    unguarded_participant,
    unguarded_path,
)
from replan.controller.executor import (
    AsyncEffect,
    Execution,
    Executor,
    Grant,
    Operation,
    Outcome,
    Performed,
    perform_async,
)
from replan.controller.handoff import stop_text
from replan.controller.journal import JSONValue, canonical_json
from replan.controller.policy import RESOURCE_SEPARATOR, Policy, Step
from replan.controller.records import (
    Approval,
    EvidenceState,
    ExecuteResult,
    InvalidInput,
    Observation,
    Plan,
    PolicyError,
    Usage,
)
from replan.controller.resource_slots import ResourceSlots
from replan.controller.run import LARGEST_INT, Run
from replan.controller.telemetry import (
    EXECUTE_TOOL,
    GEN_AI_OPERATION,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_NAME,
    GEN_AI_TOOL_TYPE,
    PLAN_ID,
    RESULT,
    TracedController,
)
from replan.controller.tool_arguments import unparseable_as_raw

#: The host's adapter from a trusted tool result to observations: the tool's name,
#: its arguments, and the result as the model reads it (the text of the tool result).
ObserveResult = Callable[[str, Mapping[str, Any], str], Iterable[Observation]]
#: The host's map from a tool call to the step it is (``Adapter.step_of``).
StepOf = Callable[[str, Mapping[str, Any]], str]

#: What the model reads, first word, for a call that ran or was answered from its
#: receipt. Every other answer is a refusal and the tool did not run.
EXECUTED: Final = "Executed"
REPLAYED: Final = "Replayed"
#: The kind of the guard's own refusals (no controller answer applies).
REFUSED: Final = "Refused"
#: Where a tool finds its call's idempotency key (the call digest) in
#: ``FunctionInvocationContext.metadata``: the same on every attempt of the call.
IDEMPOTENCY_KEY: Final = "replan.idempotency_key"
#: Why the guard ends the SDK's function-invocation loop (``MiddlewareTermination``).
STOP_ENDS_RUN: Final = "the replan run has stopped"


@dataclass(frozen=True)
class GuardedCall:
    """One tool call as the guard answered it (``ReplanMiddleware.calls``)."""

    tool: str
    call_id: str | None
    arguments: Mapping[str, Any]
    #: ``Executed``, ``Replayed``, or the refusal's kind (``StalePlan``, ``Refused``...).
    outcome: str
    #: What the model read: the tool's result, its receipt's, or the refusal line.
    result: str
    plan: Plan | None = None
    #: Wall-clock milliseconds the tool itself took (``Executed`` only).
    tool_ms: float | None = None


#: How a provider response is charged: the host's function from the response's
#: reported usage (``UsageDetails``: token counts, possibly missing or nonsense) to a
#: ``Usage``. The default counts ``total_token_count`` (else input + output) and no
#: cost; give one that prices tokens to charge ``max_cost``.
ResponseUsage = Callable[[Mapping[str, Any]], Usage]
#: How a guarded call is charged besides its wall time (a priced API call, say).
ToolUsage = Callable[[GuardedCall], Usage]

#: The share of a budget after which every tool result carries a budget-status line,
#: so the model can wrap up before the hard stop.
WARN_AT: Final = 0.8


def _amount(value: object) -> int:
    """A reported amount as ``charge`` takes it: an int in 0..``LARGEST_INT``. Whatever
    a provider or a model reports (None, a string, a negative or non-finite count, one
    past the bound) never makes ``charge`` raise: it counts as what it says, rounded
    and at most the bound (which exhausts any budget), or as nothing."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, float):
        if not math.isfinite(value):
            return 0
        value = round(value)
    if isinstance(value, int):
        return min(max(int(value), 0), LARGEST_INT)
    return 0


def reported_tokens(usage: Mapping[str, Any]) -> Usage:
    """The default ``ResponseUsage``: the response's tokens, no cost, no time (the
    guard times the round trip itself)."""
    total = _amount(usage.get("total_token_count"))
    if total == 0:
        parts = _amount(usage.get("input_token_count")) + _amount(usage.get("output_token_count"))
        total = min(parts, LARGEST_INT)
    return Usage(total, 0, 0)


def budget_status(run: Run) -> str | None:
    """One line naming each budget past ``WARN_AT`` of its limit, or None."""
    policy = run.policy
    used = [
        (name, spent, limit)
        for name, spent, limit in (
            ("tokens", run.tokens, policy.max_tokens),
            (f"cost (micro-{policy.currency})", run.cost, policy.max_cost),
            ("wall-clock ms", run.elapsed_ms, policy.max_wall_ms),
        )
        if limit > 0 and spent >= WARN_AT * limit
    ]
    if not used or run.stop_reason is not None:
        return None
    parts = ", ".join(
        f"{name} {spent} of {limit} ({spent * 100 // limit}%)" for name, spent, limit in used
    )
    return f"Budget: {parts} used; wrap up before the run stops with BudgetExhausted."


def _text(result: object) -> str:
    """The tool result as the model reads it: the text of its text contents."""
    if isinstance(result, str):
        return result
    if isinstance(result, list):
        return "\n".join(
            item.text if isinstance(item, Content) and item.text is not None else str(item)
            for item in result
        )
    return "" if result is None else str(result)


def _stored(result: object, tool_ms: float) -> JSONValue:
    """The tool result as its receipt keeps it, so that a replay hands the model the
    same thing: the texts of a result of plain text contents (the common case, and
    cheap), else the contents as the SDK serialises them, else their text (a receipt
    must be JSON). With it, the tool's wall time, which the run is charged: a durable
    guard recovered after the tool ran reads both from the receipt."""
    elapsed = round(tool_ms, 3)
    if isinstance(result, list) and all(isinstance(item, Content) for item in result):
        if all(item.type == "text" and not item.additional_properties for item in result):
            texts: JSONValue = {"texts": [item.text or "" for item in result], "tool_ms": elapsed}
            return texts
        contents = [item.to_dict() for item in result]
        try:
            canonical_json(contents, "result")
        except InvalidInput:
            return {"text": _text(result), "tool_ms": elapsed}
        stored: JSONValue = {"contents": contents, "tool_ms": elapsed}
        return stored
    return {"text": _text(result), "tool_ms": elapsed}


def _tool_ms(stored: object) -> float:
    """The tool's wall time a receipt keeps (0 for a receipt without one)."""
    found = stored.get("tool_ms") if isinstance(stored, dict) else None
    return float(found) if isinstance(found, int | float) and not isinstance(found, bool) else 0.0


def _restored(stored: object) -> str | list[Content]:
    """A receipt's result as the SDK hands it to the model."""
    if isinstance(stored, dict):
        texts = stored.get("texts")
        if isinstance(texts, list):
            return [Content.from_text(str(text)) for text in texts]
        contents = stored.get("contents")
        if isinstance(contents, list):
            return [Content.from_dict(item) for item in contents]
        return str(stored.get("text", ""))
    return _text(stored)


def _arguments(arguments: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(arguments, BaseModel):
        dumped: dict[str, Any] = arguments.model_dump(mode="json")
        return dumped
    return dict(arguments)


def _as_given(
    given: BaseModel | Mapping[str, Any], digested: dict[str, Any]
) -> BaseModel | dict[str, Any]:
    """The digested arguments (a fresh copy of exactly what the call digest covers), in
    the form the tool was given them: what reaches the tool is what was checked."""
    if isinstance(given, BaseModel):
        return type(given).model_validate(digested)
    return digested


def _misfit(model: object, arguments: Mapping[str, Any]) -> str | None:
    """Why ``arguments`` do not validate against the tool's parameters (None: they
    do, or the tool declares a plain JSON schema, which the SDK checks itself)."""
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return None
    try:
        model.model_validate(arguments)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "arguments"
        return f"{where}: {first['msg']}"
    return None


def answer_of(response: object) -> str:
    """What an agent's run ended with: the model's last text, or, when the guard ended
    the run because it stopped, the last tool result (the call's answer and
    ``stop_text``: why, and the handoff summary)."""
    text = getattr(response, "text", "")
    if isinstance(text, str) and text:
        return text
    for message in reversed(list(getattr(response, "messages", None) or ())):
        for content in reversed(list(getattr(message, "contents", None) or ())):
            if getattr(content, "type", None) == "function_result":
                return _text(getattr(content, "result", ""))
    return ""


def refusal(kind: str, detail: str) -> str:
    """The line a refused call answers the model: ``Kind: detail``."""
    return f"{kind}: {detail}"


class ModelView(ChatMiddleware):
    """Remembers the evidence revision at each provider call: what the model had been
    shown when it made the calls of its next response. Calls from one response run
    after one another; when the first changes the evidence, the ones after it were
    planned without that evidence, and are stale (the model sees every result of the
    batch together, in its next request).

    A chat middleware because only the chat pipeline sees each provider round trip;
    installed with the guard by ``ReplanMiddleware.middleware``. Without it, a call
    cites the revision current when it arrives (it is never stale)."""

    def __init__(self, guard: ReplanMiddleware) -> None:
        self.guard = guard

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        self.guard.seen_revision = self.guard.run.evidence_revision
        started = self.guard.clock()
        elapsed = await self.guard._round_trip(context, call_next)
        result = context.result
        if isinstance(result, ResponseStream):
            # a streamed response (an agent used as a tool streams) reports its usage
            # when the stream is final: charged then, with the time until then
            def charge_when_final(final: object) -> None:
                self._charge(final, _amount((self.guard.clock() - started) * 1000))

            try:
                result.with_result_transform(charge_when_final)
            except RuntimeError:  # already consumed: what is known now
                self._charge(None, elapsed)
            return
        self._charge(unparseable_as_raw(result), elapsed)

    def _charge(self, response: object, elapsed: int) -> None:
        reported = getattr(response, "usage_details", None)
        usage = self.guard.response_usage(reported if isinstance(reported, Mapping) else {})
        self.guard.charge(Usage(usage.tokens, usage.cost, usage.elapsed_ms + elapsed))


class ReplanMiddleware(FunctionMiddleware):
    """Every tool call of the model becomes a proposal and an execution through the
    executor; a refused call never runs the tool (see the module docstring).

    ``controller`` is one run (``controller.Controller``); ``executor`` keeps the
    receipts (give it a ``SqliteJournal`` to survive the process; one journal is one
    namespace of call ids); ``grant`` is the owner's authority, never the model's;
    ``observe_result`` turns a trusted result into observations (a per-resource key
    names the real resource, ``cancellable@9HBUV8``; the guard maps it onto its slot);
    ``step_of`` names the step a call is (default: the tool's name); ``tracer_provider``
    (default: the global one) receives the ``execute_tool`` spans and the controller
    calls' spans inside them. Calls are guarded one at a time: one controller is one
    run owned by one caller at a time, even under concurrent function invocation.

    Once the run has stopped (any reason: completed, a limit, a budget, a cancel),
    the call's result ends with ``stop_text`` (why, and the handoff summary) and the
    SDK's function-invocation loop ends there with that result (``ends_on_stop``;
    False: every later call is answered ``Stopped`` and the model goes on). An agent
    used as a tool is a path (``controller.composite``): the guard must be installed
    on that agent too, or the call is refused.
    """

    def __init__(
        self,
        controller: Run,
        *,
        executor: Executor,
        grant: Grant,
        observe_result: ObserveResult | None = None,
        tracer_provider: TracerProvider | None = None,
        tool_usage: ToolUsage | None = None,
        response_usage: ResponseUsage = reported_tokens,
        clock: Callable[[], float] = time.perf_counter,
        step_of: StepOf | None = None,
        ends_on_stop: bool = True,
    ) -> None:
        self.run = controller
        self.policy: Policy = controller.policy
        self.controller = TracedController(controller, tracer_provider=tracer_provider)
        self.tracer = self.controller.tracer
        self.executor = executor
        self.grant = grant
        self.observe_result = observe_result
        self.step_of = step_of
        #: The run's open resources onto the policy's slots (None: the policy has none).
        self.slots = ResourceSlots(self.policy) if self.policy.open_resources else None
        self.tool_usage = tool_usage
        self.response_usage = response_usage
        #: The guard's own clock (seconds): a tool's and a provider call's wall time are
        #: charged from it. The controller reads no clock; time reaches it only as a
        #: charged Usage.
        self.clock = clock
        self.steps: dict[str, Step] = {step.name: step for step in self.policy.steps}
        fixed = [r for r in self.policy.resources if r not in self.policy.open_resources]
        self.default_resource = fixed[0] if len(fixed) == 1 else None
        for index, step in enumerate(self.policy.steps):
            if step.resource_argument is None and self.default_resource is None:
                raise PolicyError(
                    f"steps[{index}].resource_argument: missing field: the policy allows "
                    f"{len(fixed)} fixed resources, so a call of tool "
                    f"{step.name!r} cannot take its resource from the policy; name the "
                    "tool argument that holds it"
                )
        #: The evidence revision the model was last shown (``ModelView``); None until
        #: the first provider call, or without ``ModelView`` installed.
        self.seen_revision: int | None = None
        self.model_view = ModelView(self)
        #: Every call guarded, in order.
        self.calls: list[GuardedCall] = []
        #: The call ids this guard has charged: a retry answered from its receipt by a
        #: guard that has not charged the call (one restored after a crash between the
        #: receipt and the charge) charges it then.
        self._charged: set[str] = set()
        self._lock = asyncio.Lock()
        self.ends_on_stop = ends_on_stop
        #: the routing tools of the workflows ``guard_workflow`` checked
        self._handoffs: set[str] = set()

    @property
    def middleware(self) -> list[ChatMiddleware | FunctionMiddleware]:
        """The guard and its ``ModelView``, to install together (``Agent(...,
        middleware=guard.middleware)``, or a chat client's ``middleware=``). A plain
        list rather than the SDK's ``MiddlewareBundle``, which 1.23.0 marks
        experimental."""
        return [self.model_view, self]

    async def process(
        self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]
    ) -> None:
        name = context.function.name
        call_id = context.metadata.get("call_id")
        if agent_behind(context.function) is not None:
            await self._through_agent(context, call_next, name, call_id)
            return
        if is_handoff(context.function):
            await self._handoff(context, call_next, name, call_id)
            return
        async with self._lock:
            await self._guard_and_trace(context, call_next, name, call_id)
        if self.ends_on_stop and self.run.stop_reason is not None:
            # the last tool result says why the run stopped and what is left, and the
            # SDK's loop ends with it: no exception reaches the caller
            context.result = f"{_text(context.result)}\n{stop_text(self.run)}"
            raise MiddlewareTermination(STOP_ENDS_RUN, result=context.result)

    async def _through_agent(
        self,
        context: FunctionInvocationContext,
        call_next: Callable[[], Awaitable[None]],
        name: str,
        call_id: object,
    ) -> None:
        """An agent used as a tool (``controller.composite``): a path, not an effect.
        Its agent's own tool calls come back to this guard one by one (so no lock is
        held while it runs); an agent whose tools this guard would not see is refused."""
        unguarded = unguarded_path(agent_behind(context.function), self)
        if unguarded is None:
            await call_next()
            return
        self._refuse_path(
            context,
            call_id,
            f"tool {name!r} runs agent {unguarded}, whose own tool calls this guard does "
            "not see: install the guard's middleware on that agent too",
        )

    def _refuse_path(self, context: FunctionInvocationContext, call_id: object, why: str) -> None:
        """Refuse a call that leads to tools this guard would not see (the model reads
        why); the call runs nothing and changes nothing in the run."""
        line = refusal(REFUSED, why)
        context.result = line
        known_id = call_id if isinstance(call_id, str) else None
        arguments = _arguments(context.arguments)
        self.calls.append(GuardedCall(context.function.name, known_id, arguments, REFUSED, line))

    def guard_workflow(self, workflow: Any) -> Any:
        """Check ``workflow`` before it runs: every agent it runs carries this guard
        (``UnguardedPath``, one line naming the first that does not), so every tool
        call of the run comes back here, under one budget; then its handoffs pass.
        Returns ``workflow``."""
        unguarded = unguarded_participant(workflow, self)
        if unguarded is not None:
            raise UnguardedPath(
                f"{unguarded} runs tools without this guard: give every agent "
                "middleware=guard.middleware before building the workflow"
            )
        self._handoffs |= handoff_tools(workflow)
        return workflow

    async def _handoff(
        self,
        context: FunctionInvocationContext,
        call_next: Callable[[], Awaitable[None]],
        name: str,
        call_id: object,
    ) -> None:
        """A handoff runs nothing: the workflow's routing takes it (after this guard).
        Passed for a workflow ``guard_workflow`` checked; refused for any other, whose
        next agent may run tools this guard never sees."""
        if name in self._handoffs:
            await call_next()
            return
        self._refuse_path(
            context,
            call_id,
            f"tool {name!r} hands the run to an agent of a workflow this guard has not "
            "checked: call guard.guard_workflow(workflow) before running it",
        )

    async def _guard_and_trace(
        self,
        context: FunctionInvocationContext,
        call_next: Callable[[], Awaitable[None]],
        name: str,
        call_id: object,
    ) -> None:
        """One call guarded, in an ``execute_tool`` span when the controller traces."""
        if not self.controller.tracing:
            self.calls.append(await self._guard(context, call_next, name, call_id))
            self._tell_budget(context)
            return
        with self.tracer.start_as_current_span(
            f"{EXECUTE_TOOL} {name}", kind=SpanKind.INTERNAL
        ) as span:
            recording = span.is_recording()
            if recording:
                span.set_attribute(GEN_AI_OPERATION, EXECUTE_TOOL)
                span.set_attribute(GEN_AI_TOOL_NAME, name)
                span.set_attribute(GEN_AI_TOOL_TYPE, "function")
                if isinstance(call_id, str):
                    span.set_attribute(GEN_AI_TOOL_CALL_ID, call_id)
                    span.set_attribute(PLAN_ID, call_id)
            call = await self._guard(context, call_next, name, call_id)
            self.calls.append(call)
            self._tell_budget(context)
            if recording:
                span.set_attribute(RESULT, call.outcome)

    # ---- what the guard reads from the world (a durable guard records each) ----------

    async def _round_trip(
        self, context: ChatContext, call_next: Callable[[], Awaitable[None]]
    ) -> int:
        """The provider call; its wall time in milliseconds, on the guard's clock."""
        started = self.clock()
        await call_next()
        return _amount((self.clock() - started) * 1000)

    async def _journal_knows(self, call_id: str) -> bool:
        """Whether the journal holds a record of ``call_id`` (the call is a retry)."""
        return self.executor.journal.knows(call_id)

    async def _perform(
        self, operation: Operation, context: FunctionInvocationContext, effect: AsyncEffect
    ) -> Performed:
        """The execution through the executor; ``effect`` runs the tool and returns
        what its receipt keeps."""
        return await perform_async(self.controller, self.executor, operation, self.grant, effect)

    # ---- the host's approval of a call ------------------------------------------------

    def awaiting(self) -> list[Operation]:
        """The calls awaiting the host's approval now (their arguments, and the
        digest an approval must name)."""
        run = self.run
        pending = run.pending
        if pending is None or run.declared_state != "awaiting_approval":
            return []
        waiting = self.executor.awaiting.get(pending.id)
        return [] if waiting is None else [waiting]

    def approve(self, approval: Approval) -> Approved:
        """Approve one call awaiting approval, by its call id and digest
        (``controller.approval.approve_call``): its next request runs it, with those
        arguments and no others."""
        return approve_call(self.controller, self.executor, approval)

    # ---- budgets ----------------------------------------------------------------------

    def charge(self, usage: Usage) -> None:
        """Charge the run (a usage built by ``_amount``, so ``charge`` never raises for
        what a provider reported). Reaching a budget stops the run BudgetExhausted;
        every later call is refused ``Stopped: BudgetExhausted``."""
        self.controller.call("charge", usage)

    def _tell_budget(self, context: FunctionInvocationContext) -> None:
        """Past ``WARN_AT`` of a budget, the model reads a budget-status line after
        the tool result (text results; a rich result gets it as one more text)."""
        line = budget_status(self.run)
        if line is None:
            return
        result = context.result
        if isinstance(result, str):
            context.result = f"{result}\n{line}"
        elif isinstance(result, list):
            context.result = [*result, Content.from_text(line)]

    # ---- one call ---------------------------------------------------------------------

    async def _guard(
        self,
        context: FunctionInvocationContext,
        call_next: Callable[[], Awaitable[None]],
        name: str,
        call_id: object,
    ) -> GuardedCall:
        arguments = _arguments(context.arguments)

        def refuse(kind: str, detail: str, plan: Plan | None = None) -> GuardedCall:
            line = refusal(kind, detail)
            context.result = line
            return GuardedCall(
                name, call_id if isinstance(call_id, str) else None, arguments, kind, line, plan
            )

        operation = self._operation(context, name, call_id, arguments)
        if not isinstance(operation, Operation):
            return refuse(*operation)
        plan, rejected = await self._propose_new(operation)
        if rejected is not None:
            return refuse(*rejected, plan=plan)

        async def effect(_operation: Operation) -> JSONValue:
            context.metadata[IDEMPOTENCY_KEY] = _operation.digest()
            context.arguments = _as_given(context.arguments, _operation.arguments)
            started = self.clock()
            await call_next()
            return _stored(context.result, (self.clock() - started) * 1000)

        performed = await self._perform(operation, context, effect)
        execution = performed.execution
        if execution is None:
            assert performed.answer is not None
            return refuse(*self._answered(performed.answer), plan=plan)
        if execution.outcome not in (Outcome.EXECUTED, Outcome.REPLAYED):
            return refuse(str(execution.outcome), execution.reason, plan)
        return self._done(context, operation, execution, arguments, plan)

    def _operation(
        self,
        context: FunctionInvocationContext,
        name: str,
        call_id: object,
        arguments: dict[str, Any],
    ) -> Operation | tuple[str, str]:
        """The call as an operation, or why the guard refuses it before the controller
        is asked (a call the SDK would refuse to run must not use a step and leave its
        intent in doubt)."""
        step_name = name if self.step_of is None else self.step_of(name, arguments)
        step = self.steps.get(step_name)
        if step is None:
            called = repr(name) if step_name == name else f"{name!r} (step {step_name!r})"
            declared = ", ".join(self.steps) or "none"
            return (REFUSED, f"tool {called} is not a declared step (declared: {declared})")
        misfit = _misfit(context.function.input_model, arguments)
        if misfit is not None:
            return (REFUSED, f"the arguments do not fit tool {name!r}: {misfit}")
        if not isinstance(call_id, str) or not call_id:
            return (REFUSED, f"the call of tool {name!r} has no call id")
        resource: object = self.default_resource
        if step.resource_argument is not None:
            resource = arguments.get(step.resource_argument)
            if not isinstance(resource, str) or not resource:
                return (
                    REFUSED,
                    f"tool {name!r} names its resource in argument "
                    f"{step.resource_argument!r}, which the call does not give as a string",
                )
        assert isinstance(resource, str)
        if self.slots is not None:
            slot = self.slots.slot(resource)
            if slot is None:
                return (
                    REFUSED,
                    f"resource {resource!r} finds no free slot "
                    f"(open: {', '.join(self.policy.open_resources)})",
                )
            resource = slot
        try:
            return Operation(call_id, step.name, resource, arguments)
        except InvalidInput as error:
            return (REFUSED, f"the call's arguments are not JSON ({error})")

    async def _propose_new(
        self, operation: Operation
    ) -> tuple[Plan | None, tuple[str, str] | None]:
        """Propose a new call: the plan proposed (None for a retry) and the refusal, if
        the controller rejected it. A retry is not proposed again: a call id the
        journal knows is answered from it, and the pending plan of this id (one denied
        by its precondition, or awaiting approval) is executed as it is; proposing it
        again would use a slot, and supersede an approval. A call the controller
        completed is answered by the executor even in a stopped run (from its receipt,
        or in doubt when its intent was never written), never "Stopped" as if it had
        not been decided."""
        call_id = operation.plan_id
        pending = self.run.pending
        if (
            await self._journal_knows(call_id)
            or (pending is not None and pending.id == call_id)
            or call_id in self.run._completed
        ):
            return None, None
        seen = self.seen_revision
        cited = seen if seen is not None else self.run.evidence_revision
        plan = Plan(call_id, self.run.plan_revision + 1, cited, operation.step, operation.resource)
        if self.controller.propose(plan):
            return plan, None
        return plan, self._rejected(plan)

    def _done(
        self,
        context: FunctionInvocationContext,
        operation: Operation,
        execution: Execution,
        arguments: dict[str, Any],
        plan: Plan | None,
    ) -> GuardedCall:
        """A call that ran (its result observed and charged) or was answered from its
        receipt (charged, when this guard has not charged it)."""
        name, call_id = operation.step, operation.plan_id
        assert execution.receipt is not None
        tool_ms = _tool_ms(execution.receipt.result)
        if execution.outcome is Outcome.EXECUTED:
            text = _text(context.result)
            call = GuardedCall(name, call_id, arguments, EXECUTED, text, plan, tool_ms)
            if self.observe_result is not None:
                for observation in self.observe_result(name, arguments, text):
                    mapped = self.slotted(observation)
                    if mapped is not None:
                        self.controller.observe(mapped)
            self._charge_call(call, tool_ms)
            return call
        context.result = _restored(execution.receipt.result)
        call = GuardedCall(name, call_id, arguments, REPLAYED, _text(context.result), plan)
        if call_id not in self._charged:
            self._charge_call(call, tool_ms)
        return call

    def _charge_call(self, call: GuardedCall, tool_ms: float) -> None:
        """Charge the run a call's tool time and the host's usage for it, before its
        answer reaches the model."""
        extra = Usage(0, 0, 0) if self.tool_usage is None else self.tool_usage(call)
        self.charge(Usage(extra.tokens, extra.cost, extra.elapsed_ms + _amount(tool_ms)))
        if call.call_id is not None:
            self._charged.add(call.call_id)

    def slotted(self, observation: Observation) -> Observation | None:
        """``observation`` with its resource mapped onto the run's slot (None: the
        resource finds no free slot, so the fact is no evidence). Without open slots,
        the observation as it is."""
        if (
            self.slots is None
            or type(observation) is not Observation
            or type(observation.key) is not str
            or RESOURCE_SEPARATOR not in observation.key
        ):
            return observation
        key = self.slots.key(observation.key)
        return None if key is None else observation._replace(key=key)

    # ---- what the model reads when the controller refuses ------------------------------

    def _rejected(self, plan: Plan) -> tuple[str, str]:
        """Why the controller rejected ``plan`` (a call it completed is never proposed
        again, so the rejection is never that one)."""
        stopped = self.run.stop_reason
        if stopped is not None:
            return ("Stopped", str(stopped))
        fired = self.run._trace[-1][5]
        label = type(self.run).transitions[fired] if fired is not None else ""
        if "[evidence_stale]" in label:
            return (
                str(ExecuteResult.STALE_PLAN),
                f"evidence changed since this call was planned (evidence revision "
                f"{plan.evidence_revision}, now {self.run.evidence_revision}), re-plan",
            )
        if "[resource_not_allowed]" in label:
            return (
                REFUSED,
                f"resource {plan.resource!r} is not allowed "
                f"(allowed: {', '.join(self.policy.resources)})",
            )
        return (REFUSED, f"the proposal was rejected ({label or 'no transition'})")

    def _answered(self, answer: ExecuteResult) -> tuple[str, str]:
        """The refusal for a controller answer that did not let the tool run."""
        if answer is ExecuteResult.PRECONDITION_DENIED:
            pending = self.run.pending
            policy = self.run.policy
            required = (
                ()
                if pending is None
                else (
                    *policy.requirements[pending.step],
                    *policy.resource_requirements[pending.step].get(pending.resource, ()),
                )
            )
            waiting = [
                f"{key} is {self.run.evidence_state(key)}"
                for key in required
                if self.run.evidence_state(key) is not EvidenceState.PASSED
            ]
            return (str(answer), ", ".join(waiting) or "a prerequisite is not Passed")
        if answer is ExecuteResult.STALE_PLAN:
            return (str(answer), "evidence changed, re-plan")
        if answer in (ExecuteResult.STOPPED, ExecuteResult.STEP_LIMIT):
            return ("Stopped", str(self.run.stop_reason))
        if answer is ExecuteResult.AWAITING_APPROVAL:
            return (str(answer), "a person must approve this call before it runs")
        return (REFUSED, str(answer))


__all__ = [
    "EXECUTED",
    "IDEMPOTENCY_KEY",
    "REFUSED",
    "REPLAYED",
    "WARN_AT",
    "GuardedCall",
    "ModelView",
    "ObserveResult",
    "ReplanMiddleware",
    "ResponseUsage",
    "StepOf",
    "ToolUsage",
    "budget_status",
    "refusal",
    "reported_tokens",
]
