"""The SQLite run log never restores an older run: a committed entry is in the file when
``append`` returns (no ``-wal`` to lose), every entry is chained to the one before, and
a witness beside the file holds the entry count and the chain's head, so a file rolled
back to an older copy, one with an entry altered, or one without its witness is refused
with one line naming what is missing, and nothing is written."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from replan.controller import EvidenceState, ExecuteResult, Observation, Plan, Policy, Step
from replan.controller.durable import LoggedController, RunLogError, SqliteRunLog, restore
from replan.controller.executor import Executor, Grant, Operation, perform

POLICY = Policy(
    keys=("parser",),
    steps=(Step("inspect"), Step("load"), Step("finish", completes_run=True)),
    resources=("input-A",),
    max_steps=4,
    max_proposals=20,
)
GRANT = Grant(["input-A"], ["inspect", "load"])


def files(path: Path) -> dict[str, bytes]:
    """Every file of the log (the database, its sidecars, its witness), by name."""
    return {p.name: p.read_bytes() for p in sorted(path.parent.iterdir())}


def step(run: LoggedController, executor: Executor, number: int, effects: list[str]) -> None:
    plan = Plan(f"c{number}", run.plan_revision + 1, run.evidence_revision, "load", "input-A")
    assert run.propose(plan)
    done = perform(
        run, executor, Operation.for_plan(plan), GRANT, lambda op: effects.append(op.plan_id)
    )
    assert done.answer is ExecuteResult.EXECUTED


def test_a_killed_writer_loses_no_entry_without_its_wal(tmp_path: Path) -> None:
    """The probe: a first process logs a step and closes the log; a restored one logs
    two more and is killed with the log open, and a ``-wal`` (if any) is lost. What
    the main file holds is the whole run, or restore refuses: never the first run."""
    path = tmp_path / "run.log"
    effects: list[str] = []
    with SqliteRunLog(path) as log:
        step(LoggedController(POLICY, log=log), Executor(), 1, effects)
    log = SqliteRunLog(path)
    run = restore(log, POLICY)
    for number in (2, 3):
        step(run, Executor(), number, effects)
    expected = run.snapshot()
    survivors = tmp_path / "after-the-crash"
    survivors.mkdir()
    for name in (path.name, path.name + ".head"):  # the -wal is lost; the log stays open
        if (tmp_path / name).exists():
            shutil.copy(tmp_path / name, survivors / name)
    with SqliteRunLog(survivors / path.name) as copy:
        try:
            restored = restore(copy, POLICY)
        except RunLogError as error:
            assert "\n" not in str(error)
        else:
            assert restored.snapshot() == expected, "an older run was restored"
    log.close()


def test_a_log_rolled_back_to_an_older_copy_is_refused_never_restored(tmp_path: Path) -> None:
    """Six effects under max_steps = 4 need a restore of an older run: refused."""
    path = tmp_path / "run.log"
    effects: list[str] = []
    with SqliteRunLog(path) as log:
        run = LoggedController(POLICY, log=log)
        executor = Executor()
        step(run, executor, 1, effects)
        older = path.read_bytes()
        step(run, executor, 2, effects)
        step(run, executor, 3, effects)
    path.write_bytes(older)  # the witness stays: it names the entries written since
    before = files(path)
    with SqliteRunLog(path) as log, pytest.raises(RunLogError) as refused:
        restore(log, POLICY)
    message = str(refused.value)
    assert "\n" not in message
    assert "entries #3 to #6 are missing" in message
    assert files(path) == before


def test_a_log_without_its_witness_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    with SqliteRunLog(path) as log:
        LoggedController(POLICY, log=log).cancel()
    Path(str(path) + ".head").unlink()
    with SqliteRunLog(path) as log, pytest.raises(RunLogError, match=r"run\.log\.head is missing"):
        restore(log, POLICY)


def test_an_altered_entry_breaks_the_chain_and_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    with SqliteRunLog(path) as log:
        run = LoggedController(POLICY, log=log)
        run.observe(Observation("parser", 1, EvidenceState.PASSED, "t"))
        run.cancel()
    with sqlite3.connect(path) as connection:
        connection.execute(
            """UPDATE replan_run_log SET argument = replace(argument, '"t"', '"u"')"""
        )
    before = files(path)
    with SqliteRunLog(path) as log, pytest.raises(RunLogError, match=r"position 1 .*chain"):
        restore(log, POLICY)
    assert files(path) == before


def test_the_log_is_kept_in_rollback_mode(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    with SqliteRunLog(path) as log:
        LoggedController(POLICY, log=log).cancel()
        (mode,) = log._connection.execute("PRAGMA journal_mode").fetchone()
    assert mode == "delete"
    assert path.read_bytes()[18:20] == b"\x01\x01"  # the header's rollback-journal format


def test_a_restored_log_goes_on_and_restores_again(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    effects: list[str] = []
    with SqliteRunLog(path) as log:
        run = LoggedController(POLICY, log=log, snapshot_every=2)
        step(run, Executor(), 1, effects)
    with SqliteRunLog(path) as log:
        run = restore(log, POLICY)
        step(run, Executor(), 2, effects)
        expected = run.snapshot()
    with SqliteRunLog(path) as log:
        assert restore(log, POLICY).snapshot() == expected


def test_an_entry_missing_from_the_middle_is_named_and_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    effects: list[str] = []
    with SqliteRunLog(path) as log:
        run = LoggedController(POLICY, log=log)
        step(run, Executor(), 1, effects)
        step(run, Executor(), 2, effects)
    with sqlite3.connect(path) as connection:
        connection.execute("DELETE FROM replan_run_log WHERE position = 2")
    before = files(path)
    with SqliteRunLog(path) as log, pytest.raises(RunLogError) as refused:
        restore(log, POLICY)
    assert "the entry at position 2 is missing (the next is #3)" in str(refused.value)
    assert files(path) == before


def test_a_witness_one_entry_behind_is_what_a_kill_leaves_and_restores(tmp_path: Path) -> None:
    """A kill between an entry's commit and its witness leaves the witness one behind:
    the file holds the whole run, so it restores; two behind is refused."""
    path = tmp_path / "run.log"
    effects: list[str] = []
    with SqliteRunLog(path) as log:
        run = LoggedController(POLICY, log=log)
        step(run, Executor(), 1, effects)
        witnesses = []
        for number in (2, 3):
            witnesses.append(Path(f"{path}.head").read_text())
            step(run, Executor(), number, effects)
        expected = run.snapshot()
        held = len(log)
    witness = Path(f"{path}.head")
    with sqlite3.connect(path) as connection:
        chains = dict(connection.execute("SELECT position, chain FROM replan_run_log"))
    document = json.loads(witness.read_text())
    witness.write_text(json.dumps({**document, "entries": held - 1, "chain": chains[held - 1]}))
    with SqliteRunLog(path) as log:
        assert restore(log, POLICY).snapshot() == expected
    witness.write_text(json.dumps({**document, "entries": held - 2, "chain": chains[held - 2]}))
    with SqliteRunLog(path) as log, pytest.raises(RunLogError, match="witness is older"):
        restore(log, POLICY)
