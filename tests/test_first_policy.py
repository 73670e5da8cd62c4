"""A new user's first policy verifies as written: three evidence keys, a
completing step requiring two of them, two resources, six steps and no [workflow]
table. `replan verify` on it, as a user runs it, holds every check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from replan.verification.runtime.forking import usable_cores

ROOT = Path(__file__).resolve().parent.parent
FIRST_POLICY = ROOT / "tests" / "policies" / "first-policy.toml"


def test_a_new_users_first_policy_verifies_as_written(tmp_path: Path) -> None:
    completed = subprocess.run(
        [
            *(sys.executable, "-m", "replan", "verify", "--policy", str(FIRST_POLICY)),
            *("--profile", "ci", "--json", "-o", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout)
    assert report["ok"] is True and report["failed"] == []
    assert [check["name"] for check in report["checks"]] == [
        *("policy", "drift", "proofs", "explorer", "campaign", "diagram", "workflow"),
        "boundary",
    ]
    # the workflow baseline defaulted to the completing step's requires
    assert report["policy"]["workflow"]["ready_when_passed"] == ["schema", "tests"]
    # a large policy is announced before the explorer starts
    assert "keys 3 (default 2)" in completed.stderr
    # and searched by the generated kernel (`--engine auto`), with the campaign and
    # the boundary check beside it when there are two cores to use, and its search
    # sharded over them once no kernel is being generated
    assert "searched by the generated kernel" in completed.stderr
    two_cores = usable_cores() >= 2
    assert ("started beside the explorer" in completed.stderr) == two_cores
    assert ("sharded over 2 processes)" in completed.stderr) == two_cores
    (explorer,) = [check for check in report["checks"] if check["name"] == "explorer"]
    assert explorer["details"]["engine"] == "kernel"
    # the campaign's coverage is measured against the kernel's reachable states
    (campaign,) = [check for check in report["checks"] if check["name"] == "campaign"]
    measured = campaign["details"]["coverage_vs_explorer"]
    assert "not measured" not in measured
    assert all(domain["states"]["total"] > 0 for domain in measured.values())
    assert "vs explorer (" in campaign["summary"]


def test_the_explorers_engine_is_the_kernel_unless_another_is_named() -> None:
    from replan.verification.pipeline.estimate import explorer_engine

    assert explorer_engine("auto") == "kernel"
    assert explorer_engine("python") == "python"
    assert explorer_engine("kernel") == "kernel"


def test_workers_auto_shards_only_a_search_larger_than_the_default() -> None:
    from replan.controller import DEFAULT_POLICY, load_policy
    from replan.verification.pipeline.estimate import auto_workers, explorer_estimate

    assert explorer_estimate(DEFAULT_POLICY) is None
    assert auto_workers(None) == 1
    estimate = explorer_estimate(load_policy(FIRST_POLICY))
    assert estimate is not None and "keys 3 (default 2)" in estimate
    assert auto_workers(estimate) == min(2, usable_cores())


def test_a_bad_workers_value_is_a_one_line_error(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "replan", "verify", "--workers", "many", "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 2
    assert "--workers: expected auto or an integer >= 1, got 'many'" in completed.stderr
    assert "Traceback" not in completed.stderr
