"""The explorer's side of campaign coverage: what share of the reachable states and
transitions a campaign visited, and whether a proof's counterexample state is one the
explorer reached.

Both sides are mapped through ``core.abstraction.abstract_state``, so a campaign's
states (any ids, sources, version numbers) land on the explorer's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from replan.controller import Controller
from replan.controller.fields import position as field_position
from replan.controller.fields import state_of_snapshot
from replan.controller.policy import DEFAULT_POLICY, Policy
from replan.controller.run import Run, RunState
from replan.verification.core.abstraction import (
    P_DECLARED,
    P_PENDING,
    AbstractGraph,
    abstract_state,
    evidence_of,
)
from replan.verification.core.domains import (
    Domains,
)
from replan.verification.core.harness import Finding, Operation
from replan.verification.core.search import SearchResult
from replan.verification.engines.explore.engine import explore


class ReachableGraph(Protocol):
    """What an engine keeps of the reachable set for coverage and for proofs'
    counterexample states (the Python explorer's ``ExploredGraph``, the kernel's
    ``KernelGraph``): states numbered breadth first from 0, the initial state."""

    edge_labels: list[str | None]

    @property
    def states(self) -> int: ...

    def state(self, index: int) -> RunState: ...

    def declared(self, index: int) -> str: ...

    def depth(self, index: int) -> int: ...

    def path(self, index: int) -> list[Operation]: ...

    def abstracted(self) -> AbstractGraph:
        """The graph by abstract state (``abstraction.abstract_graph``), made once."""
        ...


#: The fields of a described abstract state (``verification.engines.prove.engine.describe_state``)
#: that a reachable state is compared on (ids are z3's own numbers: not compared).
_DESCRIBED = ("state", "evidence_revision", "plan_revision", "steps", "proposals", "no_progress")


def _described(state: RunState) -> dict[str, Any]:
    pending = state[P_PENDING]
    counters = {name: state[field_position(f"_{name}")] for name in _DESCRIBED[1:]}
    return {
        "state": str(state[P_DECLARED]),
        **counters,
        "pending": None if pending is None else str(pending[3]),
        "evidence": {key: value for key, _, value in evidence_of(state)},
    }


def unreachable_fields(
    results: Sequence[SearchResult], description: Mapping[str, Any], keys: Sequence[str]
) -> list[str] | None:
    """Whether no state the explorer reached looks like ``description`` (a proof's
    counterexample state): None when one does (or the search was incomplete, or kept
    no graph), else the fields that show it, each ``field=value`` that no reachable
    state has (all of them when only the combination is new)."""
    wanted = {name: description.get(name) for name in _DESCRIBED}
    pending = description.get("pending")
    wanted["pending"] = None if pending is None else pending.get("step")
    evidence = description.get("evidence", {})
    wanted["evidence"] = {k: evidence.get(k, "Unknown") for k in keys}
    seen: dict[str, set[str]] = {name: set() for name in wanted}
    for result in results:
        if result.graph is None or not result.complete:
            return None
        for index in range(result.graph.states):
            found = _described(result.graph.state(index))
            found["evidence"] = {k: found["evidence"].get(k, "Unknown") for k in keys}
            if found == wanted:
                return None
            for name, value in found.items():
                seen[name].add(json.dumps(value, sort_keys=True))
    fields = [
        f"{name}={json.dumps(value)}"
        for name, value in wanted.items()
        if json.dumps(value, sort_keys=True) not in seen[name]
    ]
    return fields or [f"{name}={json.dumps(value)}" for name, value in wanted.items()]


@dataclass
class Coverage:
    """A campaign's visited states and transitions measured against the explorer's
    reachable set, both mapped by ``abstract_state``; a transition is (abstract state,
    the trace's "transition" field)."""

    states_reached: int
    states_total: int
    transitions_reached: int
    transitions_total: int
    labels_reached: list[str]
    labels_total: list[str]
    outside_states: int
    outside_transitions: int
    unreached: dict[str, Any]
    domain: str = ""

    @staticmethod
    def _percent(part: int, whole: int) -> float:
        return 100.0 * part / whole if whole else 100.0

    def line(self) -> str:
        """``states x/N (p%), transitions y/M (q%)``."""
        return (
            f"states {self.states_reached:,}/{self.states_total:,} "
            f"({self._percent(self.states_reached, self.states_total):.1f}%), "
            f"transitions {self.transitions_reached:,}/{self.transitions_total:,} "
            f"({self._percent(self.transitions_reached, self.transitions_total):.1f}%)"
        )

    def lines(self) -> list[str]:
        where = f" ({self.domain})" if self.domain else ""
        out = [f"coverage vs explorer{where}: {self.line()}"]
        out.append(
            f"  declared transitions: {len(self.labels_reached)}/{len(self.labels_total)} "
            "of those the explorer reaches"
        )
        if self.outside_states or self.outside_transitions:
            out.append(
                f"  outside the explored domains: {self.outside_states:,} states, "
                f"{self.outside_transitions:,} transitions"
            )
        missing = self.unreached.get("declared_transitions", [])
        for label in missing:
            out.append(f"  never taken: {label}")
        by_state = self.unreached.get("states_by_declared_state", {})
        if by_state:
            out.append(
                "  unreached states by declared state: "
                + ", ".join(f"{name} {count:,}" for name, count in by_state.items())
            )
        for example in self.unreached.get("shallowest", []):
            out.append(f"  e.g. depth {example['depth']}: " + "; ".join(example["operations"]))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "summary": self.line(),
            "domain": self.domain,
            "abstraction": "abstract_state: ids, sources and version numbers renamed, "
            "plan revision dropped (verification/engines/explore/engine.py)",
            "states": {"reached": self.states_reached, "total": self.states_total},
            "transitions": {"reached": self.transitions_reached, "total": self.transitions_total},
            "declared_transitions": {
                "reached": len(self.labels_reached),
                "total": len(self.labels_total),
            },
            "outside_explored_domains": {
                "states": self.outside_states,
                "transitions": self.outside_transitions,
            },
            "unreached": self.unreached,
        }


#: A state as a snapshot (dict) or an ``_export_state`` tuple.
StateLike = Mapping[str, Any] | RunState


def _as_state(value: StateLike) -> RunState:
    return state_of_snapshot(value) if isinstance(value, Mapping) else tuple(value)


def coverage(
    result: SearchResult,
    visited_states: Iterable[StateLike],
    visited_transitions: Iterable[tuple[Any, ...]] = (),
    *,
    examples: int = 3,
    abstracted: bool = False,
) -> Coverage:
    """How much of ``result``'s reachable graph (the Python explorer's, kept with
    ``keep_graph=True``, or the kernel's) a campaign visited, both mapped by
    ``abstract_state``. States are snapshots (dicts, or canonical JSON strings of
    them, or ``_export_state`` tuples); a transition is (state before the call, the
    trace record's "transition" field), the pair the campaign records, so the
    explorer's transitions are the distinct (abstract state, declared transition
    fired) pairs of its graph; a call that fires none (absorbed by a stopped run,
    refused by the input check) is not one, on either side. ``abstracted``: the
    states given are ``abstract_state`` values already (a campaign's ``Visited``
    records)."""
    graph = result.graph
    if graph is None:
        raise ValueError("coverage needs an exploration run with keep_graph=True")
    reachable = graph.abstracted()
    first_index, width = reachable.first_index, reachable.width
    declared_labels = set(result.labels)
    label_numbers = {
        label: number
        for number, label in enumerate(graph.edge_labels)
        if label is not None and label in declared_labels
    }
    declared = set(label_numbers.values())
    pairs = {pair for pair in reachable.pairs if pair % width in declared}
    abstract: Callable[[Any], tuple[Any, ...]] = tuple if abstracted else _abstract
    visited = [first_index.get(abstract(value)) for value in visited_states]
    state_hits = {found for found in visited if found is not None}
    outside_states = visited.count(None)
    pair_hits: set[int] = set()
    outside_transitions = 0
    for item in visited_transitions:
        if item[1] not in declared_labels:
            continue  # no declared transition fired
        pair = _pair(item, abstract, first_index, label_numbers, width)
        if pair is None or pair not in pairs:
            outside_transitions += 1
        else:
            pair_hits.add(pair)
    reachable_labels = [label for label in result.labels if label in result.fired]
    taken = {graph.edge_labels[pair % width] for pair in pair_hits}
    unreached = {
        "states": len(first_index) - len(state_hits),
        "transitions": len(pairs) - len(pair_hits),
        "declared_transitions": [label for label in reachable_labels if label not in taken],
        **_unreached_states(graph, first_index, state_hits, examples),
    }
    return Coverage(
        states_reached=len(state_hits),
        states_total=len(first_index),
        transitions_reached=len(pair_hits),
        transitions_total=len(pairs),
        labels_reached=[label for label in reachable_labels if label in taken],
        labels_total=reachable_labels,
        outside_states=outside_states,
        outside_transitions=outside_transitions,
        unreached=unreached,
        domain=str(result.domains.get("name", "")),
    )


def _pair(
    transition: tuple[Any, ...],
    abstract: Callable[[Any], tuple[Any, ...]],
    first_index: Mapping[tuple[Any, ...], int],
    label_numbers: Mapping[str | None, int],
    width: int,
) -> int | None:
    """A visited (state before the call, transition label) as the graph's pair
    number, or None when the state or the label is not in the explored graph."""
    number = label_numbers.get(transition[1])
    if number is None:
        return None
    found = first_index.get(abstract(transition[0]))
    return None if found is None else found * width + number


def _abstract(value: Any) -> tuple[Any, ...]:
    """A visited state (a snapshot, its canonical JSON, or an ``_export_state``
    tuple) mapped by ``abstract_state``."""
    if isinstance(value, str):
        value = json.loads(value)
    return abstract_state(_as_state(value))


def _unreached_states(
    graph: ReachableGraph,
    first_index: Mapping[tuple[Any, ...], int],
    state_hits: set[int],
    examples: int,
) -> dict[str, Any]:
    """The abstract states the campaign missed, by declared state and by depth, and
    shortest runs to the ``examples`` shallowest of them."""
    by_state: dict[str, int] = {}
    unreached_depths: dict[int, int] = {}
    shallowest: list[tuple[int, int]] = []
    for index in first_index.values():
        if index in state_hits:
            continue
        declared = graph.declared(index)
        by_state[declared] = by_state.get(declared, 0) + 1
        depth = graph.depth(index)
        unreached_depths[depth] = unreached_depths.get(depth, 0) + 1
        shallowest.append((depth, index))
    shallowest.sort()
    return {
        "states_by_declared_state": dict(sorted(by_state.items())),
        "states_by_depth": dict(sorted(unreached_depths.items())),
        "shallowest": [
            {"depth": depth, "operations": [str(op) for op in graph.path(index)]}
            for depth, index in shallowest[:examples]
        ],
    }


@dataclass
class CampaignComparison:
    """A campaign measured against the explorer (``replan campaign
    --coverage-vs-explorer``): its coverage of each explored domain's reachable set
    and, when the campaign failed, the shortest run in those domains that breaks the
    same property, saved beside the campaign's own counterexample."""

    coverage: list[Coverage]
    explored: SearchResult
    campaign_property: str | None = None
    campaign_length: int | None = None
    shortest: Finding | None = None
    saved: Path | None = None

    def lines(self) -> list[str]:
        out: list[str] = []
        for measured in self.coverage:
            out += measured.lines()
        if self.campaign_property is not None:
            if self.shortest is None:
                out.append(
                    f"shortest equivalent trace: none in the explored domains breaks "
                    f"{self.campaign_property}"
                )
            else:
                out.append(
                    f"shortest equivalent trace: {len(self.shortest.operations)} operations "
                    f"break {self.campaign_property} (the campaign's shrunk run: "
                    f"{self.campaign_length})" + (f"; saved {self.saved}" if self.saved else "")
                )
                out.append(self.shortest.program())
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "domains": {
                measured.domain or str(index): measured.to_json()
                for index, measured in enumerate(self.coverage)
            },
            "engine": self.explored.engine,
            "explored": {
                "states": self.explored.states,
                "transitions": self.explored.transitions,
                "complete": self.explored.complete,
                "seconds": round(self.explored.seconds, 3),
            },
            "shortest_equivalent": None
            if self.shortest is None
            else {
                "property": self.shortest.property,
                "operations": len(self.shortest.operations),
                "campaign_operations": self.campaign_length,
                "file": None if self.saved is None else str(self.saved),
            },
        }


def compare_campaign(
    campaign: Any,
    policy: Policy | None = None,
    implementation: type[Run] = Controller,
    out_dir: str | Path | None = None,
    *,
    domains: Domains | Sequence[Domains] | None = None,
    max_states: int | None = 1_000_000,
    progress: Callable[[str], None] | None = None,
) -> CampaignComparison:
    """Explore ``policy`` (default report domains unless given) on the campaign's
    implementation with this explorer, keeping the graph and every invariant's shortest
    counterexample, then measure the campaign against it (``campaign_against``)."""
    policy = DEFAULT_POLICY if policy is None else policy
    explored = explore(
        policy,
        domains,
        implementation,
        keep_graph=True,
        stop_at_first=False,
        max_states=max_states,
        progress=progress,
    )
    return campaign_against(campaign, explored, out_dir)


def campaign_against(
    campaign: Any, explored: SearchResult, out_dir: str | Path | None = None
) -> CampaignComparison:
    """The campaign (``visited`` and ``finding`` of a
    ``verification.engines.campaign.run.CampaignResult``) measured against ``explored``
    (any engine's search that kept its graph and went on through violations); on a
    failure, the explorer's shortest run breaking the same property, saved in
    ``out_dir``."""
    runs = explored.runs or [explored]
    measured = [
        coverage(
            run,
            campaign.visited.abstract_states(),
            campaign.visited.abstract_transitions(),
            abstracted=True,
        )
        for run in runs
    ]
    comparison = CampaignComparison(measured, explored)
    finding = getattr(campaign, "finding", None)
    if finding is not None:
        comparison.campaign_property = finding.property
        comparison.campaign_length = len(finding.operations)
        same = [f for f in explored.findings if f.property == finding.property]
        if same:
            comparison.shortest = min(same, key=lambda f: len(f.operations))
            if out_dir is not None:
                comparison.saved = comparison.shortest.save(
                    Path(out_dir) / f"explore-shortest-{finding.property}.json"
                )
    return comparison
