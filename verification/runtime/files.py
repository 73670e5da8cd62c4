"""Writing the files the tools produce: atomically, and in a command all at its end.

Owns ``write_atomically`` (every report, counterexample, evidence file, page and log
under ``replan/`` and ``verification/`` is written through it), ``held`` (what
``replan.cli.main`` runs every command in) and ``write_now`` (a cache entry, written
at once), and nothing else.

``write_atomically(path, data)``: the bytes (or UTF-8 text) go to a temporary file
in the same directory, are fsynced and then renamed over ``path`` (``os.replace``): a
reader sees the old file or the new one, never part of one.

``held()``: writes are kept in memory, and ``Held.commit()`` writes them, in the order
they were made, once the command has finished; an interrupted (or crashed) command
writes none of them. So a counterexample never lands without the report that names it,
and a report never describes a run that did not finish.

``announce(line)``: what a command says about a file it wrote ("wrote out/m.svg ...")
is said once the file exists: inside ``held()`` the line waits for ``Held.commit()``
(``Held.announcements``, printed by the command line after it), outside it is printed
at once. A command that could not write its file never said it wrote it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from replan.verification.runtime import interrupt

#: Where every command writes unless told otherwise (relative to where it runs; in
#: this repository's .gitignore): out/<command>/...
OUT = Path("out")

#: Writes held by the innermost ``held()`` (a stack: nested ones commit into it).
_held: list[dict[Path, bytes]] = []
#: Temporary files being written now (removed by the interrupt's last resort).
_temporary: set[str] = set()
#: The lines ``announce`` holds back, by the held block they wait for.
_announced: dict[int, list[str]] = {}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_MODE = 0o666 & ~_umask()


def write_json(path: str | Path, document: Any) -> Path:
    """``document`` as indented JSON, written atomically (``write_atomically``)."""
    return write_atomically(path, json.dumps(document, indent=2) + "\n")


def write_atomically(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` atomically (or hold it, inside ``held()``); the
    directory is created if missing. ``OSError`` when it cannot be written."""
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if _held:
        where = target.absolute()  # held: the directory it meant, even after a chdir
        _held[-1].pop(where, None)  # written again: it goes where the last write was
        _held[-1][where] = payload
        return target
    _write_now(target, payload)
    return target


def write_now(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` atomically at once, even inside ``held()``: for a
    file that is no part of a command's result (a cache entry), which an interrupted
    command may as well leave, and whose failure to be written fails nothing."""
    target = Path(path)
    _write_now(target, data.encode("utf-8") if isinstance(data, str) else bytes(data))
    return target


def _write_now(target: Path, payload: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".partial"
    )
    _temporary.add(temporary)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, _MODE)  # mkstemp's 0600 -> what a plain open() would give
        os.replace(temporary, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise
    finally:
        _temporary.discard(temporary)
    with suppress(OSError):  # the rename itself, durable (not on every file system)
        directory = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def announce(line: str) -> None:
    """Say ``line`` (that a file was written) once the held writes exist: kept for the
    innermost ``held()`` block (``Held.announcements``), printed at once outside one."""
    if _held:
        _announced.setdefault(id(_held[-1]), []).append(line)
    else:
        print(line)


class Held:
    """The writes of one ``held()`` block, written by ``commit``."""

    def __init__(self, pending: dict[Path, bytes]) -> None:
        self.pending = pending

    @property
    def announcements(self) -> list[str]:
        """The lines ``announce`` kept for this block, to say once ``commit`` wrote
        its files."""
        return list(_announced.get(id(self.pending), []))

    @property
    def paths(self) -> list[Path]:
        return list(self.pending)

    def commit(self) -> list[Path]:
        """Write every held file (Ctrl-C waits until they all are); each is atomic.
        ``OSError`` (its ``filename`` set) on the first that cannot be written."""
        written = []
        outer = _enclosing(self.pending)
        with interrupt.held():
            while self.pending:
                target, payload = next(iter(self.pending.items()))
                if outer is not None:  # a nested block: its writes join the outer one's
                    outer.pop(target, None)
                    outer[target] = payload
                else:
                    try:
                        _write_now(target, payload)
                    except OSError as error:
                        # the file the command meant, not a temporary or a parent
                        error.filename = str(target)
                        raise
                del self.pending[target]
                written.append(target)
            if outer is not None:  # its lines wait for the outer block's writes
                _announced.setdefault(id(outer), []).extend(_announced.pop(id(self.pending), []))
        return written


def _position(pending: dict[Path, bytes]) -> int | None:
    return next((i for i, entry in enumerate(_held) if entry is pending), None)


def _enclosing(pending: dict[Path, bytes]) -> dict[Path, bytes] | None:
    position = _position(pending)
    if position is None:
        return _held[-1] if _held else None
    return _held[position - 1] if position > 0 else None


@contextmanager
def held() -> Iterator[Held]:
    """Hold every write made inside until ``commit()``; leaving without committing
    (an exception, Ctrl-C) drops them."""
    pending: dict[Path, bytes] = {}
    _held.append(pending)
    try:
        yield Held(pending)
    finally:
        position = _position(pending)
        if position is not None:
            del _held[position]
        _announced.pop(id(pending), None)


def remove_temporary() -> None:
    """Remove the temporary files of writes under way (the process is ending)."""
    for temporary in list(_temporary):
        with suppress(OSError):
            os.unlink(temporary)
