"""OpenTelemetry spans for a run: each controller call is a span named after the
transition that fired, as ``replan diagram`` draws it.

Why spans and not only the trace: the controller's trace explains one run from the
inside; a span puts the same decision in the host's own distributed trace, under the
agent run (``invoke_agent``) and the tool call (``execute_tool``) that caused it, so an
operator reading a trace backend sees *why* a tool did not run next to the model call
that asked for it. The span name is the diagram's label of the fired transition
(``execute #7 [completes_run] / execute_step``, from ``controller._generated.LABELS``),
so a span can be found on the reviewed diagram by its name.

Owns: ``TracedController`` (a controller whose every event is a child span of the
current one), ``agent_run`` (the ``invoke_agent`` span of a run), the span and
attribute names (``replan.*`` and the GenAI semantic conventions' ``gen_ai.*``).

Cost: only the OpenTelemetry *API* is imported (``opentelemetry-api``, which
agent-framework-core depends on anyway). Without a configured provider the API's
no-op tracer would answer, so no span is started at all (``TracedController.tracing``:
one global read per call); with a provider, every attribute is built only when
``span.is_recording()`` (a sampler may drop the span). ``replan bench`` measures both.
The SDK is never needed here; tests and ``replan trace --otel`` bring their own
``TracerProvider`` (``tracer_provider=``).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.trace import (
    Span,
    SpanKind,
    Status,
    StatusCode,
    Tracer,
    TracerProvider,
)

from replan.controller._generated import LABELS, TRANSITIONS
from replan.controller.call_encoding import encode_argument
from replan.controller.records import (
    Approval,
    EvidenceState,
    ExecuteResult,
    Observation,
    Plan,
    StopReason,
)
from replan.controller.run import Run

TRACER_NAME: Final = "replan"

# ---- attribute names ---------------------------------------------------------------------

#: What the call answered: an ``ExecuteResult``, ``true``/``false``, ``None``, or the
#: class of the error it raised.
RESULT: Final = "replan.result"
#: The evidence revision after the call.
EVIDENCE_REVISION: Final = "replan.evidence_revision"
#: The stop reason after the call; set only once the run has stopped (an attribute
#: cannot be None).
STOP_REASON: Final = "replan.stop_reason"
#: The plan the call is about (propose, execute, approve).
PLAN_ID: Final = "replan.plan_id"
#: The event (``observe``, ``propose``, ...).
OPERATION: Final = "replan.operation"
#: The fired transition as the trace names it (``pending --execute[completes_run]-->
#: completed``): it says the state it left, which the diagram label does not.
TRANSITION: Final = "replan.transition"
#: The call's number in the controller's trace (``Controller.trace[seq - 1]``).
SEQUENCE: Final = "replan.seq"
#: The declared state after the call (``idle``, ``pending``, ... or the stop reason).
STATE: Final = "replan.state"
#: The call's argument as the run log encodes it (``controller.durable.log``:
#: canonical JSON of the plan, observation, approval, usage or plan id): what
#: ``replan conform`` replays from an exported trace. Names, numbers and states only:
#: a tool's own arguments are never a controller call's.
ARGUMENT: Final = "replan.argument"
#: The digest of the policy the run is under (as each trace record names it).
POLICY: Final = "replan.policy"
#: An observation's key and state.
EVIDENCE_KEY: Final = "replan.evidence.key"
EVIDENCE_STATE: Final = "replan.evidence.state"

# The GenAI semantic conventions' names (gen_ai.*), as agent-framework-core uses them.
GEN_AI_OPERATION: Final = "gen_ai.operation.name"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
INVOKE_AGENT: Final = "invoke_agent"
EXECUTE_TOOL: Final = "execute_tool"


def _version() -> str:
    try:
        return importlib.metadata.version("replan")
    except importlib.metadata.PackageNotFoundError:  # a source checkout, not installed
        return "0+source"


VERSION: Final = _version()


def get_tracer(tracer_provider: TracerProvider | None = None) -> Tracer:
    """replan's tracer from ``tracer_provider``, or from the global provider (the
    API's no-op one until the host configures one)."""
    return trace.get_tracer(TRACER_NAME, VERSION, tracer_provider=tracer_provider)


@cache
def transition_names(transitions: tuple[str, ...]) -> tuple[str, ...]:
    """The span name of each transition, by index: the diagram's labels when
    ``transitions`` are the generated declaration's (every controller class the
    generated one is built from: mutants, subclasses), else the trace's own labels (a
    controller of another declaration has no labels emitted for it)."""
    return LABELS if transitions == TRANSITIONS else transitions


def _answer(result: object) -> str:
    if isinstance(result, bool):
        return "true" if result else "false"
    if isinstance(result, StopReason | EvidenceState | ExecuteResult):
        return str.__str__(result)
    if isinstance(result, type):
        return result.__name__
    return str(result)


def _describe_argument(span: Span, op: str, argument: object) -> None:
    """The argument's identity, never its content beyond names and states: a
    tool's arguments go on the ``execute_tool`` span, which the host controls."""
    if type(argument) is Plan:
        if type(argument.id) is str:
            span.set_attribute(PLAN_ID, argument.id)
    elif type(argument) is Observation:
        if type(argument.key) is str:
            span.set_attribute(EVIDENCE_KEY, argument.key)
        if isinstance(argument.state, EvidenceState):
            span.set_attribute(EVIDENCE_STATE, str.__str__(argument.state))
    elif type(argument) is Approval:
        if type(argument.plan_id) is str:
            span.set_attribute(PLAN_ID, argument.plan_id)
    elif op == "execute" and type(argument) is str:
        span.set_attribute(PLAN_ID, argument)


def describe_call(span: Span, controller: Run, op: str, argument: object) -> None:
    """Name ``span`` after the transition the controller's last call fired and set
    its attributes, from the last trace entry (one tuple, read without building the
    whole JSON trace). Call only when ``span.is_recording()``."""
    entries = controller._trace
    if not entries:
        return
    _op, _argument, result, revision, declared, fired = entries[-1]
    labels = transition_names(type(controller).transitions)
    if fired is not None:
        span.update_name(labels[fired])
        span.set_attribute(TRANSITION, type(controller).transitions[fired])
    elif isinstance(declared, StopReason) and not isinstance(result, type):
        # A stopped run answers from its final state (the trace's own wording); an
        # error class is an input check's refusal, before any transition: the span
        # keeps the event's name.
        span.update_name(f"{declared} absorbs {op}")
    span.set_attribute(OPERATION, op)
    parameter_type = type(controller).events.get(op, (None, None, ""))[1]
    span.set_attribute(ARGUMENT, encode_argument(parameter_type, argument))
    span.set_attribute(SEQUENCE, len(entries))
    span.set_attribute(POLICY, controller.policy.digest)
    span.set_attribute(RESULT, _answer(result))
    span.set_attribute(EVIDENCE_REVISION, revision)
    span.set_attribute(STATE, str(declared))
    if isinstance(declared, StopReason):
        span.set_attribute(STOP_REASON, str.__str__(declared))
    _describe_argument(span, op, argument)


class TracedController:
    """A controller whose every event is a span, a child of the current span (the
    ``execute_tool`` span of a guarded call, the ``invoke_agent`` span of a run).

    Everything else (``pending``, ``evidence_revision``, ``trace``, ...) is the
    wrapped controller's. An event the declaration adds (``charge``, say) is spanned
    too: any attribute named in the controller's ``events`` is.
    """

    __slots__ = ("_own", "controller", "tracer")

    def __init__(
        self,
        controller: Run,
        *,
        tracer_provider: TracerProvider | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        self.controller = controller
        self.tracer = get_tracer(tracer_provider) if tracer is None else tracer
        self._own = tracer_provider is not None or tracer is not None
        # Loads a provider configured by environment (OTEL_PYTHON_TRACER_PROVIDER), so
        # that ``tracing`` can read the global alone from here on.
        trace.get_tracer_provider()

    @property
    def tracing(self) -> bool:
        """Whether a span could record: a provider or tracer was given, or the host
        has configured a global provider (read on every call, so one configured later
        is used). Until then no span is started at all: the call costs one attribute
        read more than an untraced one. The API's public ``get_tracer_provider()``
        reads the environment on every call while none is set (a microsecond); its
        module global says the same for a few nanoseconds, and should it ever go, a
        span is started as usual."""
        return self._own or getattr(trace, "_TRACER_PROVIDER", True) is not None

    def call(self, op: str, *arguments: Any) -> Any:
        """Call event ``op`` with ``arguments`` inside its span."""
        method: Callable[..., Any] = getattr(self.controller, op)
        if not self.tracing:
            return method(*arguments)
        span = self.tracer.start_span(op)
        try:
            result = method(*arguments)
        except Exception as error:
            if span.is_recording():
                describe_call(span, self.controller, op, arguments[0] if arguments else None)
                span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, type(error).__name__))
            span.end()
            raise
        if span.is_recording():
            describe_call(span, self.controller, op, arguments[0] if arguments else None)
        span.end()
        return result

    def observe(self, obs: Observation) -> bool:
        answer: bool = self.call("observe", obs)
        return answer

    def propose(self, plan: Plan) -> bool:
        answer: bool = self.call("propose", plan)
        return answer

    def execute(self, plan_id: str) -> ExecuteResult:
        answer: ExecuteResult = self.call("execute", plan_id)
        return answer

    def approve(self, approval: Approval) -> bool:
        answer: bool = self.call("approve", approval)
        return answer

    def cancel(self) -> None:
        self.call("cancel")

    @property
    def pending(self) -> Plan | None:
        return self.controller.pending

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.controller, name)
        if name in type(self.controller).events and callable(value):
            return lambda *arguments: self.call(name, *arguments)
        return value


@contextmanager
def agent_run(
    agent_name: str = "replan",
    *,
    tracer_provider: TracerProvider | None = None,
    attributes: dict[str, str] | None = None,
) -> Iterator[Span]:
    """The ``invoke_agent`` span of one run (GenAI semantic conventions), current
    while the block runs, so the tool calls and controller calls inside it are its
    children. An agent framework's own ``invoke_agent`` span serves as well: use this
    one when the host drives the run itself."""
    with get_tracer(tracer_provider).start_as_current_span(
        f"{INVOKE_AGENT} {agent_name}", kind=SpanKind.INTERNAL
    ) as span:
        if span.is_recording():
            span.set_attribute(GEN_AI_OPERATION, INVOKE_AGENT)
            span.set_attribute(GEN_AI_AGENT_NAME, agent_name)
            for key, value in (attributes or {}).items():
                span.set_attribute(key, value)
        yield span


__all__ = [
    "EVIDENCE_REVISION",
    "EXECUTE_TOOL",
    "GEN_AI_OPERATION",
    "GEN_AI_TOOL_CALL_ID",
    "GEN_AI_TOOL_NAME",
    "INVOKE_AGENT",
    "PLAN_ID",
    "RESULT",
    "STOP_REASON",
    "TRACER_NAME",
    "TracedController",
    "agent_run",
    "describe_call",
    "get_tracer",
    "transition_names",
]
