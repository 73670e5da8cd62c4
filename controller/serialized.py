"""One run shared by threads: every event call holds one lock.

A ``Controller`` is one run owned by one caller at a time (CONTRACT.md): its
transitions read and then write several fields, so two threads inside it at once can
execute one id twice or run more steps than ``max_steps``. Agent frameworks call tools
from threads and from async tasks. ``SerializedController`` is the generated
``Controller`` with each event (read from the declaration's interface,
``Controller.events``, never listed here) under one re-entrant lock, so calls from any
number of threads are applied one after another, each seeing the state the one before
left. The read-only view is unchanged. The agent tools (``controller.agent``) and the
middleware serialize their own calls; use this class when host code shares a run
across threads. ``LoggedController`` serializes too (its log follows the calls' order).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from replan.controller._generated import Controller
from replan.controller.policy import Policy


class SerializedController(Controller):
    """``Controller`` whose events run one at a time (see the module docstring)."""

    __slots__ = ("_serial",)

    def __init__(self, policy: Policy | None = None) -> None:
        super().__init__(policy)
        self._serial = threading.RLock()


def _serialized(op: str) -> Callable[..., Any]:
    unserialized = getattr(Controller, op)

    def call(self: SerializedController, *argument: Any) -> Any:
        with self._serial:
            return unserialized(self, *argument)

    call.__doc__ = unserialized.__doc__
    call.__name__ = op
    return call


for _op in Controller.events:
    setattr(SerializedController, _op, _serialized(_op))
