"""How big the explorer's search will be, said before it starts, and how ``--workers
auto`` uses the cores: shards for the explorer, or the checks that need none of its
results run beside it."""

from __future__ import annotations

import json

from replan.controller.policy import DEFAULT_POLICY, Policy
from replan.verification.runtime.checkout import COMMITTED_EVIDENCE
from replan.verification.runtime.forking import usable_cores


def explorer_estimate(policy: Policy) -> str | None:
    """One line before an exploration larger than the default policy's: which bounds
    are larger, and the default's state count from the committed evidence (so the
    user knows what the minutes ahead are for). None when no bound is larger."""
    bounds = {
        "keys": (len(policy.keys), len(DEFAULT_POLICY.keys)),
        "max_steps": (policy.max_steps, DEFAULT_POLICY.max_steps),
        "max_proposals": (policy.max_proposals, DEFAULT_POLICY.max_proposals),
    }
    larger = [
        f"{name} {mine} (default {theirs})"
        for name, (mine, theirs) in bounds.items()
        if mine > theirs
    ]
    if not larger:
        return None
    states = default_explored_states()
    known = "" if states is None else f"; the default policy explores {states:,} states"
    return (
        f"explorer: bounds larger than the default policy's: {', '.join(larger)}{known}; "
        "each extra key or step multiplies the states, so expect minutes and more memory "
        "(progress follows)"
    )


def auto_workers(estimate: str | None) -> int:
    """``--workers auto``: two shards for a search larger than the default policy's
    (``estimate`` is not None) when this process may use two cores, else one. Two, not
    every core: two is what ``replan bench --explore`` measures paying on this kind
    of machine; ask for more with ``--workers N``."""
    if estimate is None:
        return 1
    return min(2, usable_cores())


def explorer_engine(engine: str) -> str:
    """``--engine auto``: the generated kernel, on every policy. It gives the Python
    explorer's report (the same states, transitions, coverage and counterexamples, the
    campaign's coverage measured against its states) and is several times faster past
    the default policy's bounds; on the default policy a first run, which generates
    it, is about as fast as the Python explorer, in more memory, and a run with it
    kept is faster (``replan bench --explore`` measures the three). A kernel the
    translation cannot make gives way to the Python explorer (``checks.explorer``)."""
    return "kernel" if engine == "auto" else engine


def beside_explorer(workers: int | None, estimate: str | None, engine: str = "python") -> bool:
    """The campaign and the boundary check run one after the other in a process of
    their own beside the explorer when it runs in one process (shards would take the
    cores): with ``--workers auto`` when this process may use two cores, and beside
    the kernel with ``--workers`` 2 or more too (its generation, which comes first,
    runs in processes of one core each, and its search is sharded only once no kernel
    is being generated). Their results are the same either way; only the wall-clock
    time changes."""
    if engine == "kernel":
        return (workers is None and usable_cores() >= 2) or (workers or 1) >= 2
    return workers is None and auto_workers(estimate) == 1 and usable_cores() >= 2


def default_explored_states() -> int | None:
    """The default policy's explored states, from the committed evidence/verify.json
    (None in an installation without it)."""
    try:
        document = json.loads((COMMITTED_EVIDENCE / "verify.json").read_text())
        check = next(c for c in document["checks"] if c["name"] == "explorer")
        return int(check["details"]["states"])
    except (OSError, ValueError, KeyError, StopIteration, TypeError):
        return None
