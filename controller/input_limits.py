"""Reading a file someone else wrote: bounded in size and nesting, in linear time.

Owns the limits every file a command reads is held to (a policy, a counterexample, a
trace, a verify report, a coverage record, a Markdown page) and the readers that
enforce them. Past a limit the reader raises ``InputLimitError`` with one line that
names the file, the limit and what it found; the caller adds its own context and exits
2. Nothing is parsed before its size is known to be within the limit, so ``/dev/zero``
or a multi-gigabyte file costs one bounded read.

Why each limit:

- size: a file is read whole, so its size bounds the memory and the time a command
  spends; the reader reads at most one byte more than the limit, whatever the file is
  (a FIFO, a device, a file that grows);
- depth: Python's parsers recurse (``tomllib`` entirely, ``json`` in C up to the
  interpreter's recursion limit), and so do the tools that walk a document, so a deeply
  nested document would end in a ``RecursionError`` traceback. Documents deeper than
  any replan writes are refused before anything walks them;
- dotted keys: ``tomllib`` takes quadratic time in the number of parts of one dotted
  key (``a.a.a...``: 40 KB took 16 s), so a key of more parts than a policy ever needs
  is refused by a linear scan before ``tomllib`` sees it.

Stdlib only.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any, Final

#: A policy file (TOML): far more than any policy needs (100,000 evidence keys fit).
POLICY_BYTES: Final = 8 * 2**20
#: A JSON record a command reads (a counterexample, a trace, a verify report, a
#: coverage record): a recorded run of a million calls fits.
RECORD_BYTES: Final = 256 * 2**20
#: A run log (SQLite) ``replan conform`` checks: it reads every entry.
RUN_LOG_BYTES: Final = 1024 * 2**20
#: A Markdown page (``replan diagram --readme``).
PAGE_BYTES: Final = 8 * 2**20
#: Nesting of arrays and tables/objects: replan's own documents nest 6 deep at most.
MAX_DEPTH: Final = 64
#: Parts of one dotted TOML key (``limits.max_steps`` has two).
MAX_KEY_PARTS: Final = 32


class InputLimitError(ValueError):
    """A file past one of the limits (the message is one line, starting with its path)."""


def _size(count: int) -> str:
    return f"{count / 2**20:.0f} MiB" if count >= 2**20 else f"{count:,} bytes"


def read_bytes(path: str | Path, limit: int, what: str = "this file") -> bytes:
    """At most ``limit`` bytes of ``path``; ``InputLimitError`` when it holds more
    (``what`` names the kind of file in the message). ``OSError`` when it cannot be
    read (the caller names why)."""
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise InputLimitError(f"{path}: more than {_size(limit)}, the most {what} may hold")
    return data


def read_text(path: str | Path, limit: int, what: str = "this file") -> str:
    """``read_bytes`` as UTF-8 (``UnicodeDecodeError`` when it is not)."""
    return read_bytes(path, limit, what).decode("utf-8")


def check_depth(document: Any, where: str, limit: int = MAX_DEPTH) -> None:
    """``InputLimitError`` when ``document`` (parsed JSON or TOML) nests lists and
    dicts deeper than ``limit``. Iterative: it never recurses itself."""
    pending: list[tuple[Any, int]] = [(document, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            raise InputLimitError(f"{where}: nested more than {limit} deep")
        pending.extend((child, depth + 1) for child in children)


def loads_json(text: str, where: str, limit: int = MAX_DEPTH) -> Any:
    """``json.loads`` with the depth limit: ``InputLimitError`` past it (however
    deep: a nesting past Python's recursion limit is refused the same way);
    ``ValueError`` for text that is not JSON."""
    try:
        document = json.loads(text)
    except RecursionError:
        raise InputLimitError(f"{where}: nested more than {limit} deep") from None
    check_depth(document, where, limit)
    return document


def load_json(path: str | Path, limit: int | None = None, what: str = "a JSON record") -> Any:
    """A JSON file within the size (default ``RECORD_BYTES``) and depth limits.
    ``InputLimitError`` past one; ``OSError``, ``UnicodeDecodeError`` or ``ValueError``
    (not JSON) otherwise."""
    size = RECORD_BYTES if limit is None else limit
    return loads_json(read_text(path, size, what), str(path))


#: One part of a TOML key: bare, or a basic or literal string (which may hold dots).
_KEY_PART = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\\n]|\\.)*"|'[^'\n]*')"""
#: What the scan steps over: multi-line strings and comments (skipped whole, dots and
#: all), and runs of key parts joined by dots (a dotted key, or a float). A part holds
#: no dot, so each run matches in time linear in its length, and the characters
#: between runs are skipped by the regular expression engine, not by a Python loop.
_TOML_RUNS = re.compile(
    r'"""[\s\S]*?"""|'
    + r"'''[\s\S]*?'''|#[^\n]*|"
    + _KEY_PART
    + r"(?:[ \t]*\.[ \t]*"
    + _KEY_PART
    + ")*"
)


def check_toml_keys(text: str, where: str, limit: int = MAX_KEY_PARTS) -> None:
    """``InputLimitError`` when a dotted key of ``text`` has more than ``limit``
    parts: a linear scan, run before ``tomllib`` (quadratic in them) parses it."""
    for match in _TOML_RUNS.finditer(text):
        run = match.group()
        if "." not in run or run.startswith(('"""', "'''", "#")):
            continue
        if len(re.findall(_KEY_PART, run)) > limit:
            line = text.count("\n", 0, match.start()) + 1
            raise InputLimitError(f"{where}: line {line}: a dotted key of more than {limit} parts")


def loads_toml(text: str, where: str) -> dict[str, Any]:
    """``tomllib.loads`` within the key and depth limits: ``InputLimitError`` past
    one, ``tomllib.TOMLDecodeError`` (a ``ValueError``) for text that is not TOML."""
    check_toml_keys(text, where)
    try:
        document = tomllib.loads(text)
    except RecursionError:
        raise InputLimitError(f"{where}: nested more than {MAX_DEPTH} deep") from None
    check_depth(document, where)
    return document
