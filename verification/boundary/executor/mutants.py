"""Deliberately broken executors, journals and wirings: what the executor's checks
must catch.

A ``Subject`` is everything a check exercises: the executor class, the two journal
classes and the ``perform`` wiring. ``REAL`` is the shipped one; every mutant is
``REAL`` with exactly one piece replaced by a broken subclass or function, each with a
``BROKEN:`` docstring saying what it gets wrong. ``verification.boundary.executor.matrix`` runs
every check against every subject; a mutant that no check fails is a survivor and
fails ``replan mutants``.

Kept free of Hypothesis and subprocess imports: the crash harness's child process
imports this module to build the subject it was told to run.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from replan.controller.executor import (
    Approver,
    Effect,
    Execution,
    Executor,
    Grant,
    Operation,
    Outcome,
    Performed,
    perform,
    stored_result,
)
from replan.controller.journal import (
    Entry,
    InMemoryJournal,
    Intent,
    Receipt,
    RecordKind,
    canonical_json,
)
from replan.controller.records import ExecuteResult
from replan.controller.sqlite_journal import SqliteJournal

Perform = Callable[[Approver, Executor, Operation, Grant, Effect], Performed]


@dataclass(frozen=True)
class Subject:
    """One executor stack under test."""

    name: str
    description: str
    executor: type[Executor] = Executor
    memory_journal: type[InMemoryJournal] = InMemoryJournal
    sqlite_journal: type[SqliteJournal] = SqliteJournal
    perform: Perform = perform


REAL = Subject("real", "the shipped executor, journals and wiring")


# ---- broken executors -----------------------------------------------------------------


class GrantNotChecked(Executor):
    __slots__ = ()

    def _denied(self, operation: Operation, grant: Grant) -> Execution | None:
        """BROKEN: every operation is taken as granted."""
        return None


class StepGrantIgnored(Executor):
    __slots__ = ()

    def _denied(self, operation: Operation, grant: Grant) -> Execution | None:
        """BROKEN: only the resource is checked; any step on a granted resource runs."""
        if operation.resource in grant.resources:
            return None
        return super()._denied(operation, grant)


class DigestNotCompared(Executor):
    __slots__ = ()

    def _unbound(self, operation: Operation, binding: str | None) -> Execution | None:
        """BROKEN: the content a plan id is bound to is never compared."""
        return None

    def _answer_recorded(self, operation: Operation, entry: Entry) -> Execution:
        """BROKEN: the plan id alone finds the record; other content under it is
        answered as if it were the recorded operation."""
        same = entry._replace(intent=entry.intent._replace(digest=operation.digest()))
        if entry.receipt is not None:
            same = same._replace(receipt=entry.receipt._replace(digest=operation.digest()))
        return super()._answer_recorded(operation, same)


class ReplayRerunsEffect(Executor):
    __slots__ = ()

    def run(self, operation: Operation, grant: Grant, effect: Effect) -> Execution:
        """BROKEN: a completed operation is answered Replayed, but its effect runs
        again first."""
        answer = super().run(operation, grant, effect)
        if answer.outcome is Outcome.REPLAYED:
            effect(operation)
        return answer


class ReceiptBeforeEffect(Executor):
    __slots__ = ()

    def run(self, operation: Operation, grant: Grant, effect: Effect) -> Execution:
        """BROKEN: the receipt is recorded when the intent is, before the effect has
        succeeded; a failed or interrupted effect is then reported done."""
        denied = self._denied(operation, grant)
        if denied is not None:
            return denied
        digest = operation.digest()
        existing = self.journal.claim(
            Intent(operation.plan_id, digest, operation.encoding, self.clock())
        )
        if existing is not None:
            return self._answer_recorded(operation, existing)
        receipt = Receipt(operation.plan_id, digest, None, self.clock())
        self.journal.complete(receipt)
        result = stored_result(effect(operation))
        receipt = receipt._replace(result=result)
        return Execution(Outcome.EXECUTED, operation.plan_id, digest, receipt, digest, "executed")


class InDoubtTreatedAsDone(Executor):
    __slots__ = ()

    def _answer_recorded(self, operation: Operation, entry: Entry) -> Execution:
        """BROKEN: an intent without a receipt is answered Replayed, as if done."""
        if entry.receipt is None and entry.intent.digest == operation.digest():
            intent = entry.intent
            receipt = Receipt(intent.plan_id, intent.digest, None, intent.time)
            return Execution(
                Outcome.REPLAYED, intent.plan_id, intent.digest, receipt, intent.digest, "done"
            )
        return super()._answer_recorded(operation, entry)


class InDoubtRetried(Executor):
    __slots__ = ()

    def run(self, operation: Operation, grant: Grant, effect: Effect) -> Execution:
        """BROKEN: an in-doubt operation is silently run again and completed."""
        answer = super().run(operation, grant, effect)
        if answer.outcome is Outcome.IN_DOUBT:
            result = stored_result(effect(operation))
            receipt = Receipt(operation.plan_id, answer.digest, result, self.clock())
            self.journal.complete(receipt)
            return answer._replace(outcome=Outcome.EXECUTED, receipt=receipt)
        return answer


# ---- broken SQLite journals -------------------------------------------------------------


class IntentNotDurable(SqliteJournal):
    __slots__ = ()

    def claim(self, intent: Intent) -> Entry | None:
        """BROKEN: the intent is written in a transaction left open until the
        completion commits it, so a crash in between loses the intent and the effect
        looks as if it never started."""
        existing = self.entry(intent.plan_id)
        if existing is not None:
            return existing
        self._connection.execute("BEGIN IMMEDIATE")
        self._append(
            RecordKind.INTENT, intent.plan_id, intent.digest, intent.operation, intent.time
        )
        return None

    def complete(self, receipt: Receipt, body: str | None = None) -> None:
        """Commits the intent together with the completion."""
        if not self._connection.in_transaction:
            self._connection.execute("BEGIN IMMEDIATE")
        self._append(
            RecordKind.COMPLETION,
            receipt.plan_id,
            receipt.digest,
            canonical_json(receipt.result, "result") if body is None else body,
            receipt.time,
        )
        self._connection.execute("COMMIT")


class ForeignDatabaseAdopted(SqliteJournal):
    __slots__ = ()

    def __init__(self, path: str | Path) -> None:
        """BROKEN: any SQLite file is adopted: the records table is created in it if
        missing (a foreign database is written to, not refused)."""
        self.path = Path(path)
        self._connection = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
        self._connection.execute(
            "CREATE TABLE IF NOT EXISTS records (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
            "kind TEXT NOT NULL, plan_id TEXT NOT NULL, digest TEXT NOT NULL, "
            "body TEXT NOT NULL, time REAL NOT NULL, chain TEXT NOT NULL)"
        )
        self._connection.execute("PRAGMA synchronous=FULL")
        status = os.stat(self.path)
        self._identity = (status.st_dev, status.st_ino)


class ReceiptsOnlyInWal(SqliteJournal):
    """BROKEN: WAL mode (a journal in write-ahead mode): a committed record lives in the
    ``-wal`` until a checkpoint, so a lost or damaged ``-wal`` loses receipts and the
    reopened journal runs those effects again."""

    __slots__ = ()
    JOURNAL_MODE = "WAL"

    @classmethod
    def _lay_out(cls, draft: Path) -> None:
        """Checkpointed once, so the header says WAL as the open expects."""
        super()._lay_out(draft)
        connection = sqlite3.connect(draft)
        try:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            connection.close()


class LostJournalRecreated(SqliteJournal):
    __slots__ = ()

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """BROKEN: a missing or empty journal is opened as a new one (opening and
        creating are not separated), so a journal truncated or deleted after a crash
        forgets its receipts."""
        where = Path(path)
        if not where.exists() or where.stat().st_size == 0:
            where.parent.mkdir(parents=True, exist_ok=True)
            where.unlink(missing_ok=True)
            type(self)._lay_out(where)
        super().__init__(where)


# ---- broken wirings ---------------------------------------------------------------------


def perform_whatever_answer(
    controller: Approver, executor: Executor, operation: Operation, grant: Grant, effect: Effect
) -> Performed:
    """BROKEN: the refusals come first as they should, but when the controller refuses
    (Stopped, StalePlan, PreconditionDenied, ...) the effect runs anyway."""
    performed = perform(controller, executor, operation, grant, effect)
    if performed.answer is not None and performed.execution is None:
        return Performed(performed.answer, executor.run(operation, grant, effect))
    return performed


def perform_controller_first(
    controller: Approver, executor: Executor, operation: Operation, grant: Grant, effect: Effect
) -> Performed:
    """BROKEN: the controller is asked before the grant is checked, so a denied
    operation has already used a step and completed its plan id."""
    answer = controller.execute(operation.plan_id)
    if answer == ExecuteResult.EXECUTED:
        return Performed(answer, executor.run(operation, grant, effect))
    if answer == ExecuteResult.REPLAYED:
        return Performed(answer, executor.replay(operation, grant))
    return Performed(answer, None)


MUTANTS: dict[str, Subject] = {
    subject.name: subject
    for subject in (
        replace(
            REAL,
            name="grant-not-checked",
            description="an operation outside the grant runs its effect",
            executor=GrantNotChecked,
        ),
        replace(
            REAL,
            name="step-grant-ignored",
            description="only the resource is checked against the grant, not the step",
            executor=StepGrantIgnored,
        ),
        replace(
            REAL,
            name="digest-not-compared",
            description="other content under a recorded plan id is answered as the recorded one",
            executor=DigestNotCompared,
        ),
        replace(
            REAL,
            name="replay-reruns-effect",
            description="a replayed operation runs its effect again",
            executor=ReplayRerunsEffect,
        ),
        replace(
            REAL,
            name="receipt-before-effect",
            description="the receipt is recorded before the effect has succeeded",
            executor=ReceiptBeforeEffect,
        ),
        replace(
            REAL,
            name="in-doubt-treated-as-done",
            description="an intent without a receipt is answered Replayed",
            executor=InDoubtTreatedAsDone,
        ),
        replace(
            REAL,
            name="in-doubt-retried",
            description="an intent without a receipt is silently run again",
            executor=InDoubtRetried,
        ),
        replace(
            REAL,
            name="intent-not-durable",
            description="the SQLite intent commits only with the completion",
            sqlite_journal=IntentNotDurable,
        ),
        replace(
            REAL,
            name="foreign-database-adopted",
            description="a foreign SQLite file is adopted and written to instead of refused",
            sqlite_journal=ForeignDatabaseAdopted,
        ),
        replace(
            REAL,
            name="receipts-only-in-wal",
            description="the SQLite journal keeps committed records in the -wal until a checkpoint",
            sqlite_journal=ReceiptsOnlyInWal,
        ),
        replace(
            REAL,
            name="lost-journal-recreated",
            description="a missing or empty journal file is opened as a new, empty journal",
            sqlite_journal=LostJournalRecreated,
        ),
        replace(
            REAL,
            name="unapproved-operation-performed",
            description="perform runs the effect whatever the controller answered",
            perform=perform_whatever_answer,
        ),
        replace(
            REAL,
            name="controller-asked-before-grant",
            description="perform asks the controller before the grant, so a denial uses a step",
            perform=perform_controller_first,
        ),
    )
}

#: Every subject by name: the real one and the mutants (the crash child looks here).
SUBJECTS: dict[str, Subject] = {REAL.name: REAL, **MUTANTS}
