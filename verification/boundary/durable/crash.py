"""Kill and restart: a durable run (a DBOS workflow driving a replan run) is
SIGKILLed at every boundary it crosses, and at random moments, then restarted, and
must end exactly as a run nobody killed. Two workloads: the scripted import run
below, and a guarded agent (``verification.boundary.durable.agent``: ``DurableGuard`` on an
Agent Framework agent, its provider's replies recorded, its tools run in their
effect steps); the workers, kill points and checks are the same for both.

The run (``import_run``), under the default policy: a scripted model proposes each
plan (a recorded input: a DBOS step), the executor runs each effect in its DBOS
step, the inspections' results become observations, the owner's answer arrives as
a recorded input. It shows a stale plan refused, a Failed prerequisite denying the
commit, a replayed execution answered from its receipt, and the commit completing
the run. Every effect writes one row into ``harness_effects`` in the run's own
database, inside its transaction (``controller.durable.dbos``): a second row for one
operation digest is a double effect, and it is counted, not prevented, here.

A worker is a forked child that configures and launches DBOS on the database, starts
the run (or lets DBOS recover it) and waits for it to end. Kill points:

- **boundaries**: the child kills itself with SIGKILL at the k-th boundary
  (``DurableRun``'s before/after of every call, input and effect, and inside the
  effect's transaction), for every k the uninterrupted run crosses;
- **random**: the parent SIGKILLs the child at a random moment after launch, several
  times in one run, restarting it each time.

After the last restart the parent checks: the workflow's result (stop reason,
evidence revision, executed steps) equals the uninterrupted run's; the run log holds
the same entries (no observation lost) and restores to the same state; every
executed operation has its receipt and no intent is left without one (no receipt
lost); and each operation digest has exactly one effect row (none ran twice).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import random
import re
import signal
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from dbos import DBOS, SetWorkflowID

from replan.controller.durable import restore
from replan.controller.durable.dbos import (
    _EFFECT_STEP,
    DurableRun,
    EffectStep,
    SqlJournal,
    SqlRunLog,
    Store,
    TransactionalEffect,
    configure,
)
from replan.controller.executor import AsyncEffect, Execution, Executor, Operation
from replan.controller.journal import JSONValue
from replan.controller.policy import DEFAULT_POLICY
from replan.controller.records import EvidenceState, ExecuteResult, Observation, Plan
from replan.verification.boundary.durable.world import EFFECTS, GRANT, HARNESS, WORKER

#: What each inspection finds (the world the effects see).
FINDINGS = {"inspect-parser": ("parser", "Passed"), "inspect-access": ("access", "Failed")}


def effects_of(run_id: str) -> TransactionalEffect:
    """The import's effects for run ``run_id``, written in the run's transaction."""

    def effect(connection: sa.Connection, operation: Operation) -> JSONValue:
        connection.execute(
            EFFECTS.insert().values(run_id=run_id, digest=operation.digest(), step=operation.step)
        )
        return _finding(operation)

    return effect


def _finding(operation: Operation) -> JSONValue:
    if operation.step in FINDINGS:
        key, state = FINDINGS[operation.step]
        return {"key": key, "version": 1, "state": state}
    return {"imported": 3}


def model_reply(turn: int, evidence_revision: int) -> Plan:
    """The scripted model: the plan it proposes at ``turn``, citing the evidence
    revision it was shown (turn 3 cites an old one: a stale plan)."""
    step, cited = {
        1: ("inspect-parser", evidence_revision),
        2: ("commit-import", evidence_revision - 1),
        3: ("inspect-access", evidence_revision),
        4: ("commit-import", evidence_revision),
        5: ("commit-import", evidence_revision),
    }[turn]
    return Plan(f"p{turn}", turn, cited, step, "input-A")


def owner_answer() -> Observation:
    """The owner's answer about access, reported by the host."""
    return Observation("access", 2, EvidenceState.PASSED, "owner")


@DBOS.workflow(max_recovery_attempts=10_000)
def import_run(run_id: str) -> dict[str, Any]:
    """The durable run (see the module docstring)."""
    assert WORKER.store is not None
    run = DurableRun(
        WORKER.store, run_id, DEFAULT_POLICY, GRANT, snapshot_every=4, boundary=WORKER.boundary
    )
    controller = run.controller
    effect = effects_of(run_id)
    answers: list[str] = []

    def propose_and_execute(turn: int) -> None:
        plan = run.input(f"model reply {turn}", model_reply, turn, controller.evidence_revision)
        accepted = run.propose(plan)
        answers.append(f"propose {plan.id}: {accepted}")
        if not accepted:
            return
        performed = run.execute(Operation.for_plan(plan), effect)
        answers.append(f"execute {plan.id}: {performed.answer} {performed.outcome}")
        receipt = performed.receipt
        if performed.answer is ExecuteResult.EXECUTED and receipt is not None:
            found = receipt.result
            if isinstance(found, dict) and "key" in found:
                run.observe(
                    Observation(
                        str(found["key"]),
                        int(str(found["version"])),
                        EvidenceState(found["state"]),
                        plan.step,
                    )
                )

    for turn in (1, 2, 3, 4):
        propose_and_execute(turn)
    run.observe(run.input("owner answer", owner_answer))
    replayed = run.execute(Operation.for_plan(model_reply(1, 2)), effect)
    answers.append(f"execute p1 again: {replayed.answer} {replayed.outcome}")
    propose_and_execute(5)
    return {
        "stop_reason": str(controller.stop_reason),
        "evidence_revision": controller.evidence_revision,
        "steps": controller.steps,
        "executed": sorted(controller._completed),
        "answers": answers,
    }


# ---- a worker -------------------------------------------------------------------------


#: Deliberately broken adapters, to show the harness catches them.
BROKEN = ("effect-commits-alone", "reply-not-recorded")


def _effect_commits_alone(
    self: DurableRun, operation: Operation, effect: TransactionalEffect
) -> Execution:
    """Broken on purpose: the effect commits in its own transaction, before the
    intent and receipt are written (a kill between the two reruns it)."""
    with self.journal.engine.begin() as connection:
        result = effect(connection, operation)
    self._boundary("effect step after effect")
    with self.journal.one_transaction():
        return Executor.run(self.executor, operation, self.grant, lambda _op: result)


#: The workloads a worker can run: the scripted import, and a guarded agent
#: (``verification.boundary.durable.agent``: ``DurableGuard`` on an Agent Framework agent).
WORKLOADS = ("import", "agent")
#: The guarded agent with a model that answers a question asked again differently
#: (as a real one may): a run that asks it again after a restart ends otherwise.
#: Kill it at boundaries only: a random kill inside a provider step, after the reply
#: and before DBOS recorded it, makes even a correct adapter ask again.
FORGETFUL_AGENT = "forgetful-agent"


async def _effect_commits_alone_async(
    self: DurableRun, operation: Operation, effect: AsyncEffect
) -> Execution:
    """``_effect_commits_alone`` for a guarded agent's tool."""
    with self.journal.engine.begin() as connection:
        token = _EFFECT_STEP.set(EffectStep(connection, operation))
        try:
            result = await effect(operation)
        finally:
            _EFFECT_STEP.reset(token)
    self._boundary("effect step after effect")
    with self.journal.one_transaction():
        return Executor.run(self.executor, operation, self.grant, lambda _op: result)


def _worker(
    url: str,
    run_id: str,
    result_path: str,
    kill_at: int | None,
    launched_path: str,
    broken: str | None,
    workload: str,
) -> None:
    """A child process: launch DBOS, start or recover the run, wait for its end.

    Long: the child's whole life in one place, its crash points closures over one
    counter (a kill must land between two of its own lines)."""
    crossed = 0
    boundaries: list[str] = []

    def boundary(where: str) -> None:
        nonlocal crossed
        crossed += 1
        boundaries.append(where)
        if crossed == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    if broken == "effect-commits-alone":
        DurableRun._effect_step = _effect_commits_alone  # type: ignore[method-assign]
        DurableRun._effect_step_async = _effect_commits_alone_async  # type: ignore[method-assign]
    if workload in ("agent", FORGETFUL_AGENT):
        import replan.verification.boundary.durable.agent as durable_agent  # registers the workflow

        agent_run = durable_agent.agent_run
        durable_agent.FORGETFUL = workload == FORGETFUL_AGENT
        if broken == "reply-not-recorded":
            from replan.controller.durable.agent import DurableGuard
            from replan.controller.middleware import ReplanMiddleware

            DurableGuard._round_trip = ReplanMiddleware._round_trip  # type: ignore[method-assign]
    WORKER.store = Store(url)
    HARNESS.create_all(WORKER.store.engine)
    WORKER.boundary = boundary
    configure(url, "replan-crash")
    _poll_recovery_often()
    DBOS.launch()
    Path(launched_path).write_text("launched")
    began = time.perf_counter()
    status = DBOS.get_workflow_status(run_id)
    result: Any
    if status is None:
        with SetWorkflowID(run_id):
            result = import_run(run_id) if workload == "import" else asyncio.run(agent_run(run_id))
    else:  # DBOS's launch recovers it in the background: wait for the end
        while status is not None and status.status in ("PENDING", "ENQUEUED"):
            time.sleep(0.01)
            status = DBOS.get_workflow_status(run_id)
        assert status is not None
        # a recovered run that ends otherwise (DBOS finds it took another path, say)
        # is an outcome to report, not a harness failure
        result = (
            status.output
            if status.status == "SUCCESS"
            else {"error": f"the run ended {status.status}: {status.error!r}"}
        )
    document = {
        "result": result,
        "boundaries": boundaries,
        "seconds": time.perf_counter() - began,
    }
    Path(result_path).write_text(json.dumps(document))
    os._exit(0)


def _poll_recovery_often() -> None:
    """DBOS recovers a workflow by putting it on its internal queue, which it polls
    once a second: a restart would wait that long. The harness restarts hundreds of
    times, so it polls every 10 ms (DBOS has no public setting for this queue; the
    recovery itself is DBOS's, unchanged)."""
    from dbos._dbos import _get_or_create_dbos_registry

    _get_or_create_dbos_registry().get_internal_queue()._polling_interval_sec = 0.01


_FORK = multiprocessing.get_context("fork")


def _import_before_forking(workload: str) -> None:
    """Import the workload's modules in the parent, once: every forked worker
    inherits them. A worker importing the agent stack itself (Agent Framework,
    its telemetry) spends about a third of a second on it at every restart, and
    the harness restarts hundreds of times."""
    if workload in ("agent", FORGETFUL_AGENT):
        import replan.verification.boundary.durable.agent  # noqa: F401


def _start(
    url: str,
    run_id: str,
    directory: Path,
    kill_at: int | None = None,
    broken: str | None = None,
    workload: str = "import",
) -> multiprocessing.process.BaseProcess:
    _import_before_forking(workload)
    for name in ("result.json", "launched"):
        (directory / name).unlink(missing_ok=True)
    child = _FORK.Process(
        target=_worker,
        args=(
            url,
            run_id,
            str(directory / "result.json"),
            kill_at,
            str(directory / "launched"),
            broken,
            workload,
        ),
    )
    child.start()
    return child


def run_to_end(
    url: str,
    run_id: str,
    directory: Path,
    kill_at: int | None = None,
    broken: str | None = None,
    workload: str = "import",
) -> tuple[dict[str, Any], int]:
    """Run (or recover) the run in workers until one ends it; the result and how
    many workers were killed on the way (the first, if ``kill_at``)."""
    kills = 0
    child = _start(url, run_id, directory, kill_at, broken, workload)
    while True:
        child.join(120)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise RuntimeError(f"run {run_id}: a worker did not end within 120 s")
        if child.exitcode == -signal.SIGKILL:
            kills += 1
            child = _start(url, run_id, directory, broken=broken, workload=workload)
            continue
        if child.exitcode != 0:
            raise RuntimeError(f"worker ended with exit code {child.exitcode}")
        return json.loads((directory / "result.json").read_text()), kills


def run_with_random_kills(
    url: str,
    run_id: str,
    directory: Path,
    kills: int,
    window: float,
    chooser: random.Random,
    workload: str = "import",
) -> tuple[dict[str, Any], int]:
    """Restart the run after up to ``kills`` SIGKILLs from outside, each at a random
    moment within ``window`` seconds of the worker's launch; then let it finish."""
    made = 0
    while made < kills:
        child = _start(url, run_id, directory, workload=workload)
        while not (directory / "launched").exists() and child.is_alive():
            time.sleep(0.002)
        time.sleep(chooser.uniform(0, window))
        if not child.is_alive():
            child.join()
            if child.exitcode == 0:  # it finished before the kill
                return json.loads((directory / "result.json").read_text()), made
            raise RuntimeError(f"worker ended with exit code {child.exitcode}")
        os.kill(child.pid or 0, signal.SIGKILL)
        child.join()
        if child.exitcode == 0:  # it finished just before the signal: no kill
            return json.loads((directory / "result.json").read_text()), made
        made += 1
    document, more = run_to_end(url, run_id, directory, workload=workload)
    return document, made + more


# ---- the checks ---------------------------------------------------------------------


@dataclass
class Outcome:
    """What one killed-and-restarted run showed."""

    kill_point: str
    kills: int
    problems: list[str] = field(default_factory=list)

    @property
    def held(self) -> bool:
        return not self.problems


def state_of(url: str, run_id: str) -> dict[str, Any]:
    """What the database holds about run ``run_id`` once it ended."""
    store = Store(url)
    try:
        log = SqlRunLog(store, run_id)
        entries = [list(entry) for entry in log.entries()]
        restored = restore(log, DEFAULT_POLICY).snapshot()
        with store.engine.connect() as connection:
            effects = sorted(
                [row.digest, row.step]
                for row in connection.execute(
                    sa.select(EFFECTS.c.digest, EFFECTS.c.step).where(EFFECTS.c.run_id == run_id)
                )
            )
        journal = [
            [str(record.kind), record.plan_id] for record in SqlJournal(store, run_id).records()
        ]
    finally:
        store.close()
    return {"log": entries, "restored": restored, "effects": effects, "journal": journal}


def compare(expected: Mapping[str, Any], got: Mapping[str, Any]) -> list[str]:
    """How a killed-and-restarted run (``got``: its result and ``state_of``) differs
    from the uninterrupted one (empty when it does not)."""
    if "error" in got["result"]:
        return [str(got["result"]["error"])]
    problems = []
    for name in ("stop_reason", "evidence_revision", "steps", "executed", "answers"):
        if got["result"].get(name) != expected["result"][name]:
            problems.append(
                f"{name}: {got['result'].get(name)!r}, uninterrupted {expected['result'][name]!r}"
            )
    state, baseline = got["state"], expected["state"]
    if state["log"] != baseline["log"]:
        problems.append(
            f"the run log ({len(state['log'])} entries) differs from the uninterrupted one"
        )
    if state["restored"] != baseline["restored"]:
        problems.append("the run log restores to another state")
    digests = [digest for digest, _step in state["effects"]]
    doubled = sorted({digest[:12] for digest in digests if digests.count(digest) > 1})
    if doubled:
        problems.append(f"effects ran twice: {', '.join(doubled)}")
    elif state["effects"] != baseline["effects"]:
        problems.append("the effects differ from the uninterrupted run's")
    if state["journal"] != baseline["journal"]:
        problems.append(f"journal {state['journal']}, uninterrupted {baseline['journal']}")
    return problems


# ---- the matrix -----------------------------------------------------------------------


@dataclass
class Matrix:
    """Kill point -> what the run showed, for one database."""

    backend: str
    boundaries: int = 0
    outcomes: list[Outcome] = field(default_factory=list)
    workload: str = "import"
    seconds: float = 0.0

    @property
    def kills(self) -> int:
        return sum(outcome.kills for outcome in self.outcomes)

    @property
    def held(self) -> bool:
        return all(outcome.held for outcome in self.outcomes)

    def by_kind(self) -> dict[str, tuple[int, int, int]]:
        """Kill point kind (the boundary's name, or "random") -> (runs that ended as
        the uninterrupted one, runs, kills)."""
        table: dict[str, tuple[int, int, int]] = {}
        for outcome in self.outcomes:
            kind = (
                re.sub(r" \d+$", "", outcome.kill_point.split(": ", 1)[1])
                if outcome.kill_point.startswith("boundary")
                else "random moments"
            )
            held, runs, kills = table.get(kind, (0, 0, 0))
            table[kind] = (held + outcome.held, runs + 1, kills + outcome.kills)
        return table

    def summary(self) -> str:
        """One line for the matrix, then one per run that did not end as it should."""
        failed = [o for o in self.outcomes if not o.held]
        lines = [
            f"{self.backend}, {self.workload}: {self.kills} kills "
            f"({self.boundaries} boundaries + random), "
            f"{len(self.outcomes) - len(failed)}/{len(self.outcomes)} runs same result, "
            f"{'no double effect' if not failed else 'PROBLEMS'}, {self.seconds:.0f} s"
        ]
        lines += [f"  {o.kill_point}: {'; '.join(o.problems)}" for o in failed]
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "workload": self.workload,
            "boundaries": self.boundaries,
            "kills": self.kills,
            "held": self.held,
            "seconds": round(self.seconds, 1),
            "by_kind": {kind: list(counts) for kind, counts in self.by_kind().items()},
            "outcomes": [
                {"kill_point": o.kill_point, "kills": o.kills, "problems": o.problems}
                for o in self.outcomes
            ],
        }


def crash_matrix(
    url: str,
    backend: str,
    directory: Path,
    *,
    random_kills: int = 150,
    kills_per_run: int = 5,
    seed: int = 0,
    broken: str | None = None,
    only: str | None = None,
    workload: str = "import",
    progress: Callable[[str], None] | None = None,
) -> Matrix:
    """Kill the run at every boundary, then ``random_kills`` times at random
    moments (``kills_per_run`` in each run), each run in its own run id in the
    database at ``url``; compare every run with an uninterrupted one. ``only``: kill
    only at the boundaries whose name holds it."""
    began = time.perf_counter()
    say = progress or (lambda _line: None)
    # run ids of their own: the database may hold runs of earlier matrices
    prefix = uuid.uuid4().hex[:8]
    baseline, _ = run_to_end(
        url, f"{prefix}-uninterrupted", directory, broken=broken, workload=workload
    )
    expected = {"result": baseline["result"], "state": state_of(url, f"{prefix}-uninterrupted")}
    boundaries: list[str] = baseline["boundaries"]
    matrix = Matrix(backend, len(boundaries), workload=workload)
    for index, where in enumerate(boundaries, start=1):
        if only is not None and only not in where:
            continue
        run_id = f"{prefix}-boundary-{index}"
        document, kills = run_to_end(
            url, run_id, directory, kill_at=index, broken=broken, workload=workload
        )
        got = {"result": document["result"], "state": state_of(url, run_id)}
        matrix.outcomes.append(Outcome(f"boundary {index}: {where}", kills, compare(expected, got)))
        if index % 10 == 0:
            say(f"{backend}: {index}/{len(boundaries)} boundaries")
    chooser = random.Random(seed)
    window = float(baseline["seconds"])  # a kill before the run ends, mostly
    made, number = 0, 0
    while made < random_kills:
        number += 1
        run_id = f"{prefix}-random-{number}"
        wanted = min(kills_per_run, random_kills - made)
        document, kills = run_with_random_kills(
            url, run_id, directory, wanted, window, chooser, workload
        )
        got = {"result": document["result"], "state": state_of(url, run_id)}
        matrix.outcomes.append(Outcome(f"random run {number}", kills, compare(expected, got)))
        made += kills
        if number % 10 == 0:
            say(f"{backend}: {made}/{random_kills} random kills")
    matrix.seconds = time.perf_counter() - began
    return matrix
