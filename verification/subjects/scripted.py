"""A scripted provider: a chat client that follows a fixed script. It is NOT a model.

The reference this project follows drives its controller with a deliberately
scripted provider, so that the integration (schemas, automatic function invocation,
iteration cap, serial calls) is tested without confusing model quality with the
correctness of the surrounding application.

Owns: ``ScriptedChatClient`` (an Agent Framework ``BaseChatClient``), the ``Script``
it follows (a pure function from the function results the provider has been given so
far to its next reply), the reference script ``propose_then_execute``, and a log of
every provider call (what it was offered, what it saw, what it answered).

Leaves to others: running the functions. The provider never touches a controller: it
only *asks* for function calls and *reads* the results the SDK's function-invocation
layer (``controller.agent``) hands back in the next request's messages.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_framework import ChatResponseUpdate, ResponseStream

from replan.controller.agent import (
    EXECUTE_STEP,
    PROPOSE_PLAN,
    BaseChatClient,
    ChatResponse,
    Content,
    Message,
)


@dataclass(frozen=True)
class FunctionResult:
    """One function result the provider was given: the call it answers, and its text."""

    call_id: str
    name: str
    result: str


@dataclass(frozen=True)
class FunctionCallRequest:
    """A function call the provider asks for. ``call_id`` None: the client numbers it
    (``call-<provider call>-<index>``); a script gives one to repeat an earlier call
    exactly (a provider retrying a call it did not see answered). ``arguments`` as a
    string is the call's argument text exactly as a provider's wire format carries it
    (the SDK parses it), so a script can send text no JSON parser reads."""

    name: str
    arguments: Mapping[str, Any] | str
    call_id: str | None = None


#: A reply: function calls (run by the SDK, their results come back in the next
#: request), or a plain assistant message (the request ends).
Reply = Sequence[FunctionCallRequest] | str

#: A script: the function results seen so far in this request -> the next reply.
Script = Callable[[Sequence[FunctionResult]], Reply]


@dataclass(frozen=True)
class ProviderCall:
    """One call the SDK made to the provider."""

    number: int
    tool_choice: str | None
    offered: tuple[str, ...]
    results_seen: tuple[FunctionResult, ...]
    reply: Reply
    offered_schemas: tuple[dict[str, Any], ...] = field(default=(), repr=False)

    def to_json(self) -> dict[str, Any]:
        reply: Any
        if isinstance(self.reply, str):
            reply = {"text": self.reply}
        else:
            reply = {
                "function_calls": [
                    {"name": call.name, "arguments": _wire(call.arguments)} for call in self.reply
                ]
            }
        return {
            "provider_call": self.number,
            "tool_choice": self.tool_choice,
            "tools_offered": list(self.offered),
            "function_results_seen": [
                {"call_id": seen.call_id, "name": seen.name, "result": seen.result}
                for seen in self.results_seen
            ],
            "reply": reply,
        }


def _wire(arguments: Mapping[str, Any] | str) -> dict[str, Any] | str:
    """The arguments as the client hands them to the SDK: text as it is, a mapping copied."""
    return arguments if isinstance(arguments, str) else dict(arguments)


def function_results(messages: Sequence[Message]) -> list[FunctionResult]:
    """Every function result in ``messages``, in order, named after the call it answers."""
    names: dict[str, str] = {}
    found: list[FunctionResult] = []
    for message in messages:
        for content in message.contents:
            if content.type == "function_call" and content.call_id and content.name:
                names[content.call_id] = content.name
            elif content.type == "function_result" and content.call_id:
                text = "" if content.result is None else str(content.result)
                found.append(FunctionResult(content.call_id, names.get(content.call_id, "?"), text))
    return found


def _tool_description(tool: Any) -> tuple[str, dict[str, Any]]:
    spec = getattr(tool, "to_json_schema_spec", None)
    if callable(spec):
        document: dict[str, Any] = spec()
        return str(document["function"]["name"]), document
    name = str(getattr(tool, "name", tool))
    return name, {"name": name}


class ScriptedChatClient(BaseChatClient[Any]):
    """A chat client whose every answer comes from ``script``; no service, no network,
    no model. A streaming request (an agent used as a tool runs its agent streaming)
    gets the same answer as one update per message."""

    OTEL_PROVIDER_NAME = "scripted"

    def __init__(self, script: Script, usage: Mapping[str, int] | None = None) -> None:
        super().__init__()
        self.script = script
        #: The usage every response reports (``UsageDetails``), as a provider's would.
        self.usage = None if usage is None else dict(usage)
        #: Every call the SDK made to this provider, in order.
        self.calls: list[ProviderCall] = []

    def _inner_get_response(
        self,
        *,
        messages: Sequence[Message],
        stream: bool,
        options: Mapping[str, Any],
        **kwargs: Any,
    ) -> Any:
        if stream:
            return ResponseStream(
                self._stream(messages, options), finalizer=ChatResponse.from_updates
            )
        return self._respond(messages, options)

    async def _stream(
        self, messages: Sequence[Message], options: Mapping[str, Any]
    ) -> AsyncIterator[ChatResponseUpdate]:
        response = await self._respond(messages, options)
        for message in response.messages:
            usage = [] if self.usage is None else [Content.from_usage(dict(self.usage))]  # type: ignore[arg-type]
            yield ChatResponseUpdate(
                role=message.role,
                contents=[*message.contents, *usage],
                response_id=response.response_id,
                finish_reason=response.finish_reason,
            )

    async def _respond(
        self, messages: Sequence[Message], options: Mapping[str, Any]
    ) -> ChatResponse[Any]:
        seen = tuple(function_results(messages))
        reply = self.script(seen)
        number = len(self.calls) + 1
        offered = [_tool_description(tool) for tool in options.get("tools") or ()]
        choice = options.get("tool_choice")
        self.calls.append(
            ProviderCall(
                number=number,
                tool_choice=None if choice is None else str(choice),
                offered=tuple(name for name, _ in offered),
                results_seen=seen,
                reply=reply if isinstance(reply, str) else tuple(reply),
                offered_schemas=tuple(schema for _, schema in offered),
            )
        )
        if isinstance(reply, str):
            contents = [Content.from_text(reply)]
        else:
            contents = [
                Content.from_function_call(
                    call.call_id or f"call-{number}-{index}",
                    call.name,
                    arguments=_wire(call.arguments),
                )
                for index, call in enumerate(reply, start=1)
            ]
        return ChatResponse(
            messages=[Message("assistant", contents)],
            response_id=f"scripted-{number}",
            finish_reason="stop" if isinstance(reply, str) else "tool_calls",
            usage_details=None if self.usage is None else dict(self.usage),  # type: ignore[arg-type]
        )


def propose_then_execute(arguments: Mapping[str, Any]) -> Script:
    """The reference script: propose the plan ``arguments`` describe (``propose_plan``'s
    parameters); when the result says it was accepted ("true"), execute it; then say
    in plain text what ``execute_step`` answered. A refused proposal ends the request
    in text too. Every decision reads the last function result it was given."""
    plan_id = arguments.get("planId")

    def script(results: Sequence[FunctionResult]) -> Reply:
        if not results:
            return [FunctionCallRequest(PROPOSE_PLAN, arguments)]
        last = results[-1]
        if last.name == PROPOSE_PLAN:
            if last.result == "true":
                return [FunctionCallRequest(EXECUTE_STEP, {"stepId": plan_id})]
            return f"Plan {plan_id} was refused ({last.result}); nothing to execute."
        return f"execute_step answered {last.result} for plan {plan_id}; done."

    return script
