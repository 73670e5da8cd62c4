"""Crash safety tested for real: a child process works against a SQLite journal and is
killed with SIGKILL at a chosen point; the parent reopens the journal and checks what
survived.

The five kill points are the edges of the executor's two records:

- ``before-intent``: two earlier operations completed; the target has not started.
- ``between-intent-and-effect``: the target's intent is recorded; its effect has not run.
- ``between-effect-and-completion``: the effect ran (its trace line is on disk); no receipt.
- ``inside-completion-write``: the completion is written in a transaction not yet
  committed (SQLite's ``-journal`` is beside the file).
- ``after-completion``: the receipt is recorded.

Then the faults (``FAULTS``): what a crash, a disk or a person may do to the files
before the restart: the ``-journal`` deleted, truncated or bit-flipped, the journal
truncated to nothing or one bit of it flipped, its directory deleted. After each, the
journal either opens and keeps every promise above, or is refused with every file
left as it was; never an effect run twice, never a receipt lost silently.

How the kill is made deterministic: the child is told the point on its command line;
at that point it writes a marker file and sleeps; the parent waits for the marker and
sends SIGKILL. Nothing in the child runs after the signal (no ``finally``, no
``atexit``, no SQLite close), exactly as in a real crash.

After the kill the parent reopens the journal with a fresh executor and checks:
every receipt the child reported is there unchanged (nothing recorded is lost); every
completed operation replays its receipt and its effect is not rerun (each effect
appends a line to a trace file, so a rerun is visible); an intent without completion
is answered ``InDoubt`` with its digest, and asking again does not run it; an
operation that never started runs once.

Run the child by hand: ``python -m verification.boundary.executor.crash DIR POINT [SUBJECT]``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from replan.controller.executor import Grant, Operation, Outcome
from replan.controller.journal import JournalError, JSONValue, Receipt, Record, RecordKind
from replan.controller.sqlite_journal import SqliteJournal, sidecars
from replan.verification.boundary.executor.mutants import SUBJECTS, Subject

KILL_POINTS = (
    "before-intent",
    "between-intent-and-effect",
    "between-effect-and-completion",
    "inside-completion-write",
    "after-completion",
)
#: The kill points at which the target's effect ran and no receipt was committed.
IN_DOUBT_POINTS = (
    "between-intent-and-effect",
    "between-effect-and-completion",
    "inside-completion-write",
)

GRANT = Grant(resources=["input-A"], steps=["inspect-parser", "inspect-access", "commit-import"])
EARLIER = (
    Operation("p1", "inspect-parser", "input-A", {"rows": 1}),
    Operation("p2", "inspect-access", "input-A", {"rows": 2}),
)
TARGET = Operation("p3", "commit-import", "input-A", {"rows": 3})

#: In a directory of its own, so a fault can delete the journal's directory alone.
JOURNAL_FILE = "journal/journal.db"
TRACE_FILE = "effects.log"
REPORT_FILE = "receipts.jsonl"
MARKER_FILE = "reached"


def _append_durably(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _effect_lines(directory: Path) -> list[str]:
    trace = directory / TRACE_FILE
    if not trace.exists():
        return []
    return [line.split()[0] for line in trace.read_text(encoding="utf-8").splitlines()]


def _result(operation: Operation) -> JSONValue:
    return {"imported": operation.plan_id, "rows": operation.arguments["rows"]}


# ---- the child --------------------------------------------------------------------------


def _stopping_inside_the_completion(
    journal_class: type[SqliteJournal], stop: Callable[[], None]
) -> type[SqliteJournal]:
    """``journal_class`` that stops (for the kill) right after writing the target's
    completion record, inside its transaction, before the commit."""

    class StopsInsideTheCompletion(journal_class):  # type: ignore[valid-type,misc]
        __slots__ = ()

        def _append(
            self, kind: RecordKind, plan_id: str, digest: str, body: str, time: float
        ) -> None:
            super()._append(kind, plan_id, digest, body, time)
            if kind is RecordKind.COMPLETION and plan_id == TARGET.plan_id:
                stop()

    return StopsInsideTheCompletion


def child(directory: Path, point: str, subject: Subject) -> None:
    """Run the earlier operations and the target, stopping (marker, then sleep) at
    ``point`` so the parent can kill this process there."""

    def stop_here() -> None:
        _append_durably(directory / MARKER_FILE, point)
        time.sleep(60)
        os._exit(4)  # the parent should have killed us long before

    def effect(operation: Operation) -> JSONValue:
        target = operation.plan_id == TARGET.plan_id
        if target and point == "between-intent-and-effect":
            stop_here()
        _append_durably(directory / TRACE_FILE, f"{operation.plan_id} {operation.digest()}")
        if target and point == "between-effect-and-completion":
            stop_here()
        return _result(operation)

    journal_class: type[SqliteJournal] = subject.sqlite_journal
    if point == "inside-completion-write":
        journal_class = _stopping_inside_the_completion(journal_class, stop_here)
    (directory / JOURNAL_FILE).parent.mkdir(exist_ok=True)
    executor = subject.executor(journal_class.create(directory / JOURNAL_FILE))
    for operation in (*EARLIER, TARGET):
        if operation is TARGET and point == "before-intent":
            stop_here()
        answer = executor.run(operation, GRANT, effect)
        if answer.receipt is not None:
            _append_durably(directory / REPORT_FILE, json.dumps(answer.receipt._asdict()))
    if point == "after-completion":
        stop_here()
    os._exit(3)  # not a kill point: the parent reports a child that ran through


def start_child(directory: Path, point: str, subject: str = "real") -> subprocess.Popen[bytes]:
    """Start the child that will stop at ``point`` in ``directory``."""
    if point not in KILL_POINTS:
        raise ValueError(f"unknown kill point {point!r}; the points are {', '.join(KILL_POINTS)}")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "replan.verification.boundary.executor.crash",
            str(directory),
            point,
            subject,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def kill_at_point(
    process: subprocess.Popen[bytes], directory: Path, point: str, timeout: float = 30.0
) -> str:
    """Wait for the child to reach its point, then SIGKILL it. Returns "" on success,
    else what went wrong (the child ended early, or never reached the point)."""
    marker = directory / MARKER_FILE
    deadline = time.monotonic() + timeout
    try:
        while not marker.exists():
            if process.poll() is not None:
                error = (process.stderr.read() if process.stderr else b"").decode(errors="replace")
                last = error.strip().splitlines()[-1:] or [""]
                return f"{point}: child exited with {process.returncode} first: {last[0]}"
            if time.monotonic() > deadline:
                return f"{point}: child did not reach the point within {timeout:.0f} s"
            time.sleep(0.005)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout)
        if process.returncode != -signal.SIGKILL:
            return f"{point}: child ended with {process.returncode}, not by SIGKILL"
        return ""
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stderr:
            process.stderr.close()


def crash_child_at(directory: Path, point: str, subject: str = "real") -> str:
    """Run the child in ``directory`` and SIGKILL it at ``point`` ("" on success)."""
    return kill_at_point(start_child(directory, point, subject), directory, point)


# ---- the parent's checks after the kill ---------------------------------------------------


def recovery_problems(directory: Path, point: str, subject: Subject) -> list[str]:
    """Reopen the journal the killed child left and list every broken promise.

    Long: one checklist of what the journal promises after a kill, in the order a
    reader checks it; each item is a few lines."""
    problems: list[str] = []
    report = directory / REPORT_FILE
    lines = report.read_text(encoding="utf-8").splitlines() if report.exists() else []
    reported = [Receipt(**json.loads(line)) for line in lines]
    try:
        journal = subject.sqlite_journal(directory / JOURNAL_FILE)
    except JournalError as error:
        return [f"{point}: the journal does not reopen: {str(error).split(': ', 1)[-1]}"]
    calls: list[str] = []

    def effect(operation: Operation) -> JSONValue:
        calls.append(operation.plan_id)
        _append_durably(directory / TRACE_FILE, f"{operation.plan_id} {operation.digest()}")
        return _result(operation)

    try:
        executor = subject.executor(journal)
        stored = {receipt.plan_id: receipt for receipt in executor.receipts()}
        for receipt in reported:
            if stored.get(receipt.plan_id) != receipt:
                problems.append(f"{point}: the receipt of {receipt.plan_id} was lost or changed")
        for operation in EARLIER:
            answer = executor.run(operation, GRANT, effect)
            if answer.outcome is not Outcome.REPLAYED:
                problems.append(
                    f"{point}: completed {operation.plan_id} answered {answer.outcome}, "
                    "not Replayed"
                )
        target_started = point != "before-intent"
        in_doubt = point in IN_DOUBT_POINTS
        doubted = {intent.plan_id: intent.digest for intent in executor.in_doubt()}
        if in_doubt and doubted.get(TARGET.plan_id) != TARGET.digest():
            problems.append(f"{point}: the interrupted {TARGET.plan_id} is not listed in doubt")
        if not in_doubt and doubted:
            problems.append(f"{point}: {', '.join(sorted(doubted))} listed in doubt")
        for attempt in (1, 2):
            answer = executor.run(TARGET, GRANT, effect)
            expected = (
                Outcome.IN_DOUBT
                if in_doubt
                else Outcome.REPLAYED
                if target_started or attempt == 2
                else Outcome.EXECUTED
            )
            if answer.outcome is not expected:
                problems.append(
                    f"{point}: {TARGET.plan_id} (attempt {attempt}) answered {answer.outcome}, "
                    f"expected {expected}"
                )
            elif expected is Outcome.IN_DOUBT and answer.recorded != TARGET.digest():
                problems.append(f"{point}: the in-doubt answer does not carry the digest")
        if point == "after-completion" and reported[-1:] != [stored.get(TARGET.plan_id)]:
            problems.append(f"{point}: {TARGET.plan_id}'s receipt is not the one reported")
    finally:
        journal.close()
    effects = _effect_lines(directory)
    expected_target = 0 if point in ("between-intent-and-effect",) else 1
    for plan_id, runs in (("p1", 1), ("p2", 1), (TARGET.plan_id, expected_target)):
        if effects.count(plan_id) != runs:
            problems.append(
                f"{point}: the effect of {plan_id} ran {effects.count(plan_id)} times, "
                f"expected {runs}"
            )
    return problems


def crash_problems(directory: Path, subject: str = "real") -> list[str]:
    """Kill a child at every point (one sub-directory each; the four children run at
    the same time) and check each recovery."""
    children = []
    for point in KILL_POINTS:
        where = directory / point
        where.mkdir(parents=True, exist_ok=False)
        children.append((point, where, start_child(where, point, subject)))
    problems: list[str] = []
    for point, where, process in children:
        failure = kill_at_point(process, where, point)
        if failure:
            problems.append(failure)
        else:
            problems.extend(recovery_problems(where, point, SUBJECTS[subject]))
    return problems


# ---- faults on the files, after the kill and before the restart ---------------------------


def _flip_a_bit(path: Path, seed: int) -> None:
    data = bytearray(path.read_bytes())
    if data:
        position = random.Random(seed).randrange(len(data) * 8)
        data[position // 8] ^= 1 << (position % 8)
        path.write_bytes(bytes(data))


def _each_sidecar(change: Callable[[Path, int], None]) -> Callable[[Path, int], None]:
    def fault(directory: Path, seed: int) -> None:
        for sidecar in sidecars(directory / JOURNAL_FILE):
            change(sidecar, seed)

    return fault


#: What may happen to the files before the restart: name -> fault(directory, seed).
FAULTS: dict[str, Callable[[Path, int], None]] = {
    "none": lambda directory, seed: None,
    "sidecar-deleted": _each_sidecar(lambda path, seed: path.unlink()),
    "sidecar-truncated": _each_sidecar(lambda path, seed: path.write_bytes(b"")),
    "sidecar-bit-flipped": _each_sidecar(_flip_a_bit),
    "journal-truncated": lambda directory, seed: (directory / JOURNAL_FILE).write_bytes(b""),
    "journal-bit-flipped": lambda directory, seed: _flip_a_bit(directory / JOURNAL_FILE, seed),
    "directory-deleted": lambda directory, seed: shutil.rmtree((directory / JOURNAL_FILE).parent),
}
#: The faults after which nothing is left to recover from: the journal must be refused.
MUST_REFUSE = frozenset({"journal-truncated", "directory-deleted"})


def _bytes_of(directory: Path) -> dict[str, bytes]:
    folder = (directory / JOURNAL_FILE).parent
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.is_dir() else {}


def fault_problems(
    directory: Path,
    point: str,
    fault: str,
    subject: Subject,
    seed: int = 0,
    records: list[Record] | None = None,
) -> list[str]:
    """Apply ``fault`` to the files a child killed at ``point`` left in ``directory``,
    then restart: a refusal must leave every file as it was (and is required after
    the faults in ``MUST_REFUSE``); a journal that opens must keep every promise of
    ``recovery_problems`` and hold exactly ``records`` (when given: what the journal
    holds without the fault)."""
    where = f"{point}, {fault}" + (f" (seed {seed})" if "flipped" in fault else "")
    FAULTS[fault](directory, seed)
    before = _bytes_of(directory)
    try:
        with subject.sqlite_journal(directory / JOURNAL_FILE) as journal:
            opened = journal.records()
    except JournalError:
        if _bytes_of(directory) != before:
            return [f"{where}: refusing the journal changed its files"]
        return []
    except Exception as error:  # the promise is a JournalError; anything else is a finding
        return [f"{where}: opening raised {type(error).__name__}, not JournalError: {error}"]
    if records is not None and opened != records:
        return [
            f"{where}: the journal opened with other records ({len(opened)}) than the "
            f"{len(records)} it holds"
        ]
    if fault in MUST_REFUSE:
        return [f"{where}: the journal opened instead of being refused (its receipts are gone)"]
    return [f"{where}: {problem}" for problem in recovery_problems(directory, point, subject)]


def fault_matrix_problems(
    directory: Path, subject: str = "real", flips: int = 8, points: tuple[str, ...] = KILL_POINTS
) -> list[str]:
    """Kill a child at every point once, then run every fault on a copy of what each
    kill left (``flips`` seeds for each bit-flip fault)."""
    problems: list[str] = []
    children = []
    for point in points:
        where = directory / "killed" / point
        where.mkdir(parents=True)
        children.append((point, where, start_child(where, point, subject)))
    for point, where, process in children:
        failure = kill_at_point(process, where, point)
        if failure:
            problems.append(failure)
            continue
        pristine = directory / "pristine" / point
        shutil.copytree(where, pristine)
        try:
            with SUBJECTS[subject].sqlite_journal(pristine / JOURNAL_FILE) as journal:
                records: list[Record] | None = journal.records()
        except JournalError:
            records = None  # recovery_problems on "none" reports it
        for fault in FAULTS:
            for seed in range(flips if "flipped" in fault else 1):
                trial = directory / "faults" / point / f"{fault}-{seed}"
                shutil.copytree(where, trial)
                problems += fault_problems(trial, point, fault, SUBJECTS[subject], seed, records)
    return problems


if __name__ == "__main__":
    child(Path(sys.argv[1]), sys.argv[2], SUBJECTS[sys.argv[3] if len(sys.argv) > 3 else "real"])
