"""The journals: the same rules in memory and in SQLite; the SQLite file's durability
settings and markers; a foreign or corrupt file refused and left untouched."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replan.controller.executor import Executor, Grant, Operation, Outcome
from replan.controller.journal import (
    InMemoryJournal,
    Intent,
    Journal,
    JournalError,
    Receipt,
    RecordKind,
    canonical_json,
)
from replan.controller.sqlite_journal import APPLICATION_ID, SCHEMA_VERSION, SqliteJournal

GRANT = Grant(resources=["input-A"], steps=["commit-import"])
COMMIT = Operation("p1", "commit-import", "input-A", {"rows": 3})
INTENT = Intent("p1", "d" * 64, '{"op":1}', 1.0)


@pytest.fixture(params=["memory", "sqlite"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Journal]:
    opened: Journal = (
        InMemoryJournal() if request.param == "memory" else SqliteJournal.create(tmp_path / "j.db")
    )
    yield opened
    opened.close()


def test_claim_records_an_intent_once_and_returns_the_live_entry_after(journal: Journal) -> None:
    assert journal.claim(INTENT) is None
    entry = journal.claim(INTENT._replace(digest="e" * 64))
    assert entry is not None and entry.intent == INTENT and entry.in_doubt
    assert [record.kind for record in journal.records()] == [RecordKind.INTENT]


def test_complete_needs_an_open_intent_with_the_same_digest(journal: Journal) -> None:
    receipt = Receipt("p1", INTENT.digest, {"rows": 3}, 2.0)
    with pytest.raises(JournalError, match="no open intent"):
        journal.complete(receipt)
    journal.claim(INTENT)
    with pytest.raises(JournalError, match="no open intent"):
        journal.complete(receipt._replace(digest="e" * 64))
    journal.complete(receipt)
    with pytest.raises(JournalError, match="no open intent"):
        journal.complete(receipt)
    entry = journal.entry("p1")
    assert entry is not None and entry.receipt == receipt and not entry.in_doubt


def test_records_are_only_ever_appended(journal: Journal) -> None:
    journal.claim(INTENT)
    journal.abandon("p1", 2.0)
    journal.claim(INTENT._replace(time=3.0))
    journal.complete(Receipt("p1", INTENT.digest, [1, "two"], 4.0))
    records = journal.records()
    assert [(r.seq, r.kind, r.time) for r in records] == [
        (1, RecordKind.INTENT, 1.0),
        (2, RecordKind.ABANDON, 2.0),
        (3, RecordKind.INTENT, 3.0),
        (4, RecordKind.COMPLETION, 4.0),
    ]
    assert journal.records("p1") == records and journal.records("p2") == []
    assert [entry.receipt.result for entry in journal.entries() if entry.receipt] == [[1, "two"]]


def test_canonical_json_is_one_spelling_per_value() -> None:
    assert canonical_json({"b": [1, 2.5, None], "a": "é"}) == '{"a":"é","b":[1,2.5,null]}'


# ---- SQLite: durability settings, markers, reopening ---------------------------------------


def test_sqlite_journal_is_marked_and_in_rollback_mode(tmp_path: Path) -> None:
    """Rollback mode: a committed record is in the main file, never only in a -wal."""
    SqliteJournal.create(tmp_path / "j.db").close()
    connection = sqlite3.connect(tmp_path / "j.db")
    try:
        assert connection.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)
        assert connection.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    finally:
        connection.close()


def test_the_intent_is_committed_before_the_effect_runs(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    journal = SqliteJournal.create(path)
    seen_by_another_connection: list[list[RecordKind]] = []

    def effect(operation: Operation) -> int:
        other = SqliteJournal(path)
        seen_by_another_connection.append([record.kind for record in other.records()])
        other.close()
        return 1

    Executor(journal).run(COMMIT, GRANT, effect)
    after = SqliteJournal(path)
    assert seen_by_another_connection == [[RecordKind.INTENT]]
    assert [record.kind for record in after.records()] == [
        RecordKind.INTENT,
        RecordKind.COMPLETION,
    ]
    after.close()
    journal.close()


def test_receipts_and_doubts_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    calls: list[str] = []

    def effect(operation: Operation) -> dict[str, int]:
        calls.append(operation.plan_id)
        if operation.plan_id == "p2":
            raise OSError("interrupted")
        return {"rows": 3}

    journal = SqliteJournal.create(path)
    first = Executor(journal).run(COMMIT, GRANT, effect)
    with pytest.raises(OSError):
        Executor(journal).run(Operation("p2", "commit-import", "input-A"), GRANT, effect)
    journal.close()
    reopened = SqliteJournal(path)
    executor = Executor(reopened)
    again = executor.run(COMMIT, GRANT, effect)
    assert (again.outcome, again.receipt) == (Outcome.REPLAYED, first.receipt)
    doubt = executor.run(Operation("p2", "commit-import", "input-A"), GRANT, effect)
    assert doubt.outcome is Outcome.IN_DOUBT
    assert calls == ["p1", "p2"]
    reopened.close()


def test_two_journals_on_one_file_cannot_both_claim_a_plan_id(tmp_path: Path) -> None:
    one = SqliteJournal.create(tmp_path / "j.db")
    two = SqliteJournal(tmp_path / "j.db")
    assert one.claim(INTENT) is None
    assert two.claim(INTENT) is not None
    one.close()
    two.close()


# ---- a file that is not a usable journal --------------------------------------------------


def _foreign(path: Path) -> None:
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    connection.execute("INSERT INTO invoices (total) VALUES (9.5)")
    connection.commit()
    connection.close()


def _foreign_in_wal_mode(path: Path) -> None:
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("CREATE TABLE notes (text TEXT)")
    connection.commit()
    connection.close()


def _own(path: Path) -> bytes:
    journal = SqliteJournal.create(path)
    Executor(journal).run(COMMIT, GRANT, lambda operation: 1)
    journal.close()
    data = path.read_bytes()
    path.unlink()
    return data


def _other_version(path: Path) -> None:
    data = bytearray(_own(path))
    data[60:64] = (SCHEMA_VERSION + 1).to_bytes(4, "big")
    path.write_bytes(bytes(data))


def _ours_without_records_table(path: Path) -> None:
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA application_id={APPLICATION_ID}")
    connection.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    connection.execute("CREATE TABLE something_else (x)")
    connection.commit()
    connection.close()


UNUSABLE = {
    "foreign-sqlite": (_foreign, "another application"),
    "foreign-sqlite-wal": (_foreign_in_wal_mode, "another application"),
    "text": (lambda p: p.write_text("name,total\nA,1\n"), "not a SQLite database"),
    "random-bytes": (lambda p: p.write_bytes(bytes(range(256)) * 40), "not a SQLite database"),
    "short": (lambda p: p.write_bytes(b"SQLite format 3\x00"), "not a SQLite database"),
    "truncated-journal": (
        lambda p: p.write_bytes(_own(p)[:6000]),
        "corrupt replan journal",
    ),
    "overwritten-page": (
        lambda p: p.write_bytes((lambda d: d[:4096] + b"\xff" * 12 + d[4108:])(_own(p))),
        "corrupt replan journal",
    ),
    "other-schema-version": (_other_version, f"schema version {SCHEMA_VERSION + 1}"),
    "no-records-table": (_ours_without_records_table, "records table of the expected layout"),
}


@pytest.mark.parametrize("kind", list(UNUSABLE))
def test_unusable_file_is_refused_and_left_untouched(tmp_path: Path, kind: str) -> None:
    make, message = UNUSABLE[kind]
    path = tmp_path / "journal.db"
    make(path)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(JournalError, match=message) as refused:
        SqliteJournal(path)
    assert str(path) in str(refused.value) and "refusing" in str(refused.value)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["journal.db"]


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match="not a file"):
        SqliteJournal(tmp_path)


def test_an_empty_file_is_refused_not_taken_for_a_new_journal(tmp_path: Path) -> None:
    """A journal truncated to nothing lost its receipts: opening it as new would run
    every effect again."""
    path = tmp_path / "j.db"
    path.touch()
    with pytest.raises(JournalError, match="an empty file, not a journal"):
        SqliteJournal(path)
    assert path.read_bytes() == b""


def test_two_processes_creating_one_journal_one_creates_it_and_the_other_is_told(
    tmp_path: Path,
) -> None:
    """Creation is exclusive and atomic: of two processes creating one new journal at
    the same moment, exactly one creates it and the other is refused with "a file is
    already there"; the file that is there opens, complete."""
    import multiprocessing

    context = multiprocessing.get_context("fork")

    def create_at(path: Path, barrier: Any) -> None:
        barrier.wait()
        try:
            SqliteJournal.create(path).close()
        except JournalError as error:
            os._exit(2 if "a file is already there" in str(error) else 1)
        except BaseException:
            os._exit(1)
        os._exit(0)

    outcomes = []
    for trial in range(40):
        path = tmp_path / f"new-{trial}.journal"
        barrier = context.Barrier(2)
        children = [context.Process(target=create_at, args=(path, barrier)) for _ in range(2)]
        for child in children:
            child.start()
        for child in children:
            child.join(60)
        outcomes.append(sorted(child.exitcode for child in children))
        SqliteJournal(path).close()
    assert outcomes == [[0, 2]] * 40
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"new-{t}.journal" for t in range(40)
    )


def test_threads_sharing_the_in_memory_journal_never_run_an_effect_twice() -> None:
    import sys
    import threading

    from replan.controller.executor import Executor, Grant, Operation

    grant = Grant(resources=["input-A"], steps=["commit-import"])
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    doubled = 0
    try:
        for _trial in range(300):
            executor = Executor()  # the in-memory journal
            ran: list[int] = []
            start = threading.Barrier(8)

            def call(
                executor: Executor = executor,
                ran: list[int] = ran,
                start: threading.Barrier = start,
            ) -> None:
                start.wait()
                executor.run(
                    Operation("p1", "commit-import", "input-A", {"rows": 3}),
                    grant,
                    lambda _operation: ran.append(1) or {"imported": 3},
                )

            threads = [threading.Thread(target=call) for _ in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            doubled += len(ran) > 1
    finally:
        sys.setswitchinterval(interval)
    assert doubled == 0
