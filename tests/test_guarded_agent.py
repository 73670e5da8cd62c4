"""examples/guarded_agent.py, the longer guarded agent docs/agents/middleware.md points
to, as written: a stale call is refused, a failed prerequisite denies the commit, a
retried call gets its receipt and its tool does not run again, and a fresh commit
completes the run. On a real SQLite journal, which keeps the receipts after the
process."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from replan.controller.executor import Executor
from replan.controller.sqlite_journal import SqliteJournal

REPOSITORY = Path(__file__).resolve().parent.parent
EXAMPLE = REPOSITORY / "examples" / "guarded_agent.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("guarded_agent", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_guarded_agent_refuses_denies_replays_and_completes(tmp_path: Path) -> None:
    outcome = asyncio.run(_example().run(tmp_path))
    assert [(call_id, tool, answer) for tool, call_id, answer, _ in outcome["calls"]] == [
        ("cfg-1", "read_config", "Executed"),
        ("parser-1", "inspect_parser", "Executed"),
        ("commit-1", "commit_import", "StalePlan"),
        ("access-1", "check_access", "Executed"),
        ("commit-2", "commit_import", "PreconditionDenied"),
        ("cfg-1", "read_config", "Replayed"),
        ("commit-3", "commit_import", "Executed"),
    ]
    results = {call_id: result for _, call_id, _, result in outcome["calls"]}
    assert results["commit-1"] == (
        "StalePlan: evidence changed since this call was planned "
        "(evidence revision 1, now 2), re-plan"
    )
    assert results["commit-2"] == "PreconditionDenied: access is Failed"
    # the retried call read what the first one returned, and the tool ran once
    first, retried = (r for tool, c, _, r in outcome["calls"] if c == "cfg-1")
    assert first == retried
    assert outcome["invocations"] == {
        "read_config": 1,
        "inspect_parser": 1,
        "check_access": 1,
        "commit_import": 1,
    }
    # the model read every answer, the refusals included, in its next request
    assert "commit_import -> PreconditionDenied: access is Failed" in outcome["model_read"]
    assert outcome["stop_reason"] == "Completed"
    assert (outcome["steps"], outcome["proposals"]) == (4, 6)
    # the run completed with commit-3: the guard ended the SDK's loop there, with the
    # call's result and why the run stopped as the run's answer
    first, second = outcome["answers"]
    assert first == "Access is Failed: the import needs its owner."
    assert second.startswith('{"imported": 3, "into": "imports"}\nThe run has stopped (Completed)')

    # The receipts outlive the process: reopened, the journal holds one per executed call.
    journal = SqliteJournal(tmp_path / "run.journal")
    try:
        receipts = {receipt.plan_id for receipt in Executor(journal).receipts()}
    finally:
        journal.close()
    assert receipts == {"cfg-1", "parser-1", "access-1", "commit-3"}


def test_the_example_runs_as_a_script() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "Replayed" in done.stdout and "stop reason: Completed" in done.stdout


def test_a_budget_ends_the_run_after_the_model_was_warned(tmp_path: Path) -> None:
    """100 tokens per provider response against max_tokens = 500: past 80% the tool
    result tells the model, the response that reaches the limit stops the run, and
    its call is refused without running the tool."""
    outcome = asyncio.run(_example().run_budget(tmp_path))
    read = outcome["model_read"]
    warned = [i for i, line in enumerate(read) if "Budget: tokens 400 of 500 (80%)" in line]
    assert warned
    assert not any("Budget:" in line for line in read[: warned[0]])
    assert outcome["stop_reason"] == "BudgetExhausted"
    assert outcome["tokens"] == 500
    # the refused call's answer ends the run: why it stopped and what is left
    assert outcome["answer"].startswith("Stopped: BudgetExhausted")
    assert "The run has stopped (BudgetExhausted)" in outcome["answer"]
    assert '"tokens": "500 of 500"' in outcome["answer"]
    # every call the model read an answer of ran; the refused one did not
    assert outcome["invocations"] == {"read_config": len(read)}


def test_what_a_provider_reports_never_makes_charge_raise() -> None:
    from replan.controller.middleware import reported_tokens

    for reported in (
        {},
        {"total_token_count": None},
        {"total_token_count": -5},
        {"input_token_count": "many", "output_token_count": 2.6},
        {"total_token_count": True},
        {"total_token_count": float("nan")},
        {"total_token_count": 10**40},
    ):
        usage = reported_tokens(reported)
        assert all(type(amount) is int and amount >= 0 for amount in usage), reported
