"""`replan verify` fails on every broken controller and names the rule it breaks.

Each mutant of ``verification/subjects/mutants.py`` is the project with one realistic defect
in the shared source (the declaration, a guard or action body, a policy default, or
the generated code): the lockstep comparison cannot see most of them, because the
reference model shares the defect. The generated file, the docs' diagram page and the
evidence stay as they are (the drift check passes), so the failure is the engines'."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from replan.verification.subjects.mutants import MUTANTS

#: mutant -> a property `replan verify` must name as broken (it may name more).
EXPECTED: dict[str, str] = {
    # the survivors
    "equal-revision-accepted": "propose-revision-must-increase",
    "step-not-counted": "execute-counts-one-step",
    "conflict-accepted-silently": "observe-conflict-raises",
    "malformed-proposal-uses-no-slot": "propose-uses-a-slot",
    "no-progress-limit-one-late": "observe-duplicate-is-no-progress",
    "max-proposals-defaults-to-max-steps": "policy-defaults",
    "invalidated-id-never-reproposed": "propose-accepts-a-valid-plan",
    "raise-leaves-no-trace": "trace-one-record-per-call",
    # the other classes: stale-plan relaxations, limit off-by-ones, duplicate
    # counting, replay and stopped-run answers, supersede and invalidation
    # bookkeeping, generator priority and negation errors
    "stale-plan-check-removed": "propose-evidence-must-be-current",
    "stale-check-relaxed": "propose-evidence-must-be-current",
    "step-limit-off-by-one": "execute-step-limit-stops",
    "proposal-limit-off-by-one": "propose-budget-stops",
    "duplicates-not-counted": "observe-duplicate-is-no-progress",
    "replay-counts-a-step": "execute-replay-is-inert",
    "stopped-run-forgets-replays": "execute-replay-is-inert",
    "stopped-run-revived": "observe-stopped-is-inert",
    "superseded-id-forgotten": "propose-accepts-a-valid-plan",
    "invalidation-keeps-pending": "observe-change-is-progress",
    "generator-priority-swapped": "generated-matches-declaration",
    "generator-negation-dropped": "generated-matches-declaration",
    # and the first wave's
    "renumbered-unknown-is-progress": "observe-renumbered-is-no-progress",
    "older-overwrites-newer": "observe-older-never-overwrites",
    "unknown-treated-as-passed": "execute-denied-without-prerequisites",
}


def test_every_mutant_has_an_expected_rule() -> None:
    assert set(EXPECTED) == set(MUTANTS)


@pytest.fixture(scope="module")
def verified(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[int, dict[str, object], Path]]:
    """`replan verify --mutant NAME --fail-fast --json` for every mutant, as a user
    runs it (a process each, two at a time on two cores): exit code, report, evidence
    dir. ``--fail-fast`` stops at the first check that fails, so the property named is
    the first engine's (``test_every_engine_names_the_rule_in_a_whole_run`` runs every
    check on one mutant)."""

    directories = {name: tmp_path_factory.mktemp(name) for name in EXPECTED}

    def one(name: str) -> tuple[int, dict[str, object], Path]:
        evidence = directories[name]
        completed = subprocess.run(
            [
                sys.executable,
                "-m",
                "replan",
                "verify",
                "--mutant",
                name,
                "--fail-fast",
                "--json",
                "--output",
                str(evidence),
            ],
            capture_output=True,
            text=True,
            check=False,
            cwd=evidence,
        )
        return completed.returncode, json.loads(completed.stdout), evidence

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(EXPECTED, pool.map(one, EXPECTED), strict=True))


@pytest.mark.parametrize("name", list(EXPECTED))
def test_verify_fails_on_the_broken_controller_naming_its_rule(
    name: str, verified: dict[str, tuple[int, dict[str, object], Path]]
) -> None:
    code, document, evidence = verified[name]
    assert code == 1, document["failed"]
    assert document["ok"] is False
    checks = {check["name"]: check for check in document["checks"]}  # type: ignore[attr-defined]
    # the engines found it, not stale files (a broken policy default stops before drift)
    assert "drift" not in document["failed"]
    assert "drift" in checks or document["failed"] == ["policy"]
    broken = document["broken_properties"]
    assert isinstance(broken, dict)
    assert EXPECTED[name] in broken, broken
    report = (evidence / "verify-report.md").read_text(encoding="utf-8")
    assert f"`{EXPECTED[name]}`" in report  # the Markdown names the property too


def test_every_engine_names_the_rule_in_a_whole_run(tmp_path: Path) -> None:
    """Without ``--fail-fast`` every check runs: the proofs, the explorer and the
    campaign each name the broken property, and the episode shows the damage."""
    completed = subprocess.run(
        [
            *(sys.executable, "-m", "replan", "verify", "--mutant", "step-not-counted"),
            *("--json", "--output", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert completed.returncode == 1, completed.stderr
    document = json.loads(completed.stdout)
    assert document["not_run"] == []
    checks = {check["name"]: check for check in document["checks"]}
    for engine in ("proofs", "explorer", "campaign"):
        assert "execute-counts-one-step" in checks[engine]["properties"], engine
        # written, wherever the check ran (`--workers auto`: the campaign beside the explorer)
        assert checks[engine]["counterexamples"], engine
        for path in checks[engine]["counterexamples"]:
            assert (tmp_path / path).is_file(), path
    assert set(document["failed"]) >= {"proofs", "explorer", "campaign"}


def test_fail_fast_stops_at_the_first_failing_check_and_says_what_did_not_run(
    verified: dict[str, tuple[int, dict[str, object], Path]],
) -> None:
    code, document, evidence = verified["step-not-counted"]
    assert code == 1
    names = [check["name"] for check in document["checks"]]  # type: ignore[attr-defined]
    assert names == ["policy", "drift", "proofs"]
    assert document["not_run"] == [
        *("explorer", "campaign", "diagram", "workflow", "boundary", "episode")
    ]
    assert document["gaps"] == []
    report = (evidence / "verify-report.md").read_text(encoding="utf-8")
    assert "| explorer | not run (`--fail-fast`) |" in report
