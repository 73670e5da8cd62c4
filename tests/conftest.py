"""Shared test fixtures: both implementations, and small record builders.

Every contract test takes the ``implementation`` fixture, so it runs once against the
generated ``controller.Controller`` and once against ``spec.reference.
ReferenceController`` (the declaration run by python-statemachine). Keep this file
generic: other test modules import the builders (``from conftest import obs, plan``).
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest

from replan.controller import Controller, EvidenceState, Observation, Plan
from replan.controller.policy import DEFAULT_POLICY
from replan.controller.run import Run
from replan.spec.properties import CONTRACT
from replan.spec.reference import ReferenceController
from replan.spec.vocabulary import Property
from replan.verification.core import harness
from replan.verification.core.domains import Domains
from replan.verification.core.subject import PROJECT, Subject

IMPLEMENTATIONS: dict[str, type[Run]] = {
    "generated": Controller,
    "reference": ReferenceController,
}

PASSED = EvidenceState.PASSED
FAILED = EvidenceState.FAILED
UNKNOWN = EvidenceState.UNKNOWN


@pytest.fixture(params=list(IMPLEMENTATIONS))
def implementation(request: pytest.FixtureRequest) -> type[Run]:
    """The controller class under test: called with an optional policy, it is one run."""
    chosen: type[Run] = IMPLEMENTATIONS[request.param]
    return chosen


def obs(key: str, version: int, state: EvidenceState, source: str = "fixture") -> Observation:
    """An observation (positional order of the record, with a default source)."""
    return Observation(key, version, state, source)


def plan(
    id: str,
    revision: int,
    evidence_revision: int,
    step: str = "inspect-parser",
    resource: str = "input-A",
) -> Plan:
    """A plan for the default policy's step and resource unless told otherwise."""
    return Plan(id, revision, evidence_revision, step, resource)


def changed(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    """The snapshot fields that differ between two snapshots."""
    return {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "graphviz: the test draws with Graphviz `dot` (skipped when it is absent)"
    )


#: The files that take a minute or more (each runs whole engines: verify, the mutation
#: matrix, the kill-and-restart matrix, a Ray cluster), longest first. pytest-xdist
#: (`--dist loadfile`) hands out files in collection order, so starting these first
#: keeps the last minutes from running one long file on one core.
LONG_FILES = (
    "test_first_policy.py",
    "test_verify.py",
    "test_bench.py",
    "test_mutate.py",
    "test_durable_crash.py",
    "test_campaign_mutants.py",
    "test_durable_crash_postgres.py",
    "test_scale.py",
    "test_review.py",
    "test_verify_catches_mutants.py",
    "test_explore.py",
    "test_approval.py",
    "test_budgets.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long files first (``LONG_FILES``; the order within a file is kept). Graphviz
    is optional (docs/getting-started.md): without `dot` its tests are skipped, each
    with the reason, and everything else runs."""
    rank = {name: number for number, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))
    if shutil.which("dot") is not None:
        return
    missing = pytest.mark.skip(
        reason="Graphviz `dot` is not installed (apt-get install graphviz): SVG/PNG skipped"
    )
    for item in items:
        if item.get_closest_marker("graphviz") is not None:
            item.add_marker(missing)


@pytest.fixture
def execute_never_executes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Subject:
    """The project checked against a contract whose ``execute-counts-one-step`` is
    tightened in a module of its own (no execute may answer Executed): what a user's
    edit of one property in its source gives every engine that reads the properties.
    The contract travels with the subject; nothing global is patched (the module is
    put on the path only so that it can be imported and its source read)."""
    module = tmp_path / "tightened_property.py"
    module.write_text(
        textwrap.dedent(
            """
            from typing import Any

            from replan.controller import ExecuteResult


            def execute_never_executes(answer: Any) -> bool:
                return answer is not ExecuteResult.EXECUTED
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    tightened = __import__("tightened_property").execute_never_executes
    original = CONTRACT["execute-counts-one-step"]
    replaced = Property(original.name, "call", original.rule, ("execute",), tightened, ("answer",))
    return PROJECT.with_contract(CONTRACT.replacing(replaced))


def small_domains() -> Domains:
    """15 calls per state (one source, one id, current evidence, declared steps): the
    translated engines' small shared domain (pan compiles in a few seconds)."""
    return Domains(
        "small",
        versions=1,
        ids=1,
        evidence_offsets=(0,),
        undeclared_steps=0,
        disallowed_resources=0,
        malformed_plan=False,
        malformed_observation=False,
        one_id_per_kind=False,
        derived_events=False,
    )


@pytest.fixture
def at_most_one_proposal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Subject:
    """The project checked against a contract whose state invariant ``proposal-bound``
    is tightened in a module of its own (at most one proposal): what a user's edit of
    one invariant gives the translated engines."""
    module = tmp_path / "tightened_invariant.py"
    module.write_text("def at_most_one_proposal(run):\n    return run.proposals <= 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    tightened = __import__("tightened_invariant").at_most_one_proposal
    original = CONTRACT["proposal-bound"]
    replaced = Property(original.name, "invariant", original.rule, None, tightened, ("run",))
    return PROJECT.with_contract(CONTRACT.replacing(replaced))


#: Broken bodies each translated engine (SPIN, the kernel) must find, with the
#: property it must name.
TRANSLATED_ENGINE_MUTANTS = [
    ("stopped-run-revived", "stopped-is-inert"),
    ("invalidation-keeps-pending", "observe-change-is-progress"),
    ("duplicates-not-counted", "duplicate-is-no-progress"),
]


def assert_reproduced_on_mutant(result: Any, mutant: str, broken: str) -> None:
    """A translated engine's search names ``broken`` in its one finding (reproduced,
    so no translation bug), and the finding's operations break that property on a
    fresh controller of ``mutant``."""
    from replan.verification.subjects.mutants import MUTANTS

    assert not result.translation_bugs, result.translation_bugs
    [finding] = result.findings
    assert broken in finding.property
    controller = MUTANTS[mutant].controller(DEFAULT_POLICY)
    failures: list[str] = []
    for operation in finding.operations:
        failures = harness.violated(harness.observe_call(DEFAULT_POLICY, controller, operation))
    assert finding.property in failures


def model_and_controller_disagree() -> Any:
    """A subject whose model is a broken mutant's and whose controller is the
    project's: a translated engine's violation on it must be a translation bug."""
    from replan.verification.subjects.mutants import MUTANTS

    broken = MUTANTS["stopped-run-revived"]
    return Subject(
        "model-and-controller-disagree",
        build_model=broken.build_model,
        bodies=broken.bodies,
        build_controller=lambda: PROJECT.controller,
    )
