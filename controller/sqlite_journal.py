"""The executor's journal on disk: one SQLite file that fails closed.

Owns: creating a journal (``SqliteJournal.create``, exclusive and atomic) apart from
opening one (``SqliteJournal(path)``, which refuses a missing, empty, foreign, corrupt,
read-only or incomplete file), the record chain that makes a lost or altered record
visible, and the checks that run before anything is written.

Why each choice (a journal that loses receipts silently would run their effects
again):

- **Create apart from open.** A missing or empty file is never silently a new journal:
  a deleted or truncated journal would otherwise open empty and every effect would
  run again. ``create`` builds the file under a draft name and links it into place
  (``os.link`` fails if a file is there), so two processes creating one journal see
  one of them create it and the other told "a file is already there", never a
  half-made file.
- **Rollback journal, not WAL.** A committed record is in the main file when the write
  returns (``journal_mode=DELETE``, ``synchronous=FULL``). In WAL mode it lives in
  the ``-wal`` file until a checkpoint, so a lost or damaged ``-wal`` lost receipts.
  The sidecar here (``-journal``) holds only the transaction in flight: losing it can
  at worst damage that transaction, which the integrity check and the chain refuse.
- **A chain over the records.** Each record stores ``chain = sha256(previous chain,
  its fields)`` and its ``seq`` is the previous one plus one; SQLite's
  ``sqlite_sequence`` remembers the highest ``seq`` ever written. At open the whole
  chain is recomputed: an altered record, a gap, or lost last records are refused.
- **Check read-only first.** Opening verifies the file through a read-only
  connection (or, when a crash left a transaction to roll back, on a copy of the file
  and its ``-journal``), so a journal that is refused is left byte for byte as it was.
- **Still the same file.** Before each write the path must still name the file that
  was opened: a journal whose file or directory was deleted mid-run refuses to write
  (SQLite would keep writing to the unlinked file, and those receipts would be lost).

What it does not guarantee: a disk that loses the whole file and its directory's
entry (then ``SqliteJournal(path)`` refuses, it cannot bring the receipts back), a
storage stack that acknowledges ``fsync`` without writing, and a deliberate edit that
recomputes the chain (the chain detects damage, it is not a signature).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import sqlite3
import stat
import struct
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import ClassVar, Final, Self

from replan.controller.journal import (
    Journal,
    JournalError,
    Record,
    RecordKind,
    bound,
    fold,
)

#: PRAGMA application_id of a replan journal ("RPLJ"): a file without it is not ours.
APPLICATION_ID: Final = 0x52504C4A
#: PRAGMA user_version: the layout this code reads. 2 added the chain and rollback mode
#: (a version-1 journal, WAL mode without a chain, is refused: no migration); 3 the
#: approval record and the abandon's reason (a version-2 journal is refused likewise:
#: its digests are of the earlier encoding, so none would match a call now).
SCHEMA_VERSION: Final = 3
#: The chain value before the first record.
GENESIS: Final = hashlib.sha256(b"replan journal").hexdigest()

_SQLITE_MAGIC = b"SQLite format 3\x00"
_SCHEMA = """
CREATE TABLE records (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    kind    TEXT NOT NULL CHECK (kind IN ('intent', 'completion', 'abandon', 'approval')),
    plan_id TEXT NOT NULL,
    digest  TEXT NOT NULL,
    body    TEXT NOT NULL,
    time    REAL NOT NULL,
    chain   TEXT NOT NULL
);
CREATE INDEX records_by_plan ON records (plan_id, seq);
"""
_COLUMNS = ("seq", "kind", "plan_id", "digest", "body", "time", "chain")
_FIELDS = "seq, kind, plan_id, digest, body, time"
#: The sidecar files SQLite leaves beside a database after a crash.
_SIDECARS = ("-journal", "-wal")
#: Header bytes 18 and 19 (write and read format): 1 rollback journal, 2 WAL.
_HEADER_FORMAT = {"DELETE": 1, "WAL": 2}


def chain_after(previous: str, record: Record) -> str:
    """The chain value of ``record`` after the chain value ``previous``: a digest of
    the predecessor and every field, exactly (the time through ``float.hex``)."""
    fields = [previous, record.seq, str(record.kind), record.plan_id, record.digest]
    fields += [record.body, float(record.time).hex()]
    return hashlib.sha256(json.dumps(fields).encode()).hexdigest()


#: What a read-only connection answers when a crash left a transaction to roll back.
_NEEDS_RECOVERY = ("SQLITE_READONLY_ROLLBACK", "SQLITE_READONLY_RECOVERY")


def sidecars(path: Path) -> list[Path]:
    """The files SQLite left beside the journal at ``path`` (after a crash, a
    ``-journal`` holding the transaction in flight)."""
    return [s for s in (path.with_name(path.name + x) for x in _SIDECARS) if s.exists()]


class _CrashLeftATransaction(Exception):
    """The file cannot be read without rolling back a crashed writer's transaction:
    check a copy instead (the rollback then happens in the copy, not the file)."""


class SqliteJournal(Journal):
    """A journal in one SQLite file: rollback journal, ``synchronous=FULL``, one
    transaction per record, so a record is in the file when the write returns and a
    killed process loses nothing it recorded.

    ``SqliteJournal.create(path)`` makes a new journal (refused if a file is there);
    ``SqliteJournal(path)`` opens one that ``create`` made. Every problem, at open or
    at a later write, is a ``JournalError`` naming the file, and a refused file is left
    as it was.
    """

    #: The SQLite journal mode this class writes and accepts (a benchmark baseline
    #: subclass measures WAL; the shipped journal never uses it).
    JOURNAL_MODE: ClassVar[str] = "DELETE"

    __slots__ = ("_connection", "_identity", "path")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Open the journal at ``path``: it must exist and pass every check of
        ``verify`` before the first byte is written."""
        self.path = Path(path)
        status = self._check_file()
        self.verify()
        try:
            self._connection = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
        except sqlite3.Error as error:
            raise JournalError(f"{self.path}: cannot open: {error}") from None
        try:
            (mode,) = self._connection.execute(
                f"PRAGMA journal_mode={self.JOURNAL_MODE}"
            ).fetchone()
            if str(mode).upper() != self.JOURNAL_MODE:
                raise JournalError(f"{self.path}: journal mode {mode}, not {self.JOURNAL_MODE}")
            self._connection.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as error:
            self._connection.close()
            raise JournalError(f"{self.path}: cannot open: {error}") from None
        except JournalError:
            self._connection.close()
            raise
        # the file checked: if another took its name since, the first write refuses
        self._identity = (status.st_dev, status.st_ino)

    @classmethod
    def create(cls, path: str | os.PathLike[str]) -> Self:
        """Create a new, empty journal at ``path`` and open it. Refused if anything is
        at ``path`` already (another process's new journal, an old one, an empty file):
        the file appears complete or not at all."""
        target = Path(path)
        if not target.parent.is_dir():
            raise JournalError(f"{target}: the directory {target.parent} does not exist")
        draft = target.with_name(f".{target.name}.{secrets.token_hex(8)}.draft")
        try:  # as SQLite creates a file: mode 0o666 under the umask, not a private temp
            os.close(os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except OSError as error:
            raise JournalError(
                f"{target}: cannot create a file in {target.parent}: {error.strerror}"
            ) from None
        try:
            cls._lay_out(draft)
            os.link(draft, target)
        except FileExistsError:
            raise JournalError(
                f"{target}: a file is already there; open an existing journal with "
                "SqliteJournal(path), or name a new file"
            ) from None
        except (OSError, sqlite3.Error) as error:
            raise JournalError(f"{target}: cannot create the journal: {error}") from None
        finally:
            draft.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # the new name is durable too
            directory = os.open(target.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        return cls(target)

    @classmethod
    def _lay_out(cls, draft: Path) -> None:
        connection = sqlite3.connect(draft, isolation_level=None)
        try:
            connection.execute(f"PRAGMA journal_mode={cls.JOURNAL_MODE}")
            connection.execute(f"PRAGMA application_id={APPLICATION_ID}")
            connection.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            connection.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    connection.execute(statement)
            connection.execute("COMMIT")
        finally:
            connection.close()
        with draft.open("rb+") as handle:
            os.fsync(handle.fileno())

    # ---- the checks at open ---------------------------------------------------------

    def _check_file(self) -> os.stat_result:
        """Refuse, with plain file I/O (SQLite never touches the file), what cannot be
        a journal this code wrote or cannot be written to. Returns the file's status."""
        path = self.path
        try:
            status = path.stat()
        except FileNotFoundError:
            raise JournalError(
                f"{path}: no journal there; SqliteJournal.create(path) makes a new one "
                "(a journal that was there and is gone is not silently replaced)"
            ) from None
        except (OSError, ValueError) as error:  # no permission, a NUL byte, a loop ...
            raise JournalError(f"{path}: cannot reach the file: {error}") from None
        if not stat.S_ISREG(status.st_mode):
            raise JournalError(f"{path}: not a file; name a journal file")
        try:
            with path.open("rb") as handle:
                header = handle.read(100)
        except OSError as error:
            raise JournalError(f"{path}: cannot read: {error.strerror}") from None
        if not header:
            raise JournalError(
                f"{path}: an empty file, not a journal (create never leaves one; "
                "a truncated journal lost its receipts); refusing to use it"
            )
        if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
            raise JournalError(
                f"{path}: not a replan journal (not a SQLite database); refusing to use it. "
                "Name a new file or the journal this executor wrote."
            )
        (version,) = struct.unpack(">I", header[60:64])
        (application_id,) = struct.unpack(">I", header[68:72])
        if application_id != APPLICATION_ID:
            raise JournalError(
                f"{path}: a SQLite database of another application (application_id "
                f"{application_id:#010x}, a replan journal has {APPLICATION_ID:#010x}); "
                "refusing to use it"
            )
        if version != SCHEMA_VERSION:
            raise JournalError(
                f"{path}: replan journal schema version {version}, this replan reads version "
                f"{SCHEMA_VERSION}; refusing to use it"
            )
        if header[18] != header[19] or header[18] != _HEADER_FORMAT[self.JOURNAL_MODE]:
            raise JournalError(
                f"{path}: the header's file format bytes are {header[18]}/{header[19]}, "
                f"a {self.JOURNAL_MODE}-mode journal has {_HEADER_FORMAT[self.JOURNAL_MODE]}; "
                "refusing to use it"
            )
        for needed, what in ((path, "the journal file"), (path.parent, "its directory")):
            if not os.access(needed, os.W_OK):
                raise JournalError(
                    f"{path}: {what} is read-only; a journal must be writable to record "
                    "receipts (refusing it now, before an effect runs)"
                )
        return status

    def verify(self) -> int:
        """Check the whole file without changing a byte: SQLite's integrity check, the
        layout, every record's chain value and ``seq``, that the last records are all
        there, and that each plan id's records fold. Returns the number of records;
        raises ``JournalError`` on the first problem."""
        try:
            return self._verify_at(self.path, read_only=True)
        except _CrashLeftATransaction:
            pass
        with tempfile.TemporaryDirectory(prefix="replan-journal-check-") as scratch:
            copy = Path(scratch) / self.path.name
            try:
                for sidecar in sidecars(self.path):
                    shutil.copyfile(sidecar, Path(scratch) / sidecar.name)
                shutil.copyfile(self.path, copy)
            except OSError as error:
                raise JournalError(f"{self.path}: cannot read: {error.strerror}") from None
            return self._verify_at(copy, read_only=False)  # the copy rolls the crash back

    def _verify_at(self, path: Path, *, read_only: bool) -> int:
        try:
            if read_only:
                uri = f"{path.resolve().as_uri()}?mode=ro"
                connection = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30.0)
            else:
                connection = sqlite3.connect(path, isolation_level=None)
        except sqlite3.Error as error:
            raise JournalError(f"{self.path}: cannot open: {error}") from None
        try:
            return _check_contents(connection)
        except (sqlite3.Error, ValueError, UnicodeError) as error:
            if getattr(error, "sqlite_errorname", "") in _NEEDS_RECOVERY and read_only:
                raise _CrashLeftATransaction from None
            raise JournalError(
                f"{self.path}: corrupt replan journal ({' '.join(str(error).split())}); "
                "refusing to use it"
            ) from None
        finally:
            connection.close()

    # ---- reads and writes -------------------------------------------------------------

    def _still_the_file(self) -> None:
        try:
            status = os.stat(self.path)
        except OSError as error:
            raise JournalError(
                f"{self.path}: the journal file is gone ({error.strerror}); refusing to "
                "write: a receipt written now would be lost"
            ) from None
        if (status.st_dev, status.st_ino) != self._identity:
            raise JournalError(
                f"{self.path}: another file now has the journal's name; refusing to write "
                "to the file that was opened"
            )

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._still_the_file()
        connection = self._connection
        try:
            connection.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            raise JournalError(f"{self.path}: cannot write: {error}") from None
        try:
            yield
            connection.execute("COMMIT")
        except BaseException as error:
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
            if isinstance(error, sqlite3.Error):
                raise JournalError(f"{self.path}: cannot write: {error}") from None
            raise

    def _atomic(self) -> AbstractContextManager[None]:
        return self._transaction()

    def records(self, plan_id: str | None = None) -> list[Record]:
        query = f"SELECT {_FIELDS} FROM records"
        try:
            if plan_id is None:
                rows = self._connection.execute(f"{query} ORDER BY seq").fetchall()
            else:
                rows = self._connection.execute(
                    f"{query} WHERE plan_id = ? ORDER BY seq", (plan_id,)
                ).fetchall()
            return [Record(seq, RecordKind(kind), *rest) for seq, kind, *rest in rows]
        except (sqlite3.Error, ValueError, UnicodeError) as error:
            raise JournalError(f"{self.path}: cannot read the records: {error}") from None

    def _append(self, kind: RecordKind, plan_id: str, digest: str, body: str, time: float) -> None:
        connection = self._connection
        last = connection.execute(
            "SELECT seq, chain FROM records ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        last_seq, last_chain = last if last is not None else (0, GENESIS)
        if (highest := _highest_seq(connection)) != last_seq:
            raise JournalError(
                f"{self.path}: record #{highest} is gone (the last record "
                f"is #{last_seq}): receipts were lost; refusing to write"
            )
        record = Record(last_seq + 1, kind, plan_id, digest, body, time)
        connection.execute(
            "INSERT INTO records (seq, kind, plan_id, digest, body, time, chain) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (*record[:1], str(kind), *record[2:], chain_after(last_chain, record)),
        )

    def close(self) -> None:
        self._connection.close()


def _highest_seq(connection: sqlite3.Connection) -> int:
    row = connection.execute("SELECT seq FROM sqlite_sequence WHERE name = 'records'").fetchone()
    return 0 if row is None else int(row[0])


def _check_contents(connection: sqlite3.Connection) -> int:
    """Every check of ``SqliteJournal.verify`` on an open connection (the number of
    records, or ``JournalError`` without the path)."""
    problems = [str(row[0]) for row in connection.execute("PRAGMA integrity_check")]
    if problems != ["ok"]:
        raise JournalError(f"integrity check: {' '.join(problems[0].split())}")
    (application_id,) = connection.execute("PRAGMA application_id").fetchone()
    (version,) = connection.execute("PRAGMA user_version").fetchone()
    if (application_id, version) != (APPLICATION_ID, SCHEMA_VERSION):
        raise JournalError(f"application_id {application_id:#x}, user_version {version}")
    columns = tuple(row[1] for row in connection.execute("PRAGMA table_info(records)"))
    if columns != _COLUMNS:
        raise JournalError(f"no records table of the expected layout (columns {columns})")
    chain, count = GENESIS, 0
    by_plan: dict[str, list[Record]] = {}
    rows = connection.execute(f"SELECT {_FIELDS}, chain FROM records ORDER BY seq")
    for seq, kind, plan_id, digest, body, time, stored in rows:
        count += 1
        if seq != count:
            raise JournalError(f"record #{count} is missing (the next is #{seq})")
        if not all(isinstance(v, str) for v in (kind, plan_id, digest, body, stored)):
            raise JournalError(f"record #{seq} holds a value of the wrong type")
        record = Record(seq, RecordKind(kind), plan_id, digest, body, float(time))
        chain = chain_after(chain, record)
        if stored != chain:
            raise JournalError(f"record #{seq} does not match its chain value (altered)")
        by_plan.setdefault(plan_id, []).append(record)
    if (highest := _highest_seq(connection)) != count:
        raise JournalError(f"records after #{count} are gone (record #{highest} was written)")
    for records in by_plan.values():
        bound(records)
        fold(records)
    return count
