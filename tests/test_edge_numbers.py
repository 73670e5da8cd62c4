"""Numbers at the edges: every integer a run takes or a policy sets is bounded by
``LARGEST_INT`` (2**53 - 1, exact in every JSON reader), so a snapshot, a trace and a
run log stay JSON and exact; what a provider reports is clamped into that range, so
reported usage never raises; model-facing calls never raise whatever number they get.
The Hypothesis campaigns at the end put numbers at the edges into every numeric input:
the run's calls, the policy's limits and a provider's usage, then the same through the
SDK as a model and a provider send them (the agent tools, and a guarded agent's tool
calls and reported usage)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replan.cli import main
from replan.controller import (
    DEFAULT_POLICY,
    Controller,
    EvidenceState,
    ExecuteResult,
    InvalidInput,
    Observation,
    ObservationConflict,
    Plan,
    Policy,
    PolicyError,
    Step,
    Usage,
)
from replan.controller.agent import (
    EXECUTE_STEP,
    PROPOSE_PLAN,
    ControllerAgent,
    FunctionInvokingChatClient,
    ReplanMiddleware,
)
from replan.controller.executor import Executor, Grant
from replan.controller.middleware import answer_of, budget_status, reported_tokens
from replan.controller.policy import policy_from_dict, policy_to_dict
from replan.controller.policy_schema import DOCUMENT
from replan.controller.records import LARGEST_INT
from replan.spec.reference import ReferenceController
from replan.verification.subjects.scripted import FunctionCallRequest, Reply, ScriptedChatClient

PASSED = EvidenceState.PASSED
HUGE = 10**5000


def budgeted(**limits: int) -> Policy:
    document = policy_to_dict(DEFAULT_POLICY)
    document["limits"].update({"max_tokens": 1000, "max_cost": 1000, "max_wall_ms": 1000})
    document["limits"]["currency"] = "USD"
    document["limits"].update(limits)
    return policy_from_dict(document)


def as_json(document: Any) -> Any:
    """``document`` through JSON and back, refusing NaN: what any reader gets."""
    return json.loads(json.dumps(document, allow_nan=False))


# ---- the plan's revisions: model input ----------------------------------------------


@pytest.mark.parametrize("implementation", [Controller, ReferenceController])
def test_a_revision_past_the_bound_is_a_rejected_proposal_and_the_snapshot_stays_json(
    implementation: type[Controller],
) -> None:
    run = implementation()
    assert run.propose(Plan("p1", HUGE, 1, "inspect-parser", "input-A")) is False
    assert run.proposals == 1 and run.pending is None and run.plan_revision == 0
    assert run.propose(Plan("p2", LARGEST_INT + 1, 1, "inspect-parser", "input-A")) is False
    assert as_json(run.snapshot()) == run.snapshot()
    as_json(run.trace)


@pytest.mark.parametrize("implementation", [Controller, ReferenceController])
def test_a_revision_at_the_bound_is_accepted_and_read_back_exactly(
    implementation: type[Controller],
) -> None:
    run = implementation()
    assert run.propose(Plan("p1", LARGEST_INT, 1, "inspect-parser", "input-A")) is True
    assert as_json(run.snapshot())["plan_revision"] == LARGEST_INT
    assert as_json(run.snapshot())["pending"]["revision"] == LARGEST_INT


# ---- the observation's version: host input ------------------------------------------


@pytest.mark.parametrize("implementation", [Controller, ReferenceController])
def test_an_observation_version_past_the_bound_is_invalid_input_naming_the_field(
    implementation: type[Controller],
) -> None:
    run = implementation()
    before = run.snapshot()
    with pytest.raises(InvalidInput, match=r"observation\.version: .*9007199254740991"):
        run.observe(Observation("parser", HUGE, PASSED, "ci"))
    assert run.snapshot() == before


@pytest.mark.parametrize("implementation", [Controller, ReferenceController])
def test_a_conflict_at_the_largest_version_is_an_observation_conflict(
    implementation: type[Controller],
) -> None:
    run = implementation()
    run.observe(Observation("parser", LARGEST_INT, PASSED, "ci"))
    with pytest.raises(ObservationConflict, match="conflicts with the recorded"):
        run.observe(Observation("parser", LARGEST_INT, EvidenceState.FAILED, "ci"))
    assert as_json(run.snapshot()) == run.snapshot()


# ---- usage: host input; what a provider reports ---------------------------------------


@pytest.mark.parametrize("implementation", [Controller, ReferenceController])
def test_a_usage_past_the_bound_is_invalid_input_and_changes_nothing(
    implementation: type[Controller],
) -> None:
    run = implementation(budgeted())
    before = run.snapshot()
    for usage, field in (
        (Usage(HUGE, 0, 0), "tokens"),
        (Usage(0, 0, LARGEST_INT + 1), "elapsed_ms"),
    ):
        with pytest.raises(InvalidInput, match=rf"usage\.{field}: .*9007199254740991"):
            run.charge(usage)
    assert run.snapshot() == before
    assert run.charge(Usage(LARGEST_INT, LARGEST_INT, LARGEST_INT)) is True
    assert run.stop_reason is not None
    assert as_json(run.snapshot()) == run.snapshot()


@pytest.mark.parametrize(
    "reported",
    [float("-inf"), float("inf"), float("nan"), -5, 10**40, 1e300, HUGE, True, "many", None],
    ids=["-inf", "inf", "nan", "negative", "10**40", "1e300", "10**5000", "bool", "str", "None"],
)
def test_whatever_a_provider_reports_is_a_usage_charge_takes(reported: Any) -> None:
    usage = reported_tokens({"total_token_count": reported})
    assert all(type(amount) is int and 0 <= amount <= LARGEST_INT for amount in usage)
    run = Controller(budgeted())
    assert run.charge(usage) is True


def test_a_provider_reporting_more_than_the_bound_reports_the_bound() -> None:
    assert reported_tokens({"total_token_count": 10**40}).tokens == LARGEST_INT
    assert reported_tokens({"input_token_count": LARGEST_INT, "output_token_count": 5}).tokens == (
        LARGEST_INT
    )


# ---- the policy's limits ---------------------------------------------------------------


@pytest.mark.parametrize(
    "limit", ["max_steps", "max_proposals", "no_progress_limit", "max_tokens", "max_cost"]
)
def test_a_policy_limit_past_the_bound_is_a_policy_error_naming_it(limit: str) -> None:
    document = policy_to_dict(budgeted())
    document["limits"][limit] = 10**400
    with pytest.raises(PolicyError, match=rf"limits\.{limit}: must be at most 9007199254740991"):
        policy_from_dict(document)


def test_a_policy_limit_past_the_bound_written_in_a_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(
        (Path(__file__).parent / "policies" / "budget.toml")
        .read_text(encoding="utf-8")
        .replace("max_tokens = ", "max_tokens = 1" + "0" * 400 + " # "),
        encoding="utf-8",
    )
    assert main(["policy", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "limits.max_tokens: must be at most" in err[0], err


def test_the_default_proposal_budget_of_the_largest_step_budget_is_the_bound() -> None:
    document = policy_to_dict(DEFAULT_POLICY)
    del document["limits"]["max_proposals"]
    document["limits"]["max_steps"] = LARGEST_INT
    assert policy_from_dict(document).max_proposals == LARGEST_INT


def test_the_budget_line_at_the_largest_budget_does_not_raise() -> None:
    """A budget the model is told about (every executed tool call's result carries the
    line past 80%): at the bound it is a line, never an error that reads as a failed
    tool call to the model."""
    run = Controller(budgeted(max_tokens=LARGEST_INT))
    run.charge(Usage(LARGEST_INT - 1, 0, 0))
    line = budget_status(run)
    assert line is not None and "tokens 9007199254740990 of 9007199254740991" in line


# ---- conform: a run that used the bound's edge ----------------------------------------


def test_a_run_that_proposed_a_huge_revision_conforms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Controller()
    run.propose(Plan("p1", HUGE, 1, "inspect-parser", "input-A"))
    run.propose(Plan("p2", LARGEST_INT, 1, "inspect-parser", "input-A"))
    run.execute("p2")
    run.propose(Plan("p3", -HUGE, 1, "inspect-parser", "input-A"))
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run.trace), encoding="utf-8")
    assert main(["conform", str(path)]) == 0, capsys.readouterr()
    assert "conforms" in capsys.readouterr().out


# ---- Hypothesis: numbers at the edges into every numeric input --------------------------

BIG = [LARGEST_INT - 1, LARGEST_INT, LARGEST_INT + 1, 2**63, 10**400]
NEGATIVE = [-LARGEST_INT, -LARGEST_INT - 1, -(2**63)]
EDGE_INTS = st.one_of(
    st.integers(-3, 5),
    st.sampled_from([*BIG, HUGE]),
    st.sampled_from([*NEGATIVE, -HUGE]),
    st.integers(),
)
NO_INTS = st.one_of(
    st.booleans(),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 1.5, 1e300, -1e300]),
    st.floats(allow_nan=True, allow_infinity=True),
)
EDGE_NUMBERS = st.one_of(EDGE_INTS, NO_INTS)
STEPS = [step.name for step in DEFAULT_POLICY.steps]
plans = st.builds(
    Plan,
    st.sampled_from(["p1", "p2", "p3"]),
    EDGE_NUMBERS,
    st.one_of(st.just(1), st.just(2), EDGE_NUMBERS),
    st.sampled_from(STEPS),
    st.just("input-A"),
)
observations = st.builds(
    Observation,
    st.sampled_from(["parser", "access"]),
    EDGE_NUMBERS,
    st.sampled_from(list(EvidenceState)),
    st.just("ci"),
)
usages = st.builds(Usage, EDGE_NUMBERS, EDGE_NUMBERS, EDGE_NUMBERS)
calls = st.lists(
    st.one_of(
        st.tuples(st.just("propose"), plans),
        st.tuples(st.just("execute"), st.one_of(st.sampled_from(["p1", "p2"]), EDGE_NUMBERS)),
        st.tuples(st.just("observe"), observations),
        st.tuples(st.just("charge"), usages),
    ),
    max_size=12,
)
MODEL_FACING = {"propose", "execute"}
HOST_ERRORS = (InvalidInput, ObservationConflict)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(calls)
def test_numbers_at_the_edges_never_raise_from_model_calls_and_keep_every_record_json(
    sequence: list[tuple[str, Any]],
) -> None:
    run = Controller(budgeted(max_tokens=LARGEST_INT, max_cost=LARGEST_INT, max_wall_ms=5))
    for op, argument in sequence:
        if op in MODEL_FACING:
            answer = getattr(run, op)(argument)  # never raises
            assert isinstance(answer, bool | ExecuteResult)
        else:
            with contextlib.suppress(HOST_ERRORS):  # a host bug is loud (and changes
                getattr(run, op)(argument)  # nothing: the contract tests say so)
        snapshot = run.snapshot()
        assert as_json(snapshot) == snapshot
        for value in _integers(snapshot):
            assert -LARGEST_INT <= value <= 2 * LARGEST_INT, value  # a count passes its
            # limit by at most one charge, once the budget is exhausted
    as_json(run.trace)


def _integers(document: Any) -> list[int]:
    if isinstance(document, bool):
        return []
    if isinstance(document, int):
        return [document]
    if isinstance(document, dict):
        return [v for item in document.values() for v in _integers(item)]
    if isinstance(document, list):
        return [v for item in document for v in _integers(item)]
    return []


#: Every number a policy file sets, read from the policy file's declaration: a numeric
#: field added to any table is in the campaign (and fails the next test until placed).
NUMERIC_FIELDS = [
    (table.name, field.name)
    for table in DOCUMENT.tables
    for field in table.fields
    if field.kind == "positive"
]
LIMITS = [name for table, name in NUMERIC_FIELDS if table == "limits"]


def test_every_number_a_policy_sets_is_a_limit_the_campaign_tries() -> None:
    assert len(LIMITS) == len(NUMERIC_FIELDS) >= 6, NUMERIC_FIELDS


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(st.sampled_from(LIMITS), EDGE_NUMBERS, min_size=1))
def test_numbers_at_the_edges_of_a_policy_load_within_the_bound_or_fail_in_one_line(
    limits: dict[str, Any],
) -> None:
    document = policy_to_dict(DEFAULT_POLICY)
    document["limits"].update(limits, currency="USD")
    try:
        policy = policy_from_dict(document)
    except PolicyError as error:
        message = str(error)
        assert message.startswith("limits.") and "\n" not in message and len(message) < 400
        return
    for name in LIMITS:
        assert 0 <= getattr(policy, name) <= LARGEST_INT
    run = Controller(policy)
    assert run.propose(Plan("p1", 1, 1, "inspect-parser", "input-A")) is True
    assert run.execute("p1") in (ExecuteResult.EXECUTED, ExecuteResult.STEP_LIMIT)
    as_json(run.snapshot())
    as_json(run.trace)
    budget_status(run)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.dictionaries(
        st.sampled_from(["total_token_count", "input_token_count", "output_token_count"]),
        EDGE_NUMBERS,
    )
)
def test_numbers_at_the_edges_a_provider_reports_never_raise(reported: dict[str, Any]) -> None:
    usage = reported_tokens(reported)
    assert all(type(amount) is int and 0 <= amount <= LARGEST_INT for amount in usage)
    run = Controller(budgeted())
    assert run.charge(usage) is True
    as_json(run.snapshot())


# ---- Hypothesis: the same numbers as a model and a provider send them through the SDK ----

#: What a provider's wire carries for a number: JSON text, where NaN and the infinities
#: are written as JavaScript writes them (an integer JSON cannot even write, 10**5000,
#: left out: tests/test_agent.py sends such text as it is).
WIRE_NUMBERS = st.one_of(
    st.integers(-3, 5), st.sampled_from(BIG), st.sampled_from(NEGATIVE), st.integers(), NO_INTS
)
TOOL_ANSWERS = {"true", "false"} | {str(result) for result in ExecuteResult}


def _scripted(replies: list[Reply]) -> ScriptedChatClient:
    queue = iter([*replies, "done"])
    return ScriptedChatClient(lambda results: next(queue, "done"))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(revision=WIRE_NUMBERS, evidence_revision=WIRE_NUMBERS, step_id=WIRE_NUMBERS)
def test_numbers_at_the_edges_from_a_model_through_the_agent_tools_are_answers_never_errors(
    revision: Any, evidence_revision: Any, step_id: Any
) -> None:
    """``propose_plan`` and ``execute_step`` as the SDK invokes them for a model: every
    number on the wire is a plain answer the model reads (never the SDK's "Function
    failed"), and the run's records stay JSON."""
    arguments = {
        "planId": "p1",
        "revision": revision,
        "evidenceRevision": evidence_revision,
        "step": "inspect-parser",
        "resource": "input-A",
    }
    provider = _scripted(
        [
            [FunctionCallRequest(PROPOSE_PLAN, json.dumps(arguments), call_id="c1")],
            [FunctionCallRequest(EXECUTE_STEP, json.dumps({"stepId": "p1"}), call_id="c2")],
            [FunctionCallRequest(EXECUTE_STEP, json.dumps({"stepId": step_id}), call_id="c3")],
        ]
    )
    controller = Controller()
    ControllerAgent(controller, provider).request_sync("go")  # never raises
    answers = [seen.result for seen in provider.calls[-1].results_seen]
    assert len(answers) == 3 and set(answers) <= TOOL_ANSWERS, answers
    assert controller.proposals == 1
    assert as_json(controller.snapshot()) == controller.snapshot()
    assert all(abs(value) <= LARGEST_INT for value in _integers(controller.snapshot()))
    as_json(controller.trace)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    reported=st.dictionaries(
        st.sampled_from(["total_token_count", "input_token_count", "output_token_count"]),
        EDGE_NUMBERS,
    ),
    path=st.one_of(st.just("input-A"), WIRE_NUMBERS),
    rows=WIRE_NUMBERS,
)
def test_numbers_at_the_edges_through_a_guarded_agent_never_raise_out_of_its_run(
    reported: dict[str, Any], path: Any, rows: Any
) -> None:
    """A guarded agent whose provider reports any usage and whose model sends any
    number as a tool's arguments: the run never raises, a refused call never runs its
    tool, an executed one is never reported to the model as failed, and the
    controller's records stay JSON."""
    ran: list[Any] = []

    def inspect(path: Any, rows: Any = 0) -> str:
        ran.append(path)
        return "inspected"

    controller = Controller(
        Policy(
            keys=("parser",),
            steps=(Step("inspect", completes_run=True, resource_argument="path"),),
            resources=("input-A",),
            max_tokens=LARGEST_INT,
            max_wall_ms=LARGEST_INT,
        )
    )
    guard = ReplanMiddleware(
        controller, executor=Executor(), grant=Grant(resources=["input-A"], steps=["inspect"])
    )
    call = json.dumps({"path": path, "rows": rows})
    provider = ScriptedChatClient(
        lambda results: (
            [FunctionCallRequest("inspect", call, call_id="c1")] if not results else "done"
        ),
        usage=reported,
    )
    agent = Agent(
        client=FunctionInvokingChatClient(provider),
        tools=[inspect],
        middleware=guard.middleware,
    )
    response = asyncio.run(agent.run("go"))  # never raises
    # the model reads a refusal in its next request; a call that completes the run
    # ends it, with its result as the run's answer
    seen = [seen.result for seen in provider.calls[-1].results_seen]
    (answer,) = seen or [answer_of(response)]
    assert "Function failed" not in answer, answer
    assert answer.startswith("inspected") == bool(ran), answer  # ran: the model reads it
    assert not ran or path == "input-A"  # a resource the policy does not allow: refused
    assert as_json(controller.snapshot()) == controller.snapshot()
    assert all(abs(value) <= 2 * LARGEST_INT for value in _integers(controller.snapshot()))
    as_json(controller.trace)
