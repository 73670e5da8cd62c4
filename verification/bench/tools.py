"""The other tools' figures in ``replan bench``: the explorer, the campaign and its
memory, the proofs on a wide policy, the executor, the guard, durable runs, and (opt
in) the explorer beside SPIN and scaling out. Each is present when its module is.
"""

from __future__ import annotations

import gc
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from replan.controller.policy import DEFAULT_POLICY, Policy, Step
from replan.verification.bench.measure import (
    Progress,
    Settings,
    ToolFigure,
    _quiet,
    _ratio_summary,
    _summary,
    host_objects_set_aside,
)


def _absent(module: str) -> dict[str, Any]:
    return {"status": "absent", "module": module}


def _module(name: str) -> Any:
    """The module, or None when it does not exist (yet). Errors inside an existing
    module propagate: a broken tool is not an absent one."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name == name:
            return None
        raise


#: A fixed seed, so the campaign figure measures the same work every time.
CAMPAIGN_SEED = 20251130


#: The size of the wide equivalence proof (its goal: under 100 ms).
WIDE_KEYS = 300


#: ``--quick`` stops the explorer after this many distinct states; a full run after
#: ``EXPLORER_STATES`` (a bound on the bench's time, reported as ``complete``: false).
QUICK_EXPLORER_STATES = 2000


EXPLORER_STATES = 200_000


def _explorer(settings: Settings, module: Any) -> dict[str, Any]:
    """Distinct states per second of the explorer's default report on the default
    policy (the explorer measures its own time; we report what it measured).
    The search is capped (``QUICK_EXPLORER_STATES`` with ``--quick``, else
    ``EXPLORER_STATES``); a capped search reports ``complete``: false."""
    cap = QUICK_EXPLORER_STATES if settings.quick else EXPLORER_STATES
    result = module.explore(DEFAULT_POLICY, max_states=cap)
    return {
        "policy": "default",
        "max_states": cap,
        "states": result.states,
        "transitions": result.transitions,
        "seconds": round(result.seconds, 3),
        "distinct_states_per_second": round(result.states_per_second),
        "transitions_per_second": round(result.transitions_per_second),
        "complete": result.complete,
        "held": result.ok,
    }


def _campaign(settings: Settings, module: Any) -> dict[str, Any]:
    """Operations per second of the campaign at the ``ci`` profile on the default
    policy, fixed seed, no example database and no files written. ``--quick`` runs
    a 5 x 10 budget instead (a smoke figure, marked as such)."""
    budget: dict[str, int] = {"examples": 5, "steps": 10} if settings.quick else {}
    result = module.run_campaign(
        DEFAULT_POLICY,
        "ci",
        seed=CAMPAIGN_SEED,
        out_dir=None,
        database=None,
        collect_visited=False,
        **budget,
    )
    return {
        "profile": "ci" + (" (--quick: 5 examples x 10 steps)" if settings.quick else ""),
        "seed": result.seed,
        "operations": result.operations,
        "seconds": round(result.seconds, 3),
        "operations_per_second": round(result.operations_per_second, 1),
        "held": result.passed,
        "memory": campaign_memory(settings),
    }


#: Examples of the ``thorough`` profile each memory run makes.
MEMORY_EXAMPLES = 1000
#: ``--quick`` divides the memory runs' budget and engine size by this: a smoke run of
#: the same two ways, seconds instead of a minute.
QUICK_MEMORY_DIVISOR = 40


def campaign_memory(settings: Settings) -> dict[str, Any]:
    """Resident memory a ``thorough`` campaign adds per operation, its budget run as
    engines of ``EXAMPLES_PER_ENGINE`` examples (``verification.engines.campaign.memory``, what
    every campaign does) and as one engine, each in a fresh process (a high-water
    mark is per process), the two alternating, three rounds (one with ``--quick``)."""
    from replan.verification.engines.campaign.memory import EXAMPLES_PER_ENGINE

    divisor = QUICK_MEMORY_DIVISOR if settings.quick else 1
    examples = MEMORY_EXAMPLES // divisor
    # --quick scales the share with the budget, so that its bounded run is split too
    share = max(1, EXAMPLES_PER_ENGINE // divisor)
    sizes: dict[str, int | None] = {"bounded": share, "one_engine": None}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in sizes}
    for _ in range(1 if settings.quick else 3):
        for name, size in sizes.items():
            program = (
                "import json; "
                "from replan.verification.bench.campaign_memory import campaign_growth; "
                f"print(json.dumps(campaign_growth({size!r}, {examples}, {CAMPAIGN_SEED})))"
            )
            done = subprocess.run(
                [sys.executable, "-c", program], capture_output=True, text=True, check=True
            )
            runs[name].append(json.loads(done.stdout.splitlines()[-1]))
    figures: dict[str, Any] = {"profile": "thorough", "examples": examples}
    for name, measured in runs.items():
        growth = [run["growth_bytes_per_operation"] for run in measured]
        figures[name] = {
            "examples_per_engine": sizes[name] or examples,
            "operations": measured[0]["operations"],
            "growth_bytes_per_operation_median": statistics.median(growth),
            "growth_bytes_per_operation": growth,
        }
    bounded = figures["bounded"]["growth_bytes_per_operation_median"]
    whole = figures["one_engine"]["growth_bytes_per_operation_median"]
    figures["ratio_one_engine_to_bounded"] = round(whole / bounded, 2) if bounded > 0 else None
    return figures


def wide_policy(keys: int = WIDE_KEYS) -> Policy:
    """One commit step requiring ``keys`` prerequisites, which the workflow also
    requires: the equivalence proof's size benchmark."""
    names = tuple(f"key-{index}" for index in range(keys))
    return Policy(
        keys=names,
        steps=(Step("commit", names, completes_run=True),),
        resources=("input-A",),
        workflow_keys=names,
    )


def _prove(settings: Settings, module: Any) -> dict[str, Any]:
    """The proofs: every ``replan prove`` property on the default policy (in this
    process, and the whole command as a new process, start-up and imports included),
    and the commit equivalence for 300 prerequisites. ``--quick`` measures only the
    equivalence."""
    figures: dict[str, Any] = {}
    wide = wide_policy()
    started = time.perf_counter()
    equivalence = module.prove_equivalence(wide)
    figures["equivalence_300_keys_seconds"] = round(time.perf_counter() - started, 4)
    figures["equivalence_300_keys_proved"] = equivalence.proved
    if settings.quick:
        figures["prove"] = "skipped (--quick)"
        return figures
    started = time.perf_counter()
    report = module.prove_all(DEFAULT_POLICY)
    figures["prove_all_seconds"] = round(time.perf_counter() - started, 3)
    figures["prove_all_proved"] = report.ok
    figures["properties"] = len(report.results)
    # The command writes prove.json into --out: a scratch directory, so the bench
    # never rewrites the committed evidence/prove.json.
    with tempfile.TemporaryDirectory(prefix="replan-bench-prove-") as scratch:
        started = time.perf_counter()
        command = subprocess.run(
            [sys.executable, "-m", "replan", "prove", "--json", "--output", scratch],
            capture_output=True,
            check=False,
        )
        figures["replan_prove_command_seconds"] = round(time.perf_counter() - started, 3)
    figures["replan_prove_exit_code"] = command.returncode
    return figures


def time_episodes(
    episodes: dict[str, Callable[[], None]], settings: Settings
) -> dict[str, dict[str, Any]]:
    """Time zero-argument episode functions that check their own outcome (and raise
    when it is wrong), with the same method as the controller: calibrated episodes per
    sample (at most ``settings.episodes``, about 0.2 s a sample), samples interleaved
    round by round, warm-ups discarded, then a separate tracemalloc pass (20 episodes,
    3 with ``--quick`` or a slow episode). Here the *wall clock* is the headline
    (``*_us``) and the thread's CPU time is beside it (``cpu_*_us``): a durable
    journal's cost is mostly waiting for the disk, which CPU time does not count."""
    target = 0.02 if settings.quick else 0.2
    counts: dict[str, int] = {}
    for name, episode in episodes.items():
        episode()
        started = time.perf_counter()
        episode()
        once = max(time.perf_counter() - started, 1e-7)
        counts[name] = max(1, min(settings.episodes, int(target / once)))
    samples: dict[str, list[float]] = {name: [] for name in episodes}
    cpu_samples: dict[str, list[float]] = {name: [] for name in episodes}
    names = list(episodes)
    for round_index in range(settings.warmups + settings.samples):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            episode, count = episodes[name], counts[name]
            gc.collect()
            cpu_start = time.thread_time_ns()
            start = time.perf_counter_ns()
            for _ in range(count):
                episode()
            elapsed = time.perf_counter_ns() - start
            cpu = time.thread_time_ns() - cpu_start
            if round_index >= settings.warmups:
                samples[name].append(elapsed / count / 1000)
                cpu_samples[name].append(cpu / count / 1000)
    figures: dict[str, dict[str, Any]] = {}
    for name, episode in episodes.items():
        traced = 20 if counts[name] >= 20 and not settings.quick else 3
        figures[name] = {
            "episodes_per_sample": counts[name],
            **_summary(samples[name]),
            **_summary(cpu_samples[name], "cpu_"),
            "peak_bytes": _traced_peak(episode, traced),
        }
    return figures


def _traced_peak(episode: Callable[[], None], episodes: int) -> int:
    """Median peak traced bytes of one call of ``episode`` (as ``measure_memory``)."""
    peaks = []
    tracemalloc.start()
    try:
        for _ in range(episodes):
            gc.collect()
            before, _peak = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            episode()
            _after, peak = tracemalloc.get_traced_memory()
            peaks.append(peak - before)
    finally:
        tracemalloc.stop()
    return int(statistics.median(peaks))


def _executor(settings: Settings, module: Any) -> dict[str, Any]:
    """The executor's workloads (``verification.bench.executor.WORKLOADS``):
    authorized and denied episodes on the in-memory journal, the authorized one on
    SQLite. Each episode checks its own outcome. The SQLite journal allocates in C,
    which tracemalloc does not see: its bytes are the Python side only."""
    return {"workloads": time_episodes(dict(module.WORKLOADS), settings)}


def _middleware(settings: Settings, module: Any) -> dict[str, Any]:
    """The guard's cost per guarded call and the tracing's per controller call
    (``verification.bench.middleware``): every workload timed side by side,
    interleaved, in one run; each difference (guarded - unguarded, traced - untraced)
    is taken sample by sample within a round, then summarised by its median and
    range, on the thread's CPU time (these workloads wait for nothing)."""
    workloads = time_episodes(dict(module.WORKLOADS), settings)
    differences: dict[str, dict[str, Any]] = {}
    for name, minuend, subtrahend, calls in module.DIFFERENCES:
        per_sample = [
            (a - b) / calls
            for a, b in zip(
                workloads[minuend]["cpu_samples_us"],
                workloads[subtrahend]["cpu_samples_us"],
                strict=True,
            )
        ]
        differences[name] = {
            "of": f"({minuend} - {subtrahend}) / {calls}",
            "cpu_median_us": round(statistics.median(per_sample), 3),
            "cpu_min_us": round(min(per_sample), 3),
            "cpu_max_us": round(max(per_sample), 3),
        }
    return {"workloads": workloads, "differences": differences}


def _durable(settings: Settings, module: Any) -> dict[str, Any]:
    """The durable run (``verification.bench.durable``): the cost of logging one
    call, beside the unlogged call, as a median ratio of samples taken side by side;
    restore times for 10^4 and 10^5 logged calls; the kill-and-restart matrix per
    backend (SQLite, and PostgreSQL when a server can be reached or started)."""
    from replan.verification.boundary.durable.postgres import server_url

    with tempfile.TemporaryDirectory(prefix="replan-bench-durable-") as scratch:
        directory = Path(scratch)
        workloads = time_episodes(module.per_call_workloads(directory), settings)
        ratios = {
            name: _ratio_summary(figures["samples_us"], workloads["unlogged"]["samples_us"])
            for name, figures in workloads.items()
            if name != "unlogged"
        }
        sizes = (1_000,) if settings.quick else module.SIZES
        restores = module.restore_figures(directory, sizes, repeats=1 if settings.quick else 3)
        if settings.quick:
            return {"per_call": workloads, "ratio_to_unlogged": ratios, "restore": restores}
        from replan.verification.boundary.durable.crash import WORKLOADS, crash_matrix

        url, why = server_url()
        matrices: dict[str, Any] = {}
        for workload in WORKLOADS:
            database = f"sqlite:///{directory / f'crash-{workload}.db'}"
            matrices[workload] = {
                "sqlite": crash_matrix(database, "sqlite", directory, workload=workload).as_dict(),
                "postgres": {"status": "skipped", "why": why}
                if url is None
                else crash_matrix(url, "postgres", directory, seed=1, workload=workload).as_dict(),
            }
    return {
        "per_call": workloads,
        "ratio_to_unlogged": ratios,
        "restore": restores,
        "crash_matrix": matrices,
    }


def _explore_bench(settings: Settings, module: Any) -> dict[str, Any]:
    """The explorer against SPIN, one worker against two, and the first policy through
    ``replan verify`` (``verification.bench.explore``; ``replan bench --explore``)."""
    figures: dict[str, Any] = module.explore_figures(settings.quick, module.stderr_progress)
    return figures


def _scale_bench(settings: Settings, module: Any) -> dict[str, Any]:
    """The campaign on 1, 2 and 4 workers and on Ray, the explorer's shards in
    processes and as Ray actors (``verification.bench.scale``; ``replan bench --scale``)."""
    figures: dict[str, Any] = module.scale_figures(settings.quick, module.stderr_progress)
    return figures


def _boundary_bench(settings: Settings, module: Any) -> dict[str, Any]:
    """What the boundary check adds to ``replan verify --profile ci`` on the default
    policy (``verification.bench.boundary``; ``replan bench --tool boundary``)."""
    figures: dict[str, Any] = module.boundary_figures(settings.quick, module.stderr_progress)
    return figures


TOOLS: dict[str, tuple[str, ToolFigure]] = {
    "explorer": ("replan.verification.engines.explore.engine", _explorer),
    "campaign": ("replan.verification.engines.campaign.run", _campaign),
    "prove": ("replan.verification.engines.prove.engine", _prove),
    "executor": ("replan.verification.bench.executor", _executor),
    "middleware": ("replan.verification.bench.middleware", _middleware),
    "durable": ("replan.verification.bench.durable", _durable),
    "explore": ("replan.verification.bench.explore", _explore_bench),
    "scale": ("replan.verification.bench.scale", _scale_bench),
    "boundary": ("replan.verification.bench.boundary", _boundary_bench),
}


#: Tools measured only when named (``--tool NAME``): they take many minutes.
OPT_IN = frozenset({"explore", "scale", "boundary"})


def tool_figures(settings: Settings, progress: Progress = _quiet) -> dict[str, Any]:
    """Every other tool's figure: measured, ``absent``, ``skipped`` or ``error``."""
    with host_objects_set_aside():
        return _figures(settings, progress)


def _figures(settings: Settings, progress: Progress) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for name, (module_name, measure) in TOOLS.items():
        if (
            not settings.tools
            or (settings.only_tools and name not in settings.only_tools)
            or (name in OPT_IN and name not in settings.only_tools)
        ):
            figures[name] = {"status": "skipped", "module": module_name}
            continue
        try:
            module = _module(module_name)
        except Exception as error:  # a tool that fails to import is reported, not fatal
            figures[name] = {"status": "error", "module": module_name, "error": repr(error)}
            continue
        if module is None:
            figures[name] = _absent(module_name)
            continue
        progress(f"tool figure: {name}")
        try:
            figures[name] = {"status": "measured", "module": module_name} | measure(
                settings, module
            )
        except Exception as error:  # reported in the JSON; the controller figures stand
            figures[name] = {"status": "error", "module": module_name, "error": repr(error)}
    return figures
