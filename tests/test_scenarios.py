"""The issue's scenarios, end to end, against both implementations; and policies other
than the default (three prerequisites, two resources, ``max_steps = 1``)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import FAILED, PASSED, UNKNOWN, changed, obs, plan

from replan.controller import (
    ExecuteResult,
    InvalidInput,
    Observation,
    ObservationConflict,
    Policy,
    Step,
    StopReason,
)
from replan.controller.policy import policy_from_dict


def test_reference_episode(implementation: type) -> None:
    run = implementation()
    assert run.propose(plan("p1", 1, 1, step="inspect-parser")) is True
    assert run.execute("p1") is ExecuteResult.EXECUTED
    assert run.evidence_revision == 1
    assert run.observe(obs("parser", 1, PASSED, "ci")) is True
    assert run.observe(obs("access", 1, FAILED, "ci")) is True
    assert run.evidence_revision == 3
    assert run.propose(plan("p-old", 2, 1, step="commit-import")) is False
    assert run.propose(plan("p2", 2, 3, step="commit-import")) is True
    assert run.execute("p2") is ExecuteResult.PRECONDITION_DENIED
    assert run.steps == 1
    assert run.pending == plan("p2", 2, 3, step="commit-import")
    assert run.observe(obs("access", 2, PASSED, "owner")) is True
    assert run.evidence_revision == 4
    assert run.pending is None
    assert run.execute("p2") is ExecuteResult.STALE_PLAN
    assert run.propose(plan("p3", 3, 4, step="commit-import")) is True
    assert run.execute("p3") is ExecuteResult.EXECUTED
    assert run.stop_reason is StopReason.COMPLETED
    assert run.steps == 2
    assert run.proposals == 4
    assert run.snapshot()["completed"] == ["p1", "p3"]


def test_plan_citing_an_old_evidence_revision_is_refused(implementation: type) -> None:
    run = implementation()
    run.observe(obs("parser", 1, PASSED))
    run.observe(obs("access", 1, PASSED))
    assert run.propose(plan("c1", 1, 2, step="commit-import")) is False
    assert run.pending is None
    assert run.execute("c1") is ExecuteResult.UNKNOWN_PLAN


def test_meaningful_observation_invalidates_the_pending_plan(implementation: type) -> None:
    run = implementation()
    assert run.propose(plan("p1", 1, 1))
    assert run.observe(obs("access", 1, FAILED)) is True
    assert run.pending is None
    assert run.execute("p1") is ExecuteResult.STALE_PLAN
    assert run.steps == 0


def test_failed_prerequisite_is_denied_with_steps_unchanged_and_plan_pending(
    implementation: type,
) -> None:
    run = implementation()
    run.observe(obs("parser", 1, PASSED))
    run.observe(obs("access", 1, FAILED))
    run.propose(plan("c1", 1, 3, step="commit-import"))
    steps = run.steps
    assert run.execute("c1") is ExecuteResult.PRECONDITION_DENIED
    assert run.steps == steps
    assert run.pending == plan("c1", 1, 3, step="commit-import")
    assert run.stop_reason is None


def test_owner_confirmed_observation_lets_a_newly_based_plan_complete(
    implementation: type,
) -> None:
    run = implementation()
    run.observe(obs("parser", 1, PASSED))
    run.observe(obs("access", 1, FAILED))
    run.propose(plan("c1", 1, 3, step="commit-import"))
    assert run.execute("c1") is ExecuteResult.PRECONDITION_DENIED
    assert run.observe(obs("access", 2, PASSED, "owner")) is True
    assert run.execute("c1") is ExecuteResult.STALE_PLAN
    assert run.propose(plan("c1", 2, 3, step="commit-import")) is False  # old basis
    assert run.propose(plan("c2", 3, 4, step="commit-import")) is True
    assert run.execute("c2") is ExecuteResult.EXECUTED
    assert run.stop_reason is StopReason.COMPLETED


def test_replaying_a_completed_id_changes_nothing_also_after_cancel(
    implementation: type,
) -> None:
    run = implementation()
    run.propose(plan("p1", 1, 1))
    run.execute("p1")
    before = run.snapshot()
    assert run.execute("p1") is ExecuteResult.REPLAYED
    assert run.snapshot() == before
    run.cancel()
    canceled = run.snapshot()
    assert run.execute("p1") is ExecuteResult.REPLAYED
    assert run.snapshot() == canceled
    assert run.steps == 1


def test_identical_redeliveries_reach_no_new_evidence_without_raising_revision(
    implementation: type,
) -> None:
    run = implementation()
    run.observe(obs("parser", 1, PASSED))
    for _ in range(3):
        assert run.observe(obs("parser", 1, PASSED)) is False
        assert run.evidence_revision == 2
    assert run.stop_reason is StopReason.NO_NEW_EVIDENCE


def test_renumbered_unknown_reaches_no_new_evidence_without_raising_revision(
    implementation: type,
) -> None:
    run = implementation()
    for version in (1, 2, 3):
        assert run.observe(obs("access", version, UNKNOWN, f"probe-{version}")) is False
        assert run.evidence_revision == 1
    assert run.stop_reason is StopReason.NO_NEW_EVIDENCE
    assert run.snapshot()["evidence"]["access"] == {"version": 3, "state": "Unknown"}


def test_fifth_execution_attempt_after_four_steps_stops_with_step_limit(
    implementation: type,
) -> None:
    run = implementation()
    for n in range(1, 5):
        assert run.propose(plan(f"s{n}", n, 1, step="inspect-access"))
        assert run.execute(f"s{n}") is ExecuteResult.EXECUTED
    assert run.steps == 4
    assert run.propose(plan("s5", 5, 1, step="inspect-access"))
    assert run.execute("s5") is ExecuteResult.STEP_LIMIT
    assert run.stop_reason is StopReason.STEP_LIMIT
    assert run.steps == 4
    assert run.execute("s5") is ExecuteResult.STOPPED


def test_ninth_proposal_stops_with_plan_limit(implementation: type) -> None:
    run = implementation()
    answers = [run.propose(plan(f"p{n}", n, 1 if n % 2 else 7)) for n in range(1, 9)]
    assert answers == [True, False] * 4  # rejected proposals use slots too
    assert run.stop_reason is None
    assert run.propose(plan("p9", 9, 1)) is False
    assert run.stop_reason is StopReason.PLAN_LIMIT
    assert run.proposals == 8


def test_cancel_stops_the_run_and_later_calls_revive_nothing(implementation: type) -> None:
    run = implementation()
    run.propose(plan("p1", 1, 1))
    run.cancel()
    assert run.stop_reason is StopReason.CANCELED
    before = run.snapshot()
    assert run.observe(obs("parser", 1, PASSED)) is False
    assert run.propose(plan("p2", 2, 1)) is False
    assert run.execute("p1") is ExecuteResult.STOPPED
    run.cancel()
    assert run.snapshot() == before
    assert run.stop_reason is StopReason.CANCELED


def test_conflicting_content_raises_observation_conflict_and_changes_nothing(
    implementation: type,
) -> None:
    run = implementation()
    run.observe(obs("access", 1, FAILED, "ci"))
    before = run.snapshot()
    with pytest.raises(ObservationConflict):
        run.observe(obs("access", 1, PASSED, "ci"))
    assert run.snapshot() == before
    assert run.evidence_state("access") is FAILED


def test_older_version_never_overwrites_a_newer_one(implementation: type) -> None:
    run = implementation()
    run.observe(obs("access", 2, PASSED, "owner"))
    assert run.observe(obs("access", 1, FAILED, "ci")) is False
    assert run.evidence_state("access") is PASSED
    assert run.evidence_revision == 2


def test_first_stop_reason_is_kept(implementation: type) -> None:
    run = implementation()
    for n in range(1, 9):
        run.propose(plan(f"p{n}", n, 1))
    run.propose(plan("p9", 9, 1))
    assert run.stop_reason is StopReason.PLAN_LIMIT
    run.cancel()
    for _ in range(4):
        run.observe(obs("parser", 1, UNKNOWN))
    run.execute("p8")
    assert run.stop_reason is StopReason.PLAN_LIMIT


def test_malformed_plans_use_a_slot_and_are_refused(implementation: type) -> None:
    run = implementation()
    malformed: list[Any] = [None, ("p", 1, 1, "inspect-parser", "input-A"), plan("", 1, 1)]
    for number, candidate in enumerate(malformed, start=1):
        assert run.propose(candidate) is False
        assert run.proposals == number
    assert run.pending is None


def test_malformed_observations_raise_invalid_input(implementation: type) -> None:
    run = implementation()
    before = run.snapshot()
    for candidate in (
        Observation("parser", True, PASSED, "ci"),
        Observation("deploy", 1, PASSED, "ci"),
        Observation("parser", 1, "Passed", "ci"),
        Observation("parser", 1, PASSED, ""),
        ("parser", 1, PASSED, "ci"),
    ):
        with pytest.raises(InvalidInput):
            run.observe(candidate)
    assert run.snapshot() == before


def test_duplicates_do_not_count_when_the_policy_says_so(implementation: type) -> None:
    policy = policy_from_dict(
        {
            "limits": {"count_duplicate_deliveries": False},
            "evidence": {"keys": ["parser", "access"]},
            "resources": {"allowed": ["input-A"]},
            "steps": [{"name": "commit-import", "requires": ["parser"], "completes_run": True}],
        }
    )
    run = implementation(policy)
    run.observe(obs("parser", 1, PASSED))
    for _ in range(10):
        assert run.observe(obs("parser", 1, PASSED)) is False
    assert run.no_progress == 0
    assert run.stop_reason is None
    # Other no-progress observations still count.
    run.observe(obs("parser", 2, PASSED))
    run.observe(obs("parser", 3, PASSED))
    run.observe(obs("parser", 1, PASSED))  # still a duplicate: not counted
    assert run.no_progress == 2
    run.observe(obs("parser", 4, PASSED))
    assert run.stop_reason is StopReason.NO_NEW_EVIDENCE


# ---- policies other than the default ----------------------------------------------------

THREE_PREREQUISITES = Policy(
    keys=("schema", "license", "quota"),
    steps=(
        Step("probe"),
        Step("publish", requires=("schema", "license", "quota"), completes_run=True),
    ),
    resources=("bucket-1", "bucket-2"),
    max_steps=3,
    max_proposals=10,
    no_progress_limit=2,
    workflow_keys=("schema", "license", "quota"),
)


def test_three_prerequisites_must_all_pass(implementation: type) -> None:
    run = implementation(THREE_PREREQUISITES)
    run.observe(obs("schema", 1, PASSED))
    run.observe(obs("license", 1, PASSED))
    assert run.propose(plan("c1", 1, 3, step="publish", resource="bucket-2"))
    assert run.execute("c1") is ExecuteResult.PRECONDITION_DENIED
    run.observe(obs("quota", 1, PASSED))
    assert run.propose(plan("c2", 2, 4, step="publish", resource="bucket-1"))
    assert run.execute("c2") is ExecuteResult.EXECUTED
    assert run.stop_reason is StopReason.COMPLETED


def test_policy_with_two_resources_allows_both_and_nothing_else(implementation: type) -> None:
    run = implementation(THREE_PREREQUISITES)
    assert run.propose(plan("a", 1, 1, step="probe", resource="bucket-1"))
    assert run.propose(plan("b", 2, 1, step="probe", resource="bucket-2"))
    assert run.propose(plan("c", 3, 1, step="probe", resource="input-A")) is False
    assert run.propose(plan("d", 4, 1, step="inspect-parser", resource="bucket-1")) is False
    assert run.pending == plan("b", 2, 1, step="probe", resource="bucket-2")


def test_policy_keys_replace_the_default_keys(implementation: type) -> None:
    run = implementation(THREE_PREREQUISITES)
    with pytest.raises(InvalidInput, match=r"^observation\.key:"):
        run.observe(obs("parser", 1, PASSED))
    assert run.observe(obs("quota", 1, FAILED)) is True


def test_policy_no_progress_limit_is_honoured(implementation: type) -> None:
    run = implementation(THREE_PREREQUISITES)
    run.observe(obs("quota", 1, UNKNOWN))
    assert run.stop_reason is None
    run.observe(obs("quota", 2, UNKNOWN))
    assert run.stop_reason is StopReason.NO_NEW_EVIDENCE


MAX_ONE_STEP = policy_from_dict(
    {
        "limits": {"max_steps": 1},
        "evidence": {"keys": ["parser", "access"]},
        "resources": {"allowed": ["input-A"]},
        "steps": [
            {"name": "inspect-parser"},
            {"name": "commit-import", "requires": ["parser", "access"], "completes_run": True},
        ],
    }
)


def test_max_steps_one_allows_one_step_then_stops(implementation: type) -> None:
    assert MAX_ONE_STEP.max_proposals == 2  # the default is 2 * max_steps
    run = implementation(MAX_ONE_STEP)
    assert run.propose(plan("p1", 1, 1))
    assert run.execute("p1") is ExecuteResult.EXECUTED
    assert run.propose(plan("p2", 2, 1))
    before = run.snapshot()
    assert run.execute("p2") is ExecuteResult.STEP_LIMIT
    assert run.stop_reason is StopReason.STEP_LIMIT
    assert changed(before, run.snapshot()) == {"state", "stop_reason"}


def test_max_steps_one_proposal_budget_is_two(implementation: type) -> None:
    run = implementation(MAX_ONE_STEP)
    run.propose(plan("p1", 1, 1))
    run.propose(plan("p2", 2, 1))
    assert run.stop_reason is None
    assert run.propose(plan("p3", 3, 1)) is False
    assert run.stop_reason is StopReason.PLAN_LIMIT


def test_max_steps_one_commit_completes_in_one_step(implementation: type) -> None:
    run = implementation(MAX_ONE_STEP)
    run.observe(obs("parser", 1, PASSED))
    run.observe(obs("access", 1, PASSED))
    run.propose(plan("c", 1, 3, step="commit-import"))
    assert run.execute("c") is ExecuteResult.EXECUTED
    assert run.stop_reason is StopReason.COMPLETED
    assert run.steps == 1
