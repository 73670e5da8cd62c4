"""The measurement harness behind ``replan bench``: the ``replan-controller`` workload on
three implementations of the same contract, side by side, plus the speed figures of
the other verification tools when they are installed.

What is measured, and why this way (the method is also written into the JSON):

- **The workload** follows the .NET reference this project is measured against: one
  *episode* is a fresh controller, two ``Passed`` observations (the commit step's
  prerequisites), a matching commit proposal, and an execution that must answer
  ``Executed`` and stop the run ``Completed``. That outcome is checked on every
  episode *inside* the timed loop (two identity tests, the same for every
  implementation); an episode that does not complete is counted and makes the run
  fail (exit 1), because a fast wrong answer is not a result.
- **Implementations**: the generated ``controller.Controller``; the reference model
  ``spec.reference.ReferenceController`` (the declaration run by python-statemachine);
  and ``verification.subjects.handwritten.HandwrittenController``, the honest "what a person
  would write" baseline.
- **Records**: the headline figures build the ``Observation`` and ``Plan`` records
  inside each episode, as the .NET reference did (a caller receives new records every
  time). A second variant reuses records built once, to show what record
  construction costs (a ``NamedTuple`` is ~0.5 µs to build on a slow core).
- **Interleaving**: every round times one sample of every (implementation, variant)
  series, in an order rotated from round to round, so drift of a shared machine (other
  processes, frequency changes) hits all series alike. The first ``warmups`` rounds are
  discarded. Ratios are computed *sample by sample* within a round (ratio_i =
  a_i / b_i), then summarised by their median and range: a ratio of two numbers
  measured milliseconds apart is far steadier than a ratio of two medians.
- **Time** is taken around a loop of N episodes and divided by N, on two clocks: the
  CPU time of the measuring thread (``time.thread_time_ns``), the headline, because
  on a shared machine a wall-clock sample also counts the milliseconds the process
  spent descheduled while other processes ran (a 1 ms sample preempted once reads
  several times slower); and the wall clock (``time.perf_counter_ns``), recorded
  beside it. On a quiet machine the two agree. The
  garbage collector stays enabled (its cost is part of running the code) and
  ``gc.collect()`` runs before every sample so no series pays for another's garbage.
  The reference model is ~1000x slower, so it runs fewer episodes per sample
  (``reference_episodes``, default episodes // 10); figures are per episode either way.
- **Memory** is measured in a separate pass, never while timing: ``tracemalloc``
  traces one episode at a time (after warm episodes), and for each we take the *peak*
  traced bytes above the level before the episode (the high-water mark of everything
  the episode allocated and still held at one moment: the controller, its records,
  transient tuples) and the *retained* bytes (what is still allocated after the
  episode while its controller is referenced). CPython frees most temporaries at once
  by reference counting and tracemalloc sees only live blocks, so the .NET figure
  "bytes allocated per operation" (a cumulative count) has no exact counterpart here;
  the peak is the closest honest one, and it is a lower bound of the cumulative count.

Figures of the other tools (explorer, campaign, proofs, executor, the agent middleware
and its tracing) are taken from their
own modules when those exist and recorded as ``absent`` otherwise.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from replan.controller.policy import DEFAULT_POLICY, Policy, Step
from replan.controller.records import EvidenceState, ExecuteResult, Observation, Plan, StopReason

WORKLOAD = "replan-controller"

# The episode, derived from the default policy: its run-completing step and that
# step's two prerequisites.
_COMMIT = next(step for step in DEFAULT_POLICY.steps if step.completes_run)
KEY_A, KEY_B = _COMMIT.requires
COMMIT_STEP = _COMMIT.name
RESOURCE = DEFAULT_POLICY.resources[0]
SOURCE = "ci"
PLAN_ID = "commit-1"
#: After two meaningful observations the evidence revision is 1 + 2.
EVIDENCE_REVISION = 3

#: Records of the "records built once" variant.
OBSERVATION_A = Observation(KEY_A, 1, EvidenceState.PASSED, SOURCE)
OBSERVATION_B = Observation(KEY_B, 1, EvidenceState.PASSED, SOURCE)
COMMIT_PLAN = Plan(PLAN_ID, 1, EVIDENCE_REVISION, COMMIT_STEP, RESOURCE)

Factory = Callable[[], Any]
#: Runs ``count`` episodes; returns (episodes completed, the last controller).
EpisodeLoop = Callable[[Factory, int], tuple[int, Any]]


def episodes_building_records(factory: Factory, count: int) -> tuple[int, Any]:
    """``count`` episodes, each building its own records (the headline variant)."""
    # Everything the loop needs is bound to locals first, so the loop measures the
    # controller and not global lookups; the same loop drives every implementation.
    observation, plan = Observation, Plan
    key_a, key_b, passed, source = KEY_A, KEY_B, EvidenceState.PASSED, SOURCE
    plan_id, evidence_revision, step, resource = PLAN_ID, EVIDENCE_REVISION, COMMIT_STEP, RESOURCE
    executed, completed_reason = ExecuteResult.EXECUTED, StopReason.COMPLETED
    completed = 0
    controller = None
    for _ in range(count):
        controller = factory()
        controller.observe(observation(key_a, 1, passed, source))
        controller.observe(observation(key_b, 1, passed, source))
        controller.propose(plan(plan_id, 1, evidence_revision, step, resource))
        if controller.execute(plan_id) is executed and controller.stop_reason is completed_reason:
            completed += 1
    return completed, controller


def episodes_reusing_records(factory: Factory, count: int) -> tuple[int, Any]:
    """``count`` episodes over records built once (isolates the controller's cost)."""
    observation_a, observation_b, commit_plan = OBSERVATION_A, OBSERVATION_B, COMMIT_PLAN
    plan_id = PLAN_ID
    executed, completed_reason = ExecuteResult.EXECUTED, StopReason.COMPLETED
    completed = 0
    controller = None
    for _ in range(count):
        controller = factory()
        controller.observe(observation_a)
        controller.observe(observation_b)
        controller.propose(commit_plan)
        if controller.execute(plan_id) is executed and controller.stop_reason is completed_reason:
            completed += 1
    return completed, controller


@dataclass(frozen=True)
class Implementation:
    """One implementation of the contract under measurement."""

    name: str
    target: str  # "module:Class"
    summary: str
    #: The reference model runs ``reference_episodes`` per sample instead of ``episodes``.
    slow: bool = False
    #: A class to use instead of ``target`` (tests measure deliberately broken ones).
    override: Factory | None = field(default=None, compare=False)

    def factory(self) -> Factory:
        if self.override is not None:
            return self.override
        module_name, _, class_name = self.target.partition(":")
        cls: Factory = getattr(importlib.import_module(module_name), class_name)
        return cls


GENERATED = Implementation(
    "generated",
    "replan.controller:Controller",
    "generated from the declaration (what applications run)",
)
HANDWRITTEN = Implementation(
    "hand-written",
    "replan.verification.subjects.handwritten:HandwrittenController",
    "written by hand from CONTRACT.md (the baseline)",
)
STATEMACHINE = Implementation(
    "python-statemachine",
    "replan.spec.reference:ReferenceController",
    "the declaration run by python-statemachine (the reference model)",
    slow=True,
)
IMPLEMENTATIONS = (GENERATED, HANDWRITTEN, STATEMACHINE)


@dataclass(frozen=True)
class Variant:
    """How an episode gets its records."""

    name: str
    records: str
    loop: EpisodeLoop


VARIANTS = (
    Variant(
        WORKLOAD, "built in every episode (as the .NET reference did)", episodes_building_records
    ),
    Variant(
        f"{WORKLOAD}/records-reused",
        "built once, reused by every episode",
        episodes_reusing_records,
    ),
)

#: (numerator, denominator, what the ratio says, goal) — ratios of time per episode.
RATIOS: tuple[tuple[str, str, str, str], ...] = (
    (
        "python-statemachine",
        "generated",
        "times faster the generated controller is than python-statemachine",
        ">= 300",
    ),
    (
        "generated",
        "hand-written",
        "times slower the generated controller is than the hand-written one",
        "<= 1.25",
    ),
    (
        "python-statemachine",
        "hand-written",
        "times faster the hand-written controller is than python-statemachine",
        "",
    ),
)

#: Absolute goals for the generated controller on the headline workload.
GOAL_MEDIAN_US = 4.0
GOAL_PEAK_BYTES = 2048
DOTNET_REFERENCE = {"median_us": 2.181, "allocated_bytes": 1424}


@dataclass(frozen=True)
class Settings:
    samples: int = 7
    episodes: int = 1000
    warmups: int = 2
    #: Episodes per sample for the reference model (None: episodes // 10, at least 1).
    reference_episodes: int | None = None
    #: Episodes traced one by one in the memory pass (the reference model: a tenth).
    allocation_episodes: int = 200
    quick: bool = False
    tools: bool = True
    #: Only these tools' figures (empty: every tool's); the others are ``skipped``.
    only_tools: tuple[str, ...] = ()

    def episodes_for(self, implementation: Implementation) -> int:
        if not implementation.slow:
            return self.episodes
        if self.reference_episodes is not None:
            return self.reference_episodes
        return max(1, self.episodes // 10)


QUICK = Settings(samples=3, episodes=200, warmups=1, reference_episodes=3, allocation_episodes=20)


@dataclass
class Series:
    """The samples of one (variant, implementation) pair."""

    variant: Variant
    implementation: Implementation
    episodes: int
    #: CPU time of the measuring thread per episode, one entry per sample.
    ns_per_episode: list[float] = field(default_factory=list)
    #: Wall-clock time per episode, one entry per sample.
    wall_ns_per_episode: list[float] = field(default_factory=list)
    episodes_run: int = 0
    episodes_completed: int = 0


Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def measure_time(
    settings: Settings,
    progress: Progress = _quiet,
    implementations: Sequence[Implementation] = IMPLEMENTATIONS,
) -> list[Series]:
    """Time every series, interleaved round by round (see the module docstring)."""
    series = [
        Series(variant, implementation, settings.episodes_for(implementation))
        for variant in VARIANTS
        for implementation in implementations
    ]
    factories = {i.name: i.factory() for i in implementations}
    rounds = settings.warmups + settings.samples
    for round_index in range(rounds):
        warmup = round_index < settings.warmups
        progress(f"round {round_index + 1}/{rounds}" + (" (warm-up, discarded)" if warmup else ""))
        shift = round_index % len(series)
        for entry in series[shift:] + series[:shift]:
            factory = factories[entry.implementation.name]
            gc.collect()
            wall_start = time.perf_counter_ns()
            start = time.thread_time_ns()
            completed, _ = entry.variant.loop(factory, entry.episodes)
            elapsed = time.thread_time_ns() - start
            wall = time.perf_counter_ns() - wall_start
            entry.episodes_run += entry.episodes
            entry.episodes_completed += completed
            if not warmup:
                entry.ns_per_episode.append(elapsed / entry.episodes)
                entry.wall_ns_per_episode.append(wall / entry.episodes)
    return series


def measure_memory(
    variant: Variant, implementation: Implementation, episodes: int
) -> dict[str, Any]:
    """Peak and retained traced bytes of one episode, median over ``episodes`` traced
    one at a time (after a few untraced warm episodes)."""
    factory = implementation.factory()
    variant.loop(factory, 3)
    peaks: list[int] = []
    retained: list[int] = []
    completed = 0
    tracemalloc.start()
    try:
        for _ in range(episodes):
            # A full collection also empties CPython's free lists (of tuples, dicts,
            # lists...); without it the episode would reuse the previous episode's
            # freed objects, which tracemalloc never sees, and under-count by half.
            gc.collect()
            before, _peak = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            done, controller = variant.loop(factory, 1)
            after, peak = tracemalloc.get_traced_memory()
            completed += done
            peaks.append(peak - before)
            retained.append(after - before)
            del controller
    finally:
        tracemalloc.stop()
    return {
        "peak_bytes": int(statistics.median(peaks)),
        "peak_bytes_min": min(peaks),
        "peak_bytes_max": max(peaks),
        "retained_bytes": int(statistics.median(retained)),
        "episodes_traced": episodes,
        "episodes_completed": completed,
    }


def _ratio_summary(numerator: Sequence[float], denominator: Sequence[float]) -> dict[str, Any]:
    per_sample = [a / b for a, b in zip(numerator, denominator, strict=True)]
    return {
        "per_sample": [round(r, 4) for r in per_sample],
        "median": round(statistics.median(per_sample), 4),
        "min": round(min(per_sample), 4),
        "max": round(max(per_sample), 4),
    }


def _summary(us: Sequence[float], prefix: str = "") -> dict[str, Any]:
    """Samples (microseconds per episode) with their median and range."""
    return {
        f"{prefix}samples_us": [round(x, 4) for x in us],
        f"{prefix}median_us": round(statistics.median(us), 4),
        f"{prefix}min_us": round(min(us), 4),
        f"{prefix}max_us": round(max(us), 4),
    }


def _goal_met(value: float, goal: str) -> bool:
    operator, _, target = goal.partition(" ")
    return value >= float(target) if operator == ">=" else value <= float(target)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def environment() -> dict[str, Any]:
    return {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "python_build": sys.version.replace("\n", " "),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "load_average_1_5_15min": _load_average(),
    }


def method(settings: Settings) -> dict[str, Any]:
    return {
        "samples": settings.samples,
        "episodes_per_sample": settings.episodes,
        "reference_episodes_per_sample": settings.episodes_for(STATEMACHINE),
        "warmups": settings.warmups,
        "episode": (
            f"fresh controller (default policy); observe {KEY_A} and {KEY_B} Passed "
            f"(version 1); propose plan {PLAN_ID!r} revision 1 evidence revision "
            f"{EVIDENCE_REVISION} step {COMMIT_STEP!r} resource {RESOURCE!r}; execute it; "
            "the answer must be Executed and the stop reason Completed (checked in the "
            "timed loop, every episode)"
        ),
        "clock": (
            "CPU time of the measuring thread (time.thread_time_ns) around N episodes, "
            "divided by N: the *_us figures and the ratios; the wall clock "
            "(time.perf_counter_ns) is recorded beside it as wall_*_us (on a shared "
            "machine wall samples also count time spent descheduled)"
        ),
        "interleaving": (
            "each round times one sample of every series, order rotated per round; "
            "warm-up rounds discarded; ratios computed sample by sample within a round"
        ),
        "gc": "enabled while timing; gc.collect() before every sample",
        "memory": (
            "separate pass with tracemalloc, one episode at a time: peak = high-water "
            "traced bytes above the level before the episode; retained = traced bytes "
            "still held after it while its controller is referenced; medians reported. "
            "tracemalloc sees live blocks only, so the peak is a lower bound of the "
            "cumulative bytes allocated per episode (the .NET figure)"
        ),
    }


def measure_controller(
    settings: Settings,
    progress: Progress = _quiet,
    implementations: Sequence[Implementation] = IMPLEMENTATIONS,
) -> dict[str, Any]:
    """The ``replan-controller`` workloads: timing, then memory, then ratios."""
    series = measure_time(settings, progress, implementations)
    progress("memory pass (tracemalloc)")
    workloads: dict[str, Any] = {}
    for variant in VARIANTS:
        measured: dict[str, Any] = {}
        times: dict[str, list[float]] = {}
        walls: dict[str, list[float]] = {}
        for entry in (s for s in series if s.variant is variant):
            implementation = entry.implementation
            traced = settings.allocation_episodes
            if implementation.slow:
                traced = max(3, traced // 10)
            us = [ns / 1000 for ns in entry.ns_per_episode]
            wall_us = [ns / 1000 for ns in entry.wall_ns_per_episode]
            times[implementation.name] = us
            walls[implementation.name] = wall_us
            measured[implementation.name] = {
                "class": implementation.target,
                "what": implementation.summary,
                "episodes_per_sample": entry.episodes,
                **_summary(us),
                **_summary(wall_us, "wall_"),
                "episodes_run": entry.episodes_run,
                "episodes_completed": entry.episodes_completed,
                "memory": measure_memory(variant, implementation, traced),
            }
        ratios = {
            f"{a}/{b}": {"meaning": meaning, "goal": goal or None}
            | _ratio_summary(times[a], times[b])
            | {"wall_median": _ratio_summary(walls[a], walls[b])["median"]}
            for a, b, meaning, goal in RATIOS
        }
        workloads[variant.name] = {
            "records": variant.records,
            "implementations": measured,
            "ratios": ratios,
        }
    return workloads


def goals(workloads: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's goals, judged on the headline workload (figures, not asserts)."""
    headline = workloads[WORKLOAD]
    generated = headline["implementations"]["generated"]
    found = []
    for a, b, _meaning, goal in RATIOS:
        if goal:
            value = headline["ratios"][f"{a}/{b}"]["median"]
            found.append(
                {"goal": f"{a}/{b} {goal}", "measured": value, "met": _goal_met(value, goal)}
            )
    found.append(
        {
            "goal": f"generated median <= {GOAL_MEDIAN_US} us per episode",
            "measured": generated["median_us"],
            "met": generated["median_us"] <= GOAL_MEDIAN_US,
        }
    )
    found.append(
        {
            "goal": f"generated peak <= {GOAL_PEAK_BYTES} bytes per episode",
            "measured": generated["memory"]["peak_bytes"],
            "met": generated["memory"]["peak_bytes"] <= GOAL_PEAK_BYTES,
        }
    )
    return found


# ---- the other tools' figures (present when their modules are) -----------------------


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


#: name -> (module, function measuring it). Each function takes the settings and the
#: imported module and returns the figures.
ToolFigure = Callable[[Settings, Any], dict[str, Any]]

#: A fixed seed, so the campaign figure measures the same work every time.
CAMPAIGN_SEED = 20251130
#: The size of the wide equivalence proof (issue 5's benchmark: under 100 ms).
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


#: Examples of the ``thorough`` profile each memory run makes (--quick: a tenth).
MEMORY_EXAMPLES = 1000


def campaign_memory(settings: Settings) -> dict[str, Any]:
    """Resident memory a ``thorough`` campaign adds per operation, its budget run as
    engines of ``EXAMPLES_PER_ENGINE`` examples (``verification.engines.campaign.memory``, what
    every campaign does) and as one engine, each in a fresh process (a high-water
    mark is per process), the two alternating, three rounds (one with ``--quick``)."""
    from replan.verification.engines.campaign.memory import EXAMPLES_PER_ENGINE

    examples = MEMORY_EXAMPLES // 10 if settings.quick else MEMORY_EXAMPLES
    # --quick scales the share with the budget, so that its bounded run is split too
    share = EXAMPLES_PER_ENGINE // 10 if settings.quick else EXAMPLES_PER_ENGINE
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
    round by round, warm-ups discarded, then a separate tracemalloc pass. Here the
    *wall clock* is the headline (``*_us``) and the thread's CPU time is beside it
    (``cpu_*_us``): a durable journal's cost is mostly waiting for the disk, which
    CPU time does not count."""
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
        traced = 20 if counts[name] >= 20 else 3
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


TOOLS: dict[str, tuple[str, ToolFigure]] = {
    "explorer": ("replan.verification.engines.explore.engine", _explorer),
    "campaign": ("replan.verification.engines.campaign.machine", _campaign),
    "prove": ("replan.verification.engines.prove.engine", _prove),
    "executor": ("replan.verification.bench.executor", _executor),
    "middleware": ("replan.verification.bench.middleware", _middleware),
    "durable": ("replan.verification.bench.durable", _durable),
    "explore": ("replan.verification.bench.explore", _explore_bench),
    "scale": ("replan.verification.bench.scale", _scale_bench),
}
#: Tools measured only when named (``--tool NAME``): they take many minutes.
OPT_IN = frozenset({"explore", "scale"})


def tool_figures(settings: Settings, progress: Progress = _quiet) -> dict[str, Any]:
    """Every other tool's figure: measured, ``absent``, ``skipped`` or ``error``."""
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


# ---- the whole run -------------------------------------------------------------------


def run_bench(
    settings: Settings,
    progress: Progress = _quiet,
    implementations: Sequence[Implementation] = IMPLEMENTATIONS,
) -> dict[str, Any]:
    """Measure everything and return the JSON document ``replan bench`` writes.
    ``implementations`` must keep the three names (generated, hand-written,
    python-statemachine) the ratios and goals refer to."""
    started = datetime.now(UTC)
    env = environment()
    workloads = measure_controller(settings, progress, implementations)
    tools = tool_figures(settings, progress)
    env["load_average_after"] = _load_average()
    incomplete = [
        f"{name}/{impl}"
        for name, workload in workloads.items()
        for impl, figures in workload["implementations"].items()
        if figures["episodes_completed"] != figures["episodes_run"]
        or figures["memory"]["episodes_completed"] != figures["memory"]["episodes_traced"]
    ]
    return {
        "tool": "replan bench",
        "date": started.isoformat(timespec="seconds"),
        "quick": settings.quick,
        "environment": env,
        "method": method(settings),
        "dotnet_reference": DOTNET_REFERENCE,
        "workloads": workloads,
        "goals": goals(workloads),
        "all_episodes_completed": not incomplete,
        "incomplete": incomplete,
        "tools": tools,
        "seconds": round((datetime.now(UTC) - started).total_seconds(), 2),
    }


# ---- the readable table ----------------------------------------------------------------


def _bytes(value: int) -> str:
    return f"{value:,}"


DURABLE_PARTS = ("per_call", "ratio_to_unlogged", "restore", "crash_matrix")


def campaign_memory_lines(memory: dict[str, Any]) -> list[str]:
    """The campaign's memory figure: resident growth per operation, both ways."""
    lines = [f"    memory ({memory['profile']}, {memory['examples']} examples, resident growth):"]
    for name in ("bounded", "one_engine"):
        figure = memory[name]
        lines.append(
            f"      {figure['examples_per_engine']:>5} examples per engine "
            f"{figure['growth_bytes_per_operation_median']:>9,.0f} B/operation "
            f"(runs {', '.join(f'{g:,.0f}' for g in figure['growth_bytes_per_operation'])}; "
            f"{figure['operations']:,} operations)"
        )
    lines.append(f"      ratio one engine/bounded {memory['ratio_one_engine_to_bounded']}")
    return lines


def durable_lines(figures: dict[str, Any]) -> list[str]:
    """The durable run's figures: per call, restore, the kill-and-restart matrix."""
    lines = []
    for name, numbers in figures["per_call"].items():
        ratio = figures["ratio_to_unlogged"].get(name)
        against = "" if ratio is None else f"  x{ratio['median']:.2f} the unlogged call (wall)"
        lines.append(
            f"    one call, {name:<18} wall {numbers['median_us']:>9,.1f} us "
            f"[{numbers['min_us']:,.1f}-{numbers['max_us']:,.1f}]{against}"
        )
    for name, numbers in figures["restore"].items():
        lines.append(
            f"    restore {name:<24} from snapshots {numbers['from snapshots']['median_s']:.3f} s"
            f", from the start {numbers['from the start']['median_s']:.3f} s (median)"
        )
    for workload, per_backend in figures.get("crash_matrix", {}).items():
        lines += _matrix_lines(workload, per_backend)
    return lines


def _matrix_lines(workload: str, per_backend: dict[str, Any]) -> list[str]:
    """One workload's kill-and-restart matrix: kill point kind x backend."""
    lines = []
    matrices = {backend: matrix for backend, matrix in per_backend.items() if "by_kind" in matrix}
    if matrices:
        lines.append(
            f"    {workload + ': kill point (SIGKILL, then restart)':<40} "
            + "".join(f"{backend:>22}" for backend in matrices)
        )
        kinds = list(dict.fromkeys(kind for m in matrices.values() for kind in m["by_kind"]))
        for kind in kinds:
            cells = []
            for matrix in matrices.values():
                held, runs, kills = matrix["by_kind"].get(kind, (0, 0, 0))
                verdict = "same, once" if held == runs else f"{runs - held} DIFFER"
                cells.append(f"{kills:>4} kills: {verdict:<10}")
            lines.append(f"    {kind:<40} " + "".join(f"{cell:>22}" for cell in cells))
    for backend, matrix in per_backend.items():
        if "outcomes" not in matrix:
            why = matrix.get("why")
            lines.append(f"    {workload}, kill and restart, {backend}: skipped ({why})")
            continue
        held = sum(1 for outcome in matrix["outcomes"] if not outcome["problems"])
        lines.append(
            f"    {workload}, kill and restart, {backend}: {matrix['kills']} SIGKILLs "
            f"({matrix['boundaries']} boundaries + random), {held}/{len(matrix['outcomes'])} "
            f"runs same result, {'no double effect' if matrix['held'] else 'PROBLEMS'} "
            f"({matrix['seconds']} s)"
        )
    return lines


def render_table(document: dict[str, Any]) -> str:
    """The stdout report: environment, one table per workload, ratios, goals, tools."""
    env = document["environment"]
    settings = document["method"]
    lines = [
        f"replan bench  {document['date']}  {env['python']}  {env['cpu']} "
        f"({env['cpus']} cpus, load {env['load_average_1_5_15min']})"
        + ("  [--quick: smoke run, not a measurement]" if document["quick"] else ""),
        f"{settings['samples']} samples x {settings['episodes_per_sample']} episodes "
        f"(python-statemachine: {settings['reference_episodes_per_sample']}) after "
        f"{settings['warmups']} warm-up round(s), interleaved; us = microseconds of "
        "thread CPU time per episode (wall clock beside it)",
    ]
    for name, workload in document["workloads"].items():
        lines += ["", f"{name}: records {workload['records']}"]
        lines.append(
            f"  {'implementation':<20} {'median us':>10} {'min-max us':>19} "
            f"{'wall us':>10} {'peak B':>8} {'kept B':>8} {'completed':>11}"
        )
        for impl, figures in workload["implementations"].items():
            span = f"{figures['min_us']:.2f}-{figures['max_us']:.2f}"
            done = f"{figures['episodes_completed']}/{figures['episodes_run']}"
            lines.append(
                f"  {impl:<20} {figures['median_us']:>10.2f} {span:>19} "
                f"{figures['wall_median_us']:>10.2f} "
                f"{_bytes(figures['memory']['peak_bytes']):>8} "
                f"{_bytes(figures['memory']['retained_bytes']):>8} {done:>11}"
            )
        lines.append("  ratios of time per episode, sample by sample: median [min-max]")
        for pair, ratio in workload["ratios"].items():
            goal = f"  goal {ratio['goal']}" if ratio["goal"] else ""
            lines.append(
                f"  {pair:<34} {ratio['median']:>9.2f}  "
                f"[{ratio['min']:.2f}-{ratio['max']:.2f}]  wall {ratio['wall_median']:.2f}{goal}"
            )
    lines += ["", "goals (figures, not asserts):"]
    for goal in document["goals"]:
        lines.append(
            f"  {'met   ' if goal['met'] else 'MISSED'}  {goal['goal']}: {goal['measured']}"
        )
    lines += ["", "other tools:"]
    for name, figures in document["tools"].items():
        hidden = (
            "status",
            "module",
            "workloads",
            "differences",
            "memory",
            "spin",
            "first_policy",
            *DURABLE_PARTS,
        )
        shown = {k: v for k, v in figures.items() if k not in hidden}
        detail = ", ".join(f"{k}={v}" for k, v in shown.items())
        lines.append(f"  {name:<10} {figures['status']}{': ' + detail if detail else ''}")
        for workload, numbers in figures.get("workloads", {}).items():
            lines.append(
                f"    {workload:<34} wall {numbers['median_us']:>11,.1f} us "
                f"[{numbers['min_us']:,.1f}-{numbers['max_us']:,.1f}]  "
                f"cpu {numbers['cpu_median_us']:>9,.1f} us  "
                f"peak {_bytes(numbers['peak_bytes'])} B  "
                f"({numbers['episodes_per_sample']} episodes/sample)"
            )
        for difference, numbers in figures.get("differences", {}).items():
            lines.append(
                f"    {difference:<44} cpu {numbers['cpu_median_us']:>9,.1f} us "
                f"[{numbers['cpu_min_us']:,.1f}-{numbers['cpu_max_us']:,.1f}]"
            )
        if name == "durable" and figures["status"] == "measured":
            lines += durable_lines(figures)
        if "memory" in figures:
            lines += campaign_memory_lines(figures["memory"])
        if name == "explore" and figures["status"] == "measured":
            from replan.verification.bench.explore import explore_lines

            lines += [f"    {line}" for line in explore_lines(figures)]
        if name == "scale" and figures["status"] == "measured":
            from replan.verification.bench.scale import scale_lines

            lines += [f"    {line}" for line in scale_lines(figures)]
    if not document["all_episodes_completed"]:
        lines += ["", f"EPISODES THAT DID NOT COMPLETE: {', '.join(document['incomplete'])}"]
    return "\n".join(lines)
