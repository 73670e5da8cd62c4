"""Budgets (CONTRACT.md `charge`, budget rules 1-4): the host charges tokens, cost and
elapsed milliseconds; reaching a limit the policy sets stops the run BudgetExhausted;
a dimension without a limit is not counted; a malformed usage is a host bug (loud),
and a well-formed one never raises. Every test runs on both implementations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import PASSED, obs, plan

from replan.controller import (
    DEFAULT_POLICY,
    ExecuteResult,
    InvalidInput,
    PolicyError,
    StopReason,
    Usage,
    handoff,
    load_policy,
)
from replan.controller.policy import policy_from_dict, policy_to_dict
from replan.controller.records import LARGEST_INT

BUDGET_POLICY = Path(__file__).parent / "policies" / "budget.toml"


@pytest.fixture
def budgeted() -> Any:
    return load_policy(BUDGET_POLICY)


def test_a_charge_within_every_budget_is_counted_and_the_run_goes_on(
    implementation: Any, budgeted: Any
) -> None:
    run = implementation(budgeted)
    assert run.charge(Usage(400, 10_000, 60_000)) is True
    assert (run.tokens, run.cost, run.elapsed_ms) == (400, 10_000, 60_000)
    assert run.stop_reason is None
    assert run.snapshot()["tokens"] == 400


@pytest.mark.parametrize(
    "usage",
    [Usage(1000, 0, 0), Usage(0, 50_000, 0), Usage(0, 0, 120_000), Usage(LARGEST_INT, 0, 0)],
    ids=["tokens", "cost", "wall-clock", "far-past"],
)
def test_reaching_any_budget_stops_the_run_budget_exhausted(
    implementation: Any, budgeted: Any, usage: Usage
) -> None:
    run = implementation(budgeted)
    assert run.charge(usage) is True
    assert run.stop_reason is StopReason.BUDGET_EXHAUSTED


def test_one_short_of_a_budget_is_within_it(implementation: Any, budgeted: Any) -> None:
    run = implementation(budgeted)
    run.charge(Usage(999, 49_999, 119_999))
    assert run.stop_reason is None
    run.charge(Usage(1, 0, 0))
    assert run.stop_reason is StopReason.BUDGET_EXHAUSTED


def test_no_call_is_accepted_after_the_budget_is_exhausted(
    implementation: Any, budgeted: Any
) -> None:
    run = implementation(budgeted)
    run.observe(obs("parser", 1, PASSED))
    assert run.propose(plan("p1", 1, run.evidence_revision))
    run.charge(Usage(1000, 0, 0))
    before = run.snapshot()
    assert run.execute("p1") is ExecuteResult.STOPPED
    assert run.propose(plan("p2", 2, run.evidence_revision)) is False
    assert run.observe(obs("access", 1, PASSED)) is False
    assert run.charge(Usage(1, 1, 1)) is False
    run.cancel()
    assert run.snapshot() == before
    assert run.stop_reason is StopReason.BUDGET_EXHAUSTED


def test_without_a_limit_a_dimension_is_not_counted(implementation: Any) -> None:
    run = implementation(DEFAULT_POLICY)
    assert run.charge(Usage(10**9, 10**9, 10**9)) is True
    assert (run.tokens, run.cost, run.elapsed_ms) == (0, 0, 0)
    assert run.stop_reason is None


@pytest.mark.parametrize(
    ("usage", "named"),
    [
        ((1, 2, 3), "usage: expected a Usage"),
        (Usage(-1, 0, 0), "usage.tokens"),
        (Usage(0, True, 0), "usage.cost"),
        (Usage(0, 0, 1.5), "usage.elapsed_ms"),
    ],
)
def test_a_malformed_usage_raises_naming_the_field_and_changes_nothing(
    implementation: Any, budgeted: Any, usage: Any, named: str
) -> None:
    run = implementation(budgeted)
    before = run.snapshot()
    with pytest.raises(InvalidInput, match=named):
        run.charge(usage)
    assert run.snapshot() == before


def test_handoff_shows_each_budget_used_against_its_limit(budgeted: Any) -> None:
    from replan.controller import Controller

    run = Controller(budgeted)
    run.charge(Usage(10, 20, 30))
    summary = handoff(run)
    assert summary["tokens"] == "10 of 1000"
    assert summary["cost"] == "20 of 50000 micro-USD"
    assert summary["elapsed_ms"] == "30 of 120000 ms"
    assert "tokens" not in handoff(Controller())


def test_a_cost_budget_needs_a_currency() -> None:
    document = policy_to_dict(DEFAULT_POLICY)
    document["limits"]["max_cost"] = 5
    with pytest.raises(PolicyError, match=r"^limits\.currency: missing field"):
        policy_from_dict(document)
    document["limits"]["currency"] = "EUR"
    assert policy_from_dict(document).max_cost == 5


def test_a_policy_without_budgets_reads_and_digests_as_before() -> None:
    assert "max_tokens" not in policy_to_dict(DEFAULT_POLICY)["limits"]
    assert policy_to_dict(load_policy(BUDGET_POLICY))["limits"]["currency"] == "USD"


def test_verify_strict_holds_on_the_budget_policy(tmp_path: Path) -> None:
    """Every engine on a policy with budgets: proofs (limits symbolic), the explorer
    reaching BudgetExhausted, the campaign covering every live transition."""
    from replan.cli import main

    assert (
        main(["verify", "--strict", "--policy", str(BUDGET_POLICY), "--output", str(tmp_path)]) == 0
    )
    report = (tmp_path / "verify.json").read_text()
    assert "BudgetExhausted" in report
