"""`replan review`: one self-contained page built from verify's report and the
recordings, its records equal to what the CLI prints, the reference episode step by
step, the --against diff with its witness, and bad input as one line and exit 2.
(The page in a real browser: tests/test_review_browser.py.)"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from replan.cli import main
from replan.controller import Controller
from replan.controller.policy import DEFAULT_POLICY, load_policy, policy_to_dict
from replan.controller.records import EvidenceState, Observation, Plan
from replan.spec.declaration import Replanning
from replan.spec.model import extract
from replan.verification.core.harness import Finding, Operation, apply

ROOT = Path(__file__).resolve().parent.parent
EVIDENCE = ROOT / "evidence"
THREE_KEYS = ROOT / "tests" / "policies" / "three-keys.toml"
MODEL = extract(Replanning)
DATA = re.compile(r'<script type="application/json" id="review-data">(.*?)</script>', re.DOTALL)


def page_data(page: str) -> dict[str, Any]:
    found = DATA.search(page)
    assert found is not None, "the page embeds no review-data"
    data: dict[str, Any] = json.loads(found[1])
    return data


def review(tmp_path: Path, *arguments: str, evidence: Path = EVIDENCE) -> tuple[int, str]:
    output = tmp_path / "review.html"
    code = main(["review", "--evidence", str(evidence), *arguments, "-o", str(output)])
    return code, output.read_text(encoding="utf-8") if output.exists() else ""


@pytest.fixture(scope="module")
def default_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    code, page = review(tmp_path_factory.mktemp("review"))
    assert code == 0
    return page


@pytest.mark.graphviz
def test_the_page_is_one_self_contained_file_under_2_mb(default_page: str) -> None:
    assert len(default_page.encode()) < 2_000_000
    assert "default-src 'none'" in default_page  # the browser refuses any fetch
    # nothing to fetch: no external script, stylesheet, image, frame or font
    assert not re.search(r"<(link|img|iframe|object|embed)\b", default_page)
    assert not re.search(r"<script\b[^>]*\bsrc=", default_page)
    assert "url(" not in default_page and "@import" not in default_page
    for reference in re.findall(r'\b(?:href|src|xlink:href)="([^"]*)"', default_page):
        assert reference.startswith("#"), reference
    # URLs appear only as XML namespace names, which are never fetched
    urls = set(re.findall(r"https?://[^\s\"'<>]+", default_page))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}, urls
    assert default_page.count("<svg ") == 3  # overview, full, coverage


def test_the_page_embeds_the_records_the_cli_prints(
    tmp_path: Path, default_page: str, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "r.html"
    assert main(["review", "--evidence", str(EVIDENCE), "--json", "-o", str(output)]) == 0
    printed = json.loads(capsys.readouterr().out)
    embedded = page_data(default_page)
    assert printed["traces"] == embedded["traces"]
    assert printed["elements"] == embedded["elements"]
    assert printed["bytes"] == len(output.read_bytes())
    # verify's part is verify.json as verify wrote it, its run's date and versions too
    written = json.loads((EVIDENCE / "verify.json").read_text(encoding="utf-8"))
    assert embedded["verify"] == {"source": str(EVIDENCE / "verify.json"), **written}
    # and the checks table shows each check with its status and figures
    for check in written["checks"]:
        row = re.search(
            rf'<tr class="{check["status"]}"><th scope="row">{check["name"]}</th>', default_page
        )
        assert row is not None, check["name"]
    assert default_page.count('<tr class="holds">') == len(
        next(c for c in written["checks"] if c["name"] == "proofs")["details"]["properties"]
    )


@pytest.mark.graphviz
def test_the_player_plays_the_reference_episode_step_by_step(default_page: str) -> None:
    recorded = json.loads((EVIDENCE / "replan-trace.json").read_text(encoding="utf-8"))["calls"]
    traces = page_data(default_page)["traces"]
    episode = next(t for t in traces if t["source"].endswith("replan-trace.json"))
    steps = episode["steps"]
    assert [(s["transition"], s["evidence_revision"], s["result"]) for s in steps] == [
        (c["transition"], c["evidence_revision"], c["result"]) for c in recorded
    ]
    assert episode["differing"] == []
    answers = [s["answer"] for s in steps]
    assert answers.count("Executed") == 2
    assert steps[-1]["counters"]["proposals"] == 4 and steps[-1]["counters"]["steps"] == 2
    assert any(s["transition"].endswith("[evidence_stale]--> idle") for s in steps)
    assert answers.index("PreconditionDenied") < answers.index("StalePlan")
    assert steps[-1]["stop_reason"] == "Completed" and steps[-2]["stop_reason"] is None
    # the pending plan the player shows is the controller's
    denied = steps[answers.index("PreconditionDenied")]
    assert denied["pending"]["id"] == "p2" and denied["state_after"] == "pending"
    # every fired transition can be highlighted in both views
    elements = page_data(default_page)["elements"]
    ids = {html.unescape(found) for found in re.findall(r'\bid="([^"]*)"', default_page)}
    for step in steps:
        where = elements[step["transition"]]
        assert set(where) == {"overview", "full"}
        assert where["overview"] and where["full"]
        assert set(where["overview"] + where["full"]) <= ids, where


def test_counterexamples_in_the_evidence_directory_are_played_too(tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    (evidence / "counterexamples").mkdir(parents=True)
    shutil.copy(EVIDENCE / "verify.json", evidence / "verify.json")
    operations = [
        Operation("observe", Observation("parser", 1, EvidenceState.PASSED, "ci")),
        Operation("propose", Plan("p1", 1, 2, "inspect-parser", "input-A")),
        Operation("execute", "p1"),
        Operation("cancel"),
        Operation("execute", "p1"),
    ]
    from replan.controller import Controller

    controller = Controller(DEFAULT_POLICY)
    results = [apply(controller, operation) for operation in operations]
    results[2] = results[2].__class__("StalePlan")  # what a broken controller answered
    Finding("step-bound", DEFAULT_POLICY, operations, results).save(
        evidence / "counterexamples" / "campaign-step-bound.json"
    )
    code, page = review(tmp_path, evidence=evidence)
    assert code == 0
    traces = page_data(page)["traces"]
    assert [t["kind"] for t in traces] == ["counterexample"]  # no episode in this directory
    steps = traces[0]["steps"]
    assert [s["transition"] for s in steps] == [
        "idle --observe[changes_state]--> idle",
        "idle --propose--> pending",
        "pending --execute--> idle",
        "idle --cancel--> canceled",
        None,  # a final state absorbs it
    ]
    assert steps[4]["note"] == "execute absorbed, answered Replayed"
    assert traces[0]["differing"] == [3]
    assert "recorded StalePlan, now Executed" in steps[2]["differs"]
    assert "counterexample to <code>step-bound</code>" in page


def test_a_failed_report_exits_1_and_the_page_shows_the_failure(tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    document = json.loads((EVIDENCE / "verify.json").read_text(encoding="utf-8"))
    campaign = next(c for c in document["checks"] if c["name"] == "campaign")
    campaign.update(status="failed", properties=["step-bound"], failure="step-bound: 5 > 4")
    document["ok"] = False
    (evidence / "verify.json").write_text(json.dumps(document), encoding="utf-8")
    code, page = review(tmp_path, evidence=evidence)
    assert code == 1 and page  # written all the same: it shows the failure
    assert "FAILED: campaign (step-bound)" in page
    assert '<tr class="failed"><th scope="row">campaign</th>' in page
    assert re.search(r'<tr class="broken"><th scope="row"><code>step-bound</code>', page)


@pytest.fixture(scope="module")
def against_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    code, page = review(tmp_path_factory.mktemp("against"), "--against", str(THREE_KEYS))
    assert code == 0
    return page


@pytest.mark.graphviz
def test_against_a_policy_with_another_key_shows_the_diff_and_its_witness(
    against_page: str,
) -> None:
    """The review guide's example: against the three-key policy (a third prerequisite,
    `schema`), the page shows the removed key, the changed gate and z3's witness over
    the shared keys."""
    from replan.verification.engines.prove.engine import decision_difference

    witness = decision_difference(load_policy(THREE_KEYS), DEFAULT_POLICY)
    assert witness is not None and witness.own == {"schema": "Unknown"}
    check = page_data(against_page)["against"]
    assert check["name"] == "against"
    assert check["details"]["commit_decision"] == witness.to_json()
    assert (
        f"the old policy <strong>{witness.to_json()['old']}</strong> and the new one "
        f"<strong>{witness.to_json()['new']}</strong>"
    ) in against_page
    for key, state in witness.assignment.items():
        assert f"<tr><th scope='row'>{key}</th><td>{state}</td></tr>" in against_page
    assert (
        "<tr><th scope='row'>schema</th><td>Unknown (one policy only)</td></tr>"
    ) in against_page
    assert 'id="changes"' in against_page and against_page.count("<svg ") == 4
    assert "keys removed: schema" in against_page
    # the guard whose policy-given meaning changed is named in the diff
    assert "prerequisites_passed (commit-import: parser, access, schema → parser, access)" in (
        against_page
    )
    assert (
        "prerequisites changed: commit-import: parser, access, schema -&gt; parser, access"
        in against_page
    )


def bad_inputs(tmp_path: Path) -> dict[str, list[str]]:
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "verify.json").write_text("{not json", encoding="utf-8")
    not_a_recording = tmp_path / "x.json"
    not_a_recording.write_text(json.dumps({"hello": 1}), encoding="utf-8")
    return {
        "no verify report": ["--evidence", str(empty)],
        "verify.json is not JSON": ["--evidence", str(broken)],
        "report of another policy": ["--evidence", str(EVIDENCE), "--policy", str(THREE_KEYS)],
        "missing policy": ["--policy", "missing.toml"],
        "missing trace": ["--evidence", str(EVIDENCE), "--trace", "missing.json"],
        "not a recording": ["--evidence", str(EVIDENCE), "--trace", str(not_a_recording)],
        "bad against": ["--evidence", str(EVIDENCE), "--against", "no-such-revision"],
    }


def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, arguments in bad_inputs(tmp_path).items():
        output = tmp_path / "out.html"
        code = main(["review", *arguments, "-o", str(output)])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2, name
        assert len(err) == 1 and err[0].startswith("replan review: error: "), (name, err)
        assert not output.exists(), name
    assert main(["review", "--evidence", str(tmp_path / "empty")]) == 2
    assert f"run `replan verify -o {tmp_path / 'empty'}` first" in capsys.readouterr().err


def test_without_graphviz_the_page_shows_the_mermaid_source(tmp_path: Path) -> None:
    empty = tmp_path / "empty-path"
    empty.mkdir()
    environment = {k: v for k, v in os.environ.items() if k != "PATH"} | {"PATH": str(empty)}
    output = tmp_path / "review.html"
    completed = subprocess.run(
        [sys.executable, "-m", "replan", "review", "--evidence", str(EVIDENCE), "-o", str(output)],
        capture_output=True,
        text=True,
        env=environment,
        cwd=tmp_path,
        check=False,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    page = output.read_text(encoding="utf-8")
    assert "<svg " not in page and "stateDiagram-v2" in page
    assert "Graphviz (<code>dot</code>) is not installed" in page
    assert len(page_data(page)["traces"][0]["steps"]) == 12  # the player still plays


# ---- a user's own run, and a page without a recording --------------------------------------


def _evidence_for(policy_path: Path, tmp_path: Path) -> Path:
    """An evidence directory whose verify report is for ``policy_path`` (the committed
    report's checks, under that policy), and no recording in it."""
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    document = json.loads((EVIDENCE / "verify.json").read_text(encoding="utf-8"))
    document["policy"] = policy_to_dict(load_policy(policy_path))
    (evidence / "verify.json").write_text(json.dumps(document), encoding="utf-8")
    return evidence


def _own_run(policy_path: Path, tmp_path: Path) -> Path:
    """A run under ``policy_path`` as its application writes it: ``run.trace`` as
    JSON, a malformed proposal and a refused observation among its calls."""
    run = Controller(load_policy(policy_path))
    run.propose("not a plan")  # type: ignore[arg-type]
    with contextlib.suppress(ValueError):
        run.observe(Observation("no-such-key", 1, EvidenceState.PASSED, "ci"))
    for key in ("parser", "access", "schema"):
        run.observe(Observation(key, 1, EvidenceState.PASSED, "ci"))
    run.propose(Plan("p1", 1, run.evidence_revision, "commit-import", "input-A"))
    run.execute("p1")
    path = tmp_path / "my-run.json"
    path.write_text(json.dumps(run.trace), encoding="utf-8")
    return path


def test_a_runs_own_trace_plays_under_the_policy_its_records_name(tmp_path: Path) -> None:
    evidence = _evidence_for(THREE_KEYS, tmp_path)
    trace = _own_run(THREE_KEYS, tmp_path)
    code, page = review(
        tmp_path, "--policy", str(THREE_KEYS), "--trace", str(trace), evidence=evidence
    )
    assert code == 0
    [played] = page_data(page)["traces"]
    assert played["kind"] == "run" and played["differing"] == []
    assert len(played["steps"]) == 7
    assert played["steps"][-1]["stop_reason"] == "Completed"
    assert played["policy"] == policy_to_dict(load_policy(THREE_KEYS))


def test_a_trace_of_another_policy_than_the_pages_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _own_run(THREE_KEYS, tmp_path)
    code, _ = review(tmp_path, "--trace", str(trace))
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "it ran under policy sha256:" in err[0], err
    assert "give that policy with --policy FILE (the page's policy)" in err[0]


def test_an_episode_recorded_under_a_policy_plays_on_its_page(tmp_path: Path) -> None:
    evidence = _evidence_for(THREE_KEYS, tmp_path)
    record = tmp_path / "episode" / "replan-trace.json"
    assert main(["trace", "--policy", str(THREE_KEYS), "-o", str(record)]) == 0
    code, page = review(
        tmp_path, "--policy", str(THREE_KEYS), "--trace", str(record), evidence=evidence
    )
    assert code == 0
    [played] = page_data(page)["traces"]
    assert played["kind"] == "episode" and played["differing"] == []
    assert played["steps"][-1]["stop_reason"] == "Completed"


def test_a_page_without_a_recording_says_so(tmp_path: Path) -> None:
    evidence = _evidence_for(THREE_KEYS, tmp_path)
    code, page = review(tmp_path, "--policy", str(THREE_KEYS), evidence=evidence)
    assert code == 0
    assert page_data(page)["traces"] == []
    assert "No recording to play" in page
