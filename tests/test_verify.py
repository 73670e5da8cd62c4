"""`replan verify`: every check runs and reports, exit codes, the report's shapes, the
semantic diff, and the committed evidence being what verify writes."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from controller.policy import DEFAULT_POLICY, load_policy
from replan.cli import main
from replan.commands.verify import Pipeline
from verification.report import CheckResult, VerifyReport, stable, write_junit, write_markdown

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ROOT / "tests" / "policies"
WEAK_GATE = POLICIES / "commit-requires-parser-only.toml"
THREE_KEYS = POLICIES / "three-keys.toml"


def test_missing_policy_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--policy", "missing.toml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["replan verify: error: missing.toml: no such policy file"]


def test_unknown_against_revision_exits_2_before_any_check(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["verify", "--against", "no-such-revision", "--evidence", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-revision" in err[0]
    assert not (tmp_path / "verify.json").exists()


def test_weakened_commit_gate_fails_the_proofs_with_a_readable_counterexample(
    tmp_path: Path,
) -> None:
    pipeline = Pipeline(load_policy(WEAK_GATE), tmp_path, "ci", 0)
    result = pipeline.proofs()
    assert result.status == "failed"
    assert "parser=Passed, access=Unknown: controller commits, workflow says Inspect" in (
        result.failure_text
    )
    saved = json.loads(Path(result.counterexamples[0]).read_text())
    assert saved["property"] == "commit-equivalence"
    assert result.replay == [f"replan replay {result.counterexamples[0]}"]


def test_weakened_commit_gate_also_fails_the_fixed_workflow_table(tmp_path: Path) -> None:
    result = Pipeline(load_policy(WEAK_GATE), tmp_path, "ci", 0).workflow()
    assert result.status == "failed"
    assert "7/9" in result.summary  # Passed/Unknown and Passed/Failed commit wrongly


def test_default_policy_passes_the_fast_checks(tmp_path: Path) -> None:
    pipeline = Pipeline(DEFAULT_POLICY, tmp_path, "ci", 0)
    for check in (pipeline.drift, pipeline.proofs, pipeline.workflow, pipeline.diagram):
        result = check()
        assert result.status == "passed", (result.name, result.summary)


def test_against_an_older_policy_shows_the_witness_and_the_diagram_diff(tmp_path: Path) -> None:
    pipeline = Pipeline(load_policy(THREE_KEYS), tmp_path, "ci", 0)
    result = pipeline.against(str(ROOT / "spec" / "policy.toml"))
    witness = result.details["commit_decision"]
    assert witness["assignment"]["schema"] != "Passed"
    assert witness["old"] == "commits" and witness["new"] == "refuses"
    assert any("commit decisions differ" in line for line in pipeline.report.against_lines)
    # the diagram diff marks the guard whose meaning the new key changed
    assert "schema" in pipeline.report.diff_mermaid
    assert "prerequisites_passed" in pipeline.report.diff_mermaid


def test_junit_has_one_case_per_check_and_marks_failures(tmp_path: Path) -> None:
    report = VerifyReport(DEFAULT_POLICY, "ci", str(tmp_path))
    report.checks = [
        CheckResult("proofs", "failed", "1 of 2 proved", failure_text="cex"),
        CheckResult("explorer", "passed", "ok"),
        CheckResult("campaign", "error", "boom"),
    ]
    path = write_junit(report, tmp_path / "junit.xml")
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert list(cases) == ["proofs", "explorer", "campaign"]
    assert cases["proofs"].find("failure") is not None
    assert cases["explorer"].find("failure") is None
    assert cases["campaign"].find("error") is not None
    assert suite.get("failures") == "1" and suite.get("errors") == "1"
    markdown = write_markdown(report, tmp_path / "r.md").read_text()
    assert "FAILED: proofs, campaign" in markdown and "cex" in markdown


def test_verify_reproduces_the_committed_evidence(tmp_path: Path) -> None:
    """The committed evidence/ is what `replan verify` writes for the default policy:
    a fresh run agrees with it apart from timings, dates and versions."""
    junit = tmp_path / "junit.xml"
    code = main(["verify", "--evidence", str(tmp_path), "--junit", str(junit)])
    assert code == 0
    fresh = json.loads((tmp_path / "verify.json").read_text())
    committed = json.loads((ROOT / "evidence" / "verify.json").read_text())
    if shutil.which("dot") is None:  # without Graphviz the diagram check writes Mermaid only
        for document in (fresh, committed):
            document["checks"] = [c for c in document["checks"] if c["name"] != "diagram"]
    assert stable(fresh) == stable(committed)
    for name in ("replan-trace.json", "fixed-workflow.json"):
        assert stable(json.loads((tmp_path / name).read_text())) == stable(
            json.loads((ROOT / "evidence" / name).read_text())
        )
    assert (tmp_path / "verify-report.md").read_text().startswith("# replan verify")
    names = [case.get("name") for case in ET.parse(junit).getroot().iter("testcase")]
    assert names == [check["name"] for check in fresh["checks"]]


def test_a_proof_counterexample_from_an_unreached_state_is_labelled(tmp_path: Path) -> None:
    """The explorer never reaches no_progress = 7 under the default policy: a
    counterexample to induction from there names that field."""
    from controller import DEFAULT_POLICY
    from verification.explore import explore, unreachable_fields

    result = explore(DEFAULT_POLICY, keep_graph=True, stop_at_first=False)
    runs = result.runs or [result]
    reached = {
        "state": "idle",
        "evidence_revision": 1,
        "plan_revision": 0,
        "steps": 0,
        "proposals": 0,
        "no_progress": 0,
        "pending": None,
        "evidence": {"parser": "Unknown", "access": "Unknown"},
    }
    assert unreachable_fields(runs, reached, DEFAULT_POLICY.keys) is None
    assert unreachable_fields(runs, {**reached, "no_progress": 7}, DEFAULT_POLICY.keys) == [
        "no_progress=7"
    ]


def test_what_no_engine_exercised_is_a_gap() -> None:
    """A campaign too short to reach the no-progress limit from the pending state,
    beside the explorer that does: verify's gaps name the transitions."""
    from controller import DEFAULT_POLICY
    from replan.commands.verify import Pipeline
    from verification.campaign import run_campaign
    from verification.explore import explore

    pipeline = Pipeline(DEFAULT_POLICY, Path("unused"), "ci", 0)
    pipeline.explored = explore(DEFAULT_POLICY, stop_at_first=False)
    pipeline.campaigned = run_campaign(
        DEFAULT_POLICY, "ci", seed=0, examples=2, steps=3, out_dir=None, database=None
    )
    pipeline.find_gaps()
    gaps = pipeline.report.gaps
    assert any("the campaign never fired pending --observe" in g for g in gaps)
    missed = [
        reason
        for reason, reached in pipeline.explored.stop_reasons.items()
        if reached and not pipeline.campaigned.coverage.stop_reasons[reason]
    ]
    assert missed
    assert f"the campaign never stopped a run {missed[0]} (the explorer does)" in gaps
    assert pipeline.report.verdict().startswith("passed with gaps")
