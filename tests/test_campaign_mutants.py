"""Proof that the campaign bites: each deliberately broken controller of
``verification.mutants`` is caught (exit 1) with a counterexample no longer than a
person would need, whose JSON replays the failure with ``replan replay`` and whose
generated pytest file fails on the broken controller."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.policy import DEFAULT_POLICY
from replan.cli import main
from verification.campaign import mutant_implementation, run_campaign
from verification.harness import load_counterexample
from verification.mutants import MUTANTS

#: The shortest counterexample for each mutant under the default policy (max_steps =
#: 4), and why; the campaign may use two operations more than that.
SHORTEST: dict[str, tuple[int, str]] = {
    "stale-plan-check-removed": (1, "propose a plan citing evidence revision 0"),
    "renumbered-unknown-is-progress": (1, "observe Unknown, version 1, of a key never seen"),
    "step-limit-off-by-one": (10, "max_steps + 1 proposals, each executed"),
    "replay-counts-a-step": (3, "propose, execute, execute the same id again"),
    "stopped-run-revived": (2, "cancel, then observe"),
    "older-overwrites-newer": (2, "observe version 2, then version 1 with another state"),
    "unknown-treated-as-passed": (2, "propose the commit step, execute it"),
}
SLACK = 2

#: Short examples (12 steps) shrink fast; each mutant is found well within 150 examples
#: (generation stops at the first failure, so the budget costs nothing once found).
BUDGET = ("--profile", "ci", "--examples", "150", "--steps", "12", "--seed", "3")


def test_every_mutant_has_an_expected_length() -> None:
    assert set(SHORTEST) == set(MUTANTS)


@pytest.fixture(scope="module")
def caught(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """Run ``replan campaign --mutant NAME --json`` once per mutant; the parsed
    summary, the exit code and where the files went."""
    found: dict[str, dict[str, object]] = {}
    for name in MUTANTS:
        out = tmp_path_factory.mktemp(name)
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(io.StringIO()):
            command = ["campaign", "--mutant", name, "--json", "--no-database", "--out", str(out)]
            code = main([*command, *BUDGET])
        found[name] = {"code": code, "summary": json.loads(stdout.getvalue()), "out": out}
    return found


@pytest.mark.parametrize("name", list(MUTANTS))
def test_the_campaign_catches_the_broken_controller(
    name: str, caught: dict[str, dict[str, object]]
) -> None:
    run = caught[name]
    assert run["code"] == 1, run
    summary = run["summary"]
    assert isinstance(summary, dict)
    assert summary["passed"] is False
    finding = summary["finding"]
    assert finding["reproduced_by_replay"] is True
    assert finding["implementation"] == mutant_implementation(name)
    shortest, why = SHORTEST[name]
    length = len(finding["steps"])
    assert shortest <= length <= shortest + SLACK, f"{name}: {length} operations ({why})"


@pytest.mark.parametrize("name", list(MUTANTS))
def test_the_saved_counterexample_replays_the_failure(
    name: str, caught: dict[str, dict[str, object]], capsys: pytest.CaptureFixture[str]
) -> None:
    saved = [Path(path) for path in caught[name]["summary"]["finding"]["saved"]]  # type: ignore[index]
    counterexample = next(path for path in saved if path.suffix == ".json")
    policy, property_name, _, _ = load_counterexample(counterexample)
    assert policy == DEFAULT_POLICY
    # on the broken controller (named in the file) it still fails ...
    assert main(["replay", str(counterexample)]) == 1
    output = capsys.readouterr().out
    assert "STILL FAILS" in output and property_name in output
    # ... and on the generated controller it passes: the failure is the mutant's
    assert main(["replay", str(counterexample), "--implementation", "controller:Controller"]) == 0
    assert "passes now" in capsys.readouterr().out


def test_the_generated_pytest_files_fail_on_the_broken_controllers(
    caught: dict[str, dict[str, object]], tmp_path: Path
) -> None:
    tests = []
    for name in MUTANTS:
        saved = [Path(p) for p in caught[name]["summary"]["finding"]["saved"]]  # type: ignore[index]
        tests.append(next(path for path in saved if path.suffix == ".py"))
    report = tmp_path / "report.xml"
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"]
        + [str(path) for path in tests],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert completed.returncode == 1, completed.stdout + completed.stderr
    xml = report.read_text(encoding="utf-8")
    assert f'tests="{len(tests)}"' in xml
    assert f'failures="{len(tests)}"' in xml, completed.stdout


def test_a_failure_found_once_is_retried_first(tmp_path: Path) -> None:
    """The example database hands back the failing example: the second campaign
    fails in its first example."""
    database = tmp_path / "examples"
    arguments = {
        "policy": DEFAULT_POLICY,
        "profile": "ci",
        "examples": 40,
        "steps": 12,
        "implementation": mutant_implementation("replay-counts-a-step"),
        "out_dir": None,
        "database": database,
    }
    first = run_campaign(seed=11, **arguments)  # type: ignore[arg-type]
    assert first.finding is not None
    second = run_campaign(seed=12, **arguments)  # type: ignore[arg-type]
    assert second.finding is not None
    assert second.found_at_example == 1
    assert second.finding.property == first.finding.property
