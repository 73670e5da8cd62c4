"""The controller through Microsoft Agent Framework's real function-invocation path,
driven by a scripted provider (not a model). No test calls a tool function itself:
every controller call below is made by the SDK because the provider asked for it."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import pytest

from replan.controller import Controller, ExecuteResult
from replan.controller.agent import (
    EXECUTE_STEP,
    FUNCTION_INVOCATION,
    MAX_ITERATIONS,
    PROPOSE_PLAN,
    ControllerAgent,
    FunctionInvocationContext,
    FunctionInvokingChatClient,
    FunctionMiddleware,
    Message,
)
from replan.verification.subjects.scripted import (
    FunctionCallRequest,
    FunctionResult,
    Reply,
    Script,
    ScriptedChatClient,
    propose_then_execute,
)

P1 = {
    "planId": "p1",
    "revision": 1,
    "evidenceRevision": 1,
    "step": "inspect-parser",
    "resource": "input-A",
}


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Any attempt to open a connection fails the test: the provider is a script."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield


def wired(script: Script, **options: Any) -> tuple[ControllerAgent, ScriptedChatClient, Controller]:
    controller = Controller()
    provider = ScriptedChatClient(script)
    return ControllerAgent(controller, provider, **options), provider, controller


class CallRecorder(FunctionMiddleware):
    """Notes when each function invocation starts and ends (added per request)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    async def process(
        self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]
    ) -> None:
        self.events.append(("start", context.function.name))
        await call_next()
        self.events.append(("end", context.function.name))


def then_stop(first: Reply) -> Script:
    """Reply ``first``, then (once results came back) a plain message."""

    def script(results: Sequence[FunctionResult]) -> Reply:
        return first if not results else "done"

    return script


# ---- schemas ------------------------------------------------------------------------


def test_advertised_schemas_have_exactly_the_contract_parameters() -> None:
    agent, provider, _ = wired(then_stop("nothing to do"))
    agent.request_sync("go")
    offered = {schema["function"]["name"]: schema for schema in provider.calls[0].offered_schemas}
    assert set(offered) == {PROPOSE_PLAN, EXECUTE_STEP}

    propose = offered[PROPOSE_PLAN]["function"]["parameters"]
    types = {name: item["type"] for name, item in propose["properties"].items()}
    assert types == {
        "planId": "string",
        "revision": "integer",
        "evidenceRevision": "integer",
        "step": "string",
        "resource": "string",
    }
    assert list(propose["properties"]) == list(P1)  # in the contract's order
    assert sorted(propose["required"]) == sorted(types)
    assert propose["additionalProperties"] is False

    execute = offered[EXECUTE_STEP]["function"]["parameters"]
    assert {name: item["type"] for name, item in execute["properties"].items()} == {
        "stepId": "string"
    }
    assert execute["required"] == ["stepId"]
    assert execute["additionalProperties"] is False


# ---- the SDK really runs the functions ---------------------------------------------------


def test_the_sdk_runs_the_functions_and_the_controller_counters_change() -> None:
    agent, provider, controller = wired(propose_then_execute(P1))
    recorder = CallRecorder()
    assert (controller.proposals, controller.steps, controller.trace) == (0, 0, [])

    response = agent.request_sync("go", middleware=[recorder])

    # The SDK's invocation pipeline ran both functions (the middleware saw them)...
    assert recorder.events == [
        ("start", PROPOSE_PLAN),
        ("end", PROPOSE_PLAN),
        ("start", EXECUTE_STEP),
        ("end", EXECUTE_STEP),
    ]
    # ...they reached the controller...
    assert (controller.proposals, controller.steps) == (1, 1)
    assert [(r["op"], r["result"]) for r in controller.trace] == [
        ("propose", True),
        ("execute", "Executed"),
    ]
    # ...and their results went back to the provider, which read them.
    assert [[seen.result for seen in call.results_seen] for call in provider.calls] == [
        [],
        ["true"],
        ["true", "Executed"],
    ]
    assert len(provider.calls) == 3
    assert response.text == "execute_step answered Executed for plan p1; done."


def test_the_scripted_provider_reads_a_refusal_and_does_not_execute() -> None:
    agent, provider, controller = wired(propose_then_execute({**P1, "evidenceRevision": 7}))
    response = agent.request_sync("go")
    assert [seen.result for seen in provider.calls[-1].results_seen] == ["false"]
    assert [r["op"] for r in controller.trace] == ["propose"]
    assert controller.steps == 0
    assert "refused" in response.text


def test_function_invocation_is_configured_like_the_dotnet_reference() -> None:
    assert FUNCTION_INVOCATION == {"max_iterations": 4, "allow_concurrent_invocation": False}
    agent, _, _ = wired(then_stop("x"))
    settings = agent.client.function_invocation_configuration
    assert settings["max_iterations"] == MAX_ITERATIONS == 4
    assert settings["allow_concurrent_invocation"] is False


# ---- the iteration cap -------------------------------------------------------------------


def never_stops(results: Sequence[FunctionResult]) -> Reply:
    """Asks for another proposal every time, whatever it is told (tool_choice included)."""
    n = len(results) + 1
    return [FunctionCallRequest(PROPOSE_PLAN, {**P1, "planId": f"p{n}", "revision": n})]


def test_a_provider_that_never_stops_is_cut_off_after_four_rounds() -> None:
    agent, provider, controller = wired(never_stops)
    response = agent.request_sync("go")

    # Four rounds ran a function; the SDK then asked once more with tools disabled
    # and dropped the function call that reply still contained.
    assert controller.proposals == MAX_ITERATIONS == 4
    assert [r["args"]["plan"]["id"] for r in controller.trace] == ["p1", "p2", "p3", "p4"]
    assert [call.tool_choice for call in provider.calls] == ["auto"] * 4 + ["none"]
    assert response.text  # the SDK's fallback text, not a function call
    assert not any(content.type == "function_call" for content in response.messages[-1].contents)


def test_the_cut_off_follows_the_configured_iteration_count() -> None:
    agent, _, controller = wired(
        never_stops, configuration={**FUNCTION_INVOCATION, "max_iterations": 2}
    )
    agent.request_sync("go")
    assert controller.proposals == 2


# ---- serial invocation ---------------------------------------------------------------------


def two_calls_at_once(results: Sequence[FunctionResult]) -> Reply:
    if results:
        return "done"
    return [
        FunctionCallRequest(PROPOSE_PLAN, P1),
        FunctionCallRequest(EXECUTE_STEP, {"stepId": "p1"}),
    ]


def test_two_calls_in_one_response_run_one_after_the_other() -> None:
    agent, provider, controller = wired(two_calls_at_once)
    recorder = CallRecorder()
    agent.request_sync("go", middleware=[recorder])

    assert recorder.events == [
        ("start", PROPOSE_PLAN),
        ("end", PROPOSE_PLAN),
        ("start", EXECUTE_STEP),
        ("end", EXECUTE_STEP),
    ]
    # In the provider's order: the execution found the plan the proposal made pending.
    assert [(r["op"], r["result"]) for r in controller.trace] == [
        ("propose", True),
        ("execute", "Executed"),
    ]
    assert [seen.result for seen in provider.calls[1].results_seen] == ["true", "Executed"]


def test_the_ordering_check_would_see_concurrent_invocation() -> None:
    """The check above can fail: with the SDK's default (concurrent) the second call
    starts before the first one ends."""
    agent, _, _ = wired(
        two_calls_at_once,
        configuration={**FUNCTION_INVOCATION, "allow_concurrent_invocation": True},
    )
    recorder = CallRecorder()
    agent.request_sync("go", middleware=[recorder])
    assert recorder.events[:2] == [("start", PROPOSE_PLAN), ("start", EXECUTE_STEP)]


# ---- no way to observe ------------------------------------------------------------------------


def test_no_tool_offered_to_the_provider_can_observe() -> None:
    asks_to_observe = then_stop(
        [FunctionCallRequest("observe", {"key": "parser", "version": 1, "state": "Passed"})]
    )
    agent, provider, controller = wired(asks_to_observe)
    agent.request_sync("go")

    for call in provider.calls:
        assert set(call.offered) == {PROPOSE_PLAN, EXECUTE_STEP}
        assert not any("observ" in name.lower() for name in call.offered)
    # Asking anyway reaches nothing: the SDK answers "not found", evidence unchanged.
    assert provider.calls[1].results_seen[0].result.startswith("Error")
    assert controller.trace == []
    assert controller.evidence_revision == 1
    assert str(controller.evidence_state("parser")) == "Unknown"


def test_the_controller_package_imports_without_the_sdk() -> None:
    code = (
        "import sys, controller; "
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'agent_framework'); "
        "print(loaded); sys.exit(1 if loaded else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


# ---- malformed arguments -----------------------------------------------------------------------

MALFORMED = {
    "revision as a string": {**P1, "revision": "1"},
    "revision as a bool": {**P1, "revision": True},
    "revision as a float": {**P1, "revision": 1.0},
    "evidenceRevision as a string": {**P1, "evidenceRevision": "1"},
    "planId as a number": {**P1, "planId": 1},
    "step as null": {**P1, "step": None},
    "an extra key": {**P1, "evidence": {"parser": "Passed"}},
    "a missing key": {key: value for key, value in P1.items() if key != "resource"},
}


@pytest.mark.parametrize("arguments", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_arguments_are_a_rejected_proposal_that_uses_a_slot(
    arguments: dict[str, Any],
) -> None:
    agent, provider, controller = wired(propose_then_execute(arguments))
    agent.request_sync("go")

    assert controller.proposals == 1  # the slot is used
    assert controller.pending is None  # nothing valid reached the controller
    (record,) = controller.trace
    assert record["op"] == "propose"
    assert record["result"] is False
    assert record["transition"] == "idle --propose[plan_malformed]--> idle"
    assert [seen.result for seen in provider.calls[1].results_seen] == ["false"]


#: Argument text that makes ``json.loads`` raise something other than JSONDecodeError,
#: which the SDK does not catch: an integer literal over the interpreter's 4,300-digit
#: limit, and nesting deeper than the recursion limit.
UNPARSEABLE = {
    "a 5001-digit integer": (
        '{"planId": "p1", "revision": ' + "9" * 5001 + ', "evidenceRevision": 1, '
        '"step": "inspect-parser", "resource": "input-A"}'
    ),
    "100,000-deep nesting": "[" * 100_000 + "]" * 100_000,
}


@pytest.mark.parametrize("text", UNPARSEABLE.values(), ids=UNPARSEABLE.keys())
def test_unparseable_tool_call_json_is_a_rejected_proposal_that_used_its_slot(text: str) -> None:
    agent, provider, controller = wired(then_stop([FunctionCallRequest(PROPOSE_PLAN, text)]))
    agent.request_sync("go")  # never raises

    assert controller.proposals == 1
    assert controller.pending is None
    (record,) = controller.trace
    assert (record["op"], record["result"]) == ("propose", False)
    assert record["transition"] == "idle --propose[plan_malformed]--> idle"
    assert [seen.result for seen in provider.calls[1].results_seen] == ["false"]


def test_unparseable_execute_json_answers_unknown_plan() -> None:
    text = '{"stepId": ' + "9" * 5001 + "}"
    agent, _, controller = wired(then_stop([FunctionCallRequest(EXECUTE_STEP, text)]))
    agent.request_sync("go")
    assert [(r["op"], r["result"]) for r in controller.trace] == [("execute", "UnknownPlan")]


def test_well_formed_arguments_pass_the_gate_unchanged() -> None:
    agent, _, controller = wired(then_stop([FunctionCallRequest(PROPOSE_PLAN, P1)]))
    agent.request_sync("go")
    assert controller.pending is not None
    assert controller.pending._asdict() == {
        "id": "p1",
        "revision": 1,
        "evidence_revision": 1,
        "step": "inspect-parser",
        "resource": "input-A",
    }


def test_malformed_execute_arguments_answer_unknown_plan() -> None:
    agent, provider, controller = wired(
        then_stop([FunctionCallRequest(EXECUTE_STEP, {"stepId": 1})])
    )
    agent.request_sync("go")
    assert [(r["op"], r["result"]) for r in controller.trace] == [("execute", "UnknownPlan")]
    assert provider.calls[1].results_seen[0].result == str(ExecuteResult.UNKNOWN_PLAN)


def test_malformed_proposals_exhaust_the_plan_limit() -> None:
    """Nine malformed proposals in one response: eight use the eight slots, the ninth
    stops the run with PlanLimit. Free retries would never stop it."""
    bad = FunctionCallRequest(PROPOSE_PLAN, {**P1, "revision": "1"})
    agent, _, controller = wired(then_stop([bad] * 9))
    agent.request_sync("go")
    assert controller.proposals == controller.policy.max_proposals == 8
    assert str(controller.stop_reason) == "PlanLimit"


def test_without_the_gate_the_sdk_would_refuse_a_malformed_call_for_free() -> None:
    """Why the gate exists: the SDK's own validation answers a malformed call without
    running the function, so the controller would never count the proposal."""
    controller = Controller()
    provider = ScriptedChatClient(propose_then_execute({**P1, "revision": "1"}))
    agent = ControllerAgent(controller, provider)
    bare = FunctionInvokingChatClient(provider)  # the same layer, no gate
    import asyncio

    asyncio.run(
        bare.get_response(
            [Message("user", ["go"])],
            options={"tools": list(agent.tools.tools), "tool_choice": "auto"},
        )
    )
    assert controller.proposals == 0
    assert provider.calls[1].results_seen[0].result.startswith("Error: Argument parsing failed")
