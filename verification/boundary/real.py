"""The real effect boundary, driven one operation at a time, with crashes.

Owns one run of a ``BoundarySubject``'s real components on disk: the SQLite journal
and the SQLite run log in a directory of their own, a ``LoggedController`` logging
into the run log, the ``Executor`` over the journal, and ``ReplanMiddleware`` in front
of one tool per step, reached through the agent SDK's real function-invocation loop
from a scripted chat client (``verification.subjects.scripted``). The host's channel
calls ``perform`` directly.

A crash is a ``Crash`` (a ``BaseException``, so no ``except Exception`` in the code
under test swallows it) raised right after the durable write a crash point names:
by the journal and the run log (subclasses of the subject's own, built here) after
their write, by the tool after its effect. The work stops there; the objects are
dropped; ``restart`` builds fresh ones from the files (``SqliteJournal(path)``,
``restore(SqliteRunLog(path))``), first after the files were tampered with when asked
(which must be refused in one line, leaving the files as they were, and by the damaged
run log alone too; what a kill itself leaves, a witness one entry behind, must restore
exactly).

Everything the checks compare is recorded here as plain values: the answers, the
effects the tools saw, the journal's records, the controller's snapshot; and whether
each answer the model read was charged first (checked when the model reads it).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from agent_framework import Agent, FunctionInvocationContext, FunctionTool
from pydantic import BaseModel, create_model

from replan.controller.agent import FunctionInvokingChatClient
from replan.controller.records import (
    Approval,
    EvidenceState,
    ExecuteResult,
    Observation,
    Plan,
    Usage,
    plan_digest,
)
from replan.verification.boundary.domains import (
    EDGE,
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
from replan.verification.boundary.model import CONTROLLER_REFUSALS
from replan.verification.boundary.properties import EffectRun, Violation
from replan.verification.boundary.subjects import BoundarySubject
from replan.verification.boundary.tamper import KEPT, LOG_KINDS, RunFiles
from replan.verification.boundary.tamper import tamper as tamper_with
from replan.verification.subjects.scripted import (
    FunctionCallRequest,
    FunctionResult,
    Reply,
    ScriptedChatClient,
)

#: The run log takes a snapshot every this many entries, so a restore replays ranges
#: between snapshots (a range read one short shows there).
SNAPSHOT_EVERY = 2
_CONFIGURATION: Any = {"max_iterations": 4, "allow_concurrent_invocation": False}


class Crash(BaseException):
    """The process dies here."""


class Done(NamedTuple):
    """What the real boundary did in one operation."""

    answers: list[tuple[str, str]]  # (call id, kind) for each call answered
    effects: list[EffectRun]
    crashed_at: tuple[str, str] | None = None
    approved: bool | None = None
    awaiting: list[tuple[str, str]] | None = None
    settled: str | None = None
    refusal: str | None = None  # a restore's or an owner's one-line refusal
    violations: tuple[Violation, ...] = ()


@functools.cache
def _arguments_model(resource_argument: str | None) -> type[BaseModel]:
    """A tool's arguments (rows, a verdict, and the resource argument its step names,
    if any). Made once per shape: building a pydantic model is a millisecond, and
    every sequence of a campaign wires its tools afresh."""
    fields: dict[str, Any] = {"rows": (int, ...), "verdict": (str, ...)}
    if resource_argument is not None:
        fields[resource_argument] = (str, ...)
    return create_model("Arguments", **fields)


class RealBoundary:
    """One run of the subject's boundary in ``directory`` (see the module docstring)."""

    def __init__(self, subject: BoundarySubject, domains: Domains, directory: Path) -> None:
        self.subject = subject
        self.domains = domains
        self.policy = domains.policy
        self.journal_path = directory / "journal.db"
        self.log_path = directory / "run.log"
        self.grant = subject.component("executor", "Grant")(
            domains.granted, [s.name for s in self.policy.steps]
        )
        self.effects: list[EffectRun] = []
        self.version = 1
        self.now = 0.0
        self.ticks = 0
        self.armed: tuple[str, str] | None = None
        self.crashed_at: tuple[str, str] | None = None
        self.requested: dict[str, tuple[str, str]] = {}  # call -> (content, resource) now
        self.attempts: dict[str, tuple[str, str]] = {}  # call -> its last decided content
        self.ran_since_intent: dict[str, bool] = {}
        #: what each call's effect returned, as the model must read it on every answer
        self.returned: dict[str, str] = {}
        #: the calls whose receipt the guard wrote (it keeps the tool's time)
        self.timed: set[str] = set()
        #: each idempotency key handed to an effect, and the call it was handed for
        self.keys: dict[str, str] = {}
        self.found: list[Violation] = []
        self._journal_class = _hooked_journal(subject, self)
        self._log_class = _hooked_log(subject, self)
        self.journal = self._journal_class.create(self.journal_path)
        self.log = self._log_class(self.log_path)
        logged = subject.component("durable.logged", "LoggedController")
        self._wire(logged(self.policy, log=self.log, snapshot_every=SNAPSHOT_EVERY))
        self.files = RunFiles(self.journal_path, self.log_path, self.log_path.read_bytes())
        self.tools = [self._tool(step.name) for step in self.policy.steps]
        self.tools.append(self._tool(domains.stray.step))

    # ---- wiring ----------------------------------------------------------------------

    def _wire(self, controller: Any) -> None:
        self.controller = controller
        self.executor = self.subject.component("executor", "Executor")(
            self.journal, clock=self._tick
        )
        self.guard = self.subject.component("middleware", "ReplanMiddleware")(
            controller,
            executor=self.executor,
            grant=self.grant,
            observe_result=self._observe_result,
            tool_usage=(
                (lambda call: Usage(self.domains.call(call.call_id).number, 0, 0))
                if self.domains.host_usage
                else None
            ),
            clock=lambda: self.now,
        )

    def _tick(self) -> float:
        self.ticks += 1
        return float(self.ticks)

    def reached(self, point: str, call_id: str) -> None:
        """A durable write (or the effect) of ``call_id`` at ``point`` is done."""
        if point == "intended":
            self.ran_since_intent[call_id] = False
            if call_id in self.requested:
                self.attempts[call_id] = self.requested[call_id]
        elif point == "decided" and call_id in self.requested:
            self.attempts[call_id] = self.requested[call_id]
        if self.armed == (point, call_id):
            self.armed = None
            self.crashed_at = (point, call_id)
            raise Crash(f"crash after {point} of {call_id}")

    def _content(self, call_id: str, resource: str, arguments: Mapping[str, Any]) -> str:
        """Which content of the domains ``arguments`` are ("?" when none)."""
        call = self.domains.call(call_id)
        return next(
            (
                name
                for name in ("A", "B", EDGE)
                if dict(arguments) == self.domains.arguments(call, name, resource)
            ),
            "?",
        )

    def _effect(
        self, call_id: str, step: str, resource: str, arguments: Mapping[str, Any], key: object
    ) -> None:
        """The effect itself: record what it was asked to do, take the call's time."""
        content = self._content(call_id, resource, arguments)
        operation = self.subject.component("executor", "Operation")
        expected_key = operation(call_id, step, resource, dict(arguments)).digest()
        unique = self.keys.setdefault(str(key), call_id) == call_id  # one key, one call
        self.effects.append(
            EffectRun(call_id, step, (content, resource), key == expected_key and unique)
        )
        self.ran_since_intent[call_id] = True
        self.now += self.domains.call(call_id).tool_ms / 1000
        self.reached("effected", call_id)

    def _tool(self, step: str) -> FunctionTool:
        declared = {s.name for s in self.policy.steps}
        named = self.policy.step(step).resource_argument if step in declared else None
        model = _arguments_model(named)
        key_name = self.subject.component("middleware", "IDEMPOTENCY_KEY")

        def run(ctx: FunctionInvocationContext, **arguments: Any) -> str:
            call_id = str(ctx.metadata.get("call_id"))
            resource = arguments.get(named) if named else self.domains.resource
            self._effect(call_id, step, str(resource), arguments, ctx.metadata.get(key_name))
            self.returned[call_id] = f"{step}: {arguments['verdict']}"
            self.timed.add(call_id)
            return self.returned[call_id]

        return FunctionTool(name=step, description=step, func=run, input_model=model)

    def _observe_result(
        self, tool: str, arguments: Mapping[str, Any], text: str
    ) -> list[Observation]:
        key = self.domains.observed_key(tool)
        if key is None:
            return []
        observation = Observation(key, self.version, EvidenceState(arguments["verdict"]), "tool")
        self.version += 1
        return [observation]

    # ---- one operation ---------------------------------------------------------------

    def apply(self, op: Op) -> Done:
        """Do ``op``; a crash armed in it stops the work and is reported, not raised."""
        start = len(self.effects)
        self.found = []
        self.crashed_at = None
        answers: list[tuple[str, str]] = []
        extra: dict[str, Any] = {}
        try:
            if isinstance(op, Request):
                self.armed = op.crash
                self._request(op, answers)
            elif isinstance(op, Approve):
                self.armed = None if op.crash is None else (op.crash, op.call)
                extra["awaiting"] = [
                    (
                        waiting.plan_id,
                        self._content(waiting.plan_id, waiting.resource, waiting.arguments),
                    )
                    for waiting in self.guard.awaiting()
                ]
                extra["approved"] = self._approve(op)
            elif isinstance(op, ApprovePlan):
                pending = self.controller.pending
                digest = plan_digest(pending) if pending is not None else "0" * 64
                extra["approved"] = bool(self.controller.approve(Approval(op.call, digest)))
            elif isinstance(op, Settle):
                extra["settled"], extra["refusal"] = self._settle(op.call, op.mode)
            elif isinstance(op, Observe):
                self.controller.observe(
                    Observation(op.key, self.version, EvidenceState(op.state), "host")
                )
                self.version += 1
            elif isinstance(op, Cancel):
                self.controller.cancel()
            elif isinstance(op, Restart):
                extra["refusal"] = self.restart(op.tamper)
        except Crash:
            self._drop()
        finally:
            self.armed = None
        return Done(
            answers, self.effects[start:], self.crashed_at, violations=tuple(self.found), **extra
        )

    def _request(self, op: Request, answers: list[tuple[str, str]]) -> None:
        for call_id, content, resource in op.calls:
            self.requested[call_id] = (content, resource)
        if op.channel in ("host", "executor"):
            ((call_id, content, resource),) = op.calls
            call = self.domains.call(call_id)
            if op.channel == "host":
                answers.append((call_id, self._perform(call, content, resource)))
            else:
                answers.append((call_id, self._run_alone(call, content, resource)))
            return
        replies: Iterator[Reply] = iter(
            [
                [
                    FunctionCallRequest(
                        self.domains.call(c).step,
                        self.domains.arguments(
                            self.domains.call(c), content, self.domains.resource
                        ),
                        call_id=c,
                    )
                    for c, content, _ in op.calls
                ],
                "done",
            ]
        )
        before = len(self.guard.calls)

        def script(results: Sequence[FunctionResult]) -> Reply:
            read = {result.call_id: result.result for result in results}
            for done in self.guard.calls[before:]:
                self._check_charged(done.call_id, done.outcome)
                self._check_read(done, read.get(str(done.call_id)))
            return next(replies)

        client = FunctionInvokingChatClient(
            ScriptedChatClient(script), configuration=_CONFIGURATION
        )
        agent = Agent(client=client, tools=self.tools, middleware=self.guard.middleware)
        try:
            asyncio.run(agent.run("go"))
        finally:
            answers.extend((str(done.call_id), done.outcome) for done in self.guard.calls[before:])

    def _check_read(self, done: Any, text: str | None) -> None:
        """What the model reads of a call is the guard's answer: the tool's result for
        Executed and Replayed, else the refusal's line, ``Kind: detail``."""
        kind = str(done.outcome)
        refused = kind not in ("Executed", "Replayed")
        if (
            text is None
            or not text.startswith(done.result)
            or (refused and not text.startswith(f"{kind}: "))
        ):
            from replan.verification.boundary.properties import owner

            self.found.append(
                Violation(
                    owner(kind),
                    f"the model reads {text!r:.80} for {done.call_id}, answered {kind}",
                )
            )

    def _check_charged(self, call_id: str | None, outcome: str) -> None:
        """The model reads ``call_id``'s answer now: an Executed or Replayed one must be
        charged already, its tool time from its receipt and the host's usage."""
        if call_id is None or outcome not in ("Executed", "Replayed"):
            return
        call = self.domains.call(call_id)
        # what the tool took, when the guard ran it (a receipt perform, the executor or the
        # owner wrote holds no tool time)
        wanted = call.tool_ms if call_id in self.timed else 0
        tokens = call.number if self.domains.host_usage else 0
        charges = [e[1] for e in self.controller._trace if e[0] == "charge" and type(e[1]) is Usage]
        if not any(u.tokens == tokens and u.elapsed_ms == wanted for u in charges):
            self.found.append(
                Violation(
                    "tool-time-and-usage-charged",
                    f"the model read {call_id}'s answer ({outcome}) before the run was charged "
                    f"{call.number} tokens and its {wanted} ms",
                )
            )

    def _perform(self, call: Call, content: str, resource: str) -> str:
        """The host's channel: propose a new call, then ``perform`` it."""
        controller = self.controller
        arguments = self.domains.arguments(call, content, resource)
        try:
            operation = self.subject.component("executor", "Operation")(
                call.id, call.step, resource, arguments
            )
        except ValueError:  # arguments no digest covers: the host's one-line refusal
            return "Refused"
        pending = controller.pending
        retried = (
            self.journal.knows(call.id)
            or (pending is not None and pending.id == call.id)
            or call.id in controller.snapshot()["completed"]
        )
        if not retried:
            plan = Plan(
                call.id,
                controller.plan_revision + 1,
                controller.evidence_revision,
                call.step,
                self.domains.resource,
            )
            if not controller.propose(plan):
                if controller.stop_reason is not None:
                    return "Stopped"
                if call.id not in controller.snapshot()["completed"]:
                    return "Refused"

        def effect(op: Any) -> Any:
            self._effect(call.id, op.step, op.resource, op.arguments, op.digest())
            self.returned[call.id] = f"{op.step}: done"
            self.timed.discard(call.id)
            return {"text": self.returned[call.id]}

        perform = self.subject.component("executor", "perform")
        performed = perform(controller, self.executor, operation, self.grant, effect)
        if performed.execution is not None:
            return str(performed.execution.outcome)
        answer = performed.answer
        if answer is ExecuteResult.AWAITING_APPROVAL:
            return "AwaitingApproval"
        return CONTROLLER_REFUSALS.get(answer, str(answer))

    def _run_alone(self, call: Call, content: str, resource: str) -> str:
        """The host's use of the executor alone: ``Executor.run``, no controller."""
        arguments = self.domains.arguments(call, content, resource)
        try:
            operation = self.subject.component("executor", "Operation")(
                call.id, call.step, resource, arguments
            )
        except ValueError:
            return "Refused"

        def effect(op: Any) -> Any:
            self._effect(call.id, op.step, op.resource, op.arguments, op.digest())
            self.returned[call.id] = f"{op.step}: done"
            self.timed.discard(call.id)
            return {"text": self.returned[call.id]}

        return str(self.executor.run(operation, self.grant, effect).outcome)

    def _approve(self, op: Approve) -> bool:
        call = self.domains.call(op.call)
        arguments = self.domains.arguments(call, op.content, self.domains.resource)
        digest = self.subject.component("executor", "Operation")(
            call.id, call.step, self.domains.resource, arguments
        ).digest()
        approve_call = self.subject.component("approval", "approve_call")
        return bool(
            approve_call(self.controller, self.executor, Approval(call.id, digest)).accepted
        )

    def _settle(self, call_id: str, mode: str) -> tuple[str, str | None]:
        """The owner's word (``Settle``): ``honest`` resolves an in-doubt attempt whose
        effect ran and abandons one that did not (anything else is abandoned too, which
        must be refused); ``resolve`` resolves; ``named`` abandons naming the call's
        operation. Returns what was done and the refusal, if any."""
        executor = self.executor
        entry = self.journal.entry(call_id)
        open_intent = entry is not None and entry.receipt is None
        try:
            if mode == "resolve" or (
                mode == "honest" and open_intent and self.ran_since_intent.get(call_id)
            ):
                receipt = executor.resolve(call_id, {"text": "resolved by the owner"})
                if getattr(receipt, "plan_id", None) != call_id:
                    raise RuntimeError(
                        f"resolve answered {receipt!r}, not the receipt of {call_id}"
                    )
                self.returned[call_id] = "resolved by the owner"
                self.timed.discard(call_id)
                return "resolve", None
            completed = call_id in self.controller.snapshot()["completed"]
            if mode == "named" or (not open_intent and completed):
                call = self.domains.call(call_id)
                content, resource = self.attempts.get(call_id, ("A", self.domains.resource))
                operation = self.subject.component("executor", "Operation")(
                    call_id, call.step, resource, self.domains.arguments(call, content, resource)
                )
                executor.abandon(call_id, "the owner found no trace of it", operation=operation)
            else:
                executor.abandon(call_id, "the owner found no trace of it")
        except ValueError as error:
            return "refused", str(error)
        return "abandon", None

    # ---- crash and restart ---------------------------------------------------------------

    def _drop(self) -> None:
        """The process is gone: nothing more is written; the connections are released
        (each crash point is after a commit, so none holds a transaction)."""
        for closable in (self.journal, self.log):
            with contextlib.suppress(Exception):  # a dead process closes nothing cleanly
                closable.close()

    def restart(self, tamper: str | None = None) -> str | None:
        """Restore in fresh objects from the files; with ``tamper``, first from the
        tampered files (the refusal's text, or a violation when none came), then from
        the files as they were. Returns the refusal, if any."""
        self._drop()
        refusal, kept = None, None
        if tamper is not None:
            refusal, kept = self._tampered_restore(tamper)
        self.journal = self._journal_class(self.journal_path)
        self.log = self._log_class(self.log_path)
        restore = self.subject.component("durable.logged", "restore")
        self._wire(restore(self.log, self.policy))
        if kept is not None and kept != self.snapshot():
            self._violate(tamper, "restored another run than the files hold")
        return refusal

    def _tampered_restore(self, tamper: str) -> tuple[str | None, dict[str, Any] | None]:
        """The refusal of a restore from the tampered files, and for a kind that is not
        damage (``KEPT``) the snapshot restored from them; the files as they were after."""
        directory = self.journal_path.parent
        saved = {path: path.read_bytes() for path in directory.iterdir() if path.is_file()}
        try:
            if not tamper_with(self.files, tamper):
                return None, None
            tampered = {path: path.read_bytes() for path in directory.iterdir() if path.is_file()}
            refusal, snapshot = self._restore_outcome()
            after = {path: path.read_bytes() for path in directory.iterdir() if path.is_file()}
            self._refused_alone(tamper)
            if tamper in KEPT:
                if refusal is not None:
                    self._violate(tamper, f"refused what a kill leaves ({refusal})")
                return None, snapshot
            if refusal is None:
                self._violate(tamper, "restored, not refused")
            elif "\n" in refusal or after != tampered:
                self._violate(tamper, "the refusal is not one line, or it changed the files")
            return refusal, None
        finally:
            for path in directory.iterdir():
                if path.is_file() and path not in saved:
                    path.unlink()
            for path, content in saved.items():
                path.write_bytes(content)

    def _refused_alone(self, tamper: str) -> None:
        """The run log's own check refuses damage done to it (``LOG_KINDS``): a log
        restored beside another journal, or read by ``replan conform``, has no other.
        (The journal checks itself whenever it opens, so the restore did that.)"""
        if tamper not in LOG_KINDS:
            return
        try:
            log = self.subject.component("durable.log", "SqliteRunLog")(
                self.log_path, read_only=True
            )
        except ValueError:
            return
        try:
            log.verify()
        except ValueError:
            return
        finally:
            log.close()
        self._violate(tamper, "the run log's own verify accepted it")

    def _violate(self, tamper: str | None, what: str) -> None:
        self.found.append(Violation("restore-is-exact-or-refuses", f"after {tamper}: {what}"))

    def _restore_outcome(self) -> tuple[str | None, dict[str, Any] | None]:
        """Restore from the files as they are now, then drop what it built: the
        refusal's text, or the restored run's snapshot."""
        opened: list[Any] = []
        try:
            opened.append(self._journal_class(self.journal_path))
            opened.append(self._log_class(self.log_path))
            restored = self.subject.component("durable.logged", "restore")(opened[-1], self.policy)
            return None, dict(restored.snapshot())
        except ValueError as error:
            return str(error), None
        finally:
            for closable in opened:
                closable.close()

    # ---- what the checks compare ----------------------------------------------------------

    def records(self) -> dict[str, tuple[str, ...]]:
        """Each call's journal record kinds, in order."""
        found: dict[str, list[str]] = {}
        for record in self.journal.records():
            found.setdefault(record.plan_id, []).append(str(record.kind))
        return {call: tuple(kinds) for call, kinds in found.items()}

    def snapshot(self) -> dict[str, Any]:
        return dict(self.controller.snapshot())

    def close(self) -> None:
        self._drop()


def _hooked_journal(subject: BoundarySubject, real: RealBoundary) -> Any:
    """The subject's SQLite journal, reporting each durable write to ``real``."""
    base = subject.component("sqlite_journal", "SqliteJournal")

    class HookedJournal(base):  # type: ignore[misc, valid-type]
        def claim(self, intent: Any) -> Any:
            existing = super().claim(intent)
            if existing is None:
                real.reached("intended", intent.plan_id)
            return existing

        def complete(self, receipt: Any, body: str | None = None) -> None:
            super().complete(receipt, body)
            real.reached("receipted", receipt.plan_id)

        def approve(self, intent: Any) -> None:
            super().approve(intent)
            real.reached("approval_recorded", intent.plan_id)

    return HookedJournal


def _hooked_log(subject: BoundarySubject, real: RealBoundary) -> Any:
    """The subject's SQLite run log, reporting each logged call to ``real``."""
    base = subject.component("durable.log", "SqliteRunLog")
    numbers = {call.number: call.id for call in real.domains.calls}
    times = {call.tool_ms: call.id for call in real.domains.calls}

    class HookedLog(base):  # type: ignore[misc, valid-type]
        def append(self, entry: Any) -> None:
            super().append(entry)
            argument = json.loads(entry.argument)
            if entry.op == "propose" and isinstance(argument, dict) and "id" in argument:
                real.reached("proposed", str(argument["id"]))
            elif entry.op == "execute" and entry.answer == '"Executed"':
                real.reached("decided", str(argument))
            elif entry.op == "approve" and isinstance(argument, dict):
                real.reached("approved", str(argument.get("plan_id")))
            elif entry.op == "charge" and isinstance(argument, dict):
                # the call a tool charge is for: by the host's usage, else by its time
                call_id = numbers.get(argument.get("tokens", 0)) or times.get(
                    argument.get("elapsed_ms", 0)
                )
                if call_id is not None:
                    real.reached("charged", call_id)

    return HookedLog


__all__ = ["SNAPSHOT_EVERY", "Crash", "Done", "RealBoundary"]
