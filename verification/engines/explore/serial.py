"""Driving the explorer's search in one process: expand states in index order,
which is breadth-first order, until done or a limit says stop.

``engines/explore/sharded.py`` drives the same ``StateSearch`` level by level over
several processes; both answer (depth, why the search stopped early or None).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from replan.verification.engines.explore.search import StateSearch
from replan.verification.runtime import interrupt


def search_serial(
    engine: StateSearch,
    max_states: int | None,
    max_depth: int | None,
    stop_at_first: bool,
    progress: Callable[[str], None] | None,
    progress_every: float,
    label: str,
) -> tuple[int, str | None]:
    """Expand states in index order (which is breadth-first order): (depth, why it
    stopped early or None)."""
    started = last_report = time.perf_counter()
    depth = 0
    layer_end = 1
    cursor = 0
    while cursor < len(engine.keys):
        if cursor == layer_end:
            depth += 1
            layer_end = len(engine.keys)
        if max_depth is not None and depth >= max_depth:
            return depth, "max_depth"
        if max_states is not None and len(engine.keys) >= max_states:
            return depth, "max_states"
        engine.expand(cursor)
        cursor += 1
        if engine.violations and stop_at_first:
            return depth, "violation"
        if cursor % 128 == 0:
            interrupt.check()
        if progress is not None and cursor % 128 == 0:
            now = time.perf_counter()
            if now - last_report >= progress_every:
                last_report = now
                _progress(progress, label, depth, engine, cursor, now - started)
    return depth, None


def _progress(
    progress: Callable[[str], None],
    label: str,
    depth: int,
    engine: StateSearch,
    expanded: int,
    elapsed: float,
) -> None:
    states = len(engine.keys)
    rate = max(elapsed, 1e-9)
    progress(
        f"explore ({label}): depth {depth}, {states:,} states, frontier "
        f"{max(states - expanded, 0):,}, {engine.transitions:,} transitions; "
        f"{states / rate:,.0f} states/s, {engine.transitions / rate:,.0f} transitions/s, "
        f"{elapsed:.0f} s"
    )
