"""`replan conform LOG`: a recorded run checked against the proved model after the
fact; a log edited by hand is caught at its first divergence."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from replan.cli import main
from replan.controller import Controller, EvidenceState, Observation, Plan, load_policy
from replan.controller.durable import LoggedController, SqliteRunLog
from replan.controller.policy import policy_digest


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
        'position 4: execute("p1"): the entry at position 4 does not match its chain value '
        "(altered)" in done.stdout
    )


def test_an_edit_the_model_cannot_see_diverges_at_the_first_altered_call(
    tmp_path: Path,
) -> None:
    """Who observed a fact changes no answer, so only the entry's chain shows it."""
    path = tmp_path / "run.log"
    _logged_run(path)
    with sqlite3.connect(path) as connection:
        connection.execute(
            "UPDATE replan_run_log SET argument = replace(argument, 'inspector', 'someone') "
            "WHERE position = 1"
        )
    done = _conform(path, "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    divergence = json.loads(done.stdout)["divergence"]
    assert divergence["position"] == 1 and divergence["call"].startswith("observe(")
    assert "someone" in divergence["call"] and "altered" in divergence["damage"]


def test_a_log_rolled_back_to_an_older_copy_diverges_at_the_first_missing_call(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.log"
    with SqliteRunLog(path) as log:
        run = LoggedController(log=log)
        run.observe(Observation("parser", 1, EvidenceState.PASSED, "inspector"))
        older = path.read_bytes()
        run.propose(Plan("p1", 1, run.evidence_revision, "inspect-parser", "input-A"))
        run.execute("p1")
    path.write_bytes(older)
    done = _conform(path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "DIVERGES at position 2: (no entry): entries #2 to #3 are missing" in done.stdout


def test_a_log_without_its_witness_cannot_be_checked(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    _logged_run(path)
    Path(f"{path}.head").unlink()
    done = _conform(path)
    assert done.returncode == 2
    assert "run.log.head is missing" in done.stderr and "\n" not in done.stderr.strip()


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


# ---- the policy a trace ran under ----------------------------------------------------------

THREE_KEYS = Path(__file__).resolve().parent / "policies" / "three-keys.toml"


def _three_keys_trace(tmp_path: Path) -> Path:
    """A valid run under three-keys.toml, written as its trace: commit-import requires
    schema there, so under the default policy the same calls diverge."""
    run = Controller(load_policy(THREE_KEYS))
    for key in ("parser", "access", "schema"):
        run.observe(Observation(key, 1, EvidenceState.PASSED, "ci"))
    run.propose(Plan("p1", 1, run.evidence_revision, "commit-import", "input-A"))
    run.execute("p1")
    path = tmp_path / "my-run.json"
    path.write_text(json.dumps(run.trace), encoding="utf-8")
    return path


def test_a_trace_of_another_policy_without_policy_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Replayed under the default policy, this valid run was a false DIVERGES."""
    path = _three_keys_trace(tmp_path)
    assert main(["conform", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "it ran under policy sha256:" in err[0]
    assert "not the default: give that policy with --policy FILE" in err[0]


def test_a_trace_conforms_under_the_policy_its_records_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _three_keys_trace(tmp_path)
    assert main(["conform", str(path), "--policy", str(THREE_KEYS)]) == 0
    assert "conforms" in capsys.readouterr().out


def test_a_trace_checked_under_another_policy_than_it_names_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _three_keys_trace(tmp_path)
    default = Path(__file__).resolve().parent.parent / "spec" / "policy.toml"
    assert main(["conform", str(path), "--policy", str(default)]) == 2
    assert "and --policy names another" in capsys.readouterr().err


def test_every_trace_record_names_its_policys_digest() -> None:
    policy = load_policy(THREE_KEYS)
    run = Controller(policy)
    run.cancel()
    assert [record["policy"] for record in run.trace] == [policy_digest(policy)]
