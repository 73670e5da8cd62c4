"""The run log: every call that changed a run, as exact values, under the digests of
the rules it ran by.

Why a log and not a snapshot alone: the controller is deterministic, so the calls
that changed a run are a complete durable form of it. Replaying them rebuilds the
same state, and checking each replayed answer against the logged one (and the state
against the snapshots taken every ``snapshot_every`` calls) proves the rebuild right
instead of trusting it. A call that changed nothing (absorbed by a stopped run, or
refused by the input check before any transition) is not logged: replaying it would
change nothing either.

Owns: the log's header (format, the declaration's and the policy's digests, the
policy itself), the entries (each call's argument and answer in their exact form,
``controller.call_encoding``), and the storage: in memory and in one SQLite file (a
sibling of the executor's journal, say), with the checks that keep a restore from
rebuilding an older run (``verify``).
``controller.durable.dbos`` keeps the same log in DBOS's own database. Appends are
idempotent by position: writing the entry already at a position is a no-op when it is
equal and an error when it is not, so a run re-executed from its start (DBOS
recovers a workflow that way) re-derives its log and is checked against it.

Leaves to others: which calls are logged and the restore (``controller.durable.logged``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from replan.controller.call_encoding import (
    canonical,
    unplain,
)

#: The header's format tag: bump it if the encoding ever changes (v2: chained entries
#: and the witness file, in rollback-journal mode).
FORMAT = "replan.runlog.v2"
#: The chain value before the first entry.
GENESIS = hashlib.sha256(b"replan run log").hexdigest()


class RunLogError(ValueError):
    """A log that cannot be used as asked (diverged, corrupt, or of another kind)."""


class RestoreRefused(RunLogError):
    """The log was written under other rules: another declaration or policy."""


class Damage(NamedTuple):
    """Why a run log may be older or other than the one written, and the position of
    the first entry concerned (None when no one entry is: a lost header, a witness
    missing or of another log)."""

    why: str
    position: int | None = None


class Header(NamedTuple):
    """What a run log was written under."""

    declaration_digest: str
    policy_digest: str
    policy: Mapping[str, Any]  # the policy's normal form (``policy_to_dict``)
    snapshot_every: int

    def as_json(self) -> str:
        return canonical({"format": FORMAT, **self._asdict()})


class Entry(NamedTuple):
    """One logged call: its position (1, 2, ...), the event, and its argument and
    answer as canonical JSON (``encode_argument``, ``encode_answer``)."""

    position: int
    op: str
    argument: str
    answer: str


# ---- the log ------------------------------------------------------------------------


class RunLog(ABC):
    """One run's log: a header, the entries in order, and snapshots by position.

    Storage subclasses provide the five primitives below; the rules (one header,
    positions without gaps, idempotent appends) are kept here."""

    #: The number of entries, once read (the log has one writer: its run).
    _length: int | None = None

    # ---- storage --------------------------------------------------------------------

    @abstractmethod
    def _read_header(self) -> str | None: ...

    @abstractmethod
    def _write_header(self, text: str) -> None: ...

    @abstractmethod
    def _read_entries(self, after: int, upto: int | None) -> list[Entry]: ...

    @abstractmethod
    def _read_length(self) -> int:
        """The position of the last entry (0 when there is none)."""

    @abstractmethod
    def _write_entry(self, entry: Entry) -> None:
        """Store ``entry`` at its position, which is the next free one."""

    @abstractmethod
    def _read_snapshot_positions(self) -> list[int]: ...

    @abstractmethod
    def _read_snapshot(self, position: int) -> str | None: ...

    @abstractmethod
    def _write_snapshot(self, position: int, text: str) -> None: ...

    @abstractmethod
    def close(self) -> None:
        """Release the storage."""

    def verify(self) -> None:
        """Refuse (``RunLogError``, one line naming what is missing or differs) a log
        that may be older or other than the one written. Storage that cannot lose a
        committed entry (memory, a database server's transactions) has nothing to
        check; the SQLite log checks its chain and its witness."""
        return None

    # ---- the rules ------------------------------------------------------------------

    def header(self) -> Header | None:
        text = self._read_header()
        if text is None:
            return None
        try:
            document = json.loads(text)
            if not isinstance(document, dict) or document.pop("format", None) != FORMAT:
                raise RunLogError(f"run log of another format ({text[:60]})")
            return Header(**document)
        except (ValueError, KeyError, TypeError) as error:
            raise RunLogError(f"run log header unreadable ({error})") from None

    def begin(self, header: Header) -> None:
        """Write ``header`` into an empty log, or check a written one names the same
        declaration and policy (``RestoreRefused`` naming the digest that differs)."""
        written = self.header()
        if written is None:
            self._write_header(header.as_json())
            self._length = 0
            return
        refuse_other_rules(written, header)
        self.verify()

    def __len__(self) -> int:
        if self._length is None:
            self._length = self._read_length()
        return self._length

    def entries(self, after: int = 0, upto: int | None = None) -> list[Entry]:
        """The entries at positions ``after + 1`` to ``upto`` (the end if None)."""
        return self._read_entries(after, upto)

    def append(self, entry: Entry) -> None:
        """Store ``entry`` at the next position; an entry at a position already
        written must be equal to it (a re-executed run re-derives its log), else
        ``RunLogError`` names the position and both."""
        length = len(self)
        if entry.position == length + 1:
            self._write_entry(entry)
            self._length = entry.position
            return
        if not 1 <= entry.position <= length:
            raise RunLogError(f"run log: position {entry.position} appended after {length} entries")
        (written,) = self._read_entries(entry.position - 1, entry.position)
        if written != entry:
            raise RunLogError(
                f"the run diverges from its log at position {entry.position}: logged "
                f"{written.op}({written.argument}) -> {written.answer}, now "
                f"{entry.op}({entry.argument}) -> {entry.answer}"
            )

    def snapshot_positions(self) -> list[int]:
        """The positions a snapshot was stored at, in order."""
        return sorted(self._read_snapshot_positions())

    def snapshot_at(self, position: int) -> dict[str, Any]:
        """The run's ``snapshot()`` after ``position`` entries (one stored there)."""
        text = self._read_snapshot(position)
        if text is None:
            raise RunLogError(f"run log: no snapshot at position {position}")
        document: dict[str, Any] = unplain(json.loads(text))
        return document

    def snapshot(self, position: int, snapshot: Mapping[str, Any]) -> None:
        """Store the run's snapshot after ``position`` entries (idempotent, as
        ``append``)."""
        text = canonical(snapshot)
        written = self._read_snapshot(position)
        if written is None:
            self._write_snapshot(position, text)
        elif written != text:
            raise RunLogError(f"the run diverges from its snapshot at position {position}")

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *exception: object) -> None:
        self.close()


def refuse_other_rules(written: Header, current: Header) -> None:
    """``RestoreRefused`` in one line naming which digest differs, if any does."""
    for name, what in (("declaration_digest", "declaration"), ("policy_digest", "policy")):
        logged, now = getattr(written, name), getattr(current, name)
        if logged != now:
            raise RestoreRefused(
                f"restore refused: the {what} digest differs (the log was written under "
                f"{logged[:19]}, this process runs {now[:19]}); continuing would run the "
                "rest of the run under other rules"
            )


class InMemoryRunLog(RunLog):
    """A run log in this process's memory (tests, and runs that need no durability)."""

    def __init__(self) -> None:
        self._header: str | None = None
        self._entries: list[Entry] = []
        self._snapshot_texts: dict[int, str] = {}
        self._length: int | None = 0

    def _read_header(self) -> str | None:
        return self._header

    def _write_header(self, text: str) -> None:
        self._header = text

    def _read_entries(self, after: int, upto: int | None) -> list[Entry]:
        return self._entries[after:upto]

    def _read_length(self) -> int:
        return len(self._entries)

    def _write_entry(self, entry: Entry) -> None:
        self._entries.append(entry)

    def _read_snapshot_positions(self) -> list[int]:
        return list(self._snapshot_texts)

    def _read_snapshot(self, position: int) -> str | None:
        return self._snapshot_texts.get(position)

    def _write_snapshot(self, position: int, text: str) -> None:
        self._snapshot_texts[position] = text

    def close(self) -> None:
        """Nothing to release: the log lives as long as the object."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS replan_run_header (only INTEGER PRIMARY KEY CHECK (only = 1),
    header TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS replan_run_log (position INTEGER PRIMARY KEY, op TEXT NOT NULL,
    argument TEXT NOT NULL, answer TEXT NOT NULL, chain TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS replan_run_snapshots (position INTEGER PRIMARY KEY,
    snapshot TEXT NOT NULL)
"""
_LOG_COLUMNS = ["position", "op", "argument", "answer", "chain"]


def chain_after(previous: str, entry: Entry) -> str:
    """The chain value of ``entry`` after the chain value ``previous``."""
    return hashlib.sha256(json.dumps([previous, *entry]).encode()).hexdigest()


def _fsync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):
        handle = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)


class SqliteRunLog(RunLog):
    """A run log in one SQLite file, and its witness beside it.

    Why rollback-journal mode (``journal_mode=DELETE``, ``synchronous=FULL``): a
    committed entry is in the file when ``append`` returns. In WAL mode it lived in the
    ``-wal`` until a checkpoint, and a ``-wal`` lost after a kill made restore rebuild
    an older run, in which effects that had already run were allowed again.

    Why a chain and a witness: each entry stores ``chain = sha256(previous chain,
    entry)``, and after each commit the entry count and the chain's head are written to
    ``<file>.head`` (replaced atomically, fsynced). A file rolled back to an older copy
    (or with pages lost) has fewer entries than its witness names; an altered entry
    breaks the chain. ``verify`` (run by ``restore``) refuses both, naming the entries
    that are missing, and writes nothing. The witness may lag the file by one entry
    (a kill between the commit and the witness), never more.

    The tables are named ``replan_run_*``, so the file may be the executor's journal
    (once ``SqliteJournal.create`` has made it: a journal opens only a file it made);
    both keep the same rollback mode.
    """

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False) -> None:
        """Open (or create) the log at ``path``; ``read_only``: open an existing one
        and change nothing in it (``replan conform`` reads a user's log so)."""
        self.path = Path(path)
        self.witness = self.path.with_name(self.path.name + ".head")
        self._length: int | None = None
        #: (position, chain value) of the last entry, once read or written
        self._head: tuple[int, str] | None = None
        try:
            if read_only:
                uri = f"{self.path.resolve().as_uri()}?mode=ro"
                self._connection = sqlite3.connect(uri, uri=True, isolation_level=None)
                self._check_layout()
                return
            # any thread: an agent SDK may call the controller from a worker thread;
            # the run's calls (and so its writes) are serialized by LoggedController
            self._connection = sqlite3.connect(
                self.path, isolation_level=None, timeout=30.0, check_same_thread=False
            )
            self._connection.execute("PRAGMA journal_mode=DELETE")
            self._connection.execute("PRAGMA synchronous=FULL")
            with self._transaction():
                for statement in _SCHEMA.split(";"):
                    self._connection.execute(statement)
            self._check_layout()
        except sqlite3.Error as error:
            raise RunLogError(f"{self.path}: not a usable run log ({error})") from None

    def _check_layout(self) -> None:
        """Refuse tables of the same names laid out otherwise (another program's, or a
        log of an earlier format, whose entries carry no chain)."""
        for table, expected in (
            ("replan_run_header", ["only", "header"]),
            ("replan_run_log", _LOG_COLUMNS),
        ):
            columns = [row[1] for row in self._connection.execute(f"PRAGMA table_info({table})")]
            if columns != expected:
                self._connection.close()
                raise RunLogError(
                    f"{self.path}: its {table} table is not a run log's of this format "
                    f"(columns {', '.join(columns)}; expected {', '.join(expected)})"
                )

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._connection.execute("ROLLBACK")
            raise
        self._connection.execute("COMMIT")

    def _read_header(self) -> str | None:
        row = self._connection.execute("SELECT header FROM replan_run_header").fetchone()
        return None if row is None else str(row[0])

    def _write_header(self, text: str) -> None:
        self._connection.execute("INSERT INTO replan_run_header VALUES (1, ?)", (text,))
        self._head = (0, GENESIS)
        self._write_witness(0, GENESIS, text)

    def _read_entries(self, after: int, upto: int | None) -> list[Entry]:
        rows = self._connection.execute(
            "SELECT position, op, argument, answer FROM replan_run_log "
            "WHERE position > ? AND position <= ? ORDER BY position",
            (after, 2**62 if upto is None else upto),
        )
        return [Entry(*row) for row in rows]

    def _read_length(self) -> int:
        (highest,) = self._connection.execute("SELECT MAX(position) FROM replan_run_log").fetchone()
        return int(highest or 0)

    def _last(self) -> tuple[int, str]:
        if self._head is None:
            row = self._connection.execute(
                "SELECT position, chain FROM replan_run_log ORDER BY position DESC LIMIT 1"
            ).fetchone()
            self._head = (0, GENESIS) if row is None else (int(row[0]), str(row[1]))
        return self._head

    def _write_entry(self, entry: Entry) -> None:
        position, previous = self._last()
        if entry.position != position + 1:
            raise RunLogError(f"run log: position {entry.position} written after {position}")
        chain = chain_after(previous, entry)
        self._connection.execute(
            "INSERT INTO replan_run_log VALUES (?, ?, ?, ?, ?)", (*entry, chain)
        )
        self._head = (entry.position, chain)
        header = self._read_header()
        self._write_witness(entry.position, chain, header or "")

    def _write_witness(self, entries: int, chain: str, header: str) -> None:
        """Replace the witness atomically: a draft written and fsynced, renamed over
        it, the directory fsynced (so the rename survives a power loss too)."""
        text = canonical(
            {
                "format": FORMAT,
                "entries": entries,
                "chain": chain,
                "header": hashlib.sha256(header.encode()).hexdigest(),
            }
        )
        draft = self.witness.with_name(f".{self.witness.name}.{secrets.token_hex(4)}")
        try:
            with draft.open("w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(draft, self.witness)
        except OSError as error:
            draft.unlink(missing_ok=True)
            raise RunLogError(f"{self.witness}: cannot write the witness ({error})") from None
        _fsync_directory(self.witness.parent)

    def _read_snapshot_positions(self) -> list[int]:
        rows = self._connection.execute("SELECT position FROM replan_run_snapshots")
        return [int(row[0]) for row in rows]

    def _read_snapshot(self, position: int) -> str | None:
        row = self._connection.execute(
            "SELECT snapshot FROM replan_run_snapshots WHERE position = ?", (position,)
        ).fetchone()
        return None if row is None else str(row[0])

    def _write_snapshot(self, position: int, text: str) -> None:
        self._connection.execute("INSERT INTO replan_run_snapshots VALUES (?, ?)", (position, text))

    def copy_from(self, source: RunLog) -> None:
        """Write ``source``'s header, entries (chained) and snapshots into this empty
        log in one transaction, then its witness: a log moved between storages whole
        (``replan bench`` builds large logs so)."""
        header = source._read_header()
        if header is None or self._read_header() is not None:
            raise RunLogError(f"{self.path}: copy a log with a header into an empty log")
        rows, chain = [], GENESIS
        for entry in source.entries():
            chain = chain_after(chain, entry)
            rows.append((*entry, chain))
        connection = self._connection
        with self._transaction():
            connection.execute("INSERT INTO replan_run_header VALUES (1, ?)", (header,))
            connection.executemany("INSERT INTO replan_run_log VALUES (?, ?, ?, ?, ?)", rows)
            connection.executemany(
                "INSERT INTO replan_run_snapshots VALUES (?, ?)",
                [(at, source._read_snapshot(at)) for at in source.snapshot_positions()],
            )
        self._head = (len(rows), chain)
        self._length = len(rows)
        self._write_witness(len(rows), chain, header)

    # ---- the checks a restore runs first ------------------------------------------------

    def verify(self) -> None:
        """``RunLogError`` naming the ``damage``, if any. Reads only."""
        found = self.damage()
        if found is not None:
            raise RunLogError(f"{self.path}: {found.why}; refusing to restore")

    def damage(self) -> Damage | None:
        """Why the file may be older or other than the one written, or None: every
        entry's chain value, positions without gaps, and the count and head the
        witness names (see the class docstring)."""
        header = self._read_header()
        witness = self._read_witness()
        if header is None:
            if witness is None:
                return None  # an empty log: nothing was written
            return Damage(
                f"the run log lost its header (its witness names {witness['entries']} entries)"
            )
        chains, altered = self._chain()
        if altered is not None:
            return altered
        if witness is None:
            return Damage(
                f"{self.witness.name} is missing: the run log's entries cannot be counted, "
                "so it may be an older copy"
            )
        if witness["header"] != hashlib.sha256(header.encode()).hexdigest():
            return Damage(f"{self.witness.name} is the witness of another run log")
        held, named = len(chains) - 1, witness["entries"]
        if held < named:
            return Damage(
                f"entries #{len(chains)} to #{named} are missing (the file holds {held}, its "
                f"witness names {named}): an older copy of the run log, or lost pages",
                len(chains),  # the first missing
            )
        if held > named + 1:
            return Damage(
                f"its witness names {named} entries, the file holds {held}: the witness is "
                "older than the log (replaced?)"
            )
        if chains[named] != witness["chain"]:
            return Damage(
                f"entries #1 to #{named} are not the ones written (their chain differs from "
                "the witness's)"
            )
        return None

    def _chain(self) -> tuple[list[str], Damage | None]:
        """The chain values after 0, 1, ... entries, up to the first missing position
        or altered entry (its ``Damage``)."""
        chains = [GENESIS]
        rows = self._connection.execute(
            "SELECT position, op, argument, answer, chain FROM replan_run_log ORDER BY position"
        )
        for position, op, argument, answer, stored in rows:
            if position != len(chains):
                return chains, Damage(
                    f"the entry at position {len(chains)} is missing (the next is #{position})",
                    len(chains),
                )
            chain = chain_after(chains[-1], Entry(position, op, argument, answer))
            if stored != chain:
                return chains, Damage(
                    f"the entry at position {position} does not match its chain value (altered)",
                    position,
                )
            chains.append(chain)
        return chains, None

    def _read_witness(self) -> dict[str, Any] | None:
        try:
            text = self.witness.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeError) as error:
            raise RunLogError(f"{self.witness}: cannot read the witness ({error})") from None
        try:
            document = json.loads(text)
            entries, chain, header = document["entries"], document["chain"], document["header"]
            if document.get("format") != FORMAT or type(entries) is not int or entries < 0:
                raise ValueError(f"format {document.get('format')!r}, entries {entries!r}")
            if not (isinstance(chain, str) and isinstance(header, str)):
                raise ValueError("chain and header must be strings")
        except (ValueError, KeyError, TypeError) as error:
            raise RunLogError(f"{self.witness}: not a run log's witness ({error})") from None
        witness: dict[str, Any] = document
        return witness

    def close(self) -> None:
        self._connection.close()
