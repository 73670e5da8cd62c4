"""``replan replay``: a saved counterexample re-run on an implementation beside the
reference model shows which invariant breaks or where the two diverge; exit 1 while
it fails, 0 once it passes, 2 for a file or implementation it cannot use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replan.cli import main
from replan.controller import Controller, EvidenceState, ExecuteResult, Observation, Plan
from replan.controller.policy import DEFAULT_POLICY
from replan.verification.core.harness import Finding, Operation, run_sequence


class AnswersUnknownForStale(Controller):
    """Broken only in its answer: a stale id is reported as UnknownPlan (its trace
    still says StalePlan). The contract's properties catch it, and so does the
    lockstep comparison with the reference model."""

    def execute(self, plan_id: str) -> ExecuteResult:
        answer = super().execute(plan_id)
        return ExecuteResult.UNKNOWN_PLAN if answer is ExecuteResult.STALE_PLAN else answer


OLDER_AFTER_NEWER = [
    Operation("observe", Observation("parser", 2, EvidenceState.PASSED, "ci")),
    Operation("observe", Observation("parser", 1, EvidenceState.FAILED, "ci")),
]
STALE_EXECUTION = [
    Operation("propose", Plan("p1", 1, 1, "inspect-parser", "input-A")),
    Operation("observe", Observation("parser", 1, EvidenceState.PASSED, "ci")),
    Operation("execute", "p1"),
]


def save(path: Path, operations: list[Operation], **extra: Any) -> Path:
    finding = Finding(
        property="test",
        policy=DEFAULT_POLICY,
        operations=operations,
        results=[None] * len(operations),
        source="test",
        extra=extra,
    )
    return finding.save(path)


def test_an_invariant_that_still_breaks_exits_1_and_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = save(tmp_path / "older.json", OLDER_AFTER_NEWER)
    assert main(["replay", str(file), "--mutant", "older-overwrites-newer"]) == 1
    output = capsys.readouterr().out
    assert "STILL FAILS at operation 2: breaks observe-older-never-overwrites" in output
    assert "EvidenceState.FAILED" in output  # readable, pasteable records


def test_a_wrong_answer_is_named_by_the_rule_it_breaks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = save(tmp_path / "stale.json", STALE_EXECUTION)
    implementation = f"{__name__}:AnswersUnknownForStale"
    assert main(["replay", str(file), "--implementation", implementation]) == 1
    output = capsys.readouterr().out
    assert "STILL FAILS at operation 3: breaks execute-stale-plan" in output


def test_a_divergence_from_the_reference_model_is_shown() -> None:
    """The lockstep comparison checks the generator: here the implementation keeps
    every property and the *reference* is the broken one."""
    report = run_sequence(DEFAULT_POLICY, STALE_EXECUTION, Controller, AnswersUnknownForStale)
    assert report.failure == "divergence" and report.failed_at == 2
    assert "implementation answered StalePlan, the reference model UnknownPlan" in report.detail


def test_a_fixed_bug_replays_clean_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = save(tmp_path / "older.json", OLDER_AFTER_NEWER)
    assert main(["replay", str(file)]) == 0
    assert "passes now" in capsys.readouterr().out


def test_the_implementation_recorded_in_the_file_is_the_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = save(
        tmp_path / "older.json",
        OLDER_AFTER_NEWER,
        implementation="replan.verification.subjects.mutants:older_overwrites_newer",
    )
    assert main(["replay", str(file), "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert (
        document["implementation"] == "replan.verification.subjects.mutants:older_overwrites_newer"
    )
    assert document["still_fails"] is True
    assert document["failed_at"] == 2
    assert document["failure"] == "observe-older-never-overwrites"
    assert [step["ran"] for step in document["steps"]] == [True, True]
    # --implementation overrides what the file names
    assert main(["replay", str(file), "--implementation", "replan.controller:Controller"]) == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("not json", "not a counterexample JSON file"),
        ('{"policy": {}}', "expected an object with a 'steps' list"),
    ],
)
def test_a_file_that_cannot_be_read_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    file = tmp_path / "counterexample.json"
    if content is not None:
        file.write_text(content, encoding="utf-8")
    assert main(["replay", str(file)]) == 2
    error = capsys.readouterr().err
    assert message in error and len(error.strip().splitlines()) == 1


def test_an_implementation_that_cannot_be_loaded_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = save(tmp_path / "older.json", OLDER_AFTER_NEWER)
    assert main(["replay", str(file), "--implementation", "replan.controller:Missing"]) == 2
    assert "has no 'Missing'" in capsys.readouterr().err
