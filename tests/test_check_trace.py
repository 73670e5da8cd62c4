"""`replan check-trace`: recorded τ-bench runs replayed through the guard with the
airline example's adapter. The figures on the 100 shared GPT-4o runs are pinned; a
weakened eligibility rule lets an ineligible cancellation through; bad input is one
line and exit 2 with nothing written; the handoff ends a run as completed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "tau_airline"
ADAPTER = EXAMPLE / "adapter.py"
POLICY = EXAMPLE / "policy.toml"
#: The shared τ-bench airline runs (trials 0-1 of sierra-research/tau-bench's
#: historical_trajectories/gpt-4o-airline.json, MIT); never copied into the project.
DATA = (
    Path(os.environ.get("TAU_BENCH_AIRLINE", "/work/shared/data/tau-bench-airline"))
    / "gpt-4o-airline-trials-0-1.json"
)


def _check(
    *arguments: str | Path, policy: Path = POLICY, adapter: Path = ADAPTER
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "replan",
            "check-trace",
            *map(str, arguments),
            "--adapter",
            str(adapter),
            "--policy",
            str(policy),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )


# ---- a small recorded run ----------------------------------------------------------

RECORD = {
    "reservation_id": "ABC123",
    "user_id": "mia_li_3668",
    "origin": "JFK",
    "destination": "SEA",
    "flight_type": "one_way",
    "cabin": "economy",
    "flights": [
        {
            "origin": "JFK",
            "destination": "SEA",
            "flight_number": "HAT069",
            "date": "2024-05-20",
            "price": 121,
        }
    ],
    "passengers": [{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}],
    "payment_history": [{"payment_id": "credit_card_1", "amount": 121}],
    "created_at": "2024-05-01T10:00:00",
    "total_baggages": 0,
    "nonfree_baggages": 0,
    "insurance": "no",
}


def _call(call_id: str, tool: str, arguments: dict[str, Any], result: str) -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": tool, "arguments": json.dumps(arguments)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "name": tool, "content": result},
    ]


def _run(
    traj: list[dict[str, Any]], reward: float = 1.0, actions: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "task_id": 7,
        "trial": 0,
        "reward": reward,
        "info": {"task": {"actions": actions or []}},
        "traj": [{"role": "system", "content": "policy"}, *traj],
    }


def _cancellation(record: dict[str, Any] = RECORD) -> list[dict[str, Any]]:
    """The user asks to cancel, the agent reads the reservation, lists, the user says yes."""
    return [
        {
            "role": "user",
            "content": "Hi, I'm mia_li_3668: please cancel reservation ABC123, change of plan.",
        },
        *_call(
            "call_read", "get_reservation_details", {"reservation_id": "ABC123"}, json.dumps(record)
        ),
        {
            "role": "assistant",
            "content": "I will cancel reservation ABC123 (flight HAT069). Proceed?",
        },
        {"role": "user", "content": "Yes, please proceed."},
        *_call(
            "call_cancel",
            "cancel_reservation",
            {"reservation_id": "ABC123"},
            json.dumps({**record, "status": "cancelled"}),
        ),
    ]


def _write(path: Path, runs: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(runs))
    return path


def test_an_ineligible_cancellation_is_refused_naming_the_written_rule(tmp_path: Path) -> None:
    done = _check(_write(tmp_path / "runs.json", [_run(_cancellation())]), "--json")
    assert done.returncode == 1, done.stderr
    run = json.loads(done.stdout)["runs"][0]
    assert run["stopped"] is None
    [refusal] = run["refusals"]
    assert refusal["call_id"] == "call_cancel"
    assert refusal["tool"] == "cancel_reservation"
    assert refusal["arguments"] == {"reservation_id": "ABC123"}
    assert refusal["rule"] == "cancel-eligibility"
    assert "insurance is 'no'" in refusal["reason"]


def test_an_eligible_cancellation_conforms(tmp_path: Path) -> None:
    booked_yesterday = {**RECORD, "created_at": "2024-05-15T09:00:00"}
    done = _check(_write(tmp_path / "runs.json", [_run(_cancellation(booked_yesterday))]), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["runs"][0]["refusals"] == []


def test_a_weakened_eligibility_rule_lets_the_ineligible_cancellation_through(
    tmp_path: Path,
) -> None:
    weakened = tmp_path / "weakened.toml"
    text = POLICY.read_text()
    assert 'requires = ["reservation_known", "cancellable"]' in text
    weakened.write_text(
        text.replace(
            'requires = ["reservation_known", "cancellable"]', 'requires = ["reservation_known"]'
        )
    )
    runs = _write(tmp_path / "runs.json", [_run(_cancellation())])
    assert _check(runs, policy=weakened).returncode == 0
    assert _check(runs).returncode == 1


def test_a_write_without_a_yes_is_refused_and_its_result_dropped(tmp_path: Path) -> None:
    eligible = {**RECORD, "created_at": "2024-05-15T09:00:00"}
    traj = _cancellation(eligible)
    traj[3] = {"role": "user", "content": "Could you also add a bag?"}
    done = _check(_write(tmp_path / "runs.json", [_run(traj)]), "--json")
    assert done.returncode == 1
    [refusal] = json.loads(done.stdout)["runs"][0]["refusals"]
    assert refusal["rule"] == "confirm-before-write"


def test_the_handoff_completes_the_run_gracefully(tmp_path: Path) -> None:
    traj = [
        {"role": "user", "content": "I want a human."},
        *_call(
            "call_transfer",
            "transfer_to_human_agents",
            {"summary": "wants a human"},
            "Transfer successful",
        ),
    ]
    done = _check(_write(tmp_path / "runs.json", [_run(traj)]), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    run = json.loads(done.stdout)["runs"][0]
    assert run["completed"] == "call_transfer"
    assert run["stopped"] is None and run["refusals"] == []


def test_the_same_facts_read_again_and_again_stop_the_run(tmp_path: Path) -> None:
    read = json.dumps(RECORD)
    traj = [{"role": "user", "content": "Reservation ABC123 please."}]
    for n in range(5):
        traj += _call(f"call_{n}", "get_reservation_details", {"reservation_id": "ABC123"}, read)
    done = _check(_write(tmp_path / "runs.json", [_run(traj)]), "--json")
    assert done.returncode == 1
    stopped = json.loads(done.stdout)["runs"][0]["stopped"]
    # the first read is news; the 2nd, 3rd and 4th repeat it: the 4th reaches the limit of 3
    assert stopped["reason"] == "NoNewEvidence" and stopped["call_id"] == "call_3"
    assert stopped["rule"] == "no-progress"


def test_a_reused_call_id_is_a_new_call(tmp_path: Path) -> None:
    """τ-bench records give two calls one id; each is guarded, and each result read."""
    eligible = {**RECORD, "created_at": "2024-05-15T09:00:00"}
    traj = _cancellation(eligible)
    traj[1]["tool_calls"][0]["id"] = traj[2]["tool_call_id"] = "call_same"
    traj[-2]["tool_calls"][0]["id"] = traj[-1]["tool_call_id"] = "call_same"
    done = _check(_write(tmp_path / "runs.json", [_run(traj)]), "--json")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_resource_with_no_free_slot_is_refused(tmp_path: Path) -> None:
    one_slot = tmp_path / "one-slot.toml"
    text = POLICY.read_text()
    start = text.index("open = [")
    one_slot.write_text(text[:start] + 'open = ["s1"]' + text[text.index("]", start) + 1 :])
    eligible = {**RECORD, "created_at": "2024-05-15T09:00:00"}
    done = _check(
        _write(tmp_path / "runs.json", [_run(_cancellation(eligible))]), "--json", policy=one_slot
    )
    assert done.returncode == 1
    [refusal] = json.loads(done.stdout)["runs"][0]["refusals"]
    # the user's id took the one slot; the reservation finds none
    assert refusal["rule"] == "guard" and "no free slot" in refusal["reason"]


# ---- bad input: one line, exit 2, nothing written ------------------------------------

RAISING_ADAPTER = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("airline", {path!r})
airline = sys.modules["airline"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(airline)
class Raising(airline.AirlineAdapter):
    def {method}(self, *arguments):
        raise KeyError("boom")
def new_adapter():
    return Raising()
"""


@pytest.mark.parametrize(
    "case",
    [
        "not-json",
        "bad-arguments",
        "unknown-tool",
        "raising-adapter",
        "raising-approval",
        "raising-explanation",
        "no-adapter",
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path: Path, case: str) -> None:
    runs = tmp_path / "runs.json"
    adapter = ADAPTER
    eligible = {**RECORD, "created_at": "2024-05-15T09:00:00"}
    good = _run(_cancellation(eligible if case == "raising-approval" else RECORD))
    if case == "not-json":
        runs.write_text("[{")
    elif case == "bad-arguments":
        good["traj"][2]["tool_calls"][0]["function"]["arguments"] = "{reservation"
        _write(runs, [good])
    elif case == "unknown-tool":
        good["traj"][2]["tool_calls"][0]["function"]["name"] = "delete_everything"
        _write(runs, [good])
    else:
        _write(runs, [good])
        adapter = tmp_path / "adapter.py"
        method = {
            "raising-adapter": "observe_result",
            "raising-approval": "approve",
            "raising-explanation": "explain",
        }.get(case)
        if method is not None:
            adapter.write_text(RAISING_ADAPTER.format(path=str(ADAPTER), method=method))
    sarif = tmp_path / "out.sarif"
    done = _check(runs, "--sarif", sarif, adapter=adapter)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("replan check-trace: error: "), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not sarif.exists()
    expected = {
        "not-json": "not JSON",
        "bad-arguments": "run 0 (task 7, trial 0), message 2: tool_calls[0].function.arguments",
        "unknown-tool": "task 7, trial 0, message 2: tool 'delete_everything'",
        "raising-adapter": "task 7, trial 0, message 3: the adapter's observe_result raised",
        "raising-approval": "task 7, trial 0, message 6: the adapter's approve raised",
        "raising-explanation": "task 7, trial 0, message 6: the adapter's explain raised",
        "no-adapter": "no such adapter file",
    }[case]
    assert expected in lines[0]


# ---- the 100 shared GPT-4o runs --------------------------------------------------------


def _shared_runs() -> Path:
    if not DATA.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{DATA} is missing (CI=true): the shared τ-bench runs are required")
        pytest.skip(
            f"{DATA} is missing: trials 0-1 of historical_trajectories/gpt-4o-airline.json "
            "from github.com/sierra-research/tau-bench (commit 59a200c, MIT); set "
            "TAU_BENCH_AIRLINE to its folder"
        )
    return DATA


def test_the_shared_runs_figures_are_pinned(tmp_path: Path) -> None:
    sarif = tmp_path / "check-trace.sarif"
    done = _check(_shared_runs(), "--json", "--sarif", sarif)
    assert done.returncode == 1, done.stderr  # the guard refuses calls in these runs
    report = json.loads(done.stdout)
    runs = report["runs"]
    assert len(runs) == 100
    assert all(set(r) >= {"task_id", "trial", "reward", "refusals", "stopped"} for r in runs)
    table = report["summary"]
    assert table["reward_1"] == {
        "runs": 43,
        "with_refusal": 5,
        "by_rule": {"cancel-eligibility": 3, "confirm-before-write": 2},
        "stopped": 0,
        "flagged": 5,
        "refusals": 7,
        "signature_stops": 0,
    }
    assert table["reward_0"] == {
        "runs": 57,
        "with_refusal": 24,
        "by_rule": {
            "cancel-eligibility": 11,
            "confirm-before-write": 13,
            "no-basic-economy-flight-change": 3,
        },
        "stopped": 1,
        "flagged": 24,
        "refusals": 45,
        "signature_stops": 0,
    }
    # at least 30% of the reward-0 runs are flagged, each refusal naming a written rule
    assert table["reward_0"]["flagged"] * 100 >= 30 * 57
    rules = {x["rule"] for r in runs for x in r["refusals"]}
    assert rules <= {
        "cancel-eligibility",
        "confirm-before-write",
        "no-basic-economy-flight-change",
        "ids-before-change",
        "user-id-first",
    }
    false = sorted(
        (f["task_id"], f["trial"], f["tool"], f["rule"]) for f in table["false_refusals"]
    )
    assert false == [
        (31, 0, "cancel_reservation", "cancel-eligibility"),
        (34, 0, "cancel_reservation", "cancel-eligibility"),
        (34, 0, "cancel_reservation", "cancel-eligibility"),
        (34, 1, "cancel_reservation", "cancel-eligibility"),
        (34, 1, "cancel_reservation", "cancel-eligibility"),
        (45, 0, "send_certificate", "confirm-before-write"),
    ]
    [stopped] = [r for r in runs if r["stopped"] is not None]
    assert (stopped["task_id"], stopped["trial"], stopped["stopped"]["reason"]) == (
        33,
        0,
        "NoNewEvidence",
    )
    log = json.loads(sarif.read_text())
    assert len(log["runs"][0]["results"]) == 7 + 45 + 1


def test_the_shared_runs_are_checked_within_ten_seconds() -> None:
    import time

    path = _shared_runs()
    started = time.perf_counter()
    done = _check(path)
    assert done.returncode == 1, done.stderr
    assert time.perf_counter() - started <= 10.0
    assert (
        "false refusals (reward 1, ground truth needed the call): 6 calls in 4 runs" in done.stdout
    )
