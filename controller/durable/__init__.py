"""Durable runs: a run survives a crash or a redeploy with nothing lost and nothing
run twice.

``LoggedController`` logs every call that changed its run (``controller.durable.log``:
in memory, in SQLite, or with ``controller.durable.dbos`` in DBOS's own database);
``restore`` rebuilds the run from its log and refuses one written under another
declaration or policy. ``controller.durable.dbos`` runs a run as a DBOS workflow, and
``controller.durable.agent`` a guarded Agent Framework agent as one (both need the
``dbos`` extra).
"""

from replan.controller.durable.log import (
    Entry,
    Header,
    InMemoryRunLog,
    RestoreRefused,
    RunLog,
    RunLogError,
    SqliteRunLog,
)
from replan.controller.durable.logged import SNAPSHOT_EVERY, LoggedController, header_for, restore

__all__ = [
    "SNAPSHOT_EVERY",
    "Entry",
    "Header",
    "InMemoryRunLog",
    "LoggedController",
    "RestoreRefused",
    "RunLog",
    "RunLogError",
    "SqliteRunLog",
    "header_for",
    "restore",
]
