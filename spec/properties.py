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

Read a property as "when the rule applies (the ``if``), this is what happens". The
state invariants and the auxiliary ones (the facts the inductive proofs need) follow.
"""

from __future__ import annotations

from typing import Any

from replan.controller.policy import Policy
from replan.controller.records import (
    Approval,
    EvidenceState,
    ExecuteResult,
    InvalidInput,
    Observation,
    ObservationConflict,
    Plan,
    StopReason,
    Usage,
    in_bounds,
    plan_digest,
)
from replan.controller.run import Run
from replan.spec.contract import Contract
from replan.spec.vocabulary import (
    auxiliary_invariant,
    call_property,
    initial_property,
    policy_property,
    raised,
    state_invariant,
    unchanged,
    with_entry,
    with_member,
)

PASSED = EvidenceState.PASSED
FINAL = frozenset(StopReason)

# ---- reading a run (each a single expression, so every engine reads it alike) --------


def stopped(run: Run) -> bool:
    """The run has a stop reason."""
    return run._declared_state in FINAL


def active(run: Run) -> bool:
    return run._declared_state not in FINAL


def latest(run: Run, key: str) -> int:
    """The key's latest recorded version (0: never observed)."""
    return run._latest_version.get(key, 0)


def well_formed_observation(obs: Any, run: Run) -> bool:
    """observe rule 1: an Observation of a declared key, an int version in
    1..LARGEST_INT (exactly an int: a bool or an int subclass is not), an
    EvidenceState, a non-empty source."""
    return (
        type(obs) is Observation
        and type(obs.key) is str
        and obs.key in run.policy.key_set
        and type(obs.version) is int
        and obs.version >= 1
        and in_bounds(obs.version)
        and type(obs.state) is EvidenceState
        and type(obs.source) is str
        and obs.source != ""
    )


def new_observation(run: Run, obs: Any) -> bool:
    """A well-formed observation, on an active run, of a (key, version) never seen."""
    return (
        well_formed_observation(obs, run)
        and active(run)
        and run._contents.get((obs.key, obs.version)) is None
    )


def meaningful(run: Run, obs: Any) -> bool:
    """observe rule 7's case: new, not older than the key's latest, another state."""
    return (
        new_observation(run, obs)
        and latest(run, obs.key) <= obs.version
        and obs.state != run.evidence_state(obs.key)
    )


def other_keys_unchanged(before: Run, after: Run, key: str) -> bool:
    return all(
        after.evidence_state(k) == before.evidence_state(k)
        and latest(after, k) == latest(before, k)
        for k in before.policy.keys
        if k != key
    )


def counted_no_progress(before: Run, after: Run) -> bool:
    """ "Count no progress": one more; reaching the limit stops the run NoNewEvidence."""
    reaches = before.no_progress + 1 >= before.policy.no_progress_limit
    return after.no_progress == before.no_progress + 1 and after._declared_state == (
        StopReason.NO_NEW_EVIDENCE if reaches else before._declared_state
    )


def well_formed_plan(plan: Any) -> bool:
    """propose rule 4: a Plan with a non-empty str id, int revisions (exactly: a bool
    is not an int) of magnitude at most LARGEST_INT, and str step and resource."""
    return (
        type(plan) is Plan
        and type(plan.id) is str
        and plan.id != ""
        and type(plan.revision) is int
        and in_bounds(plan.revision)
        and type(plan.evidence_revision) is int
        and in_bounds(plan.evidence_revision)
        and type(plan.step) is str
        and type(plan.resource) is str
    )


def considered(run: Run) -> bool:
    """propose rule 3: an active run with a proposal slot left."""
    return active(run) and run.proposals < run.policy.max_proposals


def rejected(before: Run, answer: Any, after: Run) -> bool:
    """propose rule 4: False, and nothing changes but the slot it used."""
    return answer is False and unchanged(before, after, "proposals")


def completed_id(run: Run, plan_id: Any) -> bool:
    return type(plan_id) is str and plan_id in run._completed


def pending_id(run: Run, plan_id: Any) -> bool:
    return type(plan_id) is str and run.pending is not None and run.pending.id == plan_id


def runnable(run: Run, plan_id: Any) -> bool:
    """execute rules 4-6 apply: an active run, ``plan_id`` the pending plan's."""
    return active(run) and not completed_id(run, plan_id) and pending_id(run, plan_id)


def approved(run: Run) -> bool:
    """A person approved the pending plan (the run's approval is its declared state:
    ``approval-is-for-the-exact-plan`` says what being in it means)."""
    return run._declared_state == "approved"


def needs_approval(run: Run) -> bool:
    """The pending plan's step needs a person's approval."""
    pending = run.pending
    assert pending is not None
    return pending.step in run.policy.approval_steps


def prerequisites_passed(run: Run) -> bool:
    """Every key the pending plan's step requires is Passed: a per-resource key, of
    the resource the plan names (its own fact, never another resource's)."""
    pending = run.pending
    assert pending is not None
    return all(
        run.evidence_state(k) == PASSED for k in run.policy.requirements[pending.step]
    ) and all(
        run.evidence_state(k) == PASSED
        for k in run.policy.resource_requirements[pending.step][pending.resource]
    )


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


def well_formed_approval(approval: Any) -> bool:
    """An Approval of non-empty strings (exactly: a str subclass is not one)."""
    return (
        type(approval) is Approval
        and type(approval.plan_id) is str
        and approval.plan_id != ""
        and type(approval.digest) is str
        and approval.digest != ""
    )


def approves_waiting_plan(run: Run, approval: Any) -> bool:
    """The run awaits approval and ``approval`` names its pending plan by id and by
    the SHA-256 of its content."""
    return (
        run._declared_state == "awaiting_approval"
        and run.pending is not None
        and approval.plan_id == run.pending.id
        and approval.digest == plan_digest(run.pending)
    )


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


def well_formed_usage(usage: Any) -> bool:
    """A Usage of ints in 0..LARGEST_INT (exactly: a bool or an int subclass is not
    one)."""
    return (
        type(usage) is Usage
        and type(usage.tokens) is int
        and usage.tokens >= 0
        and in_bounds(usage.tokens)
        and type(usage.cost) is int
        and usage.cost >= 0
        and in_bounds(usage.cost)
        and type(usage.elapsed_ms) is int
        and usage.elapsed_ms >= 0
        and in_bounds(usage.elapsed_ms)
    )


def reaches_a_budget(run: Run, usage: Usage) -> bool:
    """Adding ``usage`` reaches a limit the policy sets (a limit of 0 is none)."""
    return (
        0 < run.policy.max_tokens <= run._tokens + usage.tokens
        or 0 < run.policy.max_cost <= run._cost + usage.cost
        or 0 < run.policy.max_wall_ms <= run._elapsed_ms + usage.elapsed_ms
    )


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


# ==== termination ===========================================================================


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


# ==== the state of one run ===================================================================


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


# ==== the contract ==========================================================================

#: Every property above, in the order they are declared: the contract the engines check.
CONTRACT = Contract.collect(globals())
