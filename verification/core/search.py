"""The one engine interface: what a search of a state space is given and what it answers.

Every engine that searches the reachable states of a subject (the Python explorer
driving the generated controller, the generated kernel, SPIN) is called the same way,
``engine.search(subject, policy, domains, options)``, and answers one ``SearchResult``
whose counterexamples are ``Finding`` records (``verification.core.harness``): the
calls that break a property, replayed on the subject's controller, with one codec and
one reader. Sharding over processes or Ray actors is an option of a search, not an
engine of its own. ``replan explore``, ``verify``, ``bench`` and ``review`` read only
these two types.

A translated engine (kernel, SPIN) reports a violation of its model only once the
same calls break the same property on the generated controller; one that does not is
a ``translation_bugs`` entry, never a finding.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from replan.controller.policy import Policy, policy_to_dict
from replan.verification.core.domains import Domains
from replan.verification.core.harness import Finding, Operation

if TYPE_CHECKING:
    from replan.verification.core.subject import Subject


@dataclass(frozen=True)
class SearchOptions:
    """How one search is run (bounds, sharding, progress); what is searched is the
    subject, the policy and the domains."""

    #: stop at the first violation (its counterexample is then a shortest one)
    stop_at_first: bool = True
    #: cap the states stored per domain (the search stops cleanly, incomplete)
    max_states: int | None = None
    #: leave states at this depth unexpanded (a bounded search)
    max_depth: int | None = None
    #: store states under a canonical renaming of plan ids; None: the engine decides
    symmetry: bool | None = None
    #: keep the reachable graph (what the campaign's coverage is measured against)
    keep_graph: bool = False
    #: shard the search over this many worker processes (or Ray actors with ``ray``)
    workers: int = 1
    ray: bool = False
    #: progress lines (None: silent), and how often, in seconds
    progress: Callable[[str], None] | None = None
    progress_every: float = 2.0
    #: SPIN only: pan's memory limit in MB, and its state storage
    memory_mb: int | None = None
    storage: str | None = None
    #: kernel only: the directory generated kernels are kept in (None: generate afresh)
    kernel_cache: Path | None = None


class Engine(Protocol):
    """A way to search a subject's reachable states."""

    #: the name ``--engine`` takes
    name: str
    #: the options this engine honours beyond the bounds every engine has
    supports: frozenset[str]

    def search(
        self,
        subject: Subject,
        policy: Policy,
        domains: Domains | Sequence[Domains] | None,
        options: SearchOptions,
    ) -> SearchResult:
        """Search ``subject``'s states under ``policy`` over ``domains`` (None: the
        engine's default domains)."""


class EngineUnavailable(OSError):
    """An engine's tool (spin, gcc) is not installed: one line saying how to get it."""


@dataclass
class SearchResult:
    """Everything one search established (``to_json`` for tools, ``lines`` for people).
    ``findings`` hold the shortest counterexamples, replayed on the controller.

    The coverage fields (``labels``, ``fired``, ``absorbed``, ``stop_reasons``,
    ``disabled_by_policy``, ``traps``) are measured by engines that see which declared
    transition each call fires; ``coverage_measured`` says whether this one did."""

    engine: str
    policy: Policy
    implementation: str
    domains: dict[str, Any]
    domain_lines: list[str]
    symmetry: bool
    states: int
    transitions: int
    depth: int
    seconds: float
    complete: bool
    stopped_by: str | None  # None | "max_states" | "max_depth" | "violation"
    findings: list[Finding]
    #: the number of properties checked on every transition
    properties_checked: int
    #: the Python explorer's own counts (the edges it evaluated, the invariant checks
    #: that cover every transition); None for an engine that does not count them
    distinct_edges: int | None = None
    invariant_evaluations: int | None = None
    labels: tuple[str, ...] = ()
    fired: dict[str, int] = field(default_factory=dict)  # label -> distinct edges it fired on
    #: what ``fired`` counts (in JSON: ``fired_on_<unit>``): the Python explorer's
    #: distinct edges, or the kernel's expanded states
    fired_unit: str = "distinct_edges"
    absorbed: dict[str, int] = field(default_factory=dict)  # "<Stop> absorbs <op>" -> edges
    stop_reasons: dict[str, bool] = field(default_factory=dict)
    disabled_by_policy: dict[str, str] = field(default_factory=dict)  # label -> why off
    warnings: list[str] = field(default_factory=list)
    traps: int | None = None
    trap_example: list[Operation] | None = None
    coverage_measured: bool = True
    max_states: int | None = None
    max_depth: int | None = None
    #: the reachable graph (the Python explorer's ``ExploredGraph``), when kept
    graph: Any = field(default=None, repr=False)
    #: a run firing a declared transition (its label) last, found in the search's
    #: states (None: the transition was not fired), for an engine without a graph
    witness: Callable[[str], list[Operation] | None] | None = field(default=None, repr=False)
    #: Several domains explored one after the other: each run's own result.
    runs: list[SearchResult] = field(default_factory=list)
    #: invariant -> {"transitions": violating transitions found, "shortest": length of
    #: the shortest run ending in one, "first": length of the first one found}
    violation_summary: dict[str, dict[str, int]] = field(default_factory=dict)
    #: a translated model's violation the controller does not reproduce (one line each)
    translation_bugs: list[str] = field(default_factory=list)
    #: engine-specific figures (in ``to_json``) and lines (in ``lines``)
    details: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: the translated model's text (the kernel's Python, SPIN's Promela), if any
    artifact: str | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return not self.findings and not self.translation_bugs

    def save_findings(self, directory: str | Path) -> list[Path]:
        """Write each counterexample as ``<engine>-<property>.json`` (the shared format;
        ``explore-`` for the Python explorer)."""
        prefix = "explore" if self.engine == "python" else self.engine
        target = Path(directory)
        return [
            finding.save(target / f"{prefix}-{finding.property}.json") for finding in self.findings
        ]

    @property
    def states_per_second(self) -> float:
        return self.states / self.seconds if self.seconds > 0 else 0.0

    @property
    def transitions_per_second(self) -> float:
        return self.transitions / self.seconds if self.seconds > 0 else 0.0

    @property
    def unreachable(self) -> list[str]:
        return [
            label
            for label in self.labels
            if label not in self.fired and label not in self.disabled_by_policy
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "ok": self.ok,
            "complete": self.complete,
            "stopped_by": self.stopped_by,
            "implementation": self.implementation,
            "policy": policy_to_dict(self.policy),
            "domains": self.domains,
            "symmetry": self.symmetry,
            "bounds": {"max_states": self.max_states, "max_depth": self.max_depth},
            "states": self.states,
            "transitions": self.transitions,
            "distinct_edges": self.distinct_edges,
            "invariant_evaluations": self.invariant_evaluations,
            "depth": self.depth,
            "seconds": round(self.seconds, 3),
            "states_per_second": round(self.states_per_second),
            "transitions_per_second": round(self.transitions_per_second),
            "transitions_declared": len(self.labels),
            "transitions_reached": sum(1 for label in self.labels if label in self.fired),
            "transition_coverage": {
                label: (
                    "reached"
                    if label in self.fired
                    else "disabled by the policy"
                    if label in self.disabled_by_policy
                    else "unreachable"
                )
                for label in self.labels
            },
            f"fired_on_{self.fired_unit}": dict(self.fired),
            "absorbed_in_final_states": dict(self.absorbed),
            "disabled_by_policy": dict(self.disabled_by_policy),
            "stop_reasons": dict(self.stop_reasons),
            "traps": self.traps,
            "trap_example": None
            if self.trap_example is None
            else [str(operation) for operation in self.trap_example],
            "warnings": list(self.warnings),
            "violations": [finding.to_json() for finding in self.findings],
            "violation_summary": self.violation_summary,
            "translation_bugs": list(self.translation_bugs),
            **self.details,
            "runs": [
                {
                    key: value
                    for key, value in run.to_json().items()
                    if key not in ("policy", "implementation", "runs", "violations")
                }
                for run in self.runs
            ],
        }

    def lines(self) -> list[str]:
        """The human report."""
        out = [
            f"replan explore: {self.implementation}, "
            f"{'symmetry-reduced ' if self.symmetry else ''}breadth-first",
            *self.domain_lines,
            *self.notes,
        ]
        for run in self.runs:
            out.append(
                f"run {run.domains.get('name')}: {run.states:,} states, "
                f"{run.transitions:,} transitions, depth {run.depth}, {run.seconds:.2f} s"
                + ("" if run.complete else f" (INCOMPLETE: {run.stopped_by})")
            )
        if self.runs:
            out.append("together:")
        out += [
            f"states     {self.states:,} distinct"
            + ("" if self.complete else f"  (INCOMPLETE: stopped by {self.stopped_by})"),
            f"transitions {self.transitions:,}"
            + (
                ""
                if self.distinct_edges is None or self.invariant_evaluations is None
                else f"  ({self.distinct_edges:,} distinct edges; "
                f"{self.invariant_evaluations:,} invariant evaluations cover all of them)"
            ),
            f"depth      {self.depth}",
            f"time       {self.seconds:.2f} s  ({self.states_per_second:,.0f} states/s, "
            f"{self.transitions_per_second:,.0f} transitions/s)",
        ]
        out += self._coverage_lines()
        for warning in self.warnings:
            out.append(f"warning: {warning}")
        for bug in self.translation_bugs:
            out.append(f"TRANSLATION BUG: {bug}")
        for finding in self.findings:
            out.append(
                f"VIOLATION {finding.property}: shortest counterexample, "
                f"{len(finding.operations)} operations:"
            )
            out.append(finding.program())
            if finding.message:
                out.append(f"     {finding.message}")
        if self.ok:
            out.append(
                f"all {self.properties_checked} properties hold on every transition explored"
                + ("" if self.complete else " (incomplete search)")
            )
        return out

    def _coverage_lines(self) -> list[str]:
        if not self.coverage_measured:
            return ["declared transitions reached: not measured by this engine"]
        out = []
        reached = sum(1 for label in self.labels if label in self.fired)
        out.append(f"declared transitions reached: {reached}/{len(self.labels)}")
        for label, why in self.disabled_by_policy.items():
            out.append(f"  disabled by the policy: {label}  ({why})")
        stops = ", ".join(
            f"{reason} {'yes' if hit else 'NO'}" for reason, hit in self.stop_reasons.items()
        )
        out.append(f"stop reasons reachable: {stops}")
        if self.traps is None:
            out.append("traps: not determined (the search is incomplete)")
        elif self.traps == 0:
            out.append("traps: none (a stopped state is reachable from every reachable state)")
        else:
            out.append(f"traps: {self.traps} states from which no stopped state is reachable")
        return out
