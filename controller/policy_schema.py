"""The policy file's structure, declared once (``DOCUMENT``): its tables, their fields,
and each field's kind. Two readers of that one declaration, so they cannot disagree:

- ``check_structure``, the loader's structural checks: the first problem found is a
  ``PolicyError`` whose message starts with its path (``limits.max_steps: ...``);
- ``policy_schema``, the JSON Schema (draft 2020-12) that ``replan policy --schema``
  prints for editors, with each field's description and default.

What JSON Schema cannot state (a required key is a declared one, step names are unique,
...) the loader checks afterwards (``controller.policy``); ``LOADER_CHECKS`` lists it,
and the schema repeats that list, so it says what it leaves out. Stdlib only.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from replan.controller.records import LARGEST_INT, PolicyError

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

#: What a field holds: an integer in 1..``LARGEST_INT`` (never a boolean),
#: ``true``/``false``, a name, or a list of unique names. A limit is bounded like every
#: number a run holds: the run compares its counts with it, and its snapshot and the
#: reports write it as JSON, exactly.
Kind = Literal["positive", "boolean", "name", "names"]

#: A name (an evidence key, a step, a resource, a currency, a tool argument) is one
#: line of visible text of at most ``NAME_LENGTH`` characters: none of these ranges of
#: code points (control characters; the soft hyphen, zero-width and other invisible
#: format characters; line and paragraph separators; bidirectional controls; the
#: noncharacters U+FFFE and U+FFFF, which XML cannot hold). Why:
#: names go into every report (Markdown, Mermaid, DOT, HTML, SARIF, JUnit, the
#: terminal), where a line break starts a statement of the format and an invisible or
#: reordering character shows a reviewer other text than the one that runs. Markup
#: characters (``<``, ``|``, ``#``, a backtick) are allowed: each report escapes them.
NOT_IN_NAMES: tuple[tuple[int, int], ...] = (
    (0x0000, 0x001F),
    (0x007F, 0x009F),
    (0x00AD, 0x00AD),
    (0x061C, 0x061C),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0xFFFE, 0xFFFF),
)
NAME_LENGTH = 200


def _character_class(ranges: tuple[tuple[int, int], ...]) -> str:
    """The ranges as a regular expression's character class, written with ``\\u``
    escapes that Python's ``re`` and ECMAScript (JSON Schema's ``pattern``) both read."""
    parts = [
        f"\\u{low:04x}" if low == high else f"\\u{low:04x}-\\u{high:04x}" for low, high in ranges
    ]
    return "[" + "".join(parts) + "]"


#: A character no name may hold, as JSON Schema states it (``not`` of a ``pattern``,
#: which both dialects search for anywhere in the string).
NAME_FORBIDDEN_PATTERN = _character_class(NOT_IN_NAMES)
#: The same, and a lone surrogate (which JSON Schema's UTF-16 ``pattern`` cannot tell
#: from half of a pair, so the loader checks it): what the loader searches for.
_UNSHOWABLE = re.compile(_character_class((*NOT_IN_NAMES, (0xD800, 0xDFFF))))


def unshowable(text: str) -> re.Match[str] | None:
    """The first character of ``text`` no name may hold (None: a showable name). The
    reports escape such a character wherever it comes from."""
    return _UNSHOWABLE.search(text)


@dataclass(frozen=True)
class Field:
    """One field of a table."""

    name: str
    kind: Kind
    description: str
    required: bool = False
    #: What the file means when it leaves the field out (``None``: no fixed default).
    default: int | bool | tuple[str, ...] | None = None
    #: ``names`` only: what the items are called in messages, and whether the list
    #: needs at least one.
    items: str = "keys"
    non_empty: bool = False
    #: The problem a required field's absence reports.
    missing: str = "missing field"


@dataclass(frozen=True)
class AtLeastOne:
    """At least one entry of an array of tables has the boolean ``field`` true (JSON
    Schema's ``contains``); otherwise ``problem``, at the array's path."""

    field: str
    problem: str


@dataclass(frozen=True)
class Table:
    """A top-level table, or (``array``) an array of tables with at least one entry."""

    name: str
    description: str
    fields: tuple[Field, ...]
    required: bool = False
    array: bool = False
    at_least_one: AtLeastOne | None = None

    def field(self, name: str) -> Field:
        return next(f for f in self.fields if f.name == name)


@dataclass(frozen=True)
class Document:
    """The whole file: its tables, in the order the loader checks and renders them."""

    tables: tuple[Table, ...]

    def table(self, name: str) -> Table:
        return next(t for t in self.tables if t.name == name)


DOCUMENT = Document(
    (
        Table(
            "limits",
            "The run's bounds. Every field has a default.",
            (
                Field(
                    "max_steps",
                    "positive",
                    "Steps a run may execute; once they are used, execute stops the run "
                    "with StepLimit.",
                    default=DEFAULTS["max_steps"],
                ),
                Field(
                    "max_proposals",
                    "positive",
                    "Proposals a run considers, valid or not; once they are used, propose "
                    f"stops the run with PlanLimit. Default: {DEFAULTS['proposals_per_step']} "
                    f"* max_steps (at most {LARGEST_INT}, as every limit).",
                ),
                Field(
                    "no_progress_limit",
                    "positive",
                    "Observations in a row that bring no progress before the run stops "
                    "with NoNewEvidence.",
                    default=DEFAULTS["no_progress_limit"],
                ),
                Field(
                    "count_duplicate_deliveries",
                    "boolean",
                    "Whether a duplicate delivery of an observation counts as no progress.",
                    default=DEFAULTS["count_duplicate_deliveries"],
                ),
                Field(
                    "max_tokens",
                    "positive",
                    "Tokens the run may use (charged by the host with charge(usage)); "
                    "reaching it stops the run with BudgetExhausted. Absent: no limit, "
                    "and tokens are not counted.",
                ),
                Field(
                    "max_cost",
                    "positive",
                    "Cost the run may incur, in integer micro-units of `currency`; "
                    "reaching it stops the run with BudgetExhausted. Absent: no limit.",
                ),
                Field(
                    "max_wall_ms",
                    "positive",
                    "Wall-clock milliseconds the run may take (the host reports them; "
                    "the controller reads no clock); reaching it stops the run with "
                    "BudgetExhausted. Absent: no limit.",
                ),
                Field(
                    "currency",
                    "name",
                    "The currency max_cost is counted in (micro-units of it: 1000000 is "
                    'one unit), e.g. "USD". Required with max_cost.',
                ),
            ),
        ),
        Table(
            "evidence",
            "The evidence keys observations report on.",
            (
                Field(
                    "keys",
                    "names",
                    "Every evidence key a step may require (may be empty).",
                    required=True,
                ),
                Field(
                    "per_resource",
                    "names",
                    "Evidence keys whose facts concern one resource each (`cancellable` "
                    "of a reservation): observed as `key@resource`, and required of the "
                    "resource a plan names. Each must not also be in `keys`.",
                    default=(),
                ),
            ),
            required=True,
        ),
        Table(
            "resources",
            "The resources a plan may name.",
            (
                Field(
                    "allowed",
                    "names",
                    "The resources a plan may name by their own name: at least one (the "
                    "resource of a call that names none, with `open`).",
                    required=True,
                    items="resources",
                    non_empty=True,
                ),
                Field(
                    "open",
                    "names",
                    "Slots for resources only a run makes known (the reservation ids a "
                    "user gives, say): the host gives each new resource a call or a tool "
                    "result names the next free slot, in order, and the engines check "
                    "every slot. None of them may also be in `allowed`.",
                    default=(),
                    items="resources",
                ),
            ),
            required=True,
        ),
        Table(
            "steps",
            "One [[steps]] entry per step a plan may name: at least one, and at least "
            "one with completes_run = true.",
            (
                Field(
                    "name",
                    "name",
                    "The step's name, unique among the steps.",
                    required=True,
                    missing="expected a non-empty string, got None",
                ),
                Field(
                    "requires",
                    "names",
                    "Evidence keys that must be Passed before the step may run; each a "
                    "key of [evidence] keys.",
                    default=(),
                ),
                Field(
                    "completes_run",
                    "boolean",
                    "Whether accepting the step's execution ends the run with Completed.",
                    default=False,
                ),
                Field(
                    "needs_approval",
                    "boolean",
                    "Whether a person must approve the exact plan before it runs.",
                    default=False,
                ),
                Field(
                    "resource_argument",
                    "name",
                    "The tool argument that names the resource, when a guarded tool call "
                    "(controller.middleware.ReplanMiddleware) becomes a plan for this step. "
                    "Default: the policy's single allowed resource (required for a guarded "
                    "step when several are allowed).",
                ),
            ),
            required=True,
            array=True,
            at_least_one=AtLeastOne(
                "completes_run", "no step has completes_run = true, so no run could ever complete"
            ),
        ),
        Table(
            "workflow",
            "The fixed workflow baseline the commit equivalence compares against.",
            (
                Field(
                    "ready_when_passed",
                    "names",
                    "The keys the fixed workflow requires before it commits; each a key "
                    "of [evidence] keys. Default: the requires of the one step with "
                    "completes_run = true (required when several have it).",
                ),
            ),
        ),
    )
)

#: What the loader checks beyond the schema, by path: JSON Schema cannot compare one
#: value with another, nor tell the TOML float ``3.0`` from the integer ``3``.
LOADER_CHECKS: tuple[tuple[str, str], ...] = (
    ("steps[*].name", "unique among the steps"),
    (
        "evidence.keys[*]",
        "no `@` (it separates a per-resource key from its resource); like every name, "
        "no lone surrogate code point (JSON Schema's pattern reads UTF-16, where one "
        "cannot be told from half of a pair)",
    ),
    ("steps[*].requires[*]", "a key declared in evidence.keys or evidence.per_resource"),
    ("steps[*].requires", "no per-resource key on a step with completes_run = true"),
    ("evidence.per_resource[*]", "no `@`; not also in evidence.keys"),
    ("resources.open[*]", "not also in resources.allowed"),
    (
        "workflow.ready_when_passed",
        "required when more than one step has completes_run = true",
    ),
    ("workflow.ready_when_passed[*]", "a key declared in evidence.keys (not per-resource)"),
    ("limits.currency", "required when limits.max_cost is given"),
    *(
        (
            f"{table.name}.{field.name}",
            "an integer, not a float such as 3.0 (which JSON Schema counts as an integer)",
        )
        for table in DOCUMENT.tables
        for field in table.fields
        if field.kind == "positive"
    ),
)

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "urn:replan:policy-schema"


# ---- the kinds: each one's check and its JSON Schema, side by side ----------------------


def _fail(path: str, problem: str) -> PolicyError:
    return PolicyError(f"{path}: {problem}")


def _shown(value: object) -> str:
    """A value for a message, bounded: a long string is cut, and an integer too long to
    read (Python refuses to print one past 4,300 digits) is named by its size."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def _positive(value: object, path: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(path, f"expected a positive integer, got {_shown(value)}")
    if value < 1:
        raise _fail(path, f"must be at least 1, got {_shown(value)}")
    if value > LARGEST_INT:
        raise _fail(path, f"must be at most {LARGEST_INT} (2**53 - 1), got {_shown(value)}")


def _boolean(value: object, path: str) -> None:
    if not isinstance(value, bool):
        raise _fail(path, f"expected true or false, got {_shown(value)}")


_CONTROL_NAMES = {"\n": "a line break", "\r": "a carriage return", "\t": "a tab"}


def _character_name(character: str) -> str:
    if character in _CONTROL_NAMES:
        return _CONTROL_NAMES[character]
    if 0xD800 <= ord(character) <= 0xDFFF:
        return "a lone surrogate"
    return unicodedata.name(character, "a control character")


def _name(value: object, path: str) -> None:
    if not isinstance(value, str) or not value:
        raise _fail(path, f"expected a non-empty string, got {_shown(value)}")
    if len(value) > NAME_LENGTH:
        raise _fail(path, f"a name is at most {NAME_LENGTH} characters, got {len(value)}")
    found = unshowable(value)
    if found is not None:
        character = found.group()
        raise _fail(
            path,
            f"a name is one line of visible text: U+{ord(character):04X} "
            f"({_character_name(character)}) at "
            f"position {found.start()} of {_shown(value)} is not allowed",
        )


def _names(value: object, path: str, *, what: str, allow_empty: bool) -> None:
    if not isinstance(value, list):
        raise _fail(path, f"expected a list of {what}, got {type(value).__name__}")
    seen: set[str] = set()  # a membership test in constant time: linear in the keys
    for index, item in enumerate(value):
        _name(item, f"{path}[{index}]")
        if item in seen:
            raise _fail(f"{path}[{index}]", f"{_shown(item)} is listed twice")
        seen.add(item)
    if not seen and not allow_empty:
        raise _fail(path, f"at least one {what[:-1]} is required")


def _check_value(value: object, path: str, field: Field) -> None:
    if field.kind == "positive":
        _positive(value, path)
    elif field.kind == "boolean":
        _boolean(value, path)
    elif field.kind == "name":
        _name(value, path)
    else:
        _names(value, path, what=field.items, allow_empty=not field.non_empty)


def _json(default: int | bool | tuple[str, ...]) -> int | bool | list[str]:
    """A default as the document writes it (a list, not a tuple)."""
    return list(default) if isinstance(default, tuple) else default


def _value_schema(field: Field) -> dict[str, Any]:
    name = {
        "type": "string",
        "minLength": 1,
        "maxLength": NAME_LENGTH,
        "not": {"pattern": NAME_FORBIDDEN_PATTERN},
    }
    if field.kind == "positive":
        schema: dict[str, Any] = {"type": "integer", "minimum": 1, "maximum": LARGEST_INT}
    elif field.kind == "boolean":
        schema = {"type": "boolean"}
    elif field.kind == "name":
        schema = dict(name)
    else:
        schema = {"type": "array", "items": name, "uniqueItems": True}
        if field.non_empty:
            schema["minItems"] = 1
    schema = {"description": field.description, **schema}
    if field.default is not None:
        schema["default"] = _json(field.default)
    return schema


# ---- the loader's structural checks -----------------------------------------------------


def _expect_table(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(path, f"expected a table, got {type(value).__name__}")
    return value


def _check_entry(value: object, path: str, table: Table) -> None:
    entry = _expect_table(value, path)
    allowed = {field.name for field in table.fields}
    for name in entry:
        if name not in allowed:
            raise _fail(f"{path}.{name}", f"unknown field (allowed: {', '.join(sorted(allowed))})")
    for field in table.fields:
        if field.name in entry:
            _check_value(entry[field.name], f"{path}.{field.name}", field)
        elif field.required:
            raise _fail(f"{path}.{field.name}", field.missing)


def _check_table(value: object, table: Table) -> None:
    if not table.array:
        _check_entry(value, table.name, table)
        return
    if not isinstance(value, list) or not value:
        raise _fail(table.name, f"expected at least one [[{table.name}]] entry")
    for index, entry in enumerate(value):
        _check_entry(entry, f"{table.name}[{index}]", table)
    wanted = table.at_least_one
    if wanted is not None and not any(entry.get(wanted.field) is True for entry in value):
        raise _fail(table.name, wanted.problem)


def check_structure(document: object, definition: Document = DOCUMENT) -> Mapping[str, Any]:
    """Check what the schema states about a policy document (the parsed TOML) and
    return it as a table; the first problem is a ``PolicyError`` naming its path."""
    root = _expect_table(document, "policy")
    tables = {table.name: table for table in definition.tables}
    for name in root:
        if name not in tables:
            raise _fail(name, f"unknown table (allowed: {', '.join(sorted(tables))})")
    for table in definition.tables:
        if table.required and table.name not in root:
            raise _fail(table.name, "missing table")
    for table in definition.tables:
        if table.name in root:
            _check_table(root[table.name], table)
    return root


def defaults_of(table: Table) -> dict[str, Any]:
    """A table's fields that have a fixed default, with it (lists as lists)."""
    return {field.name: _json(field.default) for field in table.fields if field.default is not None}


# ---- the JSON Schema --------------------------------------------------------------------


def _table_schema(table: Table) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": "object",
        "properties": {field.name: _value_schema(field) for field in table.fields},
        "additionalProperties": False,
    }
    required = [field.name for field in table.fields if field.required]
    if required:
        entry["required"] = required
    if not table.array:
        return {"description": table.description, **entry}
    array: dict[str, Any] = {
        "description": table.description,
        "type": "array",
        "minItems": 1,
        "items": entry,
    }
    if table.at_least_one is not None:
        array["contains"] = {
            "type": "object",
            "properties": {table.at_least_one.field: {"const": True}},
            "required": [table.at_least_one.field],
        }
    return array


def policy_schema(definition: Document = DOCUMENT) -> dict[str, Any]:
    """The JSON Schema of a policy file (draft 2020-12), from the declaration the
    loader checks against. It uses only keywords that mean the same in draft 7, so an
    older validator (an editor's) reads it the same way."""
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": SCHEMA_ID,
        "title": "replan policy file (policy.toml)",
        "description": (
            "A replan policy: evidence keys, steps and their prerequisites, resources, "
            "limits (docs/reference/policy.md). This schema states the file's structure, "
            "from the declaration `replan policy FILE` checks against. The loader also "
            "checks what JSON Schema cannot state, listed by path in "
            "x-replan-loader-checks: every key in a step's requires and in "
            "[workflow] ready_when_passed is a declared evidence key, step names are "
            "unique, ready_when_passed is required when several steps complete the run, "
            "and an integer limit is not written as a float (3.0)."
        ),
        "type": "object",
        "properties": {table.name: _table_schema(table) for table in definition.tables},
        "required": [table.name for table in definition.tables if table.required],
        "additionalProperties": False,
        "x-replan-loader-checks": [{"path": path, "check": check} for path, check in LOADER_CHECKS],
    }
