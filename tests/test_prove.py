"""z3 proofs: the commit equivalence, the inductive invariants, broken controllers and
policies caught with readable counterexamples, and ``replan prove``'s contract."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from replan.cli import main
from replan.controller import DEFAULT_POLICY, Controller, EvidenceState
from replan.controller.policy import Policy, policy_from_dict, policy_to_dict, policy_to_toml
from replan.controller.records import ExecuteResult
from replan.controller.run import Run
from replan.spec.declaration import Replanning
from replan.spec.model import MachineModel, extract
from replan.spec.properties import CONTRACT
from replan.verification.core.harness import apply
from replan.verification.engines.prove.engine import (
    NOT_PASSED,
    _check,
    decision_difference,
    equivalence_operations,
    policy_changes,
    prove_all,
    prove_equivalence,
    prove_invariants,
)
from replan.verification.subjects import mutants
from replan.verification.translate.symbolic import (
    TranslationError,
    Universe,
    check_abstraction,
    encode_event,
)

DECLARATION = extract(Replanning)

#: The six invariants the issue requires at least, by their contract names.
REQUIRED = (
    "commit-grounded",
    "step-bound",
    "proposal-bound",
    "pending-current",
    "stop-absorbing",
    "revision-honest",
)


def policy(requires: list[str], workflow: list[str], keys: list[str] | None = None) -> Policy:
    keys = keys or ["parser", "access"]
    return policy_from_dict(
        {
            "evidence": {"keys": keys},
            "resources": {"allowed": ["input-A"]},
            "steps": [
                {"name": "inspect-parser"},
                {"name": "commit-import", "requires": requires, "completes_run": True},
            ],
            "workflow": {"ready_when_passed": workflow},
        }
    )


ONLY_PARSER = policy(["parser"], ["parser", "access"])


def test_default_policy_proves_the_equivalence_and_every_invariant() -> None:
    report = prove_all(DEFAULT_POLICY)
    proved = {r.name for r in report.results if r.proved}
    assert report.ok, report.text()
    assert "commit-equivalence" in proved
    assert set(REQUIRED) <= proved
    assert {p.name for p in CONTRACT if p.kind != "policy"} <= proved
    assert all(r.seconds > 0 for r in report.results)


def test_commit_step_requiring_less_than_the_workflow_is_a_minimal_counterexample() -> None:
    result = prove_equivalence(ONLY_PARSER)
    assert not result.proved
    assert result.message.splitlines()[0] == (
        "parser=Passed, access=Unknown: controller commits, workflow says Inspect"
    )
    counterexample = result.counterexample
    assert counterexample is not None
    assert counterexample["assignment"] == {"parser": "Passed", "access": "Unknown"}
    assert counterexample["pattern"] == {"parser": "Passed", "access": NOT_PASSED}
    assert counterexample["controller"] == "commits"
    # the saved episode really makes the generated controller commit
    replay = counterexample["replay"]
    assert replay["property"] == "commit-equivalence"
    assert replay["steps"][-1]["result"] == "Executed"


def test_commit_step_requiring_more_than_the_workflow_refuses_where_workflow_is_ready() -> None:
    result = prove_equivalence(policy(["parser", "access"], ["parser"]))
    assert not result.proved
    assert result.counterexample is not None
    assert result.counterexample["assignment"] == {"parser": "Passed", "access": "Unknown"}
    assert result.counterexample["controller"] == "refuses"
    assert result.counterexample["workflow"] == "ReadyToCommit"
    assert result.counterexample["pattern"]["access"] == NOT_PASSED


def test_counterexample_is_minimal_among_many_keys() -> None:
    keys = [f"k{i}" for i in range(12)]
    result = prove_equivalence(policy(keys[:-1], keys, keys))
    assert not result.proved and result.counterexample is not None
    assignment = result.counterexample["assignment"]
    assert [k for k, v in assignment.items() if v != "Passed"] == ["k11"]


def test_equivalence_holds_for_three_hundred_prerequisites() -> None:
    keys = [f"key{i:03}" for i in range(300)]
    assert prove_equivalence(policy(keys, keys, keys)).proved


def test_equivalence_holds_for_every_commit_step_of_a_policy_with_two() -> None:
    two = policy_from_dict(
        {
            "evidence": {"keys": ["a", "b", "c"]},
            "resources": {"allowed": ["r"]},
            "steps": [
                {"name": "ship", "requires": ["a", "b"], "completes_run": True},
                {"name": "ship-all", "requires": ["a", "b", "c"], "completes_run": True},
            ],
            "workflow": {"ready_when_passed": ["a", "b"]},
        }
    )
    result = prove_equivalence(two)
    assert not result.proved and result.counterexample is not None
    assert result.counterexample["step"] == "ship-all"
    assert result.counterexample["assignment"]["c"] != "Passed"


def test_unknown_treated_as_passed_gate_is_caught_by_equivalence_and_commit_grounded() -> None:
    broken = mutants.UnknownTreatedAsPassed
    result = prove_equivalence(DEFAULT_POLICY, DECLARATION, broken)
    assert not result.proved and result.counterexample is not None
    assert "Unknown" in result.counterexample["assignment"].values()
    assert result.counterexample["controller"] == "commits"
    assert result.counterexample["replay"]["steps"][-1]["result"] == "Executed"
    grounded = next(
        r
        for r in prove_invariants(DEFAULT_POLICY, DECLARATION, broken)
        if r.name == "commit-grounded"
    )
    assert not grounded.proved
    assert grounded.counterexample is not None
    assert grounded.counterexample["answer"] == "Executed"
    assert "Unknown" in grounded.counterexample["before"]["evidence"].values()


def test_step_limit_off_by_one_is_caught_with_a_counterexample_to_induction() -> None:
    results = prove_invariants(DEFAULT_POLICY, DECLARATION, mutants.StepLimitOffByOne)
    bound = next(r for r in results if r.name == "step-bound")
    assert not bound.proved
    cti = bound.counterexample
    assert cti is not None
    assert cti["event"] == "execute" and cti["answer"] == "Executed"
    assert cti["before"]["steps"] == cti["limits"]["max_steps"]
    assert cti["after"]["steps"] == cti["limits"]["max_steps"] + 1
    assert "counterexample to induction" in bound.message
    assert [r.name for r in results if not r.proved] == ["step-bound", "execute-step-limit-stops"]


def _stale_check_removed() -> MachineModel:
    return mutants.without(DECLARATION, lambda t: t.cond == "evidence_stale")  # type: ignore[attr-defined]


#: mutant name -> (declaration, run class, a property the proofs must refute)
MUTANT_PROOFS: dict[str, tuple[Callable[[], MachineModel], type[Run], str]] = {
    "stale-plan-check-removed": (_stale_check_removed, Run, "propose-evidence-must-be-current"),
    "renumbered-unknown-is-progress": (
        lambda: DECLARATION,
        mutants.RenumberedIsProgress,
        "observe-renumbered-is-no-progress",
    ),
    "step-limit-off-by-one": (
        lambda: DECLARATION,
        mutants.StepLimitOffByOne,
        "execute-step-limit-stops",
    ),
    "replay-counts-a-step": (
        lambda: DECLARATION,
        mutants.ReplayCountsStep,
        "execute-replay-is-inert",
    ),
    "stopped-run-revived": (lambda: DECLARATION, mutants.StoppedRunRevived, "stop-absorbing"),
    "older-overwrites-newer": (
        lambda: DECLARATION,
        mutants.OlderOverwritesNewer,
        "observe-older-never-overwrites",
    ),
    "unknown-treated-as-passed": (
        lambda: DECLARATION,
        mutants.UnknownTreatedAsPassed,
        "commit-grounded",
    ),
}


@pytest.mark.parametrize("name", sorted(MUTANT_PROOFS))
def test_every_mutant_is_refuted_by_a_proof(name: str) -> None:
    assert name in mutants.MUTANTS
    build, model_class, expected = MUTANT_PROOFS[name]
    report = prove_all(DEFAULT_POLICY, build(), model_class)
    failed = {r.name for r in report.failures}
    assert expected in failed, report.text()
    assert all(r.counterexample for r in report.failures)


class UnsupportedGuard(Run):
    __slots__ = ()

    def steps_exhausted(self) -> bool:
        """Uses something the translator does not model."""
        return len(self._completed) >= self.policy.max_steps


class NewField(Run):
    __slots__ = ("_budget",)


def test_a_guard_body_the_translator_does_not_understand_fails_loudly_naming_it() -> None:
    universe = Universe(DEFAULT_POLICY, DECLARATION)
    with pytest.raises(TranslationError, match="steps_exhausted"):
        encode_event(universe, "execute", UnsupportedGuard)


def test_a_run_field_without_an_abstraction_fails_loudly() -> None:
    with pytest.raises(TranslationError, match="_budget"):
        check_abstraction(NewField)


def test_vacuous_premises_are_a_failure_not_a_proof() -> None:
    import z3

    universe = Universe(DEFAULT_POLICY, DECLARATION)
    x = z3.Int("x")
    result = _check(
        "toy", "invariant", "x > 0", [("toy", [x > 1, x < 0], x > 0, None, None)], universe
    )
    assert not result.proved and "vacuous" in result.message


def test_decision_difference_finds_the_evidence_where_two_policies_disagree() -> None:
    difference = decision_difference(DEFAULT_POLICY, ONLY_PARSER)
    assert difference is not None
    assert difference.step == "commit-import"
    assert difference.assignment["parser"] == "Passed"
    assert difference.assignment["access"] != "Passed"
    assert (difference.old_commits, difference.new_commits) == (False, True)
    # the witness is real: run both controllers on it
    for chosen, commits in ((DEFAULT_POLICY, False), (ONLY_PARSER, True)):
        controller = Controller(chosen)
        operations = equivalence_operations(chosen, difference.step, difference.assignment)
        results = [apply(controller, op) for op in operations]
        assert (results[-1] == ExecuteResult.EXECUTED) is commits


def test_decision_difference_is_none_when_only_limits_change() -> None:
    document = policy_to_dict(DEFAULT_POLICY)
    document["limits"]["max_steps"] = 9
    document["limits"]["max_proposals"] = 20
    assert decision_difference(DEFAULT_POLICY, policy_from_dict(document)) is None


def test_a_step_that_completes_the_run_under_one_policy_only_is_a_change_not_a_witness() -> None:
    document = policy_to_dict(DEFAULT_POLICY)
    document["steps"].append({"name": "publish", "requires": [], "completes_run": True})
    document["steps"][0]["completes_run"] = True  # inspect-parser, in both policies
    new = policy_from_dict(document)
    changes = policy_changes(DEFAULT_POLICY, new)
    assert changes["steps_added"] == ["publish"]
    assert changes["completes_only_new"] == ["inspect-parser"]
    # compared over commit-import alone, which both let complete the run
    assert decision_difference(DEFAULT_POLICY, new) is None


def test_a_witness_names_only_keys_both_policies_declare() -> None:
    """A key of one policy only is first taken as never observed in that policy's run
    (Unknown, as the contract reads a key never observed), then in any state: the
    witness assigns the shared keys and names the others apart, with their state."""
    document = policy_to_dict(DEFAULT_POLICY)
    document["evidence"]["keys"] = ["parser", "owner"]
    document["steps"][2]["requires"] = ["parser"]
    document["workflow"]["ready_when_passed"] = ["parser"]
    new = policy_from_dict(document)
    changes = policy_changes(DEFAULT_POLICY, new)
    assert (changes["keys_added"], changes["keys_removed"]) == (["owner"], ["access"])
    difference = decision_difference(DEFAULT_POLICY, new)
    # access, never observed, keeps the old gate shut; the new one opens on parser
    assert difference is not None and difference.assignment == {"parser": "Passed"}
    assert (difference.old_commits, difference.new_commits) == (False, True)
    assert difference.own == {"access": "Unknown", "owner": "Unknown"}
    assert "(of one policy only: access=Unknown, owner=Unknown)" in difference.text()
    document["steps"][2]["requires"] = ["parser", "owner"]
    document["workflow"]["ready_when_passed"] = ["parser", "owner"]
    stricter = policy_from_dict(document)
    # each gate waits on a key of its own policy: never observed, both stay shut; in
    # some state of those keys they differ (one Passed, the other not)
    other = decision_difference(DEFAULT_POLICY, stricter)
    assert other is not None and other.assignment == {"parser": "Passed"}
    assert other.old_commits != other.new_commits
    passed = {key for key, state in other.own.items() if state == "Passed"}
    assert passed == ({"access"} if other.old_commits else {"owner"})
    assert decision_difference(stricter, stricter) is None
    document["steps"][2]["requires"] = []
    document["workflow"]["ready_when_passed"] = []
    looser = policy_from_dict(document)
    witness = decision_difference(DEFAULT_POLICY, looser)
    assert witness is not None and set(witness.assignment) == {"parser"}
    assert witness.new_commits and not witness.old_commits


# ---- the command line ----------------------------------------------------------------


def test_replan_prove_json_exits_0_listing_each_property_with_its_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["prove", "--json", "--output", str(tmp_path)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["proved"] is True
    statuses = {p["name"]: p["status"] for p in document["properties"]}
    assert statuses["commit-equivalence"] == "proved"
    assert all(statuses[name] == "proved" for name in REQUIRED)
    assert all(p["milliseconds"] >= 0 for p in document["properties"])
    assert json.loads((tmp_path / "prove.json").read_text())["proved"] is True
    assert not (tmp_path / "prove-counterexample.json").exists()


def test_replan_prove_exits_1_with_a_readable_and_saved_counterexample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "only-parser.toml"
    path.write_text(policy_to_toml(ONLY_PARSER), encoding="utf-8")
    assert main(["prove", "--policy", str(path), "--output", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "parser=Passed, access=Unknown: controller commits, workflow says Inspect" in out
    assert f"parser=Passed, access={NOT_PASSED}" in out
    saved = json.loads((tmp_path / "prove-counterexample.json").read_text())
    assert saved["property"] == "commit-equivalence"
    assert saved["pattern"] == {"parser": "Passed", "access": NOT_PASSED}
    # the witness's state, the commit plan pending, and its execute
    assert [s["op"] for s in saved["steps"]] == ["execute"]
    assert saved["start"]["pending"]["step"] == "commit-import"

    assert main(["prove", "--policy", str(path), "--json", "--output", str(tmp_path)]) == 1
    document = json.loads(capsys.readouterr().out)
    failed = [p for p in document["properties"] if p["status"] == "failed"]
    assert [p["name"] for p in failed] == ["commit-equivalence"]
    assert failed[0]["counterexample"]["pattern"] == {"parser": "Passed", "access": NOT_PASSED}


def test_replan_prove_bad_policy_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[evidence]\nkeys = ["a"]\n', encoding="utf-8")
    assert main(["prove", "--policy", str(path), "--output", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "bad.toml" in error
    assert not (tmp_path / "prove.json").exists()


def test_the_counterexample_evidence_states_are_the_contracts() -> None:
    # the enumeration the proofs use is exactly EvidenceState's members
    from replan.verification.translate.symbolic import EVIDENCE

    assert set(EVIDENCE.members) == {str(s) for s in EvidenceState}


def test_the_saved_equivalence_counterexample_replays_from_its_state(tmp_path: Path) -> None:
    from replan.verification.core.harness import load_counterexample
    from replan.verification.engines.prove.concrete import start_state

    result = prove_equivalence(ONLY_PARSER)
    assert result.counterexample is not None
    path = tmp_path / "counterexample.json"
    path.write_text(json.dumps(result.counterexample["replay"]), encoding="utf-8")
    loaded_policy, name, operations, recorded = load_counterexample(path)
    assert (loaded_policy, name) == (ONLY_PARSER, "commit-equivalence")
    controller = Controller(loaded_policy)
    controller._import_state(start_state(result.counterexample["replay"]["start"]))
    assert [apply(controller, op) for op in operations] == recorded
    assert recorded[-1] == "Executed"


def test_decision_difference_compares_old_and_new_bodies_under_one_policy() -> None:
    difference = decision_difference(
        DEFAULT_POLICY, DEFAULT_POLICY, old_model_class=mutants.UnknownTreatedAsPassed
    )
    assert difference is not None
    assert "Unknown" in difference.assignment.values()
    assert (difference.old_commits, difference.new_commits) == (True, False)
    assert decision_difference(DEFAULT_POLICY, DEFAULT_POLICY) is None


def test_long_proofs_say_how_far_they_got() -> None:
    """A policy with hundreds of keys proves for minutes: each line names how many
    properties are checked, the time so far and the last verdict."""
    from replan.verification.engines.prove.engine import Ticker

    lines: list[str] = []
    tick = Ticker(lines.append, every=0.0)
    for result in prove_invariants(DEFAULT_POLICY, DECLARATION, events=["cancel"]):
        tick(result)
    assert lines and lines[-1].startswith(f"proofs: {len(lines)} properties checked (")
    assert all(line.endswith((": proved", ": NOT PROVED")) for line in lines)
