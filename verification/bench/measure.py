"""How ``replan bench`` measures: timed samples of episodes (interleaved, medians and
ratios of samples taken side by side), peak memory, and the machine the figures were
taken on. Speed goals live here as figures, never as timed asserts."""

from __future__ import annotations

import gc
import os
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from replan.verification.bench.controller import (
    COMMIT_STEP,
    EVIDENCE_REVISION,
    IMPLEMENTATIONS,
    KEY_A,
    KEY_B,
    PLAN_ID,
    RESOURCE,
    STATEMACHINE,
    VARIANTS,
    Implementation,
    Variant,
)


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

#: How many ``host_objects_set_aside`` blocks are open, and whether the outermost
#: one froze the host's objects (only it freezes, and only it gives them back).
_set_aside: dict[str, Any] = {"depth": 0, "froze": False}


@contextmanager
def host_objects_set_aside() -> Iterator[None]:
    """Keep the collector off the objects the host process already holds while
    measuring. Every sample starts with ``gc.collect()`` and the episodes trigger
    collections of their own; without this, each would walk every object of the
    process running the bench (a test session's, an embedding program's), so the
    figures and the time to take them would grow with a heap the measured code never
    touches. ``gc.freeze`` moves those objects to a generation the collector skips
    (a full collection still empties CPython's free lists); ``gc.unfreeze`` gives
    them back when the outermost block ends. A host that froze objects of its own
    (a pre-forking server does) is left as it is: ``gc.unfreeze`` would give back its
    objects too, so nothing is frozen and the collections walk its heap as before."""
    if _set_aside["depth"] == 0:
        _set_aside["froze"] = gc.get_freeze_count() == 0
        if _set_aside["froze"]:
            gc.collect()
            gc.freeze()
    _set_aside["depth"] += 1
    try:
        yield
    finally:
        _set_aside["depth"] -= 1
        if _set_aside["depth"] == 0 and _set_aside["froze"]:
            gc.unfreeze()


def _quiet(_: str) -> None:
    pass


def measure_time(
    settings: Settings,
    progress: Progress = _quiet,
    implementations: Sequence[Implementation] = IMPLEMENTATIONS,
) -> list[Series]:
    """Time every series, interleaved round by round (see the module docstring)."""
    with host_objects_set_aside():
        return _timed(settings, progress, implementations)


def _timed(
    settings: Settings, progress: Progress, implementations: Sequence[Implementation]
) -> list[Series]:
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
    with host_objects_set_aside():
        return _traced(variant, implementation, episodes)


def _traced(variant: Variant, implementation: Implementation, episodes: int) -> dict[str, Any]:
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
        "gc": (
            "enabled while timing; gc.collect() before every sample; the objects the "
            "process held before measuring frozen (gc.freeze), so collections walk only "
            "what the measured code made"
        ),
        "memory": (
            "separate pass with tracemalloc, one episode at a time: peak = high-water "
            "traced bytes above the level before the episode; retained = traced bytes "
            "still held after it while its controller is referenced; medians reported. "
            "tracemalloc sees live blocks only, so the peak is a lower bound of the "
            "cumulative bytes allocated per episode (the .NET figure)"
        ),
    }


#: name -> (module, function measuring it). Each function takes the settings and the
#: imported module and returns the figures.
ToolFigure = Callable[[Settings, Any], dict[str, Any]]
