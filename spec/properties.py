"""The contract as named properties: every rule of CONTRACT.md, one predicate each.

This is the specification the engines check, written once: the campaign evaluates
these functions after every operation, the explorer on every transition, and z3
proves every step from any state satisfying the invariants satisfies each of them,
with the limits symbolic (``verification/engines/prove/engine.py``, through the translator in
``verification/translate/symbolic.py``). The lockstep run of the generated controller against
the reference model checks the generator; only these check the design.

A call property looks at one call: the run ``before`` it, the event's argument, the
``answer`` (or the raised error's class) and the run ``after`` it (the vocabulary is
``spec/vocabulary.py``). Each restates its rule from the state before the call and
never asks the controller's own guards, so a guard or action that drifts from the
contract is caught: ``propose-revision-must-increase`` says what ``plan_outdated``
must decide, it does not call it. The names are the rule's own, so one ``grep``
finds a rule in the contract, here, in a counterexample and in a proof.

Read a property as "when the rule applies (the ``if``), this is what happens". This
module holds the rules of each event; the predicates they are written in are
``spec/readings.py``, the termination argument ``spec/termination.py``, and the
state invariants and auxiliary ones (the facts the inductive proofs need)
``spec/invariants.py``. ``CONTRACT`` gathers them all, and every name of those
modules is importable from here as well.
"""

from __future__ import annotations

import sys
from typing import Any

from replan.controller.records import ExecuteResult, InvalidInput, ObservationConflict, StopReason
from replan.controller.run import Run
from replan.spec import invariants, termination
from replan.spec.contract import Contract

# Every name of the modules the contract is written over is importable from here too.
from replan.spec.invariants import *  # noqa: F403
from replan.spec.readings import *  # noqa: F403
from replan.spec.readings import (
    FINAL,
    active,
    approved,
    approves_waiting_plan,
    completed_id,
    considered,
    counted_no_progress,
    latest,
    meaningful,
    needs_approval,
    new_observation,
    other_keys_unchanged,
    pending_id,
    prerequisites_passed,
    reaches_a_budget,
    rejected,
    runnable,
    stopped,
    well_formed_approval,
    well_formed_observation,
    well_formed_plan,
    well_formed_usage,
)
from replan.spec.termination import *  # noqa: F403
from replan.spec.vocabulary import call_property, raised, unchanged, with_entry, with_member

# ==== observe(obs): host-only ===========================================================


@call_property("observe-malformed-raises", "observe", rule="observe 1")
def observe_malformed_raises(before: Run, obs: Any, answer: Any, after: Run) -> bool:
    """A malformed observation raises InvalidInput and changes nothing, stopped or not;
    a well-formed one never raises it."""
    if well_formed_observation(obs, before):
        return not raised(answer, InvalidInput)
    return raised(answer, InvalidInput) and unchanged(before, after)


@call_property("observe-stopped-is-inert", "observe", rule="observe 2")
def observe_stopped_is_inert(before: Run, obs: Any, answer: Any, after: Run) -> bool:
    """A stopped run answers False and nothing changes (it is never revived)."""
    if not (well_formed_observation(obs, before) and stopped(before)):
        return True
    return answer is False and unchanged(before, after)


@call_property("observe-duplicate-is-no-progress", "observe", rule="observe 3")
def observe_duplicate_is_no_progress(before: Run, obs: Any, answer: Any, after: Run) -> bool:
    """The same content again under a seen (key, version) answers False: it counts
    as no progress when the policy counts duplicates, else changes nothing."""
    if not (
        well_formed_observation(obs, before)
        and active(before)
        and before._contents.get((obs.key, obs.version)) == (obs.state, obs.source)
    ):
        return True
    if not before.policy.count_duplicate_deliveries:
        return answer is False and unchanged(before, after)
    return (
        answer is False
        and counted_no_progress(before, after)
        and unchanged(before, after, "no_progress", "declared_state")
    )


@call_property("observe-conflict-raises", "observe", rule="observe 4")
def observe_conflict_raises(before: Run, obs: Any, answer: Any, after: Run) -> bool:
    """Other content under a seen (key, version) raises ObservationConflict and
    changes nothing."""
    if not (well_formed_observation(obs, before) and active(before)):
        return True
    remembered = before._contents.get((obs.key, obs.version))
    if remembered is None or remembered == (obs.state, obs.source):
        return True
    return raised(answer, ObservationConflict) and unchanged(before, after)


@call_property("observe-remembers-content", "observe", rule="observe 5")
def observe_remembers_content(before: Run, obs: Any, answer: Any, after: Run) -> bool:
    """A (key, version) never seen is remembered with its content, whatever else the
    observation does; no other content changes."""
    if not new_observation(before, obs):
        return True
    return after._contents == with_entry(
        before._contents, (obs.key, obs.version), (obs.state, obs.source)
    )


@call_property("observe-older-never-overwrites", "observe", rule="observe 6")
def observe_older_never_overwrites(before: Run, obs: Any, answer: Any, after: Run) -> bool:
    """A version older than the key's latest never overwrites it: False, the key's
    record as it was, and no progress."""
    if not (new_observation(before, obs) and latest(before, obs.key) > obs.version):
        return True
    return (
        answer is False
        and counted_no_progress(before, after)
        and unchanged(before, after, "contents", "no_progress", "declared_state")
    )


@call_property("observe-change-is-progress", "observe", rule="observe 7")
def observe_change_is_progress(before: Run, obs: Any, answer: Any, after: Run) -> bool:
    """A changed state is progress: recorded as the key's latest, evidence_revision
    rises by 1, the pending plan is invalidated, no_progress resets; answers True."""
    if not meaningful(before, obs):
        return True
    return (
        answer is True
        and after.evidence_state(obs.key) == obs.state
        and latest(after, obs.key) == obs.version
        and other_keys_unchanged(before, after, obs.key)
        and after.evidence_revision == before.evidence_revision + 1
        and after.pending is None
        and after.no_progress == 0
        and active(after)
        and unchanged(
            before,
            after,
            "evidence",
            "contents",
            "evidence_revision",
            "pending",
            "no_progress",
            "declared_state",
        )
    )


@call_property("observe-renumbered-is-no-progress", "observe", rule="observe 8")
def observe_renumbered_is_no_progress(before: Run, obs: Any, answer: Any, after: Run) -> bool:
    """The same state under a higher version (a renumbered Unknown, say) is recorded
    as the key's latest but is no progress: False, no new evidence revision."""
    if not (
        new_observation(before, obs)
        and latest(before, obs.key) <= obs.version
        and obs.state == before.evidence_state(obs.key)
    ):
        return True
    return (
        answer is False
        and latest(after, obs.key) == obs.version
        and after.evidence_state(obs.key) == obs.state
        and other_keys_unchanged(before, after, obs.key)
        and counted_no_progress(before, after)
        and unchanged(before, after, "evidence", "contents", "no_progress", "declared_state")
    )


# ==== propose(plan): model-facing =========================================================


@call_property("propose-stopped-is-inert", "propose", rule="propose 1")
def propose_stopped_is_inert(before: Run, plan: Any, answer: Any, after: Run) -> bool:
    """A stopped run answers False and nothing is consumed."""
    if not stopped(before):
        return True
    return answer is False and unchanged(before, after)


@call_property("propose-budget-stops", "propose", rule="propose 2")
def propose_budget_stops(before: Run, plan: Any, answer: Any, after: Run) -> bool:
    """With every proposal slot used, a proposal stops the run PlanLimit and answers
    False; it uses no slot."""
    if not (active(before) and before.proposals >= before.policy.max_proposals):
        return True
    return (
        answer is False
        and after._declared_state == StopReason.PLAN_LIMIT
        and unchanged(before, after, "declared_state")
    )


@call_property("propose-uses-a-slot", "propose", rule="propose 3")
def propose_uses_a_slot(before: Run, plan: Any, answer: Any, after: Run) -> bool:
    """Every proposal considered while active uses one slot, valid or not, and never
    stops the run."""
    if not considered(before):
        return True
    return after.proposals == before.proposals + 1 and active(after)


@call_property("propose-malformed-is-rejected", "propose", rule="propose 4")
def propose_malformed_is_rejected(before: Run, plan: Any, answer: Any, after: Run) -> bool:
    """A malformed proposal is rejected (model input never raises)."""
    if considered(before) and not well_formed_plan(plan):
        return rejected(before, answer, after)
    return True


@call_property("propose-revision-must-increase", "propose", rule="propose 4")
def propose_revision_must_increase(before: Run, plan: Any, answer: Any, after: Run) -> bool:
    """A plan whose revision does not exceed plan_revision is rejected."""
    if considered(before) and well_formed_plan(plan) and plan.revision <= before.plan_revision:
        return rejected(before, answer, after)
    return True


@call_property("propose-evidence-must-be-current", "propose", rule="propose 4")
def propose_evidence_must_be_current(before: Run, plan: Any, answer: Any, after: Run) -> bool:
    """A plan citing an evidence revision other than the current one is rejected."""
    if (
        considered(before)
        and well_formed_plan(plan)
        and plan.evidence_revision != before.evidence_revision
    ):
        return rejected(before, answer, after)
    return True


@call_property("propose-resource-must-be-allowed", "propose", rule="propose 4")
def propose_resource_must_be_allowed(before: Run, plan: Any, answer: Any, after: Run) -> bool:
    """A plan naming a resource the policy does not allow is rejected."""
    if (
        considered(before)
        and well_formed_plan(plan)
        and plan.resource not in before.policy.resource_set
    ):
        return rejected(before, answer, after)
    return True


@call_property("propose-step-must-be-declared", "propose", rule="propose 4")
def propose_step_must_be_declared(before: Run, plan: Any, answer: Any, after: Run) -> bool:
    """A plan naming a step the policy does not declare is rejected."""
    if (
        considered(before)
        and well_formed_plan(plan)
        and plan.step not in before.policy.requirements
    ):
        return rejected(before, answer, after)
    return True


@call_property("propose-completed-id-is-rejected", "propose", rule="propose 4")
def propose_completed_id_is_rejected(before: Run, plan: Any, answer: Any, after: Run) -> bool:
    """A plan whose id was already executed is rejected."""
    if considered(before) and well_formed_plan(plan) and plan.id in before._completed:
        return rejected(before, answer, after)
    return True


@call_property("propose-accepts-a-valid-plan", "propose", rule="propose 5")
def propose_accepts_a_valid_plan(before: Run, plan: Any, answer: Any, after: Run) -> bool:
    """A current, allowed, declared, new plan with a higher revision is accepted: it
    becomes pending (superseding another, whose id stays accepted, so executing it is
    StalePlan), plan_revision becomes its revision; answers True."""
    if not (
        considered(before)
        and well_formed_plan(plan)
        and plan.revision > before.plan_revision
        and plan.evidence_revision == before.evidence_revision
        and plan.resource in before.policy.resource_set
        and plan.step in before.policy.requirements
        and plan.id not in before._completed
    ):
        return True
    return (
        answer is True
        and after.pending == plan
        and after.plan_revision == plan.revision
        and after._accepted == with_member(before._accepted, plan.id)
        and active(after)
        and unchanged(
            before, after, "pending", "plan_revision", "proposals", "accepted", "declared_state"
        )
    )


# ==== execute(plan_id): model-facing ======================================================


@call_property("execute-replay-is-inert", "execute", rule="execute 1")
def execute_replay_is_inert(before: Run, plan_id: Any, answer: Any, after: Run) -> bool:
    """An id completed earlier answers Replayed and nothing changes, stopped or not:
    no id executes twice."""
    if not completed_id(before, plan_id):
        return True
    return answer is ExecuteResult.REPLAYED and unchanged(before, after)


@call_property("execute-stopped-answers-stopped", "execute", rule="execute 2")
def execute_stopped_answers_stopped(before: Run, plan_id: Any, answer: Any, after: Run) -> bool:
    """On a stopped run any other id answers Stopped and nothing changes."""
    if not (stopped(before) and not completed_id(before, plan_id)):
        return True
    return answer is ExecuteResult.STOPPED and unchanged(before, after)


@call_property("execute-stale-plan", "execute", rule="execute 3")
def execute_stale_plan(before: Run, plan_id: Any, answer: Any, after: Run) -> bool:
    """An id accepted once but no longer pending (invalidated or superseded) answers
    StalePlan and nothing changes."""
    if not (
        active(before)
        and not completed_id(before, plan_id)
        and not pending_id(before, plan_id)
        and type(plan_id) is str
        and plan_id in before._accepted
    ):
        return True
    return answer is ExecuteResult.STALE_PLAN and unchanged(before, after)


@call_property("execute-unknown-plan", "execute", rule="execute 3")
def execute_unknown_plan(before: Run, plan_id: Any, answer: Any, after: Run) -> bool:
    """An id never accepted (or not a string at all) answers UnknownPlan and nothing
    changes."""
    if not (
        active(before)
        and not completed_id(before, plan_id)
        and not pending_id(before, plan_id)
        and not (type(plan_id) is str and plan_id in before._accepted)
    ):
        return True
    return answer is ExecuteResult.UNKNOWN_PLAN and unchanged(before, after)


@call_property("execute-step-limit-stops", "execute", rule="execute 4")
def execute_step_limit_stops(before: Run, plan_id: Any, answer: Any, after: Run) -> bool:
    """With every step used, executing the pending plan stops the run StepLimit."""
    if not (runnable(before, plan_id) and before.steps >= before.policy.max_steps):
        return True
    return (
        answer is ExecuteResult.STEP_LIMIT
        and after._declared_state == StopReason.STEP_LIMIT
        and unchanged(before, after, "declared_state")
    )


@call_property("execute-denied-without-prerequisites", "execute", rule="execute 5")
def execute_denied_without_prerequisites(
    before: Run, plan_id: Any, answer: Any, after: Run
) -> bool:
    """A required key not Passed denies the step: PreconditionDenied, the plan stays
    pending, nothing changes."""
    if not (
        runnable(before, plan_id)
        and before.steps < before.policy.max_steps
        and not prerequisites_passed(before)
    ):
        return True
    return answer is ExecuteResult.PRECONDITION_DENIED and unchanged(before, after)


@call_property("execute-counts-one-step", "execute", rule="execute 6")
def execute_counts_one_step(before: Run, plan_id: Any, answer: Any, after: Run) -> bool:
    """The pending plan's step runs (approved, if its step needs approval): one step
    counted, its id completed, nothing pending; a completes_run step stops the run
    Completed, any other leaves it active. Answers Executed."""
    if not (
        runnable(before, plan_id)
        and before.steps < before.policy.max_steps
        and prerequisites_passed(before)
        and (approved(before) or not needs_approval(before))
    ):
        return True
    pending = before.pending
    assert pending is not None
    completes = pending.step in before.policy.terminal_steps
    return (
        answer is ExecuteResult.EXECUTED
        and after.steps == before.steps + 1
        and after._completed == with_member(before._completed, plan_id)
        and after.pending is None
        and (after._declared_state == StopReason.COMPLETED) == completes
        and (completes or active(after))
        and unchanged(before, after, "steps", "completed", "pending", "declared_state")
    )


@call_property("execute-waits-for-approval", "execute", rule="approval 1")
def execute_waits_for_approval(before: Run, plan_id: Any, answer: Any, after: Run) -> bool:
    """A step that needs approval, its prerequisites Passed, does not run until a
    person approves the plan: AwaitingApproval, no step used, the plan still pending
    and the run awaiting approval."""
    if not (
        runnable(before, plan_id)
        and before.steps < before.policy.max_steps
        and prerequisites_passed(before)
        and needs_approval(before)
        and not approved(before)
    ):
        return True
    return (
        answer is ExecuteResult.AWAITING_APPROVAL
        and after._declared_state == "awaiting_approval"
        and unchanged(before, after, "declared_state")
    )


@call_property("execute-needs-approval", "execute", rule="approval 1")
def execute_needs_approval(before: Run, plan_id: Any, answer: Any, after: Run) -> bool:
    """No step that needs approval executes unless its plan was approved."""
    if answer is not ExecuteResult.EXECUTED or before.pending is None:
        return True
    return approved(before) or before.pending.step not in before.policy.approval_steps


# ==== approve(approval): host-only ========================================================


@call_property("approve-malformed-raises", "approve", rule="approval 2")
def approve_malformed_raises(before: Run, approval: Any, answer: Any, after: Run) -> bool:
    """A malformed approval raises InvalidInput and changes nothing, stopped or not."""
    if well_formed_approval(approval):
        return not raised(answer, InvalidInput)
    return raised(answer, InvalidInput) and unchanged(before, after)


@call_property("approve-only-the-waiting-plan", "approve", rule="approval 2")
def approve_only_the_waiting_plan(before: Run, approval: Any, answer: Any, after: Run) -> bool:
    """An approval of the waiting plan with its exact digest is accepted: True, the
    run approved, nothing else changes. Any other (no plan waiting, another id,
    another digest, a stopped run) is refused: False, nothing changes."""
    if not well_formed_approval(approval):
        return True
    if approves_waiting_plan(before, approval):
        return (
            answer is True
            and after._declared_state == "approved"
            and unchanged(before, after, "declared_state")
        )
    return answer is False and unchanged(before, after)


@call_property("approval-is-for-the-exact-plan", rule="approval 3")
def approval_is_for_the_exact_plan(
    event: str, before: Run, argument: Any, answer: Any, after: Run
) -> bool:
    """An approved run's pending plan is the one approved, content and all: the
    approval is given only by an approve of that plan's digest, and any change of the
    pending plan (a new proposal accepted, a meaningful observation) takes it away."""
    if not approved(after):
        return True
    if approved(before):
        return after.pending == before.pending
    return (
        event == "approve"
        and well_formed_approval(argument)
        and approves_waiting_plan(before, argument)
        and after.pending == before.pending
    )


# ==== charge(usage): host-only =============================================================


@call_property("charge-malformed-raises", "charge", rule="budget 1")
def charge_malformed_raises(before: Run, usage: Any, answer: Any, after: Run) -> bool:
    """A malformed usage raises InvalidInput and changes nothing, stopped or not; a
    well-formed one never raises, however large."""
    if well_formed_usage(usage):
        return not raised(answer, InvalidInput)
    return raised(answer, InvalidInput) and unchanged(before, after)


@call_property("charge-stopped-is-inert", "charge", rule="budget 2")
def charge_stopped_is_inert(before: Run, usage: Any, answer: Any, after: Run) -> bool:
    """A stopped run answers False and nothing changes (it is never revived)."""
    if not (well_formed_usage(usage) and stopped(before)):
        return True
    return answer is False and unchanged(before, after)


@call_property("charge-counts-against-each-budget", "charge", rule="budget 3")
def charge_counts_against_each_budget(before: Run, usage: Any, answer: Any, after: Run) -> bool:
    """An active run counts the usage against each budget the policy sets, and only
    those; answers True. Nothing else changes but the stop it may cause."""
    if not (well_formed_usage(usage) and active(before)):
        return True
    policy = before.policy
    return (
        answer is True
        and after._tokens == before._tokens + (usage.tokens if policy.max_tokens > 0 else 0)
        and after._cost == before._cost + (usage.cost if policy.max_cost > 0 else 0)
        and after._elapsed_ms
        == before._elapsed_ms + (usage.elapsed_ms if policy.max_wall_ms > 0 else 0)
        and unchanged(before, after, "tokens", "cost", "elapsed_ms", "declared_state")
    )


@call_property("charge-exhausted-budget-stops", "charge", rule="budget 4")
def charge_exhausted_budget_stops(before: Run, usage: Any, answer: Any, after: Run) -> bool:
    """Reaching a budget stops the run BudgetExhausted; a charge within every budget
    leaves the run where it was."""
    if not (well_formed_usage(usage) and active(before)):
        return True
    if reaches_a_budget(before, usage):
        return after._declared_state == StopReason.BUDGET_EXHAUSTED
    return after._declared_state == before._declared_state


# ==== cancel(), stopping and the trace ========================================================


@call_property("cancel-stops-an-active-run", "cancel", rule="cancel")
def cancel_stops_an_active_run(before: Run, answer: Any, after: Run) -> bool:
    """Cancel stops an active run Canceled; on a stopped run nothing changes."""
    if active(before):
        return (
            answer is None
            and after._declared_state == StopReason.CANCELED
            and unchanged(before, after, "declared_state")
        )
    return answer is None and unchanged(before, after)


@call_property("stop-absorbing", rule="stopping")
def stop_absorbing(before: Run, answer: Any, after: Run) -> bool:
    """Once stopped, the stop reason and every counter, revision, plan and evidence
    record stay as they were, and nothing but False, None, Replayed or Stopped (or an
    input error) comes out."""
    if not stopped(before):
        return True
    return unchanged(before, after) and (
        answer is False
        or answer is None
        or answer is ExecuteResult.REPLAYED
        or answer is ExecuteResult.STOPPED
        or raised(answer, InvalidInput)
    )


@call_property("trace-one-record-per-call", rule="trace")
def trace_one_record_per_call(
    event: str, argument: Any, answer: Any, after: Run, appended: Any
) -> bool:
    """Every call appends exactly one trace record: the operation, its argument, its
    result (or the error's class), and the evidence revision and stop reason after
    it. Rejections and raised errors are traced too."""
    if len(appended) != 1:
        return False
    record = appended[0]
    return (
        record[0] == event
        and record[1] is argument
        and record[2] == answer
        and record[3] == after.evidence_revision
        and (record[4] in FINAL) == stopped(after)
        and (active(after) or record[4] == after._declared_state)
    )


# ==== the contract ==========================================================================

#: Every property, in the order they are declared: this module's rules of each event,
#: then termination's, then the invariants. The contract the engines check.
CONTRACT = Contract.defined_in(sys.modules[__name__], termination, invariants)
