"""A run replan guarded, checked after the fact from what it left: the reference
episode's durable run log and its OpenTelemetry spans agree with the verified
controller (`replan conform`, `replan check-trace`); a log altered since it was
written, or spans edited, are reported at the first call that differs."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from replan.cli import main


def _replan(*arguments: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replan", *map(str, arguments)],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture(scope="module")
def episode(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference episode's record, run log and spans, written once."""
    folder = tmp_path_factory.mktemp("episode")
    written = main(
        [
            "trace",
            "-o",
            str(folder / "trace.json"),
            "--run-log",
            str(folder / "run.log"),
            "--otel",
            str(folder / "spans.json"),
        ]
    )
    assert written == 0
    return folder


def _copy(episode: Path, tmp_path: Path, *names: str) -> Path:
    for name in names:
        (tmp_path / name).write_bytes((episode / name).read_bytes())
    return tmp_path / names[0]


@pytest.mark.parametrize("command", ["conform", "check-trace"])
@pytest.mark.parametrize(
    ("name", "source"), [("run.log", "run log"), ("spans.json", "OpenTelemetry export")]
)
def test_the_reference_episodes_run_log_and_spans_agree_with_the_controller(
    episode: Path, command: str, name: str, source: str
) -> None:
    done = _replan(command, episode / name, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["conforms"] and report["source"] == source and report["calls"] == 12


def test_an_altered_log_entry_is_named_at_its_call_by_check_trace(
    episode: Path, tmp_path: Path
) -> None:
    log = _copy(episode, tmp_path, "run.log", "run.log.head")
    with sqlite3.connect(log) as connection:
        connection.execute(
            "UPDATE replan_run_log SET argument = replace(argument, '\"ci\"', '\"cj\"') "
            "WHERE position = 4"
        )
    sarif = tmp_path / "found.sarif"
    done = _replan("check-trace", log, "--sarif", sarif)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        'contradicts the controller at position 4: observe({"key":"parser","version":2,'
        '"state":"Passed","source":"cj"}): the entry at position 4 does not match its chain '
        "value (altered)" in done.stdout
    )
    (result,) = json.loads(sarif.read_text())["runs"][0]["results"]
    assert result["ruleId"] == "contradicts-the-controller"


def test_a_log_rolled_back_to_its_first_entries_is_named_at_the_first_missing(
    episode: Path, tmp_path: Path
) -> None:
    log = _copy(episode, tmp_path, "run.log", "run.log.head")
    with sqlite3.connect(log) as connection:
        connection.execute("DELETE FROM replan_run_log WHERE position > 9")
    done = _replan("check-trace", log, "--json")
    assert done.returncode == 1
    divergence = json.loads(done.stdout)["divergence"]
    assert divergence["position"] == 10 and "entries #10 to #12 are missing" in divergence["damage"]


def _spans_edited(episode: Path, tmp_path: Path, edit: str) -> Path:
    document = json.loads((episode / "spans.json").read_text())
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    calls = sorted(
        (s for s in spans if any(a["key"] == "replan.seq" for a in s["attributes"])),
        key=lambda s: int(
            next(a for a in s["attributes"] if a["key"] == "replan.seq")["value"]["intValue"]
        ),
    )
    if edit == "answer":
        for attribute in calls[7]["attributes"]:  # p2 denied by its precondition
            if attribute["key"] == "replan.result":
                attribute["value"] = {"stringValue": "Executed"}
    elif edit == "drop":
        spans.remove(calls[3])
    elif edit == "two runs":
        calls[0]["traceId"] = "f" * 32
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(document))
    return path


def test_spans_that_claim_another_answer_diverge_at_that_call(
    episode: Path, tmp_path: Path
) -> None:
    done = _replan("conform", _spans_edited(episode, tmp_path, "answer"))
    assert done.returncode == 1
    assert 'position 8: execute("p2") was answered "Executed"' in done.stdout


@pytest.mark.parametrize(
    ("edit", "message"),
    [("drop", "some of the run's spans are missing"), ("two runs", "the spans of 2 traces")],
)
def test_spans_of_no_one_whole_run_are_refused_in_one_line(
    episode: Path, tmp_path: Path, edit: str, message: str
) -> None:
    done = _replan("check-trace", _spans_edited(episode, tmp_path, edit))
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_tau_bench_file_without_its_adapter_is_refused_in_one_line(tmp_path: Path) -> None:
    runs = tmp_path / "runs.json"
    runs.write_text("[]")
    done = _replan("check-trace", runs)
    assert done.returncode == 2
    assert "needs --adapter and --policy" in done.stderr


def test_a_run_log_that_exists_is_never_overwritten_by_trace(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("mine")
    done = _replan("trace", "-o", tmp_path / "t.json", "--run-log", log)
    assert done.returncode == 2 and "exists" in done.stderr
    assert log.read_text() == "mine"
