"""Crash safety with real processes: a child works against a SQLite journal and is
SIGKILLed at each point around the executor's two records; the journal is reopened
and checked (verification/executor_crash.py has the child and the checks)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from replan.controller.executor import Executor, Outcome
from replan.controller.journal import SqliteJournal
from replan.verification.executor_crash import (
    EARLIER,
    GRANT,
    JOURNAL_FILE,
    KILL_POINTS,
    REPORT_FILE,
    TARGET,
    TRACE_FILE,
    crash_child_at,
    crash_problems,
    kill_at_point,
    recovery_problems,
    start_child,
)
from replan.verification.executor_mutants import REAL


def effect_runs(directory: Path) -> list[str]:
    return [line.split()[0] for line in (directory / TRACE_FILE).read_text().splitlines()]


@pytest.mark.parametrize("point", KILL_POINTS)
def test_kill_at_every_point_loses_nothing_and_never_reruns(tmp_path: Path, point: str) -> None:
    assert crash_child_at(tmp_path, point) == ""
    runs_before = effect_runs(tmp_path)
    assert runs_before.count(TARGET.plan_id) == (
        1 if point in ("between-effect-and-completion", "after-completion") else 0
    )
    reported = [json.loads(line) for line in (tmp_path / REPORT_FILE).read_text().splitlines()]
    assert [receipt["plan_id"] for receipt in reported] == (
        ["p1", "p2", "p3"] if point == "after-completion" else ["p1", "p2"]
    )
    assert recovery_problems(tmp_path, point, REAL) == []
    assert effect_runs(tmp_path).count("p1") == effect_runs(tmp_path).count("p2") == 1


@pytest.mark.parametrize("point", ["between-intent-and-effect", "between-effect-and-completion"])
def test_an_interrupted_operation_is_reported_in_doubt_with_its_digest(
    tmp_path: Path, point: str
) -> None:
    assert crash_child_at(tmp_path, point) == ""
    journal = SqliteJournal(tmp_path / JOURNAL_FILE)
    executor = Executor(journal)
    [intent] = executor.in_doubt()
    assert (intent.plan_id, intent.digest) == (TARGET.plan_id, TARGET.digest())
    calls: list[str] = []
    answer = executor.run(TARGET, GRANT, lambda operation: calls.append(operation.plan_id))
    assert (answer.outcome, answer.recorded, answer.receipt, calls) == (
        Outcome.IN_DOUBT,
        TARGET.digest(),
        None,
        [],
    )
    assert [r.plan_id for r in executor.receipts()] == [op.plan_id for op in EARLIER]
    journal.close()


def test_the_child_dies_by_sigkill_not_by_exiting(tmp_path: Path) -> None:
    process = start_child(tmp_path, "after-completion")
    assert kill_at_point(process, tmp_path, "after-completion") == ""
    assert process.returncode == -signal.SIGKILL


def test_the_harness_catches_an_intent_that_is_not_durable(tmp_path: Path) -> None:
    """The check can fail: a journal whose intent commits only with the completion
    loses the intent in the kill, so the operation looks never started and runs again."""
    problems = crash_problems(tmp_path, "intent-not-durable")
    assert "between-effect-and-completion: the effect of p3 ran 2 times, expected 1" in problems
    assert any("between-intent-and-effect: the interrupted p3 is not listed" in p for p in problems)
