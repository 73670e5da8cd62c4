"""``replan replay`` reproduces every counterexample the proofs write, and exits 1 on
it: an equivalence counterexample from the state it names (a bug needing the end of
the budget shows), a counterexample to induction from its state and its one step.
"Passes now" only when the same check holds again: on the project, where the
mutant's bug is absent, the same files replay clean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replan.cli import main
from replan.controller.policy import DEFAULT_POLICY, load_policy
from replan.verification.engines.prove.engine import prove_all, prove_equivalence
from replan.verification.engines.prove.results import counterexample_document
from replan.verification.subjects.mutants import MUTANTS

POLICIES = Path(__file__).parent / "policies"


def proof_counterexample(tmp_path: Path, mutant: str) -> Path:
    subject = MUTANTS[mutant]
    report = prove_all(DEFAULT_POLICY, model=subject.model, model_class=subject.model_class)
    assert not report.ok
    path = tmp_path / f"{mutant}.json"
    path.write_text(json.dumps(counterexample_document(report)), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("mutant", "kind", "prop"),
    [
        ("step-limit-off-by-one", "induction", "step-bound"),  # a state invariant
        ("equal-revision-accepted", "induction", "propose-revision-must-increase"),  # a call
        ("unknown-treated-as-passed", "commit-equivalence", "commit-equivalence"),
    ],
)
def test_a_proof_counterexample_still_fails_on_its_mutant_and_passes_on_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mutant: str, kind: str, prop: str
) -> None:
    path = proof_counterexample(tmp_path, mutant)
    document = json.loads(path.read_text())
    assert (document["check"], document["property"]) == (kind, prop)
    assert document["start"] is not None and len(document["steps"]) == 1
    assert main(["replay", str(path), "--mutant", mutant]) == 1
    broken = capsys.readouterr().out
    assert "from the state it saved" in broken
    assert "STILL FAILS on the controller" in broken and f"proof: {prop}: still fails" in broken
    assert main(["replay", str(path)]) == 0  # the project: the bug is not there
    fixed = capsys.readouterr().out
    assert "holds on the controller" in fixed and f"proof: {prop}: proved again" in fixed
    assert "passes now" in fixed


def test_an_equivalence_counterexample_starts_where_a_step_limit_bug_can_show(
    tmp_path: Path,
) -> None:
    """The saved state is the witness's, counters included: the step-limit mutant's
    commit runs one step past the budget only from a state near it."""
    subject = MUTANTS["step-limit-off-by-one"]
    report = prove_all(DEFAULT_POLICY, model=subject.model, model_class=subject.model_class)
    document = counterexample_document(report)
    start = document["start"]
    assert start["steps"] >= 1  # not the fresh run's 0
    limits = document["policy"]["limits"]
    assert start["steps"] <= limits["max_steps"]


def test_verifys_own_equivalence_counterexample_replays_as_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The policy is the bug (its commit needs less than its workflow): the project's
    controller commits where decide says Inspect, and replay says so, exit 1."""
    policy = load_policy(POLICIES / "commit-requires-parser-only.toml")
    result = prove_equivalence(policy)
    assert result.counterexample is not None
    path = tmp_path / "prove.json"
    document = dict(result.counterexample["replay"], property="commit-equivalence")
    path.write_text(json.dumps(document), encoding="utf-8")
    assert main(["replay", str(path)]) == 1
    output = capsys.readouterr().out
    assert "execute answered Executed, decide says Inspect" in output
    assert "passes now" not in output


def test_a_proof_failure_with_nothing_to_replay_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "vacuous.json"
    path.write_text(
        json.dumps(
            {
                "policy": json.loads(json.dumps(_policy_dict())),
                "property": "x",
                "source": "prove",
                "steps": [],
            }
        ),
        encoding="utf-8",
    )
    assert main(["replay", str(path)]) == 2
    assert "no state or step to replay" in capsys.readouterr().err


def _policy_dict() -> dict[str, object]:
    from replan.controller.policy import policy_to_dict

    return policy_to_dict(DEFAULT_POLICY)
