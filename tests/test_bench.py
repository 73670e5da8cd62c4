"""``replan bench``: the JSON it writes, the checks it makes on every episode, and the
measuring method (interleaving, per-sample ratios, the memory pass). No timing
assertions: the figures are measured, never asserted."""

from __future__ import annotations

import dataclasses
import gc
import json
import types
from pathlib import Path
from typing import Any, ClassVar

import pytest

from replan.cli import main
from replan.controller import Controller, ExecuteResult, StopReason
from replan.verification.bench import controller
from replan.verification.bench import measure as measure_module
from replan.verification.bench import run as bench
from replan.verification.bench import table as table_module
from replan.verification.bench import tools as tools_module
from replan.verification.bench.controller import (
    GENERATED,
    HANDWRITTEN,
    IMPLEMENTATIONS,
    STATEMACHINE,
    VARIANTS,
    WORKLOAD,
)
from replan.verification.bench.measure import Settings
from replan.verification.bench.middleware import DIFFERENCES
from replan.verification.subjects.handwritten import HandwrittenController

TINY = Settings(samples=2, episodes=5, warmups=1, reference_episodes=1, allocation_episodes=3)
NAMES = {"generated", "hand-written", "python-statemachine"}


def run_quiet(settings: Settings, implementations: Any = IMPLEMENTATIONS) -> dict[str, Any]:
    return bench.run_bench(
        dataclasses.replace(settings, tools=False), measure_module._quiet, implementations
    )


def test_quick_run_writes_json_with_all_three_implementations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "results.json"
    assert main(["bench", "--quick", "--samples", "1", "-o", str(target)]) == 0
    document = json.loads(target.read_text())
    assert document["quick"] is True and document["all_episodes_completed"] is True
    assert set(document["workloads"]) == {variant.name for variant in VARIANTS}
    for workload in document["workloads"].values():
        assert set(workload["implementations"]) == NAMES
        for figures in workload["implementations"].values():
            assert figures["episodes_run"] > 0
            assert figures["episodes_completed"] == figures["episodes_run"]
            assert len(figures["samples_us"]) == document["method"]["samples"]
            assert figures["min_us"] <= figures["median_us"] <= figures["max_us"]
            assert len(figures["wall_samples_us"]) == document["method"]["samples"]
            memory = figures["memory"]
            assert memory["episodes_completed"] == memory["episodes_traced"]
            assert memory["peak_bytes"] >= memory["retained_bytes"] > 0
        assert set(workload["ratios"]) == {
            "python-statemachine/generated",
            "generated/hand-written",
            "python-statemachine/hand-written",
        }
    for key in ("python", "cpu", "cpus"):
        assert document["environment"][key]
    assert document["date"]
    assert {goal["goal"].split()[0] for goal in document["goals"]} >= {
        "python-statemachine/generated",
        "generated/hand-written",
    }
    assert set(document["tools"]) == {
        "explorer",
        "campaign",
        "prove",
        "executor",
        "middleware",
        "durable",
        "explore",
        "scale",
        "boundary",
    }
    for opt_in in ("explore", "scale", "boundary"):  # --explore, --scale, --tool boundary
        assert document["tools"][opt_in]["status"] == "skipped"
    for name, figures in document["tools"].items():
        if name not in ("explore", "scale", "boundary"):
            assert figures["status"] in {"measured", "absent"}, (name, figures)
    executor = document["tools"]["executor"]
    if executor["status"] == "measured":
        for numbers in executor["workloads"].values():
            assert numbers["min_us"] <= numbers["median_us"] <= numbers["max_us"]
    middleware = document["tools"]["middleware"]
    if middleware["status"] == "measured":
        assert set(middleware["differences"]) == {name for name, *_ in DIFFERENCES}
    durable = document["tools"]["durable"]
    if durable["status"] == "measured":  # logged calls beside the unlogged one
        assert set(durable["ratio_to_unlogged"]) == {"logged in memory", "logged in SQLite"}
        assert {figures["calls"] for figures in durable["restore"].values()} == {1000}
    memory = document["tools"]["campaign"]["memory"]  # both ways, each in its own process
    for way in ("bounded", "one_engine"):
        assert memory[way]["operations"] > 0
        assert len(memory[way]["growth_bytes_per_operation"]) == 1
    assert memory["bounded"]["examples_per_engine"] < memory["examples"]  # really split
    assert memory["one_engine"]["examples_per_engine"] == memory["examples"]
    table = capsys.readouterr().out
    assert "generated/hand-written" in table and str(target) in table
    assert "the unlogged call (wall)" in table
    assert "B/operation" in table


def test_tool_measures_only_the_named_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "results.json"
    code = main(["bench", "--quick", "--samples", "1", "--tool", "durable", "-o", str(target)])
    assert code == 0
    tools = json.loads(target.read_text())["tools"]
    assert {name for name, figures in tools.items() if figures["status"] != "skipped"} == {
        "durable"
    }
    assert "the unlogged call (wall)" in capsys.readouterr().out
    assert main(["bench", "--quick", "--tool", "nope"]) == 2


def test_json_flag_prints_the_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "results.json"
    code = main(["bench", "--quick", "--no-tools", "--samples", "1", "-o", str(target), "--json"])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(target.read_text())
    assert all(figures["status"] == "skipped" for figures in printed["tools"].values())


class NeverCompletes(HandwrittenController):
    """Deliberately broken: its commit executes but the run never stops Completed."""

    __slots__ = ()

    def _execute(self, plan_id: str) -> ExecuteResult:
        result = super()._execute(plan_id)
        if self._stop_reason is StopReason.COMPLETED:
            self._stop_reason = None
        return result


def test_an_episode_that_does_not_complete_is_caught() -> None:
    broken = dataclasses.replace(HANDWRITTEN, override=NeverCompletes)
    document = run_quiet(TINY, (GENERATED, broken, STATEMACHINE))
    assert document["all_episodes_completed"] is False
    assert document["incomplete"] == [f"{v.name}/hand-written" for v in VARIANTS]
    figures = document["workloads"][WORKLOAD]["implementations"]["hand-written"]
    assert figures["episodes_completed"] == 0 and figures["episodes_run"] > 0


def test_samples_are_interleaved_round_by_round() -> None:
    """Every round times one sample of every series, in an order rotated per round, so
    drift on a shared machine hits all series alike."""
    built: list[str] = []

    def logging(implementation: controller.Implementation) -> controller.Implementation:
        def make() -> Controller:
            built.append(implementation.name)
            return Controller()

        return dataclasses.replace(implementation, override=make)

    settings = Settings(samples=3, episodes=1, warmups=1, reference_episodes=1)
    series = measure_module.measure_time(
        settings, measure_module._quiet, [logging(i) for i in IMPLEMENTATIONS]
    )
    per_round = len(VARIANTS) * len(IMPLEMENTATIONS)
    rounds = [built[i : i + per_round] for i in range(0, len(built), per_round)]
    assert len(rounds) == settings.warmups + settings.samples
    first = rounds[0]
    for index, order in enumerate(rounds):
        shift = index % per_round
        assert order == first[shift:] + first[:shift]
    assert all(len(entry.ns_per_episode) == settings.samples for entry in series)


def test_ratios_are_computed_sample_by_sample() -> None:
    summary = measure_module._ratio_summary([2.0, 9.0, 4.0], [1.0, 3.0, 1.0])
    assert summary["per_sample"] == [2.0, 3.0, 4.0]
    assert summary["median"] == 3.0  # the ratio of the medians would say 4.0
    assert (summary["min"], summary["max"]) == (2.0, 4.0)


class HoardsMemory(Controller):
    """Allocates 100 kB more per episode than the generated controller."""

    __slots__ = ("_hoard",)

    def __init__(self) -> None:
        super().__init__()
        self._hoard = bytearray(100_000)


def test_memory_pass_counts_what_an_episode_allocates() -> None:
    variant = VARIANTS[0]
    plain = measure_module.measure_memory(variant, GENERATED, 5)
    hoarding = measure_module.measure_memory(
        variant, dataclasses.replace(GENERATED, override=HoardsMemory), 5
    )
    assert plain["episodes_completed"] == 5
    assert plain["peak_bytes"] >= plain["retained_bytes"] > 500
    assert hoarding["retained_bytes"] - plain["retained_bytes"] >= 100_000


class SeesTheCollector(Controller):
    """Records how many of the host's objects the collector has set aside."""

    __slots__ = ()
    frozen: ClassVar[list[int]] = []

    def __init__(self) -> None:
        super().__init__()
        SeesTheCollector.frozen.append(gc.get_freeze_count())


def test_the_host_processs_objects_are_set_aside_while_measuring_and_given_back() -> None:
    """The collections before every sample walk only what the measured code made,
    never the heap of the process running the bench (here a test session's)."""
    host = [[number] for number in range(50_000)]
    seeing = dataclasses.replace(GENERATED, override=SeesTheCollector)
    SeesTheCollector.frozen.clear()
    measure_module.measure_time(TINY, implementations=(seeing,))
    measure_module.measure_memory(VARIANTS[0], seeing, 2)
    assert SeesTheCollector.frozen and min(SeesTheCollector.frozen) >= len(host)
    assert gc.get_freeze_count() == 0


def test_a_host_that_froze_objects_of_its_own_keeps_them_frozen() -> None:
    """Giving back what the bench froze must not give back what the host froze (a
    pre-forking server's shared heap)."""
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        measure_module.measure_memory(VARIANTS[0], GENERATED, 2)
        assert gc.get_freeze_count() >= frozen > 0
    finally:
        gc.unfreeze()


def test_a_missing_tool_is_absent_and_a_failing_one_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def fails(settings: Settings, module: types.ModuleType) -> dict[str, Any]:
        raise RuntimeError("no such function")

    monkeypatch.setattr(
        tools_module,
        "TOOLS",
        {
            "missing": ("replan.verification.no_such_tool_module", fails),
            "failing": ("replan.verification.subjects.handwritten", fails),
        },
    )
    figures = tools_module.tool_figures(TINY)
    assert figures["missing"] == {
        "status": "absent",
        "module": "replan.verification.no_such_tool_module",
    }
    assert figures["failing"]["status"] == "error"
    assert "no such function" in figures["failing"]["error"]


def test_the_table_shows_every_implementation_ratio_and_goal() -> None:
    document = run_quiet(TINY)
    table = table_module.render_table(document)
    for name in NAMES:
        assert name in table
    assert "python-statemachine/generated" in table and "goal >= 300" in table
    assert "EPISODES THAT DID NOT COMPLETE" not in table


@pytest.mark.parametrize(
    "arguments",
    [["--samples", "0"], ["--episodes", "many"], ["--warmups", "-1"]],
)
def test_bad_arguments_exit_2(arguments: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--quick", *arguments]) == 2
    assert "error" in capsys.readouterr().err


def test_output_that_is_a_directory_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "--quick", "-o", str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "is a directory" in error[0]


def test_the_explore_figures_are_opt_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """`replan bench` without --explore never starts the quarter-hour explorer run;
    every other tool is measured, and naming the opt-in tool measures it."""
    measured: list[str] = []

    def measure(name: str) -> Any:
        def figure(settings: Settings, module: Any) -> dict[str, Any]:
            measured.append(name)
            return {}

        return figure

    tools = {name: (module, measure(name)) for name, (module, _) in tools_module.TOOLS.items()}
    monkeypatch.setattr(tools_module, "TOOLS", tools)
    assert "explore" in tools_module.OPT_IN
    figures = tools_module.tool_figures(measure_module.QUICK)
    assert figures["explore"]["status"] == "skipped"
    assert "explore" not in measured and set(measured) == set(tools) - tools_module.OPT_IN
    measured.clear()
    named = tools_module.tool_figures(
        dataclasses.replace(measure_module.QUICK, only_tools=("explore",))
    )
    assert measured == ["explore"] and named["explore"]["status"] == "measured"


def test_one_and_two_workers_are_measured_side_by_side_without_spin(tmp_path: Path) -> None:
    """Without SPIN's anchor the comparison says why, and the explorer's figures (one
    worker, two) stand, with the same counts."""
    from replan.verification.bench.explore import explore_lines, spin_comparison
    from replan.verification.core.domains import product_domains

    domains = product_domains(1, 1)
    figures = spin_comparison(1, 1, 1, lambda _: None, anchor=tmp_path, domains=domains)
    assert figures["spin"]["status"] == "absent" and "run_spin.sh" in figures["spin"]["why"]
    one, two = figures["explore_1_workers"], figures["explore_2_workers"]
    assert one["states"] == two["states"] > 1000 and one["held"] and two["held"]
    assert figures["same_counts_across_workers"] and figures["two_workers_speedup"] > 0
    lines = explore_lines({"spin": [figures], "first_policy": None})
    assert any("2 workers against 1" in line for line in lines)
    assert any("SPIN" in line and "absent" in line for line in lines)
    # product domains offer calls that differ from state to state: the kernel takes
    # them too, with the explorer's counts
    assert figures["kernel"]["same_counts_as_python_explorer"] is True


def test_the_kernel_is_measured_beside_the_explorer_with_the_same_counts(tmp_path: Path) -> None:
    from conftest import small_domains

    from replan.verification.bench.explore import explore_lines, spin_comparison

    figures = spin_comparison(1, 1, 2, lambda _: None, anchor=tmp_path, domains=small_domains())
    kernel, one = figures["kernel"], figures["explore_1_workers"]
    assert kernel["held"] and len(kernel["samples_s"]) == 2 and kernel["build_seconds"] > 0
    assert (kernel["states"], kernel["transitions"]) == (one["states"], one["transitions"])
    assert kernel["same_counts_as_python_explorer"]
    # and over two shards, with the same counts
    sharded = figures["kernel_2_shards"]
    assert sharded["held"] and len(sharded["samples_s"]) == 2
    assert (sharded["states"], sharded["transitions"]) == (one["states"], one["transitions"])
    lines = explore_lines({"spin": [figures], "first_policy": None})
    assert any("--engine kernel" in line and f"{kernel['states']:,}" in line for line in lines)
    assert any("--workers 2" in line and f"{sharded['states']:,}" in line for line in lines)


def test_the_campaign_is_measured_against_a_bare_lockstep_machine() -> None:
    from replan.verification.bench.explore import campaign_throughput, explore_lines

    figures = campaign_throughput(2, lambda _: None, examples=3)
    assert figures["examples"] >= 3 and len(figures["samples"]["campaign"]) == 2
    ours = figures["campaign_operations_per_second"]
    bare = figures["bare_lockstep_operations_per_second"]
    assert ours > 0 and bare > 0
    assert figures["campaign_to_bare"] == pytest.approx(ours / bare, rel=0.05)
    lines = explore_lines({"spin": [], "campaign": figures, "first_policy": None})
    assert any("bare Hypothesis lockstep machine" in line for line in lines)


@pytest.mark.parametrize("ray", [True, False])
def test_the_scale_figures_compare_workers_and_ray(
    monkeypatch: pytest.MonkeyPatch, ray: bool
) -> None:
    """`replan bench --scale`: the campaign on 1, 2, 4 local workers and, when Ray is
    installed, 2 Ray tasks; a first failure on each; the explorer in one process, two
    and two Ray actors, the counts compared. The runs are faked here (the campaign's
    workers, Ray's tasks and the sharded explorer run for real in tests/test_scale.py);
    what is pinned is what the bench runs, in which order, and what it reports."""
    from replan.verification.bench import scale
    from replan.verification.runtime import ray_cluster

    ran: list[tuple[str, int, bool]] = []

    def campaign(workers: int, address: str | None, examples: int | None) -> dict[str, Any]:
        ran.append(("campaign", workers, address is not None))
        assert examples == 40  # --quick: a smoke run
        return {
            "workers": workers,
            "ray": address is not None,
            "examples": examples,
            "operations": 100 * workers,
            "seconds": 1.0,
            "operations_per_second": 100,
        }

    def first_failure(workers: int, address: str | None) -> dict[str, Any]:
        ran.append(("first failure", workers, address is not None))
        return {
            "workers": workers,
            "ray": address is not None,
            "found": "execute-step-limit-stops",
            "seconds": 2.0,
        }

    def explorer(workers: int, on_ray: bool, domains: Any) -> dict[str, Any]:
        ran.append(("explorer", workers, on_ray))
        states = 7 if workers == 1 else 7 + on_ray  # Ray's shards disagree, say
        return {
            "workers": workers,
            "ray": on_ray,
            "states": states,
            "transitions": 9,
            "seconds": 0.5,
            "held": True,
        }

    monkeypatch.setattr(scale, "_campaign", campaign)
    monkeypatch.setattr(scale, "_first_failure", first_failure)
    monkeypatch.setattr(scale, "_explorer", explorer)
    monkeypatch.setattr(ray_cluster, "available", lambda: ray)
    monkeypatch.setattr(ray_cluster, "connect", lambda address: None)
    monkeypatch.setattr(ray_cluster, "shutdown", lambda: None)
    figures = scale.scale_figures(True, lambda _: None)
    local = [
        ("campaign", 1, False),
        ("first failure", 1, False),
        ("campaign", 2, False),
        ("first failure", 2, False),
        ("campaign", 4, False),
        ("first failure", 4, False),
    ]
    on_ray = [("campaign", 2, True), ("first failure", 2, True)] if ray else []
    explorers = [
        ("explorer", 1, False),
        ("explorer", 2, False),
        *([("explorer", 2, True)] if ray else []),
    ]
    assert ran == [*local, *on_ray, *explorers]
    assert figures["explorer_same_counts"] is not ray
    lines = "\n".join(scale.scale_lines(figures))
    assert ("Ray tasks" in lines) is ray
    assert f"same counts everywhere: {'NO' if ray else 'yes'}" in lines
    if not ray:
        assert figures["ray"].startswith("absent")


def test_a_child_started_from_a_large_bench_reports_its_own_peak_rss() -> None:
    """Linux carries a process's peak RSS across exec: a command forked straight from
    a bench holding 250 MB reported 250 MB. Started through the small launcher, a
    command allocating 50 MB reports about that."""
    import sys

    from replan.verification.bench.explore import _peak_rss_of

    held = [bytearray(10**6) for _ in range(250)]
    code, seconds, peak = _peak_rss_of([sys.executable, "-c", "x = bytearray(50 * 10**6)"])
    assert code == 0 and seconds > 0
    assert 50 * 10**6 < peak < 150 * 10**6, peak
    assert len(held) == 250
    assert _peak_rss_of([sys.executable, "-c", "raise SystemExit(3)"])[0] == 3


def test_the_boundary_figures_are_with_against_without_side_by_side(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`replan bench --tool boundary` runs verify with and without the boundary check,
    interleaved, and reports both medians, their difference and ratio against the
    limit (the runs are faked here: the real ones take minutes)."""
    from replan.verification.bench import boundary

    order: list[bool] = []

    def one(with_boundary: bool, scratch: Path) -> tuple[float, float | None, bool]:
        order.append(with_boundary)
        return (40.0, 12.0, True) if with_boundary else (30.0, None, True)

    monkeypatch.setattr(boundary, "_one", one)
    figures = boundary.boundary_figures(False, lambda _text: None)
    assert order == [True, False] * 3
    assert figures["with_median_s"] == 40.0 and figures["without_median_s"] == 30.0
    assert figures["added_s"] == 10.0 and figures["ratio"] == 1.33
    assert figures["check_median_s"] == 12.0 and figures["within_limit"] is True
    assert "goal <= 15 s: met" in "\n".join(boundary.boundary_lines(figures))
    monkeypatch.setattr(
        boundary, "_one", lambda b, s: (50.0, 20.0, True) if b else (30.0, None, True)
    )
    assert boundary.boundary_figures(True, lambda _text: None)["within_limit"] is False
    # a check that adds nothing measurable (run beside the explorer) adds "0.0 s", not "-0.0 s"
    monkeypatch.setattr(
        boundary, "_one", lambda b, s: (14.30, 3.9, True) if b else (14.34, None, True)
    )
    nothing = boundary.boundary_figures(True, lambda _text: None)
    assert "adds 0.0 s" in "\n".join(boundary.boundary_lines(nothing))


def test_the_default_policy_verify_is_measured_with_the_kernel_generated_kept_and_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The runs are faked (each is a whole `replan verify`, about 10 to 20 s): what is
    pinned is what is run, in which order, with which kernel cache, and how the
    figures are read off them."""
    from replan.verification.bench import explore

    ran: list[tuple[str, str]] = []
    walls = {
        "generated": iter([14.0, 16.0, 13.0]),
        "kept": iter([10.0, 11.0, 9.0]),
        "python": iter([14.0, 14.0, 15.0]),
    }
    caches: dict[str, set[str]] = {way: set() for way in walls}

    def fake(command: list[str], environment: dict[str, str]) -> tuple[int, float, int]:
        assert command[command.index("--profile") + 1] == "ci" and "--policy" not in command
        way = "python" if "--engine" in command else ("kept" if len(ran) % 3 else "generated")
        cache = environment["REPLAN_KERNEL_CACHE"]
        if way == "kept" and not caches["kept"]:  # the run that keeps the kernel
            caches["kept"].add(cache)
            Path(cache, "kernel.json").write_text("{}")
            return 0, 99.0, 0
        ran.append((way, cache))
        caches[way].add(cache)
        return 0, next(walls[way]), {"generated": 250, "kept": 260, "python": 190}[way] * 2**20

    monkeypatch.setattr(explore, "_peak_rss_of", fake)
    figures = explore.default_policy_verify(3, lambda _: None)
    assert [way for way, _ in ran] == ["generated", "kept", "python"] * 3
    # a fresh cache for every generated run; one, kept, for every kept run
    assert len(caches["generated"]) == 3 and len(caches["kept"]) == 1
    assert (figures["generated_median_s"], figures["kept_median_s"]) == (14.0, 10.0)
    assert figures["python_median_s"] == 14.0 and figures["python_to_generated"] == 1.0
    assert figures["within_goal"] and figures["within_memory_goal"]
    assert (figures["generated_peak_rss_mb"], figures["python_peak_rss_mb"]) == (250, 190)
    lines = explore.explore_lines({"spin": [], "default_policy": figures})
    assert any("median 14.0 s with the kernel generated (250 MB)" in line for line in lines)


@pytest.mark.parametrize(("against_s", "met"), [(13.0, True), (30.0, False)])
def test_against_is_timed_interleaved_with_verify_alone_and_judged_by_its_ratio(
    monkeypatch: pytest.MonkeyPatch, against_s: float, met: bool
) -> None:
    """`--against` the first policy's earlier version runs with the kept kernel, turn
    about with the run alone; the ratio is of the two medians, and the goal (at most
    2x) is judged on it. The runs are faked: what is pinned is which commands run, in
    which order, and what the figure and its line say."""
    from replan.verification.bench import explore

    ran: list[list[str]] = []
    alone_s = iter([12.0, 11.0, 14.0])
    against_runs = iter([against_s, against_s + 1, against_s - 1])

    def fake(command: list[str], environment: dict[str, str] | None = None) -> tuple:
        ran.append(command)
        assert environment == {"REPLAN_KERNEL_CACHE": "kept"}
        seconds = next(against_runs if "--against" in command else alone_s)
        return 0, seconds, 400 * 2**20

    monkeypatch.setattr(explore, "_peak_rss_of", fake)
    kept, against = explore._kept_and_against(["verify"], {"REPLAN_KERNEL_CACHE": "kept"}, 3, print)
    assert [("--against" in c) for c in ran] == [False, True] * 3
    assert all(c[-1] == str(explore.FIRST_POLICY_EARLIER) for c in ran if "--against" in c)
    assert kept["seconds"] == 12.0 and against["seconds"] == against_s
    assert against["to_verify_alone"] == round(against_s / 12.0, 2)
    assert against["within_goal"] is met
    first = {
        "command": "replan verify",
        "exit_code": 0,
        "seconds": 27.0,
        "peak_rss_mb": 900,
        "kept_kernel": kept,
        "against": against,
        "check_seconds": {},
        "explorer": "",
        "campaign_transitions_covered": 48,
        "campaign_transitions_coverable": 48,
    }
    lines = explore.explore_lines({"spin": [], "first_policy": first})
    shown = next(line for line in lines if "--against" in line)
    assert f"({against['to_verify_alone']}x; goal <= 2x: {'met' if met else 'MISSED'})" in shown


def test_the_first_policys_earlier_version_differs_only_in_a_prerequisite() -> None:
    """What `--against` is timed on is a real change a user makes: one prerequisite."""
    from replan.controller.policy import load_policy
    from replan.verification.bench.explore import FIRST_POLICY, FIRST_POLICY_EARLIER
    from replan.verification.engines.prove.engine import policy_changes

    changes = policy_changes(load_policy(FIRST_POLICY_EARLIER), load_policy(FIRST_POLICY))
    changed = sorted(key for key, value in changes.items() if value)
    assert changed == ["requires_changed", "workflow_changed"]


def test_generating_apart_is_measured_against_in_turn_on_the_same_domains(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The figure times the real `Apart` and the in-process loop over the default
    report's domains, turn about; the generation itself is faked (a small kernel, made
    once) so that what is pinned is what is timed and how it is reported."""
    from conftest import small_domains

    from replan.controller.policy import DEFAULT_POLICY
    from replan.verification.bench import generation
    from replan.verification.core.subject import PROJECT
    from replan.verification.translate.kernel import generate

    small = generate(DEFAULT_POLICY, small_domains(), PROJECT.model, PROJECT.model_class)
    asked: list[str] = []

    def fake(domains: object) -> object:
        asked.append(domains.name)  # type: ignore[attr-defined]
        return small

    monkeypatch.setattr(generation, "_generate", fake)
    figure = generation.generation_apart(2, lambda _: None)
    assert figure["domains"] == ["observations", "plans"]
    assert len(figure["samples_s"]["apart"]) == len(figure["samples_s"]["in_turn"]) == 2
    # in this process only the rounds in turn generate (apart, the children do)
    assert asked == ["observations", "plans"] * 2
    ratio = figure["in_turn_s"] / figure["apart_s"]
    assert figure["in_turn_to_apart"] == pytest.approx(ratio, abs=0.01)
    (line,) = generation.generation_lines(figure)
    assert f"apart {figure['apart_s']} s, in turn {figure['in_turn_s']} s" in line


def test_a_policy_with_no_earlier_version_is_timed_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    from replan.verification.bench import explore

    ran: list[list[str]] = []

    def fake(command: list[str], environment: dict[str, str] | None = None) -> tuple:
        ran.append(command)
        return 0, 10.0, 300 * 2**20

    monkeypatch.setattr(explore, "_peak_rss_of", fake)
    kept, against = explore._kept_and_against(["verify"], {}, 1, print, earlier=None)
    assert against is None and ran == [["verify"]] and kept["seconds"] == 10.0


def test_the_deploy_agent_is_the_size_the_goal_names() -> None:
    """The goal's realistic policy: three evidence keys and four steps."""
    from replan.controller.policy import load_policy
    from replan.verification.bench.explore import DEPLOY_AGENT

    policy = load_policy(DEPLOY_AGENT)
    assert (len(policy.keys), len(policy.steps)) == (3, 4)
