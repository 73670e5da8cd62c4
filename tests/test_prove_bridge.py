"""The bridge between the z3 model of the commit gate and the running controller: for
concrete evidence assignments, set through real observations, the gate formula the
equivalence proof uses, evaluated on the controller's own state, says Executed
exactly when the generated controller executes the commit plan; and the z3 statement
of ``decide`` agrees with the hand-written ``decide``."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable

import pytest

from replan.controller import DEFAULT_POLICY, Controller, EvidenceState, decide
from replan.controller.policy import Policy, policy_from_dict
from replan.controller.records import Decision, ExecuteResult
from replan.controller.run import Run
from replan.spec.declaration import Replanning
from replan.spec.generator import load_controller
from replan.spec.model import extract
from replan.verification.core.harness import apply
from replan.verification.engines.prove.engine import Gate, commit_gate, equivalence_operations
from replan.verification.subjects import mutants

STATES = [str(s) for s in EvidenceState]


def bridge(
    policy: Policy,
    gate: Gate,
    controller_class: type[Run],
    assignments: Iterable[dict[str, str]],
) -> tuple[int, int]:
    """Run every assignment; returns (cases, commits) after asserting agreement."""
    cases = commits = 0
    for assignment in assignments:
        operations = equivalence_operations(policy, gate.step, assignment)
        controller = controller_class(policy)
        for operation in operations[:-1]:
            assert apply(controller, operation) is True, (assignment, operation)
        opens = gate.open_for(controller, "commit")
        ready = gate.ready_for(controller)
        states = {k: EvidenceState(v) for k, v in assignment.items()}
        assert ready == (decide(states, policy) == Decision.READY_TO_COMMIT), assignment
        result = apply(controller, operations[-1])
        assert (result == ExecuteResult.EXECUTED) == opens, (assignment, result, opens)
        cases += 1
        commits += opens
    return cases, commits


def every(keys: list[str]) -> Iterable[dict[str, str]]:
    for combination in itertools.product(STATES, repeat=len(keys)):
        yield dict(zip(keys, combination, strict=True))


def one_commit_step(keys: list[str], requires: list[str], workflow: list[str]) -> Policy:
    return policy_from_dict(
        {
            "evidence": {"keys": keys},
            "resources": {"allowed": ["r"]},
            "steps": [{"name": "commit", "requires": requires, "completes_run": True}],
            "workflow": {"ready_when_passed": workflow},
        }
    )


def test_all_nine_cases_of_the_default_policy() -> None:
    gate = commit_gate(DEFAULT_POLICY, "commit-import")
    cases, commits = bridge(DEFAULT_POLICY, gate, Controller, every(["parser", "access"]))
    assert (cases, commits) == (9, 1)


def test_every_case_of_a_policy_of_three_to_the_eighth() -> None:
    keys = [f"k{i}" for i in range(8)]
    # The step requires six keys, the workflow all eight: the gate and decide differ,
    # so the bridge is checked on open and closed gates alike.
    policy = one_commit_step(keys, keys[:6], keys)
    cases, commits = bridge(policy, commit_gate(policy, "commit"), Controller, every(keys))
    assert cases == 3**8
    assert commits == 3**2  # six keys Passed, the other two anything


def test_every_case_of_each_commit_step_of_a_policy_with_two() -> None:
    policy = policy_from_dict(
        {
            "evidence": {"keys": ["a", "b", "c"]},
            "resources": {"allowed": ["r"]},
            "steps": [
                {"name": "ship", "requires": ["a"], "completes_run": True},
                {"name": "ship-all", "requires": ["a", "b", "c"], "completes_run": True},
                {"name": "look"},
            ],
            "workflow": {"ready_when_passed": ["a", "b", "c"]},
        }
    )
    for step, expected in (("ship", 9), ("ship-all", 1)):
        gate = commit_gate(policy, step)
        assert bridge(policy, gate, Controller, every(["a", "b", "c"])) == (27, expected)


def test_sampled_cases_of_a_policy_of_forty_keys() -> None:
    keys = [f"key{i:02}" for i in range(40)]
    policy = one_commit_step(keys, keys[::2], keys)
    rng = random.Random(5)
    samples = [
        {k: ("Passed" if rng.random() < 0.9 else rng.choice(STATES)) for k in keys}
        for _ in range(150)
    ]
    samples.append(dict.fromkeys(keys, "Passed"))
    cases, commits = bridge(policy, commit_gate(policy, "commit"), Controller, samples)
    assert cases == 151 and commits >= 1


@pytest.mark.parametrize(
    "name,model_class", [("unknown-treated-as-passed", mutants.UnknownTreatedAsPassed)]
)
def test_the_bridge_holds_for_a_broken_gate_too(name: str, model_class: type[Run]) -> None:
    """The z3 gate follows the bodies it is translated from: a broken gate's formula
    opens exactly where the broken controller commits (five of nine cases)."""
    broken = mutants.mutant_controller(name)
    declaration = extract(Replanning)
    gate = commit_gate(DEFAULT_POLICY, "commit-import", declaration, model_class)
    assert bridge(DEFAULT_POLICY, gate, broken, every(["parser", "access"])) == (9, 4)
    # and the real gate's formula disagrees with the broken controller somewhere
    real = commit_gate(DEFAULT_POLICY, "commit-import")
    with pytest.raises(AssertionError):
        bridge(DEFAULT_POLICY, real, broken, every(["parser", "access"]))
    assert load_controller  # the mutants are built by the real generator
