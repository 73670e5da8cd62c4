"""Mutants judged in fresh processes, one verdict at a time as each comes back.

Why one place: the controller's and the boundary's mutation matrices both judge their
mutants in a pool of ``spawn`` processes (z3 and the generated mutant modules start
fresh in each), by mutant id, and report each verdict in the matrix's order as it
arrives; only how a worker starts and what a verdict is differ.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

Item = TypeVar("Item")
Verdict = TypeVar("Verdict")


def judged_in_processes(
    chosen: Sequence[Item],
    ids: Sequence[str],
    workers: int,
    start: tuple[Callable[..., None], tuple[Any, ...]],
    judge: Callable[[str], dict[str, Any]],
    verdict: Callable[[Item, dict[str, Any]], Verdict],
    progress: Callable[[int, int, Verdict], None] | None,
) -> list[Verdict]:
    """``verdict(item, judge(id))`` for each of ``chosen`` (by ``ids``), ``judge``
    run in ``workers`` spawned processes each started by ``start`` (initializer,
    arguments); ``progress(number, total, verdict)`` as each arrives, in order."""
    initializer, arguments = start
    context = multiprocessing.get_context("spawn")
    verdicts: list[Verdict] = []
    with context.Pool(workers, initializer=initializer, initargs=arguments) as pool:
        found = pool.imap(judge, list(ids))
        for number, (item, judged) in enumerate(zip(chosen, found, strict=True), start=1):
            verdicts.append(verdict(item, judged))
            if progress is not None:
                progress(number, len(chosen), verdicts[-1])
    return verdicts


__all__ = ["judged_in_processes"]
