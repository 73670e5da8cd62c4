"""`replan trace`: the reference episode through the SDK, its record, the fixed-workflow
table, and the committed evidence they must reproduce."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replan.cli import main
from replan.controller.policy import load_policy, policy_digest, policy_to_dict
from replan.verification.subjects.episode import comparable, run_reference_episode
from replan.verification.subjects.fixed_workflow import fixed_workflow_table
from replan.verification.subjects.mutants import mutant_controller

EVIDENCE = Path(__file__).resolve().parent.parent / "evidence"


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield


@pytest.fixture(scope="module")
def episode() -> dict[str, Any]:
    return run_reference_episode()


def test_the_reference_episode_runs_in_the_issues_order(episode: dict[str, Any]) -> None:
    steps = [(call["via"], call["op"], call["result"]) for call in episode["calls"]]
    assert steps == [
        ("host", "observe", False),  # parser Unknown at revision 1
        ("sdk", "propose", True),  # p1 inspect-parser citing revision 1
        ("sdk", "execute", "Executed"),
        ("host", "observe", True),  # parser Passed
        ("host", "observe", True),  # access Failed -> revision 3
        ("direct", "propose", False),  # citing revision 1: stale
        ("direct", "propose", True),  # p2 commit-import at revision 3
        ("direct", "execute", "PreconditionDenied"),
        ("host", "observe", True),  # owner: access Passed -> revision 4
        ("direct", "execute", "StalePlan"),  # p2
        ("direct", "propose", True),  # p3 citing revision 4
        ("direct", "execute", "Executed"),
    ]
    revisions = [call["evidence_revision"] for call in episode["calls"]]
    assert revisions == [1, 1, 1, 2, 3, 3, 3, 3, 4, 4, 4, 4]
    assert episode["calls"][5]["transition"].endswith("--propose[evidence_stale]--> idle")
    assert episode["calls"][-1]["stop_reason"] == "Completed"
    assert [call["seq"] for call in episode["calls"]] == list(range(1, 13))


def test_the_record_states_totals_versions_and_the_scripted_provider(
    episode: dict[str, Any],
) -> None:
    totals = episode["totals"]
    assert totals["executed_steps"] == 2
    assert totals["proposals_considered"] == 4
    assert totals["provider_calls_in_sdk_request"] == 3
    assert totals["sdk_requests"] == 1
    assert episode["provider"]["scripted"] is True
    assert "not a language model" in episode["provider"]["statement"]
    assert episode["versions"]["agent-framework-core"] == "1.23.0"
    assert episode["sdk"]["function_invocation"] == {
        "max_iterations": 4,
        "allow_concurrent_invocation": False,
    }
    assert episode["holds"] is True
    assert all(fact["holds"] for fact in episode["facts"])
    json.dumps(episode)  # JSON-ready as returned


def test_replan_trace_writes_both_files_and_exits_0(tmp_path: Path) -> None:
    target = tmp_path / "t.json"
    assert main(["trace", "-o", str(target)]) == 0
    record = json.loads(target.read_text())
    table = json.loads((tmp_path / "fixed-workflow.json").read_text())
    assert record["holds"] is True
    assert table["combinations"] == 9 and table["agreeing"] == 9


def test_replan_trace_json_prints_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trace", "--json", "-o", str(tmp_path / "t.json")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["holds"] is True
    assert summary["totals"]["executed_steps"] == 2
    assert summary["fixed_workflow"] == {"combinations": 9, "agreeing": 9}
    assert summary["failing"] == []


def test_the_committed_episode_equals_a_fresh_run_except_timestamp_and_versions(
    episode: dict[str, Any],
) -> None:
    committed = json.loads((EVIDENCE / "replan-trace.json").read_text())
    assert comparable(committed) == comparable(json.loads(json.dumps(episode)))


def test_the_committed_fixed_workflow_table_equals_a_fresh_one() -> None:
    committed = json.loads((EVIDENCE / "fixed-workflow.json").read_text())
    assert committed == json.loads(json.dumps(fixed_workflow_table()))


def test_the_fixed_workflow_table_covers_the_nine_combinations() -> None:
    table = fixed_workflow_table()
    seen = {(row["states"]["parser"], row["states"]["access"]) for row in table["rows"]}
    assert len(seen) == 9
    commits = {
        (row["states"]["parser"], row["states"]["access"])
        for row in table["rows"]
        if row["controller"]["commits"]
    }
    assert commits == {("Passed", "Passed")}
    assert all(row["agree"] for row in table["rows"])


def test_the_fixed_workflow_table_catches_a_controller_that_treats_unknown_as_passed() -> None:
    table = fixed_workflow_table(controller_class=mutant_controller("unknown-treated-as-passed"))
    assert not table["holds"]
    assert any(row["states"]["parser"] == "Unknown" and not row["agree"] for row in table["rows"])


def test_the_episode_fails_on_a_controller_without_the_stale_plan_check() -> None:
    record = run_reference_episode(mutant_controller("stale-plan-check-removed"))
    assert record["holds"] is False
    failed = {fact["fact"] for fact in record["facts"] if not fact["holds"]}
    assert "a proposal citing revision 1 is refused" in failed


def test_replan_trace_exits_1_with_the_failing_fact(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "--mutant", "stale-plan-check-removed"]) == 1
    out = capsys.readouterr().out
    assert "FAILED: a proposal citing revision 1 is refused" in out


def test_replan_trace_names_an_unknown_mutant_and_exits_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["trace", "--mutant", "no-such-thing"]) == 2
    assert "no-such-thing" in capsys.readouterr().err


POLICIES = Path(__file__).resolve().parent / "policies"


@pytest.mark.parametrize("name", ["three-keys.toml", "approval.toml", "budget.toml"])
def test_replan_trace_records_an_episode_of_the_given_policy(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = load_policy(POLICIES / name)
    target = tmp_path / "t.json"
    assert main(["trace", "--policy", str(POLICIES / name), "-o", str(target)]) == 0
    record = json.loads(target.read_text())
    assert record["episode"] == "policy" and record["holds"] is True
    assert record["policy"] == policy_to_dict(policy)
    assert {call["policy"] for call in record["calls"]} == {policy_digest(policy)}
    assert record["final"]["stop_reason"] == "Completed"
    capsys.readouterr()
    assert main(["conform", str(target)]) == 0  # the record holds its policy
    assert "conforms" in capsys.readouterr().out


def test_replan_trace_with_a_policy_writes_beside_that_policys_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["trace", "--policy", str(POLICIES / "three-keys.toml")]) == 0
    assert (tmp_path / "out" / "trace" / "three-keys" / "replan-trace.json").is_file()
    assert (tmp_path / "out" / "trace" / "three-keys" / "fixed-workflow.json").is_file()
