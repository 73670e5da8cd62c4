"""The policy: the single source of truth for *data* (evidence keys, steps and their
prerequisites, resources, limits), as the declaration is for *structure*.

Owns loading and validating the TOML format of DESIGN.md and rendering it back in
normal form. Every error is a ``PolicyError`` whose message starts with the offending
path (``steps[2].requires[0]: 'acess' is not a declared evidence key ...``) so a user
can find it without a traceback. Stdlib only.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from controller.records import PolicyError


@dataclass(frozen=True)
class Step:
    """One step a plan may name: the keys that must be ``Passed`` before it may run,
    whether accepting its execution ends the run with ``Completed``, and whether a
    person must approve the exact plan before it runs (``approve``)."""

    name: str
    requires: tuple[str, ...] = ()
    completes_run: bool = False
    needs_approval: bool = False


@dataclass(frozen=True)
class Policy:
    """Everything about a run that is data rather than structure."""

    keys: tuple[str, ...]
    steps: tuple[Step, ...]
    resources: tuple[str, ...]
    max_steps: int = 4
    #: 0 here means "the default, 2 * max_steps" (filled in on construction).
    max_proposals: int = 0
    no_progress_limit: int = 3
    count_duplicate_deliveries: bool = True
    #: The fixed workflow baseline's prerequisites (``decide``), declared apart from
    #: the steps so that the equivalence check compares two independent statements.
    workflow_keys: tuple[str, ...] = ()
    # Derived lookups for the controller's hot path (not part of equality).
    requirements: Mapping[str, tuple[str, ...]] = field(
        init=False, repr=False, compare=False, hash=False
    )
    terminal_steps: frozenset[str] = field(init=False, repr=False, compare=False, hash=False)
    approval_steps: frozenset[str] = field(init=False, repr=False, compare=False, hash=False)
    key_set: frozenset[str] = field(init=False, repr=False, compare=False, hash=False)
    resource_set: frozenset[str] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.max_proposals == 0 and not isinstance(self.max_proposals, bool):
            per_step = DEFAULTS["proposals_per_step"]
            object.__setattr__(self, "max_proposals", int(per_step) * self.max_steps)
        # Validate even when built in code, so a bad Policy(...) fails at once with a
        # path, never mid-run.
        _parse(policy_to_dict(self))
        requirements = MappingProxyType({s.name: s.requires for s in self.steps})
        object.__setattr__(self, "requirements", requirements)  # read-only: runs share it
        object.__setattr__(
            self, "terminal_steps", frozenset(s.name for s in self.steps if s.completes_run)
        )
        object.__setattr__(
            self, "approval_steps", frozenset(s.name for s in self.steps if s.needs_approval)
        )
        object.__setattr__(self, "key_set", frozenset(self.keys))
        object.__setattr__(self, "resource_set", frozenset(self.resources))

    def __reduce__(self) -> tuple[type[Policy], tuple[Any, ...]]:
        """Pickled by its fields alone (the derived lookups are rebuilt, and a
        read-only mapping cannot be pickled): worker processes receive policies."""
        return (type(self), tuple(getattr(self, f.name) for f in fields(self) if f.init))

    def step(self, name: str) -> Step:
        for candidate in self.steps:
            if candidate.name == name:
                return candidate
        raise KeyError(name)


# ---- the TOML schema ------------------------------------------------------------

#: The value a ``[limits]`` field takes when the file leaves it out (CONTRACT.md
#: "Vocabulary"); ``max_proposals`` defaults to ``proposals_per_step * max_steps``.
#: ``spec/properties.py`` states the contract's defaults independently
#: (``policy-defaults``), so a changed default here fails verification.
DEFAULTS: Mapping[str, int | bool] = MappingProxyType(
    {
        "max_steps": 4,
        "proposals_per_step": 2,
        "no_progress_limit": 3,
        "count_duplicate_deliveries": True,
    }
)

_TABLES: dict[str, frozenset[str]] = {
    "limits": frozenset(
        {"max_steps", "max_proposals", "no_progress_limit", "count_duplicate_deliveries"}
    ),
    "evidence": frozenset({"keys"}),
    "resources": frozenset({"allowed"}),
    "steps": frozenset({"name", "requires", "completes_run", "needs_approval"}),
    "workflow": frozenset({"ready_when_passed"}),
}
_REQUIRED_TABLES = ("evidence", "resources", "steps")


def _fail(path: str, problem: str) -> PolicyError:
    return PolicyError(f"{path}: {problem}")


def _expect_table(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(path, f"expected a table, got {type(value).__name__}")
    return value


def _check_fields(table: Mapping[str, Any], path: str, allowed: frozenset[str]) -> None:
    for name in table:
        if name not in allowed:
            raise _fail(
                f"{path}.{name}" if path else name,
                f"unknown field (allowed: {', '.join(sorted(allowed))})",
            )


def _names(value: object, path: str, *, what: str, allow_empty: bool) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _fail(path, f"expected a list of {what}, got {type(value).__name__}")
    seen: dict[str, None] = {}  # ordered, and a membership test in constant time
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item:
            raise _fail(f"{path}[{index}]", f"expected a non-empty string, got {item!r}")
        if item in seen:
            raise _fail(f"{path}[{index}]", f"{item!r} is listed twice")
        seen[item] = None
    if not seen and not allow_empty:
        raise _fail(path, f"at least one {what[:-1]} is required")
    return tuple(seen)


def _listing(names: Sequence[str], shown: int = 10) -> str:
    """Names for an error message: all of a short list, the first ``shown`` of a long
    one (a policy may declare thousands of keys)."""
    if not names:
        return "none"
    head = ", ".join(names[:shown])
    return head if len(names) <= shown else f"{head}, ... ({len(names)} in all)"


def _positive(value: object, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(path, f"expected a positive integer, got {value!r}")
    if value < 1:
        raise _fail(path, f"must be at least 1, got {value}")
    return value


def _parse(
    document: Mapping[str, Any], defaults: Mapping[str, int | bool] = DEFAULTS
) -> dict[str, Any]:
    """Check a policy document (the parsed TOML) and return ``Policy``'s fields."""
    document = _expect_table(document, "policy")
    for name in document:
        if name not in _TABLES:
            raise _fail(name, f"unknown table (allowed: {', '.join(sorted(_TABLES))})")
    for name in _REQUIRED_TABLES:
        if name not in document:
            raise _fail(name, "missing table")

    limits = _expect_table(document.get("limits", {}), "limits")
    _check_fields(limits, "limits", _TABLES["limits"])
    max_steps = _positive(limits.get("max_steps", defaults["max_steps"]), "limits.max_steps")
    max_proposals = _positive(
        limits.get("max_proposals", defaults["proposals_per_step"] * max_steps),
        "limits.max_proposals",
    )
    no_progress_limit = _positive(
        limits.get("no_progress_limit", defaults["no_progress_limit"]), "limits.no_progress_limit"
    )
    count_duplicates = limits.get(
        "count_duplicate_deliveries", defaults["count_duplicate_deliveries"]
    )
    if not isinstance(count_duplicates, bool):
        raise _fail(
            "limits.count_duplicate_deliveries", f"expected true or false, got {count_duplicates!r}"
        )

    evidence = _expect_table(document["evidence"], "evidence")
    _check_fields(evidence, "evidence", _TABLES["evidence"])
    if "keys" not in evidence:
        raise _fail("evidence.keys", "missing field")
    keys = _names(evidence["keys"], "evidence.keys", what="keys", allow_empty=True)

    resources_table = _expect_table(document["resources"], "resources")
    _check_fields(resources_table, "resources", _TABLES["resources"])
    if "allowed" not in resources_table:
        raise _fail("resources.allowed", "missing field")
    resources = _names(
        resources_table["allowed"], "resources.allowed", what="resources", allow_empty=False
    )

    raw_steps = document["steps"]
    if not isinstance(raw_steps, list) or not raw_steps:
        raise _fail("steps", "expected at least one [[steps]] entry")
    steps: list[Step] = []
    step_names: set[str] = set()
    key_set = frozenset(keys)
    declared = _listing(keys)
    for index, raw in enumerate(raw_steps):
        path = f"steps[{index}]"
        table = _expect_table(raw, path)
        _check_fields(table, path, _TABLES["steps"])
        raw_name = table.get("name")
        if not isinstance(raw_name, str) or not raw_name:
            raise _fail(f"{path}.name", f"expected a non-empty string, got {raw_name!r}")
        name = raw_name
        if name in step_names:
            raise _fail(f"{path}.name", f"duplicate step name {name!r}")
        step_names.add(name)
        requires = _names(
            table.get("requires", []), f"{path}.requires", what="keys", allow_empty=True
        )
        for key_index, key in enumerate(requires):
            if key not in key_set:
                raise _fail(
                    f"{path}.requires[{key_index}]",
                    f"{key!r} is not a declared evidence key (declared: {declared})",
                )
        flags: dict[str, Any] = {}
        for flag in ("completes_run", "needs_approval"):
            flags[flag] = table.get(flag, False)
            if not isinstance(flags[flag], bool):
                raise _fail(f"{path}.{flag}", f"expected true or false, got {flags[flag]!r}")
        steps.append(Step(name, requires, **flags))
    if not any(step.completes_run for step in steps):
        raise _fail("steps", "no step has completes_run = true, so no run could ever complete")

    workflow = _expect_table(document.get("workflow", {}), "workflow")
    _check_fields(workflow, "workflow", _TABLES["workflow"])
    if "ready_when_passed" in workflow:
        ready_when_passed = workflow["ready_when_passed"]
    else:
        completing = [step for step in steps if step.completes_run]
        if len(completing) != 1:
            names = ", ".join(step.name for step in completing)
            raise _fail(
                "workflow.ready_when_passed",
                f"missing field: {len(completing)} steps complete the run ({names}), so "
                "the fixed workflow's prerequisites cannot be taken from one of them; "
                "list the keys it requires",
            )
        ready_when_passed = list(completing[0].requires)
    workflow_keys = _names(
        ready_when_passed, "workflow.ready_when_passed", what="keys", allow_empty=True
    )
    for key_index, key in enumerate(workflow_keys):
        if key not in key_set:
            raise _fail(
                f"workflow.ready_when_passed[{key_index}]",
                f"{key!r} is not a declared evidence key (declared: {declared})",
            )
    return dict(
        keys=keys,
        steps=tuple(steps),
        resources=resources,
        max_steps=max_steps,
        max_proposals=max_proposals,
        no_progress_limit=no_progress_limit,
        count_duplicate_deliveries=count_duplicates,
        workflow_keys=workflow_keys,
    )


def workflow_disagreements(policy: Policy) -> list[str]:
    """One line per completing step whose prerequisites are not the fixed workflow's
    (``[workflow] ready_when_passed``): the controller would commit where the workflow
    says otherwise, and the commit equivalence fails. Empty when they agree."""
    workflow = sorted(policy.workflow_keys)
    return [
        f"steps[{index}] {step.name!r} requires {sorted(step.requires)} but "
        f"[workflow] ready_when_passed is {workflow}: make them the same list "
        "(or leave ready_when_passed out to take the step's)"
        for index, step in enumerate(policy.steps)
        if step.completes_run and sorted(step.requires) != workflow
    ]


def policy_from_dict(
    document: Mapping[str, Any], defaults: Mapping[str, int | bool] = DEFAULTS
) -> Policy:
    """Build a policy from a parsed document (TOML tables or the ``--json`` form);
    ``defaults`` fill in the limits it leaves out."""
    return Policy(**_parse(document, defaults))


def policy_to_dict(policy: Policy) -> dict[str, Any]:
    """The normal form: every default filled in, in the TOML file's table order
    (``needs_approval`` only where it is true, so a policy without approval steps
    reads, and digests, as it did before approval existed)."""
    return {
        "limits": {
            "max_steps": policy.max_steps,
            "max_proposals": policy.max_proposals,
            "no_progress_limit": policy.no_progress_limit,
            "count_duplicate_deliveries": policy.count_duplicate_deliveries,
        },
        "evidence": {"keys": list(policy.keys)},
        "resources": {"allowed": list(policy.resources)},
        "steps": [
            {
                "name": s.name,
                "requires": list(s.requires),
                "completes_run": s.completes_run,
                **({"needs_approval": True} if s.needs_approval else {}),
            }
            for s in policy.steps
        ],
        "workflow": {"ready_when_passed": list(policy.workflow_keys)},
    }


def policy_to_toml(policy: Policy) -> str:
    """Render the normal form as TOML (the fixed shape of DESIGN.md)."""

    def value(item: object) -> str:
        if isinstance(item, bool):
            return "true" if item else "false"
        if isinstance(item, int):
            return str(item)
        if isinstance(item, str):
            # A JSON string is a TOML basic string once non-ASCII text is kept as it is
            # (JSON would write an emoji as a surrogate pair, which TOML refuses) and
            # DEL, which JSON leaves raw and TOML does not, is escaped.
            return json.dumps(item, ensure_ascii=False).replace("\x7f", "\\u007f")
        if isinstance(item, Sequence):
            return "[" + ", ".join(value(x) for x in item) + "]"
        raise TypeError(item)

    document = policy_to_dict(policy)
    lines: list[str] = []
    for table in ("limits", "evidence", "resources"):
        lines.append(f"[{table}]")
        lines += [f"{name} = {value(item)}" for name, item in document[table].items()]
        lines.append("")
    for step in document["steps"]:
        lines.append("[[steps]]")
        lines += [f"{name} = {value(item)}" for name, item in step.items()]
        lines.append("")
    lines.append("[workflow]")
    lines += [f"{name} = {value(item)}" for name, item in document["workflow"].items()]
    return "\n".join(lines) + "\n"


def load_policy(path: str | Path) -> Policy:
    """Read and validate a TOML policy file; every problem is a one-line PolicyError
    that starts with the file name and the path inside it."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PolicyError(f"{source}: no such policy file") from None
    except (OSError, UnicodeDecodeError) as error:  # a directory, a loop, a long name
        reason = getattr(error, "strerror", None) or error.__class__.__name__
        raise PolicyError(f"{source}: cannot read policy file ({reason})") from None
    except ValueError as error:  # a NUL byte in the path
        raise PolicyError(f"{source!r}: not a usable path ({error})") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise PolicyError(f"{source}: invalid TOML: {error}") from None
    except ValueError as error:  # an integer literal past Python's digit limit
        raise PolicyError(f"{source}: invalid TOML: {error}") from None
    try:
        return policy_from_dict(document)
    except PolicyError as error:
        raise PolicyError(f"{source}: {error}") from None


DEFAULT_POLICY = Policy(
    keys=("parser", "access"),
    steps=(
        Step("inspect-parser"),
        Step("inspect-access"),
        Step("commit-import", requires=("parser", "access"), completes_run=True),
    ),
    resources=("input-A",),
    max_steps=4,
    max_proposals=8,
    no_progress_limit=3,
    count_duplicate_deliveries=True,
    workflow_keys=("parser", "access"),
)
