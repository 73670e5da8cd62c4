"""The controller offered to a chat provider through Microsoft Agent Framework.

Owns: the two model-facing tools (``propose_plan``, ``execute_step``) bound to one
controller, their advertised JSON schemas, the function-invocation configuration (at
most ``MAX_ITERATIONS`` provider round trips per request, concurrent invocation off,
as the .NET reference configures ``FunctionInvokingChatClient``), the rule that
malformed tool arguments reach the controller as a malformed value (a rejected
proposal that still uses its slot), and one request through the SDK's
function-invocation layer.

Leaves to others: what the controller decides (``controller.Controller``); the
provider (any ``BaseChatClient``; the tests and the reference episode use
``verification.subjects.scripted.ScriptedChatClient``, which is a script, not a model);
observations, which only the host delivers by calling ``controller.observe``. No
tool here can observe: a model proposes, the host's evidence decides.

This module and ``controller.middleware`` (``ReplanMiddleware``, which guards any
agent's own tools and is re-exported here) are the only ones that import
``agent_framework`` (pinned in pyproject.toml); ``controller/__init__.py`` imports
neither, so applications that only run the controller never load the SDK. The SDK
names the provider side needs are re-exported at the bottom so that the SDK stays
behind these modules.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, Protocol

from agent_framework import (
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatOptions,
    ChatResponse,
    Content,
    FunctionInvocationConfiguration,
    FunctionInvocationContext,
    FunctionInvocationLayer,
    FunctionMiddleware,
    FunctionTool,
    Message,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from replan.controller.middleware import GuardedCall, ModelView, ReplanMiddleware, answer_of
from replan.controller.records import ExecuteResult, Plan
from replan.controller.tool_arguments import unparseable_as_raw

#: Provider round trips the SDK allows in one request before it asks for a final
#: answer with tools disabled (.NET: ``MaximumIterationsPerRequest = 4``).
MAX_ITERATIONS: Final = 4

#: The function-invocation layer's settings. Concurrent invocation is off because one
#: controller is one run owned by one caller at a time (CONTRACT.md "State of one
#: run"): two calls from one provider response run one after the other, in the
#: provider's order (.NET: ``AllowConcurrentInvocation = false``).
FUNCTION_INVOCATION: Final[FunctionInvocationConfiguration] = {
    "max_iterations": MAX_ITERATIONS,
    "allow_concurrent_invocation": False,
}

PROPOSE_PLAN: Final = "propose_plan"
EXECUTE_STEP: Final = "execute_step"
#: The tool of each event the declaration offers the model (its interface's caller
#: "model"); a host-only event has none, so a model cannot call it.
TOOLS_OF_EVENTS: Final = {"propose": PROPOSE_PLAN, "execute": EXECUTE_STEP}


class ModelFacing(Protocol):
    """The part of a controller a model may reach. ``observe`` is deliberately absent."""

    def propose(self, plan: Plan) -> bool: ...

    def execute(self, plan_id: str) -> ExecuteResult: ...


def _advertised_schema(schema: dict[str, Any]) -> None:
    """What the provider is shown: names, types and field descriptions. pydantic's
    titles ('Planid') say nothing the names do not, and the class docstring is
    written for developers, not for the provider; drop both."""
    schema.pop("title", None)
    schema.pop("description", None)
    for item in schema.get("properties", {}).values():
        item.pop("title", None)


_STRICT = ConfigDict(strict=True, extra="forbid", json_schema_extra=_advertised_schema)


class ProposePlanArguments(BaseModel):
    """``propose_plan``'s parameters. Strict: a string is never turned into an integer
    (nor a bool into one) and an unknown key is an error, so nothing the provider
    sends is silently repaired into a valid plan."""

    model_config = _STRICT

    planId: str = Field(description="A new id for this plan.")
    revision: int = Field(description="This plan's revision; above every earlier one.")
    evidenceRevision: int = Field(description="The evidence revision the plan is based on.")
    step: str = Field(description="The policy step to run.")
    resource: str = Field(description="The resource the step works on.")


class ExecuteStepArguments(BaseModel):
    """``execute_step``'s parameter, as strict as ``ProposePlanArguments``."""

    model_config = _STRICT

    stepId: str = Field(description="The id of the pending plan to execute.")


class ControllerTools:
    """``propose_plan`` and ``execute_step`` as SDK ``FunctionTool`` objects, bound to
    one controller. Each call reaches the controller exactly once, and one at a time:
    the SDK may invoke tools from threads, and a run is owned by one caller at a time."""

    def __init__(self, controller: ModelFacing) -> None:
        self.controller = controller
        self._serial = threading.Lock()
        events: Mapping[str, tuple[Any, ...]] = getattr(type(controller), "events", {})
        offered = {event for event, (_, _, caller) in events.items() if caller == "model"}
        if events and offered != set(TOOLS_OF_EVENTS):
            raise ValueError(
                f"the declaration offers the model {sorted(offered)}, the tools here are for "
                f"{sorted(TOOLS_OF_EVENTS)}: give each model-facing event a tool"
            )
        self.propose_plan = FunctionTool(
            name=PROPOSE_PLAN,
            description=(
                "Propose the next plan. Returns true when the controller accepted it "
                "as the pending plan, false when it refused it."
            ),
            func=self._propose_plan,
            input_model=ProposePlanArguments,
        )
        self.execute_step = FunctionTool(
            name=EXECUTE_STEP,
            description=(
                "Execute the pending plan with this id. Returns one of "
                + ", ".join(str(result) for result in ExecuteResult)
                + "."
            ),
            func=self._execute_step,
            input_model=ExecuteStepArguments,
        )
        #: Everything a provider is offered; nothing here observes.
        self.tools: tuple[FunctionTool, ...] = (self.propose_plan, self.execute_step)

    def _propose_plan(
        self, planId: str, revision: int, evidenceRevision: int, step: str, resource: str
    ) -> bool:
        plan = Plan(planId, revision, evidenceRevision, step, resource)
        with self._serial:
            return self.controller.propose(plan)

    def _execute_step(self, stepId: str) -> str:
        with self._serial:
            return str(self.controller.execute(stepId))

    def refuse_malformed(self, tool_name: str, raw: Mapping[str, Any]) -> bool | str:
        """A call whose arguments do not fit the schema reaches the controller as the
        raw mapping itself, which is neither a plan nor a plan id: ``propose`` rejects
        it and the proposal has used its slot; ``execute`` answers ``UnknownPlan``.
        (CONTRACT.md: model input never raises; a malformed proposal is a rejected
        proposal.)"""
        value: Any = dict(raw)
        with self._serial:
            if tool_name == PROPOSE_PLAN:
                return self.controller.propose(value)
            return str(self.controller.execute(value))


def _conforms(model: type[BaseModel] | None, arguments: object) -> bool:
    if model is None:
        return False
    if isinstance(arguments, BaseModel):
        arguments = arguments.model_dump(exclude_unset=True)
    try:
        model.model_validate(arguments)
    except ValidationError:
        return False
    return True


class MalformedArgumentsGate(FunctionMiddleware):
    """Sends a ``propose_plan`` or ``execute_step`` call with malformed arguments to
    ``ControllerTools.refuse_malformed`` instead of letting the SDK answer
    "Argument parsing failed" without the controller ever seeing the call: that
    answer would give a misbehaving provider unlimited free proposals.

    Function middleware is the SDK's own seam for this: when its argument validation
    fails, middleware receives the raw JSON-parsed mapping (see
    ``agent_framework.FunctionMiddleware``). A well-formed call passes on unchanged.
    """

    def __init__(self, tools: ControllerTools) -> None:
        self.tools = tools
        self.names = frozenset(tool.name for tool in tools.tools)

    async def process(
        self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]
    ) -> None:
        function = context.function
        if function.name in self.names and not _conforms(function.input_model, context.arguments):
            raw = context.arguments
            mapping = raw.model_dump() if isinstance(raw, BaseModel) else dict(raw)
            answer = self.tools.refuse_malformed(function.name, mapping)
            # The same rendering the SDK gives the tool's own return value ("false").
            context.result = FunctionTool.parse_result(answer)
            return
        await call_next()


class FunctionInvokingChatClient(
    FunctionInvocationLayer[Any], ChatMiddlewareLayer[Any], BaseChatClient[Any]
):
    """The SDK's function-invocation layer around a provider, configured with
    ``FUNCTION_INVOCATION`` (.NET: ``builder.UseFunctionInvocation(...)``).

    The layer calls the provider, runs the functions the provider asks for, hands the
    results back, and repeats until the provider answers without function calls or
    ``max_iterations`` round trips are used (then one last call with tools disabled).
    The chat-middleware layer under it runs chat middleware at every provider round
    trip (``ReplanMiddleware``'s ``ModelView`` reads what the model was shown there),
    in the order the SDK's own clients stack them.
    """

    OTEL_PROVIDER_NAME = "replan"

    def __init__(
        self,
        provider: BaseChatClient[Any],
        *,
        configuration: FunctionInvocationConfiguration = FUNCTION_INVOCATION,
        middleware: Sequence[FunctionMiddleware] = (),
    ) -> None:
        super().__init__(
            # The layer copies the settings onto its defaults; ours is never mutated.
            function_invocation_configuration=configuration,
            middleware=list(middleware),
        )
        self.provider = provider

    def _inner_get_response(
        self,
        *,
        messages: Sequence[Message],
        stream: bool,
        options: Mapping[str, Any],
        **kwargs: Any,
    ) -> Any:
        if stream:
            return self.provider.get_response(
                messages, stream=True, options=dict(options), client_kwargs=kwargs
            )
        return self._answer(messages, options, kwargs)

    async def _answer(
        self, messages: Sequence[Message], options: Mapping[str, Any], kwargs: Mapping[str, Any]
    ) -> ChatResponse[Any]:
        """The provider's response, with argument text no parser can read made a
        malformed call (``tool_arguments``) before the layer above parses it."""
        response = await self.provider.get_response(
            messages, options=dict(options), client_kwargs=dict(kwargs)
        )
        return unparseable_as_raw(response)  # type: ignore[no-any-return]


class ControllerAgent:
    """One controller offered to one provider: the tools, the malformed-argument gate
    and the configured function-invocation layer, wired once."""

    def __init__(
        self,
        controller: ModelFacing,
        provider: BaseChatClient[Any],
        *,
        configuration: FunctionInvocationConfiguration = FUNCTION_INVOCATION,
    ) -> None:
        self.tools = ControllerTools(controller)
        self.client = FunctionInvokingChatClient(
            provider,
            configuration=configuration,
            middleware=[MalformedArgumentsGate(self.tools)],
        )

    async def request(
        self, prompt: str, *, middleware: Sequence[FunctionMiddleware] = ()
    ) -> ChatResponse[Any]:
        """One SDK request: the provider may call the tools until it answers in text
        (or the iteration cap cuts it off). ``middleware`` is added for this request
        only (the tests use it to watch calls start and end)."""
        options: ChatOptions[None] = {"tools": list(self.tools.tools), "tool_choice": "auto"}
        return await self.client.get_response(
            [Message("user", [prompt])],
            options=options,
            middleware=list(middleware) or None,
        )

    def request_sync(
        self, prompt: str, *, middleware: Sequence[FunctionMiddleware] = ()
    ) -> ChatResponse[Any]:
        """``request`` for callers without an event loop (the CLI, the tests)."""
        return asyncio.run(self.request(prompt, middleware=middleware))


__all__ = [
    "EXECUTE_STEP",
    "FUNCTION_INVOCATION",
    "MAX_ITERATIONS",
    "PROPOSE_PLAN",
    # SDK names the provider side uses, re-exported so the SDK stays behind this module.
    "BaseChatClient",
    "ChatResponse",
    "Content",
    "ControllerAgent",
    "ControllerTools",
    "ExecuteStepArguments",
    "FunctionInvocationContext",
    "FunctionInvokingChatClient",
    "FunctionMiddleware",
    "FunctionTool",
    "GuardedCall",
    "MalformedArgumentsGate",
    "Message",
    "ModelFacing",
    "ModelView",
    "ProposePlanArguments",
    # Guard any agent's tools (controller/middleware.py).
    "ReplanMiddleware",
    "answer_of",
]
