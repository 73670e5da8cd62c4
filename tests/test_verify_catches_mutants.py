"""`replan verify` fails on every broken controller and names the rule it breaks.

Each mutant of ``verification/mutants.py`` is the project with one realistic defect
in the shared source (the declaration, a guard or action body, a policy default, or
the generated code): the lockstep comparison cannot see most of them, because the
reference model shares the defect. The generated file, the README diagram and the
evidence stay as they are (the drift check passes), so the failure is the engines'."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from replan.verification.mutants import MUTANTS

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
    """`replan verify --mutant NAME --json` for every mutant, as a user runs it (a
    process each, two at a time on two cores): exit code, report, evidence dir."""

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
    assert checks["drift"]["status"] == "passed"  # the engines found it, not stale files
    broken = document["broken_properties"]
    assert isinstance(broken, dict)
    assert EXPECTED[name] in broken, broken
    report = (evidence / "verify-report.md").read_text(encoding="utf-8")
    assert f"`{EXPECTED[name]}`" in report  # the Markdown names the property too
