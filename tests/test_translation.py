"""Translation validation: z3 proves the generated controller equal to its declaration,
event by event, and fails naming the transition on a generated file with two
priorities swapped, a dropped negation or an untraced raise."""

from __future__ import annotations

import dataclasses

import pytest

from replan.controller import DEFAULT_POLICY, Controller
from replan.spec.declaration import Replanning
from replan.spec.generator import load_controller
from replan.spec.model import extract
from replan.verification.engines.prove.translation import validate
from replan.verification.subjects.mutants import MUTANTS

DECLARATION = extract(Replanning)


def results(controller: type) -> dict[str, object]:
    return {r.name: r for r in validate(DEFAULT_POLICY, controller, DECLARATION)}


def test_the_committed_generated_file_is_proved_equal_to_the_declaration() -> None:
    found = results(Controller)
    assert found["generated-matches-declaration"].proved  # type: ignore[attr-defined]
    assert found["trace-one-record-per-call"].proved  # type: ignore[attr-defined]


def test_two_swapped_priorities_fail_naming_the_transition() -> None:
    found = results(MUTANTS["generator-priority-swapped"].controller)
    equal = found["generated-matches-declaration"]
    assert not equal.proved  # type: ignore[attr-defined]
    message = equal.message  # type: ignore[attr-defined]
    assert "the declaration fires `pending --execute[steps_exhausted]--> step_limit`" in message
    assert "the generated code fires `pending --execute[not prerequisites_passed]--> pending`" in (
        message
    )


def test_a_dropped_negation_fails_naming_the_transition() -> None:
    equal = results(MUTANTS["generator-negation-dropped"].controller)[
        "generated-matches-declaration"
    ]
    assert not equal.proved  # type: ignore[attr-defined]
    message = equal.message  # type: ignore[attr-defined]
    assert message.startswith("execute: the declaration fires `pending --execute")
    assert "the generated code fires `pending --execute" in message


def test_a_raise_that_leaves_no_trace_breaks_the_trace_rule() -> None:
    found = results(MUTANTS["raise-leaves-no-trace"].controller)
    assert not found["trace-one-record-per-call"].proved  # type: ignore[attr-defined]


#: The events with more than one transition out of ``pending`` (an order to get wrong).
ORDERED = sorted(
    {t.event for t in DECLARATION.transitions if t.source == "pending" and t.priority > 1}
)


@pytest.mark.parametrize("event", ORDERED)
def test_any_generated_event_with_a_transition_swapped_is_told_apart(event: str) -> None:
    """Generated code that follows another order for one event (the first and the
    last transition out of ``pending`` exchanged) is caught, and the event named."""
    transitions = list(DECLARATION.transitions)
    positions = [i for i, t in enumerate(transitions) if t.source == "pending" and t.event == event]
    first, second = positions[0], positions[-1]
    transitions[first], transitions[second] = transitions[second], transitions[first]
    from replan.verification.subjects.mutation import renumbered

    generated = load_controller(renumbered(DECLARATION, transitions), name=f"swap-{event}")
    equal = results(generated)["generated-matches-declaration"]
    assert not equal.proved  # type: ignore[attr-defined]
    assert equal.message.startswith(f"{event}: ")  # type: ignore[attr-defined]


def test_an_unchanged_regeneration_is_proved_equal() -> None:
    regenerated = load_controller(dataclasses.replace(DECLARATION), name="again")
    assert results(regenerated)["generated-matches-declaration"].proved  # type: ignore[attr-defined]
