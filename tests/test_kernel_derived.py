"""The kernel's calls offered state by state (``verification/translate/derived.py``):
approve's and charge's arguments derived from the state, one plan id of each kind,
fresh ids under a renaming, and the default report searched by the kernel."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
import z3
from conftest import session_kernel_cache

from replan.controller import Controller
from replan.controller.policy import DEFAULT_POLICY, Policy, load_policy
from replan.spec import inputs
from replan.verification.core.domains import (
    Domains,
    InputSpace,
    observation_domains,
    plan_domains,
)
from replan.verification.core.harness import Operation, observe_call, run_view
from replan.verification.core.search import SearchOptions
from replan.verification.core.subject import PROJECT
from replan.verification.engines import engine
from replan.verification.translate import derived
from replan.verification.translate.calls import Call
from replan.verification.translate.kernel import Kernel, build
from replan.verification.translate.symbolic import abstract_run

ROOT = Path(__file__).resolve().parents[1]
POLICIES = {
    "default": DEFAULT_POLICY,
    "approval": load_policy(ROOT / "tests" / "policies" / "approval.toml"),
    "budget": load_policy(ROOT / "tests" / "policies" / "budget.toml"),
    "import example": load_policy(ROOT / "examples" / "import-policy.toml"),
}


def _walk(policy: Policy, calls: list[Call], seed: int, steps: int) -> Iterator[Controller]:
    """States of a controller driven by the calls a state offers, chosen at random."""
    rng = random.Random(seed)
    controller = Controller(policy)
    for _ in range(steps):
        yield controller
        view = run_view(controller)
        offered = [call for call in calls if call.offered_in(view)]
        call = rng.choice(offered)
        observe_call(policy, controller, Operation(call.event, call.concrete(view)))


def _offered(calls: list[Call], event: str, view: object) -> set[object]:
    return {
        repr(call.concrete(view)) for call in calls if call.event == event and call.offered_in(view)
    }


def _kernel(policy: Policy, domains: Domains) -> Kernel:
    return build(policy, domains, PROJECT.model, PROJECT.model_class)


def _offered_by_kernel(kernel: Kernel, view: object) -> int:
    """How many calls the kernel counts in a controller's state (its z3 reading)."""
    assert kernel.layout is not None
    state = kernel.layout.encode(abstract_run(kernel.layout.u, view))  # type: ignore[arg-type]
    mode = state[kernel.mode_position]
    dynamic = kernel.offered[mode]
    return kernel.offered_static[mode] + (0 if dynamic is None else dynamic(state))


def _disagreements(policy: Policy, domains: Domains, seeds: int = 6, steps: int = 40) -> list[str]:
    """States where the calls offered differ from what ``spec.inputs`` and the domains
    offer, or where the kernel counts another number of calls than are offered."""
    kernel = _kernel(policy, domains)
    space = InputSpace(policy, domains)
    problems: list[str] = []
    for seed in range(seeds):
        for controller in _walk(policy, kernel.calls, seed, steps):
            view = run_view(controller)
            for event in ("approve", "charge"):
                kind = {"approve": "Approval", "charge": "Usage"}[event]
                wanted = {repr(argument) for argument in inputs.arguments(kind, view)}
                if _offered(kernel.calls, event, view) != wanted:
                    problems.append(f"{event} in {view.snapshot()}")
            pending = view.pending
            to_propose, to_execute = space.ids(
                tuple(view._accepted),
                tuple(view._completed),
                None if pending is None else pending.id,
            )
            for event, wanted_ids in (("propose", to_propose), ("execute", to_execute)):
                offered_ids = {
                    c.argument.id if event == "propose" else c.argument
                    for c in kernel.calls
                    if c.event == event and c.offered_in(view)
                } - {""}  # the malformed plan, offered everywhere
                if offered_ids != set(wanted_ids):
                    problems.append(f"{event} ids {sorted(offered_ids)} != {sorted(wanted_ids)}")
            count = sum(call.offered_in(view) for call in kernel.calls)
            if _offered_by_kernel(kernel, view) != count:
                problems.append(
                    f"the kernel counts {_offered_by_kernel(kernel, view)}, not {count}"
                )
    return problems


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_the_calls_a_state_offers_are_the_arguments_spec_inputs_gives(name: str) -> None:
    policy = POLICIES[name]
    assert _disagreements(policy, observation_domains(policy)) == []


def test_fresh_ids_are_offered_one_of_each_kind_and_the_first_unmentioned() -> None:
    assert _disagreements(DEFAULT_POLICY, plan_domains(), seeds=4, steps=60) == []


def test_a_condition_the_kernel_reads_wrongly_is_a_disagreement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check above catches a z3 reading of a condition that is not its concrete
    one: "a plan is pending" read as "none is"."""
    original = derived.Condition.term

    def broken(self: derived.Condition, pre: dict[str, object], u: object) -> z3.BoolRef:
        term = original(self, pre, u)  # type: ignore[arg-type]
        return z3.Not(term) if self.name == "pending" else term

    monkeypatch.setattr(derived.Condition, "term", broken)
    problems = _disagreements(DEFAULT_POLICY, observation_domains(DEFAULT_POLICY), seeds=2)
    assert any("the kernel counts" in problem for problem in problems)


def test_a_derived_argument_computed_wrongly_is_a_disagreement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """And a concrete reading that is not the one ``spec.inputs`` gives: a charge of
    one less than what remains."""
    original = derived.Derivation.value

    def broken(self: derived.Derivation, run: object) -> object:
        value = original(self, run)
        return value - 1 if self.name == "remaining" else value

    monkeypatch.setattr(derived.Derivation, "value", broken)
    problems = _disagreements(POLICIES["budget"], observation_domains(POLICIES["budget"]), seeds=2)
    assert any(problem.startswith("charge") for problem in problems)


@pytest.mark.parametrize("name", ["approval", "budget"])
def test_the_kernel_searches_derived_arguments_as_the_python_explorer_does(name: str) -> None:
    policy = POLICIES[name]
    domains = Domains("small", versions=1, ids=1, malformed_plan=False, malformed_observation=False)
    options = SearchOptions()
    kernel = engine("kernel").search(PROJECT, policy, domains, options)
    python = engine("python").search(PROJECT, policy, domains, options)
    assert (kernel.states, kernel.transitions, kernel.depth) == (
        python.states,
        python.transitions,
        python.depth,
    )
    assert kernel.fired.keys() == python.fired.keys()


def test_fresh_ids_are_stored_under_the_python_explorers_renaming() -> None:
    kernel = engine("kernel").search(PROJECT, DEFAULT_POLICY, plan_domains(), SearchOptions())
    python = engine("python").search(PROJECT, DEFAULT_POLICY, plan_domains(), SearchOptions())
    assert kernel.symmetry and python.symmetry
    assert (kernel.states, kernel.transitions, kernel.depth) == (
        python.states,
        python.transitions,
        python.depth,
    )


def test_the_kernel_searches_the_default_report_with_the_committed_counts() -> None:
    """The two focused domains of the default report, searched by the kernel, give the
    states, transitions, depth, declared transitions, stop reasons and traps that
    ``replan evidence`` committed (the same as the Python explorer's:
    ``tests/test_verify_kernel.py`` compares the two engines' searches)."""
    committed = json.loads((ROOT / "evidence" / "verify.json").read_text())
    (explorer,) = [c for c in committed["checks"] if c["name"] == "explorer"]
    expected = explorer["details"]
    result = engine("kernel").search(PROJECT, DEFAULT_POLICY, None, SearchOptions())
    assert result.complete and result.ok
    assert (result.states, result.transitions, result.depth) == (
        expected["states"],
        expected["transitions"],
        expected["depth"],
    )
    assert result.fired == expected["fired_on_expanded_states"]
    assert result.stop_reasons == expected["stop_reasons"]
    assert result.traps == expected["traps"]


@pytest.mark.parametrize(
    ("domains", "symmetry", "depth"),
    [
        # a fixed pool, with the id no plan carries (execute's unknown one), renamed
        (Domains("pool", versions=1, ids=2, malformed_observation=False), True, 6),
        # fresh ids stored as they are: the search the renaming is measured against
        (plan_domains(), False, 8),
    ],
    ids=["a fixed pool renamed", "fresh ids not renamed"],
)
def test_the_kernel_stores_states_under_the_symmetry_asked_for_as_the_python_explorer(
    domains: Domains, symmetry: bool, depth: int
) -> None:
    cache = session_kernel_cache().directory
    options = SearchOptions(symmetry=symmetry, max_depth=depth, kernel_cache=cache)
    kernel = engine("kernel").search(PROJECT, DEFAULT_POLICY, domains, options)
    python = engine("python").search(PROJECT, DEFAULT_POLICY, domains, options)
    assert kernel.symmetry is python.symmetry is symmetry
    assert (kernel.states, kernel.transitions, kernel.depth) == (
        python.states,
        python.transitions,
        python.depth,
    )
    assert kernel.fired.keys() == python.fired.keys()
    other = SearchOptions(symmetry=not symmetry, max_depth=depth, kernel_cache=cache)
    unreduced = engine("kernel").search(PROJECT, DEFAULT_POLICY, domains, other)
    # the renaming makes a difference on these domains, so the test can tell
    assert (unreduced.states > kernel.states) is symmetry
    assert unreduced.details["kernel_cache"]["status"] == "reused"  # one kernel, either way


def test_a_renaming_moves_only_the_pools_ids_and_leaves_any_other_in_place() -> None:
    """An id outside the pool (a fixed pool's never-proposed one) is never a new name,
    wherever the translation numbered it: here it is the layout's first id."""
    from types import SimpleNamespace

    from replan.verification.translate.layout import Layout
    from replan.verification.translate.renaming import renaming

    interned = {("str", "p-unknown"): 1, ("str", "p1"): 2, ("str", "p2"): 3}
    layout = SimpleNamespace(
        u=SimpleNamespace(interned=lambda: interned), ids=(1, 2, 3), base_name=Layout.base_name
    )
    variables = [f"{name}[{i}]" for name in ("accepted", "completed") for i in range(3)]
    variables += ["pending_present", "pending_id"]
    found = renaming(layout, variables, ("p1", "p2"))  # type: ignore[arg-type]
    assert found.movable == (1, 2)
    canonical = found.canonical()
    # p2 accepted, nothing else: stored as p1 accepted, the unknown id's place untouched
    assert canonical((0, 0, 1, 0, 0, 0, 0, 0)) == (0, 1, 0, 0, 0, 0, 0, 0)
    # p1 pending and p2 completed: a completed id is named before the pending one
    assert canonical((0, 0, 0, 0, 0, 1, 1, 2)) == (0, 0, 0, 0, 1, 0, 1, 3)
    assert canonical((0, 0, 0, 0, 1, 0, 1, 3)) == (0, 0, 0, 0, 1, 0, 1, 3)  # canonical
