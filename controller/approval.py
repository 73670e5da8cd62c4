"""The owner's approval of one call: what binds a step that needs approval to the exact
arguments a person read.

The controller approves *plans* (``Approval(plan id, plan_digest(plan))``: id,
revisions, step and resource). A plan does not carry the call's arguments, so an
approval of the plan alone would let the same call id run with any arguments. Here
the owner approves the *call*: ``Approval(call id, call digest)``, the digest being
``Operation.digest()`` (RFC 8785 over step, resource and arguments). ``approve_call``
checks it names a call the executor holds as awaiting approval, with that content,
still awaiting at the controller; records the approval in the journal (which binds the
call id to that content from then on: any other content is ``ContentMismatch``); and
only then approves the plan at the controller. Journal first: a crash between the two
leaves a recorded approval and a plan still waiting, which the call's retry and a
second approval complete; the other order would leave an approved plan whose
arguments nothing binds (``perform`` refuses to run it).

Leaves to ``controller.executor`` the binding checks on every request, and to the
controller what voids an approval (a superseded or invalidated plan, a stopped run).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from replan.controller.executor import Approver, Executor
from replan.controller.journal import JournalError
from replan.controller.records import Approval, InvalidInput, plan_digest


class ApprovingController(Approver, Protocol):
    """What ``approve_call`` needs of a controller (``controller.Controller`` has it)."""

    @property
    def declared_state(self) -> str: ...

    def approve(self, approval: Approval) -> bool: ...


class Approved(NamedTuple):
    """The answer to an approval of a call: accepted, or why not (one line)."""

    accepted: bool
    reason: str


def check_approval(approval: object) -> Approval:
    """``approval`` when it is an ``Approval`` of two non-empty strings; else
    ``InvalidInput`` naming the field (a host bug, like a malformed observation)."""
    if type(approval) is not Approval:
        raise InvalidInput(f"approval: expected an Approval, got {type(approval).__name__}")
    for field, value in zip(approval._fields, approval, strict=True):
        if type(value) is not str or value == "":
            raise InvalidInput(f"approval.{field}: expected a non-empty string, got {value!r:.80}")
    return approval


def approve_call(
    controller: ApprovingController, executor: Executor, approval: Approval
) -> Approved:
    """The owner approves one call: ``approval.plan_id`` is its call id and
    ``approval.digest`` its call digest (``Operation.digest()``: step, resource and
    arguments, as the call reached the executor). Refused, writing nothing: no such
    call awaits approval here, the digest is another content's, or the controller no
    longer holds the call waiting (superseded, invalidated, the run stopped).
    Accepted: the journal records the approval (binding the call id to that content),
    then the controller approves the plan. A malformed approval raises
    ``InvalidInput``."""
    plan_id, digest = check_approval(approval)
    operation = executor.awaiting.get(plan_id)
    if operation is None:
        return Approved(False, f"no call {plan_id!r} awaits approval")
    if digest != operation.digest():
        return Approved(
            False,
            f"digest {digest[:12]} is not the digest of the call awaiting approval "
            f"({operation.digest()[:12]}); nothing approved",
        )
    pending = controller.pending
    state = controller.declared_state
    if pending is None or pending.id != plan_id or state not in ("awaiting_approval", "approved"):
        del executor.awaiting[plan_id]
        return Approved(False, f"call {plan_id!r} no longer awaits approval (the run is {state})")
    try:
        executor.journal.approve(operation.intent(executor.clock()))
    except JournalError as error:
        return Approved(False, str(error))
    if state == "awaiting_approval" and not controller.approve(
        Approval(plan_id, plan_digest(pending))
    ):
        return Approved(False, f"the controller refused the approval of plan {plan_id!r}")
    del executor.awaiting[plan_id]
    return Approved(True, f"call {plan_id!r} approved (digest {digest[:12]})")
