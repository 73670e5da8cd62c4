"""One model, declared once: the run's fields come from one table, the events from the
declaration's interface, the rows every active state shares are written once, and
what no engine exercised is reported as a gap."""

from __future__ import annotations

import typing

from replan.controller import DEFAULT_POLICY, Controller, EvidenceState, Observation, Plan
from replan.controller.fields import FIELDS, SLOTS, export_state, state_of_snapshot
from replan.controller.run import Run
from replan.spec.declaration import Replanning
from replan.spec.generator import generate_source
from replan.spec.model import extract
from replan.spec.reference import ReferenceController
from replan.verification.core.harness import ARGUMENT_NAME, OPS

DECLARATION = extract(Replanning)


def test_the_runs_fields_are_the_field_tables() -> None:
    assert set(Run.__slots__) == {*SLOTS, "policy"}
    hints = typing.get_type_hints(Run)
    assert {name for name in hints if name.startswith("_")} == set(SLOTS)
    fresh = Run(DEFAULT_POLICY)
    for field in FIELDS:
        assert getattr(fresh, field.attribute) == field.initial, field.attribute


def test_the_generated_init_and_export_agree_with_the_generic_ones() -> None:
    run, generic = Controller(), Run()
    for operation in (
        ("observe", Observation("parser", 1, EvidenceState.PASSED, "ci")),
        ("propose", Plan("p1", 1, 2, "inspect-parser", "input-A")),
    ):
        getattr(run, operation[0])(operation[1])
    generic._import_state(run._export_state())
    assert run._export_state() == export_state(run) == generic._export_state()
    assert Controller()._export_state() == Run()._export_state()


def test_a_snapshot_without_a_component_reads_as_its_initial_value() -> None:
    """An implementation that predates a field still reads (a lockstep comparison
    goes through the state, not the raw dict)."""
    snapshot = Controller().snapshot()
    del snapshot["accepted"]
    assert state_of_snapshot(snapshot) == Controller()._export_state()


def test_the_events_come_from_the_declarations_interface() -> None:
    assert tuple(DECLARATION.interface) == OPS
    assert ARGUMENT_NAME == {
        "observe": "obs",
        "propose": "plan",
        "execute": "plan_id",
        "approve": "approval",
        "charge": "usage",
    }
    callers = {event: i.caller for event, i in DECLARATION.interface.items()}
    assert callers == {
        "observe": "host",
        "propose": "model",
        "execute": "model",
        "approve": "host",
        "charge": "host",
        "cancel": "host",
    }
    assert Controller.events == ReferenceController.events
    for event in DECLARATION.interface:
        assert callable(getattr(ReferenceController, event))  # derived, not written


def test_rows_every_active_state_shares_are_generated_once() -> None:
    source = generate_source()
    active = "('idle', 'pending', 'awaiting_approval', 'approved')"
    # observe, propose, charge, cancel
    assert source.count(f"if current in {active}:") == 4
    assert (
        "# 0, 24, 53, 79: idle|pending|awaiting_approval|approved --observe"
        "[duplicate_delivery and counts_duplicates" in source
    )
    assert "fired = 0 if current == 'idle' else 24 if current == 'pending' else 53" in source
