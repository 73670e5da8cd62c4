"""The durable run's figures for ``replan bench --durable``: what logging costs per
call, how long a restore takes, and the kill-and-restart matrix.

- **Per call**: one observation that changes the run (so it is logged), on the
  generated controller unlogged, logged in memory, and logged in SQLite (``synchronous
  = FULL``: the entry is on disk when the call returns). Timed side by side,
  interleaved, by ``verification.bench.run.time_episodes``; the ratio to the unlogged call
  is taken sample by sample.
- **Restore**: a log of 10^4 and of 10^5 logged calls (observations alternating
  Passed and Failed, each a change), in memory and in SQLite, restored from its
  snapshots (``restore``: the default, at most two snapshot intervals replayed) and
  from the start (``check_all``: every call replayed, every snapshot checked). The
  SQLite log is written in one transaction from the in-memory one, the same rows.
- **Crashes**: ``verification.boundary.durable.crash.crash_matrix`` on SQLite and, when a
  server can be reached or started, PostgreSQL.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from replan.controller import Controller, EvidenceState, Observation
from replan.controller.durable import InMemoryRunLog, LoggedController, SqliteRunLog, restore
from replan.controller.durable.log import RunLog

SIZES = (10_000, 100_000)


def _changes() -> Iterator[Observation]:
    """Observations that each change the run: parser, alternating, new versions."""
    for version in itertools.count(1):
        state = EvidenceState.PASSED if version % 2 else EvidenceState.FAILED
        yield Observation("parser", version, state, "bench")


def per_call_workloads(directory: Path) -> dict[str, Callable[[], None]]:
    """One logged-worthy call on each of the three, each checking it was taken."""
    runs: dict[str, Controller] = {
        "unlogged": Controller(),
        "logged in memory": LoggedController(log=InMemoryRunLog()),
        "logged in SQLite": LoggedController(log=SqliteRunLog(directory / "bench.log")),
    }

    def episode_of(run: Controller) -> Callable[[], None]:
        changes = _changes()

        def episode() -> None:
            if not run.observe(next(changes)):
                raise AssertionError("the observation was not taken as a change")

        return episode

    return {name: episode_of(run) for name, run in runs.items()}


def _logged(count: int) -> InMemoryRunLog:
    log = InMemoryRunLog()
    run = LoggedController(log=log)
    for observation in itertools.islice(_changes(), count):
        run.observe(observation)
    return log


def _copy_to_sqlite(source: InMemoryRunLog, path: Path) -> SqliteRunLog:
    target = SqliteRunLog(path)
    target.copy_from(source)
    return target


def _seconds(action: Callable[[], object], repeats: int) -> dict[str, float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return {
        "median_s": round(statistics.median(times), 4),
        "min_s": round(min(times), 4),
        "max_s": round(max(times), 4),
    }


def restore_figures(
    directory: Path, sizes: tuple[int, ...] = SIZES, repeats: int = 3
) -> dict[str, Any]:
    """Restore time by log size and storage, from snapshots and from the start."""
    figures: dict[str, Any] = {}
    for size in sizes:
        memory = _logged(size)
        sqlite = _copy_to_sqlite(memory, directory / f"restore-{size}.log")
        expected = restore(memory).snapshot()
        logs: dict[str, RunLog] = {"in memory": memory, "SQLite": sqlite}
        for storage, log in logs.items():
            if restore(log).snapshot() != expected:
                raise AssertionError(f"{storage}: the restored run differs")
            figures[f"{size} calls, {storage}"] = {
                "calls": size,
                "from snapshots": _seconds(lambda log=log: restore(log), repeats),  # type: ignore[misc]
                "from the start": _seconds(
                    lambda log=log: restore(log, check_all=True),  # type: ignore[misc]
                    repeats,
                ),
            }
        sqlite.close()
    return figures


__all__ = ["SIZES", "per_call_workloads", "restore_figures"]
