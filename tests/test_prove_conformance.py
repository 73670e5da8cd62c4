"""The z3 step relation is honest: every step of many random runs of the generated
controller satisfies it (the abstraction of the state before, the argument, the
answer, the fired transition and the abstraction of the state after), the auxiliary
invariants hold on every state in Python and in z3, and a controller whose bodies
differ from the ones translated does not conform."""

from __future__ import annotations

import random

from replan.controller import DEFAULT_POLICY, Controller, EvidenceState, Observation, Plan
from replan.controller.policy import Policy, policy_from_dict
from replan.controller.run import Run
from replan.spec import inputs
from replan.spec.declaration import Replanning
from replan.spec.model import extract
from replan.spec.properties import CONTRACT
from replan.verification.core.domains import PARAMETER_TYPES
from replan.verification.core.harness import Operation, apply
from replan.verification.engines.campaign.machine import DERIVED_EVENTS
from replan.verification.subjects import mutants
from replan.verification.translate.property_terms import state_term
from replan.verification.translate.symbolic import (
    FormulaOnRuns,
    RelationChecker,
    Translator,
    abstract_run,
    fresh_state,
)

DECLARATION = extract(Replanning)

SMALL = policy_from_dict(
    {
        "limits": {
            "max_steps": 2,
            "max_proposals": 4,
            "no_progress_limit": 2,
            "count_duplicate_deliveries": False,
        },
        "evidence": {"keys": ["a", "b", "c"]},
        "resources": {"allowed": ["r1", "r2"]},
        "steps": [
            {"name": "look"},
            {"name": "ship", "requires": ["a"], "completes_run": True},
            {"name": "ship-all", "requires": ["a", "b", "c"], "completes_run": True},
        ],
        "workflow": {"ready_when_passed": ["a", "b", "c"]},
    }
)


def random_operation(rng: random.Random, policy: Policy, run: Run) -> Operation:
    """An operation that often matters: current revisions, declared names, the
    pending id, a redelivered observation; sometimes stale, unknown or malformed."""
    kind = rng.choices(
        ["observe", "propose", "execute", "cancel", *DERIVED_EVENTS],
        [5, 4, 4, 0.3, *(1 for _ in DERIVED_EVENTS)],
    )[0]
    if kind in DERIVED_EVENTS:  # an event no line here spells out: its derived inputs
        return Operation(kind, rng.choice(inputs.arguments(PARAMETER_TYPES[kind], run)))
    if kind == "observe":
        seen = [o.argument for o in _history(run) if o.op == "observe"]
        if seen and rng.random() < 0.25:
            return Operation("observe", rng.choice(seen))  # a redelivery (or a conflict)
        key = rng.choice([*policy.keys, *policy.keys, "undeclared"])
        pending = run.pending
        if pending is not None and rng.random() < 0.5:  # help a pending plan along
            missing = [
                k
                for k in policy.requirements.get(pending.step, ())
                if run.evidence_state(k) != "Passed"
            ]
            if missing:
                key = missing[0]
        latest = run.snapshot()["evidence"].get(key, {}).get("version", 0)
        version = max(0, latest + rng.choice([-1, 1, 1, 1, 2]))
        state = rng.choices(list(EvidenceState), [1, 4, 1])[0]
        return Operation("observe", Observation(key, version, state, rng.choice(["s", "t"])))
    if kind == "propose":
        if rng.random() < 0.1:
            return Operation("propose", rng.choice(["not a plan", Plan("", 1, 1, "x", "y")]))
        revision = run.plan_revision + rng.choice([-1, 0, 1, 1, 1, 2])
        evidence = run.evidence_revision if rng.random() < 0.8 else run.evidence_revision - 1
        step = rng.choice([*(s.name for s in policy.steps), "unknown-step"])
        resource = rng.choice([*policy.resources, *policy.resources, "elsewhere"])
        plan = Plan(rng.choice(["p", "q", "r", "s"]), revision, evidence, step, resource)
        return Operation("propose", plan)
    if kind == "execute":
        pending = run.pending
        if pending is not None and rng.random() < 0.6:
            return Operation("execute", pending.id)
        return Operation("execute", rng.choice(["p", "q", "r", "s", 7]))
    return Operation("cancel")


def _history(run: Run) -> list[Operation]:
    return [Operation(op, argument) for op, argument, *_ in run._trace if op == "observe"]


def conformance(
    policy: Policy, controller_class: type[Run], model_class: type[Run], runs: int, seed: int
) -> tuple[list[str], set[int]]:
    checker = RelationChecker(policy, DECLARATION, model_class)
    u = checker.universe
    translator = Translator(u, model_class)
    state = fresh_state(u, "inv")
    invariants = [
        (inv.name, FormulaOnRuns(u, state, state_term(translator, inv, state)))
        for inv in CONTRACT.of_kind("auxiliary", "invariant")
    ]
    problems: list[str] = []
    fired_seen: set[int] = set()
    rng = random.Random(seed)
    for _ in range(runs):
        run = controller_class(policy)
        before = abstract_run(u, run)
        for _ in range(20):
            operation = random_operation(rng, policy, run)
            result = apply(run, operation)
            after = abstract_run(u, run)
            fired = run._trace[-1][5]
            if fired is not None:
                fired_seen.add(fired)
            problem = checker.check(operation.op, before, operation.argument, result, after, fired)
            if problem is not None:
                problems.append(f"{operation} -> {result!r}: {problem}")
            assert CONTRACT.checker.state(run) == [], operation
            for name, formula in invariants:  # the same invariants, as z3 reads them
                assert formula(run), (name, operation)
            before = after
    return problems, fired_seen


def test_every_random_step_of_the_generated_controller_satisfies_the_relation() -> None:
    fired: set[int] = set()
    for policy in (DEFAULT_POLICY, SMALL):
        problems, seen = conformance(policy, Controller, Run, runs=30, seed=11)
        assert problems == []
        fired |= seen
    # Between them the two policies' runs fire most declared transitions (the proofs
    # cover every transition symbolically; this keeps the random check meaningful).
    from replan.verification.core.coverage import dead_transitions

    never = set(dead_transitions(DEFAULT_POLICY)) & set(dead_transitions(SMALL))
    live = [t for t in DECLARATION.transitions if t.label not in never]
    assert len(fired) >= 0.75 * len(live), sorted(fired)


def test_a_controller_with_other_bodies_does_not_conform() -> None:
    broken = mutants.mutant_controller("replay-counts-a-step")
    problems, _ = conformance(DEFAULT_POLICY, broken, Run, runs=12, seed=3)
    assert problems, "the relation of the real bodies admitted a replay that counts a step"
    assert any("_steps differs" in p for p in problems)


def test_the_relation_follows_the_bodies_it_is_translated_from() -> None:
    broken = mutants.mutant_controller("replay-counts-a-step")
    problems, _ = conformance(DEFAULT_POLICY, broken, mutants.ReplayCountsStep, runs=12, seed=3)
    assert problems == []
