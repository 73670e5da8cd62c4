"""ReplanMiddleware on an Agent Framework agent: every refusal the model can read, and
that a refused call never runs its tool; retries answered from the journal; the
policy's resource_argument; the budget hook; the spans (names, attributes, nesting)
with an in-memory exporter on a provider built here (the global one is never set)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, ChatMiddlewareLayer, FunctionInvocationLayer, FunctionTool
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from replan.controller import (
    Approval,
    Controller,
    EvidenceState,
    Observation,
    Policy,
    PolicyError,
    Step,
    Usage,
)
from replan.controller._generated import LABELS, TRANSITIONS
from replan.controller.agent import (
    FunctionInvokingChatClient,
    GuardedCall,
    ReplanMiddleware,
    answer_of,
)
from replan.controller.executor import Executor, Grant
from replan.controller.sqlite_journal import SqliteJournal
from replan.controller.telemetry import TracedController, agent_run
from replan.verification.subjects.scripted import (
    FunctionCallRequest,
    FunctionResult,
    Reply,
    ScriptedChatClient,
)

RESOURCE = "input-A"
POLICY = Policy(
    keys=("parser",),
    steps=(
        Step("inspect", resource_argument="path"),
        Step("commit", requires=("parser",), completes_run=True, resource_argument="path"),
        Step("deploy", needs_approval=True, resource_argument="path"),
    ),
    resources=(RESOURCE, "input-B"),
    max_steps=3,
)


def call(name: str, call_id: str, **arguments: Any) -> FunctionCallRequest:
    return FunctionCallRequest(name, {"path": RESOURCE, **arguments}, call_id=call_id)


class SdkLayeredScriptedClient(
    FunctionInvocationLayer[Any], ChatMiddlewareLayer[Any], ScriptedChatClient
):
    """The scripted provider with the SDK's own layers, stacked as its clients stack them."""


@dataclass
class Harness:
    """One guarded agent over scripted replies; counts each tool's real runs."""

    policy: Policy = POLICY
    grant: Grant = field(default_factory=lambda: Grant([RESOURCE], ["inspect", "commit", "deploy"]))
    journal: Path | None = None
    controller_class: type[Controller] = Controller
    with_model_view: bool = True
    raising: frozenset[str] = frozenset()
    runs: Counter[str] = field(default_factory=Counter)
    read: list[str] = field(default_factory=list)
    clock: Callable[[], float] | None = None
    #: The provider stacked the way the SDK's own clients are (no replan client in
    #: the chat path): only the guard's middleware stands between it and the tools.
    sdk_layered: bool = False
    ends_on_stop: bool = True
    #: what the agent's run answered (``answer_of``), per request
    answered: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.controller = self.controller_class(self.policy)
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.executor = Executor(
            None if self.journal is None else SqliteJournal.create(self.journal)
        )
        self.charged: list[object] = []
        self.guard = ReplanMiddleware(
            self.controller,
            executor=self.executor,
            grant=self.grant,
            observe_result=self.observe,
            tracer_provider=self.provider,
            tool_usage=lambda done: Usage(7, 3, 0),
            ends_on_stop=self.ends_on_stop,
            **({} if self.clock is None else {"clock": self.clock}),
        )

    def observe(self, tool: str, arguments: Mapping[str, Any], result: str) -> list[Observation]:
        if tool == "inspect":
            return [Observation("parser", 1, EvidenceState.PASSED, "inspect")]
        return []

    def tool(self, name: str) -> FunctionTool:
        def run(path: str, rows: int = 0) -> str:
            self.runs[name] += 1
            if name in self.raising:
                raise RuntimeError(f"{name} failed")
            return f"{name} done on {path}"

        return FunctionTool(name=name, description=name, func=run)

    def request(
        self, *replies: Reply, tools: Sequence[str] = ("inspect", "commit", "deploy")
    ) -> None:
        queue: Iterator[Reply] = iter([*replies, "done"])

        def script(results: Sequence[FunctionResult]) -> Reply:
            self.read.extend(f"{seen.call_id}: {seen.result}" for seen in results[len(self.read) :])
            return next(queue)

        configuration: Any = {"max_iterations": 8, "allow_concurrent_invocation": False}
        client: Any
        if self.sdk_layered:
            client = self.chat = SdkLayeredScriptedClient(
                script=script,
                usage={"total_token_count": 11},
                function_invocation_configuration=configuration,
            )
        else:
            self.chat = ScriptedChatClient(script, usage={"total_token_count": 11})
            client = FunctionInvokingChatClient(self.chat, configuration=configuration)
        agent = Agent(
            client=client,
            tools=[self.tool(name) for name in tools],
            middleware=self.guard.middleware if self.with_model_view else [self.guard],
        )
        self.answered.append(answer_of(asyncio.run(agent.run("go"))))

    def answers(self) -> list[tuple[str | None, str]]:
        return [(done.call_id, done.result) for done in self.guard.calls]

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())


def test_an_undeclared_tool_is_refused_and_never_runs() -> None:
    harness = Harness()
    harness.request(
        [FunctionCallRequest("drop_table", {"path": RESOURCE}, call_id="x1")],
        tools=("inspect", "drop_table"),
    )
    assert harness.answers() == [
        (
            "x1",
            "Refused: tool 'drop_table' is not a declared step (declared: inspect, commit, deploy)",
        )
    ]
    assert harness.runs["drop_table"] == 0
    assert harness.controller.proposals == 0  # refused before the controller was asked
    assert harness.read == ["x1: " + harness.answers()[0][1]]


def test_the_resource_comes_from_the_declared_argument() -> None:
    harness = Harness()
    harness.request(
        [FunctionCallRequest("inspect", {}, call_id="i1")],
        [FunctionCallRequest("inspect", {"path": "input-C"}, call_id="i2")],
        [FunctionCallRequest("inspect", {"path": "input-B"}, call_id="i3")],
    )
    assert harness.answers() == [
        ("i1", "Refused: the arguments do not fit tool 'inspect': path: Field required"),
        ("i2", "Refused: resource 'input-C' is not allowed (allowed: input-A, input-B)"),
        # allowed by the policy, outside the owner's grant: the executor denies it first
        ("i3", "Denied: resource 'input-B' is not granted (granted: input-A)"),
    ]
    assert harness.runs["inspect"] == 0
    assert harness.controller.steps == 0


def test_a_call_without_the_declared_resource_argument_is_refused() -> None:
    policy = Policy(
        keys=(),
        steps=(Step("inspect", completes_run=True, resource_argument="target"),),
        resources=(RESOURCE, "input-B"),
    )
    harness = Harness(policy=policy, grant=Grant([RESOURCE], ["inspect"]))
    harness.request([call("inspect", "i1")], tools=("inspect",))  # the tool has no 'target'
    assert harness.answers() == [
        (
            "i1",
            "Refused: tool 'inspect' names its resource in argument 'target', which the "
            "call does not give as a string",
        )
    ]
    assert harness.runs["inspect"] == 0


def test_arguments_that_do_not_fit_the_tool_are_refused_before_the_controller() -> None:
    harness = Harness()
    harness.request([call("inspect", "i1", rows="many")])
    assert harness.answers() == [
        (
            "i1",
            "Refused: the arguments do not fit tool 'inspect': rows: Input should be a "
            "valid integer, unable to parse string as an integer",
        )
    ]
    assert harness.runs["inspect"] == 0
    assert (harness.controller.proposals, harness.controller.steps) == (0, 0)
    assert harness.executor.in_doubt() == []


@pytest.mark.parametrize(
    "text",
    ['{"path": "input-A", "rows": ' + "9" * 5001 + "}", "[" * 100_000 + "]" * 100_000],
    ids=["a 5001-digit integer", "100,000-deep nesting"],
)
def test_unparseable_tool_call_json_is_refused_and_never_runs(text: str) -> None:
    """Text the SDK's parser raises on (not JSONDecodeError) reaches the guard as a
    malformed call, on a provider with the SDK's own layers: the model view repairs it."""
    harness = Harness(sdk_layered=True)
    harness.request([FunctionCallRequest("inspect", text, call_id="i1")])  # never raises
    ((call_id, answer),) = harness.answers()
    assert call_id == "i1"
    assert answer.startswith("Refused: the arguments do not fit tool 'inspect'")
    assert harness.runs["inspect"] == 0
    assert harness.executor.in_doubt() == []


def test_a_policy_that_cannot_name_the_resource_is_refused_at_once() -> None:
    policy = Policy(
        keys=(), steps=(Step("inspect"), Step("commit", completes_run=True)), resources=("a", "b")
    )
    with pytest.raises(PolicyError, match=r"^steps\[0\]\.resource_argument: missing field"):
        ReplanMiddleware(Controller(policy), executor=Executor(), grant=Grant(["a"], ["inspect"]))
    # one resource: every call names it
    single = Policy(keys=(), steps=(Step("inspect", completes_run=True),), resources=("a",))
    guard = ReplanMiddleware(
        Controller(single), executor=Executor(), grant=Grant(["a"], ["inspect"])
    )
    assert guard.default_resource == "a"


def test_precondition_then_stale_then_executed() -> None:
    harness = Harness()
    harness.request(
        [call("commit", "c1")],
        [call("inspect", "i1"), call("commit", "c2")],  # c2 planned before i1's evidence
        [call("commit", "c3")],
    )
    assert harness.answers() == [
        ("c1", "PreconditionDenied: parser is Unknown"),
        ("i1", "inspect done on input-A"),
        (
            "c2",
            "StalePlan: evidence changed since this call was planned (evidence revision 1, "
            "now 2), re-plan",
        ),
        ("c3", "commit done on input-A"),
    ]
    assert harness.runs == Counter({"inspect": 1, "commit": 1})
    assert str(harness.controller.stop_reason) == "Completed"


def test_without_the_model_view_a_call_cites_the_revision_it_arrives_at() -> None:
    harness = Harness(with_model_view=False)
    harness.request([call("inspect", "i1"), call("commit", "c1")])
    assert [result for _, result in harness.answers()] == [
        "inspect done on input-A",
        "commit done on input-A",
    ]


def _one_step_policy_harness(**options: Any) -> Harness:
    return Harness(
        policy=Policy(
            keys=(),
            steps=(
                Step("inspect", completes_run=True, resource_argument="path"),
                Step("commit", resource_argument="path"),
            ),
            resources=(RESOURCE,),
            max_steps=1,
        ),
        grant=Grant([RESOURCE], ["inspect", "commit"]),
        **options,
    )


def test_a_stop_ends_the_agents_run_with_why_and_the_handoff() -> None:
    """The call that finds the run stopped is refused, its result says why and what
    is left, and the SDK's loop ends there: the model is asked nothing more, and the
    agent's run answers with that result (no exception)."""
    harness = _one_step_policy_harness()
    harness.request([call("commit", "c1")], [call("commit", "c2")], [call("inspect", "i1")])
    assert harness.answers() == [("c1", "commit done on input-A"), ("c2", "Stopped: StepLimit")]
    [answered] = harness.answered
    assert answered.startswith("Stopped: StepLimit\nThe run has stopped (StepLimit)")
    assert '"steps": "1 of 1"' in answered
    assert len(harness.chat.calls) == 2  # nothing asked after the stop
    assert harness.runs == Counter({"commit": 1})


def test_a_stopped_run_refuses_every_call_when_the_loop_goes_on() -> None:
    harness = _one_step_policy_harness(ends_on_stop=False)
    harness.request([call("commit", "c1")], [call("commit", "c2")], [call("inspect", "i1")])
    assert harness.answers() == [
        ("c1", "commit done on input-A"),
        ("c2", "Stopped: StepLimit"),
        ("i1", "Stopped: StepLimit"),
    ]
    assert harness.runs == Counter({"commit": 1})


def test_a_retry_is_answered_from_the_journal(tmp_path: Path) -> None:
    harness = Harness(journal=tmp_path / "run.journal")
    harness.request(
        [call("inspect", "i1")], [call("inspect", "i1")], [call("inspect", "i1", rows=9)]
    )
    assert harness.answers()[:2] == [("i1", "inspect done on input-A")] * 2
    assert [done.outcome for done in harness.guard.calls] == [
        "Executed",
        "Replayed",
        "ContentMismatch",
    ]
    assert harness.answers()[2][1].startswith(
        "ContentMismatch: plan 'i1' is bound to other content"
    )
    assert harness.runs == Counter({"inspect": 1})
    assert (harness.controller.steps, harness.controller.proposals) == (1, 1)


def test_a_tool_that_raised_is_in_doubt_and_never_rerun() -> None:
    harness = Harness(raising=frozenset({"inspect"}))
    harness.request([call("inspect", "i1")], [call("inspect", "i1")])
    assert harness.runs == Counter({"inspect": 1})
    (retried,) = harness.guard.calls  # the first raised through the guard (the SDK answered)
    assert retried.outcome == "InDoubt"
    assert [intent.plan_id for intent in harness.executor.in_doubt()] == ["i1"]


def test_a_call_awaiting_approval_runs_once_approved() -> None:
    harness = Harness()
    harness.request([call("deploy", "d1")])
    assert harness.answers() == [
        ("d1", "AwaitingApproval: a person must approve this call before it runs")
    ]
    (waiting,) = harness.guard.awaiting()  # the call, its arguments and its digest
    assert waiting.plan_id == "d1"
    assert harness.guard.approve(Approval("d1", waiting.digest())).accepted
    harness.request([call("deploy", "d1")])  # the same call, asked again: not re-proposed
    assert harness.answers()[1] == ("d1", "deploy done on input-A")
    assert harness.runs == Counter({"deploy": 1})
    assert harness.controller.proposals == 1


def test_each_tool_call_and_each_provider_response_is_charged() -> None:
    """The guard charges every executed call (the host's tool_usage plus the wall
    time it measures) and every provider round trip (the reported tokens plus its
    wall time): the controller's trace holds each charge, in order."""
    harness = Harness()
    harness.request([call("inspect", "i1")], [call("commit", "c1")])
    charges = [entry[1] for entry in harness.controller._trace if entry[0] == "charge"]
    tool_charges = [usage for usage in charges if (usage.tokens, usage.cost) == (7, 3)]
    assert len(tool_charges) == 2  # i1 and c1 ran
    response_charges = [usage for usage in charges if usage.tokens == 11]
    # two provider calls: c1 completes the run, which ends the agent's run
    assert len(response_charges) == len(harness.chat.calls) == 2
    assert len(charges) == len(tool_charges) + len(response_charges)
    assert all(type(amount) is int and amount >= 0 for usage in charges for amount in usage)


def test_time_is_read_from_the_guards_one_clock() -> None:
    """A tool's and a provider call's wall time both come from the guard's clock
    (a durable run records that clock, so a recovered run charges the same)."""
    ticks = iter(range(10_000))
    harness = Harness(clock=lambda: next(ticks) * 0.25)  # 250 ms between two readings
    harness.request([call("inspect", "i1")], [call("commit", "c1")])
    charges = [entry[1] for entry in harness.controller._trace if entry[0] == "charge"]
    assert charges and {usage.elapsed_ms for usage in charges} == {250}


# ---- spans -------------------------------------------------------------------------------


def test_spans_name_each_call_as_the_diagram_does() -> None:
    harness = Harness()
    with agent_run("importer", tracer_provider=harness.provider):
        harness.request(
            [call("commit", "c1")],
            [call("inspect", "i1")],
            [call("commit", "c2")],
            tools=("inspect", "commit", "drop"),
        )
        harness.request([FunctionCallRequest("drop", {}, call_id="x1")], tools=("drop",))
    spans = harness.spans()
    by_id = {span.context.span_id: span for span in spans}
    (run,) = [span for span in spans if span.parent is None]
    assert run.name == "invoke_agent importer"
    assert dict(run.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "importer",
    }
    tools = [span for span in spans if span.name.startswith("execute_tool ")]
    assert [(span.name, dict(span.attributes or {})) for span in tools] == [
        (
            f"execute_tool {name}",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.id": call_id,
                "replan.plan_id": call_id,
                "replan.result": result,
            },
        )
        for name, call_id, result in (
            ("commit", "c1", "PreconditionDenied"),
            ("inspect", "i1", "Executed"),
            ("commit", "c2", "Executed"),
            ("drop", "x1", "Refused"),
        )
    ]
    assert all(by_id[span.parent.span_id] is run for span in tools if span.parent)
    children = {
        tool.attributes["gen_ai.tool.call.id"] if tool.attributes else None: [
            (span.name, dict(span.attributes or {}))
            for span in spans
            if span.parent is not None and span.parent.span_id == tool.context.span_id
        ]
        for tool in tools
    }
    assert children["c1"] == [
        (
            "propose #8 [else] / accept_plan",
            {
                "replan.transition": "idle --propose--> pending",
                "replan.operation": "propose",
                "replan.argument": (
                    '{"id":"c1","revision":1,"evidence_revision":1,"step":"commit",'
                    '"resource":"input-A"}'
                ),
                "replan.seq": 2,  # 1: the first provider response's charge
                "replan.policy": POLICY.digest,
                "replan.result": "true",
                "replan.evidence_revision": 1,
                "replan.state": "pending",
                "replan.plan_id": "c1",
            },
        ),
        (
            "execute #5 [not prerequisites_passed] / deny_precondition",
            {
                "replan.transition": "pending --execute[not prerequisites_passed]--> pending",
                "replan.operation": "execute",
                "replan.argument": '"c1"',
                "replan.seq": 3,
                "replan.policy": POLICY.digest,
                "replan.result": "PreconditionDenied",
                "replan.evidence_revision": 1,
                "replan.state": "pending",
                "replan.plan_id": "c1",
            },
        ),
    ]
    assert [name for name, _ in children["i1"]] == [
        "propose #8 [else] / accept_plan",
        "execute #8 [else] / execute_step",
        "observe #7 [changes_state] / record_meaningful",
        "charge #2 [else] / record_charge",  # the tool's wall time, from the guard's clock
    ]
    # the tool's wall time is charged after the step completed the run: absorbed
    assert children["c2"][-1][0] == "Completed absorbs charge"
    assert children["c2"][-2] == (
        "execute #7 [completes_run] / execute_step",
        {
            "replan.transition": "pending --execute[completes_run]--> completed",
            "replan.operation": "execute",
            "replan.argument": '"c2"',
            "replan.seq": 11,  # after 3 provider charges and i1's
            "replan.policy": POLICY.digest,
            "replan.result": "Executed",
            "replan.evidence_revision": 2,
            "replan.state": "Completed",
            "replan.stop_reason": "Completed",
            "replan.plan_id": "c2",
        },
    )
    assert children["x1"] == []  # refused before the controller was asked


def test_span_names_are_the_diagrams_labels() -> None:
    from replan.spec.declaration import Replanning
    from replan.spec.model import extract
    from replan.verification.report.diagram.graph import build

    edges = build(extract(Replanning), POLICY).edges
    assert {edge.index: edge.text for edge in edges} == dict(enumerate(LABELS))
    assert len(LABELS) == len(TRANSITIONS)


def test_without_a_provider_spans_do_not_record() -> None:
    traced = TracedController(Controller())  # the global provider: the API's no-op one
    span = traced.tracer.start_span("probe")
    assert not span.is_recording()
    assert traced.observe(Observation("parser", 1, EvidenceState.PASSED, "ci"))
    assert traced.evidence_revision == 2 and len(traced.trace) == 1


def test_a_raising_call_is_an_error_span() -> None:
    harness = Harness()
    traced = TracedController(harness.controller, tracer_provider=harness.provider)
    with pytest.raises(ValueError):
        traced.observe("not an observation")  # type: ignore[arg-type]
    (span,) = harness.spans()
    assert span.name == "observe" and span.status.status_code.name == "ERROR"
    assert span.attributes is not None and span.attributes["replan.result"] == "InvalidInput"


def test_the_guarded_call_record() -> None:
    harness = Harness()
    harness.request([call("inspect", "i1")])
    (done,) = harness.guard.calls
    assert isinstance(done, GuardedCall)
    assert (done.tool, done.outcome, dict(done.arguments)) == (
        "inspect",
        "Executed",
        {"path": RESOURCE},
    )
    assert done.plan is not None and (done.plan.step, done.plan.resource) == ("inspect", RESOURCE)
    assert done.tool_ms is not None and done.tool_ms >= 0


def test_the_middleware_loads_neither_statemachine_nor_the_otel_sdk() -> None:
    import subprocess
    import sys

    code = (
        "import sys, controller.agent, controller.middleware, controller.telemetry; "
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & {'statemachine', 'hypothesis', "
        "'z3'} | {m for m in sys.modules if m.startswith('opentelemetry.sdk')}); "
        "print(loaded); sys.exit(1 if loaded else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
