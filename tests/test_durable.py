"""The run log and restore (controller/durable): a restored run is the run that was
logged, checked answer by answer; a log written under other rules is refused."""

from __future__ import annotations

import contextlib
import sqlite3
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replan.controller import Controller, EvidenceState, ExecuteResult, Observation, Plan
from replan.controller.durable import (
    InMemoryRunLog,
    LoggedController,
    RestoreRefused,
    RunLog,
    RunLogError,
    SqliteRunLog,
    restore,
)
from replan.controller.durable.log import Entry
from replan.controller.policy import DEFAULT_POLICY, policy_digest
from replan.controller.records import LARGEST_INT
from replan.spec.inputs import arguments

#: Arguments no well-behaved model sends, tried beside the declared ones.
HOSTILE = ("junk", None, 5, True, Plan("p", True, 1, "x", "y"))  # type: ignore[arg-type]


def _call(run: Controller, op: str, argument: object) -> None:
    method = getattr(run, op)
    with contextlib.suppress(ValueError):  # InvalidInput, ObservationConflict: unchanged
        method() if Controller.events[op][0] is None else method(argument)


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[str, int]]:
    """Choices of (event, argument index), resolved against the run as it goes."""
    events = sorted(Controller.events)
    return draw(
        st.lists(st.tuples(st.sampled_from(events), st.integers(0, 40)), min_size=0, max_size=40)
    )


def _drive(run: Controller, choices: list[tuple[str, int]]) -> None:
    for op, index in choices:
        candidates = (*arguments(Controller.events[op][1], run), *HOSTILE)
        _call(run, op, candidates[index % len(candidates)])


@settings(max_examples=150, deadline=None)
@given(histories(), st.integers(1, 4))
def test_a_restored_run_is_the_logged_run(choices: list[tuple[str, int]], every: int) -> None:
    log = InMemoryRunLog()
    original = LoggedController(log=log, snapshot_every=every)
    _drive(original, choices)
    for check_all in (False, True):
        restored = restore(log, check_all=check_all)
        assert restored._export_state() == original._export_state()
        assert restored.snapshot() == original.snapshot()


def test_a_run_re_executed_from_its_start_re_derives_its_log() -> None:
    log = InMemoryRunLog()
    first = LoggedController(log=log)
    _drive(first, [("observe", 0), ("propose", 0), ("execute", 0), ("cancel", 0)])
    logged = log.entries()
    again = LoggedController(log=log)  # DBOS recovers a workflow this way
    _drive(again, [("observe", 0), ("propose", 0), ("execute", 0), ("cancel", 0)])
    assert log.entries() == logged


def test_a_re_execution_that_differs_from_its_log_is_refused() -> None:
    log = InMemoryRunLog()
    LoggedController(log=log).observe(Observation("parser", 1, EvidenceState.PASSED, "t"))
    again = LoggedController(log=log)
    with pytest.raises(RunLogError, match="diverges from its log at position 1"):
        again.observe(Observation("parser", 1, EvidenceState.FAILED, "t"))


def test_calls_that_change_nothing_are_not_logged() -> None:
    log = InMemoryRunLog()
    run = LoggedController(log=log)
    with pytest.raises(ValueError):
        run.observe("not an observation")  # type: ignore[arg-type]
    run.cancel()
    run.execute("p1")  # absorbed by the stopped run
    assert [entry.op for entry in log.entries()] == ["cancel"]


def test_restore_refuses_another_policy_naming_the_digest() -> None:
    log = InMemoryRunLog()
    LoggedController(log=log).cancel()
    other = replace(DEFAULT_POLICY, max_steps=DEFAULT_POLICY.max_steps + 1)
    with pytest.raises(RestoreRefused) as refused:
        restore(log, other)
    message = str(refused.value)
    assert "the policy digest differs" in message and "\n" not in message
    assert policy_digest(DEFAULT_POLICY)[:19] in message


def test_restore_refuses_another_declaration_naming_the_digest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = InMemoryRunLog()
    LoggedController(log=log).cancel()
    monkeypatch.setattr("replan.controller.durable.logged.DECLARATION_DIGEST", "sha256:" + "0" * 64)
    with pytest.raises(RestoreRefused, match="the declaration digest differs"):
        restore(log)


def test_a_log_edited_by_hand_does_not_restore(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    with SqliteRunLog(path) as log:
        run = LoggedController(log=log)
        run.observe(Observation("parser", 1, EvidenceState.PASSED, "t"))
        run.propose(Plan("p1", 1, run.evidence_revision, "inspect-parser", "input-A"))
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE replan_run_log SET answer = 'false' WHERE position = 2")
    with SqliteRunLog(path) as log, pytest.raises(RunLogError, match="position 2"):
        restore(log)


def test_a_sqlite_log_survives_its_process_and_goes_on_logging(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    with SqliteRunLog(path) as log:
        run = LoggedController(log=log, snapshot_every=2)
        run.observe(Observation("parser", 1, EvidenceState.PASSED, "t"))
        run.propose(Plan("p1", 1, run.evidence_revision, "inspect-parser", "input-A"))
        expected = run.snapshot()
    with SqliteRunLog(path) as log:
        restored = restore(log)
        assert restored.snapshot() == expected
        assert restored.execute("p1") == ExecuteResult.EXECUTED
    with SqliteRunLog(path) as log:
        assert [entry.position for entry in log.entries()] == [1, 2, 3]
        assert restore(log).steps == 1


def test_an_empty_log_does_not_restore() -> None:
    with pytest.raises(RunLogError, match="empty"):
        restore(InMemoryRunLog())


def test_the_largest_plan_revision_is_logged_exactly() -> None:
    log = InMemoryRunLog()
    run = LoggedController(log=log)
    assert run.propose(Plan("p1", LARGEST_INT, run.evidence_revision, "inspect-parser", "input-A"))
    assert restore(log).plan_revision == LARGEST_INT


def test_every_declared_event_is_logged() -> None:
    """The wrapped events are the declaration's, whatever it declares."""
    for op in Controller.events:
        assert getattr(LoggedController, op) is not getattr(Controller, op), op


def test_storage_subclasses_keep_the_rules() -> None:
    log: RunLog = InMemoryRunLog()
    LoggedController(log=log).cancel()
    with pytest.raises(RunLogError, match="appended after 1 entries"):
        log.append(Entry(3, "cancel", "null", "null"))


def test_the_run_log_may_share_the_executors_journal_file(tmp_path: Path) -> None:
    from replan.controller.sqlite_journal import SqliteJournal

    path = tmp_path / "run-42.journal"
    with SqliteJournal.create(path), SqliteRunLog(path) as log:
        LoggedController(log=log).cancel()
    with SqliteJournal(path) as journal, SqliteRunLog(path) as log:
        assert journal.records() == []
        assert restore(log).stop_reason == "Canceled"


def test_threads_sharing_a_logged_run_log_it_in_the_order_it_ran() -> None:
    import threading

    log = InMemoryRunLog()
    patient = replace(DEFAULT_POLICY, no_progress_limit=10**9)  # the run never stops
    run = LoggedController(patient, log=log)
    versions = iter(range(1, 1_000_000))
    start = threading.Barrier(8)

    errors: list[BaseException] = []

    def work() -> None:
        start.wait()
        try:
            for _ in range(2000):
                state = EvidenceState.PASSED if next(versions) % 2 else EvidenceState.FAILED
                run.observe(Observation("access", next(versions), state, "t"))
        except Exception as error:  # a thread's failure is the test's
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(8)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    assert [entry.position for entry in log.entries()] == list(range(1, len(log) + 1))
    assert restore(log, patient)._export_state() == run._export_state()


class _FullDisk(InMemoryRunLog):
    """A log whose storage refuses the next write."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse = False

    def _write_entry(self, entry: Entry) -> None:
        if self.refuse:
            raise OSError("No space left on device")
        super()._write_entry(entry)


def test_a_call_the_log_cannot_take_closes_the_run_and_restores_without_it() -> None:
    log = _FullDisk()
    run = LoggedController(log=log)
    run.observe(Observation("parser", 1, EvidenceState.PASSED, "t"))
    before = run._export_state()
    log.refuse = True
    with pytest.raises(RunLogError, match="this run is closed: restore it from its log"):
        run.propose(Plan("p1", 1, run.evidence_revision, "inspect-parser", "input-A"))
    log.refuse = False
    with pytest.raises(RunLogError, match="could not take propose at position 2"):
        run.cancel()  # closed: nothing more is accepted
    restored = restore(log)
    assert restored._export_state() == before  # the failed call did not happen
    assert restored.propose(Plan("p1", 1, restored.evidence_revision, "inspect-parser", "input-A"))


def test_a_plan_with_a_str_subclass_in_a_field_is_logged_malformed() -> None:
    log = InMemoryRunLog()
    run = LoggedController(log=log)
    odd = Plan(EvidenceState.PASSED, 1, run.evidence_revision, "inspect-parser", "input-A")  # type: ignore[arg-type]
    assert run.propose(odd) is False  # malformed: it used a slot
    assert "malformed" in log.entries()[-1].argument
    assert restore(log)._export_state() == run._export_state()


def test_snapshots_hold_the_largest_plan_revision() -> None:
    log = InMemoryRunLog()
    run = LoggedController(log=log, snapshot_every=1)
    assert run.propose(Plan("p1", LARGEST_INT, run.evidence_revision, "inspect-parser", "input-A"))
    assert restore(log).plan_revision == LARGEST_INT
