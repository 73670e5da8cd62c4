"""The campaign's concurrent mode: threads on one run, every property
checked on the history the run serialized them into. The serialized controller keeps
it; a plain Controller (one caller at a time) is caught racing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replan.cli import main
from replan.controller import Controller, EvidenceState, Observation, Plan
from replan.controller.policy import DEFAULT_POLICY
from replan.controller.serialized import SerializedController
from replan.verification.core.harness import Operation, apply
from replan.verification.engines.campaign.concurrent import (
    LINEARIZABLE,
    ThreadCall,
    check_trial,
    run_concurrent_campaign,
    serialize,
)


def _campaign(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    code = main(["campaign", "--json", *arguments])
    return code, json.loads(capsys.readouterr().out)


def test_threads_sharing_a_serialized_run_keep_every_property_on_its_history(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, document = _campaign(
        capsys, "--threads", "8", "--examples", "40", "--seed", "3", "-o", str(tmp_path)
    )
    assert code == 0, document["finding"]
    assert document["passed"] and document["mode"] == "concurrent"
    assert document["implementation"] == "replan.controller.serialized:SerializedController"
    assert document["calls"] == 40 * 8 * 20
    assert LINEARIZABLE in document["properties"]
    assert not list(tmp_path.glob("*.json"))


def test_the_concurrent_mode_catches_a_run_shared_without_serialization(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, document = _campaign(
        capsys,
        "--threads",
        "8",
        "--examples",
        "300",
        "--seed",
        "3",
        "--implementation",
        "replan.controller:Controller",
        "-o",
        str(tmp_path),
    )
    assert code == 1
    finding = document["finding"]
    assert finding["property"] in {LINEARIZABLE, "divergence", *document["properties"]}
    assert finding["steps"] and finding["message"]
    (saved,) = finding["saved"]
    assert json.loads(Path(saved).read_text())["property"] == finding["property"]


def _recorded(run: Controller, thread: int, operations: list[Operation]) -> list[ThreadCall]:
    calls = []
    for index, operation in enumerate(operations):
        before = len(run._trace)  # type: ignore[attr-defined]
        calls.append(
            ThreadCall(thread, index, operation, apply(run, operation), (before, len(run._trace)))  # type: ignore[attr-defined]
        )
    return calls


PASSED = Observation("parser", 1, EvidenceState.PASSED, "ci")
PLAN = Plan("p1", 1, 2, "inspect-parser", "input-A")


def test_a_serial_history_is_its_own_serialization() -> None:
    run = Controller(DEFAULT_POLICY)
    first = _recorded(run, 0, [Operation("observe", PASSED), Operation("propose", PLAN)])
    second = _recorded(run, 1, [Operation("execute", "p1"), Operation("execute", "p1")])
    history, broken = serialize(run, [first, second])
    assert broken == "" and history == [*first, *second]
    assert check_trial(DEFAULT_POLICY, Controller, run, [first, second]) is None


def test_a_call_the_trace_holds_twice_is_not_a_serialization() -> None:
    run = Controller(DEFAULT_POLICY)
    calls = _recorded(run, 0, [Operation("observe", PASSED), Operation("propose", PLAN)])
    apply(run, Operation("propose", PLAN))  # applied, but no thread made this call
    _, broken = serialize(run, [calls])
    assert "trace record 3" in broken and "no thread's next call" in broken
    finding = check_trial(DEFAULT_POLICY, Controller, run, [calls])
    assert finding is not None and finding.property == LINEARIZABLE


def test_an_answer_the_serial_history_would_not_give_is_caught() -> None:
    run = Controller(DEFAULT_POLICY)
    calls = _recorded(run, 0, [Operation("observe", PASSED), Operation("propose", PLAN)])
    executed = _recorded(run, 1, [Operation("execute", "p1")])
    # the thread was told UnknownPlan, and the trace says so too, yet serially the
    # pending plan executes: the answer no serial run gives
    lied = [ThreadCall(1, 0, executed[0].operation, "UnknownPlan", executed[0].window)]
    run._trace[-1] = (run._trace[-1][0], run._trace[-1][1], "UnknownPlan", *run._trace[-1][3:])  # type: ignore[attr-defined]
    finding = check_trial(DEFAULT_POLICY, Controller, run, [calls, lied])
    assert finding is not None
    assert finding.property in {LINEARIZABLE, "divergence"}


class UnreadableRun(SerializedController):
    """A run whose snapshot always raises: no thread can choose a call."""

    def snapshot(self) -> dict:  # type: ignore[override,type-arg]
        raise RuntimeError("no view")


def test_a_thread_that_cannot_make_its_calls_fails_the_trial() -> None:
    result = run_concurrent_campaign(
        DEFAULT_POLICY, factory=UnreadableRun, implementation="unreadable", trials=3, steps=2
    )
    assert not result.passed and result.trials_run == 1
    assert result.finding is not None and result.finding.property == LINEARIZABLE
    assert "stopped after 0 of 2 calls: RuntimeError: no view" in result.finding.message
    assert result.finding.extra["implementation"] == "unreadable"


@pytest.mark.parametrize(
    "arguments",
    [["--threads", "1"], ["--threads", "4", "--mutant", "step-limit-off-by-one"]],
    ids=["one thread", "with a mutant"],
)
def test_bad_concurrent_arguments_exit_2(
    arguments: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["campaign", *arguments]) == 2
    assert "error" in capsys.readouterr().err
