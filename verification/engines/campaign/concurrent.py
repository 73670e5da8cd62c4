"""The campaign's concurrent mode: N threads calling one run at once, every property
checked on the history the run serialized them into.

Why: agent frameworks call tools from threads and from async tasks, and a run shared
that way must still keep the contract. The sequential campaign cannot see a race: it
makes one call at a time. Here each trial starts ``threads`` threads together, at the
interpreter's shortest switch interval, each making ``steps`` calls on the same run;
each call is one of the operations the input space offers in the state the thread
reads (``verification.core.domains.InputSpace``: every event of the declaration, none
listed here), chosen by a seeded random draw.

The check is linearizability, with the run's own trace as the witness order:

1. the trace is a serialization of the calls: each record is some thread's next
   call (in that thread's program order), with the argument and the answer that
   thread got, and no call is missing from it (nothing lost, nothing run twice);
2. that history, replayed one call at a time on a fresh run beside the reference
   model, keeps every property of ``spec/properties.py`` and gives every answer the
   threads got (``harness.run_sequence``);
3. the shared run ends in the state the replay ends in.

A failure's counterexample is the serialized history (as far as it could be formed),
saved in the shared counterexample format: ``replan replay FILE`` replays it serially.

Owns: the trials, the serialization check and the result. Leaves to others: the
properties and the lockstep replay (``harness``), the inputs (``domains``), the
serialized controller itself (``controller.serialized``).
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from replan.controller.policy import DEFAULT_POLICY, Policy, policy_to_dict
from replan.controller.run import jsonable
from replan.spec.properties import CONTRACT
from replan.spec.reference import ReferenceController
from replan.verification.core.domains import InputSpace, product_domains
from replan.verification.core.harness import Finding, Operation, apply, run_sequence
from replan.verification.runtime import interrupt

#: What the concurrent mode tests unless told otherwise: the documented way to share a
#: run across threads.
DEFAULT_CONCURRENT_IMPLEMENTATION: Final = "replan.controller.serialized:SerializedController"
#: The check of step 1 and 3 above, named like a property in reports.
LINEARIZABLE: Final = "linearizable"


@dataclass(frozen=True)
class ThreadCall:
    """One call a thread made, and what it got back. ``window``: the run's trace
    length just before the call and just after it returned; the call's own record
    lies in between (real time: nothing a call could not have seen is laid on it)."""

    thread: int
    index: int
    operation: Operation
    result: Any
    window: tuple[int, int] = (0, 0)


@dataclass
class ConcurrentResult:
    """What a concurrent campaign did and found."""

    policy: Policy
    implementation: str
    seed: int
    threads: int
    trials: int
    steps: int
    calls: int = 0
    trials_run: int = 0
    seconds: float = 0.0
    finding: Finding | None = None
    saved: list[Path] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.finding is None

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": "concurrent",
            "passed": self.passed,
            "implementation": self.implementation,
            "seed": self.seed,
            "threads": self.threads,
            "budget": {"trials": self.trials, "calls_per_thread": self.steps},
            "trials": self.trials_run,
            "calls": self.calls,
            "seconds": round(self.seconds, 2),
            "properties": [*CONTRACT.names, LINEARIZABLE],
            "policy": policy_to_dict(self.policy),
            "finding": None
            if self.finding is None
            else {**self.finding.to_json(), "saved": [str(path) for path in self.saved]},
        }

    def summary_lines(self) -> list[str]:
        return [
            f"campaign (concurrent): {'PASSED' if self.passed else 'FAILED'} - "
            f"{self.implementation}, {self.threads} threads on one run, seed {self.seed}",
            f"trials: {self.trials_run} (budget {self.trials} x {self.steps} calls per "
            f"thread), calls: {self.calls}, {self.seconds:.1f} s",
            f"checked: each trial's trace is a serialization of its calls ({LINEARIZABLE}), "
            f"and that history, replayed serially beside the reference model, keeps the "
            f"{len(CONTRACT)} properties and gives every answer the threads got",
        ]


@contextmanager
def switching_often() -> Iterator[None]:
    """The interpreter's shortest thread switch interval, so that calls interleave."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


#: Reads of a changing run's snapshot before a thread gives up (each torn read is
#: read again; a snapshot that always raises is the implementation's failure).
TORN_READS: Final = 1000


def _view(run: Any) -> dict[str, Any]:
    """The run's snapshot, read while other threads change it: a read that races a
    write is read again (it only picks the next call's argument)."""
    for _ in range(TORN_READS - 1):
        try:
            return dict(run.snapshot())
        except Exception:  # a torn read of a changing run
            continue
    return dict(run.snapshot())


def _trace_length(run: Any) -> int:
    """The run's trace length, read without rendering it where the run allows."""
    recorded = getattr(run, "_trace", None)
    return len(recorded) if isinstance(recorded, list) else len(run.trace)


def _calls_of_thread(
    run: Any, space: InputSpace, thread: int, draws: list[int], out: list[ThreadCall]
) -> None:
    for index, draw in enumerate(draws):
        view = _view(run)
        pending = view.get("pending")
        offered = space.operations(
            view["plan_revision"],
            view["evidence_revision"],
            tuple(view.get("accepted", ())),
            tuple(view.get("completed", ())),
            None if pending is None else pending["id"],
            run=run,
        )
        operation = offered[draw % len(offered)]
        before = _trace_length(run)
        answer = apply(run, operation)
        out.append(ThreadCall(thread, index, operation, answer, (before, _trace_length(run))))


@dataclass
class Trial:
    """One trial: the shared run, each thread's calls, and what stopped a thread
    before its last call (an error outside the calls themselves: reading the run,
    choosing an input)."""

    run: Any
    per_thread: list[list[ThreadCall]]
    stopped: dict[int, str] = field(default_factory=dict)


def _trial(
    factory: Callable[[Policy], Any], policy: Policy, space: InputSpace, draws: list[list[int]]
) -> Trial:
    trial = Trial(factory(policy), [[] for _ in draws])
    start = threading.Barrier(len(draws))

    def work(thread: int) -> None:
        start.wait()
        try:
            _calls_of_thread(trial.run, space, thread, draws[thread], trial.per_thread[thread])
        except BaseException as error:
            trial.stopped[thread] = f"{type(error).__name__}: {error}"

    workers = [threading.Thread(target=work, args=(n,)) for n in range(len(draws))]
    with switching_often():
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    return trial


def _key(run: Any, operation: Operation, result: Any) -> str:
    parameter = run.events.get(operation.op, (None,))[0]
    arguments = {} if parameter is None else {parameter: jsonable(operation.argument)}
    return json.dumps([operation.op, arguments, jsonable(result)], sort_keys=True)


def serialize(run: Any, per_thread: list[list[ThreadCall]]) -> tuple[list[ThreadCall], str]:
    """The calls in the order the run's trace applied them, and what broke step 1
    ("" when the trace is a serialization of exactly these calls).

    Record by record, the call laid on it is a thread's next call with the same
    operation, argument and answer whose window holds the record's position; of
    several, the one whose window closes first (the others can still take a later
    record; calls with one key are interchangeable in the replay)."""
    following = [0] * len(per_thread)
    history: list[ThreadCall] = []
    keys = [[_key(run, call.operation, call.result) for call in calls] for calls in per_thread]
    for position, record in enumerate(run.trace):
        key = json.dumps([record["op"], record["args"], record["result"]], sort_keys=True)
        candidates = [
            (calls[following[thread]].window[1], thread)
            for thread, calls in enumerate(per_thread)
            if following[thread] < len(calls)
            and keys[thread][following[thread]] == key
            and calls[following[thread]].window[0] <= position < calls[following[thread]].window[1]
        ]
        if candidates:
            _, thread = min(candidates)
            history.append(per_thread[thread][following[thread]])
            following[thread] += 1
        else:
            return history, (
                f"trace record {record['seq']} ({record['op']} {record['args']} -> "
                f"{record['result']}) is no thread's next call: a call was applied twice, "
                "answered otherwise than recorded, or out of its thread's order"
            )
    missing = sum(len(calls) for calls in per_thread) - len(history)
    if missing:
        return history, f"{missing} call(s) made by the threads are not in the run's trace"
    return history, ""


def check_trial(
    policy: Policy,
    factory: Callable[[Policy], Any],
    run: Any,
    per_thread: list[list[ThreadCall]],
    reference: Callable[[Policy], Any] | None = ReferenceController,
    extra: dict[str, Any] | None = None,
) -> Finding | None:
    """Steps 1-3 of the module docstring on one trial's run and calls; never raises
    (an error while checking is the implementation's failure, reported)."""
    try:
        return _check(policy, factory, run, per_thread, reference, extra or {})
    except Exception as error:
        return Finding(
            LINEARIZABLE,
            policy,
            [],
            [],
            f"checking the trial raised {type(error).__name__}: {error}",
            "campaign",
            dict(extra or {}),
        )


def _check(
    policy: Policy,
    factory: Callable[[Policy], Any],
    run: Any,
    per_thread: list[list[ThreadCall]],
    reference: Callable[[Policy], Any] | None,
    extra: dict[str, Any],
) -> Finding | None:
    history, broken = serialize(run, per_thread)
    operations = [call.operation for call in history]
    results = [call.result for call in history]
    if broken:
        return Finding(LINEARIZABLE, policy, operations, results, broken, "campaign", extra)
    report = run_sequence(policy, operations, factory, reference)
    if report.failure is not None:
        cut = len(report.results)
        return Finding(
            report.failure,
            policy,
            operations[:cut],
            report.results,
            f"the serialized history of {len(per_thread)} threads: {report.detail}",
            "campaign",
            extra,
        )
    for position, (call, serial) in enumerate(zip(history, report.results, strict=True)):
        if jsonable(call.result) != jsonable(serial):
            return Finding(
                LINEARIZABLE,
                policy,
                operations[: position + 1],
                report.results[: position + 1],
                f"thread {call.thread}'s call {call.index + 1} ({call.operation}) answered "
                f"{jsonable(call.result)}; at its place in the serialized history a run "
                f"answers {jsonable(serial)}",
                "campaign",
                extra,
            )
    replayed = factory(policy)
    for operation in operations:
        apply(replayed, operation)
    shared, serial = run.snapshot(), replayed.snapshot()
    if shared != serial:
        differing = sorted(k for k in {*shared, *serial} if shared.get(k) != serial.get(k))
        return Finding(
            LINEARIZABLE,
            policy,
            operations,
            results,
            "the shared run ends in another state than its serialized history: "
            + ", ".join(differing),
            "campaign",
            extra,
        )
    return None


def run_concurrent_campaign(
    policy: Policy | None = None,
    *,
    factory: Callable[[Policy], Any],
    implementation: str,
    threads: int = 8,
    trials: int = 100,
    steps: int = 20,
    seed: int | None = None,
    reference: Callable[[Policy], Any] | None = ReferenceController,
    out_dir: str | Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ConcurrentResult:
    """``trials`` trials of ``threads`` threads x ``steps`` calls on one run made by
    ``factory`` (named ``implementation`` in reports); stops at the first failing
    trial and saves its history in ``out_dir``."""
    policy = policy or DEFAULT_POLICY
    if threads < 2 or trials < 1 or steps < 1:
        raise ValueError("threads must be at least 2, trials and steps at least 1")
    if seed is None:
        seed = random.SystemRandom().randrange(1_000_000)
    space = InputSpace(policy, product_domains(versions=2))
    result = ConcurrentResult(policy, implementation, seed, threads, trials, steps)
    started = time.perf_counter()
    draws_of = random.Random(seed)
    for trial in range(trials):
        interrupt.check()
        draws = [[draws_of.randrange(1 << 30) for _ in range(steps)] for _ in range(threads)]
        ran = _trial(factory, policy, space, draws)
        result.trials_run = trial + 1
        result.calls += sum(map(len, ran.per_thread))
        extra = {"implementation": implementation, "seed": seed, "trial": trial + 1}
        if ran.stopped:
            thread, reason = min(ran.stopped.items())
            result.finding = Finding(
                LINEARIZABLE,
                policy,
                [],
                [],
                f"thread {thread} stopped after {len(ran.per_thread[thread])} of {steps} "
                f"calls: {reason}",
                "campaign",
                extra,
            )
        else:
            result.finding = check_trial(policy, factory, ran.run, ran.per_thread, reference, extra)
        if progress is not None:
            progress(trial + 1, trials)
        if result.finding is not None:
            if out_dir is not None:
                path = Path(out_dir) / f"concurrent-{result.finding.property}.json"
                result.saved.append(result.finding.save(path))
            break
    result.seconds = time.perf_counter() - started
    return result


__all__ = [
    "DEFAULT_CONCURRENT_IMPLEMENTATION",
    "LINEARIZABLE",
    "ConcurrentResult",
    "ThreadCall",
    "Trial",
    "check_trial",
    "run_concurrent_campaign",
    "serialize",
    "switching_often",
]
