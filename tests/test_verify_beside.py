"""`replan verify --workers auto` on two cores: the campaign and the boundary check run
in one process of their own beside the explorer, and the report is the one a run in a
single process writes; their failures are the checks' own; a stopped run stops them."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from replan.controller.policy import DEFAULT_POLICY
from replan.verification.pipeline import estimate
from replan.verification.pipeline.options import VerifyOptions
from replan.verification.pipeline.run import verify
from replan.verification.pipeline.session import VerifySession
from replan.verification.report.records import CheckResult
from replan.verification.runtime import files
from replan.verification.runtime.beside import Beside, BesideError

ROOT = Path(__file__).resolve().parent.parent


def test_checks_run_beside_the_explorer_write_the_report_one_process_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The committed evidence/verify.json is `replan evidence`'s: every check in one
    process (the library's default, one worker). The same run with the campaign and
    the boundary check beside the explorer writes the same document."""
    monkeypatch.setattr(estimate, "usable_cores", lambda: 2)  # as on the 2-core CI machine
    said: list[str] = []
    options = VerifyOptions(deterministic=True, workers=None)
    report = verify(DEFAULT_POLICY, tmp_path, options, progress=said.append)

    assert "campaign and boundary: started beside the explorer, in one process" in said
    assert report.ok
    written = json.loads((tmp_path / "verify.json").read_text(encoding="utf-8"))
    committed = json.loads((ROOT / "evidence" / "verify.json").read_text(encoding="utf-8"))
    for ran_beside, ran_alone in zip(written["checks"], committed["checks"], strict=True):
        assert ran_beside == ran_alone, ran_beside["name"]
    assert written == committed
    # the work done in the other process is still the check's time in the report
    assert next(c for c in report.checks if c.name == "campaign").seconds > 1.0


def test_one_process_is_kept_when_the_explorer_is_sharded_or_one_worker_is_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(estimate, "usable_cores", lambda: 2)
    assert estimate.beside_explorer(None, None)
    assert not estimate.beside_explorer(None, "bounds larger than the default policy's")
    assert not estimate.beside_explorer(1, None)
    assert not estimate.beside_explorer(2, None)
    monkeypatch.setattr(estimate, "usable_cores", lambda: 1)
    assert not estimate.beside_explorer(None, None)


def _check(session: VerifySession, name: str) -> CheckResult:
    value = session.outcome(name, lambda: "computed here")
    return CheckResult(name, "passed", f"answered {value}")


def test_a_check_that_raises_beside_is_reported_as_its_own_error(tmp_path: Path) -> None:
    session = VerifySession(DEFAULT_POLICY, tmp_path, progress=lambda _: None)
    assert session.start_beside({"campaign": lambda: 1 / 0, "boundary": lambda: "there"})

    failed = session.run(5, "campaign", lambda: _check(session, "campaign"))
    passed = session.run(8, "boundary", lambda: _check(session, "boundary"))
    inline = session.run(9, "episode", lambda: _check(session, "episode"))

    assert (failed.status, failed.summary) == ("error", "ZeroDivisionError: division by zero")
    assert "1 / 0" in failed.details["traceback"]  # where it was raised, in the other process
    assert (passed.status, passed.summary) == ("passed", "answered there")
    assert inline.summary == "answered computed here"


def test_a_process_that_dies_is_an_error_naming_its_exit_code() -> None:
    beside = Beside({"campaign": lambda: os._exit(3)})
    with pytest.raises(BesideError, match=r"died before answering \(exit code 3\)"):
        beside.collect("campaign")


def test_an_answer_that_cannot_be_sent_back_is_an_error_saying_so() -> None:
    beside = Beside({"campaign": lambda: lambda: "a function", "boundary": lambda: "sent"})
    with pytest.raises(BesideError, match="its answer could not be sent back: "):
        beside.collect("campaign")
    assert beside.collect("boundary")[0] == "sent"


def test_a_large_answer_not_yet_read_does_not_hold_back_the_next_call() -> None:
    beside = Beside({"large": lambda: b"x" * 4_000_000, "next": time.monotonic})
    time.sleep(1.0)  # the parent busy with its own check, the pipe unread
    collecting = time.monotonic()
    assert len(beside.collect("large")[0]) == 4_000_000
    started, _ = beside.collect("next")
    assert started < collecting


def test_the_files_written_beside_are_this_process_s_writes_held_with_the_rest(
    tmp_path: Path,
) -> None:
    """A command holds its writes until it has finished (all or none): a file a check
    writes in the other process joins them, and its announcement waits with them."""
    target = tmp_path / "counterexamples" / "found.json"

    def check_writing_a_file() -> str:
        files.write_atomically(target, "{}")
        files.announce(f"wrote {target}")
        return "found"

    with files.held() as held:
        beside = Beside({"campaign": check_writing_a_file})
        assert beside.collect("campaign")[0] == "found"
        assert not target.exists()
        assert held.paths == [target.absolute()]
        assert held.announcements == [f"wrote {target}"]
        held.commit()
    assert target.read_text() == "{}"


def test_cancelling_stops_the_work_that_no_check_collected(tmp_path: Path) -> None:
    session = VerifySession(DEFAULT_POLICY, tmp_path, progress=lambda _: None)
    assert session.start_beside({"campaign": lambda: time.sleep(60)})
    process = session.beside._process  # type: ignore[union-attr]
    assert process.is_alive()
    session.cancel_beside()
    assert not process.is_alive() and session.beside is None
