"""The middleware's and the tracing's bench workloads run, check their own outcome,
and fail loudly when the guard refuses the call (a fast wrong answer is not a
result). No timing is asserted: `replan bench --tool middleware` reports it."""

from __future__ import annotations

import pytest

import replan.verification.bench.middleware as workloads
from replan.controller.executor import Grant


@pytest.mark.parametrize("name", list(workloads.WORKLOADS))
def test_each_workload_episode_completes(name: str) -> None:
    episode = workloads.WORKLOADS[name]
    for _ in range(3):
        assert episode() is None


def test_the_guarded_episode_fails_when_the_guard_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workloads, "GRANT", Grant(["elsewhere"], ["inspect"]))
    monkeypatch.setattr(workloads, "_guarded", None)
    with pytest.raises(AssertionError, match=r"the tool answered .Denied: resource"):
        workloads.guarded_tool_call()


def test_every_difference_names_two_workloads() -> None:
    for _, minuend, subtrahend, calls in workloads.DIFFERENCES:
        assert {minuend, subtrahend} <= set(workloads.WORKLOADS) and calls >= 1
