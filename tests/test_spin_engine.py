"""``replan explore --engine spin``: the declaration, bodies, policy and properties
translated to Promela (``verification/translate/promela.py``) and searched by SPIN
(``verification/engines/spin/engine.py``)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import (
    TRANSLATED_ENGINE_MUTANTS,
    assert_reproduced_on_mutant,
    model_and_controller_disagree,
    small_domains,
)

from replan.cli import main
from replan.controller.policy import DEFAULT_POLICY
from replan.verification.core.domains import spin_domains
from replan.verification.core.subject import PROJECT, Subject
from replan.verification.engines.explore.engine import explore
from replan.verification.engines.spin.engine import explore_spin
from replan.verification.subjects.mutants import MUTANTS
from replan.verification.translate.promela import translate

ROOT = Path(__file__).resolve().parent.parent
SPIN_MISSING = shutil.which("spin") is None or shutil.which("gcc") is None
if SPIN_MISSING and os.environ.get("CI") == "true":  # .ci/run installs them
    pytest.fail("spin and gcc are needed (CI=true: the SPIN engine's tests must run)")
pytestmark = pytest.mark.skipif(
    SPIN_MISSING, reason="SPIN is a Debian package: apt-get install -y spin gcc"
)


def test_spin_counts_equal_the_python_explorers_on_spins_domains(tmp_path: Path) -> None:
    """The same states on SPIN's (V, K) = (1, 1) domains (63,903 with the hand-written
    anchor too); SPIN counts one transition more, into the initial state. The Python
    explorer's figures are its committed run (``evidence/explore-spin-1-1.json``),
    which the kernel reproduces (tests/test_explore_cli.py) and the explorer equals
    the kernel there (tests/test_kernel_engine.py): one search of (1, 1) per engine."""
    spin = explore_spin(DEFAULT_POLICY, spin_domains(1, 1), PROJECT, workdir=tmp_path)
    python = json.loads((ROOT / "evidence" / "explore-spin-1-1.json").read_text())
    assert python["engine"] == "python" and python["domains"]["name"] == "spin"
    assert spin.ok and spin.complete and python["ok"]
    assert spin.details["storage"] == "exact"
    assert spin.states == python["states"] == 63_903
    assert spin.transitions == python["transitions"] + 1
    assert spin.details["unchecked"].keys() == {"trace-one-record-per-call"}


def test_every_storage_gives_the_same_count_on_a_small_domain(tmp_path: Path) -> None:
    counts = {
        storage: explore_spin(
            DEFAULT_POLICY, small_domains(), PROJECT, storage=storage, workdir=tmp_path / storage
        ).states
        for storage in ("exact", "collapse", "bitstate")
    }
    python = explore(DEFAULT_POLICY, small_domains())
    assert set(counts.values()) == {python.states}


@pytest.mark.parametrize(("mutant", "broken"), TRANSLATED_ENGINE_MUTANTS)
def test_spin_finds_a_broken_body_and_the_controller_reproduces_it(
    tmp_path: Path, mutant: str, broken: str
) -> None:
    """A deliberately broken body: SPIN's trail, replayed call by call on that
    mutant's generated controller, breaks the property SPIN names."""
    result = explore_spin(DEFAULT_POLICY, small_domains(), MUTANTS[mutant], workdir=tmp_path)
    assert not result.ok
    assert_reproduced_on_mutant(result, mutant, broken)


def test_a_trail_the_controller_does_not_reproduce_is_a_translation_bug(tmp_path: Path) -> None:
    """The translated model says one thing, the generated controller another (here:
    the model is the broken mutant's, the controller the project's): SPIN's
    assertion is reported as a translation bug, never as a property failure."""
    disagreeing = model_and_controller_disagree()
    result = explore_spin(DEFAULT_POLICY, small_domains(), disagreeing, workdir=tmp_path)
    assert result.translation_bugs and not result.ok
    assert not result.findings
    assert any("TRANSLATION BUG" in line for line in result.lines())


def test_a_changed_property_is_what_spin_enforces(
    execute_never_executes: Subject, tmp_path: Path
) -> None:
    """Tighten one property in its source (no execute may answer Executed) and
    nothing else: the Promela model asserts the new body, SPIN reports it on the
    unchanged controller, and the replay confirms it."""
    result = explore_spin(
        DEFAULT_POLICY, small_domains(), execute_never_executes, workdir=tmp_path / "pan"
    )
    assert not result.translation_bugs
    assert [finding.property for finding in result.findings] == ["execute-counts-one-step"]


def test_a_changed_state_invariant_is_what_spin_enforces(
    at_most_one_proposal: Subject, tmp_path: Path
) -> None:
    """State invariants are asserted after the calls that change the state: tighten
    one (at most one proposal) and SPIN reports it by name after the second
    proposal, reproduced on the unchanged controller."""
    result = explore_spin(
        DEFAULT_POLICY, small_domains(), at_most_one_proposal, workdir=tmp_path / "pan"
    )
    assert not result.translation_bugs
    [finding] = result.findings
    assert finding.property == "proposal-bound"
    operations = finding.operations
    assert [operation.op for operation in operations].count("propose") == 2


def test_an_int_is_range_checked_before_it_is_stored() -> None:
    """A counter is computed into an int temp and checked against the short range
    before it is stored (storing into a short would wrap silently)."""
    model = translate(DEFAULT_POLICY, small_domains(), PROJECT.model)
    statements = [line.strip().rstrip(";") for line in model.text.splitlines()]
    stores = [line for line in statements if line.startswith("proposals = ")]
    assert stores
    for store in stores:
        temp = store.split(" = ", 1)[1]
        assert temp.startswith("t"), store
        assert f"int_range = ({temp} >= -32768 && {temp} <= 32767)" in statements


def test_the_model_names_its_source_and_every_property() -> None:
    model = translate(DEFAULT_POLICY, small_domains(), PROJECT.model)
    header = model.text.split("*/")[0]
    assert PROJECT.model.digest in header and "do not edit" in header
    for name in model.checked:
        assert f"p_{name.replace('-', '_')} = " in model.text
    assert len(model.calls) == 15 and model.text.count(":: d_step") == 15


def test_the_cli_saves_a_replayable_counterexample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = ["explore", "--engine", "spin", "--spin-domains", "--json"]
    code = main([*arguments, "--mutant", "stopped-run-revived", "-o", str(tmp_path)])
    document = json.loads(capsys.readouterr().out)
    assert code == 1 and len(document["violations"]) == 1 and not document["translation_bugs"]
    saved = document["saved"]
    assert len(saved) == 1
    recorded = json.loads(Path(saved[0]).read_text())
    assert recorded["implementation"] == "replan.verification.subjects.mutants:stopped_run_revived"
    assert main(["replay", saved[0]]) == 1  # still fails on the mutant it names
    assert main(["replay", saved[0], "--implementation", "replan.controller:Controller"]) == 0


def test_a_memory_limit_falls_back_to_a_smaller_storage(tmp_path: Path) -> None:
    """With pan's memory capped below what exact storage needs, the search is
    repeated with a smaller storage and says so; the count still matches here."""
    result = explore_spin(DEFAULT_POLICY, small_domains(), PROJECT, memory_mb=4, workdir=tmp_path)
    storage = result.details["storage"]
    assert storage != "exact"
    assert any("ran out of --memory 4 MB" in note for note in result.notes)
    assert result.states == explore(DEFAULT_POLICY, small_domains()).states
    assert result.to_json()["exact_counts"] == (storage == "collapse")
