"""CONTRACT.md ``observe(obs) -> bool``, rules 1-8, against both implementations."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import FAILED, PASSED, UNKNOWN, changed, obs, plan

from replan.controller import (
    InvalidInput,
    Observation,
    ObservationConflict,
    Policy,
    Step,
    StopReason,
)

# ---- rule 1: malformed observations raise InvalidInput naming the field ------------

MALFORMED: list[tuple[str, Any, str]] = [
    ("not-an-observation-tuple", ("parser", 1, PASSED, "ci"), "observation"),
    ("not-an-observation-none", None, "observation"),
    ("not-an-observation-dict", {"key": "parser"}, "observation"),
    ("undeclared-key", Observation("acess", 1, PASSED, "ci"), "observation.key"),
    ("non-string-key", Observation(7, 1, PASSED, "ci"), "observation.key"),
    ("unhashable-key", Observation(["parser"], 1, PASSED, "ci"), "observation.key"),
    ("version-zero", Observation("parser", 0, PASSED, "ci"), "observation.version"),
    ("version-negative", Observation("parser", -3, PASSED, "ci"), "observation.version"),
    ("version-true-is-not-int", Observation("parser", True, PASSED, "ci"), "observation.version"),
    ("version-false-is-not-int", Observation("parser", False, PASSED, "ci"), "observation.version"),
    ("version-float", Observation("parser", 1.0, PASSED, "ci"), "observation.version"),
    ("version-string", Observation("parser", "1", PASSED, "ci"), "observation.version"),
    ("state-plain-string", Observation("parser", 1, "Passed", "ci"), "observation.state"),
    ("state-none", Observation("parser", 1, None, "ci"), "observation.state"),
    ("source-empty", Observation("parser", 1, PASSED, ""), "observation.source"),
    ("source-none", Observation("parser", 1, PASSED, None), "observation.source"),
    ("source-not-string", Observation("parser", 1, PASSED, 5), "observation.source"),
]


@pytest.mark.parametrize(
    ("argument", "field"), [(a, f) for _, a, f in MALFORMED], ids=[n for n, _, _ in MALFORMED]
)
def test_malformed_observation_raises_invalid_input_naming_the_field(
    implementation: type, argument: Any, field: str
) -> None:
    run = implementation()
    run.observe(obs("access", 1, PASSED))
    before = run.snapshot()
    with pytest.raises(InvalidInput) as raised:
        run.observe(argument)
    assert str(raised.value).startswith(f"{field}:")
    assert isinstance(raised.value, ValueError)
    assert run.snapshot() == before


@pytest.mark.parametrize(
    ("argument", "field"), [(a, f) for _, a, f in MALFORMED], ids=[n for n, _, _ in MALFORMED]
)
def test_malformed_observation_raises_even_when_the_run_stopped(
    implementation: type, argument: Any, field: str
) -> None:
    run = implementation()
    run.cancel()
    before = run.snapshot()
    with pytest.raises(InvalidInput, match=f"^{field}:"):
        run.observe(argument)
    assert run.snapshot() == before
    assert run.stop_reason is StopReason.CANCELED


# ---- rule 2: a stopped run is never revived -----------------------------------------


def test_observe_on_stopped_run_returns_false_and_changes_nothing(implementation: type) -> None:
    run = implementation()
    run.observe(obs("parser", 1, PASSED))
    run.cancel()
    before = run.snapshot()
    assert run.observe(obs("access", 1, FAILED)) is False  # would be meaningful
    assert run.observe(obs("parser", 1, PASSED)) is False  # would be a duplicate
    assert run.observe(obs("parser", 2, PASSED)) is False  # would be renumbered
    assert run.snapshot() == before
    assert run.evidence_state("access") is UNKNOWN


def test_conflicting_content_on_stopped_run_is_not_raised(implementation: type) -> None:
    # Rule 2 comes before rule 4: a stopped run answers False and remembers nothing.
    run = implementation()
    run.observe(obs("parser", 1, PASSED))
    run.cancel()
    before = run.snapshot()
    assert run.observe(obs("parser", 1, FAILED)) is False
    assert run.snapshot() == before


# ---- rule 3: duplicate deliveries ---------------------------------------------------


def test_duplicate_delivery_counts_no_progress_and_returns_false(implementation: type) -> None:
    run = implementation()
    assert run.observe(obs("parser", 1, PASSED, "ci")) is True
    before = run.snapshot()
    assert run.observe(obs("parser", 1, PASSED, "ci")) is False
    assert run.no_progress == 1
    assert changed(before, run.snapshot()) == {"no_progress"}


def test_duplicate_of_an_older_version_is_a_duplicate_not_an_older_one(
    implementation: type,
) -> None:
    run = implementation()
    run.observe(obs("parser", 1, PASSED))
    run.observe(obs("parser", 2, FAILED))
    before = run.snapshot()
    assert run.observe(obs("parser", 1, PASSED)) is False
    assert changed(before, run.snapshot()) == {"no_progress"}
    assert run.evidence_state("parser") is FAILED


def test_uncounted_duplicate_changes_nothing(implementation: type) -> None:
    policy = Policy(
        keys=("parser", "access"),
        steps=(Step("commit-import", ("parser", "access"), True),),
        resources=("input-A",),
        count_duplicate_deliveries=False,
    )
    run = implementation(policy)
    run.observe(obs("parser", 1, PASSED))
    before = run.snapshot()
    for _ in range(5):
        assert run.observe(obs("parser", 1, PASSED)) is False
    assert run.snapshot() == before
    assert run.stop_reason is None


# ---- rule 4: conflicting content ----------------------------------------------------


@pytest.mark.parametrize(
    "conflicting",
    [obs("parser", 1, FAILED, "ci"), obs("parser", 1, PASSED, "owner")],
    ids=["other-state", "other-source"],
)
def test_conflicting_content_raises_and_changes_nothing(
    implementation: type, conflicting: Observation
) -> None:
    run = implementation()
    run.observe(obs("parser", 1, PASSED, "ci"))
    run.propose(plan("p1", 1, 2))
    before = run.snapshot()
    with pytest.raises(ObservationConflict) as raised:
        run.observe(conflicting)
    assert isinstance(raised.value, ValueError)
    assert "'parser'" in str(raised.value)
    assert run.snapshot() == before
    assert run.pending is not None


def test_run_keeps_working_after_a_conflict(implementation: type) -> None:
    run = implementation()
    run.observe(obs("parser", 1, PASSED))
    with pytest.raises(ObservationConflict):
        run.observe(obs("parser", 1, FAILED))
    assert run.observe(obs("parser", 2, FAILED)) is True
    assert run.evidence_state("parser") is FAILED
    assert run.evidence_revision == 3


# ---- rules 5 and 6: an older version is remembered but never overwrites ---------------


def test_older_version_never_overwrites_newer(implementation: type) -> None:
    run = implementation()
    assert run.observe(obs("parser", 5, PASSED)) is True
    before = run.snapshot()
    assert run.observe(obs("parser", 3, FAILED)) is False
    after = run.snapshot()
    assert run.evidence_state("parser") is PASSED
    assert after["evidence"]["parser"] == {"version": 5, "state": "Passed"}
    assert run.evidence_revision == before["evidence_revision"]
    assert after["no_progress"] == before["no_progress"] + 1
    assert changed(before, after) == {"no_progress", "contents"}


def test_older_version_content_is_remembered_for_conflicts(implementation: type) -> None:
    run = implementation()
    run.observe(obs("parser", 5, PASSED))
    run.observe(obs("parser", 3, FAILED))
    before = run.snapshot()
    with pytest.raises(ObservationConflict):
        run.observe(obs("parser", 3, PASSED))
    assert run.snapshot() == before


def test_older_version_does_not_invalidate_the_pending_plan(implementation: type) -> None:
    run = implementation()
    run.observe(obs("parser", 2, PASSED))
    assert run.propose(plan("p1", 1, 2))
    run.observe(obs("parser", 1, FAILED))
    assert run.pending == plan("p1", 1, 2)


# ---- rule 7: a changed state is meaningful ------------------------------------------


def test_meaningful_observation_raises_revision_invalidates_pending_and_resets_no_progress(
    implementation: type,
) -> None:
    run = implementation()
    run.observe(obs("access", 1, UNKNOWN))  # same state as never observed: no progress
    assert run.no_progress == 1
    assert run.propose(plan("p1", 1, 1))
    assert run.observe(obs("parser", 1, PASSED)) is True
    assert run.evidence_revision == 2
    assert run.pending is None
    assert run.no_progress == 0
    assert run.evidence_state("parser") is PASSED
    assert run.snapshot()["state"] == "idle"


def test_every_change_of_state_is_meaningful(implementation: type) -> None:
    run = implementation()
    sequence = [PASSED, FAILED, UNKNOWN, FAILED, PASSED, UNKNOWN, PASSED]
    for version, state in enumerate(sequence, start=1):
        assert run.observe(obs("parser", version, state)) is True
        assert run.evidence_state("parser") is state
    assert run.evidence_revision == 1 + len(sequence)


def test_version_gaps_are_allowed(implementation: type) -> None:
    run = implementation()
    assert run.observe(obs("parser", 10, FAILED)) is True
    assert run.observe(obs("parser", 11, PASSED)) is True
    assert run.snapshot()["evidence"]["parser"] == {"version": 11, "state": "Passed"}


def test_unobserved_key_reads_unknown(implementation: type) -> None:
    run = implementation()
    assert run.evidence_state("parser") is UNKNOWN
    assert run.evidence_state("access") is UNKNOWN


# ---- rule 8: the same state under a higher version is no progress --------------------


def test_renumbered_same_state_is_recorded_but_not_progress(implementation: type) -> None:
    run = implementation()
    run.observe(obs("parser", 1, FAILED))
    run.propose(plan("p1", 1, 2))
    before = run.snapshot()
    assert run.observe(obs("parser", 2, FAILED, "other-source")) is False
    after = run.snapshot()
    assert run.evidence_revision == before["evidence_revision"]
    assert after["evidence"]["parser"] == {"version": 2, "state": "Failed"}
    assert run.pending == plan("p1", 1, 2)
    assert changed(before, after) == {"no_progress", "evidence", "contents"}


def test_renumbered_unknown_is_not_progress(implementation: type) -> None:
    run = implementation()
    assert run.observe(obs("parser", 1, UNKNOWN)) is False
    assert run.observe(obs("parser", 2, UNKNOWN)) is False
    assert run.evidence_revision == 1
    assert run.no_progress == 2


# ---- counting no progress reaches the limit -----------------------------------------


def test_no_progress_limit_stops_with_no_new_evidence(implementation: type) -> None:
    run = implementation()
    run.observe(obs("parser", 2, PASSED))
    run.observe(obs("parser", 2, PASSED))  # duplicate
    run.observe(obs("parser", 1, FAILED))  # older
    assert run.stop_reason is None
    assert run.observe(obs("parser", 3, PASSED)) is False  # renumbered: third
    assert run.no_progress == 3
    assert run.stop_reason is StopReason.NO_NEW_EVIDENCE


def test_meaningful_observation_resets_the_no_progress_count(implementation: type) -> None:
    run = implementation()
    run.observe(obs("parser", 1, UNKNOWN))
    run.observe(obs("parser", 2, UNKNOWN))
    run.observe(obs("parser", 3, PASSED))
    run.observe(obs("parser", 4, PASSED))
    run.observe(obs("parser", 5, PASSED))
    assert run.no_progress == 2
    assert run.stop_reason is None
