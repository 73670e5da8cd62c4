"""The explorer's figures, measured side by side in one run: ``replan bench --explore``.

Owns: what is compared together, on one machine in one run: the
explorer's transitions per second against SPIN's on the same model and domains
((V, K) = (1, 1) and (1, 2), with SPIN's counts beside ours), one worker against two,
a new user's first policy (``tests/policies/first-policy.toml``: three keys, a
completing step requiring two) through ``replan verify --profile ci`` as a user runs
it, with its wall time and peak memory, the default policy through the same command
with its checks over two processes and in one, and the campaign's operations per second at
``ci`` against a bare Hypothesis lockstep machine. Leaves the searches to
``verification/engines/explore/engine.py`` and ``verification/engines/explore/sharded.py``, SPIN to
``verification/engines/spin/anchor.py``.

Why these figures are measured and never asserted: the machine is shared and noisy,
so the bench interleaves the engines round by round and quotes medians and the
ratios of medians; a goal ("within 5x of SPIN") is read off the figures, not
enforced by a timed test.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from replan.controller.policy import DEFAULT_POLICY
from replan.verification.bench.generation import generation_apart, generation_lines
from replan.verification.runtime.checkout import SPIN_ANCHOR, checkout_root
from replan.verification.runtime.interrupt import say

#: A new user's first policy, verified as they would verify it.
FIRST_POLICY = checkout_root() / "tests" / "policies" / "first-policy.toml"
#: The same policy before a change its user made: what ``--against`` compares it with.
FIRST_POLICY_EARLIER = FIRST_POLICY.with_name("first-policy-earlier.toml")
#: A deploy agent's policy: three keys and four steps, the size the goal names.
DEPLOY_AGENT = FIRST_POLICY.with_name("deploy-agent.toml")
#: (V, K) domains compared with SPIN, and the interleaved rounds of each.
DOMAINS: tuple[tuple[int, int, int], ...] = ((1, 1, 3), (1, 2, 1))
QUICK_DOMAINS: tuple[tuple[int, int, int], ...] = ((1, 1, 1),)
WORKERS = (1, 2)
#: ``replan verify``'s campaign seed: the campaign measured is the one verify runs
VERIFY_SEED = 0

Progress = Callable[[str], None]


def stderr_progress(message: str) -> None:
    say(f"replan bench: {message}")


def _explore_figure(domains: Any, workers: int) -> dict[str, Any]:
    from replan.verification.engines.explore.engine import explore

    started = time.perf_counter()
    result = explore(DEFAULT_POLICY, domains, workers=workers)
    seconds = time.perf_counter() - started
    return {
        "states": result.states,
        "transitions": result.transitions,
        "seconds": seconds,
        "held": result.ok and result.complete,
    }


def _spin_figure(anchor: Path, versions: int, ids: int) -> dict[str, Any]:
    from replan.verification.engines.spin.anchor import run_spin

    run = run_spin(anchor, versions, ids)
    return {
        "states": run.states,
        "transitions": run.transitions,
        "seconds": run.seconds,
        "held": run.errors == 0,
    }


def _spin_engine_figure(domains: Any) -> dict[str, Any]:
    """``replan explore --engine spin`` on ``domains``: the declaration translated to
    Promela and searched by SPIN (the search timed; translating and compiling apart)."""
    from replan.verification.core.subject import PROJECT
    from replan.verification.engines.spin.engine import explore_spin

    result = explore_spin(DEFAULT_POLICY, domains, PROJECT)
    return {
        "states": result.states,
        "transitions": result.transitions,
        "seconds": result.details["seconds"]["search"],
        "translate_seconds": round(result.details["seconds"]["translate"], 2),
        "compile_seconds": round(result.details["seconds"]["compile"], 2),
        "held": result.ok and result.complete,
    }


def _kernel_figure(kernel: Any, shards: int = 1) -> dict[str, Any]:
    """One search of the generated kernel (built once per domain, outside the rounds),
    in this process or over ``shards`` forked processes."""
    from replan.verification.engines.kernel import search
    from replan.verification.engines.kernel.sharded import search_sharded

    started = time.perf_counter()
    if shards == 1:
        found = search(kernel, None, lambda _message: None)
    else:
        sharded = search_sharded(kernel, shards, None, None, lambda _message: None)
        if sharded is None:  # a violation: the serial search says which
            return _kernel_figure(kernel)
        found = sharded
    seconds = time.perf_counter() - started
    return {
        "states": found.states,
        "transitions": found.transitions,
        "seconds": seconds,
        "held": not found.violations and found.complete,
    }


def _median(samples: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = statistics.median(s["seconds"] for s in samples)
    first = samples[0]
    return {
        "states": first["states"],
        "transitions": first["transitions"],
        "seconds": round(seconds, 3),
        "samples_s": [round(s["seconds"], 3) for s in samples],
        "transitions_per_second": round(first["transitions"] / max(seconds, 1e-9)),
        "held": all(s["held"] for s in samples),
    }


def _from_cache(generated: Any, domains: Any) -> float:
    """Seconds to take the kernel from a cache entry (read, checked and compiled), as
    a second ``replan explore --engine kernel`` on the same inputs does."""
    from replan.verification.core.subject import PROJECT
    from replan.verification.engines.kernel import kernel_for
    from replan.verification.translate.kernel_cache import KernelCache, cache_key

    with tempfile.TemporaryDirectory(prefix="replan-kernel-cache-") as directory:
        cache = KernelCache(Path(directory))
        cache.store(cache_key(DEFAULT_POLICY, domains, PROJECT.model), generated)
        started = time.perf_counter()
        _kernel, provenance = kernel_for(DEFAULT_POLICY, domains, PROJECT, cache, _silent)
        seconds = time.perf_counter() - started
    if provenance["status"] != "reused":
        raise RuntimeError(f"explore bench: the kept kernel was not reused: {provenance}")
    return round(seconds, 2)


def _silent(_message: str) -> None:
    """Progress nobody reads."""


def spin_comparison(
    versions: int,
    ids: int,
    rounds: int,
    progress: Progress,
    *,
    anchor: Path = SPIN_ANCHOR,
    domains: Any = None,
) -> dict[str, Any]:
    """SPIN, the generated kernel's search, and the explorer with one worker and with
    two, interleaved ``rounds`` times on SPIN's (V, K) domains (or ``domains``);
    medians, and the per-transition ratios. Without SPIN (or its anchor directory)
    its figure says why."""
    from replan.verification.core.domains import spin_domains
    from replan.verification.core.subject import PROJECT
    from replan.verification.translate.kernel import compiled, generate

    domains = spin_domains(versions, ids) if domains is None else domains
    progress(f"explore bench: (V, K) = ({versions}, {ids}), generating the kernel")
    started = time.perf_counter()
    kernel: Any = None
    why_not: dict[str, str | None] = {"spin": None, "kernel": None, "kernel_2_shards": None}
    generated: Any = None
    try:
        generated = generate(DEFAULT_POLICY, domains, PROJECT.model, PROJECT.model_class)
        kernel = compiled(generated, DEFAULT_POLICY, domains, PROJECT.model)
    except ValueError as error:  # domains whose calls depend on the state
        why_not["kernel"] = why_not["kernel_2_shards"] = str(error)
    kernel_build_seconds = time.perf_counter() - started
    kernel_cached_seconds = None if generated is None else _from_cache(generated, domains)
    samples: dict[str, list[dict[str, Any]]] = {"spin": [], "kernel": [], "kernel_2_shards": []}
    samples.update({f"explore_{w}_workers": [] for w in WORKERS})
    for round_number in range(rounds):
        progress(f"explore bench: (V, K) = ({versions}, {ids}), round {round_number + 1}/{rounds}")
        if why_not["spin"] is None:
            try:
                samples["spin"].append(_spin_figure(anchor, versions, ids))
            except (OSError, ValueError, subprocess.TimeoutExpired) as error:
                why_not["spin"] = str(error)
        if kernel is not None:
            samples["kernel"].append(_kernel_figure(kernel))
            samples["kernel_2_shards"].append(_kernel_figure(kernel, shards=2))
        for workers in WORKERS:
            samples[f"explore_{workers}_workers"].append(_explore_figure(domains, workers))
    figures: dict[str, Any] = {"versions": versions, "ids": ids, "rounds": rounds}
    for name, taken in samples.items():
        figures[name] = _median(taken) if taken else {"status": "absent", "why": why_not[name]}
    one = figures["explore_1_workers"]
    if kernel is not None:
        figures["kernel"]["build_seconds"] = round(kernel_build_seconds, 2)
        figures["kernel"]["cached_build_seconds"] = kernel_cached_seconds
        figures["kernel"]["same_counts_as_python_explorer"] = (
            figures["kernel"]["states"],
            figures["kernel"]["transitions"],
        ) == (one["states"], one["transitions"])
    # The translated model once per domain (compiling pan takes longer than its search).
    progress(f"explore bench: (V, K) = ({versions}, {ids}), replan explore --engine spin")
    figures["spin_engine"] = _spin_engine_compared(domains, one)
    _compare(figures)
    return figures


def _spin_engine_compared(domains: Any, one: dict[str, Any]) -> dict[str, Any]:
    """``replan explore --engine spin`` once, with its rate and whether it stores the
    states the one-worker explorer does; absent, with why, when it cannot run."""
    try:
        engine = _spin_engine_figure(domains)
    except (OSError, ValueError, RuntimeError) as error:
        return {"status": "absent", "why": str(error)}
    engine["transitions_per_second"] = round(engine["transitions"] / max(engine["seconds"], 1e-9))
    engine["same_states_as_python_explorer"] = engine["states"] == one["states"]
    return engine


def _compare(figures: dict[str, Any]) -> None:
    """The cross-checks and ratios: the two-worker speedup, the same counts across
    workers and against SPIN, and how much faster SPIN is per transition."""
    one, two = figures["explore_1_workers"], figures["explore_2_workers"]
    figures["two_workers_speedup"] = round(one["seconds"] / max(two["seconds"], 1e-9), 2)
    figures["same_counts_across_workers"] = (one["states"], one["transitions"]) == (
        two["states"],
        two["transitions"],
    )
    spin = figures["spin"]
    if "seconds" in spin:
        figures["same_states_as_spin"] = spin["states"] == one["states"]
        for name in ("kernel", "kernel_2_shards", "explore_1_workers", "explore_2_workers"):
            if "seconds" not in figures[name]:
                continue
            ours = figures[name]["transitions_per_second"]
            figures[name]["spin_faster_per_transition"] = round(
                spin["transitions_per_second"] / max(ours, 1), 1
            )


#: Runs the measured command and prints its peak RSS. Linux carries a process's peak
#: RSS across exec, so a command forked straight from this (large) process would
#: report this process's size; forked from this small launcher it reports its own.
_LAUNCHER = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def _peak_rss_of(
    command: list[str], environment: dict[str, str] | None = None
) -> tuple[int, float, int]:
    """(exit code, wall seconds, peak RSS in bytes) of a child process (``environment``
    added to this one's)."""
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, *command],
        capture_output=True,
        text=True,
        env={**os.environ, **(environment or {})},
        check=True,
    )
    seconds = time.perf_counter() - started
    code, peak_kb = (int(part) for part in completed.stdout.split())
    return code, seconds, peak_kb * 1024


#: The goal for a realistic user policy through ``replan verify --profile ci``.
FIRST_POLICY_GOAL_S = 30.0
#: The goal for ``--against`` an earlier version: at most this many times ``verify`` alone.
AGAINST_GOAL_RATIO = 2.0


def user_policy_verify(
    progress: Progress,
    policy: Path = FIRST_POLICY,
    earlier: Path | None = FIRST_POLICY_EARLIER,
    samples: int = 3,
) -> dict[str, Any]:
    """``replan verify --profile ci`` on a user's ``policy``, as they run it (a fresh
    process; its report in a temporary directory): wall time, peak RSS, each check's
    time and the campaign's coverage. Run first with no kernel kept (what a user waits
    for after changing the policy: the kernel is generated), then, with the kernel that
    run kept, ``samples`` times alone and (given an ``earlier`` version) with
    ``--against`` it, interleaved."""
    from replan.controller.policy import load_policy

    shown = policy.relative_to(checkout_root()).as_posix()
    progress(f"explore bench: replan verify --profile ci on {shown}")
    with (
        tempfile.TemporaryDirectory(prefix="replan-bench-verify-") as scratch,
        tempfile.TemporaryDirectory(prefix="replan-bench-kernels-") as kernels,
    ):
        command = [sys.executable, "-m", "replan", "verify", "--profile", "ci"]
        command += ["--policy", str(policy), "-o", scratch]
        cache = {"REPLAN_KERNEL_CACHE": kernels}
        code, seconds, peak = _peak_rss_of(command, cache)
        report = Path(scratch) / "verify.json"
        document = json.loads(report.read_text()) if report.is_file() else {}
        kept, against = _kept_and_against(command, cache, samples, progress, earlier)
    checks = {c["name"]: c for c in document.get("checks", [])}
    campaign = checks.get("campaign", {}).get("details", {}).get("coverage", {})
    transitions = campaign.get("transitions", {}) if isinstance(campaign, dict) else {}
    loaded = load_policy(policy)
    if against is not None:
        against["command"] = f"replan verify --profile ci --policy {shown} --against " + str(
            against.pop("earlier")
        )
    return {
        "command": f"replan verify --profile ci --policy {shown}",
        "policy": {
            "keys": len(loaded.keys),
            "steps": len(loaded.steps),
            "max_steps": loaded.max_steps,
        },
        "exit_code": code,
        "seconds": round(seconds, 1),
        "peak_rss_mb": round(peak / 2**20),
        "kept_kernel": kept,
        "against": against,
        "goal_s": FIRST_POLICY_GOAL_S,
        "within_goal": code == 0 and seconds <= FIRST_POLICY_GOAL_S,
        "explorer_engine": checks.get("explorer", {}).get("details", {}).get("engine"),
        "check_seconds": {name: c.get("seconds") for name, c in checks.items()},
        "explorer": checks.get("explorer", {}).get("summary"),
        "campaign_transitions_covered": transitions.get("reached"),
        "campaign_transitions_coverable": transitions.get("live"),
    }


def _kept_and_against(
    command: list[str],
    cache: dict[str, str],
    samples: int,
    progress: Progress,
    earlier: Path | None = FIRST_POLICY_EARLIER,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``command`` (a verify run whose kernel ``cache`` keeps) alone and (given an
    ``earlier`` policy) with ``--against`` it, interleaved ``samples`` times: medians,
    the largest peak RSS of each, and the ratio of the medians against its goal."""
    runs: dict[str, list[tuple[int, float, int]]] = {"alone": []}
    if earlier is not None:
        runs["against"] = []
    for sample in range(samples):
        for name in runs:
            progress(
                f"explore bench: the policy with its kernel kept, {name}, "
                f"sample {sample + 1}/{samples}"
            )
            extra = ["--against", str(earlier)] if name == "against" else []
            runs[name].append(_peak_rss_of(command + extra, cache))
    medians = {name: statistics.median(r[1] for r in taken) for name, taken in runs.items()}

    def figure(name: str) -> dict[str, Any]:
        taken = runs[name]
        return {
            "exit_code": max((r[0] for r in taken), key=abs),
            "seconds": round(medians[name], 1),
            "peak_rss_mb": round(max(r[2] for r in taken) / 2**20),
            "runs_s": [round(r[1], 1) for r in taken],
        }

    if earlier is None:
        return figure("alone"), None
    ratio = medians["against"] / max(medians["alone"], 1e-9)
    against = figure("against")
    against.update(
        earlier=earlier.relative_to(checkout_root()).as_posix(),
        to_verify_alone=round(ratio, 2),
        goal_ratio=AGAINST_GOAL_RATIO,
        within_goal=against["exit_code"] == 0 and ratio <= AGAINST_GOAL_RATIO,
    )
    return figure("alone"), against


#: ``replan verify --profile ci`` on the default policy: the goal for its wall time (s).
VERIFY_GOAL_SECONDS = 15.0


#: ... and for its peak resident memory (MB), the largest of any one of its processes.
VERIFY_GOAL_MB = 400

#: The ways the default policy is verified, in the order each sample runs them: the
#: kernel generated (a fresh cache: a first run, or a CI job's), the kernel kept (the
#: runs after it), and the Python explorer (``--engine python``, the oracle).
VERIFY_WAYS = ("generated", "kept", "python")


def default_policy_verify(samples: int, progress: Progress) -> dict[str, Any]:
    """``replan verify --profile ci`` on the default policy as a user runs it (a fresh
    process each, ``--workers auto``; its report in a temporary directory), each of
    ``VERIFY_WAYS`` in turn, ``samples`` times: medians, the largest peak RSS of each,
    the Python explorer's median against the kernel's, and whether the goals hold for
    the kernel generated (the slower of its two ways) and every run held."""
    walls: dict[str, list[float]] = {way: [] for way in VERIFY_WAYS}
    peaks: dict[str, list[int]] = {way: [] for way in VERIFY_WAYS}
    held = True
    with (
        tempfile.TemporaryDirectory(prefix="replan-bench-verify-") as scratch,
        tempfile.TemporaryDirectory(prefix="replan-bench-kernels-") as kept,
    ):
        for sample in range(samples):
            for way in VERIFY_WAYS:
                progress(
                    f"explore bench: replan verify --profile ci, {way}, "
                    f"sample {sample + 1}/{samples}"
                )
                command = [sys.executable, "-m", "replan", "verify", "--profile", "ci"]
                command += ["-o", f"{scratch}/{way}-{sample}"]
                if way == "python":
                    command += ["--engine", "python"]
                cache = kept if way == "kept" else tempfile.mkdtemp(dir=scratch)
                if way == "kept" and not os.listdir(kept):
                    _peak_rss_of(command, {"REPLAN_KERNEL_CACHE": kept})  # keeps the kernel
                code, seconds, peak = _peak_rss_of(command, {"REPLAN_KERNEL_CACHE": cache})
                held = held and code == 0
                walls[way].append(seconds)
                peaks[way].append(peak)
    median = {way: statistics.median(runs) for way, runs in walls.items()}
    peak_mb = {way: round(max(runs) / 2**20) for way, runs in peaks.items()}
    return {
        "command": "replan verify --profile ci (default policy): the kernel generated, "
        "the kernel kept, --engine python",
        "samples": samples,
        **{f"{way}_median_s": round(median[way], 1) for way in VERIFY_WAYS},
        **{f"{way}_peak_rss_mb": peak_mb[way] for way in VERIFY_WAYS},
        "python_to_generated": round(median["python"] / max(median["generated"], 1e-9), 2),
        "python_to_kept": round(median["python"] / max(median["kept"], 1e-9), 2),
        "goal_s": VERIFY_GOAL_SECONDS,
        "goal_mb": VERIFY_GOAL_MB,
        "within_goal": median["generated"] <= VERIFY_GOAL_SECONDS,
        "within_memory_goal": peak_mb["generated"] <= VERIFY_GOAL_MB,
        "all_held": held,
        "runs_s": {way: [round(s, 1) for s in runs] for way, runs in walls.items()},
    }


def campaign_throughput(
    rounds: int, progress: Progress, examples: int | None = None
) -> dict[str, Any]:
    """The campaign at ``ci`` on the default policy (every property after every
    operation, the reference model in lockstep, coverage and visited states) against
    the bare Hypothesis lockstep machine (``verification/bench/bare_lockstep.py``) with the
    same examples and steps, interleaved ``rounds`` times: operations per second,
    medians, and their ratio (``examples``: fewer than the profile's, for a smoke run)."""
    from replan.verification.bench.bare_lockstep import bare_lockstep_rate
    from replan.verification.engines.campaign.run import run_campaign

    campaign: list[float] = []
    bare: list[float] = []
    made = 0
    for round_number in range(rounds):
        progress(f"explore bench: campaign throughput, round {round_number + 1}/{rounds}")
        result = run_campaign(
            DEFAULT_POLICY, "ci", seed=VERIFY_SEED, examples=examples, out_dir=None, database=None
        )
        made = result.examples
        campaign.append(result.operations / max(result.seconds, 1e-9))
        bare.append(float(bare_lockstep_rate(VERIFY_SEED, made)["operations_per_second"]))
    ours, baseline = statistics.median(campaign), statistics.median(bare)
    return {
        "rounds": rounds,
        "examples": made,
        "campaign_operations_per_second": round(ours),
        "bare_lockstep_operations_per_second": round(baseline),
        "campaign_to_bare": round(ours / max(baseline, 1e-9), 2),
        "samples": {"campaign": [round(x) for x in campaign], "bare": [round(x) for x in bare]},
    }


def explore_figures(quick: bool, progress: Progress) -> dict[str, Any]:
    """Every figure of ``replan bench --explore``."""
    domains = QUICK_DOMAINS if quick else DOMAINS
    return {
        "spin": [spin_comparison(v, k, rounds, progress) for v, k, rounds in domains],
        "campaign": campaign_throughput(1 if quick else 3, progress),
        "generation": generation_apart(1 if quick else 3, progress),
        "first_policy": None if quick else user_policy_verify(progress),
        "deploy_agent": None
        if quick
        else user_policy_verify(progress, DEPLOY_AGENT, earlier=None, samples=1),
        "default_policy": None if quick else default_policy_verify(3, progress),
    }


def explore_lines(figures: dict[str, Any]) -> list[str]:
    """The figures as the bench's table prints them."""
    lines = ["explorer against SPIN (same model, same domains; medians of interleaved rounds):"]
    for each in figures["spin"]:
        lines += _domain_lines(each)
    lines += generation_lines(figures.get("generation"))
    lines += _campaign_lines(figures)
    return lines


def _domain_lines(each: dict[str, Any]) -> list[str]:
    """One (V, K) domain: each engine's figures, then the cross-checks."""
    lines: list[str] = []
    lines.append(f"  (V, K) = ({each['versions']}, {each['ids']}), {each['rounds']} rounds")
    for name, shown in (
        ("spin", "SPIN"),
        ("kernel", "replan explore --engine kernel"),
        ("kernel_2_shards", "... --workers 2"),
        ("explore_1_workers", "replan explore, 1 worker"),
        ("explore_2_workers", "replan explore, 2 workers"),
    ):
        figure = each[name]
        if "seconds" not in figure:
            lines.append(f"    {shown:28} absent: {figure.get('why')}")
            continue
        ratio = figure.get("spin_faster_per_transition")
        lines.append(
            f"    {shown:28} {figure['states']:>11,} states {figure['transitions']:>12,} "
            f"transitions {figure['seconds']:>8.2f} s {figure['transitions_per_second']:>11,}"
            f"/s" + ("" if ratio is None else f"  (SPIN {ratio}x faster per transition)")
        )
    kernel = each.get("kernel", {})
    if "build_seconds" in kernel:
        lines.append(
            f"    {'':28} the kernel's search timed; + generate {kernel['build_seconds']} s "
            f"({kernel['cached_build_seconds']} s from the cache);"
            " same states and transitions as the Python explorer: "
            f"{'yes' if kernel['same_counts_as_python_explorer'] else 'NO'}"
        )
    engine = each.get("spin_engine", {})
    if "seconds" in engine:
        lines.append(
            f"    {'replan explore --engine spin':28} {engine['states']:>11,} states "
            f"{engine['transitions']:>12,} transitions {engine['seconds']:>8.2f} s "
            f"{engine['transitions_per_second']:>11,}/s  (+ translate "
            f"{engine['translate_seconds']} s, compile {engine['compile_seconds']} s); "
            f"same states as the Python explorer: "
            f"{'yes' if engine['same_states_as_python_explorer'] else 'NO'}"
        )
    elif engine:
        lines.append(f"    {'replan explore --engine spin':28} absent: {engine.get('why')}")
    lines.append(
        f"    2 workers against 1: {each['two_workers_speedup']}x; same counts: "
        f"{'yes' if each['same_counts_across_workers'] else 'NO'}"
        + (
            ""
            if "same_states_as_spin" not in each
            else f"; same states as SPIN: {'yes' if each['same_states_as_spin'] else 'NO'}"
        )
    )
    return lines


def _campaign_lines(figures: dict[str, Any]) -> list[str]:
    """The campaign's throughput and the first policy's run, where measured."""
    lines: list[str] = []
    throughput = figures.get("campaign")
    if throughput:
        lines.append(
            f"campaign at ci (default policy, {throughput['examples']} examples; medians of "
            f"{throughput['rounds']} interleaved rounds): "
            f"{throughput['campaign_operations_per_second']:,} operations/s against "
            f"{throughput['bare_lockstep_operations_per_second']:,} for a bare Hypothesis "
            f"lockstep machine ({throughput['campaign_to_bare']}x)"
        )
    verified = figures.get("default_policy")
    if verified:
        lines.append(
            f"default policy through `replan verify --profile ci` ({verified['samples']} "
            f"interleaved runs of each): median {verified['generated_median_s']} s with "
            f"the kernel generated ({verified['generated_peak_rss_mb']} MB), "
            f"{verified['kept_median_s']} s with it kept ({verified['kept_peak_rss_mb']} "
            f"MB), {verified['python_median_s']} s with --engine python "
            f"({verified['python_peak_rss_mb']} MB; {verified['python_to_generated']}x the "
            f"kernel generated); goals <= {verified['goal_s']:.0f} s: "
            f"{'met' if verified['within_goal'] else 'MISSED'}, <= {verified['goal_mb']} MB: "
            f"{'met' if verified['within_memory_goal'] else 'MISSED'}"
            + ("" if verified["all_held"] else "; A RUN FAILED")
        )
    for name, title in (("first_policy", "first policy"), ("deploy_agent", "deploy agent")):
        if figures.get(name):
            lines += _user_policy_lines(title, figures[name])
    return lines


def _user_policy_lines(title: str, first: dict[str, Any]) -> list[str]:
    """A user's policy through ``replan verify``: generated, kept, ``--against``."""
    kept = first.get("kept_kernel") or {}
    size = first.get("policy")
    sized = "" if not size else f" ({size['keys']} keys, {size['steps']} steps)"
    lines = [
        f"{title}{sized} through `{first['command']}`: exit {first['exit_code']}, "
        f"{first['seconds']} s (explorer: {first.get('explorer_engine')}, its kernel "
        f"generated), peak RSS {first['peak_rss_mb']} MB; again with the kernel kept "
        f"(median of {len(kept.get('runs_s', [0]))}): "
        f"{kept.get('seconds')} s, {kept.get('peak_rss_mb')} MB; goal <= "
        f"{first.get('goal_s', FIRST_POLICY_GOAL_S):.0f} s: "
        f"{'met' if first.get('within_goal') else 'MISSED'}"
    ]
    timed = ", ".join(
        f"{name} {seconds:.1f} s"
        for name, seconds in first["check_seconds"].items()
        if isinstance(seconds, int | float)
    )
    lines.append(f"  checks: {timed}")
    against = first.get("against")
    if against:
        lines.append(
            f"  with --against its earlier version (kernel kept; medians of "
            f"{len(against['runs_s'])} interleaved runs): {against['seconds']} s against "
            f"{kept.get('seconds')} s alone ({against['to_verify_alone']}x; goal <= "
            f"{against['goal_ratio']:.0f}x: {'met' if against['within_goal'] else 'MISSED'})"
        )
    lines.append(
        f"  campaign coverage: {first['campaign_transitions_covered']}/"
        f"{first['campaign_transitions_coverable']} transitions; explorer: {first['explorer']}"
    )
    return lines
