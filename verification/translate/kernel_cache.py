"""Generated kernels kept between runs, by what they were generated from.

Why: generating a kernel translates every call's body into folded expressions (about
10 s for SPIN's (1, 1) domains on this machine, longer for larger ones); compiling
the text it produced takes under a second and searching it a few. A policy is
verified again and again while it is written, and most runs change nothing the
kernel depends on, so a kernel generated once is kept and compiled again.

What a kernel depends on, and so its key: the declaration (its digest), the policy
(its digest), the domains (every bound), the format of this file, and the source of
everything that takes part in generating it (the controller's bodies and records,
``spec/`` with the properties, ``verification/translate/`` and
``verification/core/``), so an edit to any of them, or another version of replan,
generates afresh. Only the project's own subject is cached: a mutant's or a user's
bodies are not in that source.

An entry is JSON (``GeneratedKernel``), written atomically under
``out/cache/kernels/`` (``REPLAN_KERNEL_CACHE`` names another directory, e.g. one a
CI job keeps between runs); the ``KEPT_ENTRIES`` most recently used are kept. An
entry that does not read back as what was written (cut short, edited, of another
format or key, its text not matching its digest) is generated afresh and written
again, and the report says so: a cache can only make a run faster, never change its
answer.

A kept kernel is one sound kernel of its inputs, not necessarily the text generating
it again in another process gives: the translation's z3 terms are numbered in the
order a process made them, so two generations in one process may order a
disjunction differently. The report names the digest of the text it searched.
"""

from __future__ import annotations

import hashlib
import json
import os
from contextlib import suppress
from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from replan.controller.policy import Policy
from replan.spec.model import MachineModel
from replan.verification.core.domains import Domains
from replan.verification.runtime.files import OUT, write_now
from replan.verification.translate.kernel import GeneratedKernel
from replan.verification.translate.kernel.decode import Decoding
from replan.verification.translate.renaming import Renaming

#: Bumped when an entry's shape changes: older entries are then generated afresh.
FORMAT = 4
#: The environment variable naming the cache's directory.
ENVIRONMENT = "REPLAN_KERNEL_CACHE"
#: Entries kept at most: past it, the least recently used go (each is about a
#: megabyte; a policy edited many times would otherwise leave one per version).
KEPT_ENTRIES = 32
#: The packages whose source a kernel is generated from (relative to ``replan``).
GENERATOR_SOURCES = ("controller", "spec", "verification/translate", "verification/core")


class DamagedEntry(Exception):
    """A cache entry that does not read back as a kernel of its key."""


def default_directory() -> Path:
    """``$REPLAN_KERNEL_CACHE``, or ``out/cache/kernels`` where the command runs."""
    named = os.environ.get(ENVIRONMENT)
    return Path(named) if named else OUT / "cache" / "kernels"


def package_root() -> Path:
    import replan

    return Path(replan.__file__).resolve().parent


@lru_cache(maxsize=4)
def generator_digest(root: Path | None = None) -> str:
    """The digest of every source file a kernel is generated from (in the installed
    package, or in the copy of it at ``root``)."""
    root = package_root() if root is None else root
    digest = hashlib.sha256()
    for package in GENERATOR_SOURCES:
        folder = (root / package).resolve()
        for path in sorted(folder.rglob("*.py")):
            digest.update(f"{package}/{path.relative_to(folder).as_posix()}\0".encode())
            digest.update(path.read_bytes())
            digest.update(b"\0")
    return f"sha256:{digest.hexdigest()}"


def cache_key(policy: Policy, domains: Domains, model: MachineModel) -> str:
    """The key of the kernel of ``policy`` over ``domains`` for the project's bodies."""
    described = {
        "format": FORMAT,
        "declaration": model.digest,
        "policy": policy.digest,
        "domains": asdict(domains),
        "generator": generator_digest(),
    }
    text = json.dumps(described, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class KernelCache:
    """A directory of generated kernels, one JSON file per key."""

    directory: Path

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def load(self, key: str) -> GeneratedKernel | None:
        """The kernel kept under ``key``; None when there is none. Raises
        ``DamagedEntry`` (one line: why) when the entry is there but not sound."""
        path = self.path(key)
        try:
            text = path.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            return None
        except (OSError, UnicodeDecodeError) as error:
            raise DamagedEntry(f"unreadable ({error})") from None
        with suppress(OSError):  # used now: the last to go (a read-only cache keeps all)
            os.utime(path)
        try:
            return _entry(json.loads(text), key)
        except (ValueError, TypeError, KeyError) as error:
            raise DamagedEntry(str(error) or type(error).__name__) from None

    def store(self, key: str, generated: GeneratedKernel) -> Path:
        """Keep ``generated`` under ``key`` (atomically) and say where."""
        path = self.path(key)
        kept = {f.name: getattr(generated, f.name) for f in fields(generated) if f.name != "layout"}
        if generated.renaming is not None:
            kept["renaming"] = asdict(generated.renaming)
        if generated.decoding is not None:
            kept["decoding"] = asdict(generated.decoding)
        document = {"format": FORMAT, "key": key, "digest": generated.digest, **kept}
        write_now(path, json.dumps(document, separators=(",", ":")))
        self._prune()
        return path

    def _prune(self) -> None:
        """Remove the least recently used entries past ``KEPT_ENTRIES`` (a file another
        process removes first is gone either way)."""
        entries = []
        for entry in self.directory.glob("*.json"):
            try:
                entries.append((entry.stat().st_mtime, entry))
            except FileNotFoundError:
                continue
        for _, entry in sorted(entries, reverse=True)[KEPT_ENTRIES:]:
            entry.unlink(missing_ok=True)


def _entry(document: Any, key: str) -> GeneratedKernel:
    """The kernel an entry holds, once its format, key and digest agree."""
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    if document.get("format") != FORMAT:
        raise ValueError(f"format {document.get('format')!r}, not {FORMAT}")
    if document.get("key") != key:
        raise ValueError("the entry names another key")
    generated = GeneratedKernel(
        source=_typed(document["source"], str),
        table=tuple(
            (_typed(number, int), _typed(mode, int), None if name is None else _typed(name, str))
            for number, mode, name in document["table"]
        ),
        classes=tuple(_typed(n, int) for n in document["classes"]),
        variables=tuple(_typed(v, str) for v in document["variables"]),
        initial=tuple(_typed(v, int) for v in document["initial"]),
        mode_position=_typed(document["mode_position"], int),
        checked=tuple(_typed(v, str) for v in document["checked"]),
        unchecked=tuple((_typed(n, str), _typed(w, str)) for n, w in document["unchecked"]),
        initial_failures=tuple(_typed(v, str) for v in document["initial_failures"]),
        groups=_typed(document["groups"], int),
        fired_static=tuple(
            tuple(_typed(index, int) for index in fired) for fired in document["fired_static"]
        ),
        fired_functions=tuple(
            None if name is None else _typed(name, str) for name in document["fired_functions"]
        ),
        offered_static=tuple(_typed(n, int) for n in document["offered_static"]),
        offered_functions=tuple(
            None if name is None else _typed(name, str) for name in document["offered_functions"]
        ),
        renaming=_renaming(document["renaming"]),
        decoding=_decoding(document["decoding"]),
    )
    if generated.digest != document.get("digest"):
        raise ValueError("its text does not match its digest")
    return generated


def _renaming(kept: Any) -> Renaming | None:
    if kept is None:
        return None
    return Renaming(
        ids=tuple(_typed(n, int) for n in kept["ids"]),
        sets=tuple(tuple(_typed(n, int) for n in positions) for positions in kept["sets"]),
        present=_typed(kept["present"], int),
        pending=_typed(kept["pending"], int),
        movable=tuple(_typed(n, int) for n in kept["movable"]),
    )


def _decoding(kept: Any) -> Decoding | None:
    if kept is None:
        return None
    return Decoding(
        fields=tuple((_typed(kind, str), _typed(base, str)) for kind, base in kept["fields"]),
        variables=tuple(_typed(name, str) for name in kept["variables"]),
        keys=tuple(_typed(key, str) for key in kept["keys"]),
        members=tuple(
            (_typed(kind, str), tuple(_typed(name, str) for name in names))
            for kind, names in kept["members"]
        ),
        names=tuple((_typed(number, int), _typed(name, str)) for number, name in kept["names"]),
        ids=tuple(_typed(number, int) for number in kept["ids"]),
        contents=tuple(
            (_typed(key, str), _typed(version, int)) for key, version in kept["contents"]
        ),
    )


def _typed(value: Any, kind: type) -> Any:
    if type(value) is not kind:
        raise TypeError(f"{value!r:.40} is not {kind.__name__}")
    return value
