"""The campaign's throughput levers keep its checks: a reset reference model is a fresh
one (one ``ReferenceController`` per engine, reset for every run),
and the bare lockstep baseline measures what it says."""

from __future__ import annotations

from replan.controller.policy import DEFAULT_POLICY
from replan.controller.records import EvidenceState, Observation, Plan
from replan.spec.reference import ReferenceController
from replan.verification.bench.bare_lockstep import bare_lockstep_rate
from replan.verification.core.harness import Operation, apply
from replan.verification.engines.campaign.machine import build_machine

PASSED = EvidenceState.PASSED
#: A run to Completed: both prerequisites, the commit step proposed and executed.
COMPLETING = [
    Operation("observe", Observation("parser", 1, PASSED, "ci")),
    Operation("observe", Observation("access", 1, PASSED, "ci")),
    Operation("propose", Plan("p1", 1, 3, "commit-import", "input-A")),
    Operation("execute", "p1"),
    Operation("observe", Observation("parser", 2, PASSED, "ci")),
]


def _run(reference: ReferenceController, operations: list[Operation]) -> list[object]:
    return [apply(reference, operation) for operation in operations]


def test_a_reset_reference_is_a_fresh_one() -> None:
    fresh = ReferenceController(DEFAULT_POLICY)
    expected = _run(fresh, COMPLETING)
    assert fresh.stop_reason is not None  # the machine entered a final state

    reused = ReferenceController(DEFAULT_POLICY)
    for earlier in (
        COMPLETING,  # its engine stopped in a final state
        [Operation("observe", None)],  # an input check raised
        [Operation("cancel")],
        [Operation("propose", Plan("p1", 1, 1, "inspect-parser", "input-A"))],
    ):
        _run(reused, earlier)
        reused.reset()
        assert reused.snapshot() == ReferenceController(DEFAULT_POLICY).snapshot()
        assert reused.trace == []
        assert _run(reused, COMPLETING) == expected
        assert reused.snapshot() == fresh.snapshot()
        assert reused.trace == fresh.trace
        reused.reset()


def test_one_reference_per_machine_class() -> None:
    """Each run of an engine gets the machine class's one reference, reset."""
    from replan.controller import Controller
    from replan.verification.core.coverage import Coverage, targets_for
    from replan.verification.engines.campaign.machine import Recorder

    recorder = Recorder(Coverage(targets_for(DEFAULT_POLICY)), 1)
    machine = build_machine(DEFAULT_POLICY, Controller, recorder, identity="reuse")
    first = machine()
    twin = first.twin
    first._do("cancel")
    for _ in range(3):
        first._do("cancel")  # a stopped run absorbs three calls, then a new run starts
    assert first.twin is twin
    assert first.twin.snapshot() == ReferenceController(DEFAULT_POLICY).snapshot()
    assert machine().twin is twin
    other = build_machine(DEFAULT_POLICY, Controller, recorder, identity="reuse")
    assert other().twin is not twin


def test_the_bare_lockstep_rate() -> None:
    figure = bare_lockstep_rate(seed=0, examples=3)
    assert figure["operations"] > 0
    assert figure["seconds"] > 0
    assert figure["operations_per_second"] > 0
