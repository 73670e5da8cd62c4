"""A campaign's memory bounded where it grows: in Hypothesis's engine, which keeps
what it learned about every test case until its test ends.

Why: measured on the ``thorough`` profile (``replan bench --tool campaign``), a
campaign's resident memory grew about 3.7 KB per operation for as long as it ran, and
almost none of it was the campaign's own records (``verification.core.visited``):
tracemalloc put it in Hypothesis's conjecture engine (its cache of recent test cases
with their choice spans and mutator groups, and its tree of every choice sequence it
has tried, which lets it avoid repeats). All of that belongs to one engine, which
lives for one ``run_state_machine_as_test`` call, and Hypothesis offers no setting
that bounds it.

So a campaign's budget is run as consecutive engines of at most
``EXAMPLES_PER_ENGINE`` examples each (``engine_budgets``), the first on the
campaign's seed and each later one on a seed derived from it (``engine_seed``), all
recording into one ``Recorder`` and sharing one example database. Each engine's memory
is released when it ends, so memory is bounded by one engine's share whatever the
budget. The ``ci`` profile (200 examples) is one engine, exactly as before. A larger
budget gives up Hypothesis's avoidance of repeats across engines (a repeated example
is run again, and counted), and each engine starts again with its simplest example
and its warm-up of small ones (about a tenth of its share), so an example is a few
per cent shorter on average. A failure stops the campaign in the engine that found
it, which shrinks it as before.

Owns: the split of a budget and the seeds. Leaves to others: running it (``campaign``).
"""

from __future__ import annotations

from typing import Final

#: Examples one Hypothesis engine runs before the next one takes over (None: one
#: engine for the whole budget).
EXAMPLES_PER_ENGINE: Final = 250


def engine_budgets(examples: int, per_engine: int | None = EXAMPLES_PER_ENGINE) -> list[int]:
    """``examples`` split into consecutive engines' budgets of at most ``per_engine``."""
    if per_engine is not None and per_engine < 1:
        raise ValueError(f"examples per engine: {per_engine}; expected at least 1")
    if per_engine is None or examples <= per_engine:
        return [examples]
    whole, rest = divmod(examples, per_engine)
    return [per_engine] * whole + ([rest] if rest else [])


def engine_seed(seed: int, number: int) -> int:
    """The seed of the campaign's ``number``-th engine (0: the campaign's own)."""
    return seed if number == 0 else (seed * 1_000_003 + number * 7_919) % 2**32


__all__ = ["EXAMPLES_PER_ENGINE", "engine_budgets", "engine_seed"]
