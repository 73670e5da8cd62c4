"""Reading a run and an input: the predicates the contract's properties are written in.

Each is a single expression over the run's public view and fields, so that every
engine reads it alike: the campaign and the explorer call it, the z3 translator and
the check compiler inline its body. The properties (``spec/properties.py``), the
termination rank (``spec/termination.py``) and the invariants (``spec/invariants.py``)
share them, so a rule such as "the key's latest version" is stated once.
"""

from __future__ import annotations

from typing import Any

from replan.controller.records import (
    Approval,
    EvidenceState,
    Observation,
    Plan,
    StopReason,
    Usage,
    in_bounds,
    plan_digest,
)
from replan.controller.run import Run
from replan.spec.vocabulary import unchanged

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
