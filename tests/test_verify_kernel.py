"""``replan verify`` with the generated kernel as its explorer: what the kernel gives
the rest of the run as the Python explorer's graph does (a witness for each transition
it fired, for the campaign; its states in the controller's terms, which the campaign's
coverage is measured against), and a broken controller still caught."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import session_kernel_cache

from replan.cli import main
from replan.controller import Controller
from replan.controller.policy import DEFAULT_POLICY
from replan.verification.core.harness import apply
from replan.verification.core.search import SearchOptions
from replan.verification.core.subject import PROJECT
from replan.verification.engines import engine


@pytest.fixture(scope="module")
def kernel_report():  # type: ignore[no-untyped-def]
    return engine("kernel").search(PROJECT, DEFAULT_POLICY, None, SearchOptions())


@pytest.fixture(scope="module")
def python_report():  # type: ignore[no-untyped-def]
    return engine("python").search(PROJECT, DEFAULT_POLICY, None, SearchOptions(keep_graph=True))


def _states(graph: Any) -> set[Any]:
    return {graph.state(index) for index in range(graph.states)}


def test_every_kernel_state_decodes_to_one_the_python_explorer_reached(  # type: ignore[no-untyped-def]
    kernel_report, python_report
) -> None:
    """The kernel's states read back as the controller's: the same set, state for
    state, as the Python explorer's (both store fresh ids under the same renaming)."""
    for ours, theirs in zip(kernel_report.runs, python_report.runs, strict=True):
        assert ours.graph is not None and ours.graph.states == theirs.graph.states
        assert _states(ours.graph) == _states(theirs.graph), ours.domains["name"]
        assert (ours.transitions, ours.depth) == (theirs.transitions, theirs.depth)
        assert ours.fired.keys() == theirs.fired.keys()
        assert (ours.stop_reasons, ours.traps) == (theirs.stop_reasons, theirs.traps)


def test_a_decoding_that_misreads_a_field_gives_states_the_explorer_never_reached(  # type: ignore[no-untyped-def]
    kernel_report, python_report
) -> None:
    """The comparison above catches a decoding that reads one field wrong (here the
    evidence states' names in the wrong order)."""
    from replan.verification.engines.kernel.graph import KernelGraph

    ours, theirs = kernel_report.runs[0].graph, python_report.runs[0].graph
    members = dict(ours.decoding.members)
    members["evidence"] = tuple(reversed(members["evidence"]))
    broken = dataclasses.replace(ours.decoding, members=tuple(members.items()))
    misread = KernelGraph(ours.witnesses, broken)
    assert _states(misread) != _states(theirs)


def test_coverage_against_the_kernel_is_coverage_against_the_python_explorer(  # type: ignore[no-untyped-def]
    kernel_report, python_report
) -> None:
    """The same visited states and transitions measured against either engine's
    reachable set give the same figures, the unreached examples included."""
    from replan.verification.engines.explore.coverage import coverage

    for ours, theirs in zip(kernel_report.runs, python_report.runs, strict=True):
        graph = theirs.graph
        states = [graph.state(index) for index in range(0, graph.states, 7)]
        edges = sorted(graph._engine.edges)[::11]
        transitions = [(graph.state(s), graph.edge_labels[n]) for s, n, _ in edges]
        measured = [coverage(run, states, transitions).to_json() for run in (ours, theirs)]
        assert measured[0] == measured[1], ours.domains["name"]
        assert 0 < measured[0]["transitions"]["reached"] < measured[0]["transitions"]["total"]


def test_the_kernel_numbers_each_state_as_its_abstract_state_alone_would(  # type: ignore[no-untyped-def]
    kernel_report,
) -> None:
    """A state is decoded and abstracted once per combination of what the abstraction
    reads (states differing only in plan revisions share it): the numbering is the one
    ``abstract_state`` gives state by state (and states do share one)."""
    from replan.verification.core.abstraction import abstract_state

    for run in kernel_report.runs:
        graph = run.graph
        first_index, number_of = graph.abstract_numbering()
        expected: dict[Any, int] = {}
        for index in range(graph.states):
            number = expected.setdefault(abstract_state(graph.state(index)), index)
            assert number_of[index] == number, (run.domains["name"], index)
        assert first_index == expected
        assert len(first_index) < graph.states


def test_the_graph_by_abstract_state_made_beside_is_the_one_made_here(  # type: ignore[no-untyped-def]
    kernel_report,
) -> None:
    """What ``replan verify`` measures a campaign's coverage against on a large policy
    is made in a forked process as the search ends: the same numbering and pairs."""
    from replan.verification.engines.kernel.graph import KernelGraph

    for run in kernel_report.runs:
        here = run.graph.abstracted()
        graph = KernelGraph(run.graph.witnesses, run.graph.decoding)
        graph.abstract_beside()
        assert graph._beside is not None  # forked: this process is no Ray driver
        assert graph.abstracted() == here
        assert len(here.pairs) < sum(1 for _ in graph.fired_pairs())  # states share pairs


def test_verify_on_two_workers_makes_the_graph_by_abstract_state_beside() -> None:
    cache = session_kernel_cache().directory
    options = SearchOptions(keep_graph=True, workers=2, max_states=2_000, kernel_cache=cache)
    report = engine("kernel").search(PROJECT, DEFAULT_POLICY, None, options)
    assert all(run.graph._beside is not None for run in report.runs)
    assert all(run.graph.abstracted().pairs for run in report.runs)
    alone = engine("kernel").search(
        PROJECT, DEFAULT_POLICY, None, dataclasses.replace(options, workers=1)
    )
    assert all(run.graph._beside is None for run in alone.runs)


def test_each_transition_the_kernel_fired_has_a_witness_that_fires_it_last(kernel_report) -> None:  # type: ignore[no-untyped-def]
    labels = list(Controller.transitions)
    assert kernel_report.fired
    for label in kernel_report.fired:
        found = None
        for run in kernel_report.runs:
            found = run.witness(label)
            if found is not None:
                break
        assert found is not None, label
        controller = Controller(DEFAULT_POLICY)
        for operation in found:
            apply(controller, operation)
        assert controller._trace[-1][5] == labels.index(label), label


def test_each_witness_is_as_short_as_the_python_explorers(kernel_report, python_report) -> None:  # type: ignore[no-untyped-def]
    """The campaign is seeded with the shortest run to each transition: the kernel's
    witness is no longer than the one the Python explorer's graph gives (both search
    breadth first, so the first state found firing a transition is a shallowest)."""
    for ours, theirs in zip(kernel_report.runs, python_report.runs, strict=True):
        for label in theirs.fired:
            expected = theirs.graph.witness(label)
            assert expected is not None, label
            assert len(ours.witness(label)) == len(expected), label


def test_a_transition_the_kernel_never_fired_has_no_witness(kernel_report) -> None:  # type: ignore[no-untyped-def]
    never = [label for label in Controller.transitions if label not in kernel_report.fired]
    assert never, "the default policy switches some transitions off"
    assert all(run.witness(never[0]) is None for run in kernel_report.runs)
    assert all(run.witness("no such transition") is None for run in kernel_report.runs)


def test_verify_with_the_kernel_catches_a_broken_controller(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            *("verify", "--engine", "kernel", "--workers", "1"),
            *("--mutant", "stopped-run-revived", "-o", str(tmp_path), "--json"),
        ]
    )
    assert code == 1
    report = json.loads(capsys.readouterr().out)
    (explorer,) = [check for check in report["checks"] if check["name"] == "explorer"]
    assert explorer["status"] == "failed" and explorer["details"]["engine"] == "kernel"
    assert explorer["properties"]
    assert all(Path(path).exists() for path in explorer["counterexamples"])
    assert any(Path(path).name.startswith("kernel-") for path in explorer["counterexamples"])
