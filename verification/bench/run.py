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
  ``gc.collect()`` runs before every sample so no series pays for another's garbage;
  the objects the process held before measuring are frozen (``gc.freeze``), so no
  series pays for walking the host's heap either.
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

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from replan.verification.bench.controller import (
    IMPLEMENTATIONS,
    VARIANTS,
    WORKLOAD,
    Implementation,
)
from replan.verification.bench.measure import (
    Progress,
    Settings,
    _goal_met,
    _load_average,
    _quiet,
    _ratio_summary,
    _summary,
    environment,
    measure_memory,
    measure_time,
    method,
)
from replan.verification.bench.tools import tool_figures

# The episode, derived from the default policy: its run-completing step and that
# step's two prerequisites.


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
