"""`replan verify --sarif FILE`: a SARIF 2.1.0 log that validates against the
official schema (vendored: tests/schemas/), one result per broken property, drift
or gap, each on the line a person would change (what GitHub code scanning shows).

One verify run per case, in process. The weakened commit gate and the default
policy run with the explorer and the campaign stubbed out (they pass on both, and
take ~40 s: the commit gate is the proofs' and the fixed-workflow table's finding);
the mutant runs every engine (it stops at the first violation: ~10 s)."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from replan.cli import main
from replan.controller.policy import DEFAULT_POLICY, load_policy
from replan.verification.pipeline.checks.workflow import check_workflow
from replan.verification.pipeline.session import VerifySession
from replan.verification.report.records import CheckResult, VerifyReport
from replan.verification.report.sarif import sarif_log

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "tests" / "schemas" / "sarif-2.1.0.json"
SCHEMA_SHA256 = "1c49a0f2b60444c71bb14878e21e0d882198eff4c539861b133093ad89ed798c"
WEAK_GATE = ROOT / "tests" / "policies" / "commit-requires-parser-only.toml"
MUTANT = "step-not-counted"

Log = dict[str, Any]


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


def _verify(tmp: Path, *arguments: str, stub_engines: bool) -> tuple[int, Log, dict[str, Any]]:
    """`replan verify ... --sarif` in process from the repository root: exit code,
    the SARIF log, verify.json."""
    sarif = tmp / "out" / "replan.sarif"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        if stub_engines:
            for name in ("explorer", "campaign"):
                patch.setattr(
                    f"replan.verification.pipeline.run.check_{name}",
                    lambda session, name=name: CheckResult(name, "passed", "stubbed by the test"),
                )
        code = main(["verify", *arguments, "--output", str(tmp), "--sarif", str(sarif)])
    report = json.loads((tmp / "verify.json").read_text(encoding="utf-8"))
    return code, json.loads(sarif.read_text(encoding="utf-8")), report


@pytest.fixture(scope="module")
def holds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Log, dict[str, Any]]]:
    yield _verify(tmp_path_factory.mktemp("default"), stub_engines=True)


@pytest.fixture(scope="module")
def weak_gate(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[int, Log, dict[str, Any]]]:
    yield _verify(tmp_path_factory.mktemp("weak"), "--policy", str(WEAK_GATE), stub_engines=True)


@pytest.fixture(scope="module")
def mutant(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Log, dict[str, Any]]]:
    yield _verify(tmp_path_factory.mktemp("mutant"), "--mutant", MUTANT, stub_engines=False)


def assert_valid(log: Log, validator: jsonschema.Draft202012Validator) -> None:
    """Valid against the schema, and what the schema cannot say: each result's rule
    index names its rule, and it has a location inside the checkout."""
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.absolute_path))
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]]
    (run,) = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        (location,) = result["locations"]
        artifact = location["physicalLocation"]["artifactLocation"]
        assert artifact["uriBaseId"] == "%SRCROOT%" and not artifact["uri"].startswith("/")


def line_text(location: dict[str, Any]) -> str:
    """The source line a location points at (relative to the repository root)."""
    physical = location["physicalLocation"]
    path = ROOT / physical["artifactLocation"]["uri"]
    return path.read_text(encoding="utf-8").splitlines()[physical["region"]["startLine"] - 1]


def assert_on_the_weakened_gate(location: dict[str, Any]) -> None:
    """On commit-import's `requires`: the completing step's gate the counterexample
    runs, the line to change."""
    assert line_text(location).replace(" ", "") == 'requires=["parser"]'
    assert location["physicalLocation"]["region"]["startLine"] == 28


def results_for(log: Log, rule: str) -> list[dict[str, Any]]:
    return [r for r in log["runs"][0]["results"] if r["ruleId"] == rule]


# ---- a policy that holds ------------------------------------------------------------


def test_a_run_where_everything_holds_writes_a_valid_log_with_no_results(
    holds: tuple[int, Log, dict[str, Any]], validator: jsonschema.Draft202012Validator
) -> None:
    code, log, report = holds
    assert code == 0 and report["ok"] is True
    assert_valid(log, validator)
    assert log["version"] == "2.1.0"
    assert log["runs"][0]["results"] == []


def test_the_tool_has_one_rule_per_named_property_described_by_its_docstring(
    holds: tuple[int, Log, dict[str, Any]],
) -> None:
    from importlib import metadata

    from replan.spec.properties import CONTRACT

    driver = holds[1]["runs"][0]["tool"]["driver"]
    assert driver["name"] == "replan" and driver["version"] == metadata.version("replan")
    rules = {rule["id"]: rule for rule in driver["rules"]}
    assert len(rules) == len(driver["rules"])  # ids are unique
    for name, prop in ((p.name, p) for p in CONTRACT):
        assert rules[name]["shortDescription"]["text"] == prop.meaning
    for name in ("commit-equivalence", "drift/generated-code", "gap/transition"):
        assert name in rules


# ---- a broken policy ------------------------------------------------------------------


def test_a_weakened_commit_gate_is_an_error_on_the_requires_line_to_change(
    weak_gate: tuple[int, Log, dict[str, Any]], validator: jsonschema.Draft202012Validator
) -> None:
    code, log, report = weak_gate
    assert code == 1 and report["broken_properties"] == {"commit-equivalence": ["proofs"]}
    assert_valid(log, validator)
    (result,) = log["runs"][0]["results"]  # one per property: proofs and workflow agree
    assert result["ruleId"] == "commit-equivalence" and result["level"] == "error"
    assert result["properties"]["engines"] == ["proofs", "workflow"]
    location = result["locations"][0]
    artifact = location["physicalLocation"]["artifactLocation"]
    assert artifact["uri"] == "tests/policies/commit-requires-parser-only.toml"
    assert_on_the_weakened_gate(location)
    (related,) = result["relatedLocations"]
    assert line_text(related).startswith("ready_when_passed")
    text = result["message"]["text"]
    assert "parser=Passed, access=Unknown: controller commits, workflow says Inspect" in text
    assert "replan replay " in text and "prove.json" in text


def test_a_location_on_another_line_fails_the_line_check(
    weak_gate: tuple[int, Log, dict[str, Any]],
) -> None:
    """The line assertion above can fail: the same result on the policy's first
    line (a comment that mentions `requires`: where a writer without a locator puts
    it) or on another step's `requires` is rejected."""
    (result,) = weak_gate[1]["runs"][0]["results"]
    for line in (1, 23):
        moved = copy.deepcopy(result["locations"][0])
        moved["physicalLocation"]["region"]["startLine"] = line
        assert "requires" in line_text(moved)
        with pytest.raises(AssertionError):
            assert_on_the_weakened_gate(moved)


# ---- a broken controller: the declared transition -----------------------------------------


def test_a_seeded_mutant_points_at_the_declared_transition_and_the_broken_body(
    mutant: tuple[int, Log, dict[str, Any]], validator: jsonschema.Draft202012Validator
) -> None:
    code, log, report = mutant
    assert code == 1 and "execute-counts-one-step" in report["broken_properties"]
    assert_valid(log, validator)
    (result,) = results_for(log, "execute-counts-one-step")
    assert result["properties"]["engines"] == ["proofs", "explorer", "campaign"]
    location = result["locations"][0]
    assert location["physicalLocation"]["artifactLocation"]["uri"] == "spec/declaration.py"
    line = line_text(location)
    assert "pending.to(" in line and 'on="execute_step"' in line
    related = {line_text(r).strip() for r in result["relatedLocations"]}
    # any other transition an engine broke it on (which ones depends on what each
    # engine's search met first), and the mutant's execute_step body
    transitions = {r for r in related if r.startswith("|")}
    assert all('on="execute_step"' in r for r in transitions), transitions
    assert any(r.startswith("def execute_step") for r in related)
    assert any(
        r["physicalLocation"]["artifactLocation"]["uri"] == "verification/subjects/mutants.py"
        for r in result["relatedLocations"]
    )
    assert "replan replay " in result["message"]["text"]


# ---- drift and gaps (built from check results: no engine runs) -------------------------------


def _report(*checks: CheckResult, gaps: tuple[str, ...] = ()) -> VerifyReport:
    report = VerifyReport(DEFAULT_POLICY, "ci", "unused")
    report.checks = list(checks)
    report.gaps = list(gaps)
    return report


def test_a_stale_generated_file_points_at_the_declared_transition_it_lacks(
    tmp_path: Path, validator: jsonschema.Draft202012Validator
) -> None:
    from replan.spec.generator import generate_source
    from replan.verification.report.locations import generated_drift

    fresh = generate_source()
    stale = tmp_path / "_generated.py"  # generated before `pending --execute--> idle` was
    stale.write_text(fresh.replace("'pending --execute--> idle',", "'pending --execute--> x',"))
    drift = CheckResult(
        "drift",
        "failed",
        "controller/_generated.py is stale (run `replan generate`)",
        details={
            "generated_fresh": False,
            "readme_diagram_fresh": True,
            "generated": generated_drift(stale, fresh),
        },
    )
    log = sarif_log(_report(drift), root=ROOT)
    assert_valid(log, validator)
    (result,) = results_for(log, "drift/generated-code")
    assert line_text(result["locations"][0]).strip() == '| pending.to(idle, on="execute_step")'


def test_gaps_are_warnings_on_their_line_and_errors_under_strict(
    validator: jsonschema.Draft202012Validator,
) -> None:
    gaps = (
        "the campaign never fired pending --observe[older_than_latest]--> pending "
        "(the explorer reaches it)",
        "no engine stopped a run StepLimit",
    )
    policy = ROOT / "spec" / "policy.toml"
    warned = sarif_log(_report(gaps=gaps), policy, root=ROOT)
    assert_valid(warned, validator)
    transition, stop = warned["runs"][0]["results"]
    assert [transition["level"], stop["level"]] == ["warning", "warning"]
    assert line_text(transition["locations"][0]).strip() == (
        '(STAY, "older_than_latest", "remember_older"),'
    )
    assert line_text(stop["locations"][0]).startswith("max_steps")
    strict = sarif_log(_report(gaps=gaps), policy, strict=True, root=ROOT)
    assert {r["level"] for r in strict["runs"][0]["results"]} == {"error"}


def test_broken_loader_defaults_point_at_the_defaults(
    validator: jsonschema.Draft202012Validator,
) -> None:
    policy = CheckResult(
        "policy",
        "failed",
        "spec/policy.toml is valid, but the loader breaks policy-defaults",
        properties=["policy-defaults"],
    )
    log = sarif_log(_report(policy), root=ROOT)
    assert_valid(log, validator)
    (result,) = results_for(log, "policy-defaults")
    location = result["locations"][0]
    assert location["physicalLocation"]["artifactLocation"]["uri"] == "controller/policy_schema.py"
    assert line_text(location).startswith("DEFAULTS")


# ---- the schema and the option ------------------------------------------------------------


def test_the_schema_rejects_an_invalid_log(
    holds: tuple[int, Log, dict[str, Any]], validator: jsonschema.Draft202012Validator
) -> None:
    """The validation above can fail: a wrong version, an unknown level or a line 0
    are each rejected by the vendored schema."""
    valid = copy.deepcopy(holds[1])
    result = {
        "ruleId": "commit-equivalence",
        "message": {"text": "x"},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": "spec/policy.toml"},
                    "region": {"startLine": 1},
                }
            }
        ],
    }
    valid["runs"][0]["results"] = [result]
    assert not list(validator.iter_errors(valid))
    for path, value in (
        (("version",), "2.0.0"),
        (("runs", 0, "results", 0, "level"), "fatal"),
        (("runs", 0, "results", 0, "locations", 0, "physicalLocation", "region", "startLine"), 0),
    ):
        broken = copy.deepcopy(valid)
        target: Any = broken
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value
        assert list(validator.iter_errors(broken)), path


def test_the_vendored_schema_is_the_pinned_file() -> None:
    digest = hashlib.sha256(SCHEMA.read_bytes()).hexdigest()
    assert digest == SCHEMA_SHA256
    assert SCHEMA_SHA256 in (SCHEMA.parent / "README.md").read_text(encoding="utf-8")


def test_an_unwritable_sarif_path_exits_2_before_any_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", "--sarif", str(tmp_path), "--output", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"replan verify: error: --sarif {tmp_path}: is a directory, expected a file"]
    assert not (tmp_path / "verify.json").exists()


def test_a_weak_gate_without_its_policy_file_still_validates(
    validator: jsonschema.Draft202012Validator, tmp_path: Path
) -> None:
    """A policy path the locator cannot read (moved since the run) falls back to its
    first line rather than fail."""
    workflow = check_workflow(VerifySession(load_policy(WEAK_GATE), tmp_path))
    log = sarif_log(_report(workflow), tmp_path / "gone.toml", root=tmp_path)
    assert_valid(log, validator)
    (result,) = log["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 1
