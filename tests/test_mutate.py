"""`replan mutate`: mutants of the declaration, the bodies and the policy defaults,
made automatically and judged by the verify engines; equivalent mutants come with
z3's proof, survivors with their diff, and a weakened specification lets mutants
survive (so the score measures the properties, not the tool)."""

from __future__ import annotations

import contextlib
import io
import json
from collections import Counter
from pathlib import Path

import pytest

from replan.cli import main
from replan.controller import DEFAULT_POLICY
from replan.spec.declaration import Replanning
from replan.spec.model import extract
from replan.spec.properties import CONTRACT
from replan.verification.subjects.adequacy import Judge, Matrix, run_matrix
from replan.verification.subjects.mutation import OPERATORS, all_mutants, body_names

DECLARATION = extract(Replanning)
EVIDENCE = Path(__file__).resolve().parent.parent / "evidence" / "mutate.json"


def mutate(*arguments: str) -> tuple[int, dict[str, object]]:
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(io.StringIO()):
        code = main(["mutate", "--json", *arguments])
    return code, json.loads(stdout.getvalue())


def test_every_operator_makes_mutants_with_unique_ids() -> None:
    mutants = all_mutants(DECLARATION)
    assert len({m.id for m in mutants}) == len(mutants)
    assert set(Counter(m.operator for m in mutants)) == set(OPERATORS)
    assert all(m.diff and m.description for m in mutants)
    assert "check_observation" in body_names(DECLARATION)
    assert "__init__" not in body_names(DECLARATION)  # the field table: field-initial


@pytest.fixture(scope="module")
def full_matrix() -> Matrix:
    """`replan mutate`'s whole matrix on the default declaration and policy, judged
    once for this module (two processes)."""
    return run_matrix(DEFAULT_POLICY, workers=2)


def test_swapped_transitions_are_killed_or_proved_equivalent(full_matrix: Matrix) -> None:
    swapped = [v.to_json() for v in full_matrix.verdicts if v.mutant.operator == "swap-transitions"]
    statuses = Counter(m["status"] for m in swapped)
    assert statuses["survived"] == 0
    assert statuses["killed"] + statuses["equivalent"] == len(swapped) > 30
    equivalent = [m for m in swapped if m["status"] == "equivalent"]
    assert equivalent and all("z3" in m["reason"] for m in equivalent)
    # two rejections of a plan in either order reject it: equivalent; a rejection moved
    # before the malformed check reads a field that may not be there: killed
    names = {m["id"]: m["status"] for m in swapped}
    assert names["swap-transitions:11-12"] == "equivalent"
    assert names["swap-transitions:10-11"] == "killed"


def test_a_flipped_comparison_is_killed_naming_the_rule() -> None:
    code, matrix = mutate("--mutant", "flip-comparison:plan_outdated:8.0")
    assert code == 0
    [verdict] = matrix["mutants"]  # type: ignore[misc]
    assert verdict["status"] == "killed" and verdict["killed_by"] == "proofs"
    assert verdict["properties"] == ["propose-revision-must-increase"]
    assert verdict["description"] == (
        "`plan.revision <= self._plan_revision` -> `plan.revision < self._plan_revision`"
    )


def test_the_proofs_read_the_judges_encodings_as_their_own() -> None:
    """The judge hands the proofs the steps it encoded to compare a mutant with the
    original: the verdict of every property is the one a fresh encoding gives."""
    from replan.verification.engines.prove.engine import prove_invariants

    judge = Judge(DEFAULT_POLICY, DECLARATION, CONTRACT)
    mutant = next(
        m for m in all_mutants(DECLARATION) if m.id == "flip-comparison:plan_outdated:8.0"
    )
    found = judge.differences(mutant)
    assert found.events == ["propose"] and set(found.encoded.steps) == {"propose"}

    def verdicts(**encoded: object) -> list[tuple[str, bool, object]]:
        results = prove_invariants(
            DEFAULT_POLICY,
            mutant.model,
            mutant.model_class,
            events=found.events,
            initial=found.initial,
            contract=CONTRACT,
            **encoded,  # type: ignore[arg-type]
        )
        # the obligation that failed, not its witness: z3 may name a plan id otherwise
        return [(r.name, r.proved, (r.counterexample or {}).get("obligation")) for r in results]

    taken = verdicts(encoded=found.encoded)
    assert taken == verdicts()
    assert ("propose-revision-must-increase", False) in [(n, p) for n, p, _ in taken]


def test_an_obligation_z3_proved_once_is_not_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The judge keeps what z3 decided across mutants (their obligations are mostly
    the same terms): asked again, only what failed is solved again, and it still
    fails (a failure is never kept as proved)."""
    import replan.verification.engines.prove.engine as engine

    judge = Judge(DEFAULT_POLICY, DECLARATION, CONTRACT)
    mutant = next(
        m for m in all_mutants(DECLARATION) if m.id == "flip-comparison:plan_outdated:8.0"
    )
    solvers = 0
    made = engine.simplifying_solver

    def counted() -> object:
        nonlocal solvers
        solvers += 1
        return made()

    monkeypatch.setattr(engine, "simplifying_solver", counted)
    broken = ["propose-revision-must-increase"]
    assert judge.proofs(mutant, judge.differences(mutant)) == broken
    asked_first, solvers = solvers, 0
    assert judge.proofs(mutant, judge.differences(mutant)) == broken
    assert 0 < solvers < asked_first / 4, (solvers, asked_first)


def test_policy_defaults_are_mutated_and_killed_by_the_policy_check() -> None:
    code, matrix = mutate("--operator", "policy-default")
    assert code == 0 and matrix["generated"] == 7
    assert matrix["killed_by"] == {"policy": 7}


def test_without_the_rule_a_mutant_survives_with_its_diff_and_witness(tmp_path: Path) -> None:
    """Delete the property that says a revision must increase: the mutant that accepts
    an equal revision survives every engine, and the report shows why. The weaker
    contract is passed to the matrix, as a user's own test would; nothing is patched."""
    from replan.spec.declaration import Replanning
    from replan.spec.model import extract
    from replan.spec.properties import CONTRACT
    from replan.verification.subjects.adequacy import run_matrix
    from replan.verification.subjects.mutation import all_mutants

    trimmed = CONTRACT.without("propose-revision-must-increase")
    [mutant] = [
        m for m in all_mutants(extract(Replanning)) if m.id == "flip-comparison:plan_outdated:8.0"
    ]
    result = run_matrix(DEFAULT_POLICY, [mutant], contract=trimmed)
    (tmp_path / "m.json").write_text(json.dumps(result.to_json()))
    code, matrix = (0 if result.ok else 1), result.to_json()
    assert code == 1
    [verdict] = matrix["mutants"]  # type: ignore[misc]
    assert verdict["status"] == "survived"
    assert "-    return plan.revision <= self._plan_revision" in verdict["diff"]
    assert "+    return plan.revision < self._plan_revision" in verdict["diff"]
    assert "differs from the original: propose" in verdict["reason"]
    assert json.loads((tmp_path / "m.json").read_text())["survived"] == 1


def test_an_untouched_copy_of_a_body_is_equivalent() -> None:
    """The equivalence check is a real proof: a mutant whose change cannot matter
    (the default of a version lookup no version ever reaches) is proved equivalent."""
    judge = Judge(DEFAULT_POLICY, DECLARATION, CONTRACT)
    mutant = next(
        m for m in all_mutants(DECLARATION) if m.id == "shift-integer:older_than_latest:17.1"
    )
    assert judge.judge(mutant).status == "equivalent"


def test_the_committed_matrix_kills_every_non_equivalent_mutant() -> None:
    """evidence/mutate.json is `replan mutate` on the default declaration and policy:
    every mutant the generator makes today is in it, and none survived."""
    matrix = json.loads(EVIDENCE.read_text(encoding="utf-8"))
    assert {m["id"] for m in matrix["mutants"]} == {m.id for m in all_mutants(DECLARATION)}
    assert matrix["survived"] == 0 and matrix["score"] == 1.0
    assert matrix["killed"] + matrix["equivalent"] == matrix["generated"]


def test_the_full_matrix_runs_and_kills_every_non_equivalent_mutant(full_matrix: Matrix) -> None:
    matrix = full_matrix
    assert matrix.count("survived") == 0, "\n".join(matrix.lines())
    committed = json.loads(EVIDENCE.read_text(encoding="utf-8"))
    assert matrix.count("killed") == committed["killed"]
    assert matrix.count("equivalent") == committed["equivalent"]
