"""Kill and restart, for real: the durable import run and the durable guarded agent
(DBOS workflows) are SIGKILLed at every boundary and at random moments, on SQLite,
and end as the uninterrupted run does, with no effect run twice
(verification/boundary/durable/crash.py has the runs, the workers and the checks;
tests/test_durable_crash_postgres.py runs them on PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from replan.controller.durable.dbos import effect_step
from replan.verification.boundary.durable.crash import (
    FORGETFUL_AGENT,
    WORKLOADS,
    Matrix,
    crash_matrix,
    run_to_end,
    state_of,
)

#: The default suite's share of random kills (with the 50 boundary kills: >= 200).
RANDOM_KILLS = 150


def held(matrix: Matrix) -> None:
    print(matrix.summary())
    assert matrix.held, matrix.summary()
    assert matrix.boundaries >= 40  # every call, input and effect boundary of the run


def test_every_kill_on_sqlite_ends_as_the_uninterrupted_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    matrix = crash_matrix(url, "sqlite", tmp_path, random_kills=RANDOM_KILLS, seed=1)
    held(matrix)
    assert matrix.kills >= 200


def test_every_kill_of_a_guarded_agent_on_sqlite_ends_as_the_uninterrupted_run(
    tmp_path: Path,
) -> None:
    """The agent loop: no provider reply asked twice, no tool run twice, the same
    calls answered the same way, the same log."""
    url = f"sqlite:///{tmp_path / 'agent.db'}"
    matrix = crash_matrix(url, "sqlite", tmp_path, random_kills=30, seed=3, workload="agent")
    held(matrix)
    answers = {o.kill_point for o in matrix.outcomes}
    assert any("provider call" in point for point in answers)
    assert any("effect step after effect" in point for point in answers)


@pytest.mark.parametrize("workload", WORKLOADS)
def test_an_effect_outside_its_transaction_is_caught_running_twice(
    tmp_path: Path, workload: str
) -> None:
    """The harness catches a broken adapter: the effect committed on its own, before
    the receipt, runs again when the worker is killed between the two."""
    url = f"sqlite:///{tmp_path / 'broken.db'}"
    matrix = crash_matrix(
        url,
        "sqlite",
        tmp_path,
        random_kills=0,
        broken="effect-commits-alone",
        only="effect",
        workload=workload,
    )
    failed = [o for o in matrix.outcomes if not o.held]
    assert failed, matrix.summary()
    assert any("effects ran twice" in problem for o in failed for problem in o.problems)
    assert all("after effect" in o.kill_point for o in failed), matrix.summary()


@pytest.mark.parametrize(("broken", "ends_the_same"), [(None, True), ("reply-not-recorded", False)])
def test_a_provider_reply_read_again_after_a_restart_is_caught(
    tmp_path: Path, broken: str | None, ends_the_same: bool
) -> None:
    """With a model that answers a repeated question otherwise, a guard that does not
    record the provider's replies ends differently after a restart; the durable
    guard, which does, ends as the uninterrupted run."""
    matrix = crash_matrix(
        f"sqlite:///{tmp_path / 'forgetful.db'}",
        "sqlite",
        tmp_path,
        random_kills=0,
        broken=broken,
        only="after execute",
        workload=FORGETFUL_AGENT,
    )
    assert matrix.outcomes, matrix.summary()
    assert all(o.held is ends_the_same for o in matrix.outcomes), matrix.summary()


def test_the_durable_agent_is_guarded_as_the_contract_says(tmp_path: Path) -> None:
    """Uninterrupted, the durable guarded agent answers as the plain guard would:
    a stale plan refused, a Failed prerequisite denying the commit, a retried call
    answered from its receipt, the commit completing the run; each tool ran once."""
    url = f"sqlite:///{tmp_path / 'agent.db'}"
    document, kills = run_to_end(url, "agent-once", tmp_path, workload="agent")
    result = document["result"]
    assert kills == 0
    assert [answer.split(": ")[:2] for answer in result["answers"][:6]] == [
        ["p1", "Executed"],
        ["a1", "Executed"],
        ["c1", "StalePlan"],
        ["c2", "PreconditionDenied"],
        ["p1", "Replayed"],
        ["c2", "Executed"],
    ]
    assert result["stop_reason"] == "Completed" and result["executed"] == ["a1", "c2", "p1"]
    effects = state_of(url, "agent-once")["effects"]
    assert sorted(step for _digest, step in effects) == [
        "commit-import",
        "inspect-access",
        "inspect-parser",
    ]
    with pytest.raises(LookupError, match="no effect step"):
        effect_step()
