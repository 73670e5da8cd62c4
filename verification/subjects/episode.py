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
from replan.controller.policy import DEFAULT_POLICY, Policy, Step, policy_to_dict
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


class _EpisodeRun:
    """One episode in progress: the controller, the facts so far, and for every trace
    record which path made the call and why. Both episodes share it, so that their
    records name calls, count totals and replay the same way."""

    def __init__(self, policy: Policy, controller_class: Callable[[Policy], Any]) -> None:
        self.policy = policy
        self.controller_class = controller_class
        self.controller = controller_class(policy)
        self.facts = _Facts()
        self.via: list[str] = []
        self.notes: list[str] = []

    def call(self, path: str, note: str, action: Callable[[], Any]) -> Any:
        """Make a controller call outside the SDK and label the records it adds."""
        before = len(self.controller.trace)
        result = action()
        added = len(self.controller.trace) - before
        self.via.extend([path] * added)
        self.notes.extend([note] * added)
        return result

    def observe(self, note: str, obs: Observation) -> Any:
        """The host delivering evidence: always ``observe`` directly, never a tool."""
        return self.call("host", note, lambda: self.controller.observe(obs))

    def direct(self, note: str, action: Callable[[], Any]) -> Any:
        return self.call("direct", note, action)

    def sdk_request(self, provider: ScriptedChatClient, prompt: str) -> tuple[Any, list[Any]]:
        """One SDK request around ``provider``; returns the response and the trace
        records it added, labelled ``sdk`` (the caller writes their notes)."""
        before = len(self.controller.trace)
        response = ControllerAgent(self.controller, provider).request_sync(prompt)
        sdk_records = self.controller.trace[before:]
        self.via.extend(["sdk"] * len(sdk_records))
        return response, sdk_records

    def totals(self, provider: ScriptedChatClient) -> dict[str, int]:
        controller = self.controller
        return {
            "executed_steps": controller.steps,
            "proposals_considered": controller.proposals,
            "provider_calls_in_sdk_request": len(provider.calls),
            "sdk_requests": 1,
            "controller_calls": len(controller.trace),
            "controller_calls_via_sdk": self.via.count("sdk"),
        }

    def expect_replay_holds(self) -> None:
        """Replay the calls on a fresh controller of the same class in lockstep with
        the reference model (python-statemachine), every property checked after every
        call: the episode's record is only evidence if the model agrees with it."""
        report = run_sequence(
            self.policy,
            operations_from_trace(self.controller.trace),
            self.controller_class,
            ReferenceController,
        )
        self.facts.expect(
            "replayed against the reference model: same answers, no property broken",
            report.failure is None,
            True,
        )
        if report.failure is not None:
            self.facts.items[-1]["observed"] = f"{report.failure}: {report.detail}"

    def record(
        self,
        *,
        episode: str,
        description: str,
        provider: ScriptedChatClient,
        prompt: str,
        response: Any,
        policy_name: str,
        totals: dict[str, int],
        timestamp: datetime | None,
    ) -> dict[str, Any]:
        """The episode's record, in the layout ``replan trace`` writes."""
        trace = self.controller.trace
        when = timestamp or datetime.now(UTC)
        return {
            "episode": episode,
            "description": description,
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
            "controller": class_name(self.controller_class),
            "policy_name": policy_name,
            "policy": policy_to_dict(self.policy),
            "calls": [
                {**record, "via": self.via[index], "note": self.notes[index]}
                for index, record in enumerate(trace)
            ],
            "totals": totals,
            "final": self.controller.snapshot(),
            "facts": self.facts.items,
            "holds": not self.facts.failing(),
            "generated_at": when.isoformat(timespec="seconds"),
            "versions": package_versions(),
        }


REFERENCE_DESCRIPTION = (
    "parser Unknown at evidence revision 1; one SDK request in which the scripted "
    "provider proposes p1 (inspect-parser, citing revision 1) and executes it; the "
    "host supplies parser Passed and access Failed (revision 3); a proposal citing "
    "revision 1 is refused as stale; p2 (commit-import, revision 3) answers "
    "PreconditionDenied; the owner confirms access Passed (revision 4) and p2 turns "
    "StalePlan; p3 citing revision 4 executes and the run stops Completed."
)


def run_reference_episode(
    controller_class: Callable[[Policy], Any] = Controller,
    *,
    timestamp: datetime | None = None,
) -> dict[str, Any]:
    """Run the reference episode on a fresh ``controller_class(DEFAULT_POLICY)`` and
    return its record: every call in order with its result and which path made it,
    the provider's view of the SDK request, the totals, the facts (``holds`` is True
    only when every one of them held), package versions and a timestamp."""
    run = _EpisodeRun(DEFAULT_POLICY, controller_class)
    _reference_unknown_parser(run)
    provider = ScriptedChatClient(propose_then_execute(P1))
    response = _reference_sdk_request(run, provider)
    _reference_host_evidence(run)
    _reference_stale_and_denied(run)
    _reference_completion(run)
    totals = run.totals(provider)
    for name, expected in EXPECTED_TOTALS.items():
        run.facts.expect(f"total {name}", totals[name], expected)
    run.expect_replay_holds()
    return run.record(
        episode="reference",
        description=REFERENCE_DESCRIPTION,
        provider=provider,
        prompt=SDK_PROMPT,
        response=response,
        policy_name=DEFAULT_POLICY_NAME,
        totals=totals,
        timestamp=timestamp,
    )


def _reference_unknown_parser(run: _EpisodeRun) -> None:
    """Nothing known yet: parser reads Unknown at evidence revision 1. Observing it is
    not progress (a never-observed key already reads Unknown)."""
    answer = run.observe(
        "host: parser Unknown (v1)", Observation("parser", 1, EvidenceState.UNKNOWN, "ci")
    )
    run.facts.expect("parser Unknown (v1) is not meaningful", answer, False)
    run.facts.expect("evidence revision after parser Unknown", run.controller.evidence_revision, 1)


def _reference_sdk_request(run: _EpisodeRun, provider: ScriptedChatClient) -> Any:
    """One SDK request: the scripted provider proposes p1 and executes it. Each record
    the SDK added is matched to the provider's function call that asked for it."""
    response, sdk_records = run.sdk_request(provider, SDK_PROMPT)
    requested = [
        (call.number, f"call-{call.number}-{index}", request.name)
        for call in provider.calls
        if not isinstance(call.reply, str)
        for index, request in enumerate(call.reply, start=1)
    ]
    for index in range(len(sdk_records)):
        if index < len(requested):
            number, call_id, name = requested[index]
            run.notes.append(f"sdk: {name} asked for by provider call {number} ({call_id})")
        else:
            run.notes.append("sdk: not matched to a provider request")
    facts = run.facts
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
    facts.expect("steps after the SDK request", run.controller.steps, 1)
    return response


def _reference_host_evidence(run: _EpisodeRun) -> None:
    """The host's evidence: parser Passed, access Failed -> revision 3."""
    parser_passed = run.observe(
        "host: parser Passed (v2)", Observation("parser", 2, EvidenceState.PASSED, "ci")
    )
    access_failed = run.observe(
        "host: access Failed (v1)", Observation("access", 1, EvidenceState.FAILED, "ci")
    )
    run.facts.expect(
        "parser Passed and access Failed are meaningful",
        [parser_passed, access_failed],
        [True, True],
    )
    run.facts.expect(
        "evidence revision after parser Passed, access Failed",
        run.controller.evidence_revision,
        3,
    )
    run.facts.expect("no plan pending at revision 3", run.controller.pending, None)


def _reference_stale_and_denied(run: _EpisodeRun) -> None:
    """A proposal citing revision 1 is refused as stale; p2 (commit-import at revision
    3) is accepted but denied, since access is Failed."""
    controller, facts = run.controller, run.facts
    before = len(controller.trace)
    stale = run.direct(
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
    accepted = run.direct(
        "direct: p2 commit-import citing revision 3",
        lambda: controller.propose(Plan("p2", 3, 3, "commit-import", "input-A")),
    )
    steps_before = controller.steps
    denied = run.direct("direct: execute p2", lambda: controller.execute("p2"))
    facts.expect("p2 citing revision 3 is accepted", accepted, True)
    facts.expect(
        "executing p2 with access Failed", str(denied), str(ExecuteResult.PRECONDITION_DENIED)
    )
    facts.expect("the denial leaves the step count unchanged", controller.steps, steps_before)
    pending = controller.pending
    facts.expect("p2 stays pending after the denial", None if pending is None else pending.id, "p2")


def _reference_completion(run: _EpisodeRun) -> None:
    """The owner confirms access Passed at a newer version: revision 4, p2 stale; p3
    citing revision 4 executes and the run completes."""
    controller, facts = run.controller, run.facts
    confirmed = run.observe(
        "host: owner confirms access Passed (v2)",
        Observation("access", 2, EvidenceState.PASSED, "owner"),
    )
    facts.expect("owner-confirmed access Passed is meaningful", confirmed, True)
    facts.expect(
        "evidence revision after the owner's confirmation", controller.evidence_revision, 4
    )
    stale_plan = run.direct("direct: execute p2 again", lambda: controller.execute("p2"))
    facts.expect("p2 after revision 4", str(stale_plan), str(ExecuteResult.STALE_PLAN))
    p3_accepted = run.direct(
        "direct: p3 commit-import citing revision 4",
        lambda: controller.propose(Plan("p3", 4, 4, "commit-import", "input-A")),
    )
    executed = run.direct("direct: execute p3", lambda: controller.execute("p3"))
    facts.expect("p3 citing revision 4 is accepted", p3_accepted, True)
    facts.expect("executing p3", str(executed), str(ExecuteResult.EXECUTED))
    stop = controller.stop_reason
    facts.expect("the run stops", None if stop is None else str(stop), str(StopReason.COMPLETED))


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
    run = _EpisodeRun(policy, controller_class)
    step = next(s for s in policy.steps if s.completes_run)
    resource = policy.resources[0]
    p1 = {
        "planId": "p1",
        "revision": 1,
        "evidenceRevision": 1,
        "step": step.name,
        "resource": resource,
    }
    provider = ScriptedChatClient(propose_then_execute(p1))
    prompt = f"Evidence revision 1. Propose {step.name} on {resource} and execute it."
    response = _policy_sdk_request(run, provider, prompt, step)
    for key in step.requires:
        run.observe(f"host: {key} Passed (v1)", Observation(key, 1, EvidenceState.PASSED, "ci"))
    _policy_retry_and_approve(run, step, resource)
    if not step.requires or policy.max_proposals >= 2:
        stop = run.controller.stop_reason
        run.facts.expect(
            "the run stops", None if stop is None else str(stop), str(StopReason.COMPLETED)
        )
    totals = run.totals(provider)
    run.expect_replay_holds()
    return run.record(
        episode="policy",
        description=(
            f"One SDK request in which the scripted provider proposes {step.name} (the "
            "step that completes the run) and executes it; the host observes every key "
            "it requires Passed; the plan, stale after that evidence, is proposed again "
            "citing the current revision and executed (approved first where the step "
            "needs approval); the run completes."
        ),
        provider=provider,
        prompt=prompt,
        response=response,
        policy_name=policy_name,
        totals=totals,
        timestamp=timestamp,
    )


def _policy_sdk_request(
    run: _EpisodeRun, provider: ScriptedChatClient, prompt: str, step: Step
) -> Any:
    """One SDK request: the provider proposes the completing step and executes it,
    which must not run before every key it requires is Passed."""
    response, sdk_records = run.sdk_request(provider, prompt)
    run.notes.extend(f"sdk: {record['op']} asked for by the provider" for record in sdk_records)
    requested = [
        request.name
        for turn in provider.calls
        if not isinstance(turn.reply, str)
        for request in turn.reply
    ]
    run.facts.expect(
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
    run.facts.expect(
        f"{step.name} runs only once {', '.join(step.requires) or 'nothing'} is Passed",
        answers[:1],
        [expected],
    )
    return response


def _policy_retry_and_approve(run: _EpisodeRun, step: Step, resource: str) -> None:
    """The plan again (p1 is stale after new evidence), approved where it must be."""
    controller = run.controller
    plan = Plan("p1", 1, 1, step.name, resource)
    if step.requires and controller.stop_reason is None:
        plan = Plan("p2", 2, controller.evidence_revision, step.name, resource)
        note = f"direct: {plan.id} {step.name} citing the current revision"
        run.direct(note, lambda: controller.propose(plan))
        run.direct(f"direct: execute {plan.id}", lambda: controller.execute(plan.id))
    approved = plan  # the plan the owner approves: the one waiting now
    if step.needs_approval and controller.declared_state == "awaiting_approval":
        run.call(
            "host",
            f"host: the owner approves {approved.id}",
            lambda: controller.approve(Approval(approved.id, plan_digest(approved))),
        )
        run.direct(f"direct: execute {approved.id}", lambda: controller.execute(approved.id))


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
