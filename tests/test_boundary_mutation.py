"""`replan mutate` over the effect boundary: mutants of the functions that decide at
the boundary, by the core operator kinds and the boundary's own, each judged by the
boundary check (killed naming the rule it breaks), counted per file."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
from collections import Counter

import pytest

from replan.cli import main
from replan.controller import DEFAULT_POLICY
from replan.verification.boundary.adequacy import BoundaryJudge
from replan.verification.boundary.mutation import (
    BOUNDARY_OPERATORS,
    EQUIVALENT_RULES,
    SCOPE,
    BoundaryMutant,
    boundary_mutants,
)


@pytest.fixture(scope="module")
def mutants() -> dict[str, BoundaryMutant]:
    return {m.id: m for m in boundary_mutants()}


@pytest.fixture(scope="module")
def judge() -> BoundaryJudge:
    logging.getLogger("agent_framework").setLevel(logging.CRITICAL)
    return BoundaryJudge(DEFAULT_POLICY)


def test_every_file_and_operator_makes_mutants_with_unique_ids(
    mutants: dict[str, BoundaryMutant],
) -> None:
    found = list(mutants.values())
    assert set(Counter(m.file for m in found)) == set(SCOPE)
    assert set(BOUNDARY_OPERATORS) <= {m.operator for m in found}
    assert all(m.diff and m.description for m in found)
    for where, pattern, _reason in EQUIVALENT_RULES:  # every rule still names a mutant
        assert any(
            f"{m.file}:{m.function}" == where and re.search(pattern, m.description) for m in found
        ), (where, pattern)


@pytest.mark.parametrize(
    ("mutant_id", "rule"),
    [
        # the intent is not written: the effect runs with nothing to say it was started
        ("controller/journal.py:Journal.claim:skip-write:1001", "in-doubt-needs-the-owner"),
        # the digest leaves the resource out: a completed call's receipt answers a
        # request of it on another resource
        (
            "controller/executor.py:Operation.__init__:drop-digest-field:6502",
            "effect-matches-what-was-accepted",
        ),
        # the run log's range read one short: a restore through a snapshot refuses
        (
            "controller/durable/log.py:SqliteRunLog._read_entries:range-one-short:180",
            "restore-is-exact-or-refuses",
        ),
    ],
)
def test_the_boundarys_own_operators_are_killed_naming_the_rule(
    mutants: dict[str, BoundaryMutant], judge: BoundaryJudge, mutant_id: str, rule: str
) -> None:
    verdict = judge.judge(mutants[mutant_id])
    assert (verdict.status, verdict.property) == ("killed", rule), verdict.reason


def test_the_command_judges_a_boundary_mutant_and_counts_it_per_file() -> None:
    mutant_id = "controller/executor.py:_decide:flip-comparison:590000"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(io.StringIO()):
        code = main(["mutate", "--json", "--scope", "boundary", "--mutant", mutant_id])
    document = json.loads(stdout.getvalue())
    assert code == 0
    boundary = document["boundary"]
    assert (boundary["generated"], boundary["killed"], boundary["survived"]) == (1, 1, 0)
    assert boundary["by_file"]["controller/executor.py"]["killed"] == 1
    assert document["generated"] == 0  # the controller's mutants were not asked for
