"""An approval binds the call: its digest covers the step, the resource and the
arguments as they reach the tool (RFC 8785 canonical JSON), through the guard and
through ``perform`` alike. An approved ``rows=1`` followed by the same call id with
``rows=1000000`` is refused and the tool never runs; an approval is void once the plan
is superseded, the evidence changes or the run stops; an approval of an unknown call
or of other content is refused and writes nothing."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from agent_framework import Agent, FunctionTool

from replan.controller import (
    Approval,
    Controller,
    EvidenceState,
    ExecuteResult,
    InvalidInput,
    Observation,
    Plan,
    Policy,
    Step,
    plan_digest,
)
from replan.controller.agent import FunctionInvokingChatClient
from replan.controller.approval import approve_call
from replan.controller.executor import (
    Executor,
    Grant,
    Operation,
    Outcome,
    perform,
)
from replan.controller.journal import JSONValue, RecordKind
from replan.controller.middleware import ReplanMiddleware
from replan.controller.sqlite_journal import SqliteJournal
from replan.verification.subjects.scripted import (
    FunctionCallRequest,
    FunctionResult,
    Reply,
    ScriptedChatClient,
)

RESOURCE = "input-A"
POLICY = Policy(
    keys=("parser",),
    steps=(
        Step("inspect"),
        Step("deploy", needs_approval=True),
        Step("commit", requires=("parser",), completes_run=True),
    ),
    resources=(RESOURCE,),
    max_steps=3,
)
GRANT = Grant([RESOURCE], ["inspect", "deploy", "commit"])


class Tools:
    """The tools' real runs, with the arguments each received."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, dict[str, Any]]] = []

    def tool(self, name: str) -> FunctionTool:
        def run(path: str, rows: int = 0) -> str:
            self.runs.append((name, {"path": path, "rows": rows}))
            return f"{name} {rows} rows on {path}"

        return FunctionTool(name=name, description=name, func=run)


class Guarded:
    """One guarded agent over scripted replies (the SDK's real function loop)."""

    def __init__(self, journal: Path | None = None) -> None:
        self.controller = Controller(POLICY)
        self.executor = Executor(None if journal is None else SqliteJournal.create(journal))
        self.guard = ReplanMiddleware(self.controller, executor=self.executor, grant=GRANT)
        self.tools = Tools()

    def request(self, *replies: Reply) -> None:
        queue: Iterator[Reply] = iter([*replies, "done"])

        def script(results: Sequence[FunctionResult]) -> Reply:
            return next(queue)

        client = FunctionInvokingChatClient(
            ScriptedChatClient(script),
            configuration={"max_iterations": 8, "allow_concurrent_invocation": False},
        )
        tools = [self.tools.tool(name) for name in ("inspect", "deploy", "commit")]
        agent = Agent(client=client, tools=tools, middleware=self.guard.middleware)
        asyncio.run(agent.run("go"))

    def last(self) -> str:
        return self.guard.calls[-1].result


def deploy(call_id: str, rows: int) -> list[FunctionCallRequest]:
    return [FunctionCallRequest("deploy", {"path": RESOURCE, "rows": rows}, call_id=call_id)]


# ---- the defect: an approval that does not cover the arguments ---------------------------


def test_the_guard_never_runs_other_arguments_under_an_approved_call() -> None:
    """The host approves the plan the controller holds; the model resends the call with
    a million rows. Whatever the approval was, the tool never runs with them."""
    harness = Guarded()
    harness.request(deploy("d1", 1))
    assert harness.last().startswith("AwaitingApproval")
    pending = harness.controller.pending
    assert pending is not None
    harness.controller.approve(Approval("d1", plan_digest(pending)))  # the plan, not the call
    harness.request(deploy("d1", 1_000_000))
    assert harness.tools.runs == []
    assert harness.last().startswith("ContentMismatch")


def test_perform_never_runs_other_arguments_under_an_approved_call() -> None:
    controller = Controller(POLICY)
    executor = Executor()
    ran: list[JSONValue] = []
    plan = Plan("d1", 1, 1, "deploy", RESOURCE)
    assert controller.propose(plan)
    small = Operation.for_plan(plan, {"rows": 1})
    first = perform(controller, executor, small, GRANT, lambda op: ran.append(op.arguments))
    assert first.answer is ExecuteResult.AWAITING_APPROVAL
    controller.approve(Approval("d1", plan_digest(plan)))  # the plan, not the call
    large = Operation.for_plan(plan, {"rows": 1_000_000})
    done = perform(controller, executor, large, GRANT, lambda op: ran.append(op.arguments))
    assert ran == []
    assert done.outcome is Outcome.CONTENT_MISMATCH
    assert controller.steps == 0  # refused before the controller was asked


# ---- approving the call ---------------------------------------------------------------


def test_an_approved_call_runs_with_its_arguments_and_no_others() -> None:
    harness = Guarded()
    harness.request(deploy("d1", 1))
    (waiting,) = harness.guard.awaiting()
    assert (waiting.plan_id, waiting.arguments) == ("d1", {"path": RESOURCE, "rows": 1})
    assert harness.guard.approve(Approval("d1", waiting.digest())).accepted
    harness.request(deploy("d1", 1_000_000))
    assert harness.tools.runs == []
    assert harness.last().startswith("ContentMismatch: plan 'd1' is bound to other content")
    harness.request(deploy("d1", 1))
    assert harness.tools.runs == [("deploy", {"path": RESOURCE, "rows": 1})]
    assert harness.controller.steps == 1


def test_perform_runs_the_approved_call_once_and_refuses_other_content() -> None:
    controller = Controller(POLICY)
    executor = Executor()
    ran: list[JSONValue] = []
    plan = Plan("d1", 1, 1, "deploy", RESOURCE)
    controller.propose(plan)
    small = Operation.for_plan(plan, {"rows": 1})
    perform(controller, executor, small, GRANT, lambda op: ran.append(op.arguments))
    approved = approve_call(controller, executor, Approval("d1", small.digest()))
    assert approved.accepted, approved.reason
    large = Operation.for_plan(plan, {"rows": 1_000_000})
    refused = perform(controller, executor, large, GRANT, lambda op: ran.append(op.arguments))
    assert refused.outcome is Outcome.CONTENT_MISMATCH and ran == []
    done = perform(controller, executor, small, GRANT, lambda op: ran.append(op.arguments))
    assert done.outcome is Outcome.EXECUTED and ran == [{"rows": 1}]


def test_the_approval_is_recorded_and_binds_the_call_after_a_restart(tmp_path: Path) -> None:
    harness = Guarded(tmp_path / "journal.db")
    harness.request(deploy("d1", 1))
    (waiting,) = harness.guard.awaiting()
    assert harness.guard.approve(Approval("d1", waiting.digest())).accepted
    kinds = [record.kind for record in harness.executor.journal.records("d1")]
    assert kinds == [RecordKind.APPROVAL]
    harness.executor.journal.close()
    reopened = Executor(SqliteJournal(tmp_path / "journal.db"))
    large = Operation("d1", "deploy", RESOURCE, {"path": RESOURCE, "rows": 1_000_000})
    refusal = reopened.check(large, GRANT)
    assert refusal is not None and refusal.outcome is Outcome.CONTENT_MISMATCH


@pytest.mark.parametrize("how", ["superseded", "evidence changed", "run stopped"])
def test_an_approval_is_void_once_the_plan_is_superseded_the_evidence_changes_or_the_run_stops(
    how: str,
) -> None:
    harness = Guarded()
    harness.request(deploy("d1", 1))
    (waiting,) = harness.guard.awaiting()
    assert harness.guard.approve(Approval("d1", waiting.digest())).accepted
    if how == "superseded":
        harness.request([FunctionCallRequest("inspect", {"path": RESOURCE}, call_id="i1")])
    elif how == "evidence changed":
        harness.controller.observe(Observation("parser", 1, EvidenceState.PASSED, "ci"))
    else:
        harness.controller.cancel()
    harness.request(deploy("d1", 1))
    assert [name for name, _ in harness.tools.runs if name == "deploy"] == []
    assert harness.last().split(":")[0] in {"StalePlan", "Stopped"}


def test_an_approval_of_an_unknown_call_or_of_other_content_is_refused_and_writes_nothing() -> None:
    harness = Guarded()
    harness.request(deploy("d1", 1))
    (waiting,) = harness.guard.awaiting()
    before = harness.controller.snapshot()
    unknown = harness.guard.approve(Approval("zz", waiting.digest()))
    other = harness.guard.approve(
        Approval("d1", Operation("d1", "deploy", RESOURCE, {"path": RESOURCE, "rows": 2}).digest())
    )
    assert not unknown.accepted and unknown.reason == "no call 'zz' awaits approval"
    assert not other.accepted and "not the digest of the call awaiting approval" in other.reason
    assert harness.executor.journal.records() == []
    assert harness.controller.snapshot() == before
    with pytest.raises(InvalidInput, match=r"^approval\.digest: expected a non-empty string"):
        harness.guard.approve(Approval("d1", ""))


def test_the_call_digest_is_rfc8785_over_step_resource_arguments_and_call_id() -> None:
    operation = Operation("d1", "deploy", RESOURCE, {"rows": 1.0, "é": ["x", 2]})
    content = {"arguments": {"rows": 1, "é": ["x", 2]}, "plan_id": "d1"}
    content |= {"resource": RESOURCE, "step": "deploy"}
    expected = hashlib.sha256(b"replan.operation.v2\n" + rfc8785.dumps(content)).hexdigest()
    assert operation.digest() == expected
    spelled = Operation("d1", "deploy", RESOURCE, {"é": ["x", 2.0], "rows": 1})
    assert spelled.digest() == expected
    with pytest.raises(InvalidInput, match=r"^Operation\.arguments\['rows'\]: .*RFC 8785"):
        Operation("d1", "deploy", RESOURCE, {"rows": 2**60})
