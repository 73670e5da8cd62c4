"""What scaling out costs and buys, measured side by side in one run:
``replan bench --scale``.

Owns the scale-out figures: the campaign with 1, 2 and 4 local workers
(operations per second of the merged campaign, and the time to the first failure on a
deliberately broken controller), the same two shares as Ray tasks (Ray's overhead
against local processes), and the explorer at SPIN's (V, K) = (1, 2) in one process,
over two forked shards and over two Ray actors, with the counts of each. Leaves the
work to ``verification/engines/campaign/workers.py`` and
``verification/engines/explore/sharded.py``.

Why measured, never asserted: the machine is shared and has two cores, so more than
two workers can only share them; the figures say where Ray starts to pay (a cluster
with more cores than one machine has), not a goal a test would enforce.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from replan.controller.policy import DEFAULT_POLICY
from replan.verification.runtime.interrupt import say

Progress = Callable[[str], None]
#: A broken controller the campaign needs a few hundred operations to catch (the step
#: limit off by one shows only at max_steps + 1 executed plans).
SLOW_MUTANT = "step-limit-off-by-one"
WORKERS = (1, 2, 4)
SEED = 0


def stderr_progress(message: str) -> None:
    say(f"replan bench: {message}")


def _campaign(workers: int, ray_address: str | None, examples: int | None) -> dict[str, Any]:
    from replan.verification.engines.campaign.workers import run_workers

    result = run_workers(
        DEFAULT_POLICY, workers=workers, seed=SEED, examples=examples, ray_address=ray_address
    )
    return {
        "workers": workers,
        "ray": ray_address is not None,
        "examples": result.examples,
        "operations": result.operations,
        "seconds": round(result.seconds, 2),
        "operations_per_second": round(result.operations / max(result.seconds, 1e-9)),
    }


def _first_failure(workers: int, ray_address: str | None) -> dict[str, Any]:
    from replan.verification.engines.campaign.workers import run_workers
    from replan.verification.subjects import mutants

    started = time.perf_counter()
    result = run_workers(
        DEFAULT_POLICY,
        workers=workers,
        seed=SEED,
        examples=800,
        implementation=mutants.mutant_implementation(SLOW_MUTANT),
        mutant=SLOW_MUTANT,
        subjects=f"{mutants.__name__}:MUTANTS",
        ray_address=ray_address,
    )
    return {
        "workers": workers,
        "ray": ray_address is not None,
        "found": None if result.finding is None else result.finding.property,
        "seconds": round(time.perf_counter() - started, 2),
    }


def _explorer(workers: int, ray: bool, domains: Any) -> dict[str, Any]:
    from replan.verification.engines.explore.engine import explore

    started = time.perf_counter()
    result = explore(DEFAULT_POLICY, domains, workers=workers, ray=ray)
    return {
        "workers": workers,
        "ray": ray,
        "states": result.states,
        "transitions": result.transitions,
        "seconds": round(time.perf_counter() - started, 2),
        "held": result.ok and result.complete,
    }


def scale_figures(quick: bool, progress: Progress) -> dict[str, Any]:
    """Every figure of ``replan bench --scale`` (a local Ray cluster is started for
    the Ray ones; ``--quick``: a smoke run, small budgets and a small domain)."""
    from replan.verification.runtime import ray_cluster

    examples = 40 if quick else None
    figures: dict[str, Any] = {"campaign": [], "first_failure": [], "explorer": []}
    for workers in WORKERS:
        progress(f"scale bench: campaign, {workers} local workers")
        figures["campaign"].append(_campaign(workers, None, examples))
        figures["first_failure"].append(_first_failure(workers, None))
    from replan.verification.core.domains import smoke_domains, spin_domains

    domains = smoke_domains() if quick else spin_domains(1, 2)
    figures["explorer_domains"] = "quick (smoke run)" if quick else "SPIN's (V, K) = (1, 2)"
    ways = [(1, False), (2, False)]
    try:
        if ray_cluster.available():
            started = time.perf_counter()
            ray_cluster.connect(ray_cluster.LOCAL)
            figures["ray_start_seconds"] = round(time.perf_counter() - started, 2)
            progress("scale bench: campaign, 2 Ray tasks")
            figures["campaign"].append(_campaign(2, ray_cluster.LOCAL, examples))
            figures["first_failure"].append(_first_failure(2, ray_cluster.LOCAL))
            ways.append((2, True))
        else:
            figures["ray"] = "absent: pip install 'replan[scale]'"
        for workers, ray in ways:
            progress(f"scale bench: explorer, {workers} {'Ray actors' if ray else 'processes'}")
            figures["explorer"].append(_explorer(workers, ray, domains))
    finally:
        if ray_cluster.available():
            ray_cluster.shutdown()
    counts = {(e["states"], e["transitions"]) for e in figures["explorer"]}
    figures["explorer_same_counts"] = len(counts) == 1
    return figures


def scale_lines(figures: dict[str, Any]) -> list[str]:
    """The figures as the bench's table prints them."""
    lines = ["campaign at ci on the default policy (merged operations / wall time):"]
    for each in figures["campaign"]:
        where = "Ray tasks" if each["ray"] else "local processes"
        lines.append(
            f"  {each['workers']} {where:<16} {each['examples']:>5} examples "
            f"{each['operations']:>8,} operations {each['seconds']:>7.2f} s "
            f"{each['operations_per_second']:>7,} operations/s"
        )
    lines.append(f"time to the first failure ({SLOW_MUTANT}):")
    for each in figures["first_failure"]:
        where = "Ray tasks" if each["ray"] else "local processes"
        lines.append(f"  {each['workers']} {where:<16} {each['seconds']:>7.2f} s ({each['found']})")
    if "ray_start_seconds" in figures:
        lines.append(f"starting a local Ray cluster: {figures['ray_start_seconds']} s")
    lines.append(f"explorer on {figures['explorer_domains']}:")
    for each in figures["explorer"]:
        where = "Ray actors" if each["ray"] else "process" if each["workers"] == 1 else "shards"
        lines.append(
            f"  {each['workers']} {where:<10} {each['states']:>9,} states "
            f"{each['transitions']:>11,} transitions {each['seconds']:>7.2f} s"
        )
    lines.append(f"  same counts everywhere: {'yes' if figures['explorer_same_counts'] else 'NO'}")
    return lines


__all__ = ["scale_figures", "scale_lines", "stderr_progress"]
