"""CONTRACT.md ``execute(plan_id) -> ExecuteResult``, rules 1-6, and ``cancel()``,
against both implementations."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import FAILED, PASSED, changed, obs, plan

from replan.controller import ExecuteResult, StopReason

# ---- rule 1: replays ------------------------------------------------------------------


def test_completed_id_replays_and_changes_nothing(implementation: type) -> None:
    run = implementation()
    run.propose(plan("p1", 1, 1))
    assert run.execute("p1") is ExecuteResult.EXECUTED
    before = run.snapshot()
    assert run.execute("p1") is ExecuteResult.REPLAYED
    assert run.execute("p1") is ExecuteResult.REPLAYED
    assert run.snapshot() == before
    assert run.steps == 1


def test_completed_id_replays_while_another_plan_is_pending(implementation: type) -> None:
    run = implementation()
    run.propose(plan("p1", 1, 1))
    run.execute("p1")
    run.propose(plan("p2", 2, 1, step="inspect-access"))
    before = run.snapshot()
    assert run.execute("p1") is ExecuteResult.REPLAYED
    assert run.snapshot() == before
    assert run.pending == plan("p2", 2, 1, step="inspect-access")


# ---- rule 2: a stopped run ------------------------------------------------------------


def test_stopped_run_answers_stopped_even_for_the_pending_plan(implementation: type) -> None:
    run = implementation()
    run.propose(plan("p1", 1, 1))
    run.cancel()
    before = run.snapshot()
    assert run.execute("p1") is ExecuteResult.STOPPED
    assert run.execute("never-proposed") is ExecuteResult.STOPPED
    assert run.execute(None) is ExecuteResult.STOPPED
    assert run.snapshot() == before
    assert run.steps == 0


# ---- rule 3: stale and unknown ids ----------------------------------------------------


def test_never_accepted_id_is_unknown(implementation: type) -> None:
    run = implementation()
    before = run.snapshot()
    assert run.execute("p1") is ExecuteResult.UNKNOWN_PLAN
    run.propose(plan("p1", 1, 1))
    assert run.execute("p2") is ExecuteResult.UNKNOWN_PLAN
    assert run.pending == plan("p1", 1, 1)
    assert run.snapshot()["steps"] == before["steps"]


def test_rejected_plan_id_is_unknown_not_stale(implementation: type) -> None:
    run = implementation()
    assert run.propose(plan("p1", 1, 99)) is False
    assert run.execute("p1") is ExecuteResult.UNKNOWN_PLAN


NON_STRING_IDS: list[tuple[str, Any]] = [
    ("none", None),
    ("int", 1),
    ("bool", True),
    ("bytes", b"p1"),
    ("list-unhashable", ["p1"]),
    ("dict-unhashable", {"id": "p1"}),
    ("plan-record", plan("p1", 1, 1)),
    ("empty-string", ""),
]


@pytest.mark.parametrize(
    "plan_id", [i for _, i in NON_STRING_IDS], ids=[n for n, _ in NON_STRING_IDS]
)
def test_non_string_id_answers_unknown_plan_and_never_raises(
    implementation: type, plan_id: Any
) -> None:
    run = implementation()
    assert run.execute(plan_id) is ExecuteResult.UNKNOWN_PLAN
    run.propose(plan("p1", 1, 1))
    before = run.snapshot()
    assert run.execute(plan_id) is ExecuteResult.UNKNOWN_PLAN
    assert run.snapshot() == before


def test_invalidated_plan_is_stale(implementation: type) -> None:
    run = implementation()
    run.propose(plan("p1", 1, 1))
    run.observe(obs("parser", 1, PASSED))
    before = run.snapshot()
    assert run.execute("p1") is ExecuteResult.STALE_PLAN
    assert run.snapshot() == before


def test_superseded_plan_is_stale_while_its_successor_is_pending(implementation: type) -> None:
    run = implementation()
    run.propose(plan("p1", 1, 1))
    run.propose(plan("p2", 2, 1))
    before = run.snapshot()
    assert run.execute("p1") is ExecuteResult.STALE_PLAN
    assert run.snapshot() == before


def test_invalidated_id_proposed_again_on_current_evidence_executes(implementation: type) -> None:
    run = implementation()
    run.propose(plan("p1", 1, 1))
    run.observe(obs("parser", 1, PASSED))
    assert run.execute("p1") is ExecuteResult.STALE_PLAN
    assert run.propose(plan("p1", 2, 2)) is True
    assert run.execute("p1") is ExecuteResult.EXECUTED


# ---- rule 4: the step budget -----------------------------------------------------------


def test_execution_with_the_step_budget_spent_stops_with_step_limit(implementation: type) -> None:
    run = implementation()
    for n in range(1, 5):
        run.propose(plan(f"s{n}", n, 1))
        assert run.execute(f"s{n}") is ExecuteResult.EXECUTED
    run.propose(plan("s5", 5, 1))
    before = run.snapshot()
    assert run.execute("s5") is ExecuteResult.STEP_LIMIT
    assert run.stop_reason is StopReason.STEP_LIMIT
    assert run.steps == 4
    assert changed(before, run.snapshot()) == {"state", "stop_reason"}


def test_step_limit_is_checked_after_the_id(implementation: type) -> None:
    run = implementation()
    for n in range(1, 5):
        run.propose(plan(f"s{n}", n, 1))
        run.execute(f"s{n}")
    assert run.execute("nope") is ExecuteResult.UNKNOWN_PLAN  # idle: no pending plan
    run.propose(plan("s5", 5, 1))
    assert run.execute("nope") is ExecuteResult.UNKNOWN_PLAN
    assert run.stop_reason is None


# ---- rule 5: prerequisites -------------------------------------------------------------


@pytest.mark.parametrize(
    "observed",
    [[], [("parser", PASSED)], [("parser", PASSED), ("access", FAILED)], [("access", PASSED)]],
    ids=["none", "parser-only", "access-failed", "access-only"],
)
def test_missing_prerequisite_denies_and_keeps_the_plan_pending(
    implementation: type, observed: list[tuple[str, Any]]
) -> None:
    run = implementation()
    for key, state in observed:
        run.observe(obs(key, 1, state))
    revision = run.evidence_revision
    run.propose(plan("c1", 1, revision, step="commit-import"))
    before = run.snapshot()
    assert run.execute("c1") is ExecuteResult.PRECONDITION_DENIED
    assert run.execute("c1") is ExecuteResult.PRECONDITION_DENIED
    assert run.snapshot() == before
    assert run.pending == plan("c1", 1, revision, step="commit-import")
    assert run.steps == 0


def test_step_without_requirements_runs_whatever_the_evidence(implementation: type) -> None:
    run = implementation()
    run.observe(obs("parser", 1, FAILED))
    run.propose(plan("p1", 1, 2))
    assert run.execute("p1") is ExecuteResult.EXECUTED


# ---- rule 6: execution -------------------------------------------------------------------


def test_execution_counts_a_step_completes_the_id_and_clears_pending(
    implementation: type,
) -> None:
    run = implementation()
    run.propose(plan("p1", 1, 1))
    before = run.snapshot()
    assert run.execute("p1") is ExecuteResult.EXECUTED
    after = run.snapshot()
    assert run.steps == 1
    assert run.pending is None
    assert after["completed"] == ["p1"]
    assert after["state"] == "idle"
    assert run.stop_reason is None
    assert changed(before, after) == {"state", "steps", "pending", "completed"}


def test_completing_step_stops_the_run_with_completed(implementation: type) -> None:
    run = implementation()
    run.observe(obs("parser", 1, PASSED))
    run.observe(obs("access", 1, PASSED))
    run.propose(plan("c1", 1, 3, step="commit-import"))
    assert run.execute("c1") is ExecuteResult.EXECUTED
    assert run.stop_reason is StopReason.COMPLETED
    assert run.steps == 1
    assert run.execute("c1") is ExecuteResult.REPLAYED


# ---- cancel --------------------------------------------------------------------------------


@pytest.mark.parametrize("with_pending", [False, True], ids=["idle", "pending"])
def test_cancel_stops_an_active_run(implementation: type, with_pending: bool) -> None:
    run = implementation()
    if with_pending:
        run.propose(plan("p1", 1, 1))
    before = run.snapshot()
    assert run.cancel() is None
    assert run.stop_reason is StopReason.CANCELED
    assert changed(before, run.snapshot()) == {"state", "stop_reason"}


def test_cancel_on_a_stopped_run_changes_nothing(implementation: type) -> None:
    run = implementation()
    run.observe(obs("parser", 1, PASSED))
    run.observe(obs("access", 1, PASSED))
    run.propose(plan("c1", 1, 3, step="commit-import"))
    run.execute("c1")
    before = run.snapshot()
    run.cancel()
    assert run.snapshot() == before
    assert run.stop_reason is StopReason.COMPLETED
