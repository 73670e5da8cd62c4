"""The policy: the default file, normal form round trips, and every ``PolicyError``
naming the offending path (DESIGN.md "Policy file")."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from replan.controller import DEFAULT_POLICY, Policy, PolicyError, Step, load_policy
from replan.controller.policy import (
    policy_from_dict,
    policy_to_dict,
    policy_to_toml,
    workflow_disagreements,
)

REPOSITORY = Path(__file__).resolve().parent.parent

VALID = """\
[limits]
max_steps = 4
no_progress_limit = 3
count_duplicate_deliveries = true

[evidence]
keys = ["parser", "access"]

[resources]
allowed = ["input-A"]

[[steps]]
name = "inspect-parser"

[[steps]]
name = "inspect-access"

[[steps]]
name = "commit-import"
requires = ["parser", "access"]
completes_run = true

[workflow]
ready_when_passed = ["parser", "access"]
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _edit(old: str, new: str) -> str:
    assert old in VALID, old
    return VALID.replace(old, new, 1)


# ---- valid policies ---------------------------------------------------------------------


def test_default_policy_file_loads_equal_to_default_policy() -> None:
    assert load_policy(REPOSITORY / "spec" / "policy.toml") == DEFAULT_POLICY


def test_default_policy_matches_the_contract() -> None:
    policy = DEFAULT_POLICY
    assert policy.keys == ("parser", "access")
    assert [s.name for s in policy.steps] == ["inspect-parser", "inspect-access", "commit-import"]
    assert policy.requirements == {
        "inspect-parser": (),
        "inspect-access": (),
        "commit-import": ("parser", "access"),
    }
    assert policy.terminal_steps == {"commit-import"}
    assert policy.resources == ("input-A",)
    assert (policy.max_steps, policy.max_proposals, policy.no_progress_limit) == (4, 8, 3)
    assert policy.count_duplicate_deliveries is True
    assert policy.workflow_keys == ("parser", "access")


def test_minimal_file_fills_the_contract_defaults(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '[evidence]\nkeys = ["k"]\n[resources]\nallowed = ["r"]\n'
        '[[steps]]\nname = "s"\nrequires = ["k"]\ncompletes_run = true\n',
    )
    policy = load_policy(path)
    assert policy.max_steps == 4
    assert policy.max_proposals == 8
    assert policy.no_progress_limit == 3
    assert policy.count_duplicate_deliveries is True
    assert policy.workflow_keys == ("k",)  # the baseline defaults to every key


def test_max_proposals_defaults_to_twice_max_steps(tmp_path: Path) -> None:
    policy = load_policy(_write(tmp_path, _edit("max_steps = 4", "max_steps = 3")))
    assert policy.max_proposals == 6


def test_explicit_max_proposals_wins(tmp_path: Path) -> None:
    policy = load_policy(
        _write(tmp_path, _edit("max_steps = 4", "max_steps = 3\nmax_proposals = 5"))
    )
    assert policy.max_proposals == 5


@pytest.mark.parametrize(
    "policy",
    [
        DEFAULT_POLICY,
        Policy(
            keys=("a", "b", "c"),
            steps=(Step("look"), Step("ship", ("a", "b", "c"), True)),
            resources=("r1", "r2"),
            max_steps=1,
            max_proposals=2,
            no_progress_limit=5,
            count_duplicate_deliveries=False,
            workflow_keys=("a", "c"),
        ),
    ],
    ids=["default", "three-prerequisites"],
)
def test_normal_form_round_trips(policy: Policy) -> None:
    assert policy_from_dict(policy_to_dict(policy)) == policy
    assert policy_from_dict(tomllib.loads(policy_to_toml(policy))) == policy


def test_derived_lookups_follow_the_steps() -> None:
    policy = Policy(
        keys=("a",),
        steps=(Step("x", ("a",)), Step("y", completes_run=True)),
        resources=("r",),
    )
    assert policy.requirements == {"x": ("a",), "y": ()}
    assert policy.terminal_steps == {"y"}
    assert policy.key_set == {"a"}
    assert policy.resource_set == {"r"}
    assert policy.step("x") == Step("x", ("a",))
    with pytest.raises(KeyError):
        policy.step("z")


# ---- every PolicyError names the path --------------------------------------------------------

BAD_FILES: list[tuple[str, str, str]] = [
    # (case, file text, expected message start after "<file>: ")
    ("unknown-table", VALID + "\n[extra]\nx = 1\n", "extra: unknown table"),
    (
        "unknown-limits-field",
        _edit("max_steps = 4", "max_step = 4"),
        "limits.max_step: unknown field",
    ),
    (
        "unknown-step-field",
        _edit('name = "inspect-access"', 'name = "inspect-access"\nrequire = []'),
        "steps[1].require: unknown field",
    ),
    (
        "unknown-evidence-field",
        _edit('keys = ["parser", "access"]', 'keys = ["parser", "access"]\nkey = []'),
        "evidence.key: unknown field",
    ),
    (
        "unknown-workflow-field",
        _edit("ready_when_passed", "ready_when"),
        "workflow.ready_when: unknown field",
    ),
    (
        "requires-typo",
        _edit('requires = ["parser", "access"]', 'requires = ["parser", "acess"]'),
        "steps[2].requires[1]: 'acess' is not a declared evidence key",
    ),
    (
        "workflow-typo",
        _edit('ready_when_passed = ["parser", "access"]', 'ready_when_passed = ["parsr"]'),
        "workflow.ready_when_passed[0]: 'parsr' is not a declared evidence key",
    ),
    (
        "duplicate-step",
        _edit('name = "inspect-access"', 'name = "inspect-parser"'),
        "steps[1].name: duplicate step name 'inspect-parser'",
    ),
    (
        "no-completing-step",
        _edit("completes_run = true", "completes_run = false"),
        "steps: no step has completes_run = true",
    ),
    (
        "zero-max-steps",
        _edit("max_steps = 4", "max_steps = 0"),
        "limits.max_steps: must be at least 1",
    ),
    (
        "negative-max-proposals",
        _edit("max_steps = 4", "max_steps = 4\nmax_proposals = -2"),
        "limits.max_proposals: must be at least 1",
    ),
    (
        "zero-no-progress-limit",
        _edit("no_progress_limit = 3", "no_progress_limit = 0"),
        "limits.no_progress_limit: must be at least 1",
    ),
    (
        "string-limit",
        _edit("max_steps = 4", 'max_steps = "4"'),
        "limits.max_steps: expected a positive integer",
    ),
    (
        "bool-limit",
        _edit("max_steps = 4", "max_steps = true"),
        "limits.max_steps: expected a positive integer",
    ),
    (
        "float-limit",
        _edit("no_progress_limit = 3", "no_progress_limit = 3.0"),
        "limits.no_progress_limit: expected a positive integer",
    ),
    (
        "count-duplicates-not-bool",
        _edit("count_duplicate_deliveries = true", "count_duplicate_deliveries = 1"),
        "limits.count_duplicate_deliveries: expected true or false",
    ),
    (
        "completes-run-not-bool",
        _edit("completes_run = true", 'completes_run = "yes"'),
        "steps[2].completes_run: expected true or false",
    ),
    (
        "keys-not-a-list",
        _edit('keys = ["parser", "access"]', 'keys = "parser"'),
        "evidence.keys: expected a list of keys",
    ),
    (
        "key-not-a-string",
        _edit('keys = ["parser", "access"]', 'keys = ["parser", 3]'),
        "evidence.keys[1]: expected a non-empty string",
    ),
    (
        "key-empty",
        _edit('keys = ["parser", "access"]', 'keys = ["parser", ""]'),
        "evidence.keys[1]: expected a non-empty string",
    ),
    (
        "key-twice",
        _edit('keys = ["parser", "access"]', 'keys = ["parser", "parser"]'),
        "evidence.keys[1]: 'parser' is listed twice",
    ),
    (
        "requires-not-a-list",
        _edit('requires = ["parser", "access"]', 'requires = "parser"'),
        "steps[2].requires: expected a list of keys",
    ),
    (
        "no-resources",
        _edit('allowed = ["input-A"]', "allowed = []"),
        "resources.allowed: at least one resource is required",
    ),
    (
        "step-name-missing",
        _edit('name = "inspect-access"', "completes_run = false"),
        "steps[1].name: expected a non-empty string",
    ),
    (
        "step-name-not-string",
        _edit('name = "inspect-access"', "name = 5"),
        "steps[1].name: expected a non-empty string",
    ),
    (
        "limits-not-a-table",
        _edit(
            "[limits]\nmax_steps = 4\nno_progress_limit = 3\ncount_duplicate_deliveries = true\n",
            "limits = 4\n",
        ),
        "limits: expected a table",
    ),
    (
        "steps-not-an-array-of-tables",
        'steps = "inspect-parser"\n' + VALID.split("[[steps]]")[0],
        "steps: expected at least one [[steps]] entry",
    ),
    (
        "missing-evidence",
        _edit('[evidence]\nkeys = ["parser", "access"]\n', ""),
        "evidence: missing table",
    ),
    (
        "missing-resources",
        _edit('[resources]\nallowed = ["input-A"]\n', ""),
        "resources: missing table",
    ),
    ("missing-steps", VALID.split("[[steps]]")[0], "steps: missing table"),
    (
        "missing-keys-field",
        _edit('keys = ["parser", "access"]', ""),
        "evidence.keys: missing field",
    ),
    (
        "missing-allowed-field",
        _edit('allowed = ["input-A"]', ""),
        "resources.allowed: missing field",
    ),
    ("invalid-toml", _edit("max_steps = 4", "max_steps = = 4"), "invalid TOML"),
]


@pytest.mark.parametrize(
    ("text", "message"), [(t, m) for _, t, m in BAD_FILES], ids=[c for c, _, _ in BAD_FILES]
)
def test_invalid_policy_file_raises_policy_error_naming_the_path(
    tmp_path: Path, text: str, message: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(PolicyError) as raised:
        load_policy(path)
    text_of_error = str(raised.value)
    assert text_of_error.startswith(f"{path}: {message}"), text_of_error
    assert "\n" not in text_of_error
    assert isinstance(raised.value, ValueError)


def test_missing_policy_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.toml"
    with pytest.raises(PolicyError, match=r"nowhere\.toml: no such policy file"):
        load_policy(path)


def test_policy_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PolicyError) as raised:
        load_policy(tmp_path)
    assert str(raised.value).startswith(f"{tmp_path}: cannot read policy file")


def test_policy_built_in_code_is_validated_too() -> None:
    with pytest.raises(PolicyError, match=r"^steps\[0\]\.requires\[0\]: 'acess'"):
        Policy(keys=("access",), steps=(Step("s", ("acess",), True),), resources=("r",))
    with pytest.raises(PolicyError, match=r"^limits\.max_steps: must be at least 1"):
        dataclasses.replace(DEFAULT_POLICY, max_steps=0)
    with pytest.raises(PolicyError, match=r"^steps: no step has completes_run"):
        Policy(keys=(), steps=(Step("s"),), resources=("r",))


def test_policy_from_dict_refuses_a_non_table() -> None:
    with pytest.raises(PolicyError, match=r"^policy: expected a table"):
        policy_from_dict(["not", "a", "table"])  # type: ignore[arg-type]


def test_empty_steps_array_is_refused() -> None:
    document = tomllib.loads(VALID.split("[[steps]]")[0])
    document["steps"] = []
    with pytest.raises(PolicyError, match=r"^steps: expected at least one \[\[steps\]\] entry"):
        policy_from_dict(document)


# ---- the fixed workflow's prerequisites ---------------------------------------------------


FIRST_POLICY = Path(__file__).resolve().parent / "policies" / "first-policy.toml"


def test_ready_when_passed_defaults_to_the_completing_steps_requires() -> None:
    policy = load_policy(FIRST_POLICY)
    assert policy.workflow_keys == ("schema", "tests")
    assert workflow_disagreements(policy) == []


def test_ready_when_passed_is_required_when_several_steps_complete_the_run() -> None:
    document = {
        "evidence": {"keys": ["a", "b"]},
        "resources": {"allowed": ["r"]},
        "steps": [
            {"name": "x", "requires": ["a"], "completes_run": True},
            {"name": "y", "requires": ["b"], "completes_run": True},
        ],
    }
    with pytest.raises(PolicyError, match=r"^workflow\.ready_when_passed: missing field: 2 steps"):
        policy_from_dict(document)


def test_a_workflow_that_disagrees_with_the_completing_step_is_named_with_the_fix() -> None:
    policy = load_policy(FIRST_POLICY.parent / "commit-requires-parser-only.toml")
    (line,) = workflow_disagreements(policy)
    assert "'commit-import' requires ['parser']" in line
    assert "ready_when_passed is ['access', 'parser']" in line


def test_replan_policy_warns_in_one_line_and_the_proof_names_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from replan.cli import main

    weakened = str(FIRST_POLICY.parent / "commit-requires-parser-only.toml")
    assert main(["policy", weakened]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "ready_when_passed" in warnings[0]
    assert main(["prove", "--policy", weakened, "--output", str(tmp_path)]) == 1
    assert "fix: steps[2] 'commit-import' requires ['parser']" in capsys.readouterr().out
