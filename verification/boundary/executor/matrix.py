"""The executor's mutation matrix: every named check run against the real executor
stack and against every mutant in ``verification.boundary.executor.mutants``.

A check is a plain function ``(subject, scratch) -> None`` that raises (usually an
``AssertionError``) when the subject breaks a promise of the executor. The matrix is
mutant x check: which checks fail ("kill") each mutant. It holds when every check
passes on the real stack (a check that fails there proves nothing) and every mutant is
killed by at least one check. A mutant no check kills is a *survivor*, and
``replan mutants`` exits 1 naming it: so deleting ("reverting") the checks that kill a
mutant makes the command fail, which ``--without CHECK`` shows without editing code.

The checks use only the public API: ``Executor``, ``Grant``, ``Operation``, the
journals, ``perform`` and a real ``controller.Controller``; the crash check starts and
SIGKILLs real processes; the campaign check runs the Hypothesis executor machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from replan.controller import Controller, EvidenceState, ExecuteResult, Observation, Plan
from replan.controller.executor import Grant, Operation, Outcome
from replan.controller.journal import JournalError, JSONValue
from replan.verification.boundary.executor.mutants import MUTANTS, REAL, Subject

GRANT = Grant(resources=["input-A"], steps=["inspect-parser", "inspect-access", "commit-import"])
#: Examples per campaign run in the matrix (derandomized, so the matrix is repeatable).
CAMPAIGN_EXAMPLES = 100


class CountingEffect:
    """An effect that counts its calls and returns ``{"rows": ..., "call": n}``; told
    to, it raises instead (after counting)."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[str] = []
        self.fail = fail

    def __call__(self, operation: Operation) -> JSONValue:
        self.calls.append(operation.plan_id)
        if self.fail:
            raise RuntimeError(f"effect of {operation.plan_id} failed")
        return {"rows": operation.arguments.get("rows"), "call": len(self.calls)}

    @property
    def count(self) -> int:
        return len(self.calls)


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def _memory_executor(subject: Subject) -> Any:
    return subject.executor(subject.memory_journal())


# ---- the checks ----------------------------------------------------------------------------


def granted_operation_executes(subject: Subject, scratch: Path) -> None:
    """A granted operation runs its effect once and answers Executed with a receipt
    (digest, the effect's result, time) that the journal holds."""
    executor = _memory_executor(subject)
    effect = CountingEffect()
    operation = Operation("p1", "commit-import", "input-A", {"rows": 3})
    answer = executor.run(operation, GRANT, effect)
    _expect(answer.outcome is Outcome.EXECUTED, f"answered {answer.outcome}, not Executed")
    _expect(effect.count == 1, f"effect called {effect.count} times, not once")
    receipt = answer.receipt
    _expect(receipt is not None and receipt.digest == operation.digest(), "no receipt for it")
    _expect(receipt is not None and receipt.result == {"rows": 3, "call": 1}, "wrong result")
    _expect(executor.receipts() == [receipt], "the journal does not hold the receipt")


def ungranted_resource_denied(subject: Subject, scratch: Path) -> None:
    """An operation on a resource the owner did not grant is Denied; no effect, no
    record."""
    executor = _memory_executor(subject)
    effect = CountingEffect()
    answer = executor.run(Operation("p1", "commit-import", "input-B", {}), GRANT, effect)
    _expect(answer.outcome is Outcome.DENIED, f"answered {answer.outcome}, not Denied")
    _expect(effect.count == 0, f"effect called {effect.count} times")
    _expect(executor.journal.records() == [], "a denied operation was recorded")


def ungranted_step_denied(subject: Subject, scratch: Path) -> None:
    """A step the owner did not grant is Denied even on a granted resource."""
    executor = _memory_executor(subject)
    effect = CountingEffect()
    narrow = Grant(resources=["input-A"], steps=["inspect-parser"])
    answer = executor.run(Operation("p1", "commit-import", "input-A", {}), narrow, effect)
    _expect(answer.outcome is Outcome.DENIED, f"answered {answer.outcome}, not Denied")
    _expect(effect.count == 0, f"effect called {effect.count} times")


def changed_content_refused(subject: Subject, scratch: Path) -> None:
    """The same plan id with other arguments, or another step, is a ContentMismatch:
    the effect does not run and the recorded digest stays the first one."""
    executor = _memory_executor(subject)
    effect = CountingEffect()
    first = Operation("p1", "inspect-parser", "input-A", {"rows": 1})
    executor.run(first, GRANT, effect)
    for changed in (
        Operation("p1", "inspect-parser", "input-A", {"rows": 2}),
        Operation("p1", "inspect-access", "input-A", {"rows": 1}),
    ):
        answer = executor.run(changed, GRANT, effect)
        _expect(
            answer.outcome is Outcome.CONTENT_MISMATCH,
            f"changed content answered {answer.outcome}, not ContentMismatch",
        )
        _expect(answer.recorded == first.digest(), "the mismatch does not name the bound digest")
    _expect(effect.count == 1, f"effect called {effect.count} times, not once")


def completed_operation_replays(subject: Subject, scratch: Path) -> None:
    """Asking again for a completed operation (same executor, or a new one over the
    same journal) answers Replayed with the stored receipt; the effect is not called."""
    executor = _memory_executor(subject)
    effect = CountingEffect()
    operation = Operation("p1", "commit-import", "input-A", {"rows": 3})
    first = executor.run(operation, GRANT, effect)
    for again in (executor, subject.executor(executor.journal)):
        answer = again.run(operation, GRANT, effect)
        _expect(answer.outcome is Outcome.REPLAYED, f"answered {answer.outcome}, not Replayed")
        _expect(answer.receipt == first.receipt, "the replay's receipt is not the stored one")
    _expect(effect.count == 1, f"effect called {effect.count} times, not once")


def failed_effect_in_doubt(subject: Subject, scratch: Path) -> None:
    """An effect that raises leaves an intent without a receipt: the error reaches the
    host, and every later request answers InDoubt with the digest, never reruns it and
    never reports it done."""
    executor = _memory_executor(subject)
    failing = CountingEffect(fail=True)
    operation = Operation("p1", "commit-import", "input-A", {"rows": 3})
    try:
        executor.run(operation, GRANT, failing)
    except RuntimeError:
        pass
    else:
        raise AssertionError("the effect's error did not reach the host")
    effect = CountingEffect()
    for _ in range(2):
        answer = executor.run(operation, GRANT, effect)
        _expect(answer.outcome is Outcome.IN_DOUBT, f"answered {answer.outcome}, not InDoubt")
        _expect(answer.recorded == operation.digest(), "the in-doubt answer lacks the digest")
    _expect(effect.count == 0, f"an in-doubt operation ran its effect {effect.count} times")
    _expect(
        [intent.digest for intent in executor.in_doubt()] == [operation.digest()],
        "in_doubt() does not list the operation",
    )
    _expect(executor.receipts() == [], "an effect that failed has a receipt")


def owner_resolves_in_doubt(subject: Subject, scratch: Path) -> None:
    """The owner settles an in-doubt operation: ``resolve`` records the receipt (later
    requests replay it), ``abandon`` frees the plan id (the next request runs once)."""
    executor = _memory_executor(subject)
    failing = CountingEffect(fail=True)
    done = Operation("p1", "commit-import", "input-A", {"rows": 1})
    lost = Operation("p2", "commit-import", "input-A", {"rows": 2})
    for operation in (done, lost):
        with contextlib.suppress(RuntimeError):
            executor.run(operation, GRANT, failing)
    receipt = executor.resolve("p1", {"rows": 1, "checked": True})
    effect = CountingEffect()
    answer = executor.run(done, GRANT, effect)
    _expect(answer.outcome is Outcome.REPLAYED, f"resolved answered {answer.outcome}")
    _expect(answer.receipt == receipt, "the resolved receipt is not replayed")
    executor.abandon("p2")
    answer = executor.run(lost, GRANT, effect)
    _expect(answer.outcome is Outcome.EXECUTED, f"abandoned answered {answer.outcome}")
    _expect(effect.count == 1, f"effect called {effect.count} times, not once")


def sqlite_receipts_survive_reopen(subject: Subject, scratch: Path) -> None:
    """On the SQLite journal, receipts and in-doubt intents survive closing and
    reopening the file, and a reopened journal replays without rerunning."""
    path = scratch / "journal.db"
    effect = CountingEffect()
    done = Operation("p1", "commit-import", "input-A", {"rows": 3})
    doubtful = Operation("p2", "inspect-parser", "input-A", {"rows": 1})
    journal = subject.sqlite_journal.create(path)
    try:
        executor = subject.executor(journal)
        first = executor.run(done, GRANT, effect)
        with contextlib.suppress(RuntimeError):
            executor.run(doubtful, GRANT, CountingEffect(fail=True))
        records = journal.records()
    finally:
        journal.close()
    journal = subject.sqlite_journal(path)
    try:
        executor = subject.executor(journal)
        _expect(journal.records() == records, "records changed across reopening")
        answer = executor.run(done, GRANT, effect)
        _expect(answer.outcome is Outcome.REPLAYED, f"reopened answered {answer.outcome}")
        _expect(answer.receipt == first.receipt, "the reopened receipt is not the stored one")
        answer = executor.run(doubtful, GRANT, effect)
        _expect(answer.outcome is Outcome.IN_DOUBT, f"reopened in-doubt: {answer.outcome}")
        _expect(effect.count == 1, f"effect called {effect.count} times, not once")
    finally:
        journal.close()


def _digest_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def unusable_file_refused(subject: Subject, scratch: Path) -> None:
    """A file that is not a replan journal (another application's SQLite database,
    random bytes, a truncated or corrupted journal) is refused with JournalError and
    left byte for byte as it was."""
    foreign = scratch / "foreign.db"
    connection = sqlite3.connect(foreign)
    connection.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    connection.execute("INSERT INTO invoices (total) VALUES (12.5)")
    connection.commit()
    connection.close()
    garbage = scratch / "garbage.db"
    garbage.write_bytes(bytes(range(256)) * 32)
    own = scratch / "own.db"
    journal = REAL.sqlite_journal.create(own)
    operation = Operation("p1", "inspect-parser", "input-A")
    REAL.executor(journal).run(operation, GRANT, CountingEffect())
    journal.close()
    data = own.read_bytes()
    truncated = scratch / "truncated.db"
    truncated.write_bytes(data[: len(data) // 2])
    corrupted = scratch / "corrupted.db"
    page = 4096  # the records table's root page: its b-tree header overwritten
    corrupted.write_bytes(data[:page] + b"\xff" * 12 + data[page + 12 :])
    for path in (foreign, garbage, truncated, corrupted):
        before = _digest_of(path)
        try:
            opened = subject.sqlite_journal(path)
        except JournalError:
            pass
        except Exception as error:
            raise AssertionError(f"{path.name}: refused with {error!r}, not JournalError") from None
        else:
            opened.close()
            raise AssertionError(f"{path.name}: opened instead of refused")
        _expect(_digest_of(path) == before, f"{path.name}: changed by the refused open")
        stray = [name for name in os.listdir(scratch) if name.startswith(path.name + "-")]
        _expect(not stray, f"{path.name}: left {stray} behind")


def kill_at_every_point(subject: Subject, scratch: Path) -> None:
    """Real processes on a SQLite journal, SIGKILLed before the intent, between intent
    and effect, between effect and completion, after completion: see
    ``verification.boundary.executor.crash``."""
    from replan.verification.boundary.executor.crash import crash_problems

    problems = crash_problems(scratch, subject.name)
    _expect(not problems, "; ".join(problems[:3]))


def crash_faults_fail_closed(subject: Subject, scratch: Path) -> None:
    """After each kill, the files damaged as a disk or a person may (the -journal
    deleted, truncated or bit-flipped, the journal truncated or bit-flipped, its
    directory deleted): the journal opens and keeps every promise, or is refused with
    its files unchanged; never an effect run twice, never a receipt lost silently."""
    from replan.verification.boundary.executor.crash import fault_matrix_problems

    problems = fault_matrix_problems(scratch, subject.name)
    _expect(not problems, "; ".join(problems[:3]))


def executor_campaign(subject: Subject, scratch: Path) -> None:
    """The Hypothesis executor machine (grants, changed arguments, replays, crashes)
    against the executor invariants."""
    from replan.verification.boundary.executor.campaign import run_executor_campaign

    result = run_executor_campaign(subject, examples=CAMPAIGN_EXAMPLES, shrink=False)
    _expect(result.failure is None, str(result.failure))


def _ready_controller() -> Controller:
    controller = Controller()
    controller.observe(Observation("parser", 1, EvidenceState.PASSED, "ci"))
    controller.observe(Observation("access", 1, EvidenceState.PASSED, "ci"))
    return controller


def perform_refuses_first(subject: Subject, scratch: Path) -> None:
    """``perform`` checks the grant and the content before it asks the controller, so
    a refused operation uses no step and leaves the plan pending."""
    perform = subject.perform
    effect = CountingEffect()
    controller = _ready_controller()
    executor = _memory_executor(subject)
    plan = Plan("p1", 1, controller.evidence_revision, "commit-import", "input-A")
    controller.propose(plan)
    narrow = Grant(resources=["input-A"], steps=["inspect-parser"])
    done = perform(controller, executor, Operation.for_plan(plan), narrow, effect)
    _expect(done.outcome is Outcome.DENIED, f"a denied operation: {done.outcome}")
    _expect(controller.steps == 0 and controller.pending == plan, "a denial used a step")
    other = Operation("p1", "inspect-parser", "input-A", {})
    done = perform(controller, executor, other, GRANT, effect)
    _expect(done.outcome is Outcome.CONTENT_MISMATCH, f"another step: {done.outcome}")
    _expect(controller.steps == 0 and controller.pending == plan, "a mismatch used a step")
    _expect(effect.count == 0, f"effect called {effect.count} times")


def perform_runs_only_approved(subject: Subject, scratch: Path) -> None:
    """Only the controller's Executed reaches the effect (once); its Replayed is
    answered with the stored receipt and the effect is not called again; any other
    answer (here PreconditionDenied) reaches nothing."""
    perform = subject.perform
    effect = CountingEffect()
    executor = _memory_executor(subject)
    unready = Controller()
    plan = Plan("q1", 1, unready.evidence_revision, "commit-import", "input-A")
    unready.propose(plan)
    done = perform(unready, executor, Operation.for_plan(plan), GRANT, effect)
    _expect(done.answer == ExecuteResult.PRECONDITION_DENIED, f"unready: {done.answer}")
    _expect(done.execution is None and effect.count == 0, "an unapproved operation ran")
    controller = _ready_controller()
    plan = Plan("p1", 1, controller.evidence_revision, "commit-import", "input-A")
    controller.propose(plan)
    approved = Operation.for_plan(plan, {"rows": 3})
    done = perform(controller, executor, approved, GRANT, effect)
    _expect(done.answer == ExecuteResult.EXECUTED, f"approved: {done.answer}")
    _expect(done.outcome is Outcome.EXECUTED and effect.count == 1, "approved did not run once")
    again = perform(controller, executor, approved, GRANT, effect)
    _expect(again.answer == ExecuteResult.REPLAYED, f"again: controller {again.answer}")
    _expect(again.outcome is Outcome.REPLAYED, f"again: executor {again.outcome}")
    _expect(again.receipt == done.receipt and effect.count == 1, "the replay reran the effect")


class Check(NamedTuple):
    name: str
    description: str
    run: Callable[[Subject, Path], None]


def _check(function: Callable[[Subject, Path], None]) -> Check:
    summary = " ".join((function.__doc__ or "").split())
    return Check(function.__name__.replace("_", "-"), summary, function)


#: Every killing check, by name (the name is the function's, dashed).
CHECKS: dict[str, Check] = {
    check.name: check
    for check in map(
        _check,
        (
            granted_operation_executes,
            ungranted_resource_denied,
            ungranted_step_denied,
            changed_content_refused,
            completed_operation_replays,
            failed_effect_in_doubt,
            owner_resolves_in_doubt,
            sqlite_receipts_survive_reopen,
            unusable_file_refused,
            kill_at_every_point,
            crash_faults_fail_closed,
            executor_campaign,
            perform_refuses_first,
            perform_runs_only_approved,
        ),
    )
}


# ---- the matrix ------------------------------------------------------------------------------


def run_check(check: Check, subject: Subject) -> str | None:
    """None if ``check`` passes on ``subject``; else one line saying how it failed
    (scratch paths replaced, so the line is the same on every machine)."""
    with tempfile.TemporaryDirectory(prefix="replan-check-") as directory:
        try:
            check.run(subject, Path(directory))
        except Exception as error:
            text = str(error) if isinstance(error, AssertionError) else repr(error)
            line = " ".join(text.replace(directory, "<scratch>").split())
            return line[:300] or type(error).__name__
    return None


@dataclass
class Matrix:
    """The outcome of every check on the real stack and on each mutant."""

    checks: list[Check]
    mutants: list[Subject]
    baseline: dict[str, str | None] = field(default_factory=dict)
    cells: dict[str, dict[str, str | None]] = field(default_factory=dict)

    def killers(self, mutant: str) -> list[str]:
        return [check for check, failure in self.cells[mutant].items() if failure is not None]

    @property
    def survivors(self) -> list[str]:
        return [mutant.name for mutant in self.mutants if not self.killers(mutant.name)]

    @property
    def baseline_failures(self) -> dict[str, str]:
        return {check: failure for check, failure in self.baseline.items() if failure is not None}

    @property
    def holds(self) -> bool:
        return not self.survivors and not self.baseline_failures

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": "replan mutants",
            "holds": self.holds,
            "summary": {
                "mutants": len(self.mutants),
                "killed": len(self.mutants) - len(self.survivors),
                "survivors": self.survivors,
                "checks": len(self.checks),
                "baseline_failures": self.baseline_failures,
                "campaign_examples": CAMPAIGN_EXAMPLES,
            },
            "checks": [{"name": c.name, "description": c.description} for c in self.checks],
            "mutants": [
                {
                    "name": mutant.name,
                    "description": mutant.description,
                    "killed": bool(self.killers(mutant.name)),
                    "killed_by": {
                        check: failure
                        for check, failure in self.cells[mutant.name].items()
                        if failure is not None
                    },
                }
                for mutant in self.mutants
            ],
            "matrix": {
                mutant.name: {
                    check: failure is not None for check, failure in self.cells[mutant.name].items()
                }
                for mutant in self.mutants
            },
        }


def run_matrix(
    mutants: Sequence[Subject] | None = None,
    checks: Iterable[Check] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Matrix:
    """Run every check on the real stack, then on every mutant (all checks each, so
    the matrix shows every killer, not only the first)."""
    chosen_checks = list(CHECKS.values() if checks is None else checks)
    chosen_mutants = list(MUTANTS.values() if mutants is None else mutants)
    matrix = Matrix(chosen_checks, chosen_mutants)
    if progress is not None:
        progress(REAL.name)
    for check in chosen_checks:
        if check.name not in _baseline:
            _baseline[check.name] = run_check(check, REAL)
    matrix.baseline = {check.name: _baseline[check.name] for check in chosen_checks}
    for subject in chosen_mutants:
        if progress is not None:
            progress(subject.name)
        matrix.cells[subject.name] = {
            check.name: run_check(check, subject) for check in chosen_checks
        }
    return matrix


# A check's verdict on the real stack, once per process (the checks are deterministic:
# the campaign is derandomized, the crash harness stops children at fixed points).
_baseline: dict[str, str | None] = {}
