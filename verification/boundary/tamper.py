"""What may be done to a stopped run's files before its restore: each must be refused.

Owns the tampering the campaign applies between a crash and a restore, one kind at a
time, each a damage a disk, a backup or a person can do (CONTRACT.md,
"restore-is-exact-or-refuses"): a run log rolled back to an older copy, replaced by
another log of the same length, with an entry altered or missing, its header lost, a
snapshot altered; its witness dropped, stale or another log's; a log of another
declaration; a new, empty log in its place; a journal record altered in any field, its
last record or a middle one dropped. ``tamper`` reports whether the files changed at
all (a journal with no record has nothing to edit); a change must be refused, in one
line, with the files left as they were.

Damage to the run log (``LOG_KINDS``) is also refused by the log's own ``verify``,
alone: a log restored beside another journal, or read by ``replan conform``, has only
its own checks (the journal checks itself whenever it opens). One kind is
not damage: ``witness-one-behind`` is what a kill between a log's commit and its
witness leaves (``KEPT``), and must be restored exactly, never refused.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import NamedTuple

from replan.controller.durable.log import GENESIS, SqliteRunLog, chain_after
from replan.controller.durable.log import Entry as LogEntry


class RunFiles(NamedTuple):
    """A run's files, and the log as it was when the run began."""

    journal: Path
    log: Path
    first_log: bytes

    @property
    def witness(self) -> Path:
        return self.log.with_name(self.log.name + ".head")


#: How each journal edit changes a record (one field each; ``_EDITED_RECORD``).
JOURNAL_EDITS = {
    "edit-journal": "body = body || ' '",
    "edit-journal-time": "time = time + 1",
    "edit-journal-digest": (
        "digest = CASE substr(digest, 1, 1) WHEN 'f' THEN 'e' ELSE 'f' END || substr(digest, 2)"
    ),
    "edit-journal-plan": "plan_id = plan_id || 'x'",
    "edit-journal-kind": "kind = CASE kind WHEN 'approval' THEN 'intent' ELSE 'approval' END",
}
#: Changes made by one SQL statement on the log (changed rows: the files changed).
_LOG_EDITS = {
    # the first charge's time: an argument whose change no replayed answer shows
    "edit-log-entry": (
        "UPDATE replan_run_log SET argument = replace(argument, '\"elapsed_ms\":', "
        "'\"elapsed_ms\":1') WHERE position = (SELECT MIN(position) FROM replan_run_log "
        "WHERE op = 'charge')"
    ),
    "drop-log-entry": "DELETE FROM replan_run_log WHERE position = 1",
    "lost-header": "DELETE FROM replan_run_header",
}
_JOURNAL_DROPS = {
    "drop-journal-record": "DELETE FROM records WHERE seq = (SELECT MAX(seq) FROM records)",
    "journal-missing-record": (
        "DELETE FROM records WHERE seq = 1 AND (SELECT COUNT(*) FROM records) > 1"
    ),
}
KINDS: tuple[str, ...] = (
    "rollback-log",
    "drop-witness",
    *JOURNAL_EDITS,
    "foreign-log",
    *_JOURNAL_DROPS,
    *_LOG_EDITS,
    "swap-log",
    "stale-witness",
    "witness-one-behind",
    "foreign-witness",
    "edit-unwitnessed-entry",
    "edit-snapshot",
    "empty-log",
)
#: The state a kill leaves between a log entry's commit and its witness: restored.
KEPT = frozenset({"witness-one-behind"})
#: The damage the run log's own ``verify`` refuses (a foreign header and an altered
#: snapshot are the restore's to refuse: neither is in the chain).
LOG_KINDS = frozenset(
    {
        "rollback-log",
        "drop-witness",
        *_LOG_EDITS,
        "swap-log",
        "stale-witness",
        "foreign-witness",
        "edit-unwitnessed-entry",
    }
)


def _execute(path: Path, statement: str) -> bool:
    with sqlite3.connect(path) as connection:
        return bool(connection.execute(statement).rowcount)


#: The record a journal edit changes: the first of a plan id with no other record (an
#: approval or an intent alone), where only the chain can tell; else the first.
_EDITED_RECORD = (
    "seq = COALESCE((SELECT MIN(seq) FROM records WHERE plan_id IN (SELECT plan_id FROM "
    "records GROUP BY plan_id HAVING COUNT(*) = 1)), 1)"
)


def tamper(files: RunFiles, kind: str) -> bool:
    """Do ``kind`` to the closed files; False when it would change nothing."""
    if kind in JOURNAL_EDITS:
        return _execute(
            files.journal, f"UPDATE records SET {JOURNAL_EDITS[kind]} WHERE {_EDITED_RECORD}"
        )
    if kind in _JOURNAL_DROPS:
        return _execute(files.journal, _JOURNAL_DROPS[kind])
    if kind in _LOG_EDITS:
        return _execute(files.log, _LOG_EDITS[kind])
    if kind == "rollback-log":
        if files.log.read_bytes() == files.first_log:
            return False
        files.log.write_bytes(files.first_log)
        return True
    if kind == "drop-witness":
        files.witness.unlink(missing_ok=True)
        return True
    if kind == "stale-witness":
        return _witness_behind(files, 2)
    if kind == "witness-one-behind":
        return _witness_behind(files, 1)
    if kind == "edit-unwitnessed-entry":
        return _witness_behind(files, 1) and _execute(
            files.log,
            "UPDATE replan_run_log SET answer = answer || ' ' "
            "WHERE position = (SELECT MAX(position) FROM replan_run_log)",
        )
    if kind == "foreign-witness":
        document = json.loads(files.witness.read_text())
        document["header"] = hashlib.sha256(b"another run log").hexdigest()
        files.witness.write_text(json.dumps(document))
        return True
    if kind == "foreign-log":
        return _foreign_log(files)
    if kind == "swap-log":
        return _swap_last_entry(files.log)
    if kind == "edit-snapshot":
        return _edit_newest_snapshot(files.log)
    if kind == "empty-log":
        return _empty_log(files)
    raise ValueError(f"unknown tampering {kind!r}")


def _witness_behind(files: RunFiles, behind: int) -> bool:
    """The witness as it was ``behind`` entries ago (False when the log holds fewer)."""
    with sqlite3.connect(files.log) as connection:
        rows = connection.execute(
            "SELECT position, chain FROM replan_run_log ORDER BY position DESC LIMIT ?",
            (behind + 1,),
        ).fetchall()
    if len(rows) < behind:
        return False
    document = json.loads(files.witness.read_text())
    entries = rows[0][0] - behind
    older = rows[behind][1] if len(rows) > behind else GENESIS
    document.update(entries=entries, chain=older)
    files.witness.write_text(json.dumps(document))
    return True


def _empty_log(files: RunFiles) -> bool:
    """The log replaced by a new one, never begun (no header, no witness): a restore
    has no run to rebuild."""
    files.witness.unlink(missing_ok=True)
    files.log.unlink()
    SqliteRunLog(files.log).close()
    return True


def _foreign_log(files: RunFiles) -> bool:
    """A log of another declaration, its witness made to match it."""
    with sqlite3.connect(files.log) as connection:
        (text,) = connection.execute("SELECT header FROM replan_run_header").fetchone()
        header = json.loads(text)
        header["declaration_digest"] = "sha256:" + "0" * 64
        other = json.dumps(header, sort_keys=True, separators=(",", ":"))
        connection.execute("UPDATE replan_run_header SET header = ?", (other,))
    document = json.loads(files.witness.read_text())
    document["header"] = hashlib.sha256(other.encode()).hexdigest()
    files.witness.write_text(json.dumps(document))
    return True


def _swap_last_entry(log: Path) -> bool:
    """Another log of the same length: the last entry's answer altered and its chain
    value recomputed, so only the witness can tell."""
    with sqlite3.connect(log) as connection:
        rows = connection.execute(
            "SELECT position, op, argument, answer, chain FROM replan_run_log ORDER BY position"
        ).fetchall()
        if not rows:
            return False
        previous = rows[-2][4] if len(rows) > 1 else GENESIS
        position, op, argument, answer, _ = rows[-1]
        altered = LogEntry(position, op, argument, answer + " ")
        connection.execute(
            "UPDATE replan_run_log SET answer = ?, chain = ? WHERE position = ?",
            (altered.answer, chain_after(previous, altered), position),
        )
    return True


def _edit_newest_snapshot(log: Path) -> bool:
    """The newest snapshot claims one proposal more than the run made."""
    with sqlite3.connect(log) as connection:
        row = connection.execute(
            "SELECT position, snapshot FROM replan_run_snapshots ORDER BY position DESC LIMIT 1"
        ).fetchone()
        if row is None:
            return False
        position, text = row
        snapshot = json.loads(text)
        snapshot["proposals"] = snapshot.get("proposals", 0) + 1
        connection.execute(
            "UPDATE replan_run_snapshots SET snapshot = ? WHERE position = ?",
            (json.dumps(snapshot, sort_keys=True, separators=(",", ":")), position),
        )
    return True


__all__ = ["JOURNAL_EDITS", "KEPT", "KINDS", "LOG_KINDS", "RunFiles", "tamper"]
