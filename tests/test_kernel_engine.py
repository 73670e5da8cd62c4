"""``replan explore --engine kernel``: the declaration, bodies, policy and properties
translated, by the translator behind ``--engine spin``, into pure Python functions
over a state tuple (``verification/translate/kernel/``) and searched breadth-first
(``verification/engines/kernel/``)."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest
from conftest import (
    TRANSLATED_ENGINE_MUTANTS,
    assert_reproduced_on_mutant,
    model_and_controller_disagree,
    never_stopping_model,
    session_kernel_cache,
    small_domains,
)

from replan.cli import main
from replan.controller.policy import DEFAULT_POLICY
from replan.spec.properties import CONTRACT
from replan.verification.core import harness
from replan.verification.core.domains import spin_domains
from replan.verification.core.harness import Operation, observe_call, run_view
from replan.verification.core.subject import PROJECT, Subject
from replan.verification.engines.explore.engine import explore
from replan.verification.engines.kernel import explore_kernel
from replan.verification.subjects.mutants import MUTANTS
from replan.verification.translate.kernel import Broken, build, successors_by_call
from replan.verification.translate.symbolic import abstract_run


@pytest.mark.parametrize("domains", [small_domains(), spin_domains(1, 1)], ids=lambda d: d.name)
def test_kernel_counts_equal_the_python_explorers(domains: object) -> None:
    """The same states, transitions and depth as the explorer driving the generated
    controller, on the small domain and on SPIN's (V, K) = (1, 1)."""
    cache = session_kernel_cache()
    kernel = explore_kernel(DEFAULT_POLICY, domains, PROJECT, cache=cache)  # type: ignore[arg-type]
    python = explore(DEFAULT_POLICY, domains)  # type: ignore[arg-type]
    assert kernel.ok and kernel.complete and python.ok
    assert (kernel.states, kernel.transitions, kernel.depth) == (
        python.states,
        python.transitions,
        python.depth,
    )
    # most transitions are decided when the kernel is generated, but not all
    assert 0 < kernel.details["transitions_evaluated"] < kernel.transitions
    assert kernel.details["unchecked"].keys() == {"trace-one-record-per-call"}
    # and the same coverage: the declared transitions fired, the stop reasons reached,
    # the transitions the policy switches off, the traps, the warnings
    assert kernel.coverage_measured and kernel.fired.keys() == python.fired.keys()
    assert kernel.stop_reasons == python.stop_reasons
    assert kernel.disabled_by_policy == python.disabled_by_policy
    assert (kernel.traps, kernel.warnings) == (python.traps, python.warnings)
    # the Python explorer's own counts of its evaluations are not claimed for the kernel
    assert python.distinct_edges and "distinct edges" in "\n".join(python.lines())
    assert kernel.distinct_edges is None and kernel.to_json()["distinct_edges"] is None
    assert "distinct edges" not in "\n".join(kernel.lines())


@pytest.mark.parametrize(
    "subject", [PROJECT, MUTANTS["stopped-run-revived"]], ids=lambda subject: subject.name
)
def test_the_kernel_steps_in_lockstep_with_the_generated_controller(subject: Subject) -> None:
    """Random walks: after every call the kernel's state tuple is the controller's
    state, encoded by the layout's own rules (``Layout.encode``); the kernel breaks a
    property exactly when the controller does; and the per-state ``expand``
    function the search runs gives the same successors and verdict as the calls'
    own functions. On the project and on a broken body."""
    kernel = build(DEFAULT_POLICY, spin_domains(1, 1), subject.model, subject.model_class)
    layout = kernel.layout
    chooser = random.Random(20261205)
    steps = broken = 0
    for _walk in range(40):
        controller = subject.controller(DEFAULT_POLICY)
        state = kernel.initial
        for _call in range(14):
            outcomes = successors_by_call(kernel, state)
            expanded = kernel.expand[state[kernel.mode_position]](state)
            failures_by_call = [o.names[0] for o in outcomes.values() if isinstance(o, Broken)]
            if isinstance(expanded, str):
                assert failures_by_call and expanded == failures_by_call[0]
            else:
                assert not failures_by_call
                assert set(expanded) | {state} == set(outcomes.values()) | {state}
            number = chooser.randrange(len(kernel.calls))
            call = kernel.calls[number]
            operation = Operation(call.event, call.concrete(run_view(controller)))
            observed = observe_call(DEFAULT_POLICY, controller, operation)
            failures = harness.violated(observed)
            outcome = outcomes[number]
            steps += 1
            if isinstance(outcome, Broken):
                # every property the kernel names is one the controller breaks, and
                # the walk goes on from the state both reach
                assert set(outcome.names) <= set(failures), (operation, outcome, failures)
                broken += 1
                state = outcome.successor
            else:
                assert not failures, (operation, failures)
                state = outcome
            expected = layout.encode(abstract_run(layout.u, run_view(controller)))
            assert state == expected, (operation, _diff(kernel.variables, state, expected))
    assert steps > 300
    assert (broken > 0) == (subject is not PROJECT)


def _diff(names: list[str], got: tuple[int, ...], expected: tuple[int, ...]) -> dict[str, object]:
    return {n: (a, b) for n, a, b in zip(names, got, expected, strict=True) if a != b}


@pytest.mark.parametrize(("mutant", "broken"), TRANSLATED_ENGINE_MUTANTS)
def test_the_kernel_finds_a_broken_body_and_the_controller_reproduces_it(
    mutant: str, broken: str
) -> None:
    """A deliberately broken body: the kernel's shortest path, replayed call by call
    on that mutant's generated controller, breaks the property the kernel names."""
    result = explore_kernel(DEFAULT_POLICY, small_domains(), MUTANTS[mutant])
    assert not result.ok
    assert_reproduced_on_mutant(result, mutant, broken)


def test_a_path_the_controller_does_not_reproduce_is_a_translation_bug() -> None:
    """The kernel is generated from the broken mutant's bodies, the controller is the
    project's: the kernel's violation is a translation bug, never a property failure."""
    result = explore_kernel(DEFAULT_POLICY, small_domains(), model_and_controller_disagree())
    assert not result.ok
    assert result.translation_bugs and not result.findings
    assert any("TRANSLATION BUG" in line for line in result.lines())


def test_a_changed_property_is_what_the_kernel_enforces(
    execute_never_executes: Subject,
) -> None:
    """Tighten one call property in its source and nothing else: the kernel checks
    the new body and the replay on the unchanged controller confirms it."""
    result = explore_kernel(DEFAULT_POLICY, small_domains(), execute_never_executes)
    assert not result.translation_bugs
    [finding] = result.findings
    assert finding.property == "execute-counts-one-step"
    assert [o.op for o in finding.operations][-1] == "execute"


def test_a_changed_state_invariant_is_what_the_kernel_enforces(
    at_most_one_proposal: Subject,
) -> None:
    """Tighten a state invariant (at most one proposal): the kernel reports it on the
    first state with two proposals, reproduced on the unchanged controller."""
    result = explore_kernel(DEFAULT_POLICY, small_domains(), at_most_one_proposal)
    assert not result.translation_bugs
    [finding] = result.findings
    assert finding.property == "proposal-bound"
    operations = finding.operations
    assert [operation.op for operation in operations].count("propose") == 2


@pytest.mark.parametrize("depth", [1, 3, 5])
def test_a_bounded_search_leaves_the_same_depth_unexpanded_as_the_explorer(depth: int) -> None:
    cache = session_kernel_cache()
    kernel = explore_kernel(DEFAULT_POLICY, small_domains(), PROJECT, max_depth=depth, cache=cache)
    python = explore(DEFAULT_POLICY, small_domains(), max_depth=depth)
    assert (kernel.states, kernel.transitions, kernel.depth) == (
        python.states,
        python.transitions,
        python.depth,
    )
    assert kernel.stopped_by == python.stopped_by == "max_depth" and not kernel.complete
    assert kernel.fired.keys() == python.fired.keys() and kernel.warnings == python.warnings


def test_a_search_that_keeps_going_finds_every_violation_the_explorer_finds() -> None:
    """``--keep-going`` on a broken body: the kernel goes on from the states a
    violation reaches, as the Python explorer does, so both find the same states, the
    same shortest counterexample of every property broken (in the same order, with
    the same calls) and count the same violating transitions of each."""
    mutant, depth = MUTANTS["stopped-run-revived"], 5
    kernel = explore_kernel(
        DEFAULT_POLICY, small_domains(), mutant, max_depth=depth, stop_at_first=False
    )
    python = explore(
        DEFAULT_POLICY,
        small_domains(),
        mutant.controller,
        max_depth=depth,
        stop_at_first=False,
        contract=mutant.contract,
    )
    assert (kernel.states, kernel.transitions, kernel.depth) == (
        python.states,
        python.transitions,
        python.depth,
    )
    assert kernel.stopped_by == python.stopped_by == "max_depth"
    assert not kernel.translation_bugs
    shown = [(f.property, list(map(str, f.operations))) for f in kernel.findings]
    assert len(shown) > 1
    assert shown == [(f.property, list(map(str, f.operations))) for f in python.findings]
    assert kernel.violation_summary == python.violation_summary


def test_a_run_that_can_never_stop_is_a_trap_in_the_kernel_too() -> None:
    """A declaration whose cancel and plan-limit transitions stay where they are,
    checked without the two rules that forbid it, in a domain where nothing else
    stops a run: every state is a trap, the initial one already, as the Python
    explorer says of the same controller."""
    model, policy = never_stopping_model()
    never_stops = Subject("never-stops", build_model=lambda: model, reference_kind=None)
    never_stops = never_stops.with_contract(
        CONTRACT.without("cancel-stops-an-active-run", "propose-budget-stops")
    )
    domains = dataclasses.replace(small_domains(), keys=("parser",))
    result = explore_kernel(policy, domains, never_stops)
    assert result.ok and result.complete
    assert result.traps == result.states and result.trap_example == []
    assert any("trap states" in warning for warning in result.warnings)
    assert explore_kernel(policy, domains, PROJECT).traps == 0


def test_the_kernel_names_its_source_and_accounts_for_every_call() -> None:
    kernel = build(DEFAULT_POLICY, small_domains(), PROJECT.model, PROJECT.model_class)
    header = kernel.source.split('"""')[1]
    assert PROJECT.model.digest in header and "do not edit" in header
    assert all(f"  {i}: {name}" in header for i, name in enumerate(kernel.variables))
    assert kernel.source.count("\ndef expand_") == len(kernel.steps)
    for mode, steps in enumerate(kernel.steps):
        assert kernel.settled[mode] + len(steps) == len(kernel.calls)
        assert 0 < kernel.classes[mode] <= len(steps)
    # every state invariant is checked by name, once per new state
    invariants = kernel.source.split("def invariants(s):")[1].split("\ndef ")[0]
    for prop in CONTRACT:
        if prop.kind == "invariant" and prop.name in kernel.checked:
            assert f"return {prop.name!r}" in invariants, prop.name


def test_a_search_stopped_by_max_states_says_incomplete(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["explore", "--engine", "kernel", "--spin-domains", "--max-states", "500"])
    out = capsys.readouterr().out
    assert code == 0 and "INCOMPLETE" in out
    result = explore_kernel(DEFAULT_POLICY, small_domains(), PROJECT, max_states=50)
    calls = result.details["calls_per_state"]
    assert not result.complete and 50 <= result.states < 50 + calls


def test_the_cli_saves_a_replayable_counterexample_and_the_kernel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "kernel.py"
    arguments = ["explore", "--engine", "kernel", "--spin-domains", "--json"]
    arguments += ["--kernel-source", str(source)]
    code = main([*arguments, "--mutant", "stopped-run-revived", "-o", str(tmp_path)])
    document = json.loads(capsys.readouterr().out)
    assert code == 1 and len(document["violations"]) == 1 and not document["translation_bugs"]
    assert document["engine"] == "kernel"
    assert document["kernel_digest"].startswith("sha256:")
    assert source.read_text().startswith('"""GENERATED')
    saved = document["saved"]
    assert len(saved) == 1 and Path(saved[0]).name.startswith("kernel-")
    assert main(["replay", saved[0]]) == 1  # still fails on the mutant it names
    assert main(["replay", saved[0], "--implementation", "replan.controller:Controller"]) == 0
