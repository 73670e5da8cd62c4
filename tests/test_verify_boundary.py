"""`replan verify` checks the effect boundary: its boundary check holds on the real
boundary under the test policies, and each seeded boundary bug kind
(``verification/boundary/subjects.py``, ``replan verify --mutant NAME``) fails it,
naming the rule it breaks, with a counterexample that replays on the bug and not on the
real boundary. Two kinds (one in the guard, one in the run log) go through the whole
command as a user runs it: exit 1, the rule in verify.json, verify-report.md, SARIF and
JUnit, and the controller's checks all holding (the failure is the boundary check's
alone); the other five through the same check inside a verify session, which is all
that differs between them (a whole run checks the same controller each time)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from replan.controller.policy import DEFAULT_POLICY, load_policy
from replan.verification.boundary.check import replay
from replan.verification.boundary.subjects import MUTANTS, verify_subject
from replan.verification.core.subject import PROJECT
from replan.verification.pipeline import VerifyOptions
from replan.verification.pipeline.checks.boundary import check_boundary
from replan.verification.pipeline.run import planned_checks
from replan.verification.pipeline.session import VerifySession
from replan.verification.report.records import VerifyReport
from replan.verification.report.sarif import sarif_log

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _quiet_sdk() -> None:
    logging.getLogger("agent_framework").setLevel(logging.CRITICAL)


def _session(
    tmp_path: Path, subject: object = PROJECT, policy: object = DEFAULT_POLICY
) -> VerifySession:
    return VerifySession(policy, tmp_path, VerifyOptions(), subject, lambda _text: None)  # type: ignore[arg-type]


def test_verify_runs_the_boundary_check_after_the_controllers_checks(tmp_path: Path) -> None:
    names = [name for name, _ in planned_checks(_session(tmp_path))]
    assert names.index("boundary") > names.index("workflow")
    assert names.index("boundary") < names.index("episode")


def test_the_boundary_check_holds_on_a_policy_with_two_resources(tmp_path: Path) -> None:
    """The first policy allows two resources and names no resource argument: the
    boundary is checked with the tool argument ``resource`` holding it."""
    policy = load_policy(ROOT / "tests" / "policies" / "first-policy.toml")
    check = check_boundary(_session(tmp_path, policy=policy))
    assert check.status == "passed", check.failure_text
    assert check.details["figures"]["crashes"] > 100


def test_a_seeded_bug_fails_the_check_with_its_rule_counterexample_and_sarif(
    tmp_path: Path,
) -> None:
    name = "perform-ignores-resource"
    check = check_boundary(_session(tmp_path, verify_subject(name)))
    rule = MUTANTS[name][1]
    assert check.status == "failed"
    assert check.properties == [rule]
    assert check.failure_text.startswith(f"{rule}: ")
    (saved,) = check.counterexamples
    assert check.replay == [f"replan boundary --replay {saved}"]
    assert replay(Path(saved)) is not None and replay(Path(saved), "real") is None
    report = VerifyReport(DEFAULT_POLICY, "ci", str(tmp_path), checks=[check])
    assert report.broken_properties == {rule: ["boundary"]}
    log = sarif_log(report)
    (result,) = log["runs"][0]["results"]
    assert result["ruleId"] == rule
    assert "The rule: the effect runs with exactly" in result["message"]["text"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "CONTRACT.md"
    line = (ROOT / "CONTRACT.md").read_text().splitlines()[location["region"]["startLine"] - 1]
    assert line.startswith(f"- `{rule}`:")
    rules = {r["id"]: r for r in log["runs"][0]["tool"]["driver"]["rules"]}
    assert rules[rule]["properties"]["kind"] == "boundary"


def test_verify_refuses_an_unknown_mutant_in_one_line(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "replan", "verify", "--mutant", "no-such-bug", "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert completed.returncode == 2
    assert "Traceback" not in completed.stderr
    assert len(completed.stderr.strip().splitlines()) == 1
    assert "tool-time-not-charged" in completed.stderr  # the boundary's kinds are named


#: The kinds run through the whole `replan verify` command: one in the guard, one in
#: the durable run log.
THROUGH_THE_COMMAND = ("guard-cites-current-revision", "log-range-read-one-short")


@pytest.fixture(scope="module")
def verified(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[int, dict[str, object], Path]]:
    """`replan verify --mutant NAME --json` for the kinds of ``THROUGH_THE_COMMAND``,
    as a user runs it (a process each, both at once), with --sarif and --junit."""

    def one(name: str) -> tuple[int, dict[str, object], Path]:
        evidence = tmp_path_factory.mktemp(name)
        completed = subprocess.run(
            [
                *(sys.executable, "-m", "replan", "verify", "--mutant", name, "--json"),
                *("--output", str(evidence / "report")),
                *("--sarif", str(evidence / "replan.sarif")),
                *("--junit", str(evidence / "junit.xml")),
            ],
            capture_output=True,
            text=True,
            check=False,
            cwd=evidence,
        )
        assert "Traceback" not in completed.stderr, completed.stderr[-3000:]
        return completed.returncode, json.loads(completed.stdout), evidence

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(THROUGH_THE_COMMAND, pool.map(one, THROUGH_THE_COMMAND), strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("name", THROUGH_THE_COMMAND)
def test_verify_fails_on_a_seeded_boundary_bug_naming_its_rule(
    name: str, verified: dict[str, tuple[int, dict[str, object], Path]]
) -> None:
    code, document, evidence = verified[name]
    rule = MUTANTS[name][1]
    assert code == 1, document["failed"]
    assert document["failed"] == ["boundary"]  # the controller's checks all hold
    assert document["broken_properties"] == {rule: ["boundary"]}
    checks = {check["name"]: check for check in document["checks"]}  # type: ignore[attr-defined]
    (saved,) = checks["boundary"]["counterexamples"]
    saved_path = evidence / "report" / saved
    assert replay(saved_path) is not None and replay(saved_path, "real") is None
    report = (evidence / "report" / "verify-report.md").read_text(encoding="utf-8")
    assert f"`{rule}`" in report and "replan boundary --replay" in report
    sarif = json.loads((evidence / "replan.sarif").read_text(encoding="utf-8"))
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]] == [rule]
    junit = ET.parse(evidence / "junit.xml").getroot()
    failed = [c.get("name") for c in junit.iter("testcase") if c.find("failure") is not None]
    assert failed == ["boundary"]


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name in MUTANTS if name not in THROUGH_THE_COMMAND])
def test_verifys_boundary_check_fails_on_each_other_seeded_bug_naming_its_rule(
    name: str, tmp_path: Path
) -> None:
    check = check_boundary(_session(tmp_path, verify_subject(name)))
    rule = MUTANTS[name][1]
    assert check.status == "failed" and check.properties == [rule]
    assert check.failure_text.startswith(f"{rule}: ")
    (saved,) = check.counterexamples
    assert replay(Path(saved)) is not None and replay(Path(saved), "real") is None
    report = VerifyReport(DEFAULT_POLICY, "ci", str(tmp_path), checks=[check])
    assert report.broken_properties == {rule: ["boundary"]}
    assert [result["ruleId"] for result in sarif_log(report)["runs"][0]["results"]] == [rule]
