"""The boundary check (``replan.verification.boundary``): the real effect boundary holds
every rule, each seeded bug kind is caught and named, a counterexample replays, and the
explorer catches a broken design. Each engine is shown catching a broken component."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from replan.controller import DEFAULT_POLICY
from replan.verification.boundary.check import check_boundary, load_counterexample, replay
from replan.verification.boundary.declaration import STATES, CallLife, LifeError, move
from replan.verification.boundary.domains import (
    Approve,
    Domains,
    Request,
    Restart,
    boundary_policy,
    op_from_json,
    op_to_json,
)
from replan.verification.boundary.explore import explore
from replan.verification.boundary.model import Model
from replan.verification.boundary.properties import PROPERTIES
from replan.verification.boundary.subjects import MUTANTS, SubjectError, edited

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _quiet_sdk() -> None:
    """The SDK logs each tool a crash stops; the check reports it instead."""
    logging.getLogger("agent_framework").setLevel(logging.CRITICAL)


def test_the_real_boundary_holds_every_rule() -> None:
    result = check_boundary(DEFAULT_POLICY)
    assert result.ok, result.message
    figures = result.figures
    assert figures["crashes"] > 100 and figures["tampered"] > 10
    assert set(figures["crash_points"]) == set(CallLife.crash_points)


@pytest.mark.parametrize("name", list(MUTANTS))
def test_each_seeded_bug_is_caught_and_named(name: str, tmp_path: Path) -> None:
    result = check_boundary(DEFAULT_POLICY, subject=name, out_dir=tmp_path)
    assert result.violated == [MUTANTS[name][1]], result.message
    assert result.counterexample is not None
    assert replay(result.counterexample) is not None  # the bug, again
    assert replay(result.counterexample, subject="real") is None  # the fix holds there


def test_a_counterexample_is_json_and_says_what_it_shows(tmp_path: Path) -> None:
    result = check_boundary(DEFAULT_POLICY, subject="perform-ignores-resource", out_dir=tmp_path)
    assert result.counterexample is not None
    document = json.loads(result.counterexample.read_text())
    assert document["property"] == "effect-matches-what-was-accepted"
    assert [op_to_json(op_from_json(step)) for step in document["steps"]] == document["steps"]
    assert any("input-A~granted" in line for line in document["described"])


def test_the_explorer_catches_a_model_that_reruns_an_in_doubt_call() -> None:
    """A broken design (an in-doubt call answered as if it could run) is found by the
    explorer alone, before anything real runs."""

    class Careless(Model):
        pass

    domains = Domains.of(boundary_policy(DEFAULT_POLICY))
    broken = Careless(domains)
    original = broken.apply

    def apply(world, op):  # type: ignore[no-untyped-def]
        expected = original(world, op)
        calls = list(expected.world.calls)
        for index, state in enumerate(calls):
            if state.entry == "open" and not expected.world.crashed:
                calls[index] = state._replace(effects=state.effects + 2)
        expected.world = expected.world._replace(calls=tuple(calls))
        return expected

    broken.apply = apply  # type: ignore[method-assign]
    found = explore(domains, depth=2, max_states=200, model=broken)
    assert not found.ok
    assert found.violations[0][0].property == "effect-at-most-once"
    assert explore(domains, depth=2, max_states=200).ok


def test_the_declaration_refuses_a_move_it_does_not_have() -> None:
    assert move("intended", "run_effect") == "effected"
    with pytest.raises(LifeError, match=r"^a call in 'answered' cannot 'run_effect'"):
        move("answered", "run_effect")
    assert {"requested", "in_doubt", "abandoned"} <= set(STATES)


def test_every_rule_and_crash_point_is_in_the_contract() -> None:
    contract = (ROOT / "CONTRACT.md").read_text()
    for rule in PROPERTIES:
        assert f"`{rule}`" in contract, rule
    for point in CallLife.crash_points:
        assert f"`{point.replace('_', '-')}`" in contract, point


def test_operations_round_trip_as_json() -> None:
    for op in (
        Request("host", (("c1", "A", "input-A"),), ("decided", "c1")),
        Approve("c1", "B", "approved"),
        Restart("rollback-log"),
    ):
        assert op_from_json(op_to_json(op)) == op


def test_bad_input_to_the_check_is_one_line_and_runs_nothing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^profile 'fast': one of ci, default, thorough$"):
        check_boundary(profile="fast")
    with pytest.raises(ValueError, match=r"^no boundary subject 'nope' \(known: real, "):
        check_boundary(subject="nope")
    not_one = tmp_path / "other.json"
    not_one.write_text('{"tool": "replan verify"}')
    with pytest.raises(ValueError, match="not a boundary counterexample") as refused:
        load_counterexample(not_one)
    assert "\n" not in str(refused.value)
    with pytest.raises(ValueError, match="not a boundary operation"):
        op_from_json({"op": "explode"})


def test_an_edit_that_no_longer_applies_is_refused_by_name() -> None:
    with pytest.raises(SubjectError, match="no longer applies"):
        edited(
            "gone",
            "an edit of text that is not there",
            "effect-at-most-once",
            ("controller/executor.py", "no such text", "other"),
        )
