"""The second acceptance boundary: from "this step may happen now" to an effect that
happened once, with the owner's authority, on the approved content, with a receipt.

The controller's ``Executed`` is a decision, not an effect. This module owns what
stands between that decision and the world, none of which the planner can talk its
way through:

- **authority** (``Grant``): the resources and steps the run's *owner* allows. The
  planner never writes a grant; an operation outside it is ``Denied`` and its effect
  never runs.
- **content binding** (``Operation.digest()``): a SHA-256 over the RFC 8785 canonical
  JSON of plan id, step, resource and arguments. The first record of a plan id (its
  intent, or the owner's approval of the call) binds its digest; the same plan id with
  any other content is a ``ContentMismatch``, so an approved call cannot carry
  different arguments. The digest is also the effect's idempotency key.
- **receipts** (``controller.journal``): an intent is recorded before the effect and a
  receipt (digest, result, time) after it. A repeated request for a completed
  operation is ``Replayed`` with the stored receipt and the effect does not run again.
- **in doubt**: an intent without a receipt (the process died, or the effect raised,
  between the two records) is answered ``InDoubt`` with its digest, never rerun and
  never reported done, until the owner says what happened (``resolve``: it did, here
  is the result; ``abandon``: it did not, and its next request runs it once more).
- **approval of a call** (``controller.approval``): a step that needs approval runs
  only the call the owner approved, by its digest; ``perform`` keeps the calls the
  controller answered ``AwaitingApproval`` for (``Executor.awaiting``) and refuses a
  plan approved at the controller with no recorded approval of a call.

``perform`` wires the controller and the executor in the only safe order, so a host
cannot forget it: the grant and the content are checked first (a refused operation
consumes nothing in the controller), then the controller is asked, and only an
``Executed`` answer reaches the effect; a ``Replayed`` answer returns the stored
receipt without calling it.

A journal holds one namespace of plan ids: give each run its own journal, or plan ids
that are unique across the runs sharing one.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from enum import StrEnum
from typing import Any, NamedTuple, Protocol

import rfc8785

from replan.controller.journal import (
    Entry,
    InMemoryJournal,
    Intent,
    Journal,
    JournalError,
    JSONValue,
    Receipt,
    bound,
    canonical_json,
    check_json,
    fold,
)
from replan.controller.records import ExecuteResult, InvalidInput, Plan

#: The domain tag of an operation digest: bump it if the encoding ever changes (v1 was
#: sorted-key JSON; v2 is RFC 8785, so any JSON library gives the same digest).
DIGEST_DOMAIN = "replan.operation.v2"
#: The integers RFC 8785 carries exactly (IEEE 754 doubles).
_SAFE_INTEGER = 2**53 - 1


def _beyond_rfc8785(value: object, root: str, path: tuple[object, ...] = ()) -> None:
    """Raise ``InvalidInput`` naming the path of an integer RFC 8785 cannot carry
    (``value`` already passed ``check_json``)."""
    if isinstance(value, dict):
        for key, item in value.items():
            _beyond_rfc8785(item, root, (*path, key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _beyond_rfc8785(item, root, (*path, index))
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > _SAFE_INTEGER:
        where = root + "".join(f"[{step!r}]" for step in path)
        raise InvalidInput(
            f"{where}: {value if value.bit_length() < 200 else 'an integer'} is beyond "
            "RFC 8785 canonical JSON (integers up to 2**53 - 1 in size)"
        )


def canonical_content(content: Mapping[str, Any], root: str) -> str:
    """The RFC 8785 canonical JSON of ``content`` (checked JSON), as text."""
    try:
        return rfc8785.dumps(content).decode()
    except rfc8785.CanonicalizationError:
        _beyond_rfc8785(content, root)
        raise InvalidInput(f"{root}: not representable in RFC 8785 canonical JSON") from None


class Outcome(StrEnum):
    """Every answer the executor gives."""

    EXECUTED = "Executed"
    REPLAYED = "Replayed"
    DENIED = "Denied"
    CONTENT_MISMATCH = "ContentMismatch"
    IN_DOUBT = "InDoubt"


def _names(values: Iterable[str], field: str) -> frozenset[str]:
    if isinstance(values, str):
        raise InvalidInput(f"Grant.{field}: a collection of names, not the string {values!r}")
    names = frozenset(values)
    for name in names:
        if not isinstance(name, str) or not name:
            raise InvalidInput(f"Grant.{field}: {name!r} is not a non-empty string")
    return names


class Grant:
    """The resources and steps the run's owner allows its effects to touch. Written by
    the owner (the host), never by the planner; immutable."""

    __slots__ = ("resources", "steps")

    resources: frozenset[str]
    steps: frozenset[str]

    def __init__(self, resources: Iterable[str], steps: Iterable[str]) -> None:
        object.__setattr__(self, "resources", _names(resources, "resources"))
        object.__setattr__(self, "steps", _names(steps, "steps"))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("a Grant is immutable")

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Grant)
            and self.resources == other.resources
            and self.steps == other.steps
        )

    def __hash__(self) -> int:
        return hash((self.resources, self.steps))

    def __repr__(self) -> str:
        return f"Grant(resources={sorted(self.resources)!r}, steps={sorted(self.steps)!r})"

    def denial(self, operation: Operation) -> str | None:
        """Why ``operation`` is outside this grant (None: it is inside)."""
        if operation.resource not in self.resources:
            return (
                f"resource {operation.resource!r} is not granted "
                f"(granted: {', '.join(sorted(self.resources)) or 'none'})"
            )
        if operation.step not in self.steps:
            return (
                f"step {operation.step!r} is not granted "
                f"(granted: {', '.join(sorted(self.steps)) or 'none'})"
            )
        return None


class Operation:
    """What an effect will do: a plan id, its step and resource, and JSON arguments.

    The canonical encoding is fixed at construction, and ``arguments`` hands out a
    fresh copy of it, so nothing can change the content after its digest was taken.
    """

    __slots__ = ("_digest", "encoding", "plan_id", "resource", "step")

    plan_id: str
    step: str
    resource: str
    encoding: str
    _digest: str

    def __init__(
        self,
        plan_id: str,
        step: str,
        resource: str,
        arguments: Mapping[str, JSONValue] | None = None,
    ) -> None:
        for field, value in (("plan_id", plan_id), ("step", step), ("resource", resource)):
            if not isinstance(value, str) or not value:
                raise InvalidInput(f"Operation.{field}: {value!r} is not a non-empty string")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            raise InvalidInput(f"Operation.arguments: {arguments!r} is not a mapping")
        arguments = dict(arguments)
        check_json(arguments, "Operation.arguments")
        _beyond_rfc8785(arguments, "Operation.arguments")
        encoding = canonical_content(
            {"arguments": arguments, "plan_id": plan_id, "resource": resource, "step": step},
            "Operation.arguments",
        )
        digest = hashlib.sha256(f"{DIGEST_DOMAIN}\n{encoding}".encode()).hexdigest()
        for name, value in (
            ("plan_id", plan_id),
            ("step", step),
            ("resource", resource),
            ("encoding", encoding),
            ("_digest", digest),
        ):
            object.__setattr__(self, name, value)

    @classmethod
    def for_plan(cls, plan: Plan, arguments: Mapping[str, JSONValue] | None = None) -> Operation:
        """The operation that carries out ``plan`` with ``arguments``."""
        return cls(plan.id, plan.step, plan.resource, arguments)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("an Operation is immutable")

    @property
    def arguments(self) -> dict[str, Any]:
        """A fresh copy of the arguments exactly as digested (RFC 8785 writes ``1.0``
        as ``1``: the copy holds the int, which is the same JSON value)."""
        content: dict[str, Any] = json.loads(self.encoding)
        arguments: dict[str, Any] = content["arguments"]
        return arguments

    def digest(self) -> str:
        """SHA-256 (hex) of the domain tag and the canonical encoding: the call
        digest an approval names, and the idempotency key handed to the effect."""
        return self._digest

    def intent(self, time: float) -> Intent:
        """The journal's record of this operation at ``time``."""
        return Intent(self.plan_id, self._digest, self.encoding, time)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Operation) and self.encoding == other.encoding

    def __hash__(self) -> int:
        return hash(self._digest)

    def __repr__(self) -> str:
        return f"Operation({self.plan_id!r}, {self.step!r}, {self.resource!r}, {self.arguments!r})"


#: An effect does the work and returns a JSON result (stored in the receipt). If it
#: raises, the operation is left in doubt and the error propagates to the host.
Effect = Callable[[Operation], JSONValue]
#: An effect that is a coroutine (an agent framework's tool runs as one).
AsyncEffect = Callable[[Operation], Awaitable[JSONValue]]


class Execution(NamedTuple):
    """The executor's answer about one operation.

    ``digest`` is the requested operation's; ``recorded`` is the digest the journal
    holds for the plan id (differs on ``ContentMismatch``; the in-doubt intent's on
    ``InDoubt``); ``receipt`` is set on ``Executed`` and ``Replayed`` only.
    """

    outcome: Outcome
    plan_id: str
    digest: str
    receipt: Receipt | None
    recorded: str | None
    reason: str


class Executor:
    """Runs an operation's effect at most once, with authority, on bound content, and
    keeps its receipt in a journal (in memory unless one is given)."""

    __slots__ = ("awaiting", "clock", "journal")

    def __init__(
        self, journal: Journal | None = None, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.journal: Journal = InMemoryJournal() if journal is None else journal
        self.clock = clock
        #: The calls the controller answered ``AwaitingApproval`` for, by plan id: what
        #: the owner reads before approving one (``approve_call``). Kept in memory: a
        #: call awaiting approval has run nothing, so after a restart its retry shows
        #: it again.
        self.awaiting: dict[str, Operation] = {}

    # ---- the boundary ----------------------------------------------------------------

    def run(self, operation: Operation, grant: Grant, effect: Effect) -> Execution:
        """Check the grant, claim the plan id in the journal (the intent record), run
        the effect, record the receipt. Anything already recorded for the plan id is
        answered from the journal instead, and the effect is not called."""
        claimed = self._claim(operation, grant)
        if isinstance(claimed, Execution):
            return claimed
        # From here until ``complete`` returns the operation is in doubt: an error or
        # a crash leaves the intent without a receipt, and it is never retried alone.
        return self._complete(operation, effect(operation))

    async def run_async(self, operation: Operation, grant: Grant, effect: AsyncEffect) -> Execution:
        """``run`` for an effect that is a coroutine (an agent framework's tool): the
        same claim before it and the same receipt after it, so the same guarantees."""
        claimed = self._claim(operation, grant)
        if isinstance(claimed, Execution):
            return claimed
        return self._complete(operation, await effect(operation))

    def replay(self, operation: Operation, grant: Grant) -> Execution:
        """Answer from the journal only, never calling an effect: for a plan id the
        controller answered ``Replayed`` for."""
        denied = self._denied(operation, grant)
        if denied is not None:
            return denied
        entry = self.journal.entry(operation.plan_id)
        if entry is None:
            return Execution(
                Outcome.IN_DOUBT,
                operation.plan_id,
                operation.digest(),
                None,
                None,
                f"plan {operation.plan_id!r} was completed by the controller but this "
                "journal holds no record of it: whether its effect ran is unknown here",
            )
        return self._answer_recorded(operation, entry)

    def check(self, operation: Operation, grant: Grant) -> Execution | None:
        """The refusal ``run`` would give without running anything (Denied; a
        ContentMismatch or InDoubt from the journal, the content bound by an approval
        included), or None. Writes nothing."""
        denied = self._denied(operation, grant)
        if denied is not None:
            return denied
        records = self.journal.records(operation.plan_id)
        entry = fold(records)
        if entry is not None and (entry.intent.digest != operation.digest() or entry.in_doubt):
            return self._answer_recorded(operation, entry)
        return self._unbound(operation, bound(records))

    # ---- the owner's view and decisions about in-doubt operations ---------------------

    def in_doubt(self) -> list[Intent]:
        """Every intent without a receipt, with its digest and encoded operation."""
        return [entry.intent for entry in self.journal.entries() if entry.receipt is None]

    def receipts(self) -> list[Receipt]:
        """Every receipt of a live entry, oldest intent first."""
        return [entry.receipt for entry in self.journal.entries() if entry.receipt is not None]

    def resolve(self, plan_id: str, result: JSONValue) -> Receipt:
        """The owner checked: the in-doubt effect of ``plan_id`` did happen, with
        ``result``. Records its receipt; later requests replay it."""
        entry = self.journal.entry(plan_id)
        if entry is None or entry.receipt is not None:
            raise JournalError(f"plan id {plan_id!r}: not in doubt, nothing to resolve")
        receipt = Receipt(plan_id, entry.intent.digest, stored_result(result), self.clock())
        self.journal.complete(receipt)
        return receipt

    def abandon(
        self, plan_id: str, reason: str = "", *, operation: Operation | None = None
    ) -> Intent:
        """The owner checked: the in-doubt effect of ``plan_id`` did not happen
        (``reason`` is recorded with the decision). Its next request runs the effect
        once more, with the same content. ``operation``: the call, when the journal
        holds no record of it (the controller completed it and the process stopped
        before its intent was written). ``JournalError`` when it is not in doubt."""
        unrecorded = None if operation is None else operation.intent(self.clock())
        if operation is not None and operation.plan_id != plan_id:
            raise JournalError(f"plan id {plan_id!r}: the operation names {operation.plan_id!r}")
        return self.journal.abandon(plan_id, self.clock(), reason, unrecorded)

    # ---- the pieces (named, so a mutant can break exactly one) ------------------------

    def _claim(self, operation: Operation, grant: Grant) -> Execution | Intent:
        """The grant, then the intent record: the claimed intent (the effect may run
        now), or the answer that stops it (Denied, or what the journal already holds)."""
        denied = self._denied(operation, grant)
        if denied is not None:
            return denied
        unbound = self._unbound(operation, self.journal.bound(operation.plan_id))
        if unbound is not None:
            return unbound
        intent = operation.intent(self.clock())
        existing = self.journal.claim(intent)
        if existing is not None:
            return self._answer_recorded(operation, existing)
        return intent

    def _complete(self, operation: Operation, result: object) -> Execution:
        """The receipt of an effect that returned ``result``."""
        digest = operation.digest()
        body = canonical_json(result, "result")
        receipt = Receipt(operation.plan_id, digest, json.loads(body), self.clock())
        self.journal.complete(receipt, body)
        return Execution(Outcome.EXECUTED, operation.plan_id, digest, receipt, digest, "executed")

    def _denied(self, operation: Operation, grant: Grant) -> Execution | None:
        reason = grant.denial(operation)
        if reason is None:
            return None
        return Execution(Outcome.DENIED, operation.plan_id, operation.digest(), None, None, reason)

    def _unbound(self, operation: Operation, binding: str | None) -> Execution | None:
        """``ContentMismatch`` when the plan id is bound to other content (None: it is
        bound to this operation's, or to nothing yet)."""
        digest = operation.digest()
        if binding is None or binding == digest:
            return None
        return Execution(
            Outcome.CONTENT_MISMATCH,
            operation.plan_id,
            digest,
            None,
            binding,
            f"plan {operation.plan_id!r} is bound to other content (digest "
            f"{binding[:12]}, this operation {digest[:12]})",
        )

    def _answer_recorded(self, operation: Operation, entry: Entry) -> Execution:
        digest = operation.digest()
        recorded = entry.intent.digest
        mismatch = self._unbound(operation, recorded)
        if mismatch is not None:
            return mismatch
        if entry.receipt is None:
            return Execution(
                Outcome.IN_DOUBT,
                operation.plan_id,
                digest,
                None,
                recorded,
                f"plan {operation.plan_id!r} has an intent (digest {recorded[:12]}) and no "
                "receipt: its effect may or may not have happened; the owner resolves or "
                "abandons it",
            )
        return Execution(
            Outcome.REPLAYED, operation.plan_id, digest, entry.receipt, recorded, "replayed"
        )


def stored_result(value: object) -> JSONValue:
    """The result as a receipt stores it (a canonical JSON copy)."""
    decoded: JSONValue = json.loads(canonical_json(value, "result"))
    return decoded


# ---- wiring the controller and the executor ---------------------------------------------


class Approver(Protocol):
    """What ``perform`` needs of a controller (``controller.Controller`` has it)."""

    @property
    def pending(self) -> Plan | None: ...

    def execute(self, plan_id: str) -> ExecuteResult: ...


class Performed(NamedTuple):
    """What ``perform`` did: the controller's answer (None when the executor refused
    before the controller was asked) and the executor's (None when the controller did
    not approve: nothing reached the effect)."""

    answer: ExecuteResult | None
    execution: Execution | None

    @property
    def outcome(self) -> Outcome | None:
        return None if self.execution is None else self.execution.outcome

    @property
    def receipt(self) -> Receipt | None:
        return None if self.execution is None else self.execution.receipt


def perform(
    controller: Approver,
    executor: Executor,
    operation: Operation,
    grant: Grant,
    effect: Effect,
) -> Performed:
    """Carry out ``operation`` for the controller's plan ``operation.plan_id``.

    1. The executor's refusals come first (``Denied``; ``ContentMismatch`` against the
       content the journal binds to the plan id, against the pending plan's step and
       resource, or for a plan the controller holds approved without a recorded
       approval of this call; ``InDoubt`` until the owner settles it): the controller
       is not asked, so a refused operation consumes no step.
    2. The controller decides. ``Executed``: the executor runs the effect (or, if its
       journal already completed this content, replays the receipt). ``Replayed``: the
       executor answers from its journal and the effect is not called, unless the
       owner abandoned the call's in-doubt attempt: then it runs once more (the step
       was counted when the controller first answered ``Executed``, and is not counted
       again). ``AwaitingApproval``: the executor keeps the call for the owner to
       approve (``controller.approval.approve_call``). Anything else: nothing reaches the executor.
    """
    decided = _decide(controller, executor, operation, grant)
    if isinstance(decided, Performed):
        return decided
    answer, rerun = decided
    return _ran(answer, rerun, executor.run(operation, grant, effect))


async def perform_async(
    controller: Approver,
    executor: Executor,
    operation: Operation,
    grant: Grant,
    effect: AsyncEffect,
) -> Performed:
    """``perform`` for a coroutine effect (``controller.middleware`` runs an agent
    framework's tool with it): the same decisions in the same order; only the effect
    is awaited."""
    decided = _decide(controller, executor, operation, grant)
    if isinstance(decided, Performed):
        return decided
    answer, rerun = decided
    return _ran(answer, rerun, await executor.run_async(operation, grant, effect))


def _ran(answer: ExecuteResult, rerun: str | None, execution: Execution) -> Performed:
    """The answer of a run; ``rerun``: the owner's reason, when it runs a call whose
    in-doubt attempt the owner abandoned."""
    if rerun is not None and execution.outcome is Outcome.EXECUTED:
        why = rerun or "no reason given"
        execution = execution._replace(
            reason=f"executed again: the owner abandoned its in-doubt attempt ({why})"
        )
    return Performed(answer, execution)


def _mismatch(operation: Operation, reason: str) -> Performed:
    return Performed(
        None,
        Execution(
            Outcome.CONTENT_MISMATCH, operation.plan_id, operation.digest(), None, None, reason
        ),
    )


def _decide(
    controller: Approver, executor: Executor, operation: Operation, grant: Grant
) -> Performed | tuple[ExecuteResult, str | None]:
    """Everything ``perform`` decides before the effect: the final answer, or the
    controller's answer and (for a rerun after an abandon) the owner's reason, when
    the effect is to run now."""
    refusal = executor.check(operation, grant)
    if refusal is not None:
        return Performed(None, refusal)
    pending = controller.pending
    if pending is not None and pending.id == operation.plan_id:
        if (pending.step, pending.resource) != (operation.step, operation.resource):
            return _mismatch(
                operation,
                f"plan {pending.id!r} was approved for step {pending.step!r} on "
                f"{pending.resource!r}; the operation names step {operation.step!r} on "
                f"{operation.resource!r}",
            )
        if (
            getattr(controller, "declared_state", None) == "approved"
            and executor.journal.approved(operation.plan_id) is None
        ):
            # the content an approval binds is compared with the rest (``check``)
            return _mismatch(
                operation,
                f"plan {pending.id!r} is approved, but no approval of a call is recorded "
                "for it: approve the call (approve_call), not only its plan",
            )
    answer = controller.execute(operation.plan_id)
    if answer == ExecuteResult.EXECUTED:
        return answer, None
    if answer == ExecuteResult.REPLAYED:
        reason = executor.journal.abandoned(operation.plan_id)
        if reason is not None:
            return answer, reason
        return Performed(answer, executor.replay(operation, grant))
    if answer == ExecuteResult.AWAITING_APPROVAL:
        executor.awaiting[operation.plan_id] = operation
    return Performed(answer, None)
