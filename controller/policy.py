"""The policy: the single source of truth for *data* (evidence keys, steps and their
prerequisites, resources, limits), as the declaration is for *structure*.

Owns loading and validating the TOML format of DESIGN.md and rendering it back in
normal form. The format's structure is declared once, in ``controller.policy_schema``
(which also derives its JSON Schema from it); this module adds the checks JSON Schema
cannot state (a required key is a declared one, step names are unique, ...). Every
error is a ``PolicyError`` whose message starts with the offending path
(``steps[2].requires[0]: 'acess' is not a declared evidence key ...``) so a user can
find it without a traceback. Stdlib only.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from replan.controller import input_limits
from replan.controller.policy_schema import DEFAULTS as DEFAULTS
from replan.controller.policy_schema import DOCUMENT, check_structure, defaults_of
from replan.controller.records import LARGEST_INT, PolicyError


@dataclass(frozen=True)
class Step:
    """One step a plan may name: the keys that must be ``Passed`` before it may run,
    whether accepting its execution ends the run with ``Completed``, and whether a
    person must approve the exact plan before it runs (``approve``). The controller
    never reads ``resource_argument``: it tells ``controller.middleware`` which argument
    of a guarded tool call names the plan's resource (None: the policy's one resource)."""

    name: str
    requires: tuple[str, ...] = ()
    completes_run: bool = False
    needs_approval: bool = False
    resource_argument: str | None = None


#: Between a per-resource key and its resource in the key an observation reports:
#: ``cancellable@r1`` is ``cancellable`` of resource ``r1``.
RESOURCE_SEPARATOR = "@"


def scoped_key(key: str, resource: str) -> str:
    """The evidence key of a per-resource key's fact about one resource."""
    return f"{key}{RESOURCE_SEPARATOR}{resource}"


@dataclass(frozen=True)
class Policy:
    """Everything about a run that is data rather than structure.

    ``keys`` is every evidence key a run can hold: the declared keys, then each
    per-resource key of ``per_resource`` scoped to each resource (``cancellable@r1``),
    filled in on construction. A step that requires a per-resource key requires it of
    the resource its plan names (``resource_requirements``). ``resources`` ends
    with the ``open_resources``, slots the host gives, in order, to the resources a
    run makes known (``controller.resource_slots``): the engines check every slot, and
    what runs is what they checked."""

    keys: tuple[str, ...]
    steps: tuple[Step, ...]
    resources: tuple[str, ...]
    max_steps: int = 4
    #: 0 here means "the default, 2 * max_steps" (filled in on construction).
    max_proposals: int = 0
    no_progress_limit: int = 3
    count_duplicate_deliveries: bool = True
    #: Budgets (``charge``): 0 means no limit, and that dimension is not counted.
    max_tokens: int = 0
    #: In integer micro-units of ``currency``.
    max_cost: int = 0
    max_wall_ms: int = 0
    currency: str = ""
    #: The fixed workflow baseline's prerequisites (``decide``), declared apart from
    #: the steps so that the equivalence check compares two independent statements.
    workflow_keys: tuple[str, ...] = ()
    #: Keys whose facts concern one resource each, required of a plan's own resource.
    per_resource: tuple[str, ...] = ()
    #: The resources that are slots (the last of ``resources``): the host gives each
    #: resource a run makes known the next free one (``controller.resource_slots``).
    open_resources: tuple[str, ...] = ()
    # Derived lookups for the controller's hot path (not part of equality).
    #: step -> the keys it requires that are not per-resource
    requirements: Mapping[str, tuple[str, ...]] = field(
        init=False, repr=False, compare=False, hash=False
    )
    #: step -> resource -> its per-resource keys scoped to that resource
    resource_requirements: Mapping[str, Mapping[str, tuple[str, ...]]] = field(
        init=False, repr=False, compare=False, hash=False
    )
    terminal_steps: frozenset[str] = field(init=False, repr=False, compare=False, hash=False)
    approval_steps: frozenset[str] = field(init=False, repr=False, compare=False, hash=False)
    key_set: frozenset[str] = field(init=False, repr=False, compare=False, hash=False)
    resource_set: frozenset[str] = field(init=False, repr=False, compare=False, hash=False)
    #: ``policy_digest(self)``, computed once: every trace record names it.
    digest: str = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.max_proposals == 0 and not isinstance(self.max_proposals, bool):
            object.__setattr__(self, "max_proposals", default_max_proposals(self.max_steps))
        declared = tuple(k for k in self.keys if RESOURCE_SEPARATOR not in k)
        scoped = tuple(scoped_key(k, r) for k in self.per_resource for r in self.resources)
        object.__setattr__(self, "keys", (*declared, *scoped))
        # Validate even when built in code, so a bad Policy(...) fails at once with a
        # path, never mid-run.
        _parse(policy_to_dict(self))
        per_resource = set(self.per_resource)
        requirements = MappingProxyType(
            {s.name: tuple(k for k in s.requires if k not in per_resource) for s in self.steps}
        )
        object.__setattr__(self, "requirements", requirements)  # read-only: runs share it
        resource_requirements = MappingProxyType(
            {
                s.name: MappingProxyType(
                    {
                        r: tuple(scoped_key(k, r) for k in s.requires if k in per_resource)
                        for r in self.resources
                    }
                )
                for s in self.steps
            }
        )
        object.__setattr__(self, "resource_requirements", resource_requirements)
        object.__setattr__(
            self, "terminal_steps", frozenset(s.name for s in self.steps if s.completes_run)
        )
        object.__setattr__(
            self, "approval_steps", frozenset(s.name for s in self.steps if s.needs_approval)
        )
        object.__setattr__(self, "key_set", frozenset(self.keys))
        object.__setattr__(self, "resource_set", frozenset(self.resources))
        object.__setattr__(self, "digest", policy_digest(self))

    def __reduce__(self) -> tuple[type[Policy], tuple[Any, ...]]:
        """Pickled by its fields alone (the derived lookups are rebuilt, and a
        read-only mapping cannot be pickled): worker processes receive policies."""
        return (type(self), tuple(getattr(self, f.name) for f in fields(self) if f.init))

    def step(self, name: str) -> Step:
        for candidate in self.steps:
            if candidate.name == name:
                return candidate
        raise KeyError(name)


# ---- loading: the structure the schema states, then what it cannot ----------------------


def _fail(path: str, problem: str) -> PolicyError:
    return PolicyError(f"{path}: {problem}")


def _listing(names: Sequence[str], shown: int = 10) -> str:
    """Names for an error message: all of a short list, the first ``shown`` of a long
    one (a policy may declare thousands of keys)."""
    if not names:
        return "none"
    head = ", ".join(names[:shown])
    return head if len(names) <= shown else f"{head}, ... ({len(names)} in all)"


def default_max_proposals(
    max_steps: object, per_step: int = int(DEFAULTS["proposals_per_step"])
) -> object:
    """``max_proposals`` when the policy leaves it out: ``per_step * max_steps``, at
    most ``LARGEST_INT`` (every limit is within it). A ``max_steps`` that is no integer
    is returned as it is, for the structural check to name."""
    if isinstance(max_steps, bool) or not isinstance(max_steps, int):
        return max_steps
    return min(per_step * max_steps, LARGEST_INT)


_STEP_DEFAULTS = defaults_of(DOCUMENT.table("steps"))
#: The budget limits ``charge`` counts against (0: no limit).
BUDGETS = ("max_tokens", "max_cost", "max_wall_ms")


def _parse(
    document: Mapping[str, Any], defaults: Mapping[str, int | bool] = DEFAULTS
) -> dict[str, Any]:
    """Check a policy document (the parsed TOML) and return ``Policy``'s fields: first
    its structure (``check_structure``: what ``policy_schema()`` states), then what JSON
    Schema cannot state (``LOADER_CHECKS``), each problem naming its path."""
    document = check_structure(document)
    limits = _limits(document.get("limits", {}), defaults)
    keys = tuple(document["evidence"]["keys"])
    per_resource = tuple(document["evidence"].get("per_resource", ()))
    open_resources = tuple(document["resources"].get("open", ()))
    _check_open(document["resources"]["allowed"], open_resources)
    resources = (*document["resources"]["allowed"], *open_resources)
    _check_scoped_names(keys, per_resource)
    key_set = frozenset(keys) | frozenset(per_resource)
    declared = _listing([*keys, *per_resource])
    steps = _steps(document["steps"], key_set, declared)
    workflow_keys = _workflow_keys(document.get("workflow", {}), steps, per_resource)
    _check_workflow(steps, workflow_keys, per_resource, key_set, declared)
    return dict(
        keys=keys,
        steps=steps,
        resources=resources,
        **limits,
        workflow_keys=workflow_keys,
        per_resource=per_resource,
        open_resources=open_resources,
    )


def _limits(limits: Mapping[str, Any], defaults: Mapping[str, int | bool]) -> dict[str, Any]:
    """``Policy``'s limit fields: each as given, else its default (``max_proposals``
    derived from ``max_steps``); a cost budget needs the currency it is counted in."""
    max_steps = limits.get("max_steps", defaults["max_steps"])
    max_proposals = limits.get(
        "max_proposals", default_max_proposals(max_steps, int(defaults["proposals_per_step"]))
    )
    budgets = {name: limits.get(name, 0) for name in BUDGETS}
    currency = limits.get("currency", "")
    if budgets["max_cost"] and not currency:
        raise _fail(
            "limits.currency",
            "missing field: max_cost is counted in micro-units of a currency you name "
            '(currency = "USD", say)',
        )
    return dict(
        max_steps=max_steps,
        max_proposals=max_proposals,
        no_progress_limit=limits.get("no_progress_limit", defaults["no_progress_limit"]),
        count_duplicate_deliveries=limits.get(
            "count_duplicate_deliveries", defaults["count_duplicate_deliveries"]
        ),
        **budgets,
        currency=currency,
    )


def _steps(
    raw_steps: Sequence[Mapping[str, Any]], key_set: frozenset[str], declared: str
) -> tuple[Step, ...]:
    """The steps, defaults filled in: names unique, every required key declared."""
    steps: list[Step] = []
    step_names: set[str] = set()
    for index, raw in enumerate(raw_steps):
        entry = {**_STEP_DEFAULTS, **raw}
        name = entry["name"]
        if name in step_names:
            raise _fail(f"steps[{index}].name", f"duplicate step name {name!r}")
        step_names.add(name)
        requires = tuple(entry["requires"])
        for key_index, key in enumerate(requires):
            if key not in key_set:
                raise _fail(
                    f"steps[{index}].requires[{key_index}]",
                    f"{key!r} is not a declared evidence key (declared: {declared})",
                )
        steps.append(
            Step(
                name,
                requires,
                entry["completes_run"],
                entry["needs_approval"],
                entry.get("resource_argument"),
            )
        )
    return tuple(steps)


def _workflow_keys(
    workflow: Mapping[str, Any], steps: Sequence[Step], per_resource: Sequence[str]
) -> tuple[str, ...]:
    """The fixed workflow's prerequisites: as listed, else the keys the one step that
    completes the run requires."""
    if "ready_when_passed" in workflow:
        return tuple(workflow["ready_when_passed"])
    completing = [step for step in steps if step.completes_run]
    if len(completing) != 1:
        names = ", ".join(step.name for step in completing)
        raise _fail(
            "workflow.ready_when_passed",
            f"missing field: {len(completing)} steps complete the run ({names}), so "
            "the fixed workflow's prerequisites cannot be taken from one of them; "
            "list the keys it requires",
        )
    return completing[0].requires


def _check_workflow(
    steps: Sequence[Step],
    workflow_keys: Sequence[str],
    per_resource: Sequence[str],
    key_set: frozenset[str],
    declared: str,
) -> None:
    """The fixed workflow decides over the run's own keys: neither its prerequisites
    nor what a completing step requires may be per-resource, and each is declared."""
    for index, step in enumerate(steps):
        scoped = [key for key in step.requires if key in per_resource]
        if step.completes_run and scoped:
            raise _fail(
                f"steps[{index}].requires",
                f"{scoped[0]!r} is a per-resource key, and {step.name!r} completes the run: "
                "the fixed workflow decides over the run's own keys (require it of an "
                "earlier step)",
            )
    for key_index, key in enumerate(workflow_keys):
        if key in per_resource:
            raise _fail(
                f"workflow.ready_when_passed[{key_index}]",
                f"{key!r} is a per-resource key: the fixed workflow decides over the run's "
                "own keys",
            )
        if key not in key_set:
            raise _fail(
                f"workflow.ready_when_passed[{key_index}]",
                f"{key!r} is not a declared evidence key (declared: {declared})",
            )


def _check_open(allowed: Sequence[str], open_resources: Sequence[str]) -> None:
    """A slot is not also a fixed resource."""
    for index, name in enumerate(open_resources):
        if name in allowed:
            raise _fail(
                f"resources.open[{index}]",
                f"{name!r} is also in resources.allowed: a resource is a slot or not",
            )


def _check_scoped_names(keys: Sequence[str], per_resource: Sequence[str]) -> None:
    """A key holds no ``@`` (it separates a per-resource key from its resource), and
    no name is both a key and a per-resource key."""
    for table, names in (("keys", keys), ("per_resource", per_resource)):
        for index, name in enumerate(names):
            if RESOURCE_SEPARATOR in name:
                raise _fail(
                    f"evidence.{table}[{index}]",
                    f"{name!r}: a key may not contain {RESOURCE_SEPARATOR!r} (it separates a "
                    "per-resource key from its resource)",
                )
    for index, name in enumerate(per_resource):
        if name in keys:
            raise _fail(
                f"evidence.per_resource[{index}]",
                f"{name!r} is also in evidence.keys: a key is per-resource or not",
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
    (``needs_approval`` only where it is true and ``resource_argument`` only where it
    is given, so a policy without them reads, and digests, as it did before they
    existed)."""
    return {
        "limits": {
            "max_steps": policy.max_steps,
            "max_proposals": policy.max_proposals,
            "no_progress_limit": policy.no_progress_limit,
            "count_duplicate_deliveries": policy.count_duplicate_deliveries,
            # a budget only when it is set: a policy without one reads, and digests,
            # as it did before budgets existed
            **{name: getattr(policy, name) for name in BUDGETS if getattr(policy, name)},
            **({"currency": policy.currency} if policy.currency else {}),
        },
        "evidence": {
            "keys": [k for k in policy.keys if RESOURCE_SEPARATOR not in k],
            # only when given: a policy without them reads, and digests, as before
            **({"per_resource": list(policy.per_resource)} if policy.per_resource else {}),
        },
        "resources": {
            "allowed": [r for r in policy.resources if r not in policy.open_resources],
            **({"open": list(policy.open_resources)} if policy.open_resources else {}),
        },
        "steps": [
            {
                "name": s.name,
                "requires": list(s.requires),
                "completes_run": s.completes_run,
                **({"needs_approval": True} if s.needs_approval else {}),
                **(
                    {"resource_argument": s.resource_argument}
                    if s.resource_argument is not None
                    else {}
                ),
            }
            for s in policy.steps
        ],
        "workflow": {"ready_when_passed": list(policy.workflow_keys)},
    }


def policy_digest(policy: Policy) -> str:
    """``sha256:`` over the canonical JSON of the policy's normal form
    (``policy_to_dict``): equal for policies that mean the same, however written.
    A run log names it, so a run is never continued under other rules."""
    canonical = json.dumps(policy_to_dict(policy), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


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
    that starts with the file name and the path inside it. The file is held to
    ``controller.input_limits``: at most ``POLICY_BYTES``, nested at most
    ``MAX_DEPTH`` deep, no dotted key of more than ``MAX_KEY_PARTS`` parts."""
    source = Path(path)
    try:
        text = input_limits.read_text(source, input_limits.POLICY_BYTES, "a policy file")
    except FileNotFoundError:
        raise PolicyError(f"{source}: no such policy file") from None
    except input_limits.InputLimitError as error:
        raise PolicyError(str(error)) from None
    except (OSError, UnicodeDecodeError) as error:  # a directory, a loop, a long name
        reason = getattr(error, "strerror", None) or error.__class__.__name__
        raise PolicyError(f"{source}: cannot read policy file ({reason})") from None
    except ValueError as error:  # a NUL byte in the path
        raise PolicyError(f"{source!r}: not a usable path ({error})") from None
    try:
        document = input_limits.loads_toml(text, str(source))
    except input_limits.InputLimitError as error:
        raise PolicyError(str(error)) from None
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
