"""The declaration of the effect boundary: the life of one tool call, as a state machine.

This is the single source of truth for the boundary's *structure*, as
``spec/declaration.py`` is for the controller's: the phases one call goes through
from the model's request to its answer, the events that move it, where a crash can
stop the work, what a restore leaves, and the owner's decisions about a call in
doubt. ``verification.boundary.model`` moves every call of a run through these
transitions (a move the declaration does not have is a modelling error, raised at
once), the crash points the explorer and the campaign inject are the states marked
below, and the campaign's coverage is counted against the transitions.

Read a row as: in SOURCE, on EVENT, the call moves to TARGET. The decisions (which
event happens) belong to the controller, the executor and the journal; the model
says which one, and this table says it is a move a call can make.

The crash points (CONTRACT.md, "The effect boundary") are the states in which
something durable was just written: a crash there stops the work, and the restored
call is in the state ``restored`` names.
"""

from __future__ import annotations

from typing import ClassVar

from statemachine import State, StateMachine


class CallLife(StateMachine):
    """The life of one tool call at the effect boundary (CONTRACT.md)."""

    # ---- states -----------------------------------------------------------------
    requested = State("Requested", initial=True)  # the call reached the guard; nothing written
    proposed = State("Proposed")  # the controller holds the call as its pending plan
    awaiting = State("AwaitingApproval")  # the executor keeps the call for the owner
    approval_recorded = State("ApprovalRecorded")  # the journal holds the owner's approval
    approved = State("Approved")  # the controller approved the plan
    decided = State("Decided")  # the controller answered Executed (logged)
    intended = State("Intended")  # the intent is written; the effect has not run
    effected = State("Effected")  # the effect ran; no receipt yet
    receipted = State("Receipted")  # the receipt is written; the run not yet charged
    charged = State("Charged")  # the run is charged; the answer not yet read
    answered = State("Answered")  # the model read the call's result
    refused = State("Refused")  # answered with a refusal; nothing ran
    in_doubt = State("InDoubt")  # an intent without a receipt, or no record of a decided call
    abandoned = State("Abandoned")  # the owner: the in-doubt attempt did not happen

    # ---- the request, up to the decision ---------------------------------------
    propose = requested.to(proposed) | refused.to(proposed)
    await_approval = proposed.to(awaiting) | awaiting.to.itself() | approval_recorded.to(awaiting)
    record_approval = awaiting.to(approval_recorded) | approved.to(approval_recorded)
    approve = approval_recorded.to(approved)
    # the host approved the plan at the controller only: no record binds the call, so
    # it is refused until the call itself is approved
    approve_plan = awaiting.to(approved) | proposed.to(approved)
    decide = proposed.to(decided) | approved.to(decided)
    # a refusal: the controller, the executor or the guard said no; nothing ran
    refuse = (
        requested.to(refused)
        | refused.to.itself()
        | proposed.to(proposed)
        | awaiting.to(awaiting)
        | approval_recorded.to(approval_recorded)
        | approved.to(approved)
        | receipted.to(receipted)
        | charged.to(charged)
        | in_doubt.to(in_doubt)
        | answered.to(answered)
        | abandoned.to(abandoned)
    )
    # a plan superseded, invalidated by new evidence, or a stopped run: the call's
    # approval (if any) is void; a later request of it is refused or proposed anew
    invalidate = (
        proposed.to(refused)
        | awaiting.to(refused)
        | approval_recorded.to(refused)
        | approved.to(refused)
    )

    # ---- from the decision to the answer ----------------------------------------
    # (from requested: the host ran the executor alone, with no controller to decide)
    write_intent = (
        decided.to(intended)
        | abandoned.to(intended)
        | requested.to(intended)
        | refused.to(intended)
    )
    run_effect = intended.to(effected)
    write_receipt = effected.to(receipted)
    # a restored guard charges a call it answers from its receipt (at least once)
    charge = receipted.to(charged) | charged.to.itself() | answered.to(answered)
    answer = charged.to(answered) | receipted.to(answered) | answered.to.itself()

    # ---- a crash and what restore leaves ---------------------------------------
    crash = (
        proposed.to(proposed)
        | awaiting.to(proposed)  # the executor's memory of it is gone: asked again
        | approval_recorded.to(proposed)
        | approved.to(approved)
        | decided.to(in_doubt)
        | intended.to(in_doubt)
        | effected.to(in_doubt)
        | receipted.to(receipted)
        | charged.to(charged)
    )

    # ---- the owner's decisions about a call in doubt ----------------------------
    resolve = in_doubt.to(answered)
    abandon = in_doubt.to(abandoned)

    #: Where a crash can stop the work: the states in which something durable was just
    #: written (CONTRACT.md names them), in the order one call reaches them.
    crash_points: ClassVar[tuple[str, ...]] = (
        "proposed",
        "approval_recorded",
        "approved",
        "decided",
        "intended",
        "effected",
        "receipted",
        "charged",
    )


class LifeError(ValueError):
    """A move the declaration does not have (a modelling error)."""


def _table() -> dict[tuple[str, str], str]:
    """(source, event) -> target, read from the declaration's own transitions."""
    table: dict[tuple[str, str], str] = {}
    for state in CallLife.states:
        for transition in state.transitions:
            for event in transition.events:
                table[(transition.source.id, str(event))] = transition.target.id
    return table


#: Every declared move of one call.
MOVES: dict[tuple[str, str], str] = _table()
#: The states, in declaration order, and the initial one.
STATES: tuple[str, ...] = tuple(state.id for state in CallLife.states)
INITIAL: str = next(state.id for state in CallLife.states if state.initial)
#: The states a call is in once its effect has run and its receipt is written.
DONE: frozenset[str] = frozenset({"receipted", "charged", "answered"})


def move(phase: str, event: str) -> str:
    """The phase a call in ``phase`` moves to on ``event``; ``LifeError`` when the
    declaration has no such move."""
    try:
        return MOVES[(phase, event)]
    except KeyError:
        raise LifeError(
            f"a call in {phase!r} cannot {event!r} (CallLife declares no such move)"
        ) from None


__all__ = ["DONE", "INITIAL", "MOVES", "STATES", "CallLife", "LifeError", "move"]
