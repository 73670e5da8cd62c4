"""The owner's word on an in-doubt call, and what ``perform`` does after it.

An intent without a receipt is in doubt: never rerun, never reported done. The owner
checks and either resolves it (it happened) or abandons it (it did not, for a reason
the journal keeps). After an abandon, the next request of the call runs the effect
once more, with the same content, answered ``Executed``; the step the controller
counted when it first answered ``Executed`` is that run's, so ``steps`` does not
change."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from agent_framework import Agent, FunctionTool

from replan.controller import (
    Controller,
    EvidenceState,
    ExecuteResult,
    Observation,
    Plan,
    Usage,
)
from replan.controller.agent import FunctionInvokingChatClient
from replan.controller.executor import Executor, Grant, Operation, Outcome, perform
from replan.controller.journal import JournalError, JSONValue, RecordKind, abandon_reason
from replan.controller.middleware import ReplanMiddleware
from replan.verification.subjects.scripted import (
    FunctionCallRequest,
    FunctionResult,
    Reply,
    ScriptedChatClient,
)

GRANT = Grant(["input-A"], ["inspect-parser", "inspect-access", "commit-import"])


class Effect:
    """Counts its runs; raises while ``failing``."""

    def __init__(self) -> None:
        self.runs = 0
        self.failing = False

    def __call__(self, operation: Operation) -> JSONValue:
        if self.failing:
            raise OSError("the connection dropped")
        self.runs += 1
        return {"rows": operation.arguments.get("rows")}


def in_doubt_commit() -> tuple[Controller, Executor, Operation, Effect]:
    """A commit whose effect raised after the controller answered Executed."""
    controller = Controller()
    controller.observe(Observation("parser", 1, EvidenceState.PASSED, "ci"))
    controller.observe(Observation("access", 1, EvidenceState.PASSED, "ci"))
    plan = Plan("c1", 1, controller.evidence_revision, "commit-import", "input-A")
    assert controller.propose(plan)
    executor = Executor()
    operation = Operation.for_plan(plan, {"rows": 3})
    effect = Effect()
    effect.failing = True
    with pytest.raises(OSError):
        perform(controller, executor, operation, GRANT, effect)
    effect.failing = False
    assert controller.steps == 1
    return controller, executor, operation, effect


def test_after_the_owner_abandons_an_in_doubt_call_its_retry_runs_once_and_uses_no_step() -> None:
    controller, executor, operation, effect = in_doubt_commit()
    waiting = perform(controller, executor, operation, GRANT, effect)
    assert (waiting.outcome, effect.runs) == (Outcome.IN_DOUBT, 0)
    executor.abandon("c1")
    done = perform(controller, executor, operation, GRANT, effect)
    assert (done.answer, done.outcome, effect.runs) == (
        ExecuteResult.REPLAYED,
        Outcome.EXECUTED,
        1,
    )
    assert done.execution is not None
    assert done.execution.reason.startswith("executed again: the owner abandoned")
    assert controller.steps == 1  # counted once, when the controller first said Executed
    again = perform(controller, executor, operation, GRANT, effect)
    assert (again.outcome, again.receipt, effect.runs) == (Outcome.REPLAYED, done.receipt, 1)


def test_the_owners_reason_is_recorded_with_the_abandon() -> None:
    controller, executor, operation, effect = in_doubt_commit()
    executor.abandon("c1", "the warehouse shows no import for c1")
    last = executor.journal.records("c1")[-1]
    assert last.kind is RecordKind.ABANDON
    assert abandon_reason(last.body) == "the warehouse shows no import for c1"
    done = perform(controller, executor, operation, GRANT, effect)
    assert done.execution is not None
    assert done.execution.reason == (
        "executed again: the owner abandoned its in-doubt attempt "
        "(the warehouse shows no import for c1)"
    )


def test_a_retry_after_an_abandon_runs_the_abandoned_content_only() -> None:
    controller, executor, _, effect = in_doubt_commit()
    executor.abandon("c1", "not done")
    other = Operation("c1", "commit-import", "input-A", {"rows": 300})
    refused = perform(controller, executor, other, GRANT, effect)
    assert (refused.outcome, effect.runs) == (Outcome.CONTENT_MISMATCH, 0)


def test_abandoning_a_call_that_is_not_in_doubt_is_one_line_and_writes_nothing() -> None:
    _, executor, _, _ = in_doubt_commit()
    executor.resolve("c1", {"rows": 3})
    before = executor.journal.records()
    for plan_id in ("c1", "never-seen"):
        with pytest.raises(
            JournalError, match=rf"^plan id '{plan_id}': no open intent to abandon$"
        ):
            executor.abandon(plan_id, "checked")
    assert executor.journal.records() == before


def test_a_call_with_no_record_is_in_doubt_until_the_owner_names_and_abandons_it() -> None:
    """The controller completed c1, and the process stopped before its intent was
    written: the journal cannot tell, so the call is in doubt; the owner names it."""
    controller = Controller()
    controller.observe(Observation("parser", 1, EvidenceState.PASSED, "ci"))
    controller.observe(Observation("access", 1, EvidenceState.PASSED, "ci"))
    plan = Plan("c1", 1, controller.evidence_revision, "commit-import", "input-A")
    controller.propose(plan)
    assert controller.execute("c1") is ExecuteResult.EXECUTED  # then the process died
    executor, effect = Executor(), Effect()
    operation = Operation.for_plan(plan, {"rows": 3})
    doubt = perform(controller, executor, operation, GRANT, effect)
    assert doubt.outcome is Outcome.IN_DOUBT and "holds no record" in doubt.execution.reason  # type: ignore[union-attr]
    executor.abandon("c1", "no import found", operation=operation)
    done = perform(controller, executor, operation, GRANT, effect)
    assert (done.outcome, effect.runs, controller.steps) == (Outcome.EXECUTED, 1, 1)


# ---- through the guard -----------------------------------------------------------------


def test_through_the_guard_the_abandoned_call_runs_on_the_models_retry_and_is_charged() -> None:
    controller = Controller()
    executor = Executor()
    guard = ReplanMiddleware(
        controller, executor=executor, grant=GRANT, tool_usage=lambda call: Usage(5, 0, 0)
    )
    runs: list[str] = []
    failing = [True]

    def inspect(path: str, rows: int = 0) -> str:
        if failing[0]:
            raise OSError("the connection dropped")
        runs.append(path)
        return "parser Passed"

    def request(*replies: Reply) -> None:
        queue: Iterator[Reply] = iter([*replies, "done"])

        def script(results: Sequence[FunctionResult]) -> Reply:
            return next(queue)

        client = FunctionInvokingChatClient(
            ScriptedChatClient(script),
            configuration={"max_iterations": 4, "allow_concurrent_invocation": False},
        )
        tool: Any = FunctionTool(name="inspect-parser", description="inspect", func=inspect)
        asyncio.run(Agent(client=client, tools=[tool], middleware=guard.middleware).run("go"))

    call = [FunctionCallRequest("inspect-parser", {"path": "input-A"}, call_id="i1")]
    request(call)  # the tool raised: in doubt
    request(call)
    assert guard.calls[-1].outcome == "InDoubt" and runs == []
    executor.abandon("i1", "the parser never received it")
    failing[0] = False
    request(call)
    assert (guard.calls[-1].outcome, runs, controller.steps) == ("Executed", ["input-A"], 1)
    charges = [entry[1] for entry in controller._trace if entry[0] == "charge"]
    assert [usage.tokens for usage in charges].count(5) == 1  # the rerun, charged once
