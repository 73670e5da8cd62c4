"""CONTRACT.md ``propose(plan) -> bool``, rules 1-5, against both implementations."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import PASSED, changed, obs, plan

from replan.controller import ExecuteResult, Plan, StopReason

# ---- rule 1: a stopped run consumes nothing -------------------------------------------


def test_propose_on_stopped_run_returns_false_and_uses_no_slot(implementation: type) -> None:
    run = implementation()
    run.propose(plan("p1", 1, 1))
    run.cancel()
    before = run.snapshot()
    assert run.propose(plan("p2", 2, 1)) is False
    assert run.propose(None) is False
    assert run.snapshot() == before
    assert run.proposals == 1


# ---- rule 2: the budget is spent ------------------------------------------------------


def test_proposal_after_the_budget_stops_with_plan_limit(implementation: type) -> None:
    run = implementation()
    for revision in range(1, 9):
        assert run.propose(plan(f"p{revision}", revision, 1)) is True
    assert run.proposals == 8
    before = run.snapshot()
    assert run.propose(plan("p9", 9, 1)) is False
    assert run.stop_reason is StopReason.PLAN_LIMIT
    assert run.proposals == 8
    assert changed(before, run.snapshot()) == {"state", "stop_reason"}


# ---- rules 3 and 4: every proposal considered uses a slot; rejections change nothing else


class _Weird:
    def __repr__(self) -> str:
        return "<weird>"


MALFORMED: list[tuple[str, Any]] = [
    ("none", None),
    ("tuple-not-plan", ("p1", 1, 1, "inspect-parser", "input-A")),
    ("dict-not-plan", {"id": "p1"}),
    ("string-not-plan", "p1"),
    ("object-not-plan", _Weird()),
    ("empty-id", Plan("", 1, 1, "inspect-parser", "input-A")),
    ("int-id", Plan(7, 1, 1, "inspect-parser", "input-A")),
    ("none-id", Plan(None, 1, 1, "inspect-parser", "input-A")),
    ("unhashable-id", Plan(["p1"], 1, 1, "inspect-parser", "input-A")),
    ("revision-true-is-not-int", Plan("p1", True, 1, "inspect-parser", "input-A")),
    ("revision-string", Plan("p1", "1", 1, "inspect-parser", "input-A")),
    ("revision-float", Plan("p1", 1.0, 1, "inspect-parser", "input-A")),
    ("revision-none", Plan("p1", None, 1, "inspect-parser", "input-A")),
    # True == 1 is the current evidence revision: only the bool check refuses it.
    ("evidence-revision-true-is-not-int", Plan("p1", 1, True, "inspect-parser", "input-A")),
    ("evidence-revision-float", Plan("p1", 1, 1.0, "inspect-parser", "input-A")),
    ("evidence-revision-string", Plan("p1", 1, "1", "inspect-parser", "input-A")),
    ("step-not-string", Plan("p1", 1, 1, 3, "input-A")),
    ("step-unhashable", Plan("p1", 1, 1, ["inspect-parser"], "input-A")),
    ("resource-not-string", Plan("p1", 1, 1, "inspect-parser", None)),
    ("resource-unhashable", Plan("p1", 1, 1, "inspect-parser", {"input-A"})),
]


@pytest.mark.parametrize("argument", [a for _, a in MALFORMED], ids=[n for n, _ in MALFORMED])
def test_malformed_plan_uses_a_slot_and_is_refused_without_raising(
    implementation: type, argument: Any
) -> None:
    run = implementation()
    before = run.snapshot()
    assert run.propose(argument) is False
    after = run.snapshot()
    assert after["proposals"] == before["proposals"] + 1
    assert changed(before, after) == {"proposals"}


@pytest.mark.parametrize("argument", [a for _, a in MALFORMED], ids=[n for n, _ in MALFORMED])
def test_malformed_plan_leaves_the_pending_plan_alone(implementation: type, argument: Any) -> None:
    run = implementation()
    run.propose(plan("p0", 1, 1))
    before = run.snapshot()
    assert run.propose(argument) is False
    assert changed(before, run.snapshot()) == {"proposals"}
    assert run.pending == plan("p0", 1, 1)


def _completed_p1(run: Any) -> None:
    assert run.propose(plan("p1", 1, 1))
    assert run.execute("p1") is ExecuteResult.EXECUTED


REJECTED: list[tuple[str, Plan]] = [
    ("revision-equal-to-plan-revision", plan("p2", 1, 1)),
    ("revision-below-plan-revision", plan("p2", 0, 1)),
    ("evidence-revision-older", plan("p2", 2, 0)),
    ("evidence-revision-future", plan("p2", 2, 2)),
    ("resource-not-allowed", plan("p2", 2, 1, resource="input-B")),
    ("step-unknown", plan("p2", 2, 1, step="deploy")),
    ("id-already-completed", plan("p1", 2, 1)),
]


@pytest.mark.parametrize("rejected", [p for _, p in REJECTED], ids=[n for n, _ in REJECTED])
def test_invalid_plan_is_rejected_using_a_slot_and_nothing_else(
    implementation: type, rejected: Plan
) -> None:
    run = implementation()
    _completed_p1(run)
    before = run.snapshot()
    assert run.propose(rejected) is False
    assert changed(before, run.snapshot()) == {"proposals"}
    assert run.proposals == 2


def test_first_plan_needs_revision_at_least_one(implementation: type) -> None:
    run = implementation()
    assert run.propose(plan("p1", 0, 1)) is False
    assert run.proposals == 1
    assert run.pending is None
    assert run.propose(plan("p1", 1, 1)) is True


def test_rejected_proposal_keeps_the_pending_plan(implementation: type) -> None:
    run = implementation()
    assert run.propose(plan("p1", 3, 1))
    assert run.propose(plan("p2", 2, 1)) is False  # outdated revision
    assert run.pending == plan("p1", 3, 1)
    assert run.plan_revision == 3
    assert run.execute("p1") is ExecuteResult.EXECUTED


# ---- rule 5: acceptance --------------------------------------------------------------


def test_accepted_plan_becomes_pending_and_sets_plan_revision(implementation: type) -> None:
    run = implementation()
    before = run.snapshot()
    assert run.propose(plan("p1", 5, 1)) is True
    after = run.snapshot()
    assert run.pending == plan("p1", 5, 1)
    assert run.plan_revision == 5
    assert run.proposals == 1
    assert after["state"] == "pending"
    assert after["accepted"] == ["p1"]
    assert changed(before, after) == {"state", "proposals", "plan_revision", "pending", "accepted"}


def test_new_plan_supersedes_the_pending_one(implementation: type) -> None:
    run = implementation()
    assert run.propose(plan("p1", 1, 1))
    assert run.propose(plan("p2", 2, 1, step="inspect-access"))
    assert run.pending == plan("p2", 2, 1, step="inspect-access")
    assert run.execute("p1") is ExecuteResult.STALE_PLAN
    assert run.execute("p2") is ExecuteResult.EXECUTED


def test_plan_citing_current_evidence_after_observations_is_accepted(
    implementation: type,
) -> None:
    run = implementation()
    run.observe(obs("parser", 1, PASSED))
    assert run.propose(plan("p1", 1, 1)) is False  # stale
    assert run.propose(plan("p1", 1, 2)) is True
