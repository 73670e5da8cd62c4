"""The executor's benchmark workloads, for ``replan bench`` (which owns the timing).

Following the reference design, one *episode* is a fresh executor with a fresh
journal, one grant and one operation:

- ``authorized_episode_memory``: a granted operation executed, with a receipt, on the
  in-memory journal;
- ``denied_episode_memory``: an operation on a resource outside the grant, denied
  before anything is recorded (the effect must not run);
- ``authorized_episode_sqlite``: the authorized episode on a new SQLite journal file
  (created, WAL, ``synchronous=FULL``: an intent and a completion each committed and
  synced, then closed and deleted), so the cost of durability is visible next to the
  in-memory figure;
- ``authorized_episode_sqlite_open``: the same on one journal opened once (a fresh
  executor and a new plan id per episode), which separates the per-operation cost of
  two synced commits from the cost of creating a file;
- ``chain_one_record`` and ``open_journal_of_200_operations``: what the hash chain
  costs, per record written (two per operation) and at open, where every record's
  chain value is recomputed and compared.

Every episode checks its own outcome and raises ``AssertionError`` if it is not the
expected one: a fast wrong answer is not a result. Each takes no arguments and
returns None, so the bench can time ``episode()`` in a loop.
"""

from __future__ import annotations

import atexit
import itertools
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from replan.controller.executor import Executor, Grant, Operation, Outcome
from replan.controller.journal import JSONValue, Record
from replan.controller.sqlite_journal import SqliteJournal, chain_after
from replan.verification.boundary.executor.mutants import ReceiptsOnlyInWal

GRANT = Grant(resources=["input-A"], steps=["inspect-parser", "inspect-access", "commit-import"])
PLAN_ID = "commit-1"
COMMIT_STEP = "commit-import"
GRANTED_RESOURCE = "input-A"
UNGRANTED_RESOURCE = "input-B"
ARGUMENTS: dict[str, JSONValue] = {"rows": 3, "table": "imports"}


def _import(operation: Operation) -> JSONValue:
    """The effect: what a real import would report."""
    return {"imported": operation.arguments["rows"]}


def _refuse(operation: Operation) -> JSONValue:
    raise AssertionError(f"the effect of denied {operation.plan_id} ran")


def _authorized(executor: Executor, plan_id: str = PLAN_ID) -> None:
    operation = Operation(plan_id, COMMIT_STEP, GRANTED_RESOURCE, ARGUMENTS)
    answer = executor.run(operation, GRANT, _import)
    receipt = answer.receipt
    if (
        answer.outcome is not Outcome.EXECUTED
        or receipt is None
        or receipt.digest != operation.digest()
    ):
        raise AssertionError(f"authorized episode answered {answer.outcome}, not Executed")


def authorized_episode_memory() -> None:
    """Fresh executor on an in-memory journal; a granted operation is Executed."""
    _authorized(Executor())


def denied_episode_memory() -> None:
    """Fresh executor on an in-memory journal; an ungranted resource is Denied."""
    executor = Executor()
    operation = Operation(PLAN_ID, COMMIT_STEP, UNGRANTED_RESOURCE, ARGUMENTS)
    answer = executor.run(operation, GRANT, _refuse)
    if answer.outcome is not Outcome.DENIED:
        raise AssertionError(f"denied episode answered {answer.outcome}, not Denied")


_scratch: Path | None = None
_numbers = itertools.count()


def _scratch_directory() -> Path:
    global _scratch
    if _scratch is None:
        _scratch = Path(tempfile.mkdtemp(prefix="replan-executor-bench-"))
        atexit.register(shutil.rmtree, _scratch, True)
    return _scratch


def authorized_episode_sqlite() -> None:
    """Fresh executor on a new SQLite journal file; a granted operation is Executed
    (intent and receipt committed to disk); the file is closed and removed."""
    path = _scratch_directory() / f"journal-{next(_numbers)}.db"
    journal = SqliteJournal.create(path)
    try:
        _authorized(Executor(journal))
    finally:
        journal.close()
        for leftover in (
            path,
            path.with_name(path.name + "-wal"),
            path.with_name(path.name + "-shm"),
        ):
            leftover.unlink(missing_ok=True)


_open_journal: SqliteJournal | None = None


def authorized_episode_sqlite_open() -> None:
    """Fresh executor over one SQLite journal opened once (the file's creation is not
    in the episode); each episode's operation has a new plan id, so each commits and
    syncs its own intent and completion: the per-operation cost of durability."""
    global _open_journal
    if _open_journal is None:
        _open_journal = SqliteJournal.create(_scratch_directory() / "open-journal.db")
        atexit.register(_open_journal.close)
    _authorized(Executor(_open_journal), f"{PLAN_ID}-{next(_numbers)}")


_open_wal_journal: SqliteJournal | None = None


def authorized_episode_sqlite_open_wal() -> None:
    """The same as ``sqlite-open`` on a journal in WAL mode (the
    mutant ``receipts-only-in-wal``): the baseline that prices the rollback journal,
    whose receipts cannot be lost with a ``-wal``."""
    global _open_wal_journal
    if _open_wal_journal is None:
        path = _scratch_directory() / "open-journal-wal.db"
        _open_wal_journal = ReceiptsOnlyInWal.create(path)
        atexit.register(_open_wal_journal.close)
    _authorized(Executor(_open_wal_journal), f"{PLAN_ID}-{next(_numbers)}")


#: Operations in the journal the open workload opens (two records each).
OPERATIONS_AT_OPEN = 200
_full_journal: Path | None = None


def _journal_of_operations() -> Path:
    """A closed journal holding ``OPERATIONS_AT_OPEN`` executed operations."""
    global _full_journal
    if _full_journal is None:
        path = _scratch_directory() / "full-journal.db"
        journal = SqliteJournal.create(path)
        try:
            for number in range(OPERATIONS_AT_OPEN):
                _authorized(Executor(journal), f"{PLAN_ID}-{number}")
        finally:
            journal.close()
        _full_journal = path
    return _full_journal


_two_records: tuple[Record, Record] | None = None


def chain_one_record() -> None:
    """The chain value of one record after its predecessor's: the hash a write adds
    (the journal computes one per record, two per operation)."""
    global _two_records
    if _two_records is None:
        journal = SqliteJournal(_journal_of_operations())
        try:
            first, second = journal.records()[-2:]
        finally:
            journal.close()
        _two_records = (first, second)
    first, second = _two_records
    assert len(chain_after(chain_after("", first), second)) == 64


def open_journal_of_200_operations() -> None:
    """Open (and close) a journal of ``OPERATIONS_AT_OPEN`` operations: the integrity
    check and every record's chain recomputed, the price of refusing damage at open."""
    journal = SqliteJournal(_journal_of_operations())
    try:
        assert len(journal.records()) == 2 * OPERATIONS_AT_OPEN
    finally:
        journal.close()


#: workload name -> episode, for the bench.
WORKLOADS: dict[str, Callable[[], None]] = {
    "executor-authorized/memory": authorized_episode_memory,
    "executor-denied/memory": denied_episode_memory,
    "executor-authorized/sqlite": authorized_episode_sqlite,
    "executor-authorized/sqlite-open": authorized_episode_sqlite_open,
    "executor-authorized/sqlite-open-wal": authorized_episode_sqlite_open_wal,
    "executor-journal/chain-one-record": chain_one_record,
    "executor-journal/open-200-operations": open_journal_of_200_operations,
}
