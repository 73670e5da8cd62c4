"""The fixed workflow baseline ``decide`` (CONTRACT.md "Fixed workflow baseline"): the
nine-case table, and its equivalence with what the controller lets a commit do."""

from __future__ import annotations

import pytest
from conftest import FAILED, PASSED, UNKNOWN, obs, plan

from replan.controller import (
    Decision,
    EvidenceState,
    ExecuteResult,
    Policy,
    Step,
    StopReason,
    decide,
)

INSPECT, NEEDS_OWNER, READY = Decision.INSPECT, Decision.NEEDS_OWNER, Decision.READY_TO_COMMIT

# (parser, access) -> decision, written out by hand from the contract.
NINE_CASES: list[tuple[EvidenceState, EvidenceState, Decision]] = [
    (UNKNOWN, UNKNOWN, INSPECT),
    (UNKNOWN, PASSED, INSPECT),
    (UNKNOWN, FAILED, NEEDS_OWNER),
    (PASSED, UNKNOWN, INSPECT),
    (PASSED, PASSED, READY),
    (PASSED, FAILED, NEEDS_OWNER),
    (FAILED, UNKNOWN, NEEDS_OWNER),
    (FAILED, PASSED, NEEDS_OWNER),
    (FAILED, FAILED, NEEDS_OWNER),
]
CASE_IDS = [f"{p}-{a}" for p, a, _ in NINE_CASES]


@pytest.mark.parametrize(("parser", "access", "expected"), NINE_CASES, ids=CASE_IDS)
def test_decide_nine_case_table(
    parser: EvidenceState, access: EvidenceState, expected: Decision
) -> None:
    assert decide({"parser": parser, "access": access}) is expected


def test_unknown_and_failed_give_different_decisions() -> None:
    assert decide({"parser": PASSED, "access": UNKNOWN}) is INSPECT
    assert decide({"parser": PASSED, "access": FAILED}) is NEEDS_OWNER


def test_missing_keys_read_as_unknown() -> None:
    assert decide({}) is INSPECT
    assert decide({"parser": PASSED}) is INSPECT
    assert decide({"access": FAILED}) is NEEDS_OWNER


def test_decide_ignores_keys_outside_the_workflow() -> None:
    policy = Policy(
        keys=("a", "b", "c"),
        steps=(Step("ship", ("a", "b", "c"), True),),
        resources=("r",),
        workflow_keys=("a", "b"),
    )
    assert decide({"a": PASSED, "b": PASSED, "c": FAILED}, policy) is READY
    assert decide({"a": PASSED, "b": PASSED, "c": FAILED}) is INSPECT  # default: parser, access
    assert decide({"a": PASSED, "b": FAILED}, policy) is NEEDS_OWNER


def test_empty_workflow_is_always_ready() -> None:
    policy = Policy(
        keys=("a",), steps=(Step("ship", (), True),), resources=("r",), workflow_keys=()
    )
    assert decide({"a": FAILED}, policy) is READY


@pytest.mark.parametrize(("parser", "access", "expected"), NINE_CASES, ids=CASE_IDS)
def test_controller_commits_exactly_when_decide_is_ready(
    implementation: type, parser: EvidenceState, access: EvidenceState, expected: Decision
) -> None:
    run = implementation()
    # version 1 of each key; Unknown is observed explicitly (it is no progress).
    for key, state in (("parser", parser), ("access", access)):
        run.observe(obs(key, 1, state))
    assert {k: run.evidence_state(k) for k in ("parser", "access")} == {
        "parser": parser,
        "access": access,
    }
    assert run.propose(plan("commit", 1, run.evidence_revision, step="commit-import"))
    result = run.execute("commit")
    ready = (
        decide({"parser": run.evidence_state("parser"), "access": run.evidence_state("access")})
        is READY
    )
    assert ready is (expected is READY)
    assert (result is ExecuteResult.EXECUTED) is ready
    assert (run.stop_reason is StopReason.COMPLETED) is ready
    if not ready:
        assert result is ExecuteResult.PRECONDITION_DENIED
