"""The second acceptance boundary: from "this step may happen now" to an effect that
happened once, with the owner's authority, on the approved content, with a receipt.

The controller's ``Executed`` is a decision, not an effect. This module owns what
stands between that decision and the world, none of which the planner can talk its
way through:

- **authority** (``Grant``): the resources and steps the run's *owner* allows. The
  planner never writes a grant; an operation outside it is ``Denied`` and its effect
  never runs.
- **content binding** (``Operation.digest()``): a SHA-256 over a canonical encoding of
  plan id, step, resource and arguments. The first intent recorded for a plan id binds
  its digest; the same plan id with any other content is a ``ContentMismatch``, so an
  approved identity cannot carry different arguments.
- **receipts** (``controller.journal``): an intent is recorded before the effect and a
  receipt (digest, result, time) after it. A repeated request for a completed
  operation is ``Replayed`` with the stored receipt and the effect does not run again.
- **in doubt**: an intent without a receipt (the process died, or the effect raised,
  between the two records) is answered ``InDoubt`` with its digest, never rerun and
  never reported done, until the owner says what happened (``resolve``: it did, here
  is the result; ``abandon``: it did not, it may run again).

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

from replan.controller.journal import (
    Entry,
    InMemoryJournal,
    Intent,
    Journal,
    JournalError,
    JSONValue,
    Receipt,
    canonical_json,
    check_json,
)
from replan.controller.records import ExecuteResult, InvalidInput, Plan

#: The domain tag of an operation digest: bump it if the encoding ever changes.
DIGEST_DOMAIN = "replan.operation.v1"
# The canonical encoding (as ``controller.journal.canonical_json``) of checked content.
_CONTENT = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


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
        encoding = _CONTENT.encode(
            {"arguments": arguments, "plan_id": plan_id, "resource": resource, "step": step}
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
        """A fresh copy of the arguments exactly as digested."""
        content: dict[str, Any] = json.loads(self.encoding)
        arguments: dict[str, Any] = content["arguments"]
        return arguments

    def digest(self) -> str:
        """SHA-256 (hex) of the domain tag and the canonical encoding."""
        return self._digest

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

    __slots__ = ("clock", "journal")

    def __init__(
        self, journal: Journal | None = None, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.journal: Journal = InMemoryJournal() if journal is None else journal
        self.clock = clock

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
        ContentMismatch or InDoubt from the journal), or None. Writes nothing."""
        denied = self._denied(operation, grant)
        if denied is not None:
            return denied
        entry = self.journal.entry(operation.plan_id)
        if entry is not None and (entry.intent.digest != operation.digest() or entry.in_doubt):
            return self._answer_recorded(operation, entry)
        return None

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

    def abandon(self, plan_id: str) -> Intent:
        """The owner checked: the in-doubt effect of ``plan_id`` did not happen. The
        plan id is free again (its next request runs the effect)."""
        return self.journal.abandon(plan_id, self.clock())

    # ---- the pieces (named, so a mutant can break exactly one) ------------------------

    def _claim(self, operation: Operation, grant: Grant) -> Execution | Intent:
        """The grant, then the intent record: the claimed intent (the effect may run
        now), or the answer that stops it (Denied, or what the journal already holds)."""
        denied = self._denied(operation, grant)
        if denied is not None:
            return denied
        intent = Intent(operation.plan_id, operation.digest(), operation.encoding, self.clock())
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

    def _answer_recorded(self, operation: Operation, entry: Entry) -> Execution:
        digest = operation.digest()
        recorded = entry.intent.digest
        if recorded != digest:
            return Execution(
                Outcome.CONTENT_MISMATCH,
                operation.plan_id,
                digest,
                None,
                recorded,
                f"plan {operation.plan_id!r} is bound to other content (digest "
                f"{recorded[:12]}, this operation {digest[:12]})",
            )
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
       journal or against the pending plan's step and resource; ``InDoubt`` until the
       owner settles it): the controller is not asked, so a refused operation consumes
       no step.
    2. The controller decides. ``Executed``: the executor runs the effect (or, if its
       journal already completed this content, replays the receipt). ``Replayed``: the
       executor answers from its journal and the effect is not called. Anything else:
       nothing reaches the executor.
    """
    decided = _decide(controller, executor, operation, grant)
    if isinstance(decided, Performed):
        return decided
    return Performed(decided, executor.run(operation, grant, effect))


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
    return Performed(decided, await executor.run_async(operation, grant, effect))


def _decide(
    controller: Approver, executor: Executor, operation: Operation, grant: Grant
) -> Performed | ExecuteResult:
    """Everything ``perform`` decides before the effect: the final answer, or
    ``Executed`` when the effect is to run now."""
    refusal = executor.check(operation, grant)
    if refusal is not None:
        return Performed(None, refusal)
    pending = controller.pending
    if (
        pending is not None
        and pending.id == operation.plan_id
        and (pending.step, pending.resource) != (operation.step, operation.resource)
    ):
        return Performed(
            None,
            Execution(
                Outcome.CONTENT_MISMATCH,
                operation.plan_id,
                operation.digest(),
                None,
                None,
                f"plan {pending.id!r} was approved for step {pending.step!r} on "
                f"{pending.resource!r}; the operation names step {operation.step!r} on "
                f"{operation.resource!r}",
            ),
        )
    answer = controller.execute(operation.plan_id)
    if answer == ExecuteResult.EXECUTED:
        return answer
    if answer == ExecuteResult.REPLAYED:
        return Performed(answer, executor.replay(operation, grant))
    return Performed(answer, None)
