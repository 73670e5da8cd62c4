"""The hand-written baseline of ``replan bench`` obeys the same contract as the
generated controller: the same scenario tests run against both, and random operation
sequences run on both in lockstep with every invariant checked after every call.

If the baseline cut a corner the benchmark would compare the generated controller
with something that does less work; these tests are what makes the comparison honest.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replan.controller import (
    DEFAULT_POLICY,
    Controller,
    EvidenceState,
    ExecuteResult,
    InvalidInput,
    Observation,
    ObservationConflict,
    Plan,
    Policy,
    Step,
    StopReason,
)
from replan.verification.core.harness import Operation, apply, run_sequence
from replan.verification.subjects.handwritten import HandwrittenController

PASSED, FAILED, UNKNOWN = EvidenceState.PASSED, EvidenceState.FAILED, EvidenceState.UNKNOWN

IMPLEMENTATIONS = [HandwrittenController, Controller]


@pytest.fixture(params=IMPLEMENTATIONS, ids=lambda cls: cls.__name__)
def make(request: pytest.FixtureRequest) -> Any:
    return request.param


def obs(key: str, version: int, state: EvidenceState, source: str = "ci") -> Observation:
    return Observation(key, version, state, source)


def commit(plan_id: str, revision: int, evidence_revision: int) -> Plan:
    return Plan(plan_id, revision, evidence_revision, "commit-import", "input-A")


def test_benchmark_episode_executes_and_completes(make: Any) -> None:
    run = make()
    assert run.observe(obs("parser", 1, PASSED)) is True
    assert run.observe(obs("access", 1, PASSED)) is True
    assert run.evidence_revision == 3
    assert run.propose(commit("commit-1", 1, 3)) is True
    assert run.execute("commit-1") is ExecuteResult.EXECUTED
    assert run.stop_reason is StopReason.COMPLETED
    assert (run.steps, run.proposals, run.pending) == (1, 1, None)
    assert [record["op"] for record in run.trace] == ["observe", "observe", "propose", "execute"]
    assert run.trace[-1]["stop_reason"] == "Completed"


def test_reference_episode(make: Any) -> None:
    run = make()
    assert run.evidence_state("parser") is UNKNOWN and run.evidence_revision == 1
    assert run.propose(Plan("p1", 1, 1, "inspect-parser", "input-A"))
    assert run.execute("p1") is ExecuteResult.EXECUTED
    assert run.observe(obs("parser", 1, PASSED))
    assert run.observe(obs("access", 1, FAILED))
    assert run.evidence_revision == 3 and run.pending is None
    assert run.propose(Plan("stale", 2, 1, "commit-import", "input-A")) is False
    assert run.propose(commit("p2", 3, 3))
    assert run.execute("p2") is ExecuteResult.PRECONDITION_DENIED
    assert run.steps == 1 and run.pending is not None and run.pending.id == "p2"
    assert run.observe(obs("access", 2, PASSED, "owner"))
    assert run.evidence_revision == 4
    assert run.execute("p2") is ExecuteResult.STALE_PLAN
    assert run.propose(commit("p3", 4, 4))
    assert run.execute("p3") is ExecuteResult.EXECUTED
    assert run.stop_reason is StopReason.COMPLETED
    assert (run.steps, run.proposals) == (2, 4)


def test_plan_citing_an_old_evidence_revision_is_refused(make: Any) -> None:
    run = make()
    run.observe(obs("parser", 1, PASSED))
    assert run.propose(commit("p", 1, 1)) is False
    assert run.pending is None and run.proposals == 1


def test_meaningful_observation_makes_the_pending_plan_stale(make: Any) -> None:
    run = make()
    assert run.propose(commit("p", 1, 1))
    assert run.observe(obs("parser", 1, PASSED))
    assert run.pending is None
    assert run.execute("p") is ExecuteResult.STALE_PLAN
    assert run.execute("never") is ExecuteResult.UNKNOWN_PLAN
    assert run.execute(42) is ExecuteResult.UNKNOWN_PLAN


def test_failed_prerequisite_is_denied_and_the_plan_stays_pending(make: Any) -> None:
    run = make()
    run.observe(obs("parser", 1, PASSED))
    run.observe(obs("access", 1, FAILED))
    assert run.propose(commit("p", 1, 3))
    assert run.execute("p") is ExecuteResult.PRECONDITION_DENIED
    assert run.steps == 0 and run.pending is not None and run.stop_reason is None


def test_replay_changes_nothing_even_after_cancel(make: Any) -> None:
    run = make()
    run.propose(Plan("p", 1, 1, "inspect-parser", "input-A"))
    assert run.execute("p") is ExecuteResult.EXECUTED
    before = run.snapshot()
    assert run.execute("p") is ExecuteResult.REPLAYED
    assert run.snapshot() == before
    run.cancel()
    assert run.stop_reason is StopReason.CANCELED
    assert run.execute("p") is ExecuteResult.REPLAYED
    assert run.execute("q") is ExecuteResult.STOPPED
    assert run.observe(obs("parser", 1, PASSED)) is False
    assert run.propose(Plan("q", 2, 1, "inspect-parser", "input-A")) is False
    run.cancel()
    assert run.stop_reason is StopReason.CANCELED and run.evidence_revision == 1


def test_redeliveries_and_renumbered_unknown_reach_no_new_evidence(make: Any) -> None:
    run = make()
    assert run.observe(obs("parser", 1, UNKNOWN)) is False  # renumbered Unknown
    assert run.observe(obs("parser", 1, UNKNOWN)) is False  # identical redelivery
    assert run.observe(obs("parser", 2, UNKNOWN)) is False
    assert run.stop_reason is StopReason.NO_NEW_EVIDENCE and run.evidence_revision == 1
    assert run.snapshot()["evidence"] == {"parser": {"version": 2, "state": "Unknown"}}


def test_uncounted_duplicates_do_not_stop_the_run(make: Any) -> None:
    policy = Policy(
        keys=("parser",),
        steps=(Step("go", ("parser",), completes_run=True),),
        resources=("r",),
        count_duplicate_deliveries=False,
    )
    run = make(policy)
    for _ in range(5):
        run.observe(obs("parser", 1, PASSED))
    assert run.no_progress == 0 and run.stop_reason is None


def test_fifth_execution_after_four_steps_stops_with_step_limit(make: Any) -> None:
    run = make()
    for index in range(4):
        assert run.propose(Plan(f"p{index}", index + 1, 1, "inspect-parser", "input-A"))
        assert run.execute(f"p{index}") is ExecuteResult.EXECUTED
    assert run.propose(Plan("p4", 5, 1, "inspect-parser", "input-A"))
    assert run.execute("p4") is ExecuteResult.STEP_LIMIT
    assert run.stop_reason is StopReason.STEP_LIMIT and run.steps == 4


def test_ninth_proposal_stops_with_plan_limit(make: Any) -> None:
    run = make()
    for index in range(8):
        run.propose(Plan(f"p{index}", index + 1, 1, "inspect-parser", "input-A"))
    assert run.proposals == 8 and run.stop_reason is None
    assert run.propose(Plan("p9", 9, 1, "inspect-parser", "input-A")) is False
    assert run.stop_reason is StopReason.PLAN_LIMIT and run.proposals == 8


def test_conflicting_content_raises_and_changes_nothing(make: Any) -> None:
    run = make()
    run.observe(obs("parser", 1, PASSED))
    before = run.snapshot()
    with pytest.raises(ObservationConflict):
        run.observe(obs("parser", 1, FAILED))
    assert run.snapshot() == before
    assert run.trace[-1]["result"] == {"error": "ObservationConflict"}


def test_older_version_never_overwrites_a_newer_one(make: Any) -> None:
    run = make()
    run.observe(obs("parser", 2, PASSED))
    assert run.observe(obs("parser", 1, FAILED)) is False
    assert run.evidence_state("parser") is PASSED and run.no_progress == 1


def test_first_stop_reason_is_kept(make: Any) -> None:
    run = make()
    for index in range(9):
        run.propose(Plan(f"p{index}", index + 1, 1, "inspect-parser", "input-A"))
    run.cancel()
    assert run.stop_reason is StopReason.PLAN_LIMIT


@pytest.mark.parametrize(
    "plan",
    [
        "not a plan",
        Plan("", 1, 1, "inspect-parser", "input-A"),
        Plan("p", True, 1, "inspect-parser", "input-A"),
        Plan("p", 1, "1", "inspect-parser", "input-A"),  # type: ignore[arg-type]
        Plan("p", 1, 1, "nope", "input-A"),
        Plan("p", 1, 1, "inspect-parser", "input-B"),
    ],
)
def test_malformed_or_invalid_plans_use_a_slot_and_are_refused(make: Any, plan: Any) -> None:
    run = make()
    assert run.propose(plan) is False
    assert run.proposals == 1 and run.pending is None and run.plan_revision == 0


@pytest.mark.parametrize(
    "observation",
    [
        ("parser", 1, "Passed", "ci"),
        Observation("nope", 1, PASSED, "ci"),
        Observation("parser", 0, PASSED, "ci"),
        Observation("parser", True, PASSED, "ci"),
        Observation("parser", 1, "Passed", "ci"),  # type: ignore[arg-type]
        Observation("parser", 1, PASSED, ""),
    ],
)
def test_malformed_observations_raise_invalid_input(make: Any, observation: Any) -> None:
    run = make()
    run.cancel()
    before = run.snapshot()
    with pytest.raises(InvalidInput):
        run.observe(observation)
    assert run.snapshot() == before and len(run.trace) == 2


# ---- lockstep with the generated controller, every invariant after every call --------

POLICIES = [
    DEFAULT_POLICY,
    Policy(
        keys=("parser", "access"),
        steps=(
            Step("inspect-parser"),
            Step("inspect-access"),
            Step("commit-import", ("parser", "access"), completes_run=True),
        ),
        resources=("input-A",),
        max_steps=2,
        max_proposals=5,
        no_progress_limit=2,
        count_duplicate_deliveries=False,
    ),
]


@st.composite
def episodes(draw: st.DrawFn) -> tuple[Policy, list[Operation]]:
    """A policy and an operation sequence aimed at deep states (every stop reason):
    arguments are drawn around the current revisions and versions, read from a shadow
    run of the generated controller; ids come from a small pool so that replays and
    stale ids happen. Choices that make progress come first in every list, because
    Hypothesis favours (and shrinks towards) the first."""
    policy = draw(st.sampled_from(POLICIES))
    shadow = Controller(policy)
    steps = [s.name for s in policy.steps]
    sequence: list[Operation] = []
    for _ in range(draw(st.integers(0, 40))):
        # What would make progress next comes first; cancel is rare (it ends the run).
        if shadow.pending is not None:
            kinds = ("execute", "observe", "propose", "execute")
        elif all(shadow.evidence_state(key) is PASSED for key in policy.keys):
            kinds = ("propose", "execute", "observe", "propose")
        else:
            kinds = ("propose", "observe", "execute", "observe")
        # (Hypothesis favours the ends of a list too, so cancel sits in the middle.)
        kind = draw(st.sampled_from(kinds * 12 + ("cancel",) + kinds * 12))
        argument: Any = None
        if kind == "observe":
            missing = [key for key in policy.keys if shadow.evidence_state(key) is not PASSED]
            key = draw(st.sampled_from(missing + list(policy.keys)))
            latest = shadow.snapshot()["evidence"].get(key, {"version": 0})["version"]
            argument = Observation(
                key,
                draw(st.sampled_from((latest + 1,) * 3 + (latest or 1, max(1, latest - 1)))),
                draw(st.sampled_from((PASSED,) * 3 + (FAILED, UNKNOWN))),
                draw(st.sampled_from(("ci", "owner"))),
            )
        elif kind == "propose":
            revision, evidence = shadow.plan_revision, shadow.evidence_revision
            steps_first = [*steps, "unknown-step", steps[0]]
            if all(shadow.evidence_state(key) is PASSED for key in policy.keys):
                steps_first = [steps[-1], *steps_first]
            plans = st.builds(
                Plan,
                st.sampled_from((f"p{shadow.proposals + 1}", "p1", "p2", "p3", "")),
                st.sampled_from((revision + 1,) * 3 + (revision, True)),
                st.sampled_from((evidence,) * 3 + (evidence - 1, evidence + 1)),
                st.sampled_from(steps_first),
                st.sampled_from(("input-A",) * 3 + ("input-B",)),
            )
            malformed = draw(st.sampled_from((False,) * 9 + (True,)))
            argument = "not a plan" if malformed else draw(plans)
        elif kind == "execute":
            pending = shadow.pending
            pool = ([pending.id] * 4 if pending is not None else []) + ["p1", "p2", "p3"]
            argument = draw(st.sampled_from([*pool, None]))
        operation = Operation(kind, argument)
        apply(shadow, operation)
        sequence.append(operation)
    return policy, sequence


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(episodes())
def test_handwritten_agrees_with_the_generated_controller_in_lockstep(
    episode: tuple[Policy, list[Operation]],
) -> None:
    policy, sequence = episode
    report = run_sequence(policy, sequence, HandwrittenController, Controller)
    assert report.failure is None, report.detail


def test_lockstep_catches_a_handwritten_controller_that_cuts_a_corner() -> None:
    """The lockstep test above bites: a baseline that skips the stale-plan check (a
    cheat that would make it faster) is caught."""

    class SkipsStaleCheck(HandwrittenController):
        __slots__ = ()

        def _propose(self, plan: Plan) -> bool:
            if self._stop_reason is None and isinstance(plan, Plan):
                self._proposals += 1
                self._pending = plan
                self._plan_revision = plan.revision
                self._accepted.add(plan.id)
                return True
            return super()._propose(plan)

    sequence = [
        Operation("observe", obs("parser", 1, PASSED)),
        Operation("propose", commit("p", 1, 1)),
    ]
    report = run_sequence(DEFAULT_POLICY, sequence, SkipsStaleCheck, Controller)
    assert report.failure is not None
