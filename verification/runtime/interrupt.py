"""Ctrl-C: every ``replan`` command stops within two seconds, with exit 130.

Owns the SIGINT handler ``replan.cli.main`` installs (``installed``), the flag it
sets (``requested``) and the checkpoints that honour it (``check``), and nothing else.

Why more than Python's default: a ``KeyboardInterrupt`` can be lost or never come.

- Lost: raised while Python runs a ``__del__`` (python-statemachine has one) or a
  weakref callback, it is printed as "Exception ignored" and dropped, and the run
  carries on. So the handler also sets a flag; ``sys.unraisablehook`` drops such an
  interrupt silently and has it delivered again a moment later; and ``check()``, which
  the engines call at their checkpoints (the campaign's examples, the explorer's loop,
  each proof obligation, each of verify's stages), raises it again.
- Never comes: z3 works in C. By default it takes SIGINT itself during a check and
  just answers "unknown", so Python never hears of it (``ctrl_c`` is switched off, so
  SIGINT reaches Python), and Python's handler runs only once z3 returns. So a
  watcher thread, woken by the signal through ``signal.set_wakeup_fd``, interrupts
  z3's context (``Context.interrupt()``, documented as callable from another thread)
  until the main thread is back in Python.

As a last resort, when the process is still alive ``DEADLINE`` seconds after the
interrupt, the watcher removes the temporary files of writes under way
(``verification.runtime.files``), terminates the worker processes, prints the one line and
exits 130. Worker processes ignore SIGINT (``ignore_in_worker``): their parent
terminates them (``with Pool(...)`` does on the way out).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

#: Seconds after the first Ctrl-C at which the process exits, whatever it is doing.
DEADLINE = 1.5

_requested = threading.Event()
_redeliver = threading.Event()
_stop = threading.Event()
_state: dict[str, Any] = {
    "installed": False,
    "holding": 0,  # inside held(): the handler only records
    "finished": False,  # the command's interrupted line was printed
    "at": 0.0,
    "message": "replan: interrupted",
}
_lock = threading.Lock()


def requested() -> bool:
    """Whether Ctrl-C was pressed (since ``installed`` began)."""
    return _requested.is_set()


def check() -> None:
    """A checkpoint: raise ``KeyboardInterrupt`` when Ctrl-C was pressed, even if the
    one the handler raised was swallowed where it landed."""
    if _requested.is_set() and not _state["holding"]:
        raise KeyboardInterrupt


@contextmanager
def held() -> Iterator[None]:
    """A critical section (writing a command's files): Ctrl-C is recorded, not raised,
    and the watcher's deadline waits for the section to end."""
    with _lock:
        _state["holding"] += 1
    try:
        yield
    finally:
        with _lock:
            _state["holding"] -= 1


def finished() -> None:
    """The command printed its interrupted line and is on its way out: no further
    interrupt is raised (it would only disturb the clean-up)."""
    _state["finished"] = True


def _handler(signum: int, frame: Any) -> None:
    if not _requested.is_set():
        _state["at"] = time.monotonic()
        _requested.set()
    if _state["holding"] or _state["finished"]:
        return
    raise KeyboardInterrupt


def caused_by_interrupt(error: BaseException | None) -> bool:
    """Whether ``error`` is the interrupt, or what a library made of it: ctypes turns
    one raised while it converts an argument into ``ArgumentError("argument 2:
    KeyboardInterrupt: ")``."""
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, KeyboardInterrupt):
            return True
        if type(error).__name__ == "ArgumentError" and "KeyboardInterrupt" in str(error):
            return True
        error = error.__cause__ or error.__context__
        seen += 1
    return False


def _unraisable(previous: Callable[[Any], None]) -> Callable[[Any], None]:
    # Bound here: after an interrupt the hook stays installed until the interpreter
    # exits, when the module's globals may already be gone.
    requested, redeliver, by_interrupt, cut_short = (
        _requested,
        _redeliver,
        caused_by_interrupt,
        half_built,
    )

    def hook(unraisable: Any) -> None:
        if requested.is_set() and by_interrupt(unraisable.exc_value):
            redeliver.set()  # raised inside a __del__: deliver it again, elsewhere
            return
        if requested.is_set() and cut_short(unraisable):
            return
        previous(unraisable)

    return hook


def half_built(unraisable: Any) -> bool:
    """Whether, after an interrupt, ``unraisable`` is the finalizer of an object whose
    ``__init__`` the interrupt cut short: its ``__del__`` reads an attribute that was
    never set (z3's ``AstRef.__del__`` reads ``self.ctx``), which is no error of the run
    (it is over) and would print a traceback after the one line the run ends with."""
    error = unraisable.exc_value
    if not isinstance(error, AttributeError):
        return False
    finalizer = getattr(unraisable.object, "__name__", "")
    return finalizer == "__del__" and getattr(error, "obj", None) is not None


def _interrupt_z3() -> None:
    module = sys.modules.get("z3.z3")
    context = getattr(module, "_main_ctx", None) if module is not None else None
    if context is not None:
        with suppress(Exception):  # z3 shutting down: nothing left to interrupt
            context.interrupt()


def _last_resort(remove_temporary: Callable[[], None]) -> None:
    """The main thread did not get out in time: do what its clean-up would have."""
    remove_temporary()
    multiprocessing = sys.modules.get("multiprocessing")
    if multiprocessing is not None:
        with suppress(Exception):
            for child in multiprocessing.active_children():
                child.terminate()
    if not _state["finished"]:
        with suppress(Exception):
            sys.stderr.write(_state["message"] + "\n")
            sys.stderr.flush()
    os._exit(130)


def _watch(reader: socket.socket, main: int, remove_temporary: Callable[[], None]) -> None:
    while not _requested.is_set() and not _stop.is_set():
        try:
            data = reader.recv(64)
        except InterruptedError:
            continue
        except OSError:
            return
        if not data:
            return
        if signal.SIGINT in data:  # the main thread's handler may not have run yet
            if not _requested.is_set():
                _state["at"] = time.monotonic()
            _requested.set()
    reader.setblocking(False)
    while not _stop.is_set():
        _interrupt_z3()
        if _redeliver.is_set() and not _state["finished"]:
            _redeliver.clear()
            signal.pthread_kill(main, signal.SIGINT)
        if time.monotonic() - _state["at"] >= DEADLINE and not _state["holding"]:
            _last_resort(remove_temporary)
        time.sleep(0.02)
        with suppress(OSError):
            reader.recv(4096)  # drain


@contextmanager
def installed(message: str, remove_temporary: Callable[[], None] = lambda: None) -> Iterator[None]:
    """Honour Ctrl-C for the duration (the main thread only): ``message`` is the line
    printed if the process has to be ended from the watcher, after
    ``remove_temporary`` (``files.remove_temporary``: the writes under way)."""
    if threading.current_thread() is not threading.main_thread() or _state["installed"]:
        yield
        return

    _state.update(installed=True, finished=False, message=message)
    _requested.clear()
    _redeliver.clear()
    _stop.clear()
    with suppress(Exception):  # SIGINT to Python, not to z3's own handler (which eats it)
        import z3  # type: ignore[import-untyped]

        z3.set_param("ctrl_c", False)
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    previous_handler = signal.signal(signal.SIGINT, _handler)
    previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _unraisable(previous_hook)
    watcher = threading.Thread(
        target=_watch, args=(reader, threading.main_thread().ident, remove_temporary), daemon=True
    )
    watcher.start()
    try:
        yield
    finally:
        if not _requested.is_set():  # interrupted: objects cut short die on the way out
            sys.unraisablehook = previous_hook
        signal.set_wakeup_fd(previous_fd)
        # Interrupted: a SIGINT still on its way (one the watcher redelivered just
        # before the command finished) must not kill the process by signal instead of
        # its exit 130, so SIGINT is ignored from here on: not by a handler of ours,
        # which the interpreter replaces by the default as it shuts down (a SIGINT
        # arriving then ends the process by signal). The watcher's deadline still
        # bounds the way out.
        signal.signal(signal.SIGINT, signal.SIG_IGN if _requested.is_set() else previous_handler)
        if _requested.is_set():
            _forget_interrupt_left_string_eval()
        _state["installed"] = False
        if not _requested.is_set():
            _stop.set()
            writer.close()  # the watcher, waiting for a signal, sees the end and stops
            watcher.join(timeout=1.0)
            reader.close()
        # Interrupted: the watcher stays, so that the deadline covers the way out
        # too (the interpreter's clean-up can take a while after a big search).


def _forget_interrupt_left_string_eval() -> None:
    """CPython, run as ``python -m``, ends a process by SIGINT instead of its exit code
    when a ``KeyboardInterrupt`` once left a string ``exec``/``eval``, even one caught
    afterwards (the interpreter records it there and reads the record at exit);
    dataclasses and named tuples build their methods by string ``exec``, so an
    interrupt landing while a module is imported can leave one. Every string eval
    clears that record as it starts: one here, once the interrupt was handled."""
    eval("None")


def ignore_in_worker() -> None:
    """In a worker process: leave Ctrl-C to the parent, which terminates its workers
    (a terminal sends SIGINT to the whole process group)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with suppress(ValueError):  # not the main thread of the worker
        signal.set_wakeup_fd(-1)


def say(line: str) -> None:
    """One line on stderr, written with its newline in one call and flushed: ``print``
    writes the text and the newline apart, and Ctrl-C arriving between them left a
    progress line without its end, with the interrupt's own line run on after it."""
    sys.stderr.write(f"{line}\n")
    sys.stderr.flush()
