"""``--against`` names every difference between two policies: a changed limit (with
both values), a resource, an approval, a tool argument, the workflow's keys, an order,
as well as keys, steps and prerequisites. Each edit below changes one field of the
policy file's declaration (``controller.policy_schema.DOCUMENT``), so a field added to
the file without a name in ``policy_changes`` fails here."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replan.controller.policy import DEFAULT_POLICY, load_policy, policy_from_dict, policy_to_dict
from replan.controller.policy_schema import DOCUMENT
from replan.verification.engines.prove.engine import policy_changes
from replan.verification.pipeline.checks.against import POLICY_CHANGE_LINES, check_against
from replan.verification.pipeline.session import VerifySession

Document = dict[str, Any]


def base() -> Document:
    """The default policy with every optional field present, so each can change."""
    document = policy_to_dict(DEFAULT_POLICY)
    document["limits"].update(max_tokens=1000, max_cost=500, max_wall_ms=60_000, currency="USD")
    document["resources"]["allowed"] = ["input-A", "input-B"]
    for step in document["steps"]:
        step["resource_argument"] = "path"
    return document


def _limit(name: str, value: Any) -> Callable[[Document], None]:
    def edit(document: Document) -> None:
        document["limits"][name] = value

    return edit


def _step_field(name: str, value: Any) -> Callable[[Document], None]:
    def edit(document: Document) -> None:
        document["steps"][2][name] = value

    return edit


#: One edit per field of the file (and per order that can change).
EDITS: dict[str, Callable[[Document], None]] = {
    "limits.max_steps": _limit("max_steps", 3),
    "limits.max_proposals": _limit("max_proposals", 5),
    "limits.no_progress_limit": _limit("no_progress_limit", 7),
    "limits.count_duplicate_deliveries": _limit("count_duplicate_deliveries", False),
    "limits.max_tokens": _limit("max_tokens", 2000),
    "limits.max_cost": _limit("max_cost", 900),
    "limits.max_wall_ms": _limit("max_wall_ms", 1),
    "limits.currency": _limit("currency", "EUR"),
    "evidence.keys": lambda d: d["evidence"]["keys"].append("schema"),
    "resources.allowed": lambda d: d["resources"]["allowed"].remove("input-B"),
    "evidence.per_resource": lambda d: d["evidence"].update(per_resource=["schema"]),
    "resources.open": lambda d: d["resources"].update(open=["slot-1"]),
    "steps.name": lambda d: d["steps"][0].update(name="inspect-parsers"),
    "steps.requires": _step_field("requires", ["parser"]),
    "steps.completes_run": lambda d: d["steps"][0].update(completes_run=True),
    "steps.needs_approval": _step_field("needs_approval", True),
    "steps.resource_argument": _step_field("resource_argument", "file"),
    "workflow.ready_when_passed": lambda d: (
        d["workflow"].update(ready_when_passed=["parser"]),
        d["steps"][2].update(requires=["parser"]),
    ),
    "order of evidence.keys": lambda d: d["evidence"]["keys"].reverse(),
    "order of resources.allowed": lambda d: d["resources"]["allowed"].reverse(),
    "order of steps": lambda d: d["steps"].reverse(),
}


def test_every_field_of_the_policy_file_has_an_edit_here() -> None:
    fields = {f"{table.name}.{field.name}" for table in DOCUMENT.tables for field in table.fields}
    assert fields <= set(EDITS)


@pytest.mark.parametrize("edit", list(EDITS))
def test_every_difference_between_two_policies_is_named(edit: str) -> None:
    old = policy_from_dict(base())
    document = copy.deepcopy(base())
    EDITS[edit](document)
    new = policy_from_dict(document)
    assert policy_to_dict(new) != policy_to_dict(old)
    named = {key: value for key, value in policy_changes(old, new).items() if value}
    assert named, f"{edit}: no difference named"


def test_a_changed_limit_is_named_with_both_values() -> None:
    document = policy_to_dict(DEFAULT_POLICY)
    document["limits"]["max_steps"] = 3
    del document["limits"]["max_proposals"]  # the default follows: 2 * max_steps
    document["limits"]["max_tokens"] = 1000
    changes = policy_changes(DEFAULT_POLICY, policy_from_dict(document))
    assert changes["limits_changed"] == [
        "max_steps: 4 -> 3",
        "max_proposals: 8 -> 6",
        "max_tokens: none -> 1000",
    ]


def test_a_changed_approval_argument_resource_and_workflow_are_named() -> None:
    old = policy_from_dict(base())
    document = base()
    document["steps"][2].update(needs_approval=True, resource_argument="file")
    document["resources"]["allowed"].append("input-C")
    new = policy_from_dict(document)
    changes = policy_changes(old, new)
    assert changes["approval_changed"] == ["commit-import: no approval -> needs approval"]
    assert changes["resource_argument_changed"] == ["commit-import: path -> file"]
    assert changes["resources_added"] == ["input-C"]


def test_every_kind_of_change_has_a_line_in_the_against_check() -> None:
    kinds = set(policy_changes(DEFAULT_POLICY, DEFAULT_POLICY))
    assert kinds == {key for key, _ in POLICY_CHANGE_LINES}


@pytest.mark.slow  # the explorer on both versions: half a minute
def test_the_against_check_names_a_changed_limit(tmp_path: Path) -> None:
    """The issue's case, on a small policy: only max_steps changes, and the check's
    lines (verify's report, the review page) name it with both values."""
    budget = Path(__file__).parent / "policies" / "budget.toml"
    old = tmp_path / "old.toml"
    old.write_text(budget.read_text().replace("max_steps = 2", "max_steps = 1"))
    session = VerifySession(load_policy(budget), tmp_path / "out")
    result = check_against(session, str(old))
    assert result.details["policy_changes"]["limits_changed"] == ["max_steps: 1 -> 2"]
    assert "limits changed: max_steps: 1 -> 2" in session.report.against_lines
    assert "limits changed: max_steps: 1 -> 2" in result.summary
