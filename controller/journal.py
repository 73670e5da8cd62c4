"""Where the executor keeps its receipts: an append-only journal behind a small interface.

Owns: the record types (``Intent``, ``Receipt``, ``Entry``), the canonical JSON
encoding every digest and stored result goes through, the journal interface, and two
journals: ``InMemoryJournal`` here (the default for tests and the benchmark; it lives
as long as the process) and ``SqliteJournal`` in ``controller.sqlite_journal`` (one
SQLite file that survives a killed process and fails closed).

Leaves to ``controller.executor``: *when* to write. The executor writes an intent
record before it runs an effect and a completion record (the receipt) after the effect
returned, so after any crash a journal says one of three things about a plan id:
nothing (the effect never started), an intent without completion (the effect may or
may not have happened: **in doubt**), or a receipt (it happened, here is its result).

Why append-only: a record, once committed, is never updated or deleted, so "nothing
recorded is lost" is a property of the storage, not of careful code. The state of a
plan id is the fold of its records in order (``fold``): an intent opens an entry, a
completion closes it with a receipt, an abandon record (the owner's word that an
in-doubt effect did not happen, with a reason) clears it so the operation may run
again. An approval record (the owner approved the call's content before it ran) opens
no entry.

Why every record of a plan id carries the same digest (``bound``): the first record
binds the call's content. An approved call cannot then run other arguments, and a
call retried after its in-doubt attempt was abandoned runs what was abandoned, not
something else under its id. The journal refuses a write that would break that.
"""

from __future__ import annotations

import json
import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from enum import StrEnum
from types import TracebackType
from typing import Any, NamedTuple, TypeAlias

from replan.controller.records import InvalidInput

#: What an operation's arguments and an effect's result may be: what JSON carries.
JSONValue: TypeAlias = (
    bool | int | float | str | Sequence["JSONValue"] | Mapping[str, "JSONValue"] | None
)


def _where(root: str, path: tuple[object, ...]) -> str:
    return root + "".join(f"[{step!r}]" for step in path)


def check_json(value: object, root: str, path: tuple[object, ...] = ()) -> None:
    """Raise ``InvalidInput`` naming the path of the first thing JSON cannot carry.
    (Exact-type tests first: this runs on every operation and every result.)"""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return
    if kind is dict or kind is list or kind is tuple:
        pairs = value.items() if kind is dict else enumerate(value)  # type: ignore[attr-defined, arg-type]
        for key, item in pairs:
            if kind is dict and type(key) is not str:
                raise InvalidInput(
                    f"{_where(root, path)}: key {key!r} is not a string "
                    "(JSON object keys are strings)"
                )
            item_kind = type(item)
            if not (item_kind is str or item_kind is int or item_kind is bool or item is None):
                check_json(item, root, (*path, key))
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(
                f"{_where(root, path)}: {value!r} is not JSON (only finite numbers are)"
            )
        return
    if isinstance(value, str | int):  # subclasses (a StrEnum, an IntEnum) encode as values
        return
    raise InvalidInput(
        f"{_where(root, path)}: {value!r} ({kind.__name__}) is not JSON "
        "(use None, bool, int, float, str, list or dict with str keys)"
    )


_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical_json(value: object, where: str = "value") -> str:
    """The one encoding of ``value`` (sorted keys, no spaces, UTF-8 text): equal
    values encode equally, so a digest over it binds content, not spelling. Raises
    ``InvalidInput`` naming the path (``where``) of anything JSON cannot carry."""
    check_json(value, where)
    return _CANONICAL.encode(value)


class RecordKind(StrEnum):
    """The four records a journal holds."""

    INTENT = "intent"
    COMPLETION = "completion"
    ABANDON = "abandon"
    APPROVAL = "approval"


class Record(NamedTuple):
    """One line of the journal as stored. ``body`` is canonical JSON: the operation
    for an intent, the effect's result for a completion, ``null`` for an abandon."""

    seq: int
    kind: RecordKind
    plan_id: str
    digest: str
    body: str
    time: float


#: The body of an abandon record written without a reason (and by earlier journals).
NO_REASON: str = "null"


def abandon_reason(body: str) -> str:
    """The owner's reason an abandon record holds ("" when none was given)."""
    try:
        document = json.loads(body)
    except ValueError:
        return ""
    reason = document.get("reason") if isinstance(document, dict) else None
    return reason if isinstance(reason, str) else ""


class Intent(NamedTuple):
    """Written before the effect runs: this operation (digest and canonical encoding)
    is about to take effect."""

    plan_id: str
    digest: str
    operation: str
    time: float


class Receipt(NamedTuple):
    """Written after the effect returned: the proof that the operation with this
    digest happened, what it returned, and when."""

    plan_id: str
    digest: str
    result: JSONValue
    time: float


class Entry(NamedTuple):
    """What a journal knows about one plan id: the intent that bound its digest and,
    once the effect returned, the receipt."""

    intent: Intent
    receipt: Receipt | None

    @property
    def in_doubt(self) -> bool:
        """An intent without a completion: the effect may or may not have happened."""
        return self.receipt is None


class JournalError(ValueError):
    """A journal that cannot be used (not ours, corrupt, unreadable), or a write that
    would break the journal's rules. The message names the file or plan id."""


def bound(records: Sequence[Record]) -> str | None:
    """The digest a plan id's records bind (its first record's; None: no record).
    ``JournalError`` when a later record carries another one."""
    if not records:
        return None
    digest = records[0].digest
    for record in records[1:]:
        if record.digest != digest:
            raise JournalError(
                f"plan id {record.plan_id!r}: {record.kind} #{record.seq} names digest "
                f"{record.digest[:12]}, the plan id is bound to {digest[:12]}"
            )
    return digest


def fold(records: Iterable[Record]) -> Entry | None:
    """The entry that a plan id's records, in order, leave (None: no live entry). An
    approval opens none; an abandon with no open intent is the owner settling a call
    that left no record (the controller completed it before its intent was written)."""
    entry: Entry | None = None
    for record in records:
        if record.kind is RecordKind.APPROVAL:
            if entry is not None:
                raise JournalError(
                    f"plan id {record.plan_id!r}: approval #{record.seq} after its intent"
                )
            continue
        if record.kind is RecordKind.ABANDON and entry is None:
            continue
        if record.kind is RecordKind.INTENT:
            if entry is not None:
                raise JournalError(
                    f"plan id {record.plan_id!r}: intent #{record.seq} over a live entry"
                )
            entry = Entry(Intent(record.plan_id, record.digest, record.body, record.time), None)
        elif entry is None or entry.receipt is not None or entry.intent.digest != record.digest:
            raise JournalError(
                f"plan id {record.plan_id!r}: {record.kind} #{record.seq} without a matching "
                "open intent"
            )
        elif record.kind is RecordKind.COMPLETION:
            try:
                result = json.loads(record.body)
            except ValueError:
                raise JournalError(
                    f"plan id {record.plan_id!r}: completion #{record.seq} holds no JSON result"
                ) from None
            receipt = Receipt(record.plan_id, record.digest, result, record.time)
            entry = Entry(entry.intent, receipt)
        else:
            entry = None
    return entry


class Journal(ABC):
    """The executor's durable memory: an append-only list of records, with the three
    writes the executor needs. Each write is atomic (one transaction in SQLite) and
    checks the journal's rules against the records already there, so two executors
    sharing a journal cannot both claim one plan id."""

    __slots__ = ()

    # ---- storage (what a concrete journal provides) --------------------------------

    @abstractmethod
    def records(self, plan_id: str | None = None) -> list[Record]:
        """Every record (or those of ``plan_id``), oldest first."""

    @abstractmethod
    def _append(self, kind: RecordKind, plan_id: str, digest: str, body: str, time: float) -> None:
        """Store one record (inside ``_atomic``)."""

    def _atomic(self) -> AbstractContextManager[None]:
        """A context in which a read followed by an append is atomic."""
        return nullcontext()

    @abstractmethod
    def close(self) -> None:
        """Release the storage."""

    def __enter__(self) -> Journal:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # ---- the executor's reads and writes -------------------------------------------

    def entry(self, plan_id: str) -> Entry | None:
        """The live entry of ``plan_id`` (None if it has none)."""
        return fold(self.records(plan_id))

    def knows(self, plan_id: str) -> bool:
        """Whether any record of ``plan_id`` is here (a request of it is a retry)."""
        return bool(self.records(plan_id))

    def bound(self, plan_id: str) -> str | None:
        """The digest ``plan_id``'s records bind (None: no record)."""
        return bound(self.records(plan_id))

    def approved(self, plan_id: str) -> str | None:
        """The digest the owner approved for ``plan_id`` (None: no approval record)."""
        found = [r.digest for r in self.records(plan_id) if r.kind is RecordKind.APPROVAL]
        return found[-1] if found else None

    def abandoned(self, plan_id: str) -> str | None:
        """The owner's reason, when ``plan_id``'s last record is an abandon (its last
        attempt did not happen, and it has not run since); else None."""
        records = self.records(plan_id)
        if records and records[-1].kind is RecordKind.ABANDON:
            return abandon_reason(records[-1].body)
        return None

    def _check_bound(self, plan_id: str, digest: str) -> None:
        binding = self.bound(plan_id)
        if binding is not None and binding != digest:
            raise JournalError(
                f"plan id {plan_id!r} is bound to digest {binding[:12]}; refusing a record "
                f"of digest {digest[:12]}"
            )

    def entries(self) -> list[Entry]:
        """Every live entry, in the order their plan ids first appeared."""
        by_plan: dict[str, list[Record]] = {}
        for record in self.records():
            by_plan.setdefault(record.plan_id, []).append(record)
        found = (fold(records) for records in by_plan.values())
        return [entry for entry in found if entry is not None]

    def claim(self, intent: Intent) -> Entry | None:
        """Atomically: if ``intent.plan_id`` has a live entry, return it and write
        nothing; otherwise write the intent record and return None (the caller may now
        run the effect)."""
        with self._atomic():
            existing = self.entry(intent.plan_id)
            if existing is None:
                self._check_bound(intent.plan_id, intent.digest)
                self._append(
                    RecordKind.INTENT, intent.plan_id, intent.digest, intent.operation, intent.time
                )
            return existing

    def complete(self, receipt: Receipt, body: str | None = None) -> None:
        """Write the completion record of an open intent with the same digest
        (``body``: the result's canonical JSON, when the caller has it already)."""
        if body is None:
            body = canonical_json(receipt.result, "result")
        with self._atomic():
            entry = self.entry(receipt.plan_id)
            if entry is None or entry.receipt is not None or entry.intent.digest != receipt.digest:
                raise JournalError(
                    f"plan id {receipt.plan_id!r}: no open intent with digest "
                    f"{receipt.digest[:12]} to complete"
                )
            self._append(RecordKind.COMPLETION, receipt.plan_id, receipt.digest, body, receipt.time)

    def abandon(
        self,
        plan_id: str,
        time: float,
        reason: str = "",
        unrecorded: Intent | None = None,
    ) -> Intent:
        """Write that the open intent of ``plan_id`` never took effect (the owner
        checked, for ``reason``); the plan id is free again, bound to the same content.
        Returns the abandoned intent. ``unrecorded``: the operation of a call with no
        record at all (the controller completed it, its intent was never written),
        which the owner names to abandon it."""
        body = canonical_json({"reason": reason}, "reason")
        with self._atomic():
            records = self.records(plan_id)
            entry = fold(records)
            if entry is None and not records and unrecorded is not None:
                self._append(RecordKind.ABANDON, plan_id, unrecorded.digest, body, time)
                return unrecorded
            if entry is None or entry.receipt is not None:
                raise JournalError(f"plan id {plan_id!r}: no open intent to abandon")
            self._append(RecordKind.ABANDON, plan_id, entry.intent.digest, body, time)
            return entry.intent

    def approve(self, intent: Intent) -> None:
        """Write the owner's approval of the call ``intent`` describes (its digest and
        canonical content), before any intent of it: it binds the call id to that
        content. Refused (``JournalError``) once the call started or under other
        content; approving the same content again is one more record."""
        with self._atomic():
            if self.entry(intent.plan_id) is not None:
                raise JournalError(
                    f"plan id {intent.plan_id!r}: already started, too late to approve"
                )
            self._check_bound(intent.plan_id, intent.digest)
            self._append(
                RecordKind.APPROVAL, intent.plan_id, intent.digest, intent.operation, intent.time
            )


class InMemoryJournal(Journal):
    """A journal in this process's memory: as strict as the SQLite one, gone with the
    process. The default for tests and the benchmark."""

    __slots__ = ("_by_plan", "_lock", "_records")

    def __init__(self) -> None:
        self._records: list[Record] = []
        self._by_plan: dict[str, list[Record]] = {}
        #: Threads sharing the journal claim one at a time (a claim reads, then writes).
        self._lock = threading.RLock()

    def _atomic(self) -> AbstractContextManager[Any]:
        return self._lock

    def records(self, plan_id: str | None = None) -> list[Record]:
        if plan_id is None:
            return list(self._records)
        return list(self._by_plan.get(plan_id, ()))

    def entry(self, plan_id: str) -> Entry | None:
        return fold(self._by_plan.get(plan_id, ()))

    def close(self) -> None:
        """Nothing to release: the records stay readable (a "crash" in the campaign
        drops the executor, never the journal)."""

    def _append(self, kind: RecordKind, plan_id: str, digest: str, body: str, time: float) -> None:
        record = Record(len(self._records) + 1, kind, plan_id, digest, body, time)
        self._records.append(record)
        self._by_plan.setdefault(plan_id, []).append(record)
