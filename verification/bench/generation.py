"""``replan bench --explore``: generating the default report's kernels apart (each
domain's in a forked process, side by side: what ``replan explore --engine kernel``
and ``replan verify`` do) against in turn, in this process, as they were generated
before; interleaved rounds, medians and their ratio.

Owns that one figure. Leaves the generation to ``verification/translate/kernel``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from replan.controller.policy import DEFAULT_POLICY

Progress = Callable[[str], None]


def _generate(domains: Any) -> Any:
    from replan.verification.core.subject import PROJECT
    from replan.verification.translate.kernel import generate

    return generate(DEFAULT_POLICY, domains, PROJECT.model, PROJECT.model_class)


def _apart(every: list[Any]) -> float:
    from replan.verification.translate.kernel.apart import Apart

    started = time.perf_counter()
    with Apart({n: partial(_generate, each) for n, each in enumerate(every)}) as apart:
        for number in range(len(every)):
            apart.kernel(number)
    return time.perf_counter() - started


def _in_turn(every: list[Any]) -> float:
    started = time.perf_counter()
    for each in every:
        _generate(each)
    return time.perf_counter() - started


def generation_apart(rounds: int, progress: Progress) -> dict[str, Any]:
    """The default report's kernels generated apart and in turn, ``rounds`` times each,
    interleaved (in turn first in odd rounds): medians in seconds and their ratio."""
    from replan.verification.core.domains import default_report_domains
    from replan.verification.runtime.forking import usable_cores

    every = list(default_report_domains(DEFAULT_POLICY))
    taken: dict[str, list[float]] = {"apart": [], "in_turn": []}
    for number in range(rounds):
        progress(f"explore bench: generating the default report's kernels, round {number + 1}")
        order = ("apart", "in_turn") if number % 2 == 0 else ("in_turn", "apart")
        for name in order:
            taken[name].append((_apart if name == "apart" else _in_turn)(every))
    apart, in_turn = statistics.median(taken["apart"]), statistics.median(taken["in_turn"])
    return {
        "domains": [each.name for each in every],
        "rounds": rounds,
        "cores": usable_cores(),
        "apart_s": round(apart, 2),
        "in_turn_s": round(in_turn, 2),
        "in_turn_to_apart": round(in_turn / max(apart, 1e-9), 2),
        "samples_s": {name: [round(s, 2) for s in runs] for name, runs in taken.items()},
    }


def generation_lines(figure: dict[str, Any] | None) -> list[str]:
    """The figure as the bench's table prints it."""
    if not figure:
        return []
    return [
        f"generating the default report's kernels ({', '.join(figure['domains'])}; medians "
        f"of {figure['rounds']} interleaved rounds, {figure['cores']} cores): apart "
        f"{figure['apart_s']} s, in turn {figure['in_turn_s']} s "
        f"({figure['in_turn_to_apart']}x)"
    ]
