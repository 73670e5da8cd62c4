"""The ``replan-controller`` workload ``replan bench`` times: one committing episode
on the default policy (two observations, a proposal, its execution), and the
implementations and variants it is run on side by side."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from replan.controller.policy import DEFAULT_POLICY
from replan.controller.records import EvidenceState, ExecuteResult, Observation, Plan, StopReason

WORKLOAD = "replan-controller"
_COMMIT = next(step for step in DEFAULT_POLICY.steps if step.completes_run)
KEY_A, KEY_B = _COMMIT.requires
COMMIT_STEP = _COMMIT.name
RESOURCE = DEFAULT_POLICY.resources[0]
SOURCE = "ci"
PLAN_ID = "commit-1"


#: After two meaningful observations the evidence revision is 1 + 2.
EVIDENCE_REVISION = 3


#: Records of the "records built once" variant.
OBSERVATION_A = Observation(KEY_A, 1, EvidenceState.PASSED, SOURCE)


OBSERVATION_B = Observation(KEY_B, 1, EvidenceState.PASSED, SOURCE)
COMMIT_PLAN = Plan(PLAN_ID, 1, EVIDENCE_REVISION, COMMIT_STEP, RESOURCE)
Factory = Callable[[], Any]
EpisodeLoop = Callable[[Factory, int], tuple[int, Any]]


def episodes_building_records(factory: Factory, count: int) -> tuple[int, Any]:
    """``count`` episodes, each building its own records (the headline variant)."""
    # Everything the loop needs is bound to locals first, so the loop measures the
    # controller and not global lookups; the same loop drives every implementation.
    observation, plan = Observation, Plan
    key_a, key_b, passed, source = KEY_A, KEY_B, EvidenceState.PASSED, SOURCE
    plan_id, evidence_revision, step, resource = PLAN_ID, EVIDENCE_REVISION, COMMIT_STEP, RESOURCE
    executed, completed_reason = ExecuteResult.EXECUTED, StopReason.COMPLETED
    completed = 0
    controller = None
    for _ in range(count):
        controller = factory()
        controller.observe(observation(key_a, 1, passed, source))
        controller.observe(observation(key_b, 1, passed, source))
        controller.propose(plan(plan_id, 1, evidence_revision, step, resource))
        if controller.execute(plan_id) is executed and controller.stop_reason is completed_reason:
            completed += 1
    return completed, controller


def episodes_reusing_records(factory: Factory, count: int) -> tuple[int, Any]:
    """``count`` episodes over records built once (isolates the controller's cost)."""
    observation_a, observation_b, commit_plan = OBSERVATION_A, OBSERVATION_B, COMMIT_PLAN
    plan_id = PLAN_ID
    executed, completed_reason = ExecuteResult.EXECUTED, StopReason.COMPLETED
    completed = 0
    controller = None
    for _ in range(count):
        controller = factory()
        controller.observe(observation_a)
        controller.observe(observation_b)
        controller.propose(commit_plan)
        if controller.execute(plan_id) is executed and controller.stop_reason is completed_reason:
            completed += 1
    return completed, controller


@dataclass(frozen=True)
class Implementation:
    """One implementation of the contract under measurement."""

    name: str
    target: str  # "module:Class"
    summary: str
    #: The reference model runs ``reference_episodes`` per sample instead of ``episodes``.
    slow: bool = False
    #: A class to use instead of ``target`` (tests measure deliberately broken ones).
    override: Factory | None = field(default=None, compare=False)

    def factory(self) -> Factory:
        if self.override is not None:
            return self.override
        module_name, _, class_name = self.target.partition(":")
        cls: Factory = getattr(importlib.import_module(module_name), class_name)
        return cls


GENERATED = Implementation(
    "generated",
    "replan.controller:Controller",
    "generated from the declaration (what applications run)",
)


HANDWRITTEN = Implementation(
    "hand-written",
    "replan.verification.subjects.handwritten:HandwrittenController",
    "written by hand from CONTRACT.md (the baseline)",
)


STATEMACHINE = Implementation(
    "python-statemachine",
    "replan.spec.reference:ReferenceController",
    "the declaration run by python-statemachine (the reference model)",
    slow=True,
)


IMPLEMENTATIONS = (GENERATED, HANDWRITTEN, STATEMACHINE)


@dataclass(frozen=True)
class Variant:
    """How an episode gets its records."""

    name: str
    records: str
    loop: EpisodeLoop


VARIANTS = (
    Variant(
        WORKLOAD, "built in every episode (as the .NET reference did)", episodes_building_records
    ),
    Variant(
        f"{WORKLOAD}/records-reused",
        "built once, reused by every episode",
        episodes_reusing_records,
    ),
)


#: Runs ``count`` episodes; returns (episodes completed, the last controller).
