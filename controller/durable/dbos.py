"""A replan run as a DBOS workflow: the run log, the executor's journal and the
effects' own writes in DBOS's database (SQLite by default, Postgres when
``DBOS_DATABASE_URL`` names one), so a crash or a redeploy loses nothing and runs
nothing twice.

How the pieces share the work, inside a workflow function of the user's
(``@DBOS.workflow()``) that drives a ``DurableRun``:

- **Inputs from the world** (the model's reply, an observation a tool or a person
  reports) go through ``DurableRun.input``: a DBOS step, so a recovered workflow reads
  the recorded value instead of asking again ("observations are recorded inputs").
- **Controller calls** are workflow code: deterministic, so when DBOS recovers the
  workflow by running it again from its start, the run is rebuilt call by call, and
  each call is checked against the run log (``LoggedController``: an append at a
  written position must be equal). A run that does not re-derive its log stops with
  ``RunLogError`` instead of going on differently.
- **Effects** run through the executor as one DBOS step each, named by the operation
  digest. A transactional effect writes in the same database, in the same transaction
  as the executor's intent and receipt: a crash before the commit leaves no trace of
  any of the three (the step runs again, once), a crash after it leaves the receipt,
  and the step run again finds it and does not call the effect. So the effect happens
  exactly once. An effect outside the database cannot join the transaction: a
  crash after it and before the commit rolls its intent back too, and the recovered
  step runs it again. Give such an effect an idempotency key (the operation digest,
  which names the step) or keep it in the database.

Leaves to others: what the run decides (``controller``), the log's rules
(``controller.durable.log``), the journal's (``controller.journal``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import sqlalchemy as sa
from dbos import DBOS

from replan.controller.durable.log import Entry, RunLog
from replan.controller.durable.logged import SNAPSHOT_EVERY, LoggedController
from replan.controller.executor import (
    AsyncEffect,
    Execution,
    Executor,
    Grant,
    Operation,
    Outcome,
    Performed,
    perform,
)
from replan.controller.journal import Journal, JSONValue, Record, RecordKind
from replan.controller.policy import Policy
from replan.controller.records import Approval, Observation, Plan, Usage

#: The environment variable naming a Postgres database (else SQLite in a file).
DATABASE_URL_VARIABLE = "DBOS_DATABASE_URL"

#: An effect in the run's database: it writes with the connection it is given,
#: inside the transaction that also holds the executor's intent and receipt.
TransactionalEffect = Callable[[sa.Connection, Operation], JSONValue]

#: Called at each boundary of a durable run (the crash harness kills there).
Boundary = Callable[[str], None]

_Result = TypeVar("_Result")

_METADATA = sa.MetaData()
_HEADERS = sa.Table(
    "replan_durable_header",
    _METADATA,
    sa.Column("run_id", sa.String, primary_key=True),
    sa.Column("header", sa.Text, nullable=False),
)
_LOG = sa.Table(
    "replan_durable_log",
    _METADATA,
    sa.Column("run_id", sa.String, primary_key=True),
    sa.Column("position", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("op", sa.String, nullable=False),
    sa.Column("argument", sa.Text, nullable=False),
    sa.Column("answer", sa.Text, nullable=False),
)
_SNAPSHOTS = sa.Table(
    "replan_durable_snapshots",
    _METADATA,
    sa.Column("run_id", sa.String, primary_key=True),
    sa.Column("position", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("snapshot", sa.Text, nullable=False),
)
_JOURNAL = sa.Table(
    "replan_durable_journal",
    _METADATA,
    sa.Column("sequence", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String, nullable=False, index=True),
    sa.Column("kind", sa.String, nullable=False),
    sa.Column("plan_id", sa.String, nullable=False),
    sa.Column("digest", sa.String, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("time", sa.Float, nullable=False),
)


def database_url(sqlite_path: str | os.PathLike[str]) -> str:
    """``DBOS_DATABASE_URL`` when set (a Postgres server, say), else a SQLite file."""
    return os.environ.get(DATABASE_URL_VARIABLE) or f"sqlite:///{Path(sqlite_path)}"


def configure(url: str, name: str = "replan") -> None:
    """Configure DBOS on ``url`` (its system tables and ours share the database).
    Call once per process, after the workflows are declared; then ``DBOS.launch()``."""
    DBOS(
        config={
            "name": name,
            "system_database_url": url,
            "log_level": "WARNING",
        }
    )


class Store:
    """replan's tables in the workflow's database (created if absent)."""

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        """``read_only``: an existing SQLite store, opened without a write
        (``replan conform`` reads a user's database so)."""
        self.url = url
        if read_only:
            if not url.startswith("sqlite:///"):
                raise ValueError("a read-only store is an SQLite file")
            location = Path(url.removeprefix("sqlite:///")).resolve().as_uri()
            self.engine = sa.create_engine(
                f"sqlite:///{location}?mode=ro&uri=true", connect_args={"uri": True}
            )
            return
        if url.startswith("sqlite"):
            self.engine = sa.create_engine(url, connect_args={"timeout": 30.0})
            sa.event.listen(self.engine, "connect", _durable_sqlite)
        else:
            self.engine = sa.create_engine(url, pool_pre_ping=True)
        _METADATA.create_all(self.engine)

    def run_ids(self) -> list[str]:
        """The runs the store holds a log of."""
        with self.engine.connect() as connection:
            return [str(row[0]) for row in connection.execute(sa.select(_HEADERS.c.run_id))]

    def close(self) -> None:
        self.engine.dispose()


def _durable_sqlite(connection: Any, _record: object) -> None:
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.close()


class SqlRunLog(RunLog):
    """One run's log in the store (rows keyed by run id and position)."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.engine = store.engine
        self.run_id = run_id

    def _read_header(self) -> str | None:
        with self.engine.connect() as connection:
            found = connection.scalar(
                sa.select(_HEADERS.c.header).where(_HEADERS.c.run_id == self.run_id)
            )
        return None if found is None else str(found)

    def _write_header(self, text: str) -> None:
        with self.engine.begin() as connection:
            connection.execute(_HEADERS.insert().values(run_id=self.run_id, header=text))

    def _read_entries(self, after: int, upto: int | None) -> list[Entry]:
        query = (
            sa.select(_LOG.c.position, _LOG.c.op, _LOG.c.argument, _LOG.c.answer)
            .where(_LOG.c.run_id == self.run_id, _LOG.c.position > after)
            .order_by(_LOG.c.position)
        )
        if upto is not None:
            query = query.where(_LOG.c.position <= upto)
        with self.engine.connect() as connection:
            return [Entry(int(row[0]), row[1], row[2], row[3]) for row in connection.execute(query)]

    def _read_length(self) -> int:
        with self.engine.connect() as connection:
            found = connection.scalar(
                sa.select(sa.func.max(_LOG.c.position)).where(_LOG.c.run_id == self.run_id)
            )
        return int(found or 0)

    def _write_entry(self, entry: Entry) -> None:
        with self.engine.begin() as connection:
            connection.execute(_LOG.insert().values(run_id=self.run_id, **entry._asdict()))

    def _read_snapshot_positions(self) -> list[int]:
        query = sa.select(_SNAPSHOTS.c.position).where(_SNAPSHOTS.c.run_id == self.run_id)
        with self.engine.connect() as connection:
            return [int(row[0]) for row in connection.execute(query)]

    def _read_snapshot(self, position: int) -> str | None:
        query = sa.select(_SNAPSHOTS.c.snapshot).where(
            _SNAPSHOTS.c.run_id == self.run_id, _SNAPSHOTS.c.position == position
        )
        with self.engine.connect() as connection:
            found = connection.scalar(query)
        return None if found is None else str(found)

    def _write_snapshot(self, position: int, text: str) -> None:
        with self.engine.begin() as connection:
            connection.execute(
                _SNAPSHOTS.insert().values(run_id=self.run_id, position=position, snapshot=text)
            )

    def close(self) -> None:
        """The store owns the engine."""


class SqlJournal(Journal):
    """The executor's journal of one run in the store. Inside ``one_transaction``
    every record, and the effect's own writes, commit together or not at all."""

    __slots__ = ("_connection", "engine", "postgres", "run_id")

    def __init__(self, store: Store, run_id: str) -> None:
        self.engine = store.engine
        self.run_id = run_id
        self.postgres = not store.url.startswith("sqlite")
        self._connection: sa.Connection | None = None

    @contextmanager
    def one_transaction(self) -> Iterator[sa.Connection]:
        """One transaction for the records written inside it (and the effect's)."""
        with self.engine.begin() as connection:
            # A claim reads, then writes. On PostgreSQL the advisory lock makes that one
            # writer per run; on SQLite the driver begins the transaction only at the
            # first write, so it is DBOS running one execution of a workflow at a time
            # that keeps a run's steps from claiming at once.
            if self.postgres:
                connection.execute(
                    sa.text("SELECT pg_advisory_xact_lock(hashtext(:run))"), {"run": self.run_id}
                )
            self._connection = connection
            try:
                yield connection
            finally:
                self._connection = None

    def _atomic(self) -> AbstractContextManager[Any]:
        return nullcontext() if self._connection is not None else self.one_transaction()

    def records(self, plan_id: str | None = None) -> list[Record]:
        query = (
            sa.select(
                _JOURNAL.c.sequence,
                _JOURNAL.c.kind,
                _JOURNAL.c.plan_id,
                _JOURNAL.c.digest,
                _JOURNAL.c.body,
                _JOURNAL.c.time,
            )
            .where(_JOURNAL.c.run_id == self.run_id)
            .order_by(_JOURNAL.c.sequence)
        )
        if plan_id is not None:
            query = query.where(_JOURNAL.c.plan_id == plan_id)
        if self._connection is not None:
            rows = list(self._connection.execute(query))
        else:
            with self.engine.connect() as connection:
                rows = list(connection.execute(query))
        return [
            Record(int(row[0]), RecordKind(row[1]), row[2], row[3], row[4], float(row[5]))
            for row in rows
        ]

    def _append(self, kind: RecordKind, plan_id: str, digest: str, body: str, time: float) -> None:
        assert self._connection is not None, "journal writes happen inside _atomic"
        self._connection.execute(
            _JOURNAL.insert().values(
                run_id=self.run_id,
                kind=str(kind),
                plan_id=plan_id,
                digest=digest,
                body=body,
                time=time,
            )
        )

    def close(self) -> None:
        """The store owns the engine."""


class DurableRun:
    """One replan run inside a DBOS workflow (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        run_id: str,
        policy: Policy,
        grant: Grant,
        *,
        snapshot_every: int = SNAPSHOT_EVERY,
        boundary: Boundary | None = None,
    ) -> None:
        self.run_id = run_id
        self.grant = grant
        self.journal = SqlJournal(store, run_id)
        self.executor = Executor(self.journal)
        self.controller = LoggedController(
            policy, log=SqlRunLog(store, run_id), snapshot_every=snapshot_every
        )
        self._boundary = boundary or (lambda _where: None)

    # ---- inputs from the world ----------------------------------------------------

    def input(self, name: str, function: Callable[..., _Result], *args: Any) -> _Result:
        """``function(*args)`` as a DBOS step named ``name``: run once, its result
        recorded, and read back when the workflow is recovered."""
        self._boundary(f"before input {name}")
        result = DBOS.run_step({"name": name}, function, *args)
        self._boundary(f"after input {name}")
        return result

    async def input_async(self, name: str, function: Callable[..., _Result], *args: Any) -> _Result:
        """``input`` in an async workflow (a guarded agent's)."""
        self._boundary(f"before input {name}")
        result: _Result = await DBOS.run_step_async({"name": name}, function, *args)
        self._boundary(f"after input {name}")
        return result

    # ---- the controller's events (workflow code: rebuilt on recovery) ----------------

    def _call(self, op: str, *argument: Any) -> Any:
        self._boundary(f"before {op}")
        answer = getattr(self.controller, op)(*argument)
        self._boundary(f"after {op}")
        return answer

    def observe(self, obs: Observation) -> bool:
        return bool(self._call("observe", obs))

    def propose(self, plan: Plan) -> bool:
        return bool(self._call("propose", plan))

    def approve(self, approval: Approval) -> bool:
        return bool(self._call("approve", approval))

    def charge(self, usage: Usage) -> bool:
        return bool(self._call("charge", usage))

    def cancel(self) -> None:
        self._call("cancel")

    # ---- effects ------------------------------------------------------------------------

    def execute(self, operation: Operation, effect: TransactionalEffect) -> Performed:
        """``controller.executor.perform`` with the effect as one DBOS step, run in the
        transaction that holds its intent and receipt."""
        self._boundary("before execute")
        performed = perform(
            self.controller, _StepExecutor(self, effect), operation, self.grant, _no_effect
        )
        self._boundary("after execute")
        return performed

    def _effect_step(self, operation: Operation, effect: TransactionalEffect) -> Execution:
        """The body of an effect's step: claim, effect and receipt in one transaction.
        Run again after a crash that followed the commit, it finds the receipt and
        reports the execution that committed then; the effect is not called."""
        self._boundary("effect step begins")
        with self.journal.one_transaction() as connection:
            execution = Executor.run(
                self.executor,
                operation,
                self.grant,
                lambda op: _effect_then(self, effect, connection, op),
            )
            self._boundary("effect step before commit")
        self._boundary("effect step committed")
        return _as_committed(execution)

    async def _effect_step_async(self, operation: Operation, effect: AsyncEffect) -> Execution:
        """``_effect_step`` for a coroutine effect (a guarded agent's tool), which reaches
        the transaction through ``effect_step()``."""
        self._boundary("effect step begins")
        with self.journal.one_transaction() as connection:
            token = _EFFECT_STEP.set(EffectStep(connection, operation))
            try:
                execution = await Executor.run_async(
                    self.executor, operation, self.grant, lambda op: _awaited_then(self, effect, op)
                )
            finally:
                _EFFECT_STEP.reset(token)
            self._boundary("effect step before commit")
        self._boundary("effect step committed")
        return _as_committed(execution)


class EffectStep(NamedTuple):
    """The effect step that is running now (``effect_step()``)."""

    #: The step's transaction: what a tool writes through it commits with the step's
    #: intent and receipt, so it happens exactly once.
    connection: sa.Connection
    #: The operation the step executes: its ``digest()`` is an idempotency key for
    #: an effect outside the database.
    operation: Operation


_EFFECT_STEP: ContextVar[EffectStep | None] = ContextVar("replan_effect_step", default=None)


def effect_step() -> EffectStep:
    """The effect step running now, for a tool that writes in the run's database or
    needs an idempotency key. Raises ``LookupError`` outside an effect step."""
    step = _EFFECT_STEP.get()
    if step is None:
        raise LookupError("effect_step(): no effect step of a durable run is running")
    return step


def _as_committed(execution: Execution) -> Execution:
    """A rerun effect step that found its receipt reports the execution that committed
    (and crashed before DBOS recorded its step): the same execution, not a new one."""
    if execution.outcome is Outcome.REPLAYED and execution.receipt is not None:
        return execution._replace(
            outcome=Outcome.EXECUTED, recorded=execution.digest, reason="executed"
        )
    return execution


def _effect_then(
    run: DurableRun, effect: TransactionalEffect, connection: sa.Connection, operation: Operation
) -> JSONValue:
    result = effect(connection, operation)
    run._boundary("effect step after effect")
    return result


async def _awaited_then(run: DurableRun, effect: AsyncEffect, operation: Operation) -> JSONValue:
    result = await effect(operation)
    run._boundary("effect step after effect")
    return result


def _no_effect(operation: Operation) -> JSONValue:
    raise AssertionError("a durable run's effects run in their step")  # pragma: no cover


class _StepExecutor(Executor):
    """The run's executor as ``perform`` sees it: ``run`` is the effect's DBOS step."""

    __slots__ = ("_effect", "_run")

    def __init__(self, run: DurableRun, effect: TransactionalEffect) -> None:
        super().__init__(run.journal, clock=run.executor.clock)
        self.awaiting = run.executor.awaiting  # the calls awaiting approval are the run's
        self._run = run
        self._effect = effect

    def run(self, operation: Operation, grant: Grant, effect: object) -> Execution:
        execution: Execution = DBOS.run_step(
            {"name": _step_name(operation)}, self._run._effect_step, operation, self._effect
        )
        return execution


class AsyncStepExecutor(Executor):
    """The run's executor for ``perform_async``: ``run_async`` is the effect's DBOS
    step (``controller.durable.agent`` runs a guarded tool with it)."""

    __slots__ = ("_run",)

    def __init__(self, run: DurableRun) -> None:
        super().__init__(run.journal, clock=run.executor.clock)
        self.awaiting = run.executor.awaiting  # the calls awaiting approval are the run's
        self._run = run

    async def run_async(self, operation: Operation, grant: Grant, effect: AsyncEffect) -> Execution:
        execution: Execution = await DBOS.run_step_async(
            {"name": _step_name(operation)}, self._run._effect_step_async, operation, effect
        )
        return execution


def _step_name(operation: Operation) -> str:
    """An effect's step, named by the operation digest (what its receipt is keyed by)."""
    return f"execute {operation.plan_id} {operation.digest()[:16]}"


__all__ = [
    "DATABASE_URL_VARIABLE",
    "AsyncStepExecutor",
    "DurableRun",
    "EffectStep",
    "SqlJournal",
    "SqlRunLog",
    "Store",
    "TransactionalEffect",
    "configure",
    "database_url",
    "effect_step",
]
