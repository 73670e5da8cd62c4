"""Agents that run agents, through the agent SDK's real loops: an agent used as another
agent's tool (``Agent.as_tool()``) and a handoff workflow (agent-framework-
orchestrations' ``HandoffBuilder``). Every tool call of every agent passes the guard
as one more call of the same run (one budget); an agent the guard is not installed on
is refused by name, its tools never running."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from agent_framework import Agent
from agent_framework_orchestrations import HandoffBuilder

from replan.controller import Controller, Policy, Step
from replan.controller.agent import FunctionInvokingChatClient, ReplanMiddleware, answer_of
from replan.controller.composite import UnguardedPath, agent_behind, unguarded_path
from replan.controller.executor import Executor, Grant
from replan.verification.subjects.scripted import (
    FunctionCallRequest,
    FunctionResult,
    Reply,
    ScriptedChatClient,
)

POLICY = Policy(
    keys=(),
    steps=(Step("lookup"), Step("book", completes_run=True)),
    resources=("airline",),
    max_steps=4,
    max_tokens=10_000,
)


def _scripted(replies: Sequence[Reply], tokens: int) -> FunctionInvokingChatClient:
    queue = iter(replies)

    def script(results: Sequence[FunctionResult]) -> Reply:
        return next(queue, "done")

    return FunctionInvokingChatClient(
        ScriptedChatClient(script, usage={"total_token_count": tokens})
    )


class World:
    """The tools of the inner agent, counting their real runs."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()

    def tools(self) -> list[Any]:
        def lookup(query: str) -> str:
            """Look a flight up."""
            self.runs["lookup"] += 1
            return f"found {query}"

        def book(flight: str) -> str:
            """Book a flight."""
            self.runs["book"] += 1
            return f"booked {flight}"

        return [lookup, book]


def _agents(guard: ReplanMiddleware, world: World, *, inner_guarded: bool) -> Agent:
    inner = Agent(
        client=_scripted(
            [[FunctionCallRequest("lookup", {"query": "HAT001"}, call_id="i1")], "found it"], 5
        ),
        name="researcher",
        tools=world.tools(),
        middleware=guard.middleware if inner_guarded else None,
    )
    return Agent(
        client=_scripted(
            [[FunctionCallRequest("researcher", {"task": "find HAT001"}, call_id="o1")], "ok"], 3
        ),
        name="lead",
        tools=[inner.as_tool()],
        middleware=guard.middleware,
    )


def _guard() -> tuple[Controller, ReplanMiddleware]:
    controller = Controller(POLICY)
    guard = ReplanMiddleware(
        controller, executor=Executor(), grant=Grant(["airline"], ["lookup", "book"])
    )
    return controller, guard


def test_an_agent_tools_calls_pass_the_guard_as_calls_of_the_same_run() -> None:
    controller, guard = _guard()
    world = World()
    answer = answer_of(asyncio.run(_agents(guard, world, inner_guarded=True).run("go")))
    assert [(call.tool, call.call_id, call.outcome) for call in guard.calls] == [
        ("lookup", "i1", "Executed")
    ]
    assert world.runs == Counter({"lookup": 1})
    assert controller.steps == 1
    # one run, one budget: both agents' provider responses are charged to it
    assert controller.tokens == 2 * 3 + 2 * 5
    assert answer == "ok"


def test_an_agent_without_the_guard_is_refused_and_its_tools_never_run() -> None:
    controller, guard = _guard()
    world = World()
    asyncio.run(_agents(guard, world, inner_guarded=False).run("go"))
    [refused] = guard.calls
    assert (refused.tool, refused.call_id, refused.outcome) == ("researcher", "o1", "Refused")
    assert "runs agent researcher, whose own tool calls this guard does not see" in (refused.result)
    assert world.runs == Counter()
    assert controller.steps == 0


def test_the_unguarded_path_names_the_agent_inside_a_guarded_one() -> None:
    _, guard = _guard()
    world = World()
    innermost = Agent(client=_scripted([], 1), name="booker", tools=world.tools())
    middle = Agent(
        client=_scripted([], 1),
        name="researcher",
        tools=[innermost.as_tool()],
        middleware=guard.middleware,
    )
    tool = middle.as_tool()
    assert agent_behind(tool) is middle
    assert unguarded_path(middle, guard) == "researcher > booker"
    assert agent_behind(world.tools()[0]) is None  # an ordinary tool is no path


def _participant(
    name: str,
    replies: Sequence[Reply],
    tokens: int,
    tools: list[Any],
    guard: ReplanMiddleware | None,
) -> Agent:
    return Agent(
        client=_scripted(replies, tokens),
        name=name,
        tools=tools,
        middleware=None if guard is None else guard.middleware,
        require_per_service_call_history_persistence=True,  # HandoffBuilder requires it
    )


def _handoff(guard: ReplanMiddleware, world: World, *, specialist_guarded: bool = True) -> Any:
    triage = _participant(
        "triage", [[FunctionCallRequest("handoff_to_specialist", {}, call_id="h1")]], 2, [], guard
    )
    specialist = _participant(
        "specialist",
        [[FunctionCallRequest("lookup", {"query": "HAT001"}, call_id="s1")], "found it"],
        3,
        world.tools(),
        guard if specialist_guarded else None,
    )
    return HandoffBuilder(participants=[triage, specialist]).with_start_agent(triage).build()


def test_a_handoff_workflows_agents_pass_the_guard_under_one_budget() -> None:
    controller, guard = _guard()
    world = World()
    asyncio.run(guard.guard_workflow(_handoff(guard, world)).run("find HAT001"))
    assert [(call.tool, call.call_id, call.outcome) for call in guard.calls] == [
        ("lookup", "s1", "Executed")
    ]
    assert world.runs == Counter({"lookup": 1})
    assert controller.steps == 1
    assert controller.tokens == 2 + 2 * 3  # both agents' responses, one run's budget


def test_a_handoff_workflow_with_an_agent_without_the_guard_is_refused_before_it_runs() -> None:
    controller, guard = _guard()
    world = World()
    workflow = _handoff(guard, world, specialist_guarded=False)
    with pytest.raises(UnguardedPath) as refused:
        guard.guard_workflow(workflow)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("Handoff > specialist runs tools without this guard")
    assert world.runs == Counter() and controller.trace == []


def test_a_handoff_in_a_workflow_the_guard_has_not_checked_is_refused() -> None:
    controller, guard = _guard()
    world = World()
    asyncio.run(_handoff(guard, world, specialist_guarded=False).run("find HAT001"))
    [refused] = guard.calls
    assert (refused.tool, refused.call_id, refused.outcome) == (
        "handoff_to_specialist",
        "h1",
        "Refused",
    )
    assert "guard.guard_workflow(workflow)" in refused.result
    assert world.runs == Counter()  # the unguarded specialist never ran a tool
    assert controller.steps == 0
