"""Exhaustive breadth-first exploration of every reachable state of a controller.

Owns: enumerating, for a policy and finite input domains (``verification/core/domains.py``),
every state the *generated* controller (or any controller class passed in, such as a
mutant) can reach; checking every property of ``spec/properties.py`` on every
transition (and every state invariant on every new state); the report (distinct
states, transitions, depth, speed, which declared transitions and stop reasons are
reachable, dead-transition warnings, traps); the
shortest counterexample on a violation, as a ``verification.core.harness.Finding``; and the
explorer's side of campaign coverage (``coverage``).
Leaves to others: what an operation and a counterexample are (``harness``), the
properties (``spec.properties``), the controller's behaviour (the controller: every
transition here is a real call of the real generated dispatch).

How a transition is explored (the design; figures in ``evidence/explore-*.json``,
rendered on the docs' Performance page):

- A state's identity is ``Run._export_state()``: a tuple holding exactly what
  ``snapshot()`` holds, field for field (equal tuples <=> equal snapshots; a test
  converts every reachable state of a small domain both ways). Its four container
  parts (latest records, contents, accepted, completed) are interned as small ints,
  so a state key is 11 flat fields and hashes in a fraction of a microsecond.
- The controller is put in a state once per state; before each operation only the
  scalar fields are rewritten. Its dicts and sets are replaced by *tracked* copies
  (subclasses whose every mutating method records the field it changed), so after a
  call only a changed container is re-exported and restored, and an unchanged one
  keeps its interned part; a field an action *replaced* is caught by identity. Reads
  go to the C methods of dict and set, untouched. A test checks these successors
  against import / call / export on hundreds of states.
- Properties are evaluated on the runs themselves: ``before`` is the controller the
  source state was imported into (never called), ``after`` the live one the call
  changed. Within one source state, the transitions that share (operation name, fired
  transition, answer, successor) get one evaluation of each property whose
  parameters do not include the argument (a property is a pure function of what it
  takes, so a call that agrees on all of it gets the same verdict); a property that
  takes the argument is evaluated on every transition. State invariants are
  evaluated once per new state. So every property holds on every transition; the
  report counts transitions, distinct edges and evaluations.
- Symmetry (optional; on by default for fresh-id domains): plan ids are
  interchangeable (the contract only compares them for equality), so a state can be
  stored under a canonical renaming of its ids (ordered by accepted, completed,
  pending); ``--symmetry both`` reports both counts and whether the verdicts agree.
- ``workers`` > 1: the state space is sharded by state hash over forked processes,
  shared-nothing, level by level (``verification/engines/explore/sharded.py``); the parent merges
  the shards, so the states, transitions, verdicts and counterexample lengths are the
  serial search's (a state's first-found parent may differ).

What dominates (cProfile, the default report's observation domain): the properties,
about half: each transition evaluates the properties of its event that take the
argument (most of them: a property starts by asking whether its rule applies to this
argument), through one generated function per operation group; the explorer's own
loop (restore, key, hash, memo) a sixth; the generated controller's calls a tenth.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from replan.controller import Controller
from replan.controller.fields import state_of_snapshot
from replan.controller.policy import DEFAULT_POLICY, Policy
from replan.controller.records import StopReason
from replan.controller.run import Run
from replan.spec.contract import Contract
from replan.verification.core.combined import search_each
from replan.verification.core.domains import (
    Domains,
    InputSpace,
    default_report_domains,
    observation_domains,
    plan_domains,
    product_domains,
    spin_domains,
)
from replan.verification.core.harness import Finding, Operation, apply, violated
from replan.verification.core.reachability import judge_reachability
from replan.verification.core.search import SearchOptions, SearchResult
from replan.verification.core.subject import Subject
from replan.verification.engines.explore.graph import ExploredGraph
from replan.verification.engines.explore.search import StateSearch, Violation
from replan.verification.engines.explore.serial import search_serial

__all__ = [
    "Domains",
    "default_report_domains",
    "explore",
    "observation_domains",
    "plan_domains",
    "product_domains",
    "shortest_path_to_violation",
    "spin_domains",
    "state_of_snapshot",
]

# ---- the search ------------------------------------------------------------------------


def _implementation_name(implementation: type[Run]) -> str:
    module = implementation.__module__
    if implementation is Controller or module == "replan.controller._generated":
        return "replan.controller.Controller (generated)"
    return f"{module}:{implementation.__qualname__}"


def explore(
    policy: Policy | None = None,
    domains: Domains | Sequence[Domains] | None = None,
    implementation: type[Run] = Controller,
    *,
    symmetry: bool | None = None,
    max_states: int | None = None,
    max_depth: int | None = None,
    stop_at_first: bool = True,
    check_invariants: bool = True,
    keep_graph: bool = False,
    progress: Callable[[str], None] | None = None,
    progress_every: float = 2.0,
    implementation_name: str | None = None,
    workers: int = 1,
    ray: bool = False,
    contract: Contract | None = None,
    importable: str | None = None,
) -> SearchResult:
    """Breadth-first search of every state ``implementation`` reaches under ``policy``
    with the operations of ``domains`` (default: ``default_report_domains(policy)``;
    several domains are explored one after the other and reported together, each in
    ``runs``), checking every invariant on every transition.

    Stops at the first violation when ``stop_at_first`` (its counterexample is then a
    shortest one: every state of smaller depth was fully expanded without one);
    otherwise it explores everything and keeps, per invariant, the first violation
    found, which is a shortest counterexample to that invariant. ``max_states`` caps
    the states stored per domain (the search stops cleanly, ``complete`` False);
    ``max_depth`` leaves states at that depth unexpanded (bounded search).
    ``symmetry`` stores states under a canonical renaming of their plan ids; None:
    for fresh-id domains (designed for it) but not for fixed pools (SPIN's count
    states unreduced). ``workers`` > 1 shards the search over that many forked
    processes, or with ``ray`` over that many Ray actors on the cluster this process
    joined (``verification.runtime.ray_cluster.connect``): the same states, transitions,
    verdicts and counterexamples as one process. ``contract``: the properties checked
    (default: ``spec.properties.CONTRACT``); ``importable``: the "module:Class" Ray's
    workers import the implementation by.

    Long: the body is short; the length is the public keyword options and the one
    docstring that documents them all."""
    policy = DEFAULT_POLICY if policy is None else policy
    if contract is None:
        from replan.spec.properties import CONTRACT

        contract = CONTRACT
    if domains is None:
        domains = default_report_domains(policy)
    name = implementation_name or _implementation_name(implementation)

    def one(each: Domains) -> SearchResult:
        return _explore_one(
            policy,
            each,
            implementation,
            name,
            contract=contract,
            importable=importable,
            symmetry=symmetry,
            max_states=max_states,
            max_depth=max_depth,
            stop_at_first=stop_at_first,
            check_invariants=check_invariants,
            keep_graph=keep_graph,
            progress=progress,
            progress_every=progress_every,
            workers=workers,
            ray=ray,
        )

    if isinstance(domains, Domains):
        return one(domains)
    return search_each(domains, one, stop_at_first, implementation)


class PythonExplorer:
    """The breadth-first explorer driving the generated controller (``--engine python``):
    every domain (fresh ids, derived arguments, products), symmetry, sharding, and
    the full report (coverage of the declared transitions, stop reasons, traps)."""

    name = "python"
    supports = frozenset(
        {"max_states", "max_depth", "symmetry", "keep_graph", "workers", "ray", "stop_at_first"}
    )

    def search(
        self,
        subject: Subject,
        policy: Policy,
        domains: Domains | Sequence[Domains] | None,
        options: SearchOptions,
    ) -> SearchResult:
        return explore(
            policy,
            domains,
            subject.controller,
            symmetry=options.symmetry,
            max_states=options.max_states,
            max_depth=options.max_depth,
            stop_at_first=options.stop_at_first,
            keep_graph=options.keep_graph,
            progress=options.progress,
            progress_every=options.progress_every,
            implementation_name=subject.implementation_path,
            workers=options.workers,
            ray=options.ray,
            contract=subject.contract,
            importable=subject.importable,
        )


def _explore_one(
    policy: Policy,
    domains: Domains,
    implementation: type[Run],
    name: str,
    *,
    contract: Contract,
    importable: str | None,
    symmetry: bool | None,
    max_states: int | None,
    max_depth: int | None,
    stop_at_first: bool,
    check_invariants: bool,
    keep_graph: bool,
    progress: Callable[[str], None] | None,
    progress_every: float,
    workers: int,
    ray: bool = False,
) -> SearchResult:
    """Search one domain and report it.

    Long: the stages live in helpers (``_initial_broken``, ``_search``, ``_traps``,
    ``_findings``, ``judge_reachability``); what is left is the search's keyword options passed
    through and the one ``SearchResult`` they fill in."""
    space = InputSpace(policy, domains)
    symmetry = domains.renamed(symmetry)
    started = time.perf_counter()
    engine = StateSearch(
        policy,
        space,
        implementation,
        contract=contract,
        symmetry=symmetry,
        check_invariants=check_invariants,
        keep_graph=keep_graph,
        stop_at_first=stop_at_first,
    )
    engine.importable = importable
    initial_broken = _initial_broken(engine, policy) if check_invariants else []
    if initial_broken and stop_at_first:
        depth, stopped_by = 0, "violation"
    else:
        depth, stopped_by = _search(
            engine,
            domains.name,
            workers=workers,
            ray=ray,
            max_states=max_states,
            max_depth=max_depth,
            stop_at_first=stop_at_first,
            progress=progress,
            progress_every=progress_every,
        )
    seconds = time.perf_counter() - started
    complete = stopped_by is None
    labels = engine.labels
    fired = {labels[number]: count for number, count in sorted(engine.fired.items())}
    stop_reasons = {str(reason): str(reason) in engine.stop_seen for reason in StopReason}
    traps, trap_example = _traps(engine) if complete else (None, None)
    findings = _findings(engine, policy, name, initial_broken, stopped_by, stop_at_first)
    result = SearchResult(
        engine="python",
        policy=policy,
        implementation=name,
        properties_checked=len(contract),
        domains=space.describe(),
        domain_lines=space.lines(),
        symmetry=symmetry,
        states=len(engine.keys),
        transitions=engine.transitions,
        depth=depth,
        seconds=seconds,
        complete=complete,
        stopped_by=stopped_by,
        distinct_edges=engine.distinct_edges,
        invariant_evaluations=engine.evaluations,
        labels=labels,
        fired=fired,
        absorbed=dict(sorted(engine.absorbed.items())),
        stop_reasons=stop_reasons,
        disabled_by_policy={},
        warnings=[],
        traps=traps,
        trap_example=trap_example,
        findings=findings,
        max_states=max_states,
        max_depth=max_depth,
        graph=ExploredGraph(engine) if keep_graph else None,
        violation_summary=engine.violation_summary,
    )
    judge_reachability(result, implementation)
    return result


def _initial_broken(engine: StateSearch, policy: Policy) -> list[str]:
    """The properties the initial state breaks: it is checked like any other state,
    and against the rules of a fresh run."""
    live = engine.live
    broken: list[str] = engine.checker.initial(live, policy) + engine.checker.state(live)
    return broken


def _search(
    engine: StateSearch,
    label: str,
    *,
    workers: int,
    ray: bool,
    max_states: int | None,
    max_depth: int | None,
    stop_at_first: bool,
    progress: Callable[[str], None] | None,
    progress_every: float,
) -> tuple[int, str | None]:
    """Drive ``engine`` in this process, or sharded over workers or Ray actors:
    (depth reached, why it stopped early or None)."""
    if workers > 1 or ray:
        from replan.verification.engines.explore.sharded import search_sharded

        return search_sharded(
            engine,
            max(workers, 1),
            max_states,
            max_depth,
            stop_at_first,
            progress,
            progress_every,
            label,
            ray=ray,
        )
    return search_serial(
        engine, max_states, max_depth, stop_at_first, progress, progress_every, label
    )


def _traps(engine: StateSearch) -> tuple[int, list[Operation] | None]:
    """How many states of a complete search reach no stopped state, and a shortest
    run to the shallowest of them."""
    trapped = engine.traps()
    return len(trapped), engine.operations_to(trapped[0]) if trapped else None


def _findings(
    engine: StateSearch,
    policy: Policy,
    name: str,
    initial_broken: list[str],
    stopped_by: str | None,
    stop_at_first: bool,
) -> list[Finding]:
    """The findings to report: the initial state's, then the first violation (when
    the search stopped at it) or the first of every invariant broken."""
    findings: list[Finding] = [
        Finding(
            broken,
            policy,
            [],
            [],
            message=f"the initial state breaks {broken}",
            source="explorer",
            extra={"implementation": name, "depth": 0},
        )
        for broken in initial_broken
    ]
    for broken in initial_broken:
        engine.violation_summary[broken] = {"transitions": 0, "shortest": 0, "first": 0}
    if initial_broken and stop_at_first:
        return findings
    if stopped_by == "violation":
        first = engine.violations[0]
        findings.append(_finding(engine, first, first.invariants[0], name))
    else:
        for invariant, violation in engine.first_violation.items():
            findings.append(_finding(engine, violation, invariant, name))
    return findings


def _finding(engine: StateSearch, violation: Violation, invariant: str, name: str) -> Finding:
    """The shortest counterexample ending with ``violation``, replayed to record the
    answers and to confirm it breaks ``invariant``."""
    from replan.verification.core.harness import observe_call

    source_key = engine.keys[violation.source]
    if engine.symmetry:
        path_targets = []
        index = violation.source
        while engine.parent[index] >= 0:
            path_targets.append((engine.keys[index], None))
            index = engine.parent[index]
        path_targets.reverse()
        final = engine.canonical(violation.concrete_key)
        operations = engine._concrete_path([*path_targets, (final, invariant)])
    else:
        operations = [
            *engine.operations_to(violation.source),
            engine.operations(source_key)[violation.via],
        ]
    subject: Any = engine.implementation(engine.policy)
    results = [apply(subject, operation) for operation in operations[:-1]]
    last = observe_call(engine.policy, subject, operations[-1])
    results.append(last.result)
    broken = violated(last, engine.checker)
    if invariant not in broken:  # pragma: no cover - the search and the replay disagree
        raise RuntimeError(f"replaying the explored path does not break {invariant}")
    return Finding(
        property=invariant,
        policy=engine.policy,
        operations=operations,
        results=results,
        message=f"{operations[-1]} breaks {', '.join(broken)} "
        f"(shortest: {len(operations)} operations, breadth-first)",
        source="explorer",
        extra={"implementation": name, "depth": len(operations)},
    )


# ---- the explorer's side of campaign coverage and shortest equivalent traces ------------


def shortest_path_to_violation(
    policy: Policy | None,
    invariant_name: str,
    implementation: type[Run] = Controller,
    domains: Domains | Sequence[Domains] | None = None,
    *,
    max_states: int | None = 1_000_000,
    contract: Contract | None = None,
) -> Finding | None:
    """The shortest run (in ``domains``, default the default report's) after which
    ``implementation`` breaks ``invariant_name``, or None when no explored transition
    breaks it. What a campaign offers beside its own (shrunk) failure: breadth-first
    search keeps the first violation of each invariant, and no counterexample to it in
    the same domain is shorter. With several domains, the shortest over all of them."""
    if contract is None:
        from replan.spec.properties import CONTRACT

        contract = CONTRACT
    if invariant_name not in contract:
        raise ValueError(
            f"{invariant_name!r} is not a named property (known: {', '.join(contract.names)})"
        )
    policy = DEFAULT_POLICY if policy is None else policy
    if domains is None:
        domains = default_report_domains(policy)
    candidates: list[Finding] = []
    for each in [domains] if isinstance(domains, Domains) else list(domains):
        result = explore(
            policy,
            each,
            implementation,
            stop_at_first=False,
            max_states=max_states,
            contract=contract,
        )
        candidates += [f for f in result.findings if f.property == invariant_name]
    return min(candidates, key=lambda finding: len(finding.operations), default=None)
