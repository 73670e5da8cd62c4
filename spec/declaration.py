"""The declaration: the controller's states and guarded transitions, in priority order.

This is the single source of truth for *structure*. ``replan generate`` reads it
through python-statemachine's introspection and writes ``controller/_generated.py``;
``spec.reference.ReferenceController`` runs it as the reference model. Guard and action
names resolve on ``controller.run.Run`` (the model), which gives each its meaning.

Read a transition as: in SOURCE, on EVENT, the first transition whose guard holds
fires, runs its action (whose return value is the event's answer) and moves to TARGET;
``stay`` is an internal self-transition (a rejection or a bookkeeping step that
leaves the declared state as it was). Input validation (a malformed observation
raises ``InvalidInput``) happens before any transition is chosen.

Entering a final state stops the run with the state's value as the stop reason.
python-statemachine admits no transition out of a final state, so what each event
answers in a stopped run is declared once, in ``Replanning.interface``: nothing
changes, observe, propose, approve and charge answer False, execute answers Replayed for a
completed id and Stopped otherwise, cancel does nothing.
"""

from __future__ import annotations

from typing import ClassVar

from statemachine import State, StateMachine
from statemachine.transition_list import TransitionList

from replan.controller.records import StopReason
from replan.spec.model import EventInterface

#: A row's target that is the state it leaves (an internal self-transition).
STAY = None


def every(states: tuple[State, ...], *rows: tuple[State | None, str, str]) -> TransitionList:
    """The same rows, in this priority order, out of each of ``states``: what every
    active state does alike is written once (and the generator emits it once). A row
    is (target or ``STAY``, guard or "", action)."""
    declared = []
    for state in states:
        for target, cond, action in rows:
            guard = {"cond": cond} if cond else {}
            if target is STAY:
                declared.append(state.to.itself(internal=True, on=action, **guard))
            else:
                declared.append(state.to(target, on=action, **guard))
    combined: TransitionList = declared[0]
    for transitions in declared[1:]:
        combined = combined | transitions
    return combined


class Replanning(StateMachine):
    """The bounded evidence-driven replanning controller (CONTRACT.md).

    Every transition, in priority order per state and event (rendered from the class
    itself when it is defined, so it cannot go stale):

    {statechart:table}
    """

    # ---- states -----------------------------------------------------------------
    idle = State("Idle", initial=True, value="idle")  # active, no plan pending
    pending = State("Pending", value="pending")  # active, one plan pending
    awaiting_approval = State("AwaitingApproval", value="awaiting_approval")  # its step needs approval
    approved = State("Approved", value="approved")  # the pending plan, exactly, approved
    completed = State("Completed", final=True, value=StopReason.COMPLETED)
    no_new_evidence = State("NoNewEvidence", final=True, value=StopReason.NO_NEW_EVIDENCE)
    step_limit = State("StepLimit", final=True, value=StopReason.STEP_LIMIT)
    plan_limit = State("PlanLimit", final=True, value=StopReason.PLAN_LIMIT)
    canceled = State("Canceled", final=True, value=StopReason.CANCELED)
    budget_exhausted = State("BudgetExhausted", final=True, value=StopReason.BUDGET_EXHAUSTED)

    # ---- observe(obs): host-only; every active state alike --------------------------
    observe = every(
        (idle, pending, awaiting_approval, approved),
        # a duplicate delivery (same content under a seen key and version)
        (no_new_evidence, "duplicate_delivery and counts_duplicates and exhausts_no_progress", "count_no_progress"),
        (STAY, "duplicate_delivery and counts_duplicates", "count_no_progress"),
        (STAY, "duplicate_delivery", "ignore_duplicate"),
        # other content under a seen key and version: raises ObservationConflict
        (STAY, "conflicting_content", "refuse_conflict"),
        # an older version never overwrites a newer one
        (no_new_evidence, "older_than_latest and exhausts_no_progress", "remember_older"),
        (STAY, "older_than_latest", "remember_older"),
        # a changed state is progress: new evidence revision, any pending plan invalidated
        (idle, "changes_state", "record_meaningful"),
        # the same state renumbered is not progress
        (no_new_evidence, "exhausts_no_progress", "record_renumbered"),
        (STAY, "", "record_renumbered"),
    )

    # ---- propose(plan): model-facing; every proposal considered uses a slot ---------
    propose = every(
        (idle, pending, awaiting_approval, approved),
        (plan_limit, "proposals_exhausted", "refuse_plan"),
        # rejected: nothing changes but the slot it used
        (STAY, "plan_malformed", "reject_plan"),
        (STAY, "plan_outdated", "reject_plan"),
        (STAY, "evidence_stale", "reject_plan"),
        (STAY, "resource_not_allowed", "reject_plan"),
        (STAY, "step_unknown", "reject_plan"),
        (STAY, "plan_completed", "reject_plan"),
        # accepted: it becomes the pending plan (superseding another, and its approval)
        (pending, "", "accept_plan"),
    )

    # ---- execute(plan_id): model-facing ---------------------------------------------
    execute = (
        idle.to.itself(internal=True, cond="id_completed", on="answer_replayed")
        | idle.to.itself(internal=True, cond="was_accepted", on="answer_stale")
        | idle.to.itself(internal=True, on="answer_unknown")
        | pending.to.itself(internal=True, cond="id_completed", on="answer_replayed")
        | pending.to.itself(internal=True, cond="not is_pending_id and was_accepted", on="answer_stale")
        | pending.to.itself(internal=True, cond="not is_pending_id", on="answer_unknown")
        | pending.to(step_limit, cond="steps_exhausted", on="answer_step_limit")
        | pending.to.itself(internal=True, cond="not prerequisites_passed", on="deny_precondition")
        | pending.to(awaiting_approval, cond="needs_approval", on="await_approval")
        | pending.to(completed, cond="completes_run", on="execute_step")
        | pending.to(idle, on="execute_step")
        # a waiting plan runs only once approved; its evidence cannot change meanwhile
        # (a meaningful observation leaves the state), so neither can its gate
        | awaiting_approval.to.itself(internal=True, cond="id_completed", on="answer_replayed")
        | awaiting_approval.to.itself(internal=True, cond="not is_pending_id and was_accepted", on="answer_stale")
        | awaiting_approval.to.itself(internal=True, cond="not is_pending_id", on="answer_unknown")
        | awaiting_approval.to.itself(internal=True, on="await_approval")
        | approved.to.itself(internal=True, cond="id_completed", on="answer_replayed")
        | approved.to.itself(internal=True, cond="not is_pending_id and was_accepted", on="answer_stale")
        | approved.to.itself(internal=True, cond="not is_pending_id", on="answer_unknown")
        | approved.to(completed, cond="completes_run", on="execute_step")
        | approved.to(idle, on="execute_step")
    )

    # ---- approve(approval): host-only; only the waiting plan, by its exact digest --------
    approve = (
        awaiting_approval.to(approved, cond="approval_matches", on="accept_approval")
        | every((idle, pending, awaiting_approval, approved), (STAY, "", "refuse_approval"))
    )

    # ---- charge(usage): host-only; the budgets the policy sets --------------------------
    charge = every(
        (idle, pending, awaiting_approval, approved),
        (budget_exhausted, "sets_a_budget and exhausts_budget", "record_charge"),
        (STAY, "", "record_charge"),
    )

    # ---- cancel(): host-only ----------------------------------------------------------
    cancel = every((idle, pending, awaiting_approval, approved), (canceled, "", "cancel_run"))

    #: Each event's one parameter and answer type, the input check run before any
    #: transition is chosen, and its answer in a final state (which python-statemachine
    #: lets admit no transition): a stopped run changes nothing and is never revived.
    interface: ClassVar[dict[str, EventInterface]] = {
        "observe": EventInterface("obs", "Observation", "bool", "check_observation", "refuse_stopped"),
        "propose": EventInterface("plan", "Plan", "bool", None, "refuse_stopped", "model"),
        "execute": EventInterface(
            "plan_id", "str", "ExecuteResult", None, "answer_stopped", "model"
        ),
        "approve": EventInterface("approval", "Approval", "bool", "check_approval", "refuse_stopped"),
        "charge": EventInterface("usage", "Usage", "bool", "check_usage", "refuse_stopped"),
        "cancel": EventInterface(None, None, "None", None, "cancel_run"),
    }
