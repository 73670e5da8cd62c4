"""Human approval: a step with ``needs_approval`` runs only after the host approves the
exact plan (its id and the SHA-256 of its content), through the public API and through
the agent tools, and the model has no way to approve its own plan."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from replan.controller import (
    Approval,
    Controller,
    EvidenceState,
    ExecuteResult,
    InvalidInput,
    Observation,
    Plan,
    load_policy,
    plan_digest,
)
from replan.controller.agent import EXECUTE_STEP, PROPOSE_PLAN, ControllerAgent
from replan.controller.policy import PolicyError, policy_from_dict, policy_to_dict
from replan.verification.subjects.scripted import (
    FunctionCallRequest,
    FunctionResult,
    Reply,
    ScriptedChatClient,
    propose_then_execute,
)

ROOT = Path(__file__).resolve().parents[1]
POLICY = load_policy(ROOT / "tests" / "policies" / "approval.toml")
PASSED = EvidenceState.PASSED
DEPLOY = Plan("p1", 1, 2, "deploy", "input-A")


def waiting() -> Controller:
    """A run whose deploy plan waits for approval (parser Passed, executed once)."""
    controller = Controller(POLICY)
    assert controller.observe(Observation("parser", 1, PASSED, "ci")) is True
    assert controller.propose(DEPLOY) is True
    assert controller.execute("p1") is ExecuteResult.AWAITING_APPROVAL
    return controller


def test_the_policy_reads_needs_approval_and_keeps_it_in_normal_form() -> None:
    assert POLICY.approval_steps == frozenset({"deploy"})
    document = policy_to_dict(POLICY)
    assert [s.get("needs_approval", False) for s in document["steps"]] == [False, True]
    assert policy_from_dict(document) == POLICY
    bad = {**document, "steps": [{**document["steps"][1], "needs_approval": "yes"}]}
    with pytest.raises(PolicyError, match=r"^steps\[0\]\.needs_approval: expected true or false"):
        policy_from_dict(bad)


def test_a_step_that_needs_approval_waits_and_uses_no_step() -> None:
    controller = waiting()
    assert controller.declared_state == "awaiting_approval"
    assert controller.steps == 0
    assert controller.pending == DEPLOY
    # asking again changes nothing: it still waits
    before = controller.snapshot()
    assert controller.execute("p1") is ExecuteResult.AWAITING_APPROVAL
    assert controller.snapshot() == before


def test_the_approved_plan_runs_on_the_next_execute() -> None:
    controller = waiting()
    assert controller.approve(Approval("p1", plan_digest(DEPLOY))) is True
    assert controller.declared_state == "approved"
    assert controller.execute("p1") is ExecuteResult.EXECUTED
    assert (controller.steps, str(controller.stop_reason)) == (1, "Completed")
    assert controller.execute("p1") is ExecuteResult.REPLAYED


def test_a_wrong_id_or_digest_is_refused_and_changes_nothing() -> None:
    controller = waiting()
    before = controller.snapshot()
    other_content = plan_digest(DEPLOY._replace(resource="input-B"))
    for approval in (
        Approval("p2", plan_digest(DEPLOY)),
        Approval("p1", other_content),
        Approval("p1", plan_digest(DEPLOY).upper()),
    ):
        assert controller.approve(approval) is False
        assert controller.snapshot() == before
    assert controller.execute("p1") is ExecuteResult.AWAITING_APPROVAL


def test_approve_outside_the_waiting_state_is_refused() -> None:
    controller = Controller(POLICY)
    assert controller.approve(Approval("p1", plan_digest(DEPLOY))) is False
    controller.observe(Observation("parser", 1, PASSED, "ci"))
    controller.propose(DEPLOY)  # pending, not yet asked to run
    assert controller.approve(Approval("p1", plan_digest(DEPLOY))) is False
    assert controller.declared_state == "pending"


def test_a_malformed_approval_raises_and_changes_nothing() -> None:
    controller = waiting()
    before = controller.snapshot()
    for malformed in (("p1", plan_digest(DEPLOY)), Approval("", "x"), Approval("p1", 7)):
        with pytest.raises(InvalidInput, match=r"^approval"):
            controller.approve(malformed)  # type: ignore[arg-type]
    assert controller.snapshot() == before


def test_a_meaningful_observation_invalidates_the_waiting_plan() -> None:
    controller = waiting()
    assert controller.observe(Observation("access", 1, EvidenceState.FAILED, "ci")) is True
    assert controller.declared_state == "idle" and controller.pending is None
    assert controller.approve(Approval("p1", plan_digest(DEPLOY))) is False
    assert controller.execute("p1") is ExecuteResult.STALE_PLAN


def test_an_approval_is_lost_when_the_plan_is_superseded() -> None:
    controller = waiting()
    controller.approve(Approval("p1", plan_digest(DEPLOY)))
    assert controller.propose(Plan("p2", 2, 2, "deploy", "input-A")) is True
    assert controller.declared_state == "pending"
    assert controller.execute("p2") is ExecuteResult.AWAITING_APPROVAL  # asks again
    assert controller.execute("p1") is ExecuteResult.STALE_PLAN


def test_cancel_stops_a_run_that_awaits_or_holds_approval() -> None:
    for approve in (False, True):
        controller = waiting()
        if approve:
            controller.approve(Approval("p1", plan_digest(DEPLOY)))
        controller.cancel()
        assert str(controller.stop_reason) == "Canceled"
        assert controller.execute("p1") is ExecuteResult.STOPPED


def test_the_trace_shows_the_approval() -> None:
    controller = waiting()
    controller.approve(Approval("p1", plan_digest(DEPLOY)))
    record = controller.trace[-1]
    assert record["op"] == "approve"
    assert record["args"] == {"approval": {"plan_id": "p1", "digest": plan_digest(DEPLOY)}}
    assert record["transition"] == "awaiting_approval --approve[approval_matches]--> approved"
    json.dumps(controller.trace)


# ---- through the agent tools -----------------------------------------------------------------


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield


DEPLOY_ARGUMENTS = {
    "planId": "p1",
    "revision": 1,
    "evidenceRevision": 2,
    "step": "deploy",
    "resource": "input-A",
}


def test_the_agent_tools_answer_awaiting_approval_and_run_once_approved(
    no_network: None,
) -> None:
    controller = Controller(POLICY)
    controller.observe(Observation("parser", 1, PASSED, "ci"))
    agent = ControllerAgent(controller, ScriptedChatClient(propose_then_execute(DEPLOY_ARGUMENTS)))
    response = agent.request_sync("deploy it")
    assert "AwaitingApproval" in response.text
    assert controller.steps == 0
    # the host, not the model, approves what it read
    assert controller.approve(Approval("p1", plan_digest(controller.pending))) is True  # type: ignore[arg-type]
    retry = ScriptedChatClient(then_execute("p1"))
    assert "Executed" in ControllerAgent(controller, retry).request_sync("go on").text
    assert str(controller.stop_reason) == "Completed"


def then_execute(plan_id: str) -> Any:
    def script(results: Sequence[FunctionResult]) -> Reply:
        if not results:
            return [FunctionCallRequest(EXECUTE_STEP, {"stepId": plan_id})]
        return f"execute_step answered {results[-1].result}"

    return script


def test_the_model_cannot_approve_its_own_plan(no_network: None) -> None:
    """No tool approves; asking for one anyway reaches nothing, and the plan still
    waits for the host."""
    controller = waiting()
    digest = plan_digest(DEPLOY)

    def asks_to_approve(results: Sequence[FunctionResult]) -> Reply:
        if not results:
            return [
                FunctionCallRequest("approve", {"plan_id": "p1", "digest": digest}),
                FunctionCallRequest("approve_plan", {"planId": "p1", "digest": digest}),
            ]
        if len(results) == 2:
            return [FunctionCallRequest(EXECUTE_STEP, {"stepId": "p1"})]
        return "done"

    provider = ScriptedChatClient(asks_to_approve)
    ControllerAgent(controller, provider).request_sync("approve and deploy")
    for call in provider.calls:
        assert set(call.offered) == {PROPOSE_PLAN, EXECUTE_STEP}
    assert all(r.result.startswith("Error") for r in provider.calls[1].results_seen)
    assert provider.calls[2].results_seen[-1].result == "AwaitingApproval"
    assert controller.declared_state == "awaiting_approval"
    assert controller.steps == 0


# ---- verification ---------------------------------------------------------------------------


def test_verify_strict_holds_on_the_approval_policy(tmp_path: Path) -> None:
    """Every engine covers the approval states with its default domains and rules, and
    the proofs include the approval properties."""
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "replan",
            "verify",
            "--strict",
            "--profile",
            "ci",
            "--policy",
            str(ROOT / "tests" / "policies" / "approval.toml"),
            "--output",
            str(tmp_path),
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout)
    assert report["gaps"] == []
    proofs = next(c for c in report["checks"] if c["name"] == "proofs")
    proved = {p["name"] for p in proofs["details"]["properties"] if p["status"] == "proved"}
    assert {
        "execute-waits-for-approval",
        "execute-needs-approval",
        "approve-only-the-waiting-plan",
        "approval-is-for-the-exact-plan",
    } <= proved
    assert set(report["not_live"]) == {"approved --execute--> idle"}
    # the explorer alone, with its default domains, reaches every live declared
    # transition (the approval states' included), not only the campaign
    explorer = next(c for c in report["checks"] if c["name"] == "explorer")["details"]
    coverage = explorer["transition_coverage"]
    unreached = {label for label, status in coverage.items() if status != "reached"}
    assert unreached, "a policy switches some transitions off"
    assert unreached <= set(explorer["disabled_by_policy"]) | set(report["not_live"])
    reached = [label for label, status in coverage.items() if status == "reached"]
    assert any("awaiting_approval" in label for label in reached)
