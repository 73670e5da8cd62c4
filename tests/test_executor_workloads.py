"""The executor's bench workloads run, check their own outcome, and fail loudly on a
broken executor (a fast wrong answer is not a result)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import replan.verification.bench.executor as workloads
from replan.controller.executor import Execution, Executor, Grant, Operation, Outcome
from replan.verification.boundary.executor.mutants import GrantNotChecked


@pytest.mark.parametrize("name", list(workloads.WORKLOADS))
def test_each_workload_episode_completes(name: str) -> None:
    episode = workloads.WORKLOADS[name]
    for _ in range(3):
        assert episode() is None


def test_the_sqlite_episode_leaves_no_journal_files_behind() -> None:
    workloads.authorized_episode_sqlite()
    directory = workloads._scratch_directory()
    assert not [path for path in directory.iterdir() if path.name.startswith("journal-")]


def test_the_denied_episode_fails_on_an_executor_that_ignores_the_grant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(workloads, "Executor", GrantNotChecked)
    with pytest.raises(AssertionError, match="the effect of denied commit-1 ran"):
        workloads.denied_episode_memory()


class DeniesEverything(Executor):
    __slots__ = ()

    def _denied(self, operation: Operation, grant: Grant) -> Execution | None:
        return Execution(Outcome.DENIED, operation.plan_id, operation.digest(), None, None, "no")


@pytest.mark.parametrize(
    "episode", [workloads.authorized_episode_memory, workloads.authorized_episode_sqlite]
)
def test_the_authorized_episode_fails_when_the_operation_is_not_executed(
    monkeypatch: pytest.MonkeyPatch, episode: Callable[[], None]
) -> None:
    monkeypatch.setattr(workloads, "Executor", DeniesEverything)
    with pytest.raises(AssertionError, match="authorized episode answered Denied, not Executed"):
        episode()
