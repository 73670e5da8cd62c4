"""``replan bench``'s readable table, written from the figures' JSON document."""

from __future__ import annotations

from typing import Any


def _bytes(value: int) -> str:
    return f"{value:,}"


DURABLE_PARTS = ("per_call", "ratio_to_unlogged", "restore", "crash_matrix")


def campaign_memory_lines(memory: dict[str, Any]) -> list[str]:
    """The campaign's memory figure: resident growth per operation, both ways."""
    lines = [f"    memory ({memory['profile']}, {memory['examples']} examples, resident growth):"]
    for name in ("bounded", "one_engine"):
        figure = memory[name]
        lines.append(
            f"      {figure['examples_per_engine']:>5} examples per engine "
            f"{figure['growth_bytes_per_operation_median']:>9,.0f} B/operation "
            f"(runs {', '.join(f'{g:,.0f}' for g in figure['growth_bytes_per_operation'])}; "
            f"{figure['operations']:,} operations)"
        )
    lines.append(f"      ratio one engine/bounded {memory['ratio_one_engine_to_bounded']}")
    return lines


def durable_lines(figures: dict[str, Any]) -> list[str]:
    """The durable run's figures: per call, restore, the kill-and-restart matrix."""
    lines = []
    for name, numbers in figures["per_call"].items():
        ratio = figures["ratio_to_unlogged"].get(name)
        against = "" if ratio is None else f"  x{ratio['median']:.2f} the unlogged call (wall)"
        lines.append(
            f"    one call, {name:<18} wall {numbers['median_us']:>9,.1f} us "
            f"[{numbers['min_us']:,.1f}-{numbers['max_us']:,.1f}]{against}"
        )
    for name, numbers in figures["restore"].items():
        lines.append(
            f"    restore {name:<24} from snapshots {numbers['from snapshots']['median_s']:.3f} s"
            f", from the start {numbers['from the start']['median_s']:.3f} s (median)"
        )
    for workload, per_backend in figures.get("crash_matrix", {}).items():
        lines += _matrix_lines(workload, per_backend)
    return lines


def _matrix_lines(workload: str, per_backend: dict[str, Any]) -> list[str]:
    """One workload's kill-and-restart matrix: kill point kind x backend."""
    lines = []
    matrices = {backend: matrix for backend, matrix in per_backend.items() if "by_kind" in matrix}
    if matrices:
        lines.append(
            f"    {workload + ': kill point (SIGKILL, then restart)':<40} "
            + "".join(f"{backend:>22}" for backend in matrices)
        )
        kinds = list(dict.fromkeys(kind for m in matrices.values() for kind in m["by_kind"]))
        for kind in kinds:
            cells = []
            for matrix in matrices.values():
                held, runs, kills = matrix["by_kind"].get(kind, (0, 0, 0))
                verdict = "same, once" if held == runs else f"{runs - held} DIFFER"
                cells.append(f"{kills:>4} kills: {verdict:<10}")
            lines.append(f"    {kind:<40} " + "".join(f"{cell:>22}" for cell in cells))
    for backend, matrix in per_backend.items():
        if "outcomes" not in matrix:
            why = matrix.get("why")
            lines.append(f"    {workload}, kill and restart, {backend}: skipped ({why})")
            continue
        held = sum(1 for outcome in matrix["outcomes"] if not outcome["problems"])
        lines.append(
            f"    {workload}, kill and restart, {backend}: {matrix['kills']} SIGKILLs "
            f"({matrix['boundaries']} boundaries + random), {held}/{len(matrix['outcomes'])} "
            f"runs same result, {'no double effect' if matrix['held'] else 'PROBLEMS'} "
            f"({matrix['seconds']} s)"
        )
    return lines


def render_table(document: dict[str, Any]) -> str:
    """The stdout report: environment, one table per workload, ratios, goals, tools."""
    env = document["environment"]
    settings = document["method"]
    lines = [
        f"replan bench  {document['date']}  {env['python']}  {env['cpu']} "
        f"({env['cpus']} cpus, load {env['load_average_1_5_15min']})"
        + ("  [--quick: smoke run, not a measurement]" if document["quick"] else ""),
        f"{settings['samples']} samples x {settings['episodes_per_sample']} episodes "
        f"(python-statemachine: {settings['reference_episodes_per_sample']}) after "
        f"{settings['warmups']} warm-up round(s), interleaved; us = microseconds of "
        "thread CPU time per episode (wall clock beside it)",
    ]
    for name, workload in document["workloads"].items():
        lines += ["", *_workload_lines(name, workload)]
    lines += ["", "goals (figures, not asserts):"]
    for goal in document["goals"]:
        lines.append(
            f"  {'met   ' if goal['met'] else 'MISSED'}  {goal['goal']}: {goal['measured']}"
        )
    lines += ["", "other tools:"]
    for name, figures in document["tools"].items():
        lines += _tool_lines(name, figures)
    if not document["all_episodes_completed"]:
        lines += ["", f"EPISODES THAT DID NOT COMPLETE: {', '.join(document['incomplete'])}"]
    return "\n".join(lines)


def _workload_lines(name: str, workload: dict[str, Any]) -> list[str]:
    """One workload's table: each implementation's figures, then the ratios."""
    lines = [f"{name}: records {workload['records']}"]
    lines.append(
        f"  {'implementation':<20} {'median us':>10} {'min-max us':>19} "
        f"{'wall us':>10} {'peak B':>8} {'kept B':>8} {'completed':>11}"
    )
    for impl, figures in workload["implementations"].items():
        span = f"{figures['min_us']:.2f}-{figures['max_us']:.2f}"
        done = f"{figures['episodes_completed']}/{figures['episodes_run']}"
        lines.append(
            f"  {impl:<20} {figures['median_us']:>10.2f} {span:>19} "
            f"{figures['wall_median_us']:>10.2f} "
            f"{_bytes(figures['memory']['peak_bytes']):>8} "
            f"{_bytes(figures['memory']['retained_bytes']):>8} {done:>11}"
        )
    lines.append("  ratios of time per episode, sample by sample: median [min-max]")
    for pair, ratio in workload["ratios"].items():
        goal = f"  goal {ratio['goal']}" if ratio["goal"] else ""
        lines.append(
            f"  {pair:<34} {ratio['median']:>9.2f}  "
            f"[{ratio['min']:.2f}-{ratio['max']:.2f}]  wall {ratio['wall_median']:.2f}{goal}"
        )
    return lines


def _tool_lines(name: str, figures: dict[str, Any]) -> list[str]:
    """One other tool's line, and the lines its own figures add."""
    lines: list[str] = []
    hidden = (
        "status",
        "module",
        "workloads",
        "differences",
        "memory",
        "spin",
        "first_policy",
        "deploy_agent",
        "default_policy",
        "runs_s",
        *DURABLE_PARTS,
    )
    shown = {k: v for k, v in figures.items() if k not in hidden}
    detail = ", ".join(f"{k}={v}" for k, v in shown.items())
    lines.append(f"  {name:<10} {figures['status']}{': ' + detail if detail else ''}")
    for workload, numbers in figures.get("workloads", {}).items():
        lines.append(
            f"    {workload:<34} wall {numbers['median_us']:>11,.1f} us "
            f"[{numbers['min_us']:,.1f}-{numbers['max_us']:,.1f}]  "
            f"cpu {numbers['cpu_median_us']:>9,.1f} us  "
            f"peak {_bytes(numbers['peak_bytes'])} B  "
            f"({numbers['episodes_per_sample']} episodes/sample)"
        )
    for difference, numbers in figures.get("differences", {}).items():
        lines.append(
            f"    {difference:<44} cpu {numbers['cpu_median_us']:>9,.1f} us "
            f"[{numbers['cpu_min_us']:,.1f}-{numbers['cpu_max_us']:,.1f}]"
        )
    if name == "durable" and figures["status"] == "measured":
        lines += durable_lines(figures)
    if "memory" in figures:
        lines += campaign_memory_lines(figures["memory"])
    if name == "explore" and figures["status"] == "measured":
        from replan.verification.bench.explore import explore_lines

        lines += [f"    {line}" for line in explore_lines(figures)]
    if name == "scale" and figures["status"] == "measured":
        from replan.verification.bench.scale import scale_lines

        lines += [f"    {line}" for line in scale_lines(figures)]
    if name == "boundary" and figures["status"] == "measured":
        from replan.verification.bench.boundary import boundary_lines

        lines += [f"    {line}" for line in boundary_lines(figures)]
    return lines
