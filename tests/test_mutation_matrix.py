"""The executor mutation matrix: the committed evidence is complete and every mutant in
it is killed; the checks pass on the real executor; the recorded killers still kill;
and leaving out ("reverting") a mutant's killing checks makes ``replan mutants`` fail.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replan.cli import main
from replan.verification.boundary.executor.matrix import CHECKS, run_check, run_matrix
from replan.verification.boundary.executor.mutants import MUTANTS

EVIDENCE = Path(__file__).resolve().parent.parent / "evidence" / "mutation-matrix.json"


@pytest.fixture(scope="module")
def evidence() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(EVIDENCE.read_text(encoding="utf-8"))
    return document


def killers(evidence: dict[str, Any], mutant: str) -> list[str]:
    [entry] = [entry for entry in evidence["mutants"] if entry["name"] == mutant]
    return list(entry["killed_by"])


def test_committed_matrix_covers_every_mutant_and_check_and_kills_them_all(
    evidence: dict[str, Any],
) -> None:
    assert [entry["name"] for entry in evidence["mutants"]] == list(MUTANTS)
    assert [check["name"] for check in evidence["checks"]] == list(CHECKS)
    assert evidence["holds"] is True
    assert evidence["summary"]["survivors"] == [] and evidence["summary"]["without"] == []
    assert evidence["summary"]["baseline_failures"] == {}
    for entry in evidence["mutants"]:
        row = evidence["matrix"][entry["name"]]
        assert list(row) == list(CHECKS)
        assert entry["killed"] and sorted(entry["killed_by"]) == sorted(c for c in row if row[c])
    # The six mutants are among them.
    assert {
        "grant-not-checked",
        "digest-not-compared",
        "replay-reruns-effect",
        "receipt-before-effect",
        "in-doubt-treated-as-done",
        "step-grant-ignored",
    } <= set(MUTANTS)


def test_every_check_passes_on_the_real_executor() -> None:
    matrix = run_matrix(mutants=[])
    assert matrix.baseline_failures == {}
    assert matrix.holds


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_each_recorded_killer_still_kills_its_mutant(evidence: dict[str, Any], mutant: str) -> None:
    for check in killers(evidence, mutant):
        failure = run_check(CHECKS[check], MUTANTS[mutant])
        assert failure is not None, f"{check} no longer kills {mutant}"
        # Killed by a broken promise, not because the mutant itself is ill-formed.
        assert not failure.startswith(("TypeError(", "AttributeError(", "NameError(")), failure


@pytest.mark.parametrize("mutant", ["foreign-database-adopted", "intent-not-durable"])
def test_reverting_a_mutants_killing_checks_makes_the_command_fail(
    evidence: dict[str, Any], mutant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = ["mutants", "--json", "--mutant", mutant]
    for check in killers(evidence, mutant):
        arguments += ["--without", check]
    assert main(arguments) == 1
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["survivors"] == [mutant]
    assert summary["baseline_failures"] == {}


def test_the_command_passes_with_the_killing_checks_in_place(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    output = tmp_path / "matrix.json"
    arguments = ["mutants", "--mutant", "foreign-database-adopted", "-o", str(output)]
    cheaper = ["--without", "kill-at-every-point", "--without", "executor-campaign"]
    cheaper += ["--without", "crash-faults-fail-closed"]
    assert main([*arguments, *cheaper]) == 0
    assert "1 of 1 mutants killed" in capsys.readouterr().out
    assert json.loads(output.read_text())["mutants"][0]["killed_by"] == {
        "unusable-file-refused": "foreign.db: opened instead of refused"
    }


@pytest.mark.parametrize("option", ["--mutant", "--without"])
def test_an_unknown_name_is_bad_input(option: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mutants", option, "no-such-name"]) == 2
    error = capsys.readouterr().err
    assert "unknown" in error and "'no-such-name'" in error and "known:" in error
