"""The contract as properties: every rule of CONTRACT.md is a named property in
spec/properties.py, checked by the campaign, the explorer and z3 from the one
definition; the checker's verdicts follow the definitions exactly."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import replan.spec.properties  # noqa: F401  (registers)
from replan.controller import DEFAULT_POLICY, Controller, EvidenceState, Observation, Plan
from replan.controller.policy import DEFAULTS, policy_from_dict
from replan.controller.records import ExecuteResult, InvalidInput
from replan.controller.run import Run
from replan.spec.checker import Checker
from replan.spec.properties import CONTRACT
from replan.spec.vocabulary import Property, unchanged
from replan.verification.core.harness import Operation, observe_call, violated

CHECKER = CONTRACT.checker

ROOT = Path(__file__).resolve().parent.parent

#: Every rule of CONTRACT.md, as the properties cite them.
RULES = (
    *(f"observe {n}" for n in range(1, 9)),
    *(f"propose {n}" for n in range(1, 6)),
    *(f"execute {n}" for n in range(1, 7)),
    "cancel",
    "stopping",
    "trace",
    "state of one run",
    "vocabulary",
    "invariant",
)


def test_every_rule_of_the_contract_has_a_named_property() -> None:
    cited = {prop.rule for prop in CONTRACT}
    assert set(RULES) <= cited, sorted(set(RULES) - cited)


def test_the_docs_table_lists_every_property_with_its_engines() -> None:
    """docs/contract/properties.md maps every rule to its property and the engines
    that check it, the controller's and the effect boundary's: a property with no row,
    or a row with no property, fails."""
    from replan.verification.boundary.properties import PROPERTIES as BOUNDARY

    page = (ROOT / "docs" / "contract" / "properties.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| [^|]+ \| `([a-z-]+)` \| ([^|]+) \|$", page, re.MULTILINE)
    listed = {name: engines.strip() for name, engines in rows}
    expected = set(CONTRACT.names) | set(BOUNDARY)
    assert set(listed) == expected, expected ^ set(listed)
    for name in BOUNDARY:
        assert "boundary" in listed[name], name
    for name, engines in listed.items():
        assert engines, name


def test_every_property_has_a_meaning() -> None:
    for prop in CONTRACT:
        assert len(prop.meaning) > 10, prop.name


def run_at(operations: list[Operation]) -> Controller:
    controller = Controller()
    for operation in operations:
        getattr(controller, operation.op)(
            *(() if operation.op == "cancel" else (operation.argument,))
        )
    return controller


def test_a_correct_call_breaks_nothing() -> None:
    controller = Controller()
    call = observe_call(
        DEFAULT_POLICY,
        controller,
        Operation("observe", Observation("parser", 1, EvidenceState.PASSED, "ci")),
    )
    assert violated(call) == []


def test_renumbered_unknown_is_not_progress_whatever_the_controller_says() -> None:
    """The property works out from the state before what should have happened: a
    controller that counts a renumbered Unknown as progress is caught by name."""
    before = Run(DEFAULT_POLICY)
    after = Run(DEFAULT_POLICY)
    after._evidence_revision = 2  # the controller claims progress
    after._latest_version = {"parser": 1}
    obs = Observation("parser", 1, EvidenceState.UNKNOWN, "ci")
    after._contents = {("parser", 1): (EvidenceState.UNKNOWN, "ci")}
    broken = CHECKER.call(
        "observe", before, obs, True, after, (("observe", obs, True, 2, "idle", 8),)
    )
    assert "observe-renumbered-is-no-progress" in broken
    assert "revision-honest" in broken


def test_a_property_that_raises_does_not_hold_and_keeps_its_message() -> None:
    checker = Checker([CONTRACT["execute-counts-one-step"]])
    before = Run(DEFAULT_POLICY)
    before._declared_state = "pending"
    before._pending = Plan("p", 1, 1, "no-such-step", "input-A")  # unreachable: no requirements
    broken = checker.call("execute", before, "p", ExecuteResult.EXECUTED, Run(DEFAULT_POLICY))
    assert broken == ["execute-counts-one-step"]
    assert "KeyError" in checker.errors["execute-counts-one-step"]


def test_unchanged_compares_what_a_run_shows_not_how_it_stores_it() -> None:
    before, after = Run(DEFAULT_POLICY), Run(DEFAULT_POLICY)
    before._latest_version = after._latest_version = {"parser": 1}
    after._known = {"parser": EvidenceState.UNKNOWN}  # stored, but reads as it did
    assert unchanged(before, after)
    after._steps = 1
    assert not unchanged(before, after) and unchanged(before, after, "steps")
    with pytest.raises(ValueError, match="not a component"):
        unchanged(before, after, "stepz")


def test_the_policy_defaults_are_the_contracts() -> None:
    assert CHECKER.policy(policy_from_dict) == []
    changed = {**DEFAULTS, "proposals_per_step": 1}
    assert CHECKER.policy(lambda document: policy_from_dict(document, changed)) == [
        "policy-defaults"
    ]


def test_a_fresh_run_is_checked_against_the_state_of_one_run() -> None:
    run = Controller(DEFAULT_POLICY)
    assert CHECKER.initial(run, DEFAULT_POLICY) == []
    run._steps = 1
    assert CHECKER.initial(run, DEFAULT_POLICY) == ["initial-state"]
    assert CHECKER.initial(
        Controller(),
        policy_from_dict(
            {
                "evidence": {"keys": ["parser", "access"]},
                "resources": {"allowed": ["input-A"]},
                "steps": [{"name": "s", "completes_run": True}],
            }
        ),
    ) == ["initial-state"]


def test_a_malformed_observation_must_raise_and_change_nothing() -> None:
    before = Run(DEFAULT_POLICY)
    after = Run(DEFAULT_POLICY)
    bad = Observation("parser", True, EvidenceState.PASSED, "ci")  # a bool is not an int
    assert "observe-malformed-raises" in CHECKER.call("observe", before, bad, False, after)
    assert "observe-malformed-raises" not in CHECKER.call(
        "observe", before, bad, InvalidInput, after
    )


# ---- which properties read the call's argument, per event (the explorer's split) ------


def _reads_only_on_observe(
    event: str, before: Run, argument: object, answer: object, after: Run
) -> bool:
    if event == "observe":
        return argument is not None
    return True


def _reads_after_an_undecided_test(
    event: str, before: Run, argument: object, answer: object, after: Run
) -> bool:
    if before.steps > 0 or event not in ("propose", "execute"):
        return True
    return argument is not None and event != "cancel"


def _property(function: object) -> Property:
    parameters = ("event", "before", "argument", "answer", "after")
    return Property(function.__name__, "call", "", None, function, parameters)  # type: ignore[attr-defined]


def test_a_property_reading_the_argument_on_one_event_is_argument_free_on_the_others() -> None:
    prop = _property(_reads_only_on_observe)
    assert prop.reads_argument
    assert prop.reads_argument_on("observe")
    assert not prop.reads_argument_on("propose")


def test_the_argument_counts_as_read_when_a_test_before_it_is_undecided() -> None:
    prop = _property(_reads_after_an_undecided_test)
    assert prop.reads_argument_on("propose")  # before.steps decides, not the event
    assert not prop.reads_argument_on("approve")  # the first test always returns


def _positional_only(event: str, before: Run, argument: Any, /, answer: object, after: Run) -> bool:
    return event != "observe" or argument is None


def _event_rebound_in_a_generator(
    event: str, before: Run, argument: Any, answer: object, after: Run
) -> bool:
    return any(event == "observe" and argument is None for event in ("observe",))


def _event_in_a_string(event: str, before: Run, argument: Any, answer: object, after: Run) -> bool:
    if event in "observe cancel":
        return argument is None
    return True


def _argument_read_before_a_decided_operand(
    event: str, before: Run, argument: Any, answer: object, after: Run
) -> bool:
    return bool((argument.ok or event == "propose") and before is not None)


@pytest.mark.parametrize(
    ("function", "event"),
    [
        (_positional_only, "propose"),
        (_event_rebound_in_a_generator, "propose"),
        (_event_in_a_string, "cancel"),
        (_argument_read_before_a_decided_operand, "propose"),
    ],
)
def test_what_the_folding_cannot_decide_counts_as_reading_the_argument(
    function: Any, event: str
) -> None:
    assert _property(function).reads_argument_on(event)


def test_the_contracts_rank_and_revision_properties_read_an_observation_only() -> None:
    for name in ("calls-lower-the-rank", "revision-honest"):
        assert CONTRACT[name].reads_argument_on("observe")
        assert not CONTRACT[name].reads_argument_on("propose")
    # a parameter named for the event's argument but never read is not a read
    assert not CONTRACT["propose-uses-a-slot"].reads_argument_on("propose")
    assert CONTRACT["propose-revision-must-increase"].reads_argument_on("propose")
    assert CONTRACT["trace-one-record-per-call"].reads_argument_on("cancel")
