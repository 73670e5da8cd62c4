"""Termination: the rank a run has left to spend, and the two properties that make
it a bound.

Every model-facing call either changes nothing, stops the run or lowers the rank
(``calls-lower-the-rank``), and an active run's rank stays in range
(``rank-bounded``); so between two pieces of new evidence a run makes at most
``termination_bound`` calls that change it. Kept apart from the per-event rules
because it is one argument about the whole run, not a rule of one call.
"""

from __future__ import annotations

from typing import Any

from replan.controller.policy import Policy
from replan.controller.run import Run
from replan.spec.readings import active, meaningful, stopped
from replan.spec.vocabulary import call_property, state_invariant, unchanged


def rank(run: Run) -> int:
    """What a run has left to spend: 3 per proposal slot, 1 per step, 1 per call
    without progress, and 2 for a plan pending (1 while it awaits approval). Every
    model-facing call and every observation that teaches nothing lowers it or
    changes nothing (``calls-lower-the-rank``); it is never negative while the run is
    active (``rank-bounded``). So between two pieces of new evidence, a run makes at
    most ``termination_bound`` calls that change it, the last of them the one that
    stops it."""
    return (
        slots_left(run)
        + slots_left(run)
        + slots_left(run)
        + (run.policy.max_steps - run.steps)
        + (run.policy.no_progress_limit - run.no_progress)
        + (
            2
            if run._declared_state == "pending"
            else 1
            if run._declared_state == "awaiting_approval"
            else 0
        )
    )


def slots_left(run: Run) -> int:
    """Proposal slots the run has left."""
    return run.policy.max_proposals - run.proposals


def termination_bound(policy: Policy) -> int:
    """The initial rank plus the stopping call: 3 * max_proposals + max_steps +
    no_progress_limit + 1 (a fresh run is idle)."""
    return (
        policy.max_proposals
        + policy.max_proposals
        + policy.max_proposals
        + policy.max_steps
        + policy.no_progress_limit
        + 1
    )


@call_property("calls-lower-the-rank", rule="termination")
def calls_lower_the_rank(event: str, before: Run, argument: Any, answer: Any, after: Run) -> bool:
    """A propose, an execute, or an observation that is not progress (new evidence
    is the host's to give) either changes nothing, stops the run, or lowers its rank:
    a model cannot keep a run going by calling, only by being given new evidence."""
    if not active(before) or event not in ("propose", "execute", "observe"):
        return True
    if event == "observe" and meaningful(before, argument):
        return True
    return unchanged(before, after) or stopped(after) or rank(after) < rank(before)


@state_invariant("rank-bounded", rule="termination")
def rank_bounded(run: Run) -> bool:
    """An active run's rank is never negative, and never above the initial one."""
    return stopped(run) or 0 <= rank(run) <= termination_bound(run.policy) - 1
