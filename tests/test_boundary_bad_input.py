"""Bad input to the boundary's new pieces is a one-line error or a refusal, never a
traceback, and changes nothing: a tampered journal, a log of another declaration, a
witness that is not one, an approval for an unknown call or of malformed shape,
arguments RFC 8785 cannot carry; on the command line, `replan conform` on a log of
another declaration or with an edited entry, `replan boundary --replay` on a file that
is no counterexample. And a crash between the controller's Executed and
the intent leaves the call in doubt, never reported Stopped."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from agent_framework import Agent, FunctionTool

from replan.controller import (
    Approval,
    Controller,
    EvidenceState,
    ExecuteResult,
    InvalidInput,
    Observation,
    Plan,
    Policy,
    Step,
)
from replan.controller.agent import FunctionInvokingChatClient
from replan.controller.approval import approve_call
from replan.controller.durable import (
    LoggedController,
    RestoreRefused,
    RunLogError,
    SqliteRunLog,
    restore,
)
from replan.controller.durable.log import GENESIS, Entry, chain_after
from replan.controller.executor import Executor, Grant, Operation, perform
from replan.controller.journal import JournalError
from replan.controller.middleware import ReplanMiddleware
from replan.controller.sqlite_journal import SqliteJournal
from replan.verification.subjects.scripted import FunctionCallRequest, ScriptedChatClient


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def test_a_tampered_journal_is_refused_in_one_line_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    with SqliteJournal.create(path) as journal:
        executor = Executor(journal)
        executor.run(
            Operation("c1", "load", "input-A", {"rows": 1}),
            Grant(["input-A"], ["load"]),
            lambda op: 1,
        )
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE records SET body = replace(body, '1', '2') WHERE seq = 1")
    before = files(tmp_path)
    with pytest.raises(JournalError) as refused:
        SqliteJournal(path)
    assert "\n" not in str(refused.value) and "record #1" in str(refused.value)
    assert files(tmp_path) == before


def test_a_log_of_another_declaration_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    with SqliteRunLog(path) as log:
        LoggedController(log=log).cancel()
    with sqlite3.connect(path) as connection:
        (text,) = connection.execute("SELECT header FROM replan_run_header").fetchone()
        header = json.loads(text) | {"declaration_digest": "sha256:" + "0" * 64}
        other = json.dumps(header, sort_keys=True, separators=(",", ":"))
        connection.execute("UPDATE replan_run_header SET header = ?", (other,))
    witness = tmp_path / "run.log.head"
    document = json.loads(witness.read_text()) | {
        "header": hashlib.sha256(other.encode()).hexdigest()
    }
    witness.write_text(json.dumps(document))
    before = files(tmp_path)
    with SqliteRunLog(path) as log, pytest.raises(RestoreRefused) as refused:
        restore(log)
    assert "\n" not in str(refused.value)
    assert str(refused.value).startswith("restore refused: the declaration digest differs")
    assert files(tmp_path) == before


def test_a_witness_that_is_not_one_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    with SqliteRunLog(path) as log:
        LoggedController(log=log).cancel()
    (tmp_path / "run.log.head").write_text("not json")
    with (
        SqliteRunLog(path) as log,
        pytest.raises(RunLogError, match="not a run log's witness") as refused,
    ):
        restore(log)
    assert "\n" not in str(refused.value)


def waiting_approval() -> tuple[Controller, Executor, Operation]:
    policy = Policy(
        keys=(),
        steps=(Step("deploy", needs_approval=True, completes_run=True),),
        resources=("input-A",),
    )
    controller = Controller(policy)
    controller.propose(Plan("d1", 1, 1, "deploy", "input-A"))
    executor = Executor()
    operation = Operation("d1", "deploy", "input-A", {"rows": 1})
    assert (
        perform(
            controller, executor, operation, Grant(["input-A"], ["deploy"]), lambda op: 1
        ).answer
        is ExecuteResult.AWAITING_APPROVAL
    )
    return controller, executor, operation


def test_an_approval_for_an_unknown_call_is_refused_and_changes_nothing() -> None:
    controller, executor, operation = waiting_approval()
    before = controller.snapshot()
    refused = approve_call(controller, executor, Approval("zz", operation.digest()))
    assert (refused.accepted, refused.reason) == (False, "no call 'zz' awaits approval")
    assert controller.snapshot() == before and executor.journal.records() == []


@pytest.mark.parametrize(
    ("approval", "message"),
    [
        ("d1", r"^approval: expected an Approval, got str$"),
        (Approval("", "x"), r"^approval\.plan_id: expected a non-empty string, got ''$"),
        (Approval("d1", 7), r"^approval\.digest: expected a non-empty string, got 7$"),  # type: ignore[arg-type]
    ],
)
def test_a_malformed_approval_raises_one_line_naming_the_field(
    approval: object, message: str
) -> None:
    controller, executor, _ = waiting_approval()
    before = controller.snapshot()
    with pytest.raises(InvalidInput, match=message):
        approve_call(controller, executor, approval)  # type: ignore[arg-type]
    assert controller.snapshot() == before and executor.journal.records() == []


@pytest.mark.parametrize(
    "arguments", [{"rows": 2**53}, {"rows": float("nan")}, {"nested": [{"rows": -(2**60)}]}]
)
def test_arguments_rfc8785_cannot_carry_are_invalid_input(arguments: dict[str, object]) -> None:
    with pytest.raises(InvalidInput, match=r"^Operation\.arguments\[") as refused:
        Operation("c1", "load", "input-A", arguments)  # type: ignore[arg-type]
    assert "\n" not in str(refused.value)


def test_a_completed_call_whose_intent_was_never_written_is_in_doubt_not_stopped() -> None:
    """The completing commit: the controller answered Executed (the run is Completed),
    then the process died before the intent. The model's retry reads InDoubt through the
    guard, not "Stopped: Completed" as if the commit had never been decided."""
    controller = Controller()
    controller.observe(Observation("parser", 1, EvidenceState.PASSED, "ci"))
    controller.observe(Observation("access", 1, EvidenceState.PASSED, "ci"))
    assert controller.propose(
        Plan("c1", 1, controller.evidence_revision, "commit-import", "input-A")
    )
    assert controller.execute("c1") is ExecuteResult.EXECUTED  # then the process died
    grant = Grant(["input-A"], ["inspect-parser", "inspect-access", "commit-import"])
    guard = ReplanMiddleware(controller, executor=Executor(), grant=grant)
    ran: list[str] = []
    tool = FunctionTool(
        name="commit-import", description="commit", func=lambda path: ran.append(path) or "ok"
    )
    replies = iter(
        [[FunctionCallRequest("commit-import", {"path": "input-A"}, call_id="c1")], "done"]
    )
    client = FunctionInvokingChatClient(
        ScriptedChatClient(lambda results: next(replies)),
        configuration={"max_iterations": 4, "allow_concurrent_invocation": False},
    )
    asyncio.run(Agent(client=client, tools=[tool], middleware=guard.middleware).run("go"))
    assert guard.calls[-1].outcome == "InDoubt" and ran == []
    assert "holds no record" in guard.calls[-1].result
    assert controller.proposals == 1  # the retry used no proposal slot


def _replan(*arguments: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replan", *map(str, arguments)],
        capture_output=True,
        text=True,
        check=False,
    )


def _foreign_log(path: Path) -> None:
    """A run log whose header (and witness) name another declaration digest."""
    with SqliteRunLog(path) as log:
        LoggedController(log=log).cancel()
    with sqlite3.connect(path) as connection:
        (text,) = connection.execute("SELECT header FROM replan_run_header").fetchone()
        header = json.loads(text) | {"declaration_digest": "sha256:" + "0" * 64}
        other = json.dumps(header, sort_keys=True, separators=(",", ":"))
        connection.execute("UPDATE replan_run_header SET header = ?", (other,))
    witness = path.with_name(path.name + ".head")
    document = json.loads(witness.read_text()) | {
        "header": hashlib.sha256(other.encode()).hexdigest()
    }
    witness.write_text(json.dumps(document))


def _edited_entry(path: Path) -> None:
    """A run log whose one entry names a call no declaration has, its chain and
    witness made to match (so it is no damage: a log another program wrote)."""
    with SqliteRunLog(path) as log:
        LoggedController(log=log).cancel()
    with sqlite3.connect(path) as connection:
        (entry,) = connection.execute(
            "SELECT position, op, argument, answer FROM replan_run_log"
        ).fetchall()
        chain = chain_after(GENESIS, Entry(entry[0], "cancel!", entry[2], entry[3]))
        connection.execute(
            "UPDATE replan_run_log SET op = 'cancel!', chain = ? WHERE position = 1", (chain,)
        )
    witness = path.with_name(path.name + ".head")
    witness.write_text(json.dumps({**json.loads(witness.read_text()), "chain": chain}))


@pytest.mark.parametrize(
    ("make", "says"),
    [(_foreign_log, "written under declaration"), (_edited_entry, "position 1")],
)
@pytest.mark.parametrize("command", ["conform", "check-trace"])
def test_conform_and_check_trace_refuse_a_foreign_or_unknown_call_log_in_one_line(
    tmp_path: Path, make: object, says: str, command: str
) -> None:
    path = tmp_path / "run.log"
    make(path)  # type: ignore[operator]
    before = files(tmp_path)
    done = _replan(command, path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and says in done.stderr
    assert files(tmp_path) == before


def test_replan_boundary_replays_no_file_that_is_not_a_counterexample(tmp_path: Path) -> None:
    for document in ("not json", json.dumps({"tool": "replan campaign"}), json.dumps([])):
        path = tmp_path / "counterexample.json"
        path.write_text(document)
        before = files(tmp_path)
        done = _replan("boundary", "--replay", path)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
        assert files(tmp_path) == before
