"""Work run beside: named calls run one after another in a forked process, started now
and each collected when it is needed, so that checks which need no other check's
result use the second core while the main process searches.

Owns ``Beside`` (start, collect, cancel) and ``BesideError`` (a call raised, or the
process died). Leaves which checks run beside to ``verification.pipeline``.

Why one process running the calls in turn, not one each: on two cores a third
CPU-bound process slows the main search, which is the run's critical path. Why a
process and not a thread: the checks are CPU-bound Python, which a thread would run
under the same lock. Why only ``fork``: the child inherits the policy and the subject
under test (a mutant's class is built at run time) without pickling them, and sends
back only each call's value. Where forking is unsafe (a Ray driver:
``forking.worker_context``) ``start`` declines and the caller runs the calls in line.

The files a call writes are sent back and written by the parent, so a command that
holds its writes until it has finished (``files.held``) still writes all of them or
none.
"""

from __future__ import annotations

import queue
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, NamedTuple

from replan.verification.runtime import files, interrupt
from replan.verification.runtime.forking import worker_context


class BesideError(RuntimeError):
    """A call raised in its process (the message is its error, ``child_traceback``
    where it was raised), or the process died before it answered."""

    def __init__(self, message: str, child_traceback: str = "") -> None:
        super().__init__(message)
        self.child_traceback = child_traceback


class _Answer(NamedTuple):
    """What one call sent back: its value, or its error and where it was raised; the
    seconds it took; the files it wrote and the lines announcing them."""

    value: Any
    error: str | None
    child_traceback: str
    seconds: float
    writes: list[tuple[Path, bytes]]
    announcements: list[str]


def _run(connection: Connection, calls: dict[str, Callable[[], Any]]) -> None:
    """In the forked process: each call in turn, its answer (its value and the seconds
    it took, or the error it raised, with the files it wrote) handed to a sending
    thread as soon as it is known, so that the next call starts at once even while the
    parent, busy with its own check, has not yet read a large answer out of the pipe."""
    interrupt.ignore_in_worker()  # Ctrl-C is the parent's: it cancels the work
    answers: queue.SimpleQueue[tuple[str, _Answer] | None] = queue.SimpleQueue()

    def send() -> None:
        while (answer := answers.get()) is not None:
            try:
                connection.send(answer)
            except Exception as error:  # a value that cannot be pickled: say so
                name, kept = answer
                unsent = f"its answer could not be sent back: {type(error).__name__}: {error}"
                connection.send((name, kept._replace(value=None, error=unsent)))
        connection.close()

    sender = threading.Thread(target=send)
    sender.start()
    for name, call in calls.items():
        started = time.perf_counter()
        # The call's files are the parent's to write: held here, sent with the answer
        # (a parent holding its command's writes until the end keeps holding them).
        with files.held() as written:
            value, error, where = None, None, ""
            try:
                value = call()
            except BaseException as raised:  # every failure goes back, as text
                error, where = f"{type(raised).__name__}: {raised}", traceback.format_exc()
            answer = _Answer(
                value,
                error,
                where,
                time.perf_counter() - started,
                list(written.pending.items()),
                written.announcements,
            )
        answers.put((name, answer))
    answers.put(None)
    sender.join()


class Beside:
    """``calls`` running in turn in a forked process; ``collect(name)`` waits for one."""

    def __init__(self, calls: dict[str, Callable[[], Any]]) -> None:
        context = worker_context()
        self._connection, theirs = context.Pipe(duplex=False)
        self._process = context.Process(  # type: ignore[attr-defined]
            target=_run, args=(theirs, calls), daemon=True
        )
        self._process.start()
        theirs.close()
        self._answers: dict[str, _Answer] = {}
        self._names = set(calls)

    @classmethod
    def start(cls, calls: dict[str, Callable[[], Any]]) -> Beside | None:
        """``calls`` started in a forked process, or None where forking is unsafe."""
        if worker_context().get_start_method() != "fork":
            return None
        return cls(calls)

    def __contains__(self, name: str) -> bool:
        return name in self._names

    def collect(self, name: str) -> tuple[Any, float]:
        """Call ``name``'s value and the seconds it took in its process, the files it
        wrote written here (``files.write_atomically``: held if this process holds its
        writes). Waits, honouring Ctrl-C; raises ``BesideError`` when the call raised
        or the process died before answering it."""
        try:
            while name not in self._answers:
                while not self._connection.poll(0.2):
                    interrupt.check()
                answered, answer = self._connection.recv()
                self._answers[answered] = answer
        except EOFError:
            self.cancel()
            raise BesideError(
                f"the process running it died before answering (exit code {self._process.exitcode})"
            ) from None
        except BaseException:
            self.cancel()
            raise
        self._names.discard(name)
        if not self._names:
            self.cancel()
        answer = self._answers.pop(name)
        for path, payload in answer.writes:
            files.write_atomically(path, payload)
        for line in answer.announcements:
            files.announce(line)
        if answer.error is not None:
            raise BesideError(answer.error, answer.child_traceback)
        return answer.value, answer.seconds

    def cancel(self) -> None:
        """Stop the calls still running (nothing they would have answered is kept)."""
        if self._process.is_alive():
            self._process.terminate()
        self._process.join()
        self._connection.close()
