"""A controller that logs every call that changed its run, and its restore.

``LoggedController`` is the generated ``Controller`` with each event wrapped: the
call runs as it always does, and when a declared transition fired (the trace entry
names one) the call and its answer are appended to the run log, and every
``snapshot_every`` entries the run's snapshot. A call and its entry happen under one
lock, so threads sharing the run cannot log in another order than they ran. The
events are read from the declaration's interface (``Controller.events``), never
listed here, so an event the declaration adds is logged with no edit.

``restore(log, policy)`` refuses a log that may be older than the one written
(``RunLog.verify``: a SQLite log checks its chain and its witness) or written under
another declaration or policy, then rebuilds the run: from the newest snapshot but
one (or the start), it replays the logged calls, checks every replayed answer against
the logged one and the state against the newest snapshot, and replays the rest. The
restored controller goes on logging into the same log. A replay runs no effect:
effects are the executor's, and its journal answers a completed one with its receipt.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from replan.controller._generated import DECLARATION_DIGEST, Controller
from replan.controller.call_encoding import decode_argument, encode_answer, encode_argument
from replan.controller.durable.log import (
    Entry,
    Header,
    RunLog,
    RunLogError,
    refuse_other_rules,
)
from replan.controller.fields import state_of_snapshot
from replan.controller.policy import DEFAULT_POLICY, Policy, policy_digest, policy_to_dict

#: Snapshots every this many logged calls bound a restore to twice as many replays.
SNAPSHOT_EVERY = 1000


def header_for(policy: Policy, snapshot_every: int = SNAPSHOT_EVERY) -> Header:
    """The header of a log of a run under ``policy`` with this declaration."""
    return Header(DECLARATION_DIGEST, policy_digest(policy), policy_to_dict(policy), snapshot_every)


class LoggedController(Controller):
    """``Controller`` whose every run-changing call is in ``run_log`` before it
    returns (see the module docstring)."""

    __slots__ = ("_closed", "_logged", "_serial", "_snapshot_every", "run_log")

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        log: RunLog,
        snapshot_every: int = SNAPSHOT_EVERY,
    ) -> None:
        super().__init__(policy)
        if snapshot_every < 1:
            raise ValueError(f"snapshot_every: expected an int >= 1, got {snapshot_every!r}")
        log.begin(header_for(self.policy, snapshot_every))
        self.run_log = log
        self._snapshot_every = snapshot_every
        #: Entries of the log this run has made (or replayed) so far.
        self._logged = 0
        #: One call at a time, its log entry with it: the log's order is the calls'.
        self._serial = threading.Lock()
        #: Why the run is closed (its log failed to take a call), or None.
        self._closed: str | None = None

    def _log_call(self, op: str, argument: object, answer: object) -> None:
        """After a call: log it if a transition fired (else it changed nothing)."""
        if self._trace[-1][5] is None:
            return
        position = self._logged + 1
        parameter_type = self.events[op][1]
        self.run_log.append(
            Entry(position, op, encode_argument(parameter_type, argument), encode_answer(answer))
        )
        self._logged = position
        if position % self._snapshot_every == 0:
            self.run_log.snapshot(position, self.snapshot())

    def _call_logged(self, op: str, call: Callable[[], Any], argument: object) -> Any:
        """Run ``call`` and log it. If the log cannot take it, the run is closed: this
        call and every later one raise ``RunLogError``, and the run is restored from
        its log, which holds everything before the failed call (so the call did not
        happen, as far as anything durable knows). Closing costs nothing per call;
        putting the state back would mean copying it before every call."""
        with self._serial:
            if self._closed is not None:
                raise RunLogError(self._closed)
            answer = call()
            try:
                self._log_call(op, argument, answer)
            except Exception as error:
                self._closed = (
                    f"the run log could not take {op} at position {self._logged + 1} "
                    f"({type(error).__name__}: {error}); this run is closed: restore it "
                    "from its log, which ends before that call"
                )
                raise RunLogError(self._closed) from error
            return answer


def _logged_event(op: str, has_argument: bool) -> Callable[..., Any]:
    unlogged = getattr(Controller, op)
    if has_argument:

        def call_with(self: LoggedController, argument: object) -> Any:
            return self._call_logged(op, lambda: unlogged(self, argument), argument)

        call_with.__doc__ = unlogged.__doc__
        return call_with

    def call(self: LoggedController) -> Any:
        return self._call_logged(op, lambda: unlogged(self), None)

    call.__doc__ = unlogged.__doc__
    return call


for _op, (_parameter, _type, _caller) in Controller.events.items():
    setattr(LoggedController, _op, _logged_event(_op, _parameter is not None))


def replay(controller: Controller, entries: list[Entry]) -> None:
    """Run the logged calls on ``controller`` unlogged, each answer checked against
    the logged one (``RunLogError`` at the first that differs)."""
    for entry in entries:
        parameter, parameter_type, _caller = Controller.events[entry.op]
        unlogged = getattr(Controller, entry.op)
        try:
            if parameter is None:
                answer = unlogged(controller)
            else:
                answer = unlogged(controller, decode_argument(parameter_type, entry.argument))
        except ValueError as error:
            raise RunLogError(
                f"the log does not replay at position {entry.position}: "
                f"{entry.op}({entry.argument}) raised {type(error).__name__}: {error}"
            ) from None
        if encode_answer(answer) != entry.answer:
            raise RunLogError(
                f"the log does not replay at position {entry.position}: "
                f"{entry.op}({entry.argument}) was answered {entry.answer}, now "
                f"{encode_answer(answer)}"
            )


def restore(
    log: RunLog, policy: Policy | None = None, *, check_all: bool = False
) -> LoggedController:
    """The run ``log`` holds, under ``policy`` (the default policy when None), logging
    on into ``log``. ``check_all``: replay from the start and check every snapshot
    (``replan conform`` does), instead of from the newest snapshot but one."""
    policy = DEFAULT_POLICY if policy is None else policy
    log.verify()
    written = log.header()
    if written is None:
        raise RunLogError("restore: the run log is empty (no header): nothing to restore")
    refuse_other_rules(written, header_for(policy, written.snapshot_every))
    controller = LoggedController(policy, log=log, snapshot_every=written.snapshot_every)
    positions = log.snapshot_positions()
    start = 0 if check_all or len(positions) < 2 else positions[-2]
    if start:
        controller._import_state(state_of_snapshot(log.snapshot_at(start)))
    for position in [p for p in positions if p > start]:
        replay(controller, log.entries(start, position))
        if controller.snapshot() != log.snapshot_at(position):
            raise RunLogError(
                f"the log does not replay at position {position}: the replayed run differs "
                "from the snapshot stored there"
            )
        start = position
    replay(controller, log.entries(start))
    controller._logged = len(log)
    return controller
