"""The embedding guide's example (docs/guide/embed.md, "A run, end to end") runs as
written and prints the handoff it shows, and the handoff summary says what the run
decided on."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from replan.controller import (
    Approval,
    Controller,
    EvidenceState,
    Observation,
    Plan,
    handoff,
    load_policy,
    plan_digest,
)

ROOT = Path(__file__).resolve().parents[1]


def test_the_embedding_guides_example_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page = (ROOT / "docs" / "guide" / "embed.md").read_text(encoding="utf-8")
    section = page.split("## A run, end to end", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    (shown,) = re.findall(r"```json\n(.*?)```", section, re.S)
    monkeypatch.chdir(ROOT)
    exec(compile(block, "docs/guide/embed.md (A run, end to end)", "exec"), {})
    assert json.loads(capsys.readouterr().out) == json.loads(shown)


def test_the_handoff_names_what_the_pending_plan_waits_for() -> None:
    run = Controller()
    run.observe(Observation("access", 1, EvidenceState.FAILED, "owner"))
    run.propose(Plan("p1", 1, run.evidence_revision, "commit-import", "input-A"))
    summary = handoff(run)
    assert summary["pending"] == {
        "id": "p1",
        "step": "commit-import",
        "resource": "input-A",
        "waiting_for": {"parser": "Unknown", "access": "Failed"},
        "needs_approval": False,
    }
    assert summary["steps"] == "0 of 4" and summary["proposals"] == "1 of 8"


def test_the_handoff_says_a_plan_waits_for_approval() -> None:
    run = Controller(load_policy(ROOT / "tests" / "policies" / "approval.toml"))
    run.observe(Observation("parser", 1, EvidenceState.PASSED, "ci"))
    plan = Plan("p1", 1, run.evidence_revision, "deploy", "input-A")
    run.propose(plan)
    run.execute("p1")
    summary = handoff(run)
    assert summary["state"] == "awaiting_approval"
    assert summary["pending"]["waiting_for"] == {} and summary["pending"]["needs_approval"]
    run.approve(Approval("p1", plan_digest(plan)))
    run.execute("p1")
    assert handoff(run)["stop_reason"] == "Completed"
