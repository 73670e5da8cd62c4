"""A campaign's memory stays bounded: its visited states are kept as
fingerprints that give the explorer comparison the very figures the snapshots' text
gave, and a budget runs as Hypothesis engines of a bounded share each."""

from __future__ import annotations

from typing import Any

import pytest

from replan.controller.policy import DEFAULT_POLICY
from replan.verification.core import visited as visited_module
from replan.verification.core.domains import smoke_domains
from replan.verification.core.visited import Visited, canonical_snapshot, fingerprint
from replan.verification.engines.campaign.machine import PROFILES
from replan.verification.engines.campaign.memory import (
    EXAMPLES_PER_ENGINE,
    engine_budgets,
    engine_seed,
)
from replan.verification.engines.campaign.run import run_campaign
from replan.verification.engines.explore.coverage import coverage
from replan.verification.engines.explore.engine import explore

#: Both keys at one version (7,233 states, about a second): the campaign's visits fall
#: both inside and outside it.
SMALL = smoke_domains()


def test_fingerprinted_visits_give_the_explorer_comparison_the_same_figures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same campaign, its visits also kept the old way (each snapshot's canonical
    text): the comparison with the explorer reads equal figures from both."""
    texts: set[str] = set()
    text_pairs: set[tuple[str, str]] = set()
    by_fingerprint: dict[bytes, str] = {}
    record_state, record_transition = Visited.state, Visited.transition

    def state(self: Visited, snapshot: Any) -> bytes:
        key = record_state(self, snapshot)
        by_fingerprint[key] = canonical_snapshot(snapshot)
        texts.add(by_fingerprint[key])
        return key

    def transition(self: Visited, before: bytes, label: str) -> None:
        record_transition(self, before, label)
        text_pairs.add((by_fingerprint[before], label))

    monkeypatch.setattr(visited_module.Visited, "state", state)
    monkeypatch.setattr(visited_module.Visited, "transition", transition)
    result = run_campaign(DEFAULT_POLICY, "ci", seed=11, examples=40, steps=30, database=None)
    assert result.passed
    assert len(result.visited) == len(texts) > 100
    assert result.visited.transition_count == len(text_pairs)

    explored = explore(DEFAULT_POLICY, SMALL, keep_graph=True)
    from_fingerprints = coverage(
        explored,
        result.visited.abstract_states(),
        result.visited.abstract_transitions(),
        abstracted=True,
    )
    from_texts = coverage(explored, texts, text_pairs)
    assert from_fingerprints.to_json() == from_texts.to_json()
    assert from_fingerprints.states_reached > 0 and from_fingerprints.outside_states > 0


def test_a_visited_state_is_kept_as_sixteen_bytes_whatever_its_snapshot_holds() -> None:
    visited = Visited()
    from replan.controller import Controller

    snapshot = Controller().snapshot()
    large = {**snapshot, "accepted": [f"plan-{index}" * 50 for index in range(500)]}
    assert len(canonical_snapshot(large)) > 100_000
    assert len(fingerprint(large)) == 16
    assert visited.state(snapshot) == visited.state(dict(snapshot)) == fingerprint(snapshot)
    assert len(visited) == 1 and snapshot in visited


def test_a_budget_runs_as_engines_of_a_bounded_share() -> None:
    assert engine_budgets(PROFILES["ci"].examples) == [PROFILES["ci"].examples]  # as before
    assert engine_budgets(PROFILES["thorough"].examples) == [EXAMPLES_PER_ENGINE] * 12
    assert engine_budgets(600) == [250, 250, 100]
    assert engine_budgets(600, None) == [600]
    with pytest.raises(ValueError, match="at least 1"):
        engine_budgets(600, 0)
    assert engine_seed(7, 0) == 7
    assert len({engine_seed(7, number) for number in range(12)}) == 12


def test_a_campaign_of_several_engines_counts_all_and_is_deterministic_for_a_seed() -> None:
    def run() -> tuple[int, int, int]:
        result = run_campaign(
            DEFAULT_POLICY, "ci", seed=4, examples=9, steps=8, database=None, examples_per_engine=4
        )
        assert result.passed
        return result.examples, result.operations, len(result.visited)

    first = run()
    assert first[0] >= 9  # three engines (4 + 4 + 1), every example counted
    assert run() == first
    alone = run_campaign(
        DEFAULT_POLICY, "ci", seed=4, examples=4, steps=8, database=None, examples_per_engine=4
    )
    assert alone.operations < first[1]
