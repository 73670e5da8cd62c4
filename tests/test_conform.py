"""`replan conform LOG`: a recorded run checked against the proved model after the
fact; a log edited by hand is caught at its first divergence."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from replan.controller import Controller, EvidenceState, Observation, Plan
from replan.controller.durable import LoggedController, SqliteRunLog


def _conform(*arguments: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replan", "conform", *map(str, arguments)],
        capture_output=True,
        text=True,
        check=False,
    )


def _logged_run(path: Path) -> None:
    with SqliteRunLog(path) as log:
        run = LoggedController(log=log)
        run.observe(Observation("parser", 1, EvidenceState.PASSED, "inspector"))
        run.propose(Plan("p1", 1, run.evidence_revision, "inspect-parser", "input-A"))
        run.execute("p1")
        run.execute("p1")


def test_a_recorded_run_log_conforms(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    _logged_run(path)
    before = path.read_bytes()
    done = _conform(path, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["conforms"] and report["source"] == "run log" and report["calls"] == 4
    assert path.read_bytes() == before  # read-only


def test_a_log_edited_by_hand_diverges_at_its_position(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    _logged_run(path)
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE replan_run_log SET answer = '\"Executed\"' WHERE position = 4")
    done = _conform(path)
    assert done.returncode == 1
    assert (
        'position 4: execute("p1") was answered "Executed" in the log, "Replayed" by the model'
        in done.stdout
    )


def test_a_controller_trace_conforms_and_an_edited_one_does_not(tmp_path: Path) -> None:
    run = Controller()
    run.observe(Observation("parser", 1, EvidenceState.PASSED, "inspector"))
    run.propose(Plan("p1", 1, run.evidence_revision, "inspect-parser", "input-A"))
    run.propose("not a plan")  # type: ignore[arg-type]
    run.cancel()
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(run.trace), encoding="utf-8")
    assert _conform(trace).returncode == 0
    edited = run.trace
    edited[1]["args"]["plan"]["evidence_revision"] = 1  # a stale plan, said to be accepted
    trace.write_text(json.dumps(edited), encoding="utf-8")
    done = _conform(trace, "--json")
    assert done.returncode == 1
    assert json.loads(done.stdout)["divergence"]["position"] == 2


def test_what_is_no_run_log_is_a_one_line_error(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE t (x)")
    for path in (other, tmp_path / "absent.log", Path("README.md")):
        done = _conform(path)
        assert done.returncode == 2, path
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_one_run_of_a_dbos_database_conforms_and_an_edited_one_diverges(tmp_path: Path) -> None:
    from replan.verification.boundary.durable.crash import run_to_end

    database = tmp_path / "runs.db"
    run_to_end(f"sqlite:///{database}", "import-1", tmp_path)
    listed = _conform(database)
    assert listed.returncode == 2 and "import-1" in listed.stderr and "--run" in listed.stderr
    done = _conform(database, "--run", "import-1", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["calls"] >= 10
    with sqlite3.connect(database) as connection:
        connection.execute(
            "UPDATE replan_durable_log SET answer = 'true' WHERE position = 2 AND run_id = ?",
            ("import-1",),
        )
    assert _conform(database, "--run", "import-1").returncode == 1


def test_a_trace_with_an_unknown_call_or_a_refused_observation_reads_right(
    tmp_path: Path,
) -> None:
    run = Controller()
    with contextlib.suppress(ValueError):  # InvalidInput: a str is no EvidenceState
        run.observe(Observation("parser", 1, "Passed", "t"))  # type: ignore[arg-type]
    run.cancel()
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(run.trace), encoding="utf-8")
    assert _conform(trace).returncode == 0  # the refused call is not replayed as a real one
    bogus = [{"op": "launch", "args": {}, "result": None}]
    trace.write_text(json.dumps(bogus), encoding="utf-8")
    done = _conform(trace)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr
