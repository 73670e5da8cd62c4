"""Crash safety with real processes: a child works against a SQLite journal and is
SIGKILLed at each point around the executor's two records; the journal is reopened
and checked (verification/boundary/executor/crash.py has the child and the checks)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from replan.controller.executor import Executor, Outcome
from replan.controller.sqlite_journal import SqliteJournal
from replan.verification.boundary.executor.crash import (
    EARLIER,
    FAULTS,
    GRANT,
    IN_DOUBT_POINTS,
    JOURNAL_FILE,
    KILL_POINTS,
    REPORT_FILE,
    TARGET,
    TRACE_FILE,
    crash_child_at,
    crash_problems,
    fault_matrix_problems,
    kill_at_point,
    recovery_problems,
    start_child,
)
from replan.verification.boundary.executor.mutants import REAL


def effect_runs(directory: Path) -> list[str]:
    return [line.split()[0] for line in (directory / TRACE_FILE).read_text().splitlines()]


@pytest.mark.parametrize("point", KILL_POINTS)
def test_kill_at_every_point_loses_nothing_and_never_reruns(tmp_path: Path, point: str) -> None:
    assert crash_child_at(tmp_path, point) == ""
    runs_before = effect_runs(tmp_path)
    assert runs_before.count(TARGET.plan_id) == (
        0 if point in ("before-intent", "between-intent-and-effect") else 1
    )
    reported = [json.loads(line) for line in (tmp_path / REPORT_FILE).read_text().splitlines()]
    assert [receipt["plan_id"] for receipt in reported] == (
        ["p1", "p2", "p3"] if point == "after-completion" else ["p1", "p2"]
    )
    assert recovery_problems(tmp_path, point, REAL) == []
    assert effect_runs(tmp_path).count("p1") == effect_runs(tmp_path).count("p2") == 1


@pytest.mark.parametrize("point", IN_DOUBT_POINTS)
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


def test_every_fault_after_a_kill_is_refused_or_recovered_never_rerun(tmp_path: Path) -> None:
    """At every kill point, each fault on the files (the -journal deleted, truncated,
    bit-flipped; the journal truncated or bit-flipped, 20 seeds each; its directory
    deleted): the journal is refused with its files unchanged, or opens with exactly
    its records and replays, doubts and runs as after a plain kill."""
    assert set(FAULTS) >= {"sidecar-deleted", "journal-truncated", "directory-deleted"}
    assert fault_matrix_problems(tmp_path, flips=20) == []


def test_the_fault_harness_catches_receipts_kept_only_in_the_wal(tmp_path: Path) -> None:
    """The check can fail: a journal in WAL mode loses the
    receipts committed to its -wal when the -wal is lost, and runs the effects again."""
    problems = fault_matrix_problems(tmp_path, "receipts-only-in-wal", flips=1)
    assert any(
        p.startswith("after-completion, sidecar-deleted: the journal opened with other records")
        for p in problems
    ), problems
    assert any("sidecar-truncated" in p for p in problems)


def test_the_fault_harness_catches_a_lost_journal_opened_as_new(tmp_path: Path) -> None:
    problems = fault_matrix_problems(tmp_path, "lost-journal-recreated", flips=1)
    assert (
        "after-completion, journal-truncated: the journal opened with other records (0) "
        "than the 6 it holds" in problems
    ), problems
    assert any(p.startswith("after-completion, directory-deleted:") for p in problems)
