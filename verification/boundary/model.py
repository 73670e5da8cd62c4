"""The boundary model: what the effect boundary must do, stated over abstract calls.

Owns the model's state of one run (``World``: the controller's state, and per call its
phase in ``CallLife``, what its journal records say, how often its effect really ran,
and what this process remembers of it) and ``Model.apply``: what one operation
(``verification.boundary.domains``) does to it, and the answers, effects and charges
it implies (``Expected``). The explorer searches these worlds; the campaign runs the
real components beside them and compares.

Written from CONTRACT.md ("The effect boundary"), independently of the code it checks:
digests are the abstract (call, step, resource, content) they name, the journal is a
list of record kinds per call, and the controller is the project's own generated
controller (verified on its own by the other engines), run on the world's copy of its
state. Every phase change goes through ``declaration.move``, so the model can only
make moves the declaration has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from replan.controller import Controller
from replan.controller.fields import RunState
from replan.controller.records import EvidenceState, ExecuteResult, Observation, Plan, Usage
from replan.verification.boundary.declaration import INITIAL, MOVES, move
from replan.verification.boundary.domains import (
    MISFIT,
    UNDIGESTIBLE,
    Approve,
    ApprovePlan,
    Call,
    Cancel,
    Domains,
    Observe,
    Op,
    Request,
    Restart,
    Settle,
)

#: The answers the model predicts (the guard's first word; the host's answer alike).
CONTROLLER_REFUSALS = {
    ExecuteResult.STOPPED: "Stopped",
    ExecuteResult.STEP_LIMIT: "Stopped",
    ExecuteResult.STALE_PLAN: "StalePlan",
    ExecuteResult.UNKNOWN_PLAN: "UnknownPlan",
    ExecuteResult.PRECONDITION_DENIED: "PreconditionDenied",
}


class CallState(NamedTuple):
    """What the world holds about one call. ``records`` are its journal records'
    kinds; ``bound`` the (content, resource) its first record binds; ``approved``
    whether an approval record exists; ``effects`` how often its effect really ran;
    ``attempt`` the content and resource of its last decided attempt and whether that
    attempt's effect ran (what an honest owner finds); ``receipt_ms`` the tool time
    its receipt holds. ``awaiting`` and ``charged_here`` are this process's memory."""

    phase: str = INITIAL
    records: tuple[str, ...] = ()
    bound: tuple[str, str] | None = None
    approved: bool = False
    effects: int = 0
    abandons: int = 0
    attempt: tuple[str, str, bool] | None = None
    receipt_ms: int | None = None
    awaiting: str | None = None
    charged_here: bool = False

    @property
    def entry(self) -> str | None:
        """The journal's live entry: "open" (an intent without receipt), "done", or
        None (no intent, or the last attempt abandoned)."""
        state: str | None = None
        for kind in self.records:
            if kind == "intent":
                state = "open"
            elif kind == "completion":
                state = "done"
            elif kind == "abandon":
                state = None
        return state

    @property
    def abandoned(self) -> bool:
        return bool(self.records) and self.records[-1] == "abandon"


class World(NamedTuple):
    """One run of the boundary, as the model sees it (hashable: the explorer's
    identity of a state)."""

    controller: RunState
    calls: tuple[CallState, ...]
    version: int = 1  # the next observation's version (the evidence source's counter)
    crashed: bool = False


@dataclass
class Answer:
    """The model's answer to one call of a request: its kind (the guard's first word),
    the rule that decides it (``tag``), and whether the effect runs."""

    call: str
    kind: str
    tag: str = ""
    effect: tuple[str, str] | None = None  # (content, resource) the effect runs with


@dataclass
class Expected:
    """What one operation must do: the answers, the approval's verdict, the owner's
    decision, where it crashed, and the world after it."""

    world: World
    answers: list[Answer] = field(default_factory=list)
    #: the effects that run, in order: (call id, (content, resource)), a crashed one's too
    effects: list[tuple[str, tuple[str, str]]] = field(default_factory=list)
    crashed_at: tuple[str, str] | None = None
    #: the crash points the operation passed (where it could have been stopped)
    passed: list[tuple[str, str]] = field(default_factory=list)
    approved: bool | None = None
    settled: str | None = None  # "resolve" | "abandon" | "refused"
    #: the calls the host reads as awaiting approval (call, content), before an approval
    awaiting: list[tuple[str, str]] = field(default_factory=list)


class _Crash(Exception):
    """The model's work stops at a crash point (the world keeps what was written)."""


class Model:
    """The boundary's semantics over ``World`` (see the module docstring)."""

    def __init__(self, domains: Domains) -> None:
        self.domains = domains
        self.policy = domains.policy
        #: one controller, put in each world's state in turn (a fresh one costs more)
        self.controller = Controller(self.policy)

    def initial(self) -> World:
        controller = Controller(self.policy)
        return World(controller._export_state(), tuple(CallState() for _ in self.domains.calls))

    # ---- one operation -------------------------------------------------------------

    def apply(self, world: World, op: Op) -> Expected:
        """What ``op`` does from ``world``."""
        run = _Run(self, world)
        expected = Expected(world)
        try:
            if isinstance(op, Request):
                for call_id, content, resource in op.calls:
                    crash = op.crash if op.crash and op.crash[1] == call_id else None
                    run.crash_at = None if crash is None else crash[0]
                    expected.answers.append(run.request(op.channel, call_id, content, resource))
            elif isinstance(op, Approve):
                expected.awaiting = run.awaiting()
                run.crash_at = op.crash
                expected.approved = run.approve(op.call, op.content)
            elif isinstance(op, ApprovePlan):
                expected.approved = run.approve_plan(op.call)
            elif isinstance(op, Settle):
                expected.settled = run.settle(op.call, op.mode)
            elif isinstance(op, Observe):
                run.observe(op.key, EvidenceState(op.state))
            elif isinstance(op, Cancel):
                run.controller.cancel()
            elif isinstance(op, Restart):
                run.restart()
        except _Crash:
            expected.crashed_at = run.crashed_at
            run.restart()
            run.crashed = True
        run.invalidate()
        expected.effects = run.effects
        expected.passed = run.passed
        expected.world = run.freeze()
        return expected


class _Run:
    """A world being changed by one operation (the model's mutable working copy)."""

    def __init__(self, model: Model, world: World) -> None:
        self.model = model
        self.domains = model.domains
        self.controller = model.controller
        self.controller._import_state(world.controller)
        del self.controller._trace[:]
        self.calls = list(world.calls)
        self.version = world.version
        self.crashed = world.crashed
        self.crash_at: str | None = None
        self.crashed_at: tuple[str, str] | None = None
        self.effects: list[tuple[str, tuple[str, str]]] = []
        self.seen = self.controller.evidence_revision
        #: every crash point this operation passed, in order (the explorer stops each
        #: operation at each of them in turn)
        self.passed: list[tuple[str, str]] = []

    def freeze(self) -> World:
        return World(self.controller._export_state(), tuple(self.calls), self.version, self.crashed)

    # ---- bookkeeping ----------------------------------------------------------------

    def _get(self, call: Call) -> CallState:
        return self.calls[self.domains.index(call.id)]

    def _set(self, call: Call, **changes: Any) -> CallState:
        index = self.domains.index(call.id)
        self.calls[index] = self.calls[index]._replace(**changes)
        return self.calls[index]

    def _move(self, call: Call, event: str) -> None:
        self._set(call, phase=move(self._get(call).phase, event))

    def _point(self, call: Call, point: str, event: str | None = None) -> None:
        """The call reached ``point`` (moving on ``event``); stop if a crash is armed."""
        if event is not None:
            self._move(call, event)
        self.passed.append((point, call.id))
        if self.crash_at == point:
            self.crashed_at = (point, call.id)
            raise _Crash

    def _record(self, call: Call, kind: str, content: tuple[str, str] | None = None) -> None:
        state = self._get(call)
        bound = state.bound if state.bound is not None else content
        self._set(call, records=(*state.records, kind), bound=bound)

    def invalidate(self) -> None:
        """A call the controller no longer holds pending (superseded, invalidated, the
        run stopped) leaves the pending phases: its approval is void."""
        pending = self.controller.pending
        stopped = self.controller.stop_reason is not None
        for call in self.domains.calls:
            phase = self._get(call).phase
            if phase in ("proposed", "awaiting", "approval_recorded", "approved") and (
                stopped or pending is None or pending.id != call.id
            ):
                self._move(call, "invalidate")

    def restart(self) -> None:
        """A restore from intact files: the controller as logged, the journal as
        written; this process's memory (calls awaiting approval, calls charged) gone."""
        for call in self.domains.calls:
            phase = self._get(call).phase  # a phase a crash does not move stays as it is
            phase = MOVES.get((phase, "crash"), phase)
            self._set(call, phase=phase, awaiting=None, charged_here=False)
        self.crashed = False

    # ---- the operations --------------------------------------------------------------

    def observe(self, key: str, state: EvidenceState, source: str = "host") -> None:
        self.controller.observe(Observation(key, self.version, state, source))
        self.version += 1

    def request(self, channel: str, call_id: str, content: str, resource: str) -> Answer:
        """One call through the guard (``model``) or ``perform`` (``host``)."""
        call = self.domains.call(call_id)
        if channel == "model":
            resource = self.domains.resource
        self.invalidate()  # an earlier call of the same reply may have superseded this one
        if call is self.domains.stray:
            return Answer(call.id, "Refused", "undeclared")
        if content == MISFIT and channel == "model":
            return Answer(call.id, "Refused", "misfit")
        if content == UNDIGESTIBLE or resource == "":
            return Answer(call.id, "Refused", "undigestible")
        if channel == "executor":
            return self._direct(call, content, resource)
        rejected = self._propose(channel, call)
        if rejected is not None:
            return Answer(call.id, rejected)
        refusal = self._check(call, content, resource)
        if refusal is not None:
            self._move(call, "refuse")
            return refusal
        return self._decide(channel, call, content, resource)

    def _direct(self, call: Call, content: str, resource: str) -> Answer:
        """``Executor.run`` alone: the grant, the journal's binding, an open intent, a
        receipt; else the effect runs (the host decided, no controller was asked)."""
        state = self._get(call)
        if (
            resource not in self.domains.granted
            or call.step not in self.domains.policy.requirements
        ):
            refusal = Answer(call.id, "Denied")  # (the owner grants the policy's steps)
        elif state.bound is not None and state.bound != (content, resource):
            refusal = Answer(call.id, "ContentMismatch", "content")
        elif state.entry == "open":
            refusal = Answer(call.id, "InDoubt", "intent")
        elif state.entry == "done":
            self._move(call, "answer")
            return Answer(call.id, "Replayed")
        else:
            self._set(call, attempt=(content, resource, False))
            return self._run("executor", call, content, resource, rerun=state.abandoned)
        self._move(call, "refuse")
        return refusal

    def _propose(self, channel: str, call: Call) -> str | None:
        """Propose a call that is new (the journal holds no record of it, and it is
        not the pending plan); the refusal's kind, or None to go on."""
        controller = self.controller
        state = self._get(call)
        pending = controller.pending
        if (
            state.records
            or (pending is not None and pending.id == call.id)
            or call.id in controller._completed
        ):
            return None
        cited = self.seen if channel == "model" else controller.evidence_revision
        plan = Plan(call.id, controller.plan_revision + 1, cited, call.step, self.domains.resource)
        active = controller.stop_reason is None
        accepted = controller.propose(plan)
        if accepted:
            self._point(call, "proposed", "propose")
            return None
        if active:  # the rejection was logged
            self._point(call, "proposed")
        if controller.stop_reason is not None:
            return "Stopped"
        if cited != controller.evidence_revision:
            return "StalePlan"
        if call.id in self.controller._completed:
            return None
        return "Refused"

    def _check(self, call: Call, content: str, resource: str) -> Answer | None:
        """The refusals that come before the controller is asked."""
        if resource not in self.domains.granted:
            return Answer(call.id, "Denied")
        state = self._get(call)
        if state.bound is not None and state.bound != (content, resource):
            return Answer(call.id, "ContentMismatch", "approval" if state.approved else "content")
        if state.entry == "open":
            return Answer(call.id, "InDoubt", "intent")
        pending = self.controller.pending
        if pending is not None and pending.id == call.id:
            if (pending.step, pending.resource) != (call.step, resource):
                return Answer(call.id, "ContentMismatch", "accepted")
            if self.controller.declared_state == "approved" and not state.approved:
                return Answer(call.id, "ContentMismatch", "approval")
        return None

    def _decide(self, channel: str, call: Call, content: str, resource: str) -> Answer:
        answer = self.controller.execute(call.id)
        state = self._get(call)
        if answer is ExecuteResult.EXECUTED:
            self._set(call, attempt=(content, resource, False))
            self._point(call, "decided", "decide")
            return self._run(channel, call, content, resource)
        if answer is ExecuteResult.REPLAYED:
            if state.abandoned:
                self._set(call, attempt=(content, resource, False))
                return self._run(channel, call, content, resource, rerun=True)
            if state.entry == "done":
                if channel == "model" and not state.charged_here:
                    self._charge(call)
                self._move(call, "answer")
                return Answer(call.id, "Replayed")
            self._move(call, "refuse")
            return Answer(call.id, "InDoubt", "no record")
        if answer is ExecuteResult.AWAITING_APPROVAL:
            self._set(call, awaiting=content)
            self._move(call, "await_approval")
            return Answer(call.id, "AwaitingApproval")
        self._move(call, "refuse")
        if channel == "model" and answer is ExecuteResult.UNKNOWN_PLAN:
            return Answer(call.id, "Refused")  # the guard's word for a plan it never proposed
        return Answer(call.id, CONTROLLER_REFUSALS[answer])

    def _run(
        self, channel: str, call: Call, content: str, resource: str, rerun: bool = False
    ) -> Answer:
        """Intent, effect, receipt, (the guard) observation and charge."""
        self._record(call, "intent", (content, resource))
        self._point(call, "intended", "write_intent")
        state = self._get(call)
        self._set(call, effects=state.effects + 1, attempt=(content, resource, True))
        self.effects.append((call.id, (content, resource)))
        self._point(call, "effected", "run_effect")
        self._record(call, "completion")
        # the guard's receipt keeps the tool's time; perform's and the executor's do not
        self._set(call, receipt_ms=call.tool_ms if channel == "model" else None)
        self._point(call, "receipted", "write_receipt")
        if channel == "model":
            key = self.domains.observed_key(call.step)
            if key is not None:
                verdict = self.domains.arguments(call, content, resource)["verdict"]
                self.observe(key, EvidenceState(verdict), "tool")
            self._charge(call)
        self._move(call, "answer")
        return Answer(call.id, "Executed", "rerun" if rerun else "", (content, resource))

    def _charge(self, call: Call) -> None:
        state = self._get(call)
        tokens = call.number if self.domains.host_usage else 0
        self.controller.charge(Usage(tokens, 0, state.receipt_ms or 0))
        self._set(call, charged_here=True)
        if tokens or state.receipt_ms:
            self._point(call, "charged", "charge")
        else:  # a charge of nothing names no call in the log: no crash is placed after it
            self._move(call, "charge")

    def awaiting(self) -> list[tuple[str, str]]:
        """What the guard lists as awaiting approval: the pending plan's call, when the
        controller awaits its approval and this process kept its content."""
        pending = self.controller.pending
        if pending is None or self.controller.declared_state != "awaiting_approval":
            return []
        content = self._get(self.domains.call(pending.id)).awaiting
        return [] if content is None else [(pending.id, content)]

    def approve(self, call_id: str, content: str) -> bool:
        """``approve_call`` with the digest of ``content`` (the plan's resource)."""
        call = self.domains.call(call_id)
        state = self._get(call)
        controller = self.controller
        pending = controller.pending
        if state.awaiting is None or state.awaiting != content:
            return False
        if (
            pending is None
            or pending.id != call.id
            or controller.declared_state not in ("awaiting_approval", "approved")
        ):
            self._set(call, awaiting=None)
            return False
        target = (content, self.domains.resource)
        if state.entry is not None or (state.bound is not None and state.bound != target):
            return False
        self._record(call, "approval", target)
        self._set(call, approved=True)
        self._point(call, "approval_recorded", "record_approval")
        if controller.declared_state == "awaiting_approval":
            controller.approve(_plan_approval(pending))
            self._set(call, awaiting=None)
            self._point(call, "approved", "approve")
        else:
            self._set(call, awaiting=None)
            self._move(call, "approve")
        return True

    def approve_plan(self, call_id: str) -> bool:
        """The controller's approval of the pending plan ``call_id`` (no record)."""
        pending = self.controller.pending
        if pending is None or pending.id != call_id:
            return False
        approved = self.controller.approve(_plan_approval(pending))
        if approved:
            self._move(self.domains.call(call_id), "approve_plan")
        return approved

    def settle(self, call_id: str, mode: str = "honest") -> str:
        """The owner's word (``Settle``): what is recorded, or "refused"."""
        call = self.domains.call(call_id)
        state = self._get(call)
        attempt = state.attempt
        if mode == "resolve" or (
            mode == "honest" and state.entry == "open" and attempt is not None and attempt[2]
        ):
            if state.entry != "open":
                return "refused"
            self._record(call, "completion")
            self._set(call, receipt_ms=None)
            self._move(call, "resolve")
            return "resolve"
        unrecorded = not state.records and (
            mode == "named" or call.id in self.controller._completed
        )
        if state.entry != "open" and not unrecorded:
            return "refused"
        named = attempt[:2] if attempt is not None else ("A", self.domains.resource)
        self._record(call, "abandon", named if unrecorded else None)
        self._set(call, abandons=state.abandons + 1)
        if state.phase == "in_doubt":
            self._move(call, "abandon")
        return "abandon"


def _plan_approval(plan: Plan) -> Any:
    from replan.controller.records import Approval, plan_digest

    return Approval(plan.id, plan_digest(plan))


__all__ = ["Answer", "CallState", "Expected", "Model", "World"]
