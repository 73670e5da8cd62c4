"""The crash harness's second workload: a guarded agent (``DurableGuard`` on an Agent
Framework agent, a scripted provider) as an async DBOS workflow.

Two requests under the default policy. The first: the model inspects the parser (a
tool run, Passed); then asks, in one reply, to inspect access and to commit (access
comes back Failed, so the commit, planned before that evidence, is stale); then
commits again (denied: access is Failed) and stops to wait. The owner's answer
arrives as a recorded input (access Passed). The second request retries the first
inspection (the same call id: answered from its receipt, the tool does not run) and
the denied commit, which now runs and completes the run.

Every tool writes one row into ``harness_effects`` through ``effect_step()``, in its
effect step's transaction: a second row for one operation digest is a tool that ran
twice. The provider is scripted (``verification.subjects.scripted``): its replies depend only
on the results it was shown, and a recovered workflow reads them from DBOS instead.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from agent_framework import Agent, FunctionTool
from dbos import DBOS

from replan.controller.agent import FunctionInvokingChatClient
from replan.controller.durable.agent import DurableGuard
from replan.controller.durable.dbos import DurableRun, effect_step
from replan.controller.policy import DEFAULT_POLICY
from replan.controller.records import EvidenceState, Observation
from replan.verification.boundary.durable.world import EFFECTS, GRANT, HARNESS, WORKER
from replan.verification.subjects.scripted import (
    FunctionCallRequest,
    FunctionResult,
    Reply,
    ScriptedChatClient,
)

#: What each tool finds (the world the tools see), as the model reads it.
FINDINGS = {"inspect-parser": "parser Passed", "inspect-access": "access Failed"}


def _call(step: str, call_id: str) -> FunctionCallRequest:
    return FunctionCallRequest(step, {}, call_id=call_id)


#: Each request's replies, in order (the provider reads no more than it is shown).
REQUESTS: tuple[tuple[Reply, ...], ...] = (
    (
        [_call("inspect-parser", "p1")],
        [_call("inspect-access", "a1"), _call("commit-import", "c1")],
        [_call("commit-import", "c2")],
        "Waiting for the owner to confirm access.",
    ),
    (
        [_call("inspect-parser", "p1")],
        [_call("commit-import", "c2")],
        "Imported.",
    ),
)


#: Set by the worker: the model answers a question it was asked before otherwise
#: (``verification.boundary.durable.crash.FORGETFUL_AGENT``).
FORGETFUL = False

_ASKS = sa.Table(
    "harness_asks",
    HARNESS,
    sa.Column("run_id", sa.String, primary_key=True),
    sa.Column("question", sa.String, primary_key=True),
)


def _script(replies: Sequence[Reply], run_id: str, request: int) -> Any:
    """The reply after as many provider calls as the function results' batches."""

    def script(results: Sequence[FunctionResult]) -> Reply:
        batches = 0
        seen = 0
        for reply in replies:
            if isinstance(reply, str) or seen >= len(results):
                break
            seen += len(reply)
            batches += 1
        if FORGETFUL and _asked_before(run_id, f"{request}.{batches}"):
            return "I would rather not, this time."
        return replies[batches]

    return script


def _asked_before(run_id: str, question: str) -> bool:
    """Whether the model was asked ``question`` before (remembered in the database)."""
    assert WORKER.store is not None
    with WORKER.store.engine.begin() as connection:
        found = connection.scalar(
            sa.select(sa.func.count())
            .select_from(_ASKS)
            .where(_ASKS.c.run_id == run_id, _ASKS.c.question == question)
        )
        if not found:
            connection.execute(_ASKS.insert().values(run_id=run_id, question=question))
    return bool(found)


def _tool(step: str, run_id: str) -> FunctionTool:
    def run() -> str:
        connection, operation = effect_step()
        connection.execute(
            EFFECTS.insert().values(run_id=run_id, digest=operation.digest(), step=step)
        )
        return FINDINGS.get(step, "imported 3 rows")

    return FunctionTool(name=step, description=f"{step} on input-A", func=run)


def _observe(tool: str, _arguments: Mapping[str, Any], result: str) -> list[Observation]:
    """The host's adapter: an inspection's result is evidence."""
    if tool not in FINDINGS:
        return []
    key, state = result.split()
    return [Observation(key, 1, EvidenceState(state), tool)]


def _ticking_clock() -> Callable[[], float]:
    """Each reading one second after the last: every provider call and tool is
    charged 1000 ms, in every run. (The wall clock's times would differ between the
    uninterrupted run and a killed one, and their logs could not be compared.)"""
    return itertools.count().__next__


def owner_answer() -> Observation:
    return Observation("access", 2, EvidenceState.PASSED, "owner")


@DBOS.workflow(max_recovery_attempts=10_000)
async def agent_run(run_id: str) -> dict[str, Any]:
    """The durable guarded agent (see the module docstring)."""
    assert WORKER.store is not None
    run = DurableRun(
        WORKER.store,
        run_id,
        DEFAULT_POLICY,
        GRANT,
        snapshot_every=4,
        boundary=WORKER.boundary,
    )
    guard = DurableGuard(run, observe_result=_observe, clock=_ticking_clock())
    tools = [_tool(step.name, run_id) for step in DEFAULT_POLICY.steps]
    texts = []
    for number, replies in enumerate(REQUESTS, start=1):
        if number == 2:
            run.observe(await run.input_async("owner answer", owner_answer))
        agent = Agent(
            client=FunctionInvokingChatClient(
                ScriptedChatClient(
                    _script(replies, run_id, number), usage={"total_token_count": 11}
                ),
                configuration={"max_iterations": 8, "allow_concurrent_invocation": False},
            ),
            tools=tools,
            middleware=guard.middleware,
        )
        response = await agent.run(f"request {number}: import input-A")
        texts.append(response.text)
    controller = run.controller
    return {
        "stop_reason": str(controller.stop_reason),
        "evidence_revision": controller.evidence_revision,
        "steps": controller.steps,
        "executed": sorted(controller._completed),
        "answers": [f"{call.call_id}: {call.outcome}: {call.result}" for call in guard.calls]
        + texts,
    }
