"""A live guard over open resources: the host's ``step_of`` names the step a call is,
each resource a run makes known takes the next free slot (a call's argument, a
per-resource fact a result reports), a resource with no free slot is refused, and a
per-resource fact opens only its own resource."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from agent_framework import Agent, FunctionTool

from replan.controller import Controller, EvidenceState, Observation
from replan.controller.agent import FunctionInvokingChatClient
from replan.controller.executor import Executor, Grant
from replan.controller.middleware import ReplanMiddleware
from replan.controller.policy import load_policy
from replan.verification.subjects.scripted import (
    FunctionCallRequest,
    FunctionResult,
    Reply,
    ScriptedChatClient,
)

POLICY_TEXT = """
[evidence]
keys = []
per_resource = ["cancellable"]

[resources]
allowed = ["service"]
open = ["s1", "s2"]

[[steps]]
name = "search"

[[steps]]
name = "read"
resource_argument = "id"

[[steps]]
name = "cancel"
requires = ["cancellable"]
resource_argument = "id"

[[steps]]
name = "finish"
completes_run = true
"""


def _guarded(tmp_path: Path, *replies: Reply) -> tuple[ReplanMiddleware, list[str]]:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY_TEXT)
    policy = load_policy(path)
    ran: list[str] = []

    def observe(tool: str, arguments: Mapping[str, Any], result: str) -> list[Observation]:
        if tool == "read":  # the record says whether this order can be cancelled
            state = EvidenceState.PASSED if "open" in result else EvidenceState.FAILED
            return [Observation(f"cancellable@{arguments['id']}", 1, state, "orders")]
        return []

    def step_of(tool: str, arguments: Mapping[str, Any]) -> str:
        return "cancel" if arguments.get("mode") == "cancel" else tool

    guard = ReplanMiddleware(
        Controller(policy),
        executor=Executor(),
        grant=Grant(policy.resources, [step.name for step in policy.steps]),
        observe_result=observe,
        step_of=step_of,
    )

    def tool(name: str) -> FunctionTool:
        def run(**arguments: Any) -> str:
            ran.append(f"{name} {arguments}")
            state = "open" if arguments.get("id") == "A1" else "shipped"
            return f"order {arguments.get('id')} is {state}"

        schema = {"type": "object", "properties": {}, "additionalProperties": True}
        return FunctionTool(name=name, description=name, func=run, input_model=schema)

    queue: Iterator[Reply] = iter([*replies, "done"])

    def script(_results: Sequence[FunctionResult]) -> Reply:
        return next(queue)

    client = FunctionInvokingChatClient(
        ScriptedChatClient(script),
        configuration={"max_iterations": 10, "allow_concurrent_invocation": False},
    )
    agent = Agent(
        client=client,
        tools=[tool("search"), tool("read"), tool("order")],
        middleware=guard.middleware,
    )
    asyncio.run(agent.run("go"))
    return guard, ran


def _call(name: str, call_id: str, **arguments: Any) -> list[FunctionCallRequest]:
    return [FunctionCallRequest(name, arguments, call_id=call_id)]


def test_a_fact_about_one_resource_opens_that_resource_only(tmp_path: Path) -> None:
    guard, ran = _guarded(
        tmp_path,
        _call("search", "c1"),
        _call("read", "c2", id="A1"),
        _call("read", "c3", id="B2"),
        _call("order", "c4", id="B2", mode="cancel"),
        _call("order", "c5", id="A1", mode="cancel"),
    )
    answers = [(done.call_id, done.outcome) for done in guard.calls]
    assert answers == [
        ("c1", "Executed"),
        ("c2", "Executed"),
        ("c3", "Executed"),
        ("c4", "PreconditionDenied"),  # B2 was read shipped: cancellable@s2 is Failed
        ("c5", "Executed"),
    ]
    assert guard.slots is not None and guard.slots.given == {"A1": "s1", "B2": "s2"}
    assert guard.calls[3].result == "PreconditionDenied: cancellable@s2 is Failed"
    assert [done.plan.step for done in guard.calls if done.plan] == [
        "search",
        "read",
        "read",
        "cancel",
        "cancel",
    ]
    assert ran[-1] == "order {'id': 'A1', 'mode': 'cancel'}"


def test_a_resource_with_no_free_slot_is_refused_and_never_runs(tmp_path: Path) -> None:
    guard, ran = _guarded(
        tmp_path,
        _call("read", "c1", id="A1"),
        _call("read", "c2", id="B2"),
        _call("read", "c3", id="C3"),
    )
    assert guard.calls[2].result == "Refused: resource 'C3' finds no free slot (open: s1, s2)"
    assert len(ran) == 2 and guard.run.proposals == 2
