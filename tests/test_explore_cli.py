"""``replan explore``: the default report, SPIN's state count, exit codes, saved
counterexamples that ``replan replay`` reproduces.

The two whole-space figures live here: the default report (every declared transition
and stop reason of the default policy reached, no warning) and SPIN's (V, K) = (1, 1)
domains (63,903 distinct states, the count SPIN reports for
``shared/anchors/spin/controller.pml``; (1, 2) = 280,380 is checked by
``replan explore --spin-domains --ids 2``, too slow for the suite).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replan.cli import main
from replan.controller import Controller
from replan.verification.core.domains import spin_domains
from replan.verification.engines.explore.engine import explore

ROOT = Path(__file__).resolve().parent.parent
FIRST_POLICY = ROOT / "tests" / "policies" / "first-policy.toml"


def test_default_report_reaches_every_declared_transition_and_stop_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explore", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["complete"]
    assert report["states"] > 10_000 and report["transitions"] > report["states"]
    assert report["depth"] > 10
    coverage = report["transition_coverage"]
    assert len(coverage) == report["transitions_declared"] == len(Controller.transitions)
    assert set(coverage.values()) == {"reached", "disabled by the policy"}
    # the two that count_duplicate_deliveries = true switches off, approval's (no
    # step of the default policy needs approval) and the budget's (it sets none), and
    # only those
    approval = {
        label
        for label in Controller.transitions
        if label.startswith(("awaiting_approval ", "approved "))
        or label == "pending --execute[needs_approval]--> awaiting_approval"
    }
    assert sorted(label for label, v in coverage.items() if v != "reached") == sorted(
        {
            "idle --observe[duplicate_delivery]--> idle",
            "pending --observe[duplicate_delivery]--> pending",
            "idle --charge[sets_a_budget and exhausts_budget]--> budget_exhausted",
            "pending --charge[sets_a_budget and exhausts_budget]--> budget_exhausted",
        }
        | approval
    )
    assert all(report["stop_reasons"].values()) and len(report["stop_reasons"]) == 5
    assert report["traps"] == 0 and report["warnings"] == []
    assert [run["domains"]["name"] for run in report["runs"]] == ["observations", "plans"]


def test_spin_domains_give_spins_state_count() -> None:
    """SPIN stores 63,903 states and counts 3,003,442 transitions (states x 47 calls,
    plus its initial state) for (V, K) = (1, 1): the same domains here give the same
    distinct states, an independent check of the controller and the explorer."""
    result = explore(None, spin_domains(1, 1), check_invariants=False)
    assert result.complete
    assert result.states == 63_903
    assert result.transitions == 63_903 * 47 == 3_003_441
    assert result.domains["calls_per_state"] == "47"


def test_a_broken_controller_exits_1_and_replay_reproduces_it(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["explore", "--mutant", "stale-plan-check-removed", "--output", str(tmp_path), "--json"]
    )
    assert code == 1
    report = json.loads(capsys.readouterr().out)
    assert not report["ok"] and report["stopped_by"] == "violation"
    [saved] = report["saved"]
    document = json.loads(Path(saved).read_text(encoding="utf-8"))
    assert document["property"] == "propose-evidence-must-be-current"
    assert (
        document["implementation"]
        == "replan.verification.subjects.mutants:stale_plan_check_removed"
    )
    assert document["source"] == "kernel" and document["steps"]  # the default engine's
    assert main(["replay", saved]) == 1  # still fails on the mutant
    assert "propose-evidence-must-be-current" in capsys.readouterr().out
    assert main(["replay", saved, "--implementation", "replan.controller:Controller"]) == 0


def test_the_state_cap_exits_0_and_says_incomplete(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explore", "--max-states", "300", "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["complete"] is False and report["stopped_by"] == "max_states"
    assert report["traps"] is None
    assert "INCOMPLETE" in captured.err


def test_symmetry_both_reports_both_counts(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explore", "--ids", "2", "--max-depth", "3", "--symmetry", "both", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["engine"] == "kernel"
    comparison = report["symmetry_comparison"]
    assert comparison["states_reduced"] < comparison["states_unreduced"]
    assert comparison["same_verdict"] is True


@pytest.mark.parametrize(
    "arguments",
    [["--max-version", "0"], ["--mutant", "no-such-mutant"], ["--policy", "/no/such/file.toml"]],
)
def test_bad_input_exits_2(arguments: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explore", *arguments]) == 2
    assert capsys.readouterr().err.strip()


@pytest.mark.parametrize(
    "arguments",
    [
        ["--memory", "100"],  # pan's memory limit: SPIN's alone
        ["--engine", "python", "--storage", "exact"],
        ["--engine", "python", "--kernel-source", "k.py"],  # nor a kernel to write
        # the translated engines: refused before SPIN or the kernel is looked for
        ["--engine", "spin"],  # not SPIN's domains
        ["--engine", "spin", "--spin-domains", "--workers", "2"],
        ["--engine", "spin", "--spin-domains", "--keep-going"],
        ["--engine", "spin", "--spin-domains", "--mutant", "no-such-mutant"],
        ["--engine", "spin", "--spin-domains", "--kernel-source", "k.py"],
        ["--engine", "spin", "--spin-domains", "--compare-spin"],  # SPIN against itself
        ["--engine", "kernel", "--spin-domains", "--memory", "100"],
        ["--engine", "kernel", "--spin-domains", "--storage", "exact"],
        ["--engine", "kernel", "--spin-domains", "--mutant", "no-such-mutant"],
        ["--engine", "kernel", "--spin-domains", "--kernel-source", "/no/such/dir/k.py"],
    ],
)
def test_bad_engine_arguments_exit_2_with_one_line(
    arguments: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explore", *arguments]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "error" in error[0]


def test_a_flag_of_spins_alone_names_the_engine_that_takes_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explore", "--spin-domains", "--memory", "100"]) == 2
    error = capsys.readouterr().err
    assert "--memory is not for --engine kernel (it is for --engine spin)" in error


@pytest.mark.parametrize(
    ("arguments", "chosen"),
    [
        (["--spin-domains"], "kernel"),
        (["--spin-domains", "--ids", "2", "--mutant", "stopped-run-revived"], "kernel"),
        (["--spin-domains", "--max-states", "100", "--kernel-source", "k.py"], "kernel"),
        ([], "kernel"),  # the default report's domains
        (["--max-version", "1", "--ids", "1"], "kernel"),  # a product domain
        (["--policy", str(FIRST_POLICY)], "kernel"),  # bounds larger than the default's
        (["--policy", str(FIRST_POLICY), "--workers", "2"], "kernel"),
        (["--spin-domains", "--workers", "2", "--ray", "local"], "kernel"),
        (["--spin-domains", "--keep-going"], "kernel"),
        (["--spin-domains", "--max-depth", "3", "--max-states", "500"], "kernel"),
        (["--spin-domains", "--symmetry", "on"], "kernel"),
        (["--spin-domains", "--symmetry", "both"], "kernel"),
        (["--spin-domains", "--compare-spin"], "kernel"),
        (["--ids", "2", "--symmetry", "off"], "kernel"),
        (["--spin-domains", "--engine", "python"], "python"),
    ],
)
def test_the_default_engine_is_the_kernel_with_every_flag_but_spins(
    arguments: list[str], chosen: str
) -> None:
    from replan.cli import build_parser
    from replan.commands.explore import _engine_name

    args = build_parser().parse_args(["explore", *arguments])
    assert _engine_name(args) == chosen


def test_spin_domains_are_searched_by_the_kernel_with_the_explorers_report(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The committed figures of SPIN's (1, 1) domains are the Python explorer's (its
    --compare-spin run): the kernel, now the default there, gives the same report."""
    assert main(["explore", "--spin-domains", "--json"]) == 0
    kernel = json.loads(capsys.readouterr().out)
    python = json.loads((ROOT / "evidence" / "explore-spin-1-1.json").read_text())
    assert kernel["engine"] == "kernel"
    same = ("states", "transitions", "depth", "complete", "traps", "stop_reasons", "warnings")
    assert {key: kernel[key] for key in same} == {key: python[key] for key in same}
    assert kernel["transitions_reached"] == python["transitions_reached"]
    assert kernel["fired_on_expanded_states"].keys() == python["fired_on_distinct_edges"].keys()


def test_campaign_coverage_vs_explorer_is_printed_and_in_json(
    monkeypatch: pytest.MonkeyPatch, tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`replan campaign --coverage-vs-explorer`, searched by the kernel as `replan
    explore` searches (explorer domains made tiny here, so the test is quick: the
    wiring is what is checked)."""
    from test_explore import TINY

    import replan.verification.engines.kernel as kernel_module

    monkeypatch.setattr(kernel_module, "default_report_domains", lambda policy: (TINY,))
    arguments = ["campaign", "--profile", "ci", "--seed", "1", "--examples", "5", "--steps", "10"]
    arguments += ["--no-database", "--output", str(tmp_path), "--coverage-vs-explorer"]
    assert main([*arguments, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["coverage_vs_explorer"]["engine"] == "kernel"
    figure = document["coverage_vs_explorer"]["domains"]["tiny"]
    assert figure["summary"].startswith("states ") and "transitions " in figure["summary"]
    assert figure["states"]["total"] > 0
    assert main(arguments) == 0
    assert "coverage vs explorer (tiny): states " in capsys.readouterr().out


def test_the_kernel_takes_the_default_report_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``replan explore --engine kernel`` with no domain flags: the default report's
    two domains, with the counts ``replan evidence`` committed from the Python
    explorer."""
    monkeypatch.setenv("REPLAN_KERNEL_CACHE", str(tmp_path / "kernels"))
    assert main(["explore", "--engine", "kernel", "--json", "-o", str(tmp_path)]) == 0
    document = json.loads(capsys.readouterr().out)
    committed = json.loads((ROOT / "evidence" / "verify.json").read_text())
    (explorer,) = [c for c in committed["checks"] if c["name"] == "explorer"]
    counts = ("states", "transitions", "depth", "stop_reasons", "traps")
    assert document["engine"] == "kernel"
    assert {k: document[k] for k in counts} == {k: explorer["details"][k] for k in counts}
    assert len(list((tmp_path / "kernels").glob("*.json"))) == 2  # one per domain, kept


def test_auto_searches_with_the_python_explorer_what_the_kernel_refuses(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A subject the translation cannot read (a ``ValueError`` from the kernel engine)
    is searched by the Python explorer, which stderr says in one line; an error once
    the kernel is made (a ``RuntimeError``: a generator bug) is not hidden that way."""
    from replan.verification.engines.kernel import KernelEngine

    def refuses(*_arguments: object) -> None:
        raise ValueError("Promela: no Promela for a body it does not read")

    monkeypatch.setattr(KernelEngine, "search", refuses)
    assert main(["explore", "--max-states", "300", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["engine"] == "python"
    assert "the kernel cannot search this (Promela: no Promela for a body" in captured.err

    def breaks(*_arguments: object) -> None:
        raise RuntimeError("kernel: no call's function gives the state (a generator bug)")

    monkeypatch.setattr(KernelEngine, "search", breaks)
    assert main(["explore", "--max-states", "300"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "generator bug" in error[0]
