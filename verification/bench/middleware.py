"""The guard's and the tracing's benchmark workloads, for ``replan bench`` (which owns
the timing: ``verification.bench.run.time_episodes`` interleaves every workload of this
module round by round, in one run).

What is compared, and why these pairs:

- **the middleware's cost per guarded call**: ``tool-call/unguarded`` is one tool call
  through the SDK's ``FunctionTool.invoke`` (what the call costs anyway);
  ``tool-call/guarded`` is the same call through ``ReplanMiddleware.process`` (tool
  name to step, resource from the arguments, a proposal, the executor's grant,
  digest, intent and receipt on the in-memory journal, the controller's execute, the
  tool, the spans on the API's no-op tracer); the difference is the guard's own cost.
  The journal is in memory here: a SQLite journal's two synced commits are the
  executor rows' figure (``executor-authorized/sqlite-open``), not the guard's.
  ``tool-call/guarded-sdk-tracing`` adds an SDK ``TracerProvider`` with an in-memory
  exporter: what recording the ``execute_tool`` span and its controller spans costs.
- **the tracing's cost per controller call**: ``controller-calls/untraced``,
  ``/traced-no-provider`` and ``/traced-sdk`` are the same episode (a proposal with a
  new id and its execution, two calls, on one long run) on a bare ``Controller``, a
  ``TracedController`` without any provider configured, and one on an SDK provider
  with an in-memory exporter.

Every episode checks its own outcome and raises ``AssertionError`` when it is wrong
(a fast wrong answer is not a result). The guard's coroutine is driven by hand: it
never waits (the lock is free, the tool returns at once), so it completes on its
first step, and the figure measures the guard, not an event loop.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Coroutine
from typing import Any

from agent_framework import FunctionInvocationContext, FunctionTool
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from replan.controller import Controller, ExecuteResult, Plan, Policy, Step
from replan.controller.executor import Executor, Grant
from replan.controller.middleware import EXECUTED, ReplanMiddleware
from replan.controller.serialized import SerializedController
from replan.controller.telemetry import TracedController

RESOURCE = "input-A"
STEP = "inspect"
#: Enough steps that one guard serves every call of a bench run (a call per step).
BENCH_POLICY = Policy(
    keys=(),
    steps=(Step(STEP, resource_argument="path"), Step("commit", completes_run=True)),
    resources=(RESOURCE,),
    max_steps=10_000_000,
)
GRANT = Grant([RESOURCE], [STEP, "commit"])
ARGUMENTS = {"path": RESOURCE}


async def _inspect(path: str) -> str:
    return f"inspected {path}"


TOOL = FunctionTool(name=STEP, description="Inspect a file.", func=_inspect)


def _complete(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never waits to its end, without an event loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise AssertionError("the workload's coroutine waited: it is not measuring the guard")


def _check_text(result: object) -> None:
    text = result[0].text if isinstance(result, list) and result else None
    if text != f"inspected {RESOURCE}":
        raise AssertionError(f"the tool answered {result!r}")


def unguarded_tool_call() -> None:
    """The tool call alone, through the SDK's ``FunctionTool.invoke``."""
    _check_text(_complete(TOOL.invoke(arguments=dict(ARGUMENTS))))


class _Guarded:
    """One guard over one long run; each episode is a new call id."""

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        self.guard = ReplanMiddleware(
            Controller(BENCH_POLICY),
            executor=Executor(),
            grant=GRANT,
            tracer_provider=tracer_provider,
        )
        self.numbers = itertools.count()

    def episode(self) -> None:
        context = FunctionInvocationContext(function=TOOL, arguments=dict(ARGUMENTS))
        context.metadata["call_id"] = f"call-{next(self.numbers)}"

        async def call_next() -> None:
            context.result = await TOOL.invoke(arguments=context.arguments)

        _complete(self.guard.process(context, call_next))
        _check_text(context.result)
        if self.guard.calls[-1].outcome != EXECUTED:
            raise AssertionError(f"the guarded call answered {self.guard.calls[-1].outcome}")
        self.guard.calls.clear()


def _sdk_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


_guarded: _Guarded | None = None
_guarded_sdk: tuple[_Guarded, InMemorySpanExporter] | None = None


def guarded_tool_call() -> None:
    """The call through ``ReplanMiddleware`` (no tracer provider: the no-op one)."""
    global _guarded
    if _guarded is None:
        _guarded = _Guarded()
    _guarded.episode()


def guarded_tool_call_sdk_tracing() -> None:
    """The guarded call with its spans recorded by the SDK (in-memory exporter)."""
    global _guarded_sdk
    if _guarded_sdk is None:
        provider, exporter = _sdk_provider()
        _guarded_sdk = (_Guarded(provider), exporter)
    guarded, exporter = _guarded_sdk
    guarded.episode()
    # execute_tool, propose, execute, charge (the tool's wall time), and a charge per
    # provider response when the episode has a provider
    if len(exporter.get_finished_spans()) < 4:
        raise AssertionError("the guarded call did not record its four spans")
    exporter.clear()


class _LongRun:
    """One run with room for every episode of a bench run, so that an episode is the
    calls alone: a proposal with a new id and its execution (two calls)."""

    def __init__(
        self,
        wrap: Callable[[Controller], Any] = lambda run: run,
        kind: type[Controller] = Controller,
    ) -> None:
        self.controller = wrap(kind(BENCH_POLICY))
        self.numbers = itertools.count(1)

    def episode(self) -> None:
        number = next(self.numbers)
        controller = self.controller
        controller.propose(Plan(f"p{number}", number, 1, STEP, RESOURCE))
        if controller.execute(f"p{number}") is not ExecuteResult.EXECUTED:
            raise AssertionError(f"the controller did not execute p{number}")


_untraced: _LongRun | None = None
_serialized: _LongRun | None = None
_traced: _LongRun | None = None
_sdk_tracing: tuple[_LongRun, InMemorySpanExporter] | None = None


def untraced_controller_calls() -> None:
    """A proposal and its execution: two calls on a bare controller."""
    global _untraced
    if _untraced is None:
        _untraced = _LongRun()
    _untraced.episode()


def serialized_controller_calls() -> None:
    """The same two calls on a ``SerializedController`` (each under its lock)."""
    global _serialized
    if _serialized is None:
        _serialized = _LongRun(kind=SerializedController)
    _serialized.episode()


def traced_controller_calls_no_provider() -> None:
    """The same two calls through ``TracedController``, no provider configured."""
    global _traced
    if _traced is None:
        _traced = _LongRun(TracedController)
    _traced.episode()


def traced_controller_calls_sdk() -> None:
    """The same two calls recorded by the SDK with an in-memory exporter."""
    global _sdk_tracing
    if _sdk_tracing is None:
        provider, exporter = _sdk_provider()
        _sdk_tracing = (
            _LongRun(lambda run: TracedController(run, tracer_provider=provider)),
            exporter,
        )
    run, exporter = _sdk_tracing
    run.episode()
    if len(exporter.get_finished_spans()) != 2:
        raise AssertionError("the traced calls did not record two spans")
    exporter.clear()


#: workload name -> episode, for the bench; measured together, interleaved.
WORKLOADS: dict[str, Callable[[], None]] = {
    "tool-call/unguarded": unguarded_tool_call,
    "tool-call/guarded": guarded_tool_call,
    "tool-call/guarded-sdk-tracing": guarded_tool_call_sdk_tracing,
    "controller-calls/untraced": untraced_controller_calls,
    "controller-calls/serialized": serialized_controller_calls,
    "controller-calls/traced-no-provider": traced_controller_calls_no_provider,
    "controller-calls/traced-sdk": traced_controller_calls_sdk,
}

#: The differences the bench reports, sample by sample: (name, minuend, subtrahend,
#: divisor: calls per episode).
DIFFERENCES: tuple[tuple[str, str, str, int], ...] = (
    ("guard per call (no provider)", "tool-call/guarded", "tool-call/unguarded", 1),
    ("guard per call (SDK tracing)", "tool-call/guarded-sdk-tracing", "tool-call/unguarded", 1),
    (
        "lock per controller call (SerializedController)",
        "controller-calls/serialized",
        "controller-calls/untraced",
        2,
    ),
    (
        "tracing per controller call, no provider",
        "controller-calls/traced-no-provider",
        "controller-calls/untraced",
        2,
    ),
    (
        "tracing per controller call, SDK in-memory",
        "controller-calls/traced-sdk",
        "controller-calls/untraced",
        2,
    ),
)
