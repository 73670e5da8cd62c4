"""Several domains' searches reported as one: what ``replan explore`` and ``verify``
print for the default report, whose two focused domains are searched one after the
other by whichever engine searches them."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from replan.controller.run import Run
from replan.verification.core.domains import Domains
from replan.verification.core.reachability import judge_reachability
from replan.verification.core.search import SearchResult


def search_each(
    domains: Iterable[Domains],
    one: Callable[[Domains], SearchResult],
    stop_at_first: bool,
    implementation: type[Run],
) -> SearchResult:
    """Each domain searched by ``one`` in turn (up to the first that finds a
    violation, when the search stops at the first), reported as one."""
    runs: list[SearchResult] = []
    for each in domains:
        runs.append(one(each))
        if runs[-1].findings and stop_at_first:
            break
    return combine(runs, implementation)


def _merged_summaries(runs: list[SearchResult]) -> dict[str, dict[str, int]]:
    merged: dict[str, dict[str, int]] = {}
    for run in runs:
        for name, summary in run.violation_summary.items():
            if name not in merged:
                merged[name] = dict(summary)
            else:
                merged[name]["transitions"] += summary["transitions"]
                merged[name]["shortest"] = min(merged[name]["shortest"], summary["shortest"])
    return merged


def combine(runs: list[SearchResult], implementation: type[Run]) -> SearchResult:
    """Several domains reported as one: totals, the union of what was reached, every
    run's findings, and each run kept in ``runs``."""
    first = runs[0]
    fired: dict[str, int] = {}
    absorbed: dict[str, int] = {}
    for run in runs:
        for label, count in run.fired.items():
            fired[label] = fired.get(label, 0) + count
        for label, count in run.absorbed.items():
            absorbed[label] = absorbed.get(label, 0) + count
    complete = all(run.complete for run in runs)
    stopped = [run.stopped_by for run in runs if run.stopped_by]
    traps = None if any(run.traps is None for run in runs) else sum(r.traps or 0 for r in runs)
    combined = SearchResult(
        engine=first.engine,
        policy=first.policy,
        implementation=first.implementation,
        properties_checked=first.properties_checked,
        domains={"runs": [run.domains for run in runs]},
        domain_lines=[line for run in runs for line in run.domain_lines],
        symmetry=any(run.symmetry for run in runs),
        states=sum(run.states for run in runs),
        transitions=sum(run.transitions for run in runs),
        depth=max(run.depth for run in runs),
        seconds=sum(run.seconds for run in runs),
        complete=complete,
        stopped_by=stopped[0] if stopped else None,
        distinct_edges=_total([run.distinct_edges for run in runs]),
        invariant_evaluations=_total([run.invariant_evaluations for run in runs]),
        labels=first.labels,
        fired_unit=first.fired_unit,
        fired={label: fired[label] for label in first.labels if label in fired},
        absorbed=dict(sorted(absorbed.items())),
        stop_reasons={
            reason: any(run.stop_reasons[reason] for run in runs) for reason in first.stop_reasons
        },
        disabled_by_policy={},
        warnings=[],
        traps=traps,
        trap_example=next((run.trap_example for run in runs if run.trap_example), None),
        findings=[finding for run in runs for finding in run.findings],
        max_states=first.max_states,
        max_depth=first.max_depth,
        runs=runs,
        violation_summary=_merged_summaries(runs),
        notes=[f"{run.domains.get('name', 'run')}: {note}" for run in runs for note in run.notes],
    )
    judge_reachability(combined, implementation)
    return combined


def _total(counts: list[int | None]) -> int | None:
    """The sum, or None when an engine did not count (the kernel's edges)."""
    return None if any(count is None for count in counts) else sum(c or 0 for c in counts)
