"""The campaign's executor mode: the real executor holds every invariant; broken ones
are caught, each by the invariant it breaks, with a program that reproduces it."""

from __future__ import annotations

import pytest

from replan.verification.boundary.executor.campaign import INVARIANTS, run_executor_campaign
from replan.verification.boundary.executor.mutants import MUTANTS, REAL


def test_real_executor_holds_every_invariant() -> None:
    result = run_executor_campaign(REAL, examples=100)
    assert result.failure is None, result.program


@pytest.mark.parametrize(
    ("mutant", "invariant"),
    [
        ("grant-not-checked", "outcome-as-modelled"),
        ("receipt-before-effect", "effect-authorized"),
        ("in-doubt-treated-as-done", "outcome-as-modelled"),
    ],
)
def test_campaign_catches_a_broken_executor(mutant: str, invariant: str) -> None:
    result = run_executor_campaign(MUTANTS[mutant], examples=100, shrink=False)
    assert result.failure is not None and result.failure.startswith(f"{invariant}: ")
    assert invariant in INVARIANTS


def test_a_failure_comes_with_a_shrunk_program_to_paste() -> None:
    result = run_executor_campaign(MUTANTS["replay-reruns-effect"], examples=100)
    assert result.failure is not None
    assert "state = ExecutorMachine_replay_reruns_effect()" in result.program
    # Shrunk to the essence: one request, then the same operation again.
    assert "requested_0 = state.request(operation=Operation('p1'" in result.program
    assert "state.replay(operation=requested_0)" in result.program
