"""MkDocs hook: the committed measurements rendered into the pages at build time.

Why: a figure typed into prose is true of one run on one machine on one day, and
stays in the docs long after the code has moved on. The measurements live in the JSON
files under ``evidence/`` that the tools write (``replan bench -o
evidence/benchmark-results.json``, ``replan explore --json``, ``replan mutate -o
evidence/mutate.json``, ``replan evidence``); a page asks for one of them with a marker
on a line of its own::

    <!-- evidence: controller -->

and this hook replaces the marker with a table rendered from the file, with the date
and machine the file records. Re-measure, rebuild, and every page shows the new
figures. A marker this hook does not know, or an evidence file that is missing or
lacks a field, fails the build (``mkdocs build --strict`` or not).

Owns: the markers (``RENDERERS``) and how each file's figures read. Leaves the
measuring to the tools, and the prose around the tables to the pages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

MARKER = re.compile(r"^<!-- evidence: ([a-z-]+) -->$", re.MULTILINE)

#: The typography of the tables: a range's dash, a ratio's sign, an empty cell.
DASH = "\u2013"
TIMES = "\u00d7"
NONE = DASH


def on_config(config: Any) -> Any:
    """``mkdocs serve`` rebuilds when a measurement is rewritten."""
    config.watch.append(str(_evidence_dir(config)))
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    evidence = _evidence_dir(config)

    def render(match: re.Match[str]) -> str:
        name = match.group(1)
        renderer = RENDERERS.get(name)
        if renderer is None:
            raise PluginError(
                f"{page.file.src_path}: unknown evidence marker {name!r} "
                f"(known: {', '.join(sorted(RENDERERS))})"
            )
        try:
            return renderer(evidence)
        except (OSError, KeyError, TypeError, ValueError) as error:
            raise PluginError(
                f"{page.file.src_path}: cannot render evidence {name!r}: "
                f"{error.__class__.__name__}: {error}"
            ) from None

    return MARKER.sub(render, markdown)


def _evidence_dir(config: Any) -> Path:
    return Path(config["config_file_path"]).resolve().parent / "evidence"


def _load(evidence: Path, name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((evidence / name).read_text(encoding="utf-8"))
    return document


# ---- formatting ---------------------------------------------------------------------


def _count(value: float) -> str:
    return f"{value:,.0f}"


def _us(value: float) -> str:
    return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"


def _seconds(value: float) -> str:
    return f"{value:,.2f} s" if value < 10 else f"{value:,.1f} s"


def _ratio(value: float) -> str:
    return f"{value:,.2f}{TIMES}" if value < 10 else f"{value:,.0f}{TIMES}"


def _figure(value: float) -> str:
    """A measured figure as a reader reads it: an integer, or two decimals."""
    return f"{value:,}" if float(value).is_integer() else f"{value:,.2f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> str:
    """A Markdown table; ``align`` gives each column's alignment (``l``/``r``)."""
    marks = [("---:" if a == "r" else "---") for a in align.ljust(len(header), "l")]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(marks) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _source(name: str, document: Mapping[str, Any] | None = None) -> str:
    """The line under a table that names where its figures come from."""
    date = (document or {}).get("date")
    when = f", measured {str(date)[:10]}" if date else ""
    return f"*From `evidence/{name}`{when}.*"


# ---- the controller benchmark (replan bench) ------------------------------------------


def _machine(bench: Mapping[str, Any]) -> str:
    environment = bench["environment"]
    load = environment.get("load_average_1_5_15min") or ["?"]
    return (
        f"{environment['cpu']}, {environment['cpus']} CPUs, {environment['python']}, "
        f"load {load[0]} when it started"
    )


def controller(evidence: Path) -> str:
    """The reference episode on the three implementations: time, memory, ratios, goals."""
    bench = _load(evidence, "benchmark-results.json")
    method = bench["method"]
    parts = [
        f"`replan bench` on {_machine(bench)}. The episode: {method['episode']}. Time is "
        f"the CPU time of the measuring thread per episode, median of {method['samples']} "
        f"interleaved samples [min{DASH}max]; memory is the tracemalloc peak of one episode "
        "(a lower bound of the bytes it allocates).",
    ]
    for workload_name, workload in bench["workloads"].items():
        rows = []
        for name, implementation in workload["implementations"].items():
            memory = implementation.get("memory", {})
            rows.append(
                [
                    f"`{name}`: {implementation['what']}",
                    f"{_us(implementation['median_us'])} "
                    f"[{_us(implementation['min_us'])}{DASH}{_us(implementation['max_us'])}]",
                    _count(memory["peak_bytes"]) if "peak_bytes" in memory else NONE,
                ]
            )
        parts.append(f"**`{workload_name}`**: records {workload['records']}.")
        parts.append(_table(["implementation", "µs per episode", "peak bytes"], rows, "lrr"))
        ratio_rows = [
            [
                name,
                ratio["meaning"],
                f"{_ratio(ratio['median'])} [{_ratio(ratio['min'])}{DASH}{_ratio(ratio['max'])}]",
                ratio["goal"] or NONE,
            ]
            for name, ratio in workload["ratios"].items()
        ]
        parts.append(_table(["ratio", "meaning", "median [range]", "goal"], ratio_rows, "llrl"))
    goals = [
        [goal["goal"], _figure(goal["measured"]), "met" if goal["met"] else "**missed**"]
        for goal in bench["goals"]
    ]
    reference = bench.get("dotnet_reference")
    origin = "the .NET reference"
    if reference:
        origin += (
            f": {reference['median_us']} µs, {_count(reference['allocated_bytes'])} bytes "
            "allocated per episode"
        )
    parts.append(f"**Goals** (the episode's time and memory goals come from {origin}):")
    parts.append(_table(["goal", "measured", ""], goals, "lrl"))
    parts.append(_source("benchmark-results.json", bench))
    return "\n\n".join(parts)


def tools(evidence: Path) -> str:
    """The other tools measured in the same `replan bench` run."""
    bench = _load(evidence, "benchmark-results.json")
    measured = bench["tools"]
    rows = []
    explorer = measured.get("explorer", {})
    if explorer.get("status") == "measured":
        rows.append(
            [
                "explorer (default policy, default domains)",
                f"{_count(explorer['states'])} states, {_count(explorer['transitions'])} "
                f"transitions in {_seconds(explorer['seconds'])}: "
                f"{_count(explorer['distinct_states_per_second'])} states/s, "
                f"{_count(explorer['transitions_per_second'])} transitions/s",
            ]
        )
    campaign = measured.get("campaign", {})
    if campaign.get("status") == "measured":
        rows.append(
            [
                f"campaign (profile `{campaign['profile']}`)",
                f"{_count(campaign['operations'])} operations in "
                f"{_seconds(campaign['seconds'])}: "
                f"{_count(campaign['operations_per_second'])} operations/s",
            ]
        )
    prove = measured.get("prove", {})
    if prove.get("status") == "measured":
        rows.append(
            [
                "proofs",
                f"commit equivalence for 300 prerequisites "
                f"{_seconds(prove['equivalence_300_keys_seconds'])}; every property in "
                f"process {_seconds(prove['prove_all_seconds'])}, `replan prove` as a "
                f"command {_seconds(prove['replan_prove_command_seconds'])}",
            ]
        )
    executor = measured.get("executor", {})
    for name, workload in executor.get("workloads", {}).items():
        rows.append(
            [
                f"executor `{name}`",
                f"{_us(workload['median_us'])} µs wall per episode "
                f"[{_us(workload['min_us'])}{DASH}{_us(workload['max_us'])}]",
            ]
        )
    return "\n\n".join(
        [
            _table(["tool", "measured"], rows),
            _source("benchmark-results.json", bench),
        ]
    )


# ---- the explorer (replan explore --json) ---------------------------------------------


def explorer(evidence: Path) -> str:
    """The default exploration: totals, then each input domain."""
    result = _load(evidence, "explore-default.json")
    rows = [
        [
            f"`{run['domains']['name']}`",
            _count(run["states"]),
            _count(run["transitions"]),
            str(run["depth"]),
            _seconds(run["seconds"]),
            f"{run['transitions_reached']} of {run['transitions_declared']}",
        ]
        for run in result["runs"]
    ]
    rows.append(
        [
            "**both**",
            f"**{_count(result['states'])}**",
            f"**{_count(result['transitions'])}**",
            str(result["depth"]),
            _seconds(result["seconds"]),
            f"{result['transitions_reached']} of {result['transitions_declared']}",
        ]
    )
    stops = ", ".join(reason for reason, reached in result["stop_reasons"].items() if reached)
    verdict = "every property held" if result["ok"] else "**a property failed**"
    return "\n\n".join(
        [
            _table(
                ["domain", "states", "transitions", "depth", "time", "declared transitions"],
                rows,
                "lrrrrr",
            ),
            f"{verdict.capitalize()}; traps: {result['traps']}; stop reasons reached: {stops}.",
            _source("explore-default.json"),
        ]
    )


def spin(evidence: Path) -> str:
    """SPIN and the explorer on the same domains, from the explore-spin-V-K files."""
    rows = []
    notes = []
    for path in sorted(evidence.glob("explore-spin-*.json")):
        result = _load(evidence, path.name)
        comparison = result["spin_comparison"]
        domain = f"({comparison['versions']}, {comparison['ids']})"
        for row in comparison["rows"]:
            rows.append(
                [
                    domain,
                    row["tool"],
                    _count(row["states"]),
                    _count(row["transitions"]),
                    _seconds(row["seconds"]),
                    _count(row["transitions_per_second"]),
                ]
            )
        same = "the same" if comparison["same_states"] else "**different**"
        faster = comparison.get("spin_faster_by")
        speed = f"; SPIN faster per transition by {_ratio(faster)}" if faster else ""
        notes.append(f"At {domain}: {same} distinct states{speed} (`evidence/{path.name}`).")
        symmetry = result.get("symmetry_comparison")
        if symmetry:
            notes.append(
                f"At {domain}, symmetry over interchangeable plan ids stores "
                f"{_ratio(symmetry['reduction'])} fewer states, same verdict: "
                f"{'yes' if symmetry['same_verdict'] else '**no**'}."
            )
    if not rows:
        raise ValueError("no evidence/explore-spin-*.json file")
    return "\n\n".join(
        [
            _table(
                ["(V, K)", "tool", "states", "transitions", "time", "transitions/s"],
                rows,
                "llrrrr",
            ),
            "\n".join(f"- {note}" for note in notes),
        ]
    )


#: The engines of ``replan bench --explore``, as its figures name them, and as a
#: reader knows them.
ENGINE_ROWS = (
    ("spin", "SPIN, the hand-written model"),
    ("kernel", "replan explore --engine kernel"),
    ("kernel_2_shards", "... --workers 2"),
    ("spin_engine", "replan explore --engine spin"),
    ("explore_1_workers", "replan explore --engine python"),
    ("explore_2_workers", "... --workers 2"),
)


def engines(evidence: Path) -> str:
    """Every engine on SPIN's domains side by side, the campaign's throughput, and a
    first user's policy through ``replan verify``: one ``replan bench --explore`` run."""
    name = "bench-explore.json"
    bench = _load(evidence, name)
    figures = bench["tools"]["explore"]
    rows, notes = [], []
    for each in figures["spin"]:
        domain = f"({each['versions']}, {each['ids']})"
        spin = each.get("spin", {})
        for key, shown in ENGINE_ROWS:
            figure = each.get(key, {})
            if "seconds" not in figure:
                rows.append([domain, shown, "absent", "", "", "", ""])
                continue
            per_transition = (
                _ratio(spin["transitions_per_second"] / figure["transitions_per_second"])
                if "transitions_per_second" in spin and key != "spin"
                else ""
            )
            rows.append(
                [
                    domain,
                    shown,
                    _count(figure["states"]),
                    _count(figure["transitions"]),
                    _seconds(figure["seconds"]),
                    _count(figure["transitions_per_second"]),
                    per_transition,
                ]
            )
        kernel = each.get("kernel", {})
        if "build_seconds" in kernel:
            notes.append(
                f"At {domain}: generating the kernel took {_seconds(kernel['build_seconds'])}, "
                f"taking it from the cache {_seconds(kernel['cached_build_seconds'])}; the same "
                "states and transitions as the Python explorer: "
                f"{'yes' if kernel['same_counts_as_python_explorer'] else '**no**'}."
            )
    campaign = figures.get("campaign")
    if campaign:
        notes.append(
            f"The campaign at `--profile ci` ({campaign['examples']} examples): "
            f"{_count(campaign['campaign_operations_per_second'])} operations/s against "
            f"{_count(campaign['bare_lockstep_operations_per_second'])} for a bare "
            f"Hypothesis lockstep machine ({_ratio(campaign['campaign_to_bare'])})."
        )
    generation = figures.get("generation")
    if generation:
        notes.append(
            f"Generating the default report's kernels ({generation['rounds']} interleaved "
            f"rounds, {generation['cores']} cores): each domain's in a forked process, side "
            f"by side, {_seconds(generation['apart_s'])}; one after the other in one "
            f"process, {_seconds(generation['in_turn_s'])} "
            f"({_ratio(generation['in_turn_to_apart'])})."
        )
    verified = figures.get("default_policy")
    if verified:
        notes.append(
            f"The default policy through `replan verify --profile ci` "
            f"({verified['samples']} interleaved runs of each, the campaign and the "
            f"boundary check beside the explorer): median "
            f"{_seconds(verified['generated_median_s'])} with the kernel generated (a "
            f"first run, or a CI job's; peak RSS {verified['generated_peak_rss_mb']} MB), "
            f"{_seconds(verified['kept_median_s'])} with it kept "
            f"({verified['kept_peak_rss_mb']} MB), "
            f"{_seconds(verified['python_median_s'])} with `--engine python` "
            f"({verified['python_peak_rss_mb']} MB; "
            f"{_ratio(verified['python_to_generated'])} the kernel generated); the goals, "
            f"at most {_seconds(verified['goal_s'])}: "
            f"{'met' if verified['within_goal'] else '**missed**'}, at most "
            f"{verified['goal_mb']} MB: "
            f"{'met' if verified['within_memory_goal'] else '**missed**'}."
        )
    for name, title in (
        ("first_policy", "A first user's policy"),
        ("deploy_agent", "A deploy agent's policy"),
    ):
        if figures.get(name):
            notes.append(_user_policy_note(title, figures[name]))
    return "\n\n".join(
        [
            _table(
                [
                    "(V, K)",
                    "engine",
                    "states",
                    "transitions",
                    "search",
                    "transitions/s",
                    "SPIN faster per transition",
                ],
                rows,
                "llrrrrr",
            ),
            "\n".join(f"- {note}" for note in notes),
            f"*From `evidence/{name}` (`replan bench --explore -o evidence/{name}`), measured "
            f"{str(bench['date'])[:10]} on {_machine(bench)}; the search alone, "
            "medians of interleaved rounds (`--engine spin` once per domain: compiling pan "
            "takes longer than its search).*",
        ]
    )


def _user_policy_note(title: str, first: dict[str, Any]) -> str:
    """A user's policy through ``replan verify``: generated, kept, ``--against``."""
    checks = ", ".join(
        f"{check} {_seconds(seconds)}" for check, seconds in first["check_seconds"].items()
    )
    kept = first.get("kept_kernel")
    again = (
        ""
        if not kept
        else f"; run again with the kernel the first run kept: {_seconds(kept['seconds'])}"
        + (f" (median of {len(kept['runs_s'])} runs)" if "runs_s" in kept else "")
        + f", {kept['peak_rss_mb']} MB"
    )
    goal = (
        ""
        if "goal_s" not in first
        else f"; the goal, at most {_seconds(first['goal_s'])}: "
        f"{'met' if first['within_goal'] else '**missed**'}"
    )
    against = first.get("against")
    if against:
        again += (
            f"; with `--against` the policy's earlier version "
            f"(`{against['command']}`, kernel kept, medians of "
            f"{len(against['runs_s'])} interleaved runs): "
            f"{_seconds(against['seconds'])}, {_ratio(against['to_verify_alone'])} "
            f"the run alone; the goal, at most {_ratio(against['goal_ratio'])}: "
            f"{'met' if against['within_goal'] else '**missed**'}"
        )
    engine = first.get("explorer_engine")
    searched = "" if engine is None else f", its explorer the {engine} engine"
    size = first.get("policy")
    sized = (
        " (three keys, three steps, at most six run)"
        if not size
        else f" ({size['keys']} keys, {size['steps']} steps, at most {size['max_steps']} run)"
    )
    return (
        f"{title}{sized}: `{first['command']}` exited "
        f"{first['exit_code']} in {_seconds(first['seconds'])}{searched}, peak RSS "
        f"{first['peak_rss_mb']} MB ({checks}){again}{goal}."
    )


# ---- mutation adequacy (replan mutate) and the proofs (replan evidence) ------------------


def mutation(evidence: Path) -> str:
    """The mutation score and each operator's verdicts."""
    matrix = _load(evidence, "mutate.json")
    killers = ", ".join(f"{count} by `{check}`" for check, count in matrix["killed_by"].items())
    rows = [
        [
            f"`{operator}`",
            str(verdicts.get("killed", 0)),
            str(verdicts.get("equivalent", 0)),
            str(verdicts.get("survived", 0)),
        ]
        for operator, verdicts in matrix["by_operator"].items()
    ]
    return "\n\n".join(
        [
            f"**{matrix['generated']} mutants generated, {matrix['killed']} killed "
            f"({killers}), {matrix['equivalent']} equivalent, {matrix['survived']} "
            f"survived: {matrix['score']:.0%} of the non-equivalent mutants killed** "
            f"(in {_seconds(matrix['seconds'])}).",
            _table(["operator", "killed", "equivalent", "survived"], rows, "lrrr"),
            _source("mutate.json"),
        ]
    )


def proofs(evidence: Path) -> str:
    """What the proofs establish for the default policy, by kind, and the bound."""
    prove = _load(evidence, "prove.json")
    kinds: dict[str, list[int]] = {}
    for entry in prove["properties"]:
        proved, total = kinds.setdefault(entry["kind"], [0, 0])
        kinds[entry["kind"]] = [proved + (entry["status"] == "proved"), total + 1]
    rows = [[kind, f"{proved} of {total}"] for kind, (proved, total) in sorted(kinds.items())]
    termination = prove["termination"]
    values = ", ".join(f"{name} = {value}" for name, value in termination["values"].items())
    return "\n\n".join(
        [
            _table(["kind", "proved"], rows, "lr"),
            f"Termination bound: `{termination['formula']}` = **{termination['bound']}** "
            f"({values}).",
            _source("prove.json"),
        ]
    )


def verify(evidence: Path) -> str:
    """`replan verify` on the default policy, check by check (the committed report)."""
    report = _load(evidence, "verify.json")
    rows = [
        [check["name"], check["status"], check["summary"].replace("|", "\\|")]
        for check in report["checks"]
    ]
    return "\n\n".join(
        [
            _table(["check", "status", "summary"], rows),
            f"Profile `{report['profile']}`. {_source('verify.json')}",
        ]
    )


#: marker name -> what replaces it.
RENDERERS: dict[str, Callable[[Path], str]] = {
    "controller": controller,
    "tools": tools,
    "explorer": explorer,
    "spin": spin,
    "engines": engines,
    "mutation": mutation,
    "proofs": proofs,
    "verify": verify,
}
