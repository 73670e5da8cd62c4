"""The reference episode: one SDK request with a scripted provider, then the host's
evidence and the later proposals, recorded call by call and checked fact by fact.

Owns: the episode, its record (``run_reference_episode() -> dict``, the
document ``replan trace`` writes to ``evidence/replan-trace.json``), and the facts it
must show. ``replan verify`` calls ``run_reference_episode`` too.

Which calls go through the SDK: exactly one SDK request (``ControllerAgent.request``)
in which the scripted provider proposes p1 and executes it; the SDK's
function-invocation layer makes those two controller calls ("via": "sdk"). The host's
evidence goes to ``observe`` directly ("via": "host"), as it always must: no tool
observes. The later proposals and executions are made on the controller directly
("via": "direct"): they stand for what a provider would send next, and calling them
directly lets the episode reach each state the issue names with one provider script;
the SDK path itself is pinned by the one request and by tests/test_agent*.py.

Leaves to others: the controller's decisions (``controller``), the SDK wiring
(``controller.agent``), the provider (``verification.subjects.scripted``).
"""

from __future__ import annotations

import importlib.metadata
import json
import platform
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from replan.controller import Controller
from replan.controller.agent import FUNCTION_INVOCATION, ControllerAgent
from replan.controller.policy import DEFAULT_POLICY, Policy, policy_to_dict
from replan.controller.records import (
    Approval,
    EvidenceState,
    ExecuteResult,
    Observation,
    Plan,
    StopReason,
    plan_digest,
)
from replan.spec.reference import ReferenceController
from replan.verification.core.harness import operations_from_trace, run_sequence
from replan.verification.subjects.scripted import ScriptedChatClient, propose_then_execute

#: How the record names the default policy.
DEFAULT_POLICY_NAME = "default (spec/policy.toml)"

#: Keys of the record that differ from run to run; everything else is reproducible.
VOLATILE_KEYS = ("generated_at", "versions")

#: The expected totals: a fresh run must show exactly these.
EXPECTED_TOTALS = {
    "executed_steps": 2,
    "proposals_considered": 4,
    "provider_calls_in_sdk_request": 3,
}

PROVIDER_STATEMENT = (
    "The provider is scripted: replan.verification.subjects.scripted.ScriptedChatClient "
    "follows a fixed script (propose p1, execute it once the result says it was accepted, "
    "then answer in text). It is not a language model and calls no service; it only reads "
    "the function results the SDK hands back. What this record shows is the integration and the "
    "controller's decisions, not model quality."
)

SDK_STATEMENT = (
    "One SDK request (agent-framework-core's function-invocation layer around the "
    "scripted provider): the calls marked via=sdk were made by the SDK when the provider "
    "asked for them. Calls marked via=host are the host delivering evidence with "
    "observe (never offered to the provider). Calls marked via=direct are the later "
    "model-side calls, made on the controller directly so the episode reaches each "
    "state with one provider script; the SDK path is pinned by the SDK request and by "
    "tests/test_agent*.py."
)

SDK_PROMPT = "Evidence revision 1: parser is Unknown. Propose the next step and execute it."

P1 = {
    "planId": "p1",
    "revision": 1,
    "evidenceRevision": 1,
    "step": "inspect-parser",
    "resource": "input-A",
}


def class_name(cls: object) -> str:
    """``module.QualifiedName`` of a class (a mutant's generated class included)."""
    return f"{getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', repr(cls))}"


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for package in ("replan", "agent-framework-core", "python-statemachine", "pydantic"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


class _Facts:
    """The facts the episode must show; each one records what was observed."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def expect(self, fact: str, observed: Any, expected: Any) -> None:
        # Compared and kept in their JSON form, so that a record read back from disk
        # compares equal to a fresh one.
        observed, expected = _as_json(observed), _as_json(expected)
        self.items.append(
            {
                "fact": fact,
                "holds": observed == expected,
                "observed": observed,
                "expected": expected,
            }
        )

    def failing(self) -> list[dict[str, Any]]:
        return [item for item in self.items if not item["holds"]]


def _as_json(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def run_reference_episode(
    controller_class: Callable[[Policy], Any] = Controller,
    *,
    timestamp: datetime | None = None,
) -> dict[str, Any]:
    """Run the reference episode on a fresh ``controller_class(DEFAULT_POLICY)`` and
    return its record: every call in order with its result and which path made it,
    the provider's view of the SDK request, the totals, the facts (``holds`` is True
    only when every one of them held), package versions and a timestamp."""
    policy = DEFAULT_POLICY
    controller = controller_class(policy)
    facts = _Facts()
    via: list[str] = []
    notes: list[str] = []

    def host_observes(note: str, obs: Observation) -> Any:
        return _call("host", note, lambda: controller.observe(obs))

    def direct(note: str, call: Callable[[], Any]) -> Any:
        return _call("direct", note, call)

    def _call(path: str, note: str, call: Callable[[], Any]) -> Any:
        before = len(controller.trace)
        result = call()
        added = len(controller.trace) - before
        via.extend([path] * added)
        notes.extend([note] * added)
        return result

    # 1. Nothing known yet: parser reads Unknown at evidence revision 1. Observing it
    #    is not progress (a never-observed key already reads Unknown).
    answer = host_observes(
        "host: parser Unknown (v1)", Observation("parser", 1, EvidenceState.UNKNOWN, "ci")
    )
    facts.expect("parser Unknown (v1) is not meaningful", answer, False)
    facts.expect("evidence revision after parser Unknown", controller.evidence_revision, 1)

    # 2. One SDK request: the scripted provider proposes p1 and executes it.
    provider = ScriptedChatClient(propose_then_execute(P1))
    agent = ControllerAgent(controller, provider)
    before = len(controller.trace)
    response = agent.request_sync(SDK_PROMPT)
    sdk_records = controller.trace[before:]
    via.extend(["sdk"] * len(sdk_records))
    requested = [
        (call.number, f"call-{call.number}-{index}", request.name)
        for call in provider.calls
        if not isinstance(call.reply, str)
        for index, request in enumerate(call.reply, start=1)
    ]
    for index in range(len(sdk_records)):
        if index < len(requested):
            number, call_id, name = requested[index]
            notes.append(f"sdk: {name} asked for by provider call {number} ({call_id})")
        else:
            notes.append("sdk: not matched to a provider request")
    facts.expect(
        "every function call the provider asked for reached the controller once",
        len(sdk_records),
        len(requested),
    )
    facts.expect(
        "SDK request: controller calls and answers",
        [(record["op"], record["result"]) for record in sdk_records],
        [("propose", True), ("execute", "Executed")],
    )
    facts.expect(
        "p1 proposed through the SDK: inspect-parser citing revision 1",
        sdk_records[0]["args"] if sdk_records else None,
        {
            "plan": {
                "id": "p1",
                "revision": 1,
                "evidence_revision": 1,
                "step": "inspect-parser",
                "resource": "input-A",
            }
        },
    )
    facts.expect(
        "the provider read each result before its next reply",
        [[seen.result for seen in call.results_seen] for call in provider.calls],
        [[], ["true"], ["true", "Executed"]],
    )
    facts.expect("the provider's last reply is plain text", response.text, provider.calls[-1].reply)
    facts.expect("steps after the SDK request", controller.steps, 1)

    # 3. The host's evidence: parser Passed, access Failed -> revision 3.
    parser_passed = host_observes(
        "host: parser Passed (v2)", Observation("parser", 2, EvidenceState.PASSED, "ci")
    )
    access_failed = host_observes(
        "host: access Failed (v1)", Observation("access", 1, EvidenceState.FAILED, "ci")
    )
    facts.expect(
        "parser Passed and access Failed are meaningful",
        [parser_passed, access_failed],
        [True, True],
    )
    facts.expect(
        "evidence revision after parser Passed, access Failed", controller.evidence_revision, 3
    )
    facts.expect("no plan pending at revision 3", controller.pending, None)

    # 4. A proposal citing revision 1 is refused as stale.
    before = len(controller.trace)
    stale = direct(
        "direct: commit-import citing revision 1",
        lambda: controller.propose(Plan("p2-early", 2, 1, "commit-import", "input-A")),
    )
    facts.expect("a proposal citing revision 1 is refused", stale, False)
    refusal = controller.trace[before]["transition"] if len(controller.trace) > before else None
    facts.expect(
        "it is refused because its evidence is stale",
        isinstance(refusal, str) and "[evidence_stale]" in refusal,
        True,
    )

    # 5. p2 (commit-import at revision 3) is accepted but denied: access is Failed.
    accepted = direct(
        "direct: p2 commit-import citing revision 3",
        lambda: controller.propose(Plan("p2", 3, 3, "commit-import", "input-A")),
    )
    steps_before = controller.steps
    denied = direct("direct: execute p2", lambda: controller.execute("p2"))
    facts.expect("p2 citing revision 3 is accepted", accepted, True)
    facts.expect(
        "executing p2 with access Failed", str(denied), str(ExecuteResult.PRECONDITION_DENIED)
    )
    facts.expect("the denial leaves the step count unchanged", controller.steps, steps_before)
    pending = controller.pending
    facts.expect("p2 stays pending after the denial", None if pending is None else pending.id, "p2")

    # 6. The owner confirms access Passed at a newer version: revision 4, p2 stale.
    confirmed = host_observes(
        "host: owner confirms access Passed (v2)",
        Observation("access", 2, EvidenceState.PASSED, "owner"),
    )
    facts.expect("owner-confirmed access Passed is meaningful", confirmed, True)
    facts.expect(
        "evidence revision after the owner's confirmation", controller.evidence_revision, 4
    )
    stale_plan = direct("direct: execute p2 again", lambda: controller.execute("p2"))
    facts.expect("p2 after revision 4", str(stale_plan), str(ExecuteResult.STALE_PLAN))

    # 7. p3 citing revision 4 executes and the run completes.
    p3_accepted = direct(
        "direct: p3 commit-import citing revision 4",
        lambda: controller.propose(Plan("p3", 4, 4, "commit-import", "input-A")),
    )
    executed = direct("direct: execute p3", lambda: controller.execute("p3"))
    facts.expect("p3 citing revision 4 is accepted", p3_accepted, True)
    facts.expect("executing p3", str(executed), str(ExecuteResult.EXECUTED))
    stop = controller.stop_reason
    facts.expect("the run stops", None if stop is None else str(stop), str(StopReason.COMPLETED))

    trace = controller.trace
    totals = {
        "executed_steps": controller.steps,
        "proposals_considered": controller.proposals,
        "provider_calls_in_sdk_request": len(provider.calls),
        "sdk_requests": 1,
        "controller_calls": len(trace),
        "controller_calls_via_sdk": via.count("sdk"),
    }
    for name, expected in EXPECTED_TOTALS.items():
        facts.expect(f"total {name}", totals[name], expected)

    # The same calls, replayed on a fresh controller of the same class in lockstep
    # with the reference model (python-statemachine), every property checked after
    # every call.
    report = run_sequence(
        policy, operations_from_trace(trace), controller_class, ReferenceController
    )
    facts.expect(
        "replayed against the reference model: same answers, no property broken",
        report.failure is None,
        True,
    )
    if report.failure is not None:
        facts.items[-1]["observed"] = f"{report.failure}: {report.detail}"

    calls = [
        {**record, "via": via[index], "note": notes[index]} for index, record in enumerate(trace)
    ]
    when = timestamp or datetime.now(UTC)
    return {
        "episode": "reference",
        "description": (
            "parser Unknown at evidence revision 1; one SDK request in which the scripted "
            "provider proposes p1 (inspect-parser, citing revision 1) and executes it; the "
            "host supplies parser Passed and access Failed (revision 3); a proposal citing "
            "revision 1 is refused as stale; p2 (commit-import, revision 3) answers "
            "PreconditionDenied; the owner confirms access Passed (revision 4) and p2 turns "
            "StalePlan; p3 citing revision 4 executes and the run stops Completed."
        ),
        "provider": {
            "scripted": True,
            "class": f"{ScriptedChatClient.__module__}.{ScriptedChatClient.__qualname__}",
            "statement": PROVIDER_STATEMENT,
        },
        "sdk": {
            "statement": SDK_STATEMENT,
            "function_invocation": dict(FUNCTION_INVOCATION),
            "prompt": SDK_PROMPT,
            "tools_offered": list(provider.calls[0].offered_schemas) if provider.calls else [],
            "provider_calls": [call.to_json() for call in provider.calls],
            "final_text": response.text,
        },
        "controller": class_name(controller_class),
        "policy_name": DEFAULT_POLICY_NAME,
        "policy": policy_to_dict(policy),
        "calls": calls,
        "totals": totals,
        "final": controller.snapshot(),
        "facts": facts.items,
        "holds": not facts.failing(),
        "generated_at": when.isoformat(timespec="seconds"),
        "versions": package_versions(),
    }


def run_episode(
    policy: Policy = DEFAULT_POLICY,
    controller_class: Callable[[Policy], Any] = Controller,
    *,
    policy_name: str = DEFAULT_POLICY_NAME,
    timestamp: datetime | None = None,
) -> dict[str, Any]:
    """The episode of ``policy``: the reference episode for the default policy (its
    script names the default policy's keys and steps), else ``policy_episode``."""
    if policy == DEFAULT_POLICY:
        return run_reference_episode(controller_class, timestamp=timestamp)
    return policy_episode(policy, controller_class, policy_name=policy_name, timestamp=timestamp)


def policy_episode(
    policy: Policy,
    controller_class: Callable[[Policy], Any] = Controller,
    *,
    policy_name: str,
    timestamp: datetime | None = None,
) -> dict[str, Any]:
    """An episode written from ``policy`` itself, so that any policy has a run to
    record, replay and review: one SDK request in which the scripted provider proposes
    the first step that completes the run and executes it (denied while a key it
    requires is not Passed); the host observes each of those keys Passed; the run's
    plan, stale now, is proposed again and executed, approved first where the step
    needs approval; the run completes. Its facts: every call the provider asked for
    reached the controller, the step ran only once its keys were Passed, the run
    completed (where its limits allow), and the calls replay on the reference model
    with every property holding."""
    controller = controller_class(policy)
    facts = _Facts()
    via: list[str] = []
    notes: list[str] = []
    step = next(s for s in policy.steps if s.completes_run)
    resource = policy.resources[0]

    def call(path: str, note: str, action: Callable[[], Any]) -> Any:
        before = len(controller.trace)
        result = action()
        added = len(controller.trace) - before
        via.extend([path] * added)
        notes.extend([note] * added)
        return result

    # 1. One SDK request: the provider proposes the completing step and executes it.
    p1 = {
        "planId": "p1",
        "revision": 1,
        "evidenceRevision": 1,
        "step": step.name,
        "resource": resource,
    }
    provider = ScriptedChatClient(propose_then_execute(p1))
    prompt = f"Evidence revision 1. Propose {step.name} on {resource} and execute it."
    before = len(controller.trace)
    response = ControllerAgent(controller, provider).request_sync(prompt)
    sdk_records = controller.trace[before:]
    via.extend(["sdk"] * len(sdk_records))
    notes.extend(f"sdk: {record['op']} asked for by the provider" for record in sdk_records)
    requested = [
        request.name
        for turn in provider.calls
        if not isinstance(turn.reply, str)
        for request in turn.reply
    ]
    facts.expect(
        "every function call the provider asked for reached the controller once",
        len(sdk_records),
        len(requested),
    )
    answers = [record["result"] for record in sdk_records if record["op"] == "execute"]
    if step.requires:
        expected = str(ExecuteResult.PRECONDITION_DENIED)
    elif step.needs_approval:
        expected = str(ExecuteResult.AWAITING_APPROVAL)
    else:
        expected = str(ExecuteResult.EXECUTED)
    facts.expect(
        f"{step.name} runs only once {', '.join(step.requires) or 'nothing'} is Passed",
        answers[:1],
        [expected],
    )

    # 2. The host's evidence: every key the step requires, Passed.
    for key in step.requires:
        call(
            "host",
            f"host: {key} Passed (v1)",
            lambda key=key: controller.observe(Observation(key, 1, EvidenceState.PASSED, "ci")),
        )

    # 3. The plan again (p1 is stale after new evidence), approved where it must be.
    plan = Plan("p1", 1, 1, step.name, resource)
    if step.requires and controller.stop_reason is None:
        plan = Plan("p2", 2, controller.evidence_revision, step.name, resource)
        note = f"direct: {plan.id} {step.name} citing the current revision"
        call("direct", note, lambda: controller.propose(plan))
        call("direct", f"direct: execute {plan.id}", lambda: controller.execute(plan.id))
    approved = plan  # the plan the owner approves: the one waiting now
    if step.needs_approval and controller.declared_state == "awaiting_approval":
        call(
            "host",
            f"host: the owner approves {approved.id}",
            lambda: controller.approve(Approval(approved.id, plan_digest(approved))),
        )
        call("direct", f"direct: execute {approved.id}", lambda: controller.execute(approved.id))
    feasible = not step.requires or policy.max_proposals >= 2
    if feasible:
        stop = controller.stop_reason
        facts.expect(
            "the run stops", None if stop is None else str(stop), str(StopReason.COMPLETED)
        )

    trace = controller.trace
    totals = {
        "executed_steps": controller.steps,
        "proposals_considered": controller.proposals,
        "provider_calls_in_sdk_request": len(provider.calls),
        "sdk_requests": 1,
        "controller_calls": len(trace),
        "controller_calls_via_sdk": via.count("sdk"),
    }
    report = run_sequence(
        policy, operations_from_trace(trace), controller_class, ReferenceController
    )
    facts.expect(
        "replayed against the reference model: same answers, no property broken",
        report.failure is None,
        True,
    )
    if report.failure is not None:
        facts.items[-1]["observed"] = f"{report.failure}: {report.detail}"
    when = timestamp or datetime.now(UTC)
    return {
        "episode": "policy",
        "description": (
            f"One SDK request in which the scripted provider proposes {step.name} (the "
            "step that completes the run) and executes it; the host observes every key "
            "it requires Passed; the plan, stale after that evidence, is proposed again "
            "citing the current revision and executed (approved first where the step "
            "needs approval); the run completes."
        ),
        "provider": {
            "scripted": True,
            "class": f"{ScriptedChatClient.__module__}.{ScriptedChatClient.__qualname__}",
            "statement": PROVIDER_STATEMENT,
        },
        "sdk": {
            "statement": SDK_STATEMENT,
            "function_invocation": dict(FUNCTION_INVOCATION),
            "prompt": prompt,
            "tools_offered": list(provider.calls[0].offered_schemas) if provider.calls else [],
            "provider_calls": [turn.to_json() for turn in provider.calls],
            "final_text": response.text,
        },
        "controller": class_name(controller_class),
        "policy_name": policy_name,
        "policy": policy_to_dict(policy),
        "calls": [
            {**record, "via": via[index], "note": notes[index]}
            for index, record in enumerate(trace)
        ],
        "totals": totals,
        "final": controller.snapshot(),
        "facts": facts.items,
        "holds": not facts.failing(),
        "generated_at": when.isoformat(timespec="seconds"),
        "versions": package_versions(),
    }


def failing_facts(record: Mapping[str, Any]) -> list[str]:
    """One line per fact that did not hold."""
    return [
        f"{item['fact']}: observed {item['observed']!r}, expected {item['expected']!r}"
        for item in record["facts"]
        if not item["holds"]
    ]


def comparable(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record without what legitimately changes between runs (timestamp, versions)."""
    return {key: value for key, value in record.items() if key not in VOLATILE_KEYS}
