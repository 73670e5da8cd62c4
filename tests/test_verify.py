"""`replan verify`: every check runs and reports, exit codes, the report's shapes, the
semantic diff, where it writes (out/, never the committed evidence/), and the
committed evidence being what verify writes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from replan.cli import main
from replan.controller.policy import DEFAULT_POLICY, load_policy
from replan.verification.core.search import SearchResult
from replan.verification.pipeline.checks.against import check_against
from replan.verification.pipeline.checks.diagram import check_diagram
from replan.verification.pipeline.checks.drift import check_drift
from replan.verification.pipeline.checks.proofs import check_proofs
from replan.verification.pipeline.checks.workflow import check_workflow
from replan.verification.pipeline.gaps import find_gaps
from replan.verification.pipeline.session import VerifySession
from replan.verification.report.records import (
    CheckResult,
    VerifyReport,
    stable,
    write_junit,
    write_markdown,
)

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
    assert main(["verify", "--against", "no-such-revision", "--output", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-revision" in err[0]
    assert not (tmp_path / "verify.json").exists()


def test_weakened_commit_gate_fails_the_proofs_with_a_readable_counterexample(
    tmp_path: Path,
) -> None:
    result = check_proofs(VerifySession(load_policy(WEAK_GATE), tmp_path))
    assert result.status == "failed"
    assert "parser=Passed, access=Unknown: controller commits, workflow says Inspect" in (
        result.failure_text
    )
    saved = json.loads(Path(result.counterexamples[0]).read_text())
    assert saved["property"] == "commit-equivalence"
    assert result.replay == [f"replan replay {result.counterexamples[0]}"]


def test_weakened_commit_gate_also_fails_the_fixed_workflow_table(tmp_path: Path) -> None:
    result = check_workflow(VerifySession(load_policy(WEAK_GATE), tmp_path))
    assert result.status == "failed"
    assert "7/9" in result.summary  # Passed/Unknown and Passed/Failed commit wrongly


def test_default_policy_passes_the_fast_checks(tmp_path: Path) -> None:
    session = VerifySession(DEFAULT_POLICY, tmp_path)
    for result in (
        check_drift(),
        check_proofs(session),
        check_workflow(session),
        check_diagram(session),
    ):
        assert result.status == "passed", (result.name, result.summary)


def test_against_an_older_policy_shows_the_witness_and_the_diagram_diff(tmp_path: Path) -> None:
    pipeline = VerifySession(DEFAULT_POLICY, tmp_path)
    result = check_against(pipeline, str(POLICIES / "commit-requires-parser-only.toml"))
    witness = result.details["commit_decision"]
    assert witness["assignment"]["parser"] == "Passed"
    assert witness["assignment"]["access"] != "Passed"
    assert witness["old"] == "commits" and witness["new"] == "refuses"
    assert "prerequisites changed: commit-import: parser -> parser, access" in (
        pipeline.report.against_lines
    )
    assert any("commit decisions differ: " in line for line in pipeline.report.against_lines)
    # the diagram diff marks the guard whose meaning the policy changed
    assert "prerequisites_passed" in pipeline.report.diff_mermaid


def test_against_a_policy_with_other_keys_reports_them_and_witnesses_over_the_shared(
    tmp_path: Path,
) -> None:
    """A key one policy has and the other lacks is reported, not mixed into the
    witness: the witness assigns only keys both policies declare (the other is never
    observed in the run of the policy that has it) and names only shared steps."""
    pipeline = VerifySession(load_policy(THREE_KEYS), tmp_path)
    result = check_against(pipeline, str(ROOT / "spec" / "policy.toml"))
    changes = result.details["policy_changes"]
    assert changes["keys_added"] == ["schema"] and changes["keys_removed"] == []
    lines = pipeline.report.against_lines
    assert "keys added: schema" in lines
    assert "prerequisites changed: commit-import: parser, access -> parser, access, schema" in lines
    # the new key is never observed in the old run: requiring it is a stricter gate,
    # shown as the decision it changes, with a witness over the shared keys only
    assert (
        "commit decisions differ over the shared keys and completing steps: parser=Passed, "
        "access=Passed (of one policy only: schema=Unknown): commit-import: old "
        "policy commits, new policy refuses"
    ) in lines
    witness = result.details["commit_decision"]
    assert set(witness["assignment"]) == {"parser", "access"}
    assert witness["own_keys"] == {"schema": "Unknown"}
    assert "schema" in pipeline.report.diff_mermaid


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


def _git(*arguments: str, cwd: Path = ROOT) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=replan", "-c", "user.email=replan@localhost", *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout"
)
def test_readme_verify_in_a_clone_leaves_it_clean_and_reproduces_the_evidence(
    tmp_path: Path,
) -> None:
    """README command 1's `replan verify`, run in a clone of this checkout (its tracked
    files as they are now), writes nothing the clone tracks or does not ignore, and no
    .hypothesis/; and its report, in the committed form (`replan evidence`'s: no
    timings, dates or versions), is exactly the committed evidence/."""
    clone = tmp_path / "clone"
    _git("clone", "--quiet", "--shared", str(ROOT), str(clone))
    # the working tree as it is: tracked files with their edits, new files not ignored
    listed = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in filter(None, listed.split("\0")):
        source, target = ROOT / name, clone / name
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        elif target.is_file():
            target.unlink()
    _git("add", "--all", cwd=clone)
    _git("commit", "--quiet", "--allow-empty", "-m", "the working tree", cwd=clone)
    environment = {**os.environ, "PYTHONPATH": str(clone)}
    environment.pop("HYPOTHESIS_STORAGE_DIRECTORY", None)
    done = subprocess.run(
        [sys.executable, "-m", "replan", "verify"],
        cwd=clone,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "report in out/verify/default/verify-report.md" in done.stdout
    assert _git("status", "--porcelain", "--untracked-files=all", cwd=clone) == ""
    assert not (clone / ".hypothesis").exists()

    fresh_dir, committed_dir = clone / "out" / "verify" / "default", clone / "evidence"
    fresh = json.loads((fresh_dir / "verify.json").read_text())
    committed = json.loads((committed_dir / "verify.json").read_text())
    if shutil.which("dot") is None:  # without Graphviz the diagram check writes Mermaid only
        for document in (fresh, committed):
            document["checks"] = [c for c in document["checks"] if c["name"] != "diagram"]
    assert "run" in fresh and "run" not in committed  # timings here, none committed
    assert stable(fresh) == committed
    for name in ("replan-trace.json", "fixed-workflow.json"):
        assert stable(json.loads((fresh_dir / name).read_text())) == json.loads(
            (committed_dir / name).read_text()
        )
    proofs = next(c for c in fresh["checks"] if c["name"] == "proofs")["details"]
    assert stable(proofs) == json.loads((committed_dir / "prove.json").read_text())
    assert (fresh_dir / "verify-report.md").read_text().startswith("# replan verify")


def test_the_committed_form_is_the_same_for_the_same_results(tmp_path: Path) -> None:
    """What `replan evidence` writes does not depend on how long the checks took."""
    pages = []
    for number, seconds in enumerate((0.4, 31.7)):
        report = VerifyReport(DEFAULT_POLICY, "ci", str(tmp_path))
        report.checks = [CheckResult("proofs", "passed", "54 of 54 properties proved")]
        report.checks[0].seconds = report.seconds = seconds
        report.mermaid = "stateDiagram-v2"
        timed = write_markdown(report, tmp_path / f"timed-{number}.md").read_text()
        assert f"{seconds:.1f} s" in timed
        pages.append(write_markdown(report, tmp_path / f"{number}.md", timings=False).read_text())
        assert "run" not in stable(report.to_json())
    assert pages[0] == pages[1]
    assert " s |" not in pages[0] and "| check | status | figures |" in pages[0]


def test_verify_does_not_write_the_committed_evidence(
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in (ROOT / "evidence").iterdir()}
    assert main(["verify", "--output", str(ROOT / "evidence")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "replan evidence" in err[0], err
    assert {p.name: p.stat().st_mtime_ns for p in (ROOT / "evidence").iterdir()} == before


def test_the_default_report_goes_to_out_verify() -> None:
    from replan.verification.pipeline.options import default_report_dir

    assert default_report_dir(None) == Path("out/verify/default")
    assert default_report_dir("policies/mine.toml") == Path("out/verify/mine")
    assert default_report_dir(None, "step-not-counted") == Path(
        "out/verify/mutant-step-not-counted"
    )


@pytest.fixture(scope="module")
def default_exploration() -> SearchResult:
    """The explorer's default report on the default policy, every state kept: one
    search for the tests of this module that read it (none changes it)."""
    from replan.verification.engines.explore.engine import explore

    return explore(DEFAULT_POLICY, keep_graph=True, stop_at_first=False)


def test_a_proof_counterexample_from_an_unreached_state_is_labelled(
    default_exploration: SearchResult,
) -> None:
    """The explorer never reaches no_progress = 7 under the default policy: a
    counterexample to induction from there names that field."""
    from replan.verification.engines.explore.coverage import unreachable_fields

    runs = default_exploration.runs or [default_exploration]
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


def test_what_no_engine_exercised_is_a_gap(default_exploration: SearchResult) -> None:
    """A campaign of two three-step examples, too short to complete a run, beside the
    explorer that reaches every transition: verify's gaps name what it never fired."""
    from replan.verification.engines.campaign.run import run_campaign

    pipeline = VerifySession(DEFAULT_POLICY, Path("unused"))
    pipeline.explored = default_exploration
    pipeline.campaigned = run_campaign(
        DEFAULT_POLICY, "ci", seed=0, examples=2, steps=3, out_dir=None, database=None
    )
    find_gaps(pipeline)
    gaps = pipeline.report.gaps
    never_fired = [g for g in gaps if g.startswith("the campaign never fired ")]
    assert any("--> completed (the explorer reaches it)" in g for g in never_fired)
    assert all(g.endswith("(the explorer reaches it)") for g in never_fired)
    missed = [
        reason
        for reason, reached in pipeline.explored.stop_reasons.items()
        if reached and not pipeline.campaigned.coverage.stop_reasons[reason]
    ]
    assert missed
    assert f"the campaign never stopped a run {missed[0]} (the explorer does)" in gaps
    assert pipeline.report.verdict().startswith("passed with gaps")
