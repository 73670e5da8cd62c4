"""The SQLite journal fails closed: a journal that lost, or may have
lost, a receipt is refused at open, never silently taken for a shorter one, and a
refusal leaves every file byte for byte as it was. Faults after a real kill are in
``tests/test_crash.py``; these pin each rule on its own."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from replan.controller.durable.log import SqliteRunLog
from replan.controller.executor import Executor, Grant, Operation
from replan.controller.journal import JournalError, Record
from replan.controller.sqlite_journal import SqliteJournal

GRANT = Grant(resources=["input-A"], steps=["inspect-parser", "commit-import"])


def _journal_with_receipts(path: Path, count: int = 3) -> list[Record]:
    with SqliteJournal.create(path) as journal:
        executor = Executor(journal)
        for number in range(count):
            operation = Operation(f"p{number}", "commit-import", "input-A", {"rows": number})
            executor.run(operation, GRANT, lambda operation: {"done": operation.plan_id})
        return journal.records()


def _files(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.iterdir()}


def _refused_unchanged(path: Path, message: str) -> None:
    before = _files(path.parent)
    with pytest.raises(JournalError, match=message) as refused:
        SqliteJournal(path)
    assert str(path) in str(refused.value)
    assert _files(path.parent) == before


# ---- creating is not opening ------------------------------------------------------------


def test_a_missing_journal_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match=r"no journal there; SqliteJournal\.create"):
        SqliteJournal(tmp_path / "run.journal")
    assert list(tmp_path.iterdir()) == []


def test_create_refuses_a_file_that_is_already_there_and_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "run.journal"
    records = _journal_with_receipts(path)
    before = _files(tmp_path)
    with pytest.raises(JournalError, match="a file is already there"):
        SqliteJournal.create(path)
    assert _files(tmp_path) == before
    with SqliteJournal(path) as journal:
        assert journal.records() == records


def test_a_new_journal_gets_the_permissions_of_any_new_file(tmp_path: Path) -> None:
    """The draft a journal is made in is not a private temp file: the journal is
    created as SQLite would create it, under the process's umask."""
    SqliteJournal.create(tmp_path / "run.journal").close()
    plain = tmp_path / "plain"
    plain.touch()
    assert (tmp_path / "run.journal").stat().st_mode == plain.stat().st_mode


# ---- what is on disk after a commit ------------------------------------------------------


def test_committed_receipts_are_in_the_main_file_with_no_sidecar_left(tmp_path: Path) -> None:
    """Rollback mode: when a write returns, its record is in the journal file itself, so
    no -wal can be lost with it; a copy of the file alone holds every receipt."""
    path = tmp_path / "run.journal"
    records = _journal_with_receipts(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.journal"]
    copy = tmp_path / "copy" / "run.journal"
    copy.parent.mkdir()
    shutil.copyfile(path, copy)
    with SqliteJournal(copy) as journal:
        assert journal.records() == records


def test_the_run_log_sharing_the_journal_file_keeps_it_in_rollback_mode(tmp_path: Path) -> None:
    from replan.controller.durable.logged import LoggedController

    path = tmp_path / "run-42.journal"
    with SqliteJournal.create(path), SqliteRunLog(path) as log:
        LoggedController(log=log).cancel()
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    finally:
        connection.close()
    SqliteJournal(path).close()


# ---- a record lost or altered ------------------------------------------------------------


def _edit(path: Path, *statements: str) -> None:
    connection = sqlite3.connect(path)
    for statement in statements:
        connection.execute(statement)
    connection.commit()
    connection.close()


def test_a_record_altered_in_place_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.journal"
    _journal_with_receipts(path)
    _edit(path, """UPDATE records SET body = '{"done":"p9"}' WHERE seq = 4""")
    _refused_unchanged(path, r"record #4 does not match its chain value")


def test_a_record_missing_from_the_middle_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.journal"
    _journal_with_receipts(path)
    _edit(path, "DELETE FROM records WHERE seq = 3")
    _refused_unchanged(path, r"record #3 is missing")


def test_the_last_records_gone_are_refused(tmp_path: Path) -> None:
    """Deleting the newest records leaves a valid chain: the highest seq SQLite
    remembers having written shows the loss."""
    path = tmp_path / "run.journal"
    _journal_with_receipts(path)
    _edit(path, "DELETE FROM records WHERE seq >= 5")
    _refused_unchanged(path, r"records after #4 are gone \(record #6 was written\)")


def test_one_bit_flipped_anywhere_is_refused_unchanged_or_opens_with_the_same_records(
    tmp_path: Path,
) -> None:
    """300 single-bit flips over the whole file: each journal is refused with its
    bytes unchanged, or opens with exactly the records it held (the bit was in unused
    space). None opens with other records, none raises anything but JournalError."""
    original = tmp_path / "original.journal"
    records = _journal_with_receipts(original, count=12)
    data = original.read_bytes()
    outcomes = {"refused": 0, "same records": 0}
    chooser = random.Random(15)
    for trial in range(300):
        position = chooser.randrange(len(data) * 8)
        flipped = bytearray(data)
        flipped[position // 8] ^= 1 << (position % 8)
        folder = tmp_path / f"flip-{trial}"
        folder.mkdir()
        path = folder / "run.journal"
        path.write_bytes(bytes(flipped))
        try:
            with SqliteJournal(path) as journal:
                assert journal.records() == records, f"bit {position}"
            outcomes["same records"] += 1
        except JournalError:
            assert path.read_bytes() == bytes(flipped), f"bit {position}"
            assert [p.name for p in folder.iterdir()] == ["run.journal"]
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0 and outcomes["same records"] > 0, outcomes


# ---- a crash that left a transaction behind -----------------------------------------------

_CRASH_IN_A_TRANSACTION = textwrap.dedent(
    """
    import os, sys
    from replan.controller.journal import RecordKind
    from replan.controller.sqlite_journal import SqliteJournal
    journal = SqliteJournal(sys.argv[1])
    connection = journal._connection
    connection.execute("PRAGMA cache_size=1")  # pages reach the file before the commit
    connection.execute("BEGIN IMMEDIATE")
    for number in range(400):
        journal._append(RecordKind.INTENT, f"x{number}", "d" * 64, "x" * 500, 9.0)
    os._exit(9)
    """
)


def _crash_inside_a_transaction(path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CRASH_IN_A_TRANSACTION, str(path)],
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 9, done.stderr
    assert path.with_name(path.name + "-journal").stat().st_size > 0


def test_a_crashed_transaction_is_checked_on_a_copy_then_rolled_back(tmp_path: Path) -> None:
    """The crash left a hot -journal: a read-only check cannot read the file without
    rolling it back, so the check runs on a copy; then the open rolls the real file
    back, and the journal holds what was committed."""
    path = tmp_path / "run.journal"
    records = _journal_with_receipts(path)
    _crash_inside_a_transaction(path)
    with SqliteJournal(path) as journal:
        assert journal.records() == records
        Executor(journal).run(Operation("p9", "inspect-parser", "input-A"), GRANT, lambda o: 1)


def test_refusing_a_damaged_journal_after_a_crash_leaves_both_files_as_they_were(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.journal"
    _journal_with_receipts(path)
    _crash_inside_a_transaction(path)
    data = bytearray(path.read_bytes())
    data[28:32] = (10**6).to_bytes(4, "big")  # the header's page count: far past the file
    data[100:4096] = b"\xa5" * (4096 - 100)  # the schema page overwritten
    path.write_bytes(bytes(data))
    sidecar = path.with_name(path.name + "-journal")
    sidecar.write_bytes(sidecar.read_bytes()[:512])  # and the rollback journal cut short
    _refused_unchanged(path, "corrupt replan journal")


# ---- the file changes under a live journal --------------------------------------------------


@pytest.mark.parametrize("what", ["file", "directory"])
def test_a_journal_whose_file_is_deleted_mid_run_refuses_to_write(
    tmp_path: Path, what: str
) -> None:
    """SQLite would go on writing to the unlinked file, and every receipt after that
    would be lost: the journal refuses the write, so the effect never runs."""
    folder = tmp_path / "journals"
    folder.mkdir()
    journal = SqliteJournal.create(folder / "run.journal")
    executor = Executor(journal)
    executor.run(Operation("p1", "inspect-parser", "input-A"), GRANT, lambda o: 1)
    if what == "file":
        (folder / "run.journal").unlink()
    else:
        shutil.rmtree(folder)
    ran: list[str] = []
    with pytest.raises(JournalError, match="the journal file is gone"):
        executor.run(Operation("p2", "commit-import", "input-A"), GRANT, ran.append)
    assert ran == []
    journal.close()


def test_another_file_under_the_journals_name_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "run.journal"
    journal = SqliteJournal.create(path)
    path.rename(tmp_path / "moved.journal")
    SqliteJournal.create(path).close()
    with pytest.raises(JournalError, match="another file now has the journal's name"):
        Executor(journal).run(Operation("p1", "inspect-parser", "input-A"), GRANT, lambda o: 1)
    journal.close()


# ---- read-only ---------------------------------------------------------------------------

_OPEN_AS_ANOTHER_USER = textwrap.dedent(
    """
    import os, sys
    from replan.controller.journal import JournalError
    from replan.controller.sqlite_journal import SqliteJournal
    if sys.argv[2] == "as-nobody":  # after the imports: /root may be closed to nobody
        os.setgid(65534); os.setuid(65534)
    try:
        SqliteJournal(sys.argv[1]).close()
    except JournalError as error:
        print(error)
        raise SystemExit(2)
    """
)


def _open_without_write_permission(path: Path) -> subprocess.CompletedProcess[str]:
    """Open ``path`` as a user the permissions bind (root ignores them: the check
    runs as ``nobody`` when the tests run as root)."""
    who = "as-nobody" if os.geteuid() == 0 else "as-myself"
    command = [sys.executable, "-c", _OPEN_AS_ANOTHER_USER, str(path), who]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=60, cwd="/")


@pytest.mark.parametrize("what", ["file", "directory"])
def test_a_read_only_journal_is_refused_at_open_not_at_the_first_write(
    tmp_path: Path, what: str
) -> None:
    reachable = Path(tempfile.mkdtemp(prefix="replan-read-only-"))  # not under 0700 parents
    reachable.chmod(0o755)
    folder = reachable / "journals"
    folder.mkdir()
    path = folder / "run.journal"
    _journal_with_receipts(path)
    if what == "file":
        folder.chmod(0o777)
        path.chmod(0o444)
    else:
        path.chmod(0o666)
        folder.chmod(0o555)
    before = _files(folder)
    try:
        done = _open_without_write_permission(path)
        after = _files(folder)
    finally:
        folder.chmod(0o755)
        shutil.rmtree(reachable)
    assert done.returncode == 2, done.stderr
    assert f"{what if what == 'file' else 'its directory'} is read-only" in done.stdout
    assert after == before


def test_a_journal_that_cannot_be_reached_is_a_journal_error(tmp_path: Path) -> None:
    (tmp_path / "run.journal").touch()
    with pytest.raises(JournalError, match="cannot reach the file"):
        SqliteJournal(tmp_path / "run.journal" / "x")  # NotADirectory
    with pytest.raises(JournalError, match="cannot reach the file"):
        SqliteJournal(tmp_path / "a\x00b")
