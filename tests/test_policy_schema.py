"""The policy file's JSON Schema cannot disagree with the loader: both read one
declaration (``controller/policy_schema.py``). 200 fuzzed policies, each valid or with
exactly one structural defect, get the same verdict and the same path from both; what
only the loader checks (cross-references, ``3.0``) is pinned as the schema's documented
gap; and a schema built from a declaration with one thing changed is caught."""

from __future__ import annotations

import copy
import dataclasses
import datetime
import functools
import json
import random
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from jsonschema import Draft7Validator, Draft202012Validator
from test_policy import BAD_FILES

from replan.cli import main
from replan.controller.policy import DEFAULTS, policy_from_dict
from replan.controller.policy_schema import (
    DOCUMENT,
    LOADER_CHECKS,
    Document,
    Field,
    Kind,
    Table,
    policy_schema,
)
from replan.controller.records import PolicyError

REPOSITORY = Path(__file__).resolve().parent.parent
SEED = 19
FUZZED = 200

Doc = dict[str, Any]


# ---- the two verdicts, in the loader's path format ----------------------------------------


def loader_verdict(document: object) -> str | None:
    """None when the loader accepts the document, else the path its error names."""
    try:
        policy_from_dict(document)  # type: ignore[arg-type]
    except PolicyError as error:
        return str(error).split(": ", 1)[0]
    return None


def _render(parts: list[str | int]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else part
    return text or "policy"


def _parts(error: jsonschema.ValidationError) -> list[str | int]:
    """jsonschema's path, completed where its error is about a member of the instance:
    the missing property, the unexpected one, the repeated item."""
    parts: list[str | int] = list(error.absolute_path)
    instance = error.instance
    if error.validator == "required":
        parts.append(next(n for n in error.validator_value if n not in instance))
    elif error.validator == "additionalProperties":
        parts.append(next(n for n in instance if n not in error.schema.get("properties", {})))
    elif error.validator == "uniqueItems":
        parts.append(next(i for i in range(len(instance)) if instance[i] in instance[:i]))
    return parts


def schema_verdict(document: object, validator: jsonschema.protocols.Validator) -> str | None:
    """None when the schema accepts the document, else the path of its deepest error
    (the first of them in jsonschema's order): one defect can also break a summary, as
    a completing step that is no table leaves no step with completes_run = true."""
    errors = [_parts(error) for error in validator.iter_errors(document)]
    return _render(max(errors, key=len)) if errors else None


def validators(schema: dict[str, Any]) -> list[jsonschema.protocols.Validator]:
    """The schema read as draft 2020-12 (what it declares) and as draft 7 (what an
    older editor's validator may read it as): it uses only keywords they share."""
    return [Draft202012Validator(schema), Draft7Validator(schema)]


# ---- fuzzed policies, from the declaration ------------------------------------------------

NAMES = ["parser", "access", "schema", "tests", "déploy", "k 1", "😀", "a.b", "x" * 40]
RESOURCES = ["input-A", "input-B", "🚀", "r"]
#: Values of every TOML type: a defect picks one its field's kind refuses.
ANY_VALUES: list[Any] = ["text", 3.5, 7, True, False, [], {}, ["x"], datetime.date(2026, 5, 1)]
ACCEPTS: dict[Kind, Callable[[object], bool]] = {
    "positive": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "name": lambda v: isinstance(v, str),
    "names": lambda v: isinstance(v, list),
}


#: per-resource keys and open slots: never a key's or a fixed resource's name
PER_RESOURCE = ["held", "owned"]
SLOTS = ["slot1", "slot2"]


def valid_policy(rng: random.Random) -> Doc:
    """A valid policy: every table and field of the declaration, the optional ones
    present or not, then the loader's cross-references made to hold."""
    keys = rng.sample(NAMES, rng.randint(0, 4))

    def value(table: Table, field: Field, index: int) -> Any:
        if field.kind == "positive":
            return rng.choice([1, 2, 3, 7, 10**12])
        if field.kind == "boolean":
            return rng.random() < 0.5
        if field.kind == "name":
            return f"step-{index}"
        if (table.name, field.name) == ("evidence", "keys"):
            return list(keys)
        if (table.name, field.name) == ("evidence", "per_resource"):
            return rng.sample(PER_RESOURCE, rng.randint(0, len(PER_RESOURCE)))
        if (table.name, field.name) == ("resources", "open"):
            return rng.sample(SLOTS, rng.randint(0, len(SLOTS)))
        if field.non_empty:
            return rng.sample(RESOURCES, rng.randint(1, 3))
        return rng.sample(keys, rng.randint(0, len(keys)))

    document: Doc = {}
    for table in DOCUMENT.tables:
        if not table.required and rng.random() < 0.3:
            continue
        entries: list[dict[str, Any]] = [{} for _ in range(rng.randint(1, 4) if table.array else 1)]
        for index, entry in enumerate(entries):
            for field in table.fields:
                if field.required or rng.random() < 0.6:
                    entry[field.name] = value(table, field, index)
        document[table.name] = entries if table.array else entries[0]
    steps = document["steps"]
    if not any(step.get("completes_run") is True for step in steps):
        rng.choice(steps)["completes_run"] = True
    if sum(step.get("completes_run") is True for step in steps) > 1:
        workflow = document.setdefault("workflow", {})
        workflow.setdefault("ready_when_passed", rng.sample(keys, rng.randint(0, len(keys))))
    limits = document.get("limits", {})
    if "max_cost" in limits:  # a cost is in micro-units of a currency the policy names
        limits.setdefault("currency", "USD")
    return document


Defect = Callable[[Doc, random.Random], Doc]


def _entry(document: Doc, table: Table, rng: random.Random) -> dict[str, Any]:
    if table.array:
        entry: dict[str, Any] = rng.choice(document[table.name])
        return entry
    table_value: dict[str, Any] = document.setdefault(table.name, {})
    return table_value


def _is_table(value: object) -> bool:
    return isinstance(value, dict)


def _is_array(value: object) -> bool:
    return isinstance(value, list)


def _wrong(accepts: Callable[[object], bool], rng: random.Random) -> Any:
    return copy.deepcopy(rng.choice([v for v in ANY_VALUES if not accepts(v)]))


def _field_defects(table: Table, field: Field) -> Iterator[tuple[str, Defect]]:
    where = f"{table.name}.{field.name}"

    def setting(make: Callable[[Any, random.Random], Any]) -> Defect:
        def apply(document: Doc, rng: random.Random) -> Doc:
            entry = _entry(document, table, rng)
            entry[field.name] = make(entry.get(field.name), rng)
            return document

        return apply

    yield f"{where}: wrong type", setting(lambda _, rng: _wrong(ACCEPTS[field.kind], rng))
    if field.required:

        def remove(document: Doc, rng: random.Random) -> Doc:
            del _entry(document, table, rng)[field.name]
            return document

        yield f"{where}: missing", remove
    if field.kind == "positive":
        yield f"{where}: zero", setting(lambda _, rng: 0)
        yield f"{where}: negative", setting(lambda _, rng: -rng.choice([1, 2, 10**20]))
        yield f"{where}: a boolean", setting(lambda _, rng: rng.random() < 0.5)
    elif field.kind == "boolean":
        yield f"{where}: an integer", setting(lambda _, rng: rng.choice([0, 1]))
    elif field.kind == "name":
        yield f"{where}: empty", setting(lambda _, rng: "")
    else:

        def item(bad: Callable[[list[Any], random.Random], Any]) -> Defect:
            def make(items: list[Any] | None, rng: random.Random) -> list[Any]:
                items = list(items or [])
                items.insert(rng.randint(0, len(items)), bad(items, rng))
                return items

            return setting(make)

        yield f"{where}: an item not a string", item(lambda _, rng: _wrong(ACCEPTS["name"], rng))
        yield f"{where}: an empty item", item(lambda _, rng: "")
        yield (
            f"{where}: an item twice",
            setting(lambda items, rng: [*(items or ["twice"]), rng.choice(items or ["twice"])]),
        )
        if field.non_empty:
            yield f"{where}: empty", setting(lambda _, rng: [])


def defects(definition: Document = DOCUMENT) -> list[tuple[str, Defect]]:
    """Every structural defect the declaration implies, each one change to a valid
    policy (and each refused by the loader's structural checks, before any
    cross-reference is looked at)."""
    found: list[tuple[str, Defect]] = []

    def replace_root(document: Doc, rng: random.Random) -> Doc:
        return _wrong(_is_table, rng)  # type: ignore[no-any-return]

    def unknown_table(document: Doc, rng: random.Random) -> Doc:
        document[rng.choice(["extra", "step", "limit", "workflows"])] = {}
        return document

    found += [("policy: not a table", replace_root), ("unknown table", unknown_table)]
    for table in definition.tables:
        found += list(_table_defects(table))
        for field in table.fields:
            found += list(_field_defects(table, field))
    return found


def _table_defects(table: Table) -> Iterator[tuple[str, Defect]]:
    def set_table(make: Callable[[random.Random], Any]) -> Defect:
        def apply(document: Doc, rng: random.Random) -> Doc:
            document[table.name] = make(rng)
            return document

        return apply

    if table.required:

        def remove(document: Doc, rng: random.Random) -> Doc:
            del document[table.name]
            return document

        yield f"{table.name}: missing", remove

    def unknown_field(document: Doc, rng: random.Random) -> Doc:
        names = {f.name for f in table.fields}
        others = [f.name for t in DOCUMENT.tables for f in t.fields if f.name not in names]
        _entry(document, table, rng)[rng.choice([*others, "extra", table.fields[0].name + "s"])] = 1
        return document

    yield f"{table.name}: unknown field", unknown_field
    if not table.array:
        yield (
            f"{table.name}: not a table",
            set_table(lambda rng: _wrong(_is_table, rng)),
        )
        return
    yield (
        f"{table.name}: not an array",
        set_table(lambda rng: _wrong(lambda v: isinstance(v, list), rng)),
    )
    yield f"{table.name}: empty", set_table(lambda rng: [])

    def entry_not_a_table(document: Doc, rng: random.Random) -> Doc:
        entries = document[table.name]
        entries[rng.randrange(len(entries))] = _wrong(_is_table, rng)
        return document

    yield f"{table.name}: an entry not a table", entry_not_a_table
    wanted = table.at_least_one
    if wanted is not None:

        def none_wanted(document: Doc, rng: random.Random) -> Doc:
            for entry in document[table.name]:
                if rng.random() < 0.5:
                    entry[wanted.field] = False
                else:
                    entry.pop(wanted.field, None)
            return document

        yield f"{table.name}: none with {wanted.field} = true", none_wanted


def fuzzed_policies(seed: int = SEED, count: int = FUZZED) -> list[tuple[str, Any]]:
    """``count`` policies: a quarter valid, the rest each with one defect, taking the
    declaration's defects in turn (so every one is tried) on random valid policies."""
    rng = random.Random(seed)
    every = defects()
    policies: list[tuple[str, Any]] = []
    for index in range(count):
        document = valid_policy(rng)
        if index % 4 == 0:
            policies.append(("valid", document))
        else:
            name, defect = every[(index - index // 4 - 1) % len(every)]
            policies.append((name, defect(document, rng)))
    return policies


FUZZ = fuzzed_policies()


@functools.cache
def loader_verdicts() -> tuple[str | None, ...]:
    return tuple(loader_verdict(document) for _, document in FUZZ)


def disagreements(schema: dict[str, Any], *, first_only: bool = False) -> list[str]:
    """One line per fuzzed policy the loader and ``schema`` judge differently."""
    found = []
    for (name, document), loader in zip(FUZZ, loader_verdicts(), strict=True):
        for validator in validators(schema):
            judged = schema_verdict(document, validator)
            if judged != loader:
                found.append(f"{name}: loader {loader}, {type(validator).__name__} {judged}")
                if first_only:
                    return found
    return found


# ---- the schema itself ----------------------------------------------------------------


def test_schema_is_a_valid_draft_2020_12_schema_with_the_declarations_words() -> None:
    schema = policy_schema()
    Draft202012Validator.check_schema(schema)
    Draft7Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] and schema["title"]
    limits = schema["properties"]["limits"]["properties"]
    assert limits["max_steps"]["default"] == DEFAULTS["max_steps"]
    assert limits["no_progress_limit"]["default"] == DEFAULTS["no_progress_limit"]
    assert limits["count_duplicate_deliveries"]["default"] is True
    assert "default" not in limits["max_proposals"]  # it follows max_steps
    for table in DOCUMENT.tables:
        described = schema["properties"][table.name]
        assert described["description"] == table.description
        fields = (described["items"] if table.array else described)["properties"]
        assert [fields[f.name]["description"] for f in table.fields] == [
            f.description for f in table.fields
        ]


def test_schema_names_every_check_it_leaves_to_the_loader() -> None:
    schema = policy_schema()
    assert schema["x-replan-loader-checks"] == [
        {"path": path, "check": check} for path, check in LOADER_CHECKS
    ]
    for words in ("declared evidence key", "unique", "ready_when_passed", "3.0"):
        assert words in schema["description"]


def test_the_policy_files_in_the_repository_are_valid_for_the_schema() -> None:
    validator = Draft202012Validator(policy_schema())
    files = [REPOSITORY / "spec" / "policy.toml", *(REPOSITORY / "tests" / "policies").glob("*")]
    assert len(files) >= 5
    for path in files:
        assert list(validator.iter_errors(tomllib.loads(path.read_text("utf-8")))) == [], path


# ---- the schema and the loader agree ----------------------------------------------------


def test_the_fuzz_tries_every_defect_the_declaration_implies() -> None:
    names = [name for name, _ in FUZZ]
    assert len(FUZZ) == FUZZED and names.count("valid") == FUZZED // 4
    assert {name for name, _ in defects()} <= set(names)
    # each defect is refused, and the valid policies accepted, by the loader
    for name, verdict in zip(names, loader_verdicts(), strict=True):
        assert (verdict is None) == (name == "valid"), name


def test_schema_and_loader_agree_on_fuzzed_policies() -> None:
    assert disagreements(policy_schema()) == []


def _path_pattern(path: str) -> re.Pattern[str]:
    return re.compile(re.escape(path).replace(r"\[\*\]", r"\[\d+\]") + "$")


def _gaps() -> dict[str, Defect]:
    """One document change per entry of LOADER_CHECKS: what only the loader refuses."""

    def duplicate_name(document: Doc, rng: random.Random) -> Doc:
        steps = document["steps"]
        steps.append({"name": rng.choice(steps)["name"]})
        return document

    def undeclared_requirement(document: Doc, rng: random.Random) -> Doc:
        rng.choice(document["steps"]).setdefault("requires", []).append("undeclared")
        return document

    def two_complete_without_workflow(document: Doc, rng: random.Random) -> Doc:
        document["steps"].append({"name": "also-completes", "completes_run": True})
        document.get("workflow", {}).pop("ready_when_passed", None)
        return document

    def undeclared_workflow_key(document: Doc, rng: random.Random) -> Doc:
        workflow = document.setdefault("workflow", {})
        workflow.setdefault("ready_when_passed", []).append("undeclared")
        return document

    def per_resource_on_completion(document: Doc, rng: random.Random) -> Doc:
        document["evidence"]["per_resource"] = ["held"]
        completing = [step for step in document["steps"] if step.get("completes_run")]
        rng.choice(completing)["requires"] = ["held"]
        return document

    def scoped_key(document: Doc, rng: random.Random) -> Doc:
        document["evidence"]["keys"] = [*document["evidence"]["keys"], "held@r"]
        return document

    def per_resource_also_a_key(document: Doc, rng: random.Random) -> Doc:
        evidence = document["evidence"]
        evidence["keys"] = [*evidence["keys"], "held"]
        evidence["per_resource"] = ["held"]
        return document

    def slot_also_fixed(document: Doc, rng: random.Random) -> Doc:
        resources = document["resources"]
        resources["open"] = [rng.choice(resources["allowed"])]
        return document

    def cost_without_currency(document: Doc, rng: random.Random) -> Doc:
        limits = document.setdefault("limits", {})
        limits["max_cost"] = rng.randint(1, 10**6)
        limits.pop("currency", None)
        return document

    def lone_surrogate_in_a_key(document: Doc, rng: random.Random) -> Doc:
        keys = document["evidence"]["keys"]
        keys.append(rng.choice(["\ud800", "key-\udfff", "\udbff-x"]))
        return document

    def integer_as_float(name: str) -> Defect:
        def apply(document: Doc, rng: random.Random) -> Doc:
            document.setdefault("limits", {})[name] = float(rng.randint(1, 9))
            return document

        return apply

    return {
        "steps[*].name": duplicate_name,
        "steps[*].requires[*]": undeclared_requirement,
        "workflow.ready_when_passed": two_complete_without_workflow,
        "workflow.ready_when_passed[*]": undeclared_workflow_key,
        "steps[*].requires": per_resource_on_completion,
        "evidence.keys[*]": lambda document, rng: rng.choice((scoped_key, lone_surrogate_in_a_key))(
            document, rng
        ),
        "evidence.per_resource[*]": per_resource_also_a_key,
        "resources.open[*]": slot_also_fixed,
        "limits.currency": cost_without_currency,
        **{
            f"limits.{field.name}": integer_as_float(field.name)
            for field in DOCUMENT.table("limits").fields
            if field.kind == "positive"
        },
    }


def test_what_only_the_loader_checks_is_the_schemas_documented_gap() -> None:
    """Each of LOADER_CHECKS, tried on random valid policies: the schema accepts, and
    the loader refuses at that path. (A new loader check needs an entry here and in
    LOADER_CHECKS, or this fails.)"""
    gaps = _gaps()
    assert set(gaps) == {path for path, _ in LOADER_CHECKS}
    rng = random.Random(SEED)
    checked = 0
    for path, gap in gaps.items():
        for _ in range(10):
            document = gap(valid_policy(rng), rng)
            for validator in validators(policy_schema()):
                assert schema_verdict(document, validator) is None, (path, document)
            named = loader_verdict(document)
            assert named is not None and _path_pattern(path).match(named), (path, named)
            checked += 1
    assert checked == 10 * len(LOADER_CHECKS)


#: test_policy's bad files that only the loader refuses (each at a LOADER_CHECKS path).
ONLY_THE_LOADER = {"requires-typo", "workflow-typo", "duplicate-step", "float-limit"}
HAND_WRITTEN = [(c, t, m) for c, t, m in BAD_FILES if c != "invalid-toml"]


@pytest.mark.parametrize(
    ("case", "text", "message"), HAND_WRITTEN, ids=[c for c, _, _ in HAND_WRITTEN]
)
def test_the_hand_written_bad_files_get_the_loaders_path_or_are_a_documented_gap(
    case: str, text: str, message: str
) -> None:
    path = message.split(": ", 1)[0]
    judged = schema_verdict(tomllib.loads(text), Draft202012Validator(policy_schema()))
    if case in ONLY_THE_LOADER:
        assert judged is None
        assert any(_path_pattern(pattern).match(path) for pattern, _ in LOADER_CHECKS)
    else:
        assert judged == path


# ---- a disagreement is caught -----------------------------------------------------------


def _changed(definition: Document, table: Table, **changes: Any) -> Document:
    return Document(
        tuple(dataclasses.replace(t, **changes) if t is table else t for t in definition.tables)
    )


def _changed_field(definition: Document, table: Table, field: Field, **changes: Any) -> Document:
    fields = tuple(dataclasses.replace(f, **changes) if f is field else f for f in table.fields)
    return _changed(definition, table, fields=fields)


KINDS: list[Kind] = ["positive", "boolean", "name", "names"]


def mutants() -> Iterator[tuple[str, Document]]:
    """The declaration with one thing changed: each field's kind (to each other kind),
    whether it is required, whether a list may be empty; each table's required; the
    array of steps' at-least-one-completing rule."""
    for table in DOCUMENT.tables:
        yield (
            f"{table.name} required={not table.required}",
            _changed(DOCUMENT, table, required=not table.required),
        )
        if table.at_least_one is not None:
            yield f"{table.name} without at_least_one", _changed(DOCUMENT, table, at_least_one=None)
        for field in table.fields:
            where = f"{table.name}.{field.name}"
            for kind in KINDS:
                if kind != field.kind:
                    changed = _changed_field(DOCUMENT, table, field, kind=kind)
                    yield f"{where} kind={kind}", changed
            yield (
                f"{where} required={not field.required}",
                _changed_field(DOCUMENT, table, field, required=not field.required),
            )
            if field.kind == "names":
                yield (
                    f"{where} non_empty={not field.non_empty}",
                    _changed_field(DOCUMENT, table, field, non_empty=not field.non_empty),
                )


def test_a_schema_from_a_changed_declaration_is_caught_disagreeing() -> None:
    """The loader keeps the real declaration; a schema built from one with one thing
    changed must disagree with it on some fuzzed policy, for every such change (so the
    agreement test above would catch a schema and a loader drifting apart)."""
    missed = [
        name
        for name, changed in mutants()
        if not disagreements(policy_schema(changed), first_only=True)
    ]
    assert missed == []


def test_the_agreement_check_reports_a_counterexample_for_one_changed_kind() -> None:
    limits = DOCUMENT.table("limits")
    changed = _changed_field(DOCUMENT, limits, limits.field("max_steps"), kind="boolean")
    (first,) = disagreements(policy_schema(changed), first_only=True)
    assert "limits.max_steps" in first, first


# ---- replan policy --schema -------------------------------------------------------------


def test_replan_policy_schema_prints_the_schema_as_json() -> None:
    finished = subprocess.run(
        [sys.executable, "-m", "replan", "policy", "--schema"],
        capture_output=True,
        text=True,
        cwd=REPOSITORY,  # the worktree's code, first on sys.path
        timeout=60,
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stderr == ""
    assert json.loads(finished.stdout) == policy_schema()


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        (["--schema", "spec/policy.toml"], "--schema takes no FILE"),
        (["--schema", "--json"], "--schema takes no --json"),
        ([], "expected one policy FILE"),
    ],
    ids=["schema-and-file", "schema-and-json", "nothing"],
)
def test_replan_policy_schema_with_what_makes_no_sense_is_one_line_exit_2(
    arguments: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["policy", *arguments]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith(f"replan policy: error: {complaint}"), line


def test_replan_policy_help_teaches_the_schema_and_taplo(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["policy", "--help"]) == 0
    helped = capsys.readouterr().out
    for words in (
        "--schema",
        "#:schema ./policy.schema.json",
        "[[rule]]",
        "[rule.schema]",
        "evenBetterToml.schema.associations",
    ):
        assert words in helped, words
