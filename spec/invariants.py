"""The contract's invariants: the state a fresh run starts in, the safety rules
every reachable state keeps, the auxiliary facts the inductive proofs need, and the
policy loader's defaults.

The call properties (``spec/properties.py``) say what one call does; these say what
holds of the run between calls, which is what z3 assumes of the pre-state when it
proves a step from any state satisfying them.
"""

from __future__ import annotations

from typing import Any

from replan.controller.records import EvidenceState, ExecuteResult, StopReason
from replan.controller.run import Run
from replan.spec.readings import (
    PASSED,
    active,
    completed_id,
    latest,
    meaningful,
    pending_id,
    prerequisites_passed,
    stopped,
)
from replan.spec.vocabulary import (
    auxiliary_invariant,
    call_property,
    initial_property,
    policy_property,
    raised,
    state_invariant,
    unchanged,
)


@initial_property("initial-state", rule="state of one run")
def initial_state(run: Run, policy: Any) -> bool:
    """A run starts under the policy it was given, with evidence_revision 1,
    plan_revision 0, no plan pending, every counter 0, no stop reason, and nothing
    recorded, remembered, accepted or completed."""
    return (
        run.policy is policy
        and run.evidence_revision == 1
        and run.plan_revision == 0
        and run.pending is None
        and run.steps == 0
        and run.proposals == 0
        and run.no_progress == 0
        and run._tokens == 0
        and run._cost == 0
        and run._elapsed_ms == 0
        and active(run)
        and all(
            latest(run, k) == 0 and run.evidence_state(k) == EvidenceState.UNKNOWN
            for k in run.policy.keys
        )
        and run._contents == {}
        and run._accepted == set()
        and run._completed == set()
    )


# ==== the contract's safety invariants ======================================================


@call_property("commit-grounded", "execute", rule="invariant")
def commit_grounded(before: Run, plan_id: Any, answer: Any, after: Run) -> bool:
    """Every executed step had all its required keys Passed when it ran."""
    if answer is not ExecuteResult.EXECUTED:
        return True
    return pending_id(before, plan_id) and prerequisites_passed(before)


@call_property("revision-honest", rule="invariant")
def revision_honest(event: str, before: Run, argument: Any, answer: Any, after: Run) -> bool:
    """evidence_revision rises by exactly 1 on a meaningful observation and never
    otherwise; a renumbered same-state observation never raises it."""
    if event != "observe":
        return after.evidence_revision == before.evidence_revision
    rise = 1 if meaningful(before, argument) else 0
    return after.evidence_revision == before.evidence_revision + rise


@call_property("replay-inert", "execute", rule="invariant")
def replay_inert(before: Run, plan_id: Any, answer: Any, after: Run) -> bool:
    """Replayed changes nothing; no id executes twice."""
    if answer is ExecuteResult.REPLAYED:
        return unchanged(before, after) and completed_id(before, plan_id)
    if answer is ExecuteResult.EXECUTED:
        return not completed_id(before, plan_id)
    return True


@call_property("rejection-atomic", rule="invariant")
def rejection_atomic(event: str, before: Run, answer: Any, after: Run) -> bool:
    """A rejected call or a raised error changes nothing beyond the documented
    counters and stop."""
    if raised(answer):
        return unchanged(before, after)
    if event == "propose" and answer is False:
        return unchanged(before, after, "proposals", "declared_state")
    if event == "approve" and answer is False:
        return unchanged(before, after)
    if event == "execute" and answer is not ExecuteResult.EXECUTED:
        return unchanged(before, after, "declared_state")
    if event == "observe" and answer is False:
        return all(
            after.evidence_state(k) == before.evidence_state(k) for k in before.policy.keys
        ) and unchanged(before, after, "no_progress", "contents", "evidence", "declared_state")
    return True


@call_property("completed-iff-terminal-step", rule="invariant")
def completed_iff_terminal_step(event: str, before: Run, answer: Any, after: Run) -> bool:
    """The run stops with Completed exactly when a completes_run step executed."""
    newly = (
        before._declared_state != StopReason.COMPLETED
        and after._declared_state == StopReason.COMPLETED
    )
    if event != "execute":
        return not newly
    terminal = (
        answer is ExecuteResult.EXECUTED
        and before.pending is not None
        and before.pending.step in before.policy.terminal_steps
    )
    return newly == terminal


@state_invariant("step-bound", rule="invariant")
def step_bound(run: Run) -> bool:
    """steps <= max_steps."""
    return run.steps <= run.policy.max_steps


@state_invariant("budget-bound", rule="budget 4")
def budget_bound(run: Run) -> bool:
    """An active run is within every budget the policy sets; a dimension without a
    limit is never counted."""
    policy = run.policy
    return (
        (run._tokens < policy.max_tokens if policy.max_tokens > 0 else run._tokens == 0)
        and (run._cost < policy.max_cost if policy.max_cost > 0 else run._cost == 0)
        and (
            run._elapsed_ms < policy.max_wall_ms if policy.max_wall_ms > 0 else run._elapsed_ms == 0
        )
    ) or (
        stopped(run)
        and (
            (policy.max_tokens > 0 or run._tokens == 0)
            and (policy.max_cost > 0 or run._cost == 0)
            and (policy.max_wall_ms > 0 or run._elapsed_ms == 0)
        )
    )


@state_invariant("proposal-bound", rule="invariant")
def proposal_bound(run: Run) -> bool:
    """proposals <= max_proposals."""
    return run.proposals <= run.policy.max_proposals


@state_invariant("pending-current", rule="invariant")
def pending_current(run: Run) -> bool:
    """A pending plan cites the current evidence revision."""
    return run.pending is None or run.pending.evidence_revision == run.evidence_revision


@state_invariant("latest-is-newest", rule="invariant")
def latest_is_newest(run: Run) -> bool:
    """The latest record of a key has the highest version seen for it, and that
    version's content is remembered."""
    return all(version <= latest(run, key) for key, version in run._contents) and all(
        (key, latest(run, key)) in run._contents
        for key in run.policy.keys
        if key in run._latest_version
    )


# ==== auxiliary invariants: what the inductive proofs need ====================================


@auxiliary_invariant("counters-in-range")
def counters_in_range(run: Run) -> bool:
    """evidence_revision >= 1; plan_revision, steps, proposals, no_progress >= 0."""
    return (
        run.evidence_revision >= 1
        and run.plan_revision >= 0
        and run.steps >= 0
        and run.proposals >= 0
        and run.no_progress >= 0
    )


@auxiliary_invariant("no-progress-below-limit")
def no_progress_below_limit(run: Run) -> bool:
    """An active run has counted fewer calls without progress than the limit."""
    return stopped(run) or run.no_progress < run.policy.no_progress_limit


@auxiliary_invariant("passed-tracks-known")
def passed_tracks_known(run: Run) -> bool:
    """A key is in the passed set exactly when its latest state is Passed."""
    return all((k in run._passed) == (run.evidence_state(k) == PASSED) for k in run.policy.keys)


@auxiliary_invariant("pending-matches-state")
def pending_matches_state(run: Run) -> bool:
    """Idle has no pending plan; every other active state has one, naming a declared
    step and an allowed resource, with a revision no higher than plan_revision, and its
    id accepted."""
    if run._declared_state == "idle":
        return run.pending is None
    if active(run):
        return (
            run.pending is not None
            and run.pending.step in run.policy.requirements
            and run.pending.resource in run.policy.resource_set
            and run.pending.revision <= run.plan_revision
            and run.pending.id in run._accepted
        )
    return True


@auxiliary_invariant("waiting-plan-is-runnable")
def waiting_plan_is_runnable(run: Run) -> bool:
    """A plan awaiting approval, or approved, needs approval and would run: its
    prerequisites Passed and a step left (nothing that changes either keeps it)."""
    if run._declared_state not in ("awaiting_approval", "approved"):
        return True
    return (
        run.pending is not None
        and run.pending.step in run.policy.approval_steps
        and run.steps < run.policy.max_steps
        and prerequisites_passed(run)
    )


@auxiliary_invariant("pending-not-completed")
def pending_not_completed(run: Run) -> bool:
    """The pending plan's id has never been executed."""
    return run.pending is None or run.pending.id not in run._completed


@auxiliary_invariant("known-are-recorded")
def known_are_recorded(run: Run) -> bool:
    """A key with a known state has a latest version."""
    return all(k in run._latest_version or k not in run._known for k in run.policy.keys)


@auxiliary_invariant("public-view-honest")
def public_view_honest(run: Run) -> bool:
    """The read-only view shows the run's own fields (what a host reads is what the
    controller decides on)."""
    return (
        run.evidence_revision == run._evidence_revision
        and run.plan_revision == run._plan_revision
        and run.steps == run._steps
        and run.proposals == run._proposals
        and run.no_progress == run._no_progress
        and run.pending == run._pending
    )


# ==== the policy ============================================================================

#: The smallest valid policy document: every limit left to its default.
MINIMAL_POLICY: dict[str, Any] = {
    "evidence": {"keys": ["k"]},
    "resources": {"allowed": ["r"]},
    "steps": [{"name": "s", "completes_run": True}],
}


@policy_property("policy-defaults", rule="vocabulary")
def policy_defaults(load: Any) -> bool:
    """A policy that leaves its limits out gets the contract's: max_steps 4,
    max_proposals 2 * max_steps (following a max_steps it does give),
    no_progress_limit 3, count_duplicate_deliveries true, and no budget."""
    default = load(MINIMAL_POLICY)
    six_steps = load({**MINIMAL_POLICY, "limits": {"max_steps": 6}})
    return (
        default.max_steps == 4
        and default.max_proposals == 2 * default.max_steps
        and six_steps.max_proposals == 12
        and default.no_progress_limit == 3
        and default.count_duplicate_deliveries is True
        and default.max_tokens == default.max_cost == default.max_wall_ms == 0
    )
