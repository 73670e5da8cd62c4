"""The campaign alone reaches every live declared transition, derived from the model:
an event no rule spells out gets a rule of its own (the self-loops where it is
refused included), every state reached is tried with every event that can leave it,
and a rare state is revisited from the shortest runs that entered it; what z3 shows
cannot fire under the policy is no target."""

from __future__ import annotations

from pathlib import Path

import pytest

from replan.controller.policy import DEFAULT_POLICY, load_policy
from replan.verification.engines.campaign.machine import DERIVED_EVENTS, RULED_EVENTS
from replan.verification.engines.campaign.run import run_campaign

POLICIES = Path(__file__).parent / "policies"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["default", "approval.toml", "budget.toml"])
def test_the_campaign_alone_reaches_every_live_transition(name: str) -> None:
    policy = DEFAULT_POLICY if name == "default" else load_policy(POLICIES / name)
    result = run_campaign(policy, "ci", seed=0, out_dir=None, database=None)
    assert result.passed, result.finding
    assert result.coverage.missed_transitions == []
    assert result.coverage.complete
    assert not result.seeded  # nothing from the explorer


def test_every_event_without_a_rule_of_its_own_is_drawn() -> None:
    """approve and charge have no hand-written rule: each gets one, drawn in every
    state (their refused self-loops included), as a new event would."""
    from replan.verification.core.coverage import Coverage, targets_for
    from replan.verification.core.domains import PARAMETER_TYPES
    from replan.verification.core.subject import PROJECT
    from replan.verification.engines.campaign.machine import Recorder, build_machine

    assert set(DERIVED_EVENTS) == set(PARAMETER_TYPES) - RULED_EVENTS
    assert {"approve", "charge"} <= set(DERIVED_EVENTS)
    machine = build_machine(
        DEFAULT_POLICY,
        PROJECT.controller,
        Recorder(Coverage(targets_for(DEFAULT_POLICY)), 1),
        identity="rules",
    )
    assert all(callable(getattr(machine, f"event_{event}")) for event in DERIVED_EVENTS)
