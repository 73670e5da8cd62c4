"""The executor's outcomes through its public API, each with the effect's call count:
Executed, Replayed, Denied, ContentMismatch, InDoubt; the owner's resolve/abandon;
the content binding of ``Operation``; and ``perform``, the wiring with the controller.
"""

from __future__ import annotations

from typing import Any

import pytest

from replan.controller import (
    Controller,
    EvidenceState,
    ExecuteResult,
    InvalidInput,
    Observation,
    Plan,
)
from replan.controller.executor import Executor, Grant, Operation, Outcome, perform
from replan.controller.journal import InMemoryJournal, JournalError, RecordKind

GRANT = Grant(resources=["input-A"], steps=["inspect-parser", "inspect-access", "commit-import"])
COMMIT = Operation("p1", "commit-import", "input-A", {"rows": 3, "table": "imports"})


class Effect:
    """Counts its calls; returns what a real import would report, or raises."""

    def __init__(self, error: BaseException | None = None, result: Any = None) -> None:
        self.calls = 0
        self.error = error
        self.result = result

    def __call__(self, operation: Operation) -> Any:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return self.result if self.result is not None else {"imported": operation.arguments}


def ticking() -> Any:
    times = iter(range(1, 1000))
    return lambda: float(next(times))


# ---- the five outcomes -------------------------------------------------------------------


def test_granted_operation_is_executed_once_with_a_receipt() -> None:
    executor = Executor(clock=ticking())
    effect = Effect()
    answer = executor.run(COMMIT, GRANT, effect)
    assert answer.outcome is Outcome.EXECUTED
    assert effect.calls == 1
    assert answer.receipt is not None
    assert answer.receipt.digest == COMMIT.digest() == answer.digest
    assert answer.receipt.result == {"imported": {"rows": 3, "table": "imports"}}
    assert answer.receipt.time == 2.0  # the intent took tick 1, the receipt tick 2
    assert executor.receipts() == [answer.receipt]


def test_completed_operation_is_replayed_without_running_the_effect() -> None:
    executor = Executor()
    effect = Effect()
    first = executor.run(COMMIT, GRANT, effect)
    again = executor.run(
        Operation("p1", "commit-import", "input-A", {"table": "imports", "rows": 3}), GRANT, effect
    )
    assert again.outcome is Outcome.REPLAYED
    assert again.receipt == first.receipt
    assert effect.calls == 1


def test_a_new_executor_over_the_same_journal_replays_too() -> None:
    journal = InMemoryJournal()
    effect = Effect()
    first = Executor(journal).run(COMMIT, GRANT, effect)
    again = Executor(journal).run(COMMIT, GRANT, effect)
    assert (again.outcome, again.receipt, effect.calls) == (Outcome.REPLAYED, first.receipt, 1)


@pytest.mark.parametrize(
    ("operation", "reason"),
    [
        (Operation("p1", "commit-import", "input-B"), "resource 'input-B' is not granted"),
        (Operation("p1", "delete-all", "input-A"), "step 'delete-all' is not granted"),
    ],
)
def test_operation_outside_the_grant_is_denied_and_nothing_is_recorded(
    operation: Operation, reason: str
) -> None:
    executor = Executor()
    effect = Effect()
    answer = executor.run(operation, GRANT, effect)
    assert answer.outcome is Outcome.DENIED
    assert reason in answer.reason
    assert effect.calls == 0
    assert executor.journal.records() == []


def test_a_grant_narrowed_by_the_owner_denies_even_a_completed_operation() -> None:
    executor = Executor()
    effect = Effect()
    executor.run(COMMIT, GRANT, effect)
    answer = executor.run(COMMIT, Grant(resources=["input-A"], steps=[]), effect)
    assert answer.outcome is Outcome.DENIED
    assert effect.calls == 1


@pytest.mark.parametrize(
    "changed",
    [
        Operation("p1", "commit-import", "input-A", {"rows": 4, "table": "imports"}),
        Operation("p1", "commit-import", "input-A", {"rows": 3}),
        Operation("p1", "inspect-parser", "input-A", {"rows": 3, "table": "imports"}),
    ],
    ids=["other-argument-value", "argument-missing", "other-step"],
)
def test_same_plan_id_with_other_content_is_a_content_mismatch(changed: Operation) -> None:
    executor = Executor()
    effect = Effect()
    executor.run(COMMIT, GRANT, effect)
    answer = executor.run(changed, GRANT, effect)
    assert answer.outcome is Outcome.CONTENT_MISMATCH
    assert answer.recorded == COMMIT.digest() != answer.digest
    assert answer.receipt is None
    assert effect.calls == 1


def test_an_effect_that_raises_leaves_the_operation_in_doubt() -> None:
    executor = Executor()
    failing = Effect(error=OSError("disk full"))
    with pytest.raises(OSError, match="disk full"):
        executor.run(COMMIT, GRANT, failing)
    effect = Effect()
    for _ in range(2):
        answer = executor.run(COMMIT, GRANT, effect)
        assert answer.outcome is Outcome.IN_DOUBT
        assert answer.recorded == COMMIT.digest()
        assert answer.receipt is None
    assert (failing.calls, effect.calls) == (1, 0)
    [intent] = executor.in_doubt()
    assert (intent.plan_id, intent.digest, intent.operation) == (
        "p1",
        COMMIT.digest(),
        COMMIT.encoding,
    )
    assert executor.receipts() == []


def test_a_result_json_cannot_carry_leaves_the_operation_in_doubt() -> None:
    executor = Executor()
    effect = Effect(result={"when": object()})
    with pytest.raises(InvalidInput, match=r"result\['when'\]: .* is not JSON"):
        executor.run(COMMIT, GRANT, effect)
    assert executor.run(COMMIT, GRANT, effect).outcome is Outcome.IN_DOUBT
    assert effect.calls == 1


def test_content_mismatch_is_answered_before_in_doubt() -> None:
    executor = Executor()
    with pytest.raises(OSError):
        executor.run(COMMIT, GRANT, Effect(error=OSError()))
    other = Operation("p1", "commit-import", "input-A", {"rows": 99})
    assert executor.run(other, GRANT, Effect()).outcome is Outcome.CONTENT_MISMATCH


# ---- the owner settles what is in doubt ---------------------------------------------------


def test_resolve_records_the_receipt_the_owner_found() -> None:
    executor = Executor()
    with pytest.raises(OSError):
        executor.run(COMMIT, GRANT, Effect(error=OSError()))
    receipt = executor.resolve("p1", {"imported": 3, "checked_by": "owner"})
    effect = Effect()
    answer = executor.run(COMMIT, GRANT, effect)
    assert (answer.outcome, answer.receipt, effect.calls) == (Outcome.REPLAYED, receipt, 0)
    assert executor.in_doubt() == []


def test_abandon_frees_the_plan_id_and_the_next_request_runs_once() -> None:
    executor = Executor()
    with pytest.raises(OSError):
        executor.run(COMMIT, GRANT, Effect(error=OSError()))
    intent = executor.abandon("p1")
    assert intent.digest == COMMIT.digest()
    effect = Effect()
    assert executor.run(COMMIT, GRANT, effect).outcome is Outcome.EXECUTED
    assert executor.run(COMMIT, GRANT, effect).outcome is Outcome.REPLAYED
    assert effect.calls == 1
    kinds = [record.kind for record in executor.journal.records()]
    assert kinds == [
        RecordKind.INTENT,
        RecordKind.ABANDON,
        RecordKind.INTENT,
        RecordKind.COMPLETION,
    ]


def test_only_an_in_doubt_operation_can_be_resolved_or_abandoned() -> None:
    executor = Executor()
    executor.run(COMMIT, GRANT, Effect())
    with pytest.raises(JournalError, match="not in doubt"):
        executor.resolve("p1", None)
    with pytest.raises(JournalError, match="no open intent"):
        executor.abandon("p1")
    with pytest.raises(JournalError, match="not in doubt"):
        executor.resolve("never-seen", None)


# ---- the content binding ----------------------------------------------------------------


def test_digest_binds_content_not_spelling() -> None:
    one = Operation("p1", "commit-import", "input-A", {"a": 1, "b": [1, 2]})
    same = Operation("p1", "commit-import", "input-A", {"b": (1, 2), "a": 1})
    assert one.digest() == same.digest() and one == same
    for other in (
        Operation("p2", "commit-import", "input-A", {"a": 1, "b": [1, 2]}),
        Operation("p1", "inspect-parser", "input-A", {"a": 1, "b": [1, 2]}),
        Operation("p1", "commit-import", "input-B", {"a": 1, "b": [1, 2]}),
        Operation("p1", "commit-import", "input-A", {"a": 1, "b": [2, 1]}),
        Operation("p1", "commit-import", "input-A", {"a": "1", "b": [1, 2]}),
    ):
        assert other.digest() != one.digest()


def test_arguments_cannot_change_after_the_digest_was_taken() -> None:
    arguments: dict[str, Any] = {"rows": [1, 2]}
    operation = Operation("p1", "commit-import", "input-A", arguments)
    digest = operation.digest()
    arguments["rows"].append(3)
    operation.arguments["rows"].append(4)
    assert operation.arguments == {"rows": [1, 2]}
    assert operation.digest() == digest
    with pytest.raises(AttributeError):
        operation.step = "inspect-parser"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Operation("", "s", "r"), "Operation.plan_id: '' is not a non-empty string"),
        (lambda: Operation("p", "s", "r", {"x": float("nan")}), r"arguments\['x'\]: nan"),
        (lambda: Operation("p", "s", "r", {"x": {1: "a"}}), r"arguments\['x'\]: key 1"),
        (lambda: Operation("p", "s", "r", {"x": [b"raw"]}), r"\['x'\]\[0\]: b'raw' \(bytes\)"),
        (lambda: Grant(resources="input-A", steps=[]), "not the string 'input-A'"),
        (lambda: Grant(resources=[""], steps=[]), "'' is not a non-empty string"),
    ],
)
def test_malformed_operations_and_grants_are_refused_naming_the_field(
    build: Any, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        build()


def test_operation_for_a_plan_takes_its_id_step_and_resource() -> None:
    plan = Plan("p7", 1, 3, "commit-import", "input-A")
    operation = Operation.for_plan(plan, {"rows": 1})
    assert (operation.plan_id, operation.step, operation.resource) == (
        "p7",
        "commit-import",
        "input-A",
    )


# ---- perform: the controller, then the executor ------------------------------------------


def ready_controller_with(plan_id: str = "c1") -> tuple[Controller, Plan]:
    controller = Controller()
    controller.observe(Observation("parser", 1, EvidenceState.PASSED, "ci"))
    controller.observe(Observation("access", 1, EvidenceState.PASSED, "ci"))
    plan = Plan(plan_id, 1, controller.evidence_revision, "commit-import", "input-A")
    assert controller.propose(plan)
    return controller, plan


def test_perform_runs_an_approved_operation_and_replays_it_afterwards() -> None:
    controller, plan = ready_controller_with()
    executor = Executor()
    effect = Effect()
    operation = Operation.for_plan(plan, {"rows": 3})
    done = perform(controller, executor, operation, GRANT, effect)
    assert (done.answer, done.outcome, effect.calls) == (
        ExecuteResult.EXECUTED,
        Outcome.EXECUTED,
        1,
    )
    again = perform(controller, executor, operation, GRANT, effect)
    assert (again.answer, again.outcome) == (ExecuteResult.REPLAYED, Outcome.REPLAYED)
    assert again.receipt == done.receipt
    assert effect.calls == 1
    assert controller.steps == 1


def test_perform_never_reaches_the_effect_when_the_controller_refuses() -> None:
    controller = Controller()  # nothing observed: the commit's prerequisites are Unknown
    plan = Plan("c1", 1, controller.evidence_revision, "commit-import", "input-A")
    controller.propose(plan)
    executor = Executor()
    effect = Effect()
    done = perform(controller, executor, Operation.for_plan(plan), GRANT, effect)
    assert (done.answer, done.execution, effect.calls) == (
        ExecuteResult.PRECONDITION_DENIED,
        None,
        0,
    )
    unknown = perform(
        controller, executor, Operation("zz", "commit-import", "input-A"), GRANT, effect
    )
    assert (unknown.answer, unknown.execution, effect.calls) == (
        ExecuteResult.UNKNOWN_PLAN,
        None,
        0,
    )
    assert executor.journal.records() == []


def test_perform_denies_before_asking_the_controller() -> None:
    controller, plan = ready_controller_with()
    effect = Effect()
    narrow = Grant(resources=["input-A"], steps=["inspect-parser"])
    done = perform(controller, Executor(), Operation.for_plan(plan), narrow, effect)
    assert (done.answer, done.outcome, effect.calls) == (None, Outcome.DENIED, 0)
    assert controller.steps == 0 and controller.pending == plan


def test_perform_refuses_an_operation_that_is_not_the_approved_plan() -> None:
    controller, plan = ready_controller_with()
    effect = Effect()
    other = Operation(plan.id, "inspect-parser", plan.resource)
    done = perform(controller, Executor(), other, GRANT, effect)
    assert (done.answer, done.outcome, effect.calls) == (None, Outcome.CONTENT_MISMATCH, 0)
    assert "was approved for step 'commit-import'" in done.execution.reason  # type: ignore[union-attr]
    assert controller.pending == plan


def test_perform_refuses_other_arguments_under_a_completed_plan_id() -> None:
    controller, plan = ready_controller_with()
    executor = Executor()
    effect = Effect()
    perform(controller, executor, Operation.for_plan(plan, {"rows": 3}), GRANT, effect)
    done = perform(controller, executor, Operation.for_plan(plan, {"rows": 30}), GRANT, effect)
    assert (done.answer, done.outcome, effect.calls) == (None, Outcome.CONTENT_MISMATCH, 1)


def test_after_a_restart_the_journal_keeps_a_reproposed_plan_from_running_twice() -> None:
    journal = InMemoryJournal()
    effect = Effect()
    controller, plan = ready_controller_with()
    perform(controller, Executor(journal), Operation.for_plan(plan, {"rows": 3}), GRANT, effect)
    restarted, plan = ready_controller_with()  # the controller's memory is gone
    done = perform(
        restarted, Executor(journal), Operation.for_plan(plan, {"rows": 3}), GRANT, effect
    )
    assert (done.answer, done.outcome, effect.calls) == (
        ExecuteResult.EXECUTED,
        Outcome.REPLAYED,
        1,
    )


def test_a_controller_replay_without_a_journal_record_is_in_doubt_not_run() -> None:
    controller, plan = ready_controller_with()
    controller.execute(plan.id)  # the host skipped the executor
    effect = Effect()
    done = perform(controller, Executor(), Operation.for_plan(plan), GRANT, effect)
    assert (done.answer, done.outcome, effect.calls) == (
        ExecuteResult.REPLAYED,
        Outcome.IN_DOUBT,
        0,
    )
    assert "holds no record" in done.execution.reason  # type: ignore[union-attr]


def test_perform_leaves_an_in_doubt_operation_to_the_owner_without_using_a_step() -> None:
    journal = InMemoryJournal()
    controller, plan = ready_controller_with()
    operation = Operation.for_plan(plan, {"rows": 3})
    with pytest.raises(OSError):
        perform(controller, Executor(journal), operation, GRANT, Effect(error=OSError()))
    restarted, plan = ready_controller_with()
    effect = Effect()
    done = perform(restarted, Executor(journal), operation, GRANT, effect)
    assert (done.answer, done.outcome, effect.calls) == (None, Outcome.IN_DOUBT, 0)
    assert restarted.steps == 0 and restarted.pending == plan
    Executor(journal).resolve(plan.id, {"imported": 3})
    done = perform(restarted, Executor(journal), operation, GRANT, effect)
    assert (done.answer, done.outcome, effect.calls) == (
        ExecuteResult.EXECUTED,
        Outcome.REPLAYED,
        0,
    )
