"""The campaign's executor mode: a Hypothesis state machine that interleaves grants,
operations (with changed arguments under one plan id), replays, failing effects,
crashes and the owner's decisions about in-doubt operations, against the executor's
named invariants.

A crash is modelled on the in-memory journal as a real one behaves on SQLite (the
crash harness in ``verification.boundary.executor.crash`` checks that part with real processes):
nothing the journal recorded is lost, the executor object is gone (a new one is built
over the same journal), and the effect is interrupted either before it did its work or
after it did it but before it returned, i.e. always between intent and completion.

Invariants (checked after every rule; the first three are the issue's):

- ``effect-authorized``: no effect runs without the grant allowing it and an open
  intent with its digest already recorded (and no receipt yet).
- ``effect-once``: no operation's work is done twice.
- ``receipt-once``: every completed operation has exactly one receipt.
- ``done-means-done``: an Executed or Replayed answer carries a receipt for the
  requested digest, and that operation's work was done.
- ``outcome-as-modelled``: each answer is the one a plain model of grants, bound
  digests and in-doubt intents predicts (Denied, ContentMismatch, InDoubt, Replayed,
  Executed).

The owner is honest here: an in-doubt operation whose work was done is resolved with
its result, one whose work was not done is abandoned (and may run again, with the
content its first record bound).
"""

from __future__ import annotations

import io
from typing import Any, ClassVar, NamedTuple

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.reporting import with_reporter
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from replan.controller.executor import Execution, Grant, Operation, Outcome
from replan.controller.journal import JSONValue, RecordKind
from replan.verification.boundary.executor.mutants import REAL, Subject

PLAN_IDS = ("p1", "p2", "p3")
STEPS = ("inspect-parser", "inspect-access", "commit-import")
RESOURCES = ("input-A", "input-B")
ROWS = (1, 2)

INVARIANTS = (
    "effect-authorized",
    "effect-once",
    "receipt-once",
    "done-means-done",
    "outcome-as-modelled",
)


class Crash(BaseException):
    """The process died here. A BaseException, so no ``except Exception`` in the code
    under test can swallow it."""


class EffectFailed(RuntimeError):
    """An effect that raised (the process lives on)."""


operations = st.builds(
    Operation,
    st.sampled_from(PLAN_IDS),
    st.sampled_from(STEPS),
    st.sampled_from(RESOURCES),
    st.builds(lambda rows: {"rows": rows}, st.sampled_from(ROWS)),
)
names = st.frozensets


class ExecutorMachine(RuleBasedStateMachine):
    """One journal shared by successive executors (one per "process")."""

    subject: ClassVar[Subject] = REAL
    requested = Bundle("requested")

    def __init__(self) -> None:
        super().__init__()
        self.ticks = 0
        self.journal = self.subject.memory_journal()
        self.executor = self._new_executor()
        self.grant = Grant(resources=["input-A"], steps=STEPS)
        self.violations: list[str] = []
        #: model: plan id -> [bound digest, "done" | "doubt" | "abandoned"]
        self.model: dict[str, list[str]] = {}
        #: every operation whose work was done, in order (plan id, digest)
        self.work: list[tuple[str, str]] = []

    def _clock(self) -> float:
        self.ticks += 1
        return float(self.ticks)

    def _new_executor(self) -> Any:
        return self.subject.executor(self.journal, clock=self._clock)

    def _violation(self, name: str, message: str) -> None:
        self.violations.append(f"{name}: {message}")

    # ---- the effect and its interruptions ----------------------------------------------

    def _effect(self, interruption: str) -> Any:
        grant = self.grant

        def effect(operation: Operation) -> JSONValue:
            entry = self.journal.entry(operation.plan_id)
            if grant.denial(operation) is not None:
                self._violation("effect-authorized", f"{operation!r} ran outside {grant!r}")
            if entry is None or entry.intent.digest != operation.digest():
                self._violation(
                    "effect-authorized", f"{operation!r} ran without an intent for its digest"
                )
            elif entry.receipt is not None:
                self._violation(
                    "effect-authorized", f"{operation!r} ran with its receipt already recorded"
                )
            if interruption == "crash-before-work":
                raise Crash
            if interruption == "raise-before-work":
                raise EffectFailed
            if any(plan_id == operation.plan_id for plan_id, _ in self.work):
                self._violation("effect-once", f"the work of {operation.plan_id} done again")
            self.work.append((operation.plan_id, operation.digest()))
            if interruption == "crash-after-work":
                raise Crash
            return {"rows": operation.arguments["rows"]}

        return effect

    def _expected(self, operation: Operation) -> Outcome:
        if self.grant.denial(operation) is not None:
            return Outcome.DENIED
        bound = self.model.get(operation.plan_id)
        if bound is None:
            return Outcome.EXECUTED
        if bound[0] != operation.digest():
            return Outcome.CONTENT_MISMATCH  # the first record binds, an abandon included
        if bound[1] == "abandoned":
            return Outcome.EXECUTED
        return Outcome.IN_DOUBT if bound[1] == "doubt" else Outcome.REPLAYED

    def _check_answer(self, operation: Operation, answer: Execution, expected: Outcome) -> None:
        if answer.outcome is not expected:
            self._violation(
                "outcome-as-modelled", f"{operation!r} answered {answer.outcome}, not {expected}"
            )
        if answer.outcome in (Outcome.EXECUTED, Outcome.REPLAYED):
            receipt = answer.receipt
            if receipt is None or receipt.digest != operation.digest():
                self._violation(
                    "done-means-done",
                    f"{operation!r} answered {answer.outcome} without its receipt",
                )
            if (operation.plan_id, operation.digest()) not in self.work:
                self._violation(
                    "done-means-done", f"{operation!r} answered {answer.outcome}, work never done"
                )

    # ---- rules ----------------------------------------------------------------------------

    @rule(resources=names(st.sampled_from(RESOURCES)), steps=names(st.sampled_from(STEPS)))
    def grant_changes(self, resources: frozenset[str], steps: frozenset[str]) -> None:
        """The owner grants another set of resources and steps."""
        self.grant = Grant(resources=resources, steps=steps)

    @rule(target=requested, operation=operations)
    def request(self, operation: Operation) -> Operation:
        """An operation is requested; its effect completes normally if it runs."""
        expected = self._expected(operation)
        answer = self.executor.run(operation, self.grant, self._effect("none"))
        self._check_answer(operation, answer, expected)
        if expected is Outcome.EXECUTED:
            self.model[operation.plan_id] = [operation.digest(), "done"]
        return operation

    @rule(operation=requested)
    def replay(self, operation: Operation) -> None:
        """An operation requested before is requested again, unchanged."""
        self.request(operation)

    @rule(
        operation=operations,
        interruption=st.sampled_from(
            ["crash-before-work", "crash-after-work", "raise-before-work"]
        ),
    )
    def interrupted(self, operation: Operation, interruption: str) -> None:
        """The effect is interrupted between intent and completion: the process dies
        (a new executor over the same journal follows) or the effect raises."""
        expected = self._expected(operation)
        try:
            answer = self.executor.run(operation, self.grant, self._effect(interruption))
        except (Crash, EffectFailed):
            if expected is not Outcome.EXECUTED:
                self._violation(
                    "outcome-as-modelled", f"{operation!r} ran its effect; expected {expected}"
                )
            self.model[operation.plan_id] = [operation.digest(), "doubt"]
        else:
            self._check_answer(operation, answer, expected)
        if interruption.startswith("crash"):
            self.executor = self._new_executor()

    @rule()
    def restart(self) -> None:
        """The host restarts cleanly: a new executor over the same journal."""
        self.executor = self._new_executor()

    @precondition(lambda self: any(state == "doubt" for _, state in self.model.values()))
    @rule(data=st.data())
    def owner_decides(self, data: st.DataObject) -> None:
        """The owner checks an in-doubt operation and says truthfully what happened."""
        doubtful = sorted(plan for plan, (_, state) in self.model.items() if state == "doubt")
        plan_id = data.draw(st.sampled_from(doubtful), label="plan_id")
        digest = self.model[plan_id][0]
        if (plan_id, digest) in self.work:
            self.executor.resolve(plan_id, {"resolved": True})
            self.model[plan_id][1] = "done"
        else:
            self.executor.abandon(plan_id, "the owner found no trace of it")
            self.model[plan_id][1] = "abandoned"

    # ---- invariants -----------------------------------------------------------------------

    @invariant()
    def no_violation(self) -> None:
        assert not self.violations, self.violations[0]

    @invariant()
    def receipt_once(self) -> None:
        completions: dict[str, int] = {}
        for record in self.journal.records():
            if record.kind is RecordKind.ABANDON:
                completions.pop(record.plan_id, None)
            elif record.kind is RecordKind.COMPLETION:
                completions[record.plan_id] = completions.get(record.plan_id, 0) + 1
        for plan_id in sorted(completions.keys() | self.model.keys()):
            state = self.model[plan_id][1] if plan_id in self.model else "never completed"
            count = completions.get(plan_id, 0)
            expected = 1 if state == "done" else 0
            assert count == expected, (
                f"receipt-once: {plan_id} ({state}) has {count} receipts, expected {expected}"
            )


class CampaignResult(NamedTuple):
    """What one executor campaign found: ``failure`` is None when every invariant
    held, else the first violated invariant's message; ``program`` is Hypothesis's
    (shrunk, when shrinking is on) reproduction of the failing run."""

    subject: str
    examples: int
    failure: str | None
    program: str


def machine_for(subject: Subject) -> type[ExecutorMachine]:
    """The state machine run against ``subject``."""
    if subject is REAL:
        return ExecutorMachine
    name = "ExecutorMachine_" + subject.name.replace("-", "_")
    return type(name, (ExecutorMachine,), {"subject": subject})


def run_executor_campaign(
    subject: Subject = REAL, examples: int = 200, steps: int = 30, shrink: bool = True
) -> CampaignResult:
    """Run the executor campaign (derandomized: the same result every time)."""
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])
    chosen = settings(
        max_examples=examples,
        stateful_step_count=steps,
        derandomize=True,
        database=None,
        deadline=None,
        phases=phases,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    output = io.StringIO()

    def report(value: object) -> None:
        output.write(f"{value}\n")

    try:
        with with_reporter(report):
            run_state_machine_as_test(machine_for(subject), settings=chosen)
    except Exception as error:  # a broken executor may break before an invariant does
        message = str(error) if isinstance(error, AssertionError) else repr(error)
        notes = "\n".join(getattr(error, "__notes__", []))
        return CampaignResult(subject.name, examples, message, notes or output.getvalue())
    return CampaignResult(subject.name, examples, None, "")
