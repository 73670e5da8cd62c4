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
policy itself), the exact encoding of each call's argument and answer, and the
storage: in memory and in one SQLite file (a sibling of the executor's journal, say).
``controller.durable.dbos`` keeps the same log in DBOS's own database. Appends are
idempotent by position: writing the entry already at a position is a no-op when it is
equal and an error when it is not, so a run re-executed from its start (DBOS
recovers a workflow that way) re-derives its log and is checked against it.

Leaves to others: which calls are logged and the restore (``controller.durable.logged``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import typing
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import replan.controller.records as _records_module
from replan.controller.records import RECORD_KINDS, EvidenceState
from replan.controller.run import shown
from replan.controller.sqlite_journal import APPLICATION_ID as JOURNAL_APPLICATION_ID

#: The header's format tag: bump it if the encoding ever changes.
FORMAT = "replan.runlog.v1"

#: An int with more bits than this is stored as hex text (``json`` refuses to print
#: an int of more than ~4,300 digits, and a plan's revision may be any int).
_LARGEST_PLAIN_BITS = 4_000


class RunLogError(ValueError):
    """A log that cannot be used as asked (diverged, corrupt, or of another kind)."""


class RestoreRefused(RunLogError):
    """The log was written under other rules: another declaration or policy."""


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


def canonical(value: object) -> str:
    return json.dumps(_plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _plain(value: object) -> object:
    """``value`` with every int too long for ``json`` as ``{"int": hex}`` (a snapshot
    holds a plan's revision, which may be any int)."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if type(value) is int and int.bit_length(value) > _LARGEST_PLAIN_BITS:
        return {"int": hex(value)}
    return value


def _unplain(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"int"} and isinstance(value["int"], str):
            return int(value["int"], 16)
        return {key: _unplain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_unplain(item) for item in value]
    return value


#: An entry's argument: its record's fields in the record's order (fixed by the
#: record type, so the text is canonical without sorting: this runs on every call).
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
#: The answers an event gives, encoded once.
_ANSWERS: dict[object, str] = {None: "null", True: "true", False: "false"}


# ---- exact values -------------------------------------------------------------------

_RECORDS: dict[str, type] = {name: getattr(_records_module, name) for name in RECORD_KINDS}


#: Each record's fields' exact types, read from the records' own annotations: a value
#: of any other type (a subclass included) makes the record malformed.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    name: tuple(typing.get_type_hints(record).values()) for name, record in _RECORDS.items()
}


def _encode_field(value: object) -> object:
    if isinstance(value, EvidenceState):
        return str.__str__(value)
    if isinstance(value, int) and int.bit_length(value) > _LARGEST_PLAIN_BITS:
        return {"int": hex(value)}
    return value


def _decode_field(kind: str, value: object) -> object:
    if isinstance(value, dict):
        return int(value["int"], 16)
    return EvidenceState(str(value)) if kind == "evidence" else value


def encode_argument(parameter_type: str | None, argument: object) -> str:
    """The argument of a call whose parameter has ``parameter_type`` (the
    declaration's interface: a record name, ``str``, or None), exactly: a record
    field by field, with its types. An argument that is not exactly of its type (a
    malformed plan, a plan id that is no string) is logged as ``{"malformed": ...}``
    and replayed as ``None``: the guards answer every malformed value alike, and the
    logged answer checks that they did."""
    if parameter_type is None:
        return "null"
    if parameter_type == "str":
        return _COMPACT(argument if type(argument) is str else {"malformed": shown(argument)})
    record = _RECORDS[parameter_type]
    if type(argument) is record:
        values: tuple[object, ...] = tuple(tuple.__iter__(argument))  # type: ignore[arg-type]
        exact = _FIELD_TYPES[parameter_type]
        if all(type(value) is kind for value, kind in zip(values, exact, strict=True)):
            names: tuple[str, ...] = record._fields  # type: ignore[attr-defined]
            return _COMPACT(
                {name: _encode_field(value) for name, value in zip(names, values, strict=True)}
            )
    return _COMPACT({"malformed": shown(argument)})


def decode_argument(parameter_type: str | None, text: str) -> object:
    """The value ``encode_argument`` wrote (``None`` for a malformed one)."""
    value = json.loads(text)
    if parameter_type is None or (isinstance(value, dict) and "malformed" in value):
        return None
    if parameter_type == "str":
        return value
    kinds = RECORD_KINDS[parameter_type]
    return _RECORDS[parameter_type](
        *(_decode_field(kind, value[name]) for name, kind in kinds.items())
    )


def encode_answer(answer: object) -> str:
    """An event's answer (a bool, an ``ExecuteResult``, or None) as canonical JSON."""
    if answer is None or type(answer) is bool:
        return _ANSWERS[answer]
    return _COMPACT(str(answer))


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
        document: dict[str, Any] = _unplain(json.loads(text))
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
    argument TEXT NOT NULL, answer TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS replan_run_snapshots (position INTEGER PRIMARY KEY,
    snapshot TEXT NOT NULL)
"""


class SqliteRunLog(RunLog):
    """A run log in one SQLite file (WAL, ``synchronous=FULL``: an entry is on disk
    when ``append`` returns, so a killed process loses no call it logged). The
    tables are named ``replan_run_*``, so the file may be the executor's journal
    (once ``SqliteJournal.create`` has made it: a journal opens only a file it made);
    in a journal's file the log keeps the journal's rollback mode, which the journal
    requires (``controller.sqlite_journal`` says why)."""

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False) -> None:
        """Open (or create) the log at ``path``; ``read_only``: open an existing one
        and change nothing in it (``replan conform`` reads a user's log so)."""
        self.path = Path(path)
        self._length: int | None = None
        try:
            if read_only:
                uri = f"{self.path.resolve().as_uri()}?mode=ro"
                self._connection = sqlite3.connect(uri, uri=True, isolation_level=None)
                self._check_layout()
                return
            self._connection = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
            (application_id,) = self._connection.execute("PRAGMA application_id").fetchone()
            if application_id != JOURNAL_APPLICATION_ID:  # a journal stays in rollback mode
                self._connection.execute("PRAGMA journal_mode=WAL")
            self._connection.execute("PRAGMA synchronous=FULL")
            with self._transaction():
                for statement in _SCHEMA.split(";"):
                    self._connection.execute(statement)
            self._check_layout()
        except sqlite3.Error as error:
            raise RunLogError(f"{self.path}: not a usable run log ({error})") from None

    def _check_layout(self) -> None:
        """Refuse tables of the same names laid out otherwise (another program's)."""
        columns = [
            row[1] for row in self._connection.execute("PRAGMA table_info(replan_run_header)")
        ]
        if columns != ["only", "header"]:
            self._connection.close()
            raise RunLogError(
                f"{self.path}: its replan_run_header table is not a run log's "
                f"(columns {', '.join(columns)})"
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

    def _read_entries(self, after: int, upto: int | None) -> list[Entry]:
        rows = self._connection.execute(
            "SELECT position, op, argument, answer FROM replan_run_log "
            "WHERE position > ? AND position <= ? ORDER BY position",
            (after, 2**62 if upto is None else upto),
        )
        return [Entry(*row) for row in rows]

    def _read_length(self) -> int:
        row = self._connection.execute("SELECT MAX(position) FROM replan_run_log").fetchone()
        return int(row[0] or 0)

    def _write_entry(self, entry: Entry) -> None:
        self._connection.execute("INSERT INTO replan_run_log VALUES (?, ?, ?, ?)", entry)

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

    def close(self) -> None:
        self._connection.close()
