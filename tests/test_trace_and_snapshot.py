"""CONTRACT.md "Trace" and the ``snapshot()`` view; and that the generated controller
and the reference model leave identical traces (the fired transition included)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import FAILED, PASSED, UNKNOWN, obs, plan

from replan.controller import Controller, InvalidInput, Observation, ObservationConflict, Plan
from replan.controller.policy import DEFAULT_POLICY, policy_digest
from replan.spec.declaration import Replanning
from replan.spec.model import extract
from replan.spec.reference import ReferenceController

# The reference episode, then calls that raise, get rejected, or hit a stopped
# run, so every kind of trace record appears.
REFERENCE_EPISODE: list[tuple[str, Any]] = [
    ("propose", plan("p1", 1, 1, step="inspect-parser")),
    ("execute", "p1"),
    ("observe", obs("parser", 1, PASSED, "ci")),
    ("observe", obs("access", 1, FAILED, "ci")),
    ("propose", plan("p-old", 2, 1, step="commit-import")),
    ("propose", plan("p2", 2, 3, step="commit-import")),
    ("execute", "p2"),
    ("observe", obs("access", 2, PASSED, "owner")),
    ("execute", "p2"),
    ("propose", plan("p3", 3, 4, step="commit-import")),
    ("execute", "p3"),
]
EXTENDED_EPISODE: list[tuple[str, Any]] = [
    ("observe", Observation("parser", True, PASSED, "ci")),  # InvalidInput
    ("observe", obs("parser", 1, UNKNOWN)),  # renumbered Unknown: no progress
    ("propose", None),  # malformed: a rejection
    ("execute", ["unhashable"]),  # UnknownPlan
    ("observe", obs("parser", 1, FAILED)),  # ObservationConflict
    *REFERENCE_EPISODE[:2],
    ("observe", obs("parser", 2, PASSED, "ci")),
    ("observe", obs("access", 1, FAILED, "ci")),
    *REFERENCE_EPISODE[4:],
    ("execute", "p3"),  # Replayed in a stopped run
    ("execute", "p2"),  # Stopped
    ("observe", obs("parser", 9, FAILED)),  # absorbed
    ("propose", plan("p4", 9, 4)),  # absorbed
    ("cancel", None),  # absorbed
]


def _apply(run: Any, op: str, argument: Any) -> Any:
    try:
        return run.cancel() if op == "cancel" else getattr(run, op)(argument)
    except (InvalidInput, ObservationConflict) as error:
        return type(error)


def _play(run: Any, episode: list[tuple[str, Any]]) -> list[Any]:
    return [_apply(run, op, argument) for op, argument in episode]


# ---- trace records ------------------------------------------------------------------------


def test_every_call_appends_one_record(implementation: type) -> None:
    run = implementation()
    for count, (op, argument) in enumerate(EXTENDED_EPISODE, start=1):
        _apply(run, op, argument)
        assert len(run.trace) == count
        record = run.trace[-1]
        assert set(record) == {
            "seq",
            "op",
            "args",
            "result",
            "evidence_revision",
            "stop_reason",
            "transition",
            "policy",
        }
        assert record["seq"] == count
        assert record["op"] == op
        assert record["evidence_revision"] == run.evidence_revision
        assert record["stop_reason"] == (None if run.stop_reason is None else str(run.stop_reason))


def test_trace_is_json_serialisable_even_for_malformed_input(implementation: type) -> None:
    run = implementation()
    _play(run, EXTENDED_EPISODE)
    run2 = implementation()
    odd: list[tuple[str, Any]] = [
        ("propose", Plan(b"id", {1, 2}, float("nan"), object(), ("x",))),
        ("propose", object()),
        ("execute", {"a": 1}),
        ("execute", b"bytes"),
        ("observe", Observation(["k"], 1, PASSED, "x")),
        ("observe", 42),
    ]
    _play(run2, odd)
    for trace in (run.trace, run2.trace):
        decoded = json.loads(json.dumps(trace))
        assert len(decoded) == len(trace)
    assert len(run2.trace) == len(odd)


def test_trace_records_arguments_results_and_errors(implementation: type) -> None:
    run = implementation()
    with pytest.raises(InvalidInput):
        run.observe(Observation("acess", 1, PASSED, "ci"))
    run.observe(obs("parser", 1, PASSED, "ci"))
    with pytest.raises(ObservationConflict):
        run.observe(obs("parser", 1, FAILED, "ci"))
    run.propose(plan("p1", 1, 1))  # rejected: stale evidence
    run.propose(plan("p1", 1, 2))
    run.execute("nope")
    run.cancel()
    invalid, meaningful, conflict, rejected, accepted, unknown, cancel = run.trace
    assert invalid["result"] == {"error": "InvalidInput"}
    assert invalid["transition"] is None
    assert invalid["args"] == {
        "obs": {"key": "acess", "version": 1, "state": "Passed", "source": "ci"}
    }
    assert meaningful["result"] is True
    assert meaningful["evidence_revision"] == 2
    assert meaningful["transition"] == "idle --observe[changes_state]--> idle"
    assert conflict["result"] == {"error": "ObservationConflict"}
    assert conflict["transition"] == "idle --observe[conflicting_content]--> idle"
    assert rejected["result"] is False
    assert rejected["transition"] == "idle --propose[evidence_stale]--> idle"
    assert accepted["args"] == {
        "plan": {
            "id": "p1",
            "revision": 1,
            "evidence_revision": 2,
            "step": "inspect-parser",
            "resource": "input-A",
        }
    }
    assert accepted["transition"] == "idle --propose--> pending"
    assert unknown == {
        "seq": 6,
        "op": "execute",
        "args": {"plan_id": "nope"},
        "result": "UnknownPlan",
        "evidence_revision": 2,
        "stop_reason": None,
        "transition": "pending --execute[not is_pending_id]--> pending",
        "policy": policy_digest(DEFAULT_POLICY),
    }
    assert cancel["args"] == {}
    assert cancel["result"] is None
    assert cancel["stop_reason"] == "Canceled"
    assert cancel["transition"] == "pending --cancel--> canceled"


def test_trace_names_absorbing_final_states(implementation: type) -> None:
    run = implementation()
    run.cancel()
    run.observe(obs("parser", 1, PASSED))
    run.execute("p1")
    run.cancel()
    assert [r["transition"] for r in run.trace[1:]] == [
        "Canceled absorbs observe",
        "Canceled absorbs execute",
        "Canceled absorbs cancel",
    ]
    assert [r["result"] for r in run.trace[1:]] == [False, "Stopped", None]


def test_generated_and_reference_traces_are_identical_on_the_reference_episode() -> None:
    generated, reference = Controller(), ReferenceController()
    assert _play(generated, REFERENCE_EPISODE) == _play(reference, REFERENCE_EPISODE)
    assert generated.trace == reference.trace
    assert all(record["transition"] for record in generated.trace)
    assert [r["result"] for r in generated.trace] == [
        True,
        "Executed",
        True,
        True,
        False,
        True,
        "PreconditionDenied",
        True,
        "StalePlan",
        True,
        "Executed",
    ]


def test_generated_and_reference_agree_after_every_call_of_an_extended_episode() -> None:
    generated, reference = Controller(), ReferenceController()
    for op, argument in EXTENDED_EPISODE:
        assert _apply(generated, op, argument) == _apply(reference, op, argument)
        assert generated.snapshot() == reference.snapshot()
        assert generated.trace[-1] == reference.trace[-1]
    transitions = {r["transition"] for r in generated.trace}
    assert None in transitions  # the InvalidInput record
    assert "Completed absorbs cancel" in transitions


def test_both_implementations_label_the_declared_transitions() -> None:
    labels = tuple(t.label for t in extract(Replanning).transitions)
    assert Controller.transitions == labels
    assert ReferenceController.transitions == labels


# ---- snapshot -------------------------------------------------------------------------------


def test_snapshot_is_json_serialisable(implementation: type) -> None:
    run = implementation()
    for op, argument in EXTENDED_EPISODE:
        _apply(run, op, argument)
        snapshot = run.snapshot()
        assert json.loads(json.dumps(snapshot)) == snapshot


def test_snapshot_excludes_the_trace_and_is_equal_for_equal_states(implementation: type) -> None:
    quiet, chatty = implementation(), implementation()
    for run in (quiet, chatty):
        run.observe(obs("parser", 1, PASSED))
        run.propose(plan("p1", 1, 2))
    chatty.execute("unknown")  # changes nothing
    chatty.execute("other")
    assert len(chatty.trace) != len(quiet.trace)
    assert chatty.snapshot() == quiet.snapshot()
    assert "trace" not in quiet.snapshot()


def test_snapshot_differs_for_different_states(implementation: type) -> None:
    runs = [implementation() for _ in range(5)]
    runs[1].observe(obs("parser", 1, PASSED))
    runs[2].observe(obs("parser", 1, PASSED, "owner"))  # other source: other content
    runs[3].propose(plan("p1", 1, 1))
    runs[4].cancel()
    snapshots = [json.dumps(r.snapshot(), sort_keys=True) for r in runs]
    assert len(set(snapshots)) == len(runs)


def test_snapshot_is_a_copy(implementation: type) -> None:
    run = implementation()
    run.observe(obs("parser", 1, PASSED))
    run.propose(plan("p1", 1, 2))
    snapshot = run.snapshot()
    snapshot["accepted"].append("forged")
    snapshot["evidence"]["parser"]["state"] = "Failed"
    assert run.snapshot()["accepted"] == ["p1"]
    assert run.evidence_state("parser") is PASSED


def test_snapshot_reports_the_public_view(implementation: type) -> None:
    run = implementation()
    run.observe(obs("parser", 1, PASSED))
    run.propose(plan("p1", 1, 2))
    snapshot = run.snapshot()
    assert snapshot["evidence_revision"] == run.evidence_revision == 2
    assert snapshot["plan_revision"] == run.plan_revision == 1
    assert snapshot["proposals"] == run.proposals == 1
    assert snapshot["steps"] == run.steps == 0
    assert snapshot["no_progress"] == run.no_progress == 0
    assert snapshot["stop_reason"] is run.stop_reason is None
    assert snapshot["pending"] == plan("p1", 1, 2)._asdict()
    assert snapshot["evidence"] == {"parser": {"version": 1, "state": "Passed"}}


def test_extended_episode_keeps_every_invariant_in_lockstep() -> None:
    from replan.controller import DEFAULT_POLICY
    from replan.verification.core.harness import Operation, run_sequence

    operations = [Operation(op, argument) for op, argument in EXTENDED_EPISODE]
    report = run_sequence(DEFAULT_POLICY, operations, Controller, ReferenceController)
    assert report.failure is None, report.detail
    assert len(report.results) == len(operations)
