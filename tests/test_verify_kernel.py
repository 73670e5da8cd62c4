"""``replan verify`` with the generated kernel as its explorer: what the kernel gives
the rest of the run in place of the Python explorer's graph (a witness for each
transition it fired, for the campaign), and a broken controller still caught."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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


def test_each_witness_is_as_short_as_the_python_explorers(kernel_report) -> None:  # type: ignore[no-untyped-def]
    """The campaign is seeded with the shortest run to each transition: the kernel's
    witness is no longer than the one the Python explorer's graph gives (both search
    breadth first, so the first state found firing a transition is a shallowest)."""
    python = engine("python").search(PROJECT, DEFAULT_POLICY, None, SearchOptions(keep_graph=True))
    for ours, theirs in zip(kernel_report.runs, python.runs, strict=True):
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
