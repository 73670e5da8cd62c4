"""Reading the overlays' inputs: a coverage result, a counterexample, an older machine.

Owns the file formats ``replan diagram`` accepts and turning each into what
``graph`` marks (fire counts by transition label, trace steps, an older model and
policy). Every problem is an ``OverlayError``: one line naming the file or revision
and what is wrong with it, for the CLI to print and exit 2.

Coverage input (``--coverage FILE``): a JSON object that maps declared transition
labels (``TransitionInfo.label``, the ``transition`` field of the trace, e.g.
``"idle --observe[duplicate_delivery]--> idle"``) to how often each fired, in any of
these shapes (other fields are ignored)::

    {"transitions_fired": {"<label>": 12, ...}}
    {"coverage": {"transitions": {"fired": {"<label>": 12, ...},
                                  "dead_under_policy": {"<label>": "why", ...}}}}
    {"coverage": {"transitions": {"<label>": 12, ...}}}

The second is what ``replan campaign --json`` writes; its ``dead_under_policy``
transitions (which cannot fire under the policy at all) are drawn apart from the ones
a run merely missed. A declared transition missing from the mapping fired 0 times.
Labels of a final state absorbing a call (``"Canceled absorbs observe"``) are not
transitions and are skipped; any other label the declaration does not have is an
error (the file belongs to another declaration).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statemachine import StateMachine

from replan.controller import input_limits
from replan.controller.policy import DEFAULT_POLICY, Policy, load_policy, policy_from_dict
from replan.controller.records import PolicyError, StopReason
from replan.controller.run import Run
from replan.spec.model import DeclarationError, MachineModel, extract
from replan.verification.engines.conform.playback import PlaybackError, load_playback
from replan.verification.report.diagram.graph import TraceStep

DECLARATION_PATH = "spec/declaration.py"
POLICY_PATH = "spec/policy.toml"


class OverlayError(ValueError):
    """An overlay input that cannot be used (one line: where and what)."""


# ---- coverage ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Coverage:
    """Fire counts by transition label, and the transitions that cannot fire under
    the policy (label -> why), when the result says so."""

    counts: dict[str, int]
    dead: dict[str, str]


def load_coverage(path: str | Path, model: MachineModel) -> Coverage:
    """Fire counts by transition label from a campaign or explorer ``--json`` result."""
    source = Path(path)
    document = _read_json(source)
    counts: Any = None
    dead: Any = {}
    where = ""
    fired_on = (
        [key for key in document if key.startswith("fired_on_")]
        if isinstance(document, dict)
        else []
    )
    if isinstance(document, dict) and "transitions_fired" in document:
        counts, where = document["transitions_fired"], "transitions_fired"
    elif fired_on:  # ``replan explore --json``: by distinct edges, or expanded states
        counts, where = document[fired_on[0]], fired_on[0]
        dead = document.get("disabled_by_policy") or {}
    elif isinstance(document, dict) and isinstance(document.get("coverage"), dict):
        transitions = document["coverage"].get("transitions")
        if isinstance(transitions, dict) and isinstance(transitions.get("fired"), dict):
            counts, where = transitions["fired"], "coverage.transitions.fired"
            dead = transitions.get("dead_under_policy") or {}
        else:
            counts, where = transitions, "coverage.transitions"
    if not isinstance(counts, dict):
        raise OverlayError(
            f'{source}: expected a JSON object with "transitions_fired", "fired_on_..." or '
            '"coverage": {"transitions": ...}, mapping transition labels to fire counts'
        )
    if not isinstance(dead, dict):
        raise OverlayError(f"{source}: coverage.transitions.dead_under_policy: expected an object")
    declared = {t.label for t in model.transitions}
    result: dict[str, int] = {}
    for label, count in counts.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise OverlayError(
                f"{source}: {where}[{label!r}]: expected a count >= 0, got {count!r}"
            )
        if label in declared:
            result[label] = count
        elif not _absorbed_label(label):
            raise OverlayError(
                f"{source}: {where}: {label!r} is not a transition of "
                f"{model.name} (is the file from another declaration?)"
            )
    unknown = [label for label in dead if label not in declared]
    if unknown:
        raise OverlayError(
            f"{source}: dead_under_policy: {unknown[0]!r} is not a transition of {model.name}"
        )
    return Coverage(result, {str(k): str(v) for k, v in dead.items()})


def _absorbed_label(label: str) -> bool:
    reason, _, rest = label.partition(" absorbs ")
    return bool(rest) and reason in {s.value for s in StopReason}


def _read_json(source: Path) -> Any:
    try:
        return input_limits.load_json(source)
    except FileNotFoundError:
        raise OverlayError(f"{source}: no such file") from None
    except input_limits.InputLimitError as error:
        raise OverlayError(str(error)) from None
    except (OSError, UnicodeDecodeError) as error:
        raise OverlayError(f"{source}: cannot read ({error.__class__.__name__})") from None
    except json.JSONDecodeError as error:
        raise OverlayError(f"{source}: not JSON ({error.msg} at line {error.lineno})") from None


# ---- a counterexample's path --------------------------------------------------------------


@dataclass(frozen=True)
class TracePath:
    """A counterexample replayed on the generated controller."""

    policy: Policy
    property: str
    steps: list[TraceStep]
    #: Steps whose replayed answer differs from the recorded one (the file was found
    #: on another implementation, e.g. a broken one): the path drawn is the real one's.
    differing: list[int]


def load_trace(path: str | Path, model: MachineModel, policy: Policy | None = None) -> TracePath:
    """Replay a recording (a counterexample in the shared JSON format, an episode
    record or a run's own trace) on the generated controller and read which declared
    transition each step fired from its trace (``verification.engines.conform.
    playback``: the player of ``replan review`` reads it the same way). A trace plays
    under the policy its records name; ``policy`` is one it may name (``--policy``)."""
    try:
        played = load_playback(path, model, policy)
    except PlaybackError as error:
        raise OverlayError(str(error)) from None
    steps = [TraceStep(s.number, s.op, s.transition, s.state_before, s.note) for s in played.steps]
    return TracePath(played.policy, played.property_name, steps, played.differing)


# ---- the older machine of a diff ------------------------------------------------------------


@dataclass(frozen=True)
class OldMachine:
    model: MachineModel
    policy: Policy
    name: str
    model_class: type


def load_old(
    old: str,
    repository: Path | None,
    current: MachineModel,
    policy_file: str | Path | None = None,
) -> OldMachine:
    """``old`` is a policy file (the current declaration under that policy) or a git
    revision of ``repository`` (None: ``repository_for(policy_file)``, the user's
    repository, not this package's checkout). At a revision the old policy is
    ``policy_file`` as that revision holds it (the same path in the repository), else
    ``spec/policy.toml`` when the repository has one, else the default; the old
    declaration is ``spec/declaration.py`` when the repository holds one (replan's own
    checkout), else today's (a user's repository holds policies, not the
    declaration)."""
    candidate = Path(old)
    if candidate.is_file():
        try:
            policy = load_policy(candidate)
        except PolicyError as error:
            raise OverlayError(str(error)) from None
        return OldMachine(current, policy, str(candidate), Run)
    if candidate.suffix == ".toml":
        raise OverlayError(f"{old}: no such policy file")
    repository = repository or repository_for(policy_file)
    commit = _git(repository, "rev-parse", "--verify", "--quiet", f"{old}^{{commit}}")
    if commit is None:
        raise OverlayError(
            f"{old}: neither a policy file nor a git revision of {repository} "
            "(try a commit, a branch, HEAD~1, or a path to a policy TOML file)"
        )
    revision = commit.strip()
    model, model_class, used = current, Run, ["today's declaration"]
    source = _git(repository, "show", f"{revision}:{DECLARATION_PATH}")
    if source is not None:
        machine = _import_declaration(source, f"{old}:{DECLARATION_PATH}", current.name)
        model, model_class = _extract_old(machine, old)
        used = [DECLARATION_PATH]
    policy, policy_used = _old_policy(repository, revision, old, policy_file)
    used.append(policy_used)
    return OldMachine(
        model, policy, f"revision {old} of {repository} ({', '.join(used)})", model_class
    )


def _old_policy(
    repository: Path, revision: str, old: str, policy_file: str | Path | None
) -> tuple[Policy, str]:
    """The policy at ``revision`` and where it came from: ``policy_file`` as that
    revision holds it, else ``spec/policy.toml``, else the default policy."""
    policy_path = _in_repository(repository, policy_file) if policy_file else POLICY_PATH
    policy_text = _git(repository, "show", f"{revision}:{policy_path}")
    if policy_text is not None:
        where = f"{old}:{policy_path}"
        try:
            if len(policy_text.encode()) > input_limits.POLICY_BYTES:
                raise input_limits.InputLimitError(
                    f"{where}: more than {input_limits.POLICY_BYTES // 2**20} MiB, the most "
                    "a policy file may hold"
                )
            policy = policy_from_dict(input_limits.loads_toml(policy_text, where))
        except input_limits.InputLimitError as error:
            raise OverlayError(str(error)) from None
        except (tomllib.TOMLDecodeError, PolicyError) as error:
            raise OverlayError(f"{where}: {error}") from None
        return policy, policy_path
    if policy_file:
        raise OverlayError(f"{old}: {policy_path} does not exist at that revision of {repository}")
    return DEFAULT_POLICY, "the default policy"


def _in_repository(repository: Path, path: str | Path) -> str:
    """``path`` relative to the repository's top level, as ``git show`` names it."""
    absolute = Path(path).resolve()
    try:
        return absolute.relative_to(repository.resolve()).as_posix()
    except ValueError:
        raise OverlayError(f"{path}: not inside the repository {repository}") from None


def _git(repository: Path, *arguments: str) -> str | None:
    try:
        completed = subprocess.run(
            ["git", "-C", str(repository), *arguments],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    except FileNotFoundError:
        raise OverlayError("git is not installed: --diff REVISION needs it") from None
    return completed.stdout if completed.returncode == 0 else None


def _import_declaration(source: str, where: str, name: str) -> type[StateMachine]:
    """Run an older declaration in a fresh module namespace (it imports today's
    ``replan.spec.model`` and ``controller.records``) and return its machine class."""
    module_name = f"_replan_old_declaration_{abs(hash(source)):x}"
    module = types.ModuleType(module_name)
    module.__file__ = where
    sys.modules[module_name] = module
    try:
        exec(compile(source, where, "exec"), module.__dict__)
    except Exception as error:  # an old file may fail in any way: report, don't crash
        raise OverlayError(f"{where}: cannot be loaded ({type(error).__name__}: {error})") from None
    finally:
        sys.modules.pop(module_name, None)
    machines = [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, StateMachine)
        and value.__module__ == module_name
    ]
    chosen = next((m for m in machines if m.__name__ == name), None)
    if chosen is None and len(machines) == 1:
        chosen = machines[0]
    if chosen is None:
        raise OverlayError(f"{where}: no machine class {name!r} in it")
    return chosen


class _AnyMember(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _unknown


def _unknown(*_args: Any, **_kwargs: Any) -> None:
    """A guard or action an older declaration names that today's run lacks."""


class Unchecked(metaclass=_AnyMember):
    """Stands in for the run when an older declaration names guards or actions that
    no longer exist: its structure is still drawn, and their meanings are unknown."""


def _extract_old(machine: type[StateMachine], where: str) -> tuple[MachineModel, type]:
    try:
        return extract(machine, Run), Run
    except DeclarationError as error:
        if "is not defined on" not in str(error):
            raise OverlayError(f"{where}:{DECLARATION_PATH}: {error}") from None
    try:
        return extract(machine, Unchecked), Run
    except DeclarationError as error:
        raise OverlayError(f"{where}:{DECLARATION_PATH}: {error}") from None


def repository_for(policy_file: str | Path | None = None) -> Path:
    """The git repository a revision given to ``--against``/``--diff`` names: the one
    holding ``policy_file`` when given, else the current directory's. Not this
    package's checkout: a user's ``--against origin/main`` means their own main."""
    start = Path(policy_file).resolve().parent if policy_file else Path.cwd()
    top = _git(start, "rev-parse", "--show-toplevel")
    if top is None:
        raise OverlayError(
            f"{start}: not inside a git repository, so a revision names nothing "
            "(give a policy file, or run from the repository)"
        )
    return Path(top.strip())


__all__ = [
    "Coverage",
    "OldMachine",
    "OverlayError",
    "TracePath",
    "load_coverage",
    "load_old",
    "load_trace",
    "repository_for",
]
