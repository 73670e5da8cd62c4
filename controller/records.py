"""The record types every layer shares: vocabulary, inputs and errors.

This module is stdlib-only and imports nothing else from the project, so the
generated controller, the declaration, the checkers and the renderers can all depend
on it without pulling in python-statemachine, z3 or Hypothesis.

Records are plain and cheap (``NamedTuple``): validation happens at the controller,
because a malformed observation is a host bug (loud) while a malformed plan is model
input (a rejected proposal that still uses a slot). See CONTRACT.md "Vocabulary".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from enum import StrEnum
from typing import Final, NamedTuple, TypeVar

_Function = TypeVar("_Function", bound=Callable[..., object])

#: The largest integer a run takes (a plan's revisions, an observation's version, a
#: usage's amounts) and a policy sets as a limit: 2**53 - 1, the largest that every
#: JSON reader holds exactly (JavaScript's numbers included). A run's snapshot, trace
#: and log are JSON; past this an integer could not be written (Python refuses to
#: print one of more than 4,300 digits) or would be read back as another number.
LARGEST_INT: Final = 2**53 - 1
#: ``in_bounds(n)``: ``-LARGEST_INT <= n <= LARGEST_INT`` for an int. A C-level test
#: (``range.__contains__``, constant time) rather than two comparisons: the translated
#: engines read a call of it on the input as a fact about the input, pinned to its
#: value, where a comparison with the constant would have to be held by their own
#: integers (SPIN's are 32 bits).
in_bounds: Final = range(-LARGEST_INT, LARGEST_INT + 1).__contains__


def opaque(function: _Function) -> _Function:
    """Marks a pure function whose result the z3 proofs treat as unknown but
    consistent: equal arguments give equal results, nothing else is assumed (a hash:
    what it computes is not the controller's business, only which value it names)."""
    function.__replan_opaque__ = True  # type: ignore[attr-defined]
    return function


class EvidenceState(StrEnum):
    """What is known about one evidence key. Unknown and Failed are never merged:
    Unknown calls for inspection, Failed calls for an owner."""

    UNKNOWN = "Unknown"
    PASSED = "Passed"
    FAILED = "Failed"


class StopReason(StrEnum):
    """Why a run stopped. The first one is kept forever."""

    COMPLETED = "Completed"
    NO_NEW_EVIDENCE = "NoNewEvidence"
    STEP_LIMIT = "StepLimit"
    PLAN_LIMIT = "PlanLimit"
    CANCELED = "Canceled"
    BUDGET_EXHAUSTED = "BudgetExhausted"


class ExecuteResult(StrEnum):
    """Every answer ``execute`` can give."""

    EXECUTED = "Executed"
    REPLAYED = "Replayed"
    STOPPED = "Stopped"
    UNKNOWN_PLAN = "UnknownPlan"
    STALE_PLAN = "StalePlan"
    STEP_LIMIT = "StepLimit"
    PRECONDITION_DENIED = "PreconditionDenied"
    AWAITING_APPROVAL = "AwaitingApproval"


#: The answers that mean a step's evidence admits it (the fixed workflow's
#: ReadyToCommit): it ran, or it waits only for a person's approval. The commit
#: equivalence compares these with ``decide``.
ADMITTED: frozenset[ExecuteResult] = frozenset(
    {ExecuteResult.EXECUTED, ExecuteResult.AWAITING_APPROVAL}
)


class Decision(StrEnum):
    """The fixed workflow's answer (``controller.workflow.decide``)."""

    INSPECT = "Inspect"
    NEEDS_OWNER = "NeedsOwner"
    READY_TO_COMMIT = "ReadyToCommit"


class Observation(NamedTuple):
    """A trusted fact about one evidence key, delivered by the host (never the model).

    Its *content* is ``(state, source)``; ``source`` is a label, not authentication.
    """

    key: str
    version: int
    state: EvidenceState
    source: str


class Plan(NamedTuple):
    """What the model proposes to do next. A plan never carries evidence: it only
    cites the evidence revision it was based on."""

    id: str
    revision: int
    evidence_revision: int
    step: str
    resource: str


class Approval(NamedTuple):
    """A person's approval of one waiting plan, delivered by the host (never the
    model): the plan's id and the SHA-256 of its content (``plan_digest``), so an
    approval names exactly what was read and cannot be reused for another plan."""

    plan_id: str
    digest: str


class Usage(NamedTuple):
    """What some work cost, delivered by the host (``charge``): tokens, cost in integer
    micro-units of the policy's currency, and elapsed wall-clock milliseconds. Time is
    an input, never read from a clock inside the controller, so a run stays
    deterministic and checkable. Each field an int >= 0."""

    tokens: int
    cost: int
    elapsed_ms: int


@opaque
def plan_digest(plan: Plan) -> str:
    """The SHA-256 of a plan's content: its fields as canonical JSON (what a reviewer
    approves, and what ``Approval.digest`` must repeat)."""
    content = json.dumps(list(plan), separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(content.encode()).hexdigest()


#: What kind of value each field of an event's record holds. The explorer's and the
#: campaign's inputs are drawn by kind (``spec/inputs.py``), and z3 abstracts each
#: kind as a sort: the policy's keys, steps and resources and the evidence states as
#: enumerations, an int field as an integer, any other string (an id, a source) as
#: one integer per distinct value, compared only for equality.
RECORD_KINDS: dict[str, dict[str, str]] = {
    "Observation": {"key": "key", "version": "version", "state": "evidence", "source": "source"},
    "Plan": {
        "id": "plan id",
        "revision": "revision",
        "evidence_revision": "evidence revision",
        "step": "step",
        "resource": "resource",
    },
    "Approval": {"plan_id": "plan id", "digest": "digest"},
    "Usage": {"tokens": "tokens", "cost": "cost", "elapsed_ms": "elapsed ms"},
}


class InvalidInput(ValueError):
    """A malformed observation (a host bug): raised, and nothing changes."""


class ObservationConflict(ValueError):
    """Other content under a ``(key, version)`` already seen: raised, nothing changes."""


class PolicyError(ValueError):
    """A policy that cannot be used; the message starts with the offending path."""
