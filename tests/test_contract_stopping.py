"""CONTRACT.md "Stopping": every stop reason is absorbing, the first one is kept, and a
stopped run answers only Replayed (for a completed id) or refusals, changing nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conftest import FAILED, PASSED, obs, plan

from replan.controller import ExecuteResult, InvalidInput, Observation, StopReason


def _completed(run: Any) -> None:
    run.propose(plan("done", 1, 1))
    run.execute("done")
    run.observe(obs("parser", 1, PASSED))
    run.observe(obs("access", 1, PASSED))
    run.propose(plan("commit", 2, 3, step="commit-import"))
    run.execute("commit")


def _no_new_evidence(run: Any) -> None:
    run.propose(plan("done", 1, 1))
    run.execute("done")
    run.observe(obs("parser", 1, PASSED))
    run.propose(plan("pending", 2, 2))
    for _ in range(3):
        run.observe(obs("parser", 1, PASSED))


def _step_limit(run: Any) -> None:
    for n in range(1, 5):
        run.propose(plan(f"s{n}", n, 1))
        run.execute(f"s{n}")
    run.propose(plan("pending", 5, 1))
    run.execute("pending")


def _plan_limit(run: Any) -> None:
    run.propose(plan("done", 1, 1))
    run.execute("done")
    for revision in range(2, 9):
        run.propose(plan("pending", revision, 1))
    run.propose(plan("pending", 9, 1))


def _canceled(run: Any) -> None:
    run.propose(plan("done", 1, 1))
    run.execute("done")
    run.propose(plan("pending", 2, 1))
    run.cancel()


STOPS: dict[StopReason, Callable[[Any], None]] = {
    StopReason.COMPLETED: _completed,
    StopReason.NO_NEW_EVIDENCE: _no_new_evidence,
    StopReason.STEP_LIMIT: _step_limit,
    StopReason.PLAN_LIMIT: _plan_limit,
    StopReason.CANCELED: _canceled,
}


@pytest.mark.parametrize("reason", list(STOPS), ids=[str(r) for r in STOPS])
def test_every_stop_reason_is_reachable(implementation: type, reason: StopReason) -> None:
    run = implementation()
    STOPS[reason](run)
    assert run.stop_reason is reason
    assert run.snapshot()["stop_reason"] == str(reason)
    assert run.snapshot()["state"] == str(reason)


@pytest.mark.parametrize("reason", list(STOPS), ids=[str(r) for r in STOPS])
def test_stopped_run_changes_nothing_and_revives_nothing(
    implementation: type, reason: StopReason
) -> None:
    run = implementation()
    STOPS[reason](run)
    before = run.snapshot()
    calls = len(run.trace)
    revision = run.evidence_revision
    # Every kind of call that would change an active run.
    assert run.observe(obs("access", 7, FAILED)) is False
    assert run.observe(obs("parser", 9, PASSED, "owner")) is False
    assert run.observe(obs("parser", 1, FAILED)) is False  # would conflict if active
    assert run.propose(plan("fresh", 50, revision)) is False
    assert run.propose(None) is False
    assert run.execute("pending") is ExecuteResult.STOPPED
    assert run.execute("fresh") is ExecuteResult.STOPPED
    assert run.execute("never") is ExecuteResult.STOPPED
    assert run.execute(None) is ExecuteResult.STOPPED
    assert run.execute("done") is (
        ExecuteResult.REPLAYED if "done" in before["completed"] else ExecuteResult.STOPPED
    )
    run.cancel()
    with pytest.raises(InvalidInput):
        run.observe(Observation("nope", 1, PASSED, "x"))
    assert run.snapshot() == before
    assert run.stop_reason is reason
    assert len(run.trace) == calls + 12  # the trace still records each call


@pytest.mark.parametrize("reason", list(STOPS), ids=[str(r) for r in STOPS])
def test_first_stop_reason_is_kept(implementation: type, reason: StopReason) -> None:
    run = implementation()
    STOPS[reason](run)
    # Try to reach every other stop reason afterwards.
    run.cancel()
    for revision in range(100, 110):
        run.propose(plan(f"late{revision}", revision, run.evidence_revision))
    for _ in range(5):
        run.observe(obs("parser", 1, PASSED))
        run.execute("late100")
    assert run.stop_reason is reason


@pytest.mark.parametrize("reason", list(STOPS), ids=[str(r) for r in STOPS])
def test_completed_ids_still_replay_after_any_stop(
    implementation: type, reason: StopReason
) -> None:
    run = implementation()
    STOPS[reason](run)
    before = run.snapshot()
    assert "done" in before["completed"] or reason is StopReason.STEP_LIMIT
    replayed = "s1" if reason is StopReason.STEP_LIMIT else "done"
    assert run.execute(replayed) is ExecuteResult.REPLAYED
    assert run.snapshot() == before
