"""What the boundary check runs: the real effect boundary, or a broken variant of it.

A ``BoundarySubject`` is every component of the boundary the check drives, taken from
the modules that define them: the guard (``controller/middleware.py``), the executor
and ``perform`` (``controller/executor.py``), the owner's approval of a call
(``controller/approval.py``), the journals
(``controller/journal.py``, ``controller/sqlite_journal.py``) and the durable run log
(``controller/durable/log.py``, ``controller/durable/logged.py``). ``REAL`` is the
shipped code. A broken variant is the same files with an edit: the edited module is
executed again from its edited source, and so is every boundary module after it (each
importing the edited ones), so the broken piece is what every caller runs, exactly as
a user's broken checkout would. ``replan mutate`` builds its boundary mutants the same
way (``verification.boundary.mutation``).

The bug kinds seeded by hand (``MUTANTS``) each name the rule they break; the tests
pin that the boundary check names it.
"""

from __future__ import annotations

import importlib
import linecache
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from replan.verification.core.subject import DEFAULT_IMPLEMENTATION, PROJECT, Subject

#: The boundary's modules, in import order (a later one may import an earlier one),
#: with their files relative to the repository.
MODULES: dict[str, str] = {
    "replan.controller.journal": "controller/journal.py",
    "replan.controller.sqlite_journal": "controller/sqlite_journal.py",
    "replan.controller.executor": "controller/executor.py",
    "replan.controller.approval": "controller/approval.py",
    "replan.controller.middleware": "controller/middleware.py",
    "replan.controller.durable.log": "controller/durable/log.py",
    "replan.controller.durable.logged": "controller/durable/logged.py",
}
FILES: dict[str, str] = {path: name for name, path in MODULES.items()}


class SubjectError(ValueError):
    """A broken variant that cannot be built (its edit no longer applies)."""


@dataclass(frozen=True)
class BoundarySubject:
    """One effect boundary under check: its modules by name (``MODULES``)."""

    name: str
    description: str
    modules: Mapping[str, types.ModuleType]
    #: the rule a seeded bug breaks (None: the real boundary, or a generated mutant)
    breaks: str | None = None
    #: the edits it was built from: (file, old text, new text)
    edits: tuple[tuple[str, str, str], ...] = field(default=())

    def component(self, module: str, name: str) -> Any:
        return getattr(self.modules[f"replan.controller.{module}"], name)

    @property
    def executor(self) -> types.ModuleType:
        return self.modules["replan.controller.executor"]


def _real_modules() -> dict[str, types.ModuleType]:
    return {name: importlib.import_module(name) for name in MODULES}


REAL = BoundarySubject("real", "the shipped boundary", _real_modules())

_COUNTER = [0]


@cache
def source_of(path: str) -> str:
    """The source of a boundary file (``controller/...``) as this checkout has it, read
    once per process (every mutant of a run is built against the same sources)."""
    module = importlib.import_module(FILES[path])
    assert module.__file__ is not None
    return Path(module.__file__).read_text(encoding="utf-8")


def build(
    name: str,
    sources: Mapping[str, str],
    description: str = "",
    breaks: str | None = None,
    edits: tuple[tuple[str, str, str], ...] = (),
) -> BoundarySubject:
    """The subject whose files ``sources`` (path -> new source) replace the real ones:
    each replaced module, and every boundary module after the first one, executed
    again with the rebuilt modules in place of the originals."""
    unknown = sorted(set(sources) - set(FILES))
    if unknown:
        raise SubjectError(f"not a boundary file: {', '.join(unknown)}")
    first = min(list(MODULES.values()).index(path) for path in sources)
    rebuilt: dict[str, types.ModuleType] = {}
    saved = {n: sys.modules.get(n) for n in MODULES}
    _COUNTER[0] += 1
    try:
        for position, (module_name, path) in enumerate(MODULES.items()):
            if position < first:
                continue
            text = sources.get(path) or source_of(path)
            filename = f"<boundary mutant {_COUNTER[0]}: {path}>"
            linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
            module = types.ModuleType(module_name)
            module.__file__ = filename
            module.__package__ = module_name.rpartition(".")[0]
            sys.modules[module_name] = module
            try:
                exec(compile(text, filename, "exec"), module.__dict__)
            except Exception as error:
                raise SubjectError(
                    f"{name}: {path} does not load ({type(error).__name__}: {error})"
                ) from None
            rebuilt[module_name] = module
    finally:
        for module_name, original in saved.items():
            if original is not None:
                sys.modules[module_name] = original
    modules = {**REAL.modules, **rebuilt}
    return BoundarySubject(name, description, modules, breaks, edits)


def edited(
    name: str, description: str, breaks: str, *edits: tuple[str, str, str]
) -> BoundarySubject:
    """The real files with each (file, old, new) edit applied once (``SubjectError``
    when ``old`` is not in the file exactly once: the edit no longer applies)."""
    sources: dict[str, str] = {}
    for path, old, new in edits:
        text = sources.get(path) or source_of(path)
        if text.count(old) != 1:
            raise SubjectError(f"{name}: the edit of {path} no longer applies ({old[:60]!r})")
        sources[path] = text.replace(old, new)
    return build(name, sources, description, breaks, tuple(edits))


# ---- the seeded bug kinds ----------------------------------------------------------------

_SEEDED: dict[str, tuple[str, str, tuple[tuple[str, str, str], ...]]] = {
    "guard-cites-current-revision": (
        "the guard cites the current evidence revision, not the one the model was shown",
        "effect-only-after-executed",
        (
            (
                "controller/middleware.py",
                "cited = seen if seen is not None else self.run.evidence_revision",
                "cited = self.run.evidence_revision",
            ),
        ),
    ),
    "tool-time-not-charged": (
        "the guard charges the host's usage of a call but not its tool time",
        "tool-time-and-usage-charged",
        (
            (
                "controller/middleware.py",
                "extra.elapsed_ms + _amount(tool_ms)",
                "extra.elapsed_ms",
            ),
        ),
    ),
    "restore-skips-last-entry": (
        "restore replays every logged call but the last",
        "restore-is-exact-or-refuses",
        (
            (
                "controller/durable/logged.py",
                "    replay(controller, log.entries(start))\n",
                "    replay(controller, log.entries(start)[:-1])\n",
            ),
        ),
    ),
    "log-range-read-one-short": (
        "the SQLite run log's range read uses < for <=",
        "restore-is-exact-or-refuses",
        (
            (
                "controller/durable/log.py",
                '"WHERE position > ? AND position <= ? ORDER BY position"',
                '"WHERE position > ? AND position < ? ORDER BY position"',
            ),
        ),
    ),
    "early-check-ignores-digest": (
        "the executor's early check compares no digest (only the grant and an open intent)",
        # other content must be refused before the controller is asked: this one is
        # asked, and spends the step (an approved call's, say) on content it refuses
        "effect-matches-what-was-accepted",
        (
            (
                "controller/executor.py",
                "if entry is not None and (entry.intent.digest != operation.digest() or "
                "entry.in_doubt):",
                "if entry is not None and entry.in_doubt:",
            ),
            (
                "controller/executor.py",
                "        return self._unbound(operation, bound(records))\n",
                "        return None\n",
            ),
        ),
    ),
    "replay-without-record-runs-effect": (
        "a call the controller answers Replayed runs its effect when the journal has no record",
        "in-doubt-needs-the-owner",
        (
            (
                "controller/executor.py",
                "        if reason is not None:\n            return answer, reason\n",
                "        if reason is not None or not executor.journal.knows(operation.plan_id):\n"
                "            return answer, reason or ''\n",
            ),
        ),
    ),
    "perform-ignores-resource": (
        "perform compares the operation's step with the accepted plan's, not its resource",
        "effect-matches-what-was-accepted",
        (
            (
                "controller/executor.py",
                "if (pending.step, pending.resource) != (operation.step, operation.resource):",
                "if pending.step != operation.step:",
            ),
        ),
    ),
}


@cache
def mutant(name: str) -> BoundarySubject:
    """The seeded bug ``name`` (``MUTANTS``), built on first use."""
    description, breaks, edits = _SEEDED[name]
    return edited(name, description, breaks, *edits)


#: The seeded bug kinds, by name: (description, the rule it breaks).
MUTANTS: dict[str, tuple[str, str]] = {
    name: (description, breaks) for name, (description, breaks, _) in _SEEDED.items()
}


def subject_named(name: str) -> BoundarySubject:
    """``REAL`` ("real") or the seeded bug ``name``; ``KeyError`` naming the known ones."""
    if name == REAL.name:
        return REAL
    if name not in _SEEDED:
        raise KeyError(f"no boundary subject {name!r} (known: real, {', '.join(_SEEDED)})")
    return mutant(name)


def _project_controller() -> type[Any]:
    from replan.controller import Controller

    return Controller


def verify_subject(name: str) -> Subject:
    """What ``replan verify --mutant NAME`` checks for the seeded bug ``name``: the
    project's controller as it is, with this broken boundary (``KeyError`` naming the
    known kinds)."""
    if name not in _SEEDED:
        raise KeyError(f"no seeded boundary bug {name!r} (known: {', '.join(_SEEDED)})")
    description = f"the project with a broken boundary: {_SEEDED[name][0]}"
    return replace(
        PROJECT,
        name=f"boundary-{name}",
        description=description,
        build_controller=_project_controller,
        importable=DEFAULT_IMPLEMENTATION,
        boundary=name,
    )


__all__ = [
    "FILES",
    "MODULES",
    "MUTANTS",
    "REAL",
    "BoundarySubject",
    "SubjectError",
    "build",
    "edited",
    "mutant",
    "source_of",
    "subject_named",
    "verify_subject",
]
