"""``replan explore --engine kernel``: breadth-first search over the generated kernel.

Owns the search over ``verification/translate/kernel/``'s state tuples (a dict from state to
its index, a parent per state for the shortest counterexample; with fresh ids, each
state stored under the explorer's canonical renaming), the counts (every call a state
offers is a transition of it, as in SPIN's model and the object explorer), a witness
for each declared transition fired (what the campaign is seeded from), and the
report: the coverage the explorer gives (the declared transitions fired, the stop
reasons reached, the traps, from the successors kept per state), judged by the same
code. A violation found in the kernel is replayed on the real generated controller
before it is reported (``engines/trail.py``): one that does not reproduce is a
translation bug, never a property failure. Where the kernel comes from is
``kernel_for``: a cache entry when one is sound (``translate/kernel_cache.py``), else
generated (apart, ``translate/kernel/apart.py``). Here: the engine and its report;
``search.py``: the breadth-first search; ``paths.py``: the calls along the search's
stored paths (counterexamples, witnesses, traps).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from replan.controller.policy import Policy
from replan.controller.records import StopReason
from replan.verification.core.combined import search_each
from replan.verification.core.domains import Domains, InputSpace, default_report_domains
from replan.verification.core.reachability import judge_reachability
from replan.verification.core.search import SearchOptions, SearchResult
from replan.verification.core.subject import PROJECT, Subject
from replan.verification.engines.kernel.graph import KernelGraph
from replan.verification.engines.kernel.paths import Witnesses, calls_to, traps
from replan.verification.engines.kernel.search import Search, Seen, search
from replan.verification.engines.kernel.sharded import KernelSetup, search_sharded
from replan.verification.engines.trail import initial_failure, operations_of, replay_calls
from replan.verification.translate.kernel import GeneratedKernel, Kernel, compiled, generate
from replan.verification.translate.kernel.apart import Apart
from replan.verification.translate.kernel_cache import DamagedEntry, KernelCache, cache_key


def explore_kernel(
    policy: Policy,
    domains: Domains,
    subject: Subject,
    *,
    max_states: int | None = None,
    max_depth: int | None = None,
    progress: Callable[[str], None] | None = None,
    cache: KernelCache | None = None,
    stop_at_first: bool = True,
    generated: Callable[[], GeneratedKernel] | None = None,
    workers: int = 1,
    ray: bool = False,
    generating: Callable[[], bool] = lambda: False,
    progress_every: float = 30.0,
    symmetry: bool | None = None,
    abstract_beside: bool = False,
) -> SearchResult:
    """Generate the kernel of ``subject`` over ``domains`` (or take it from ``cache``;
    ``generated``: how to generate it, if not here) and search it: up to the first
    violation, or (``stop_at_first`` false) through every violation, with the
    shortest counterexample of each property broken; over ``workers`` shards (Ray
    actors with ``ray``) where ``sharded.py`` can, and in this process while another
    domain's kernel is ``generating`` (it has the cores the shards would take).
    ``symmetry``: states stored under the canonical renaming of their plan ids (None:
    with fresh ids only, as the Python explorer chooses). ``abstract_beside``: a
    campaign's coverage will be measured against the graph: make it by abstract state
    in a forked process as soon as the search ends (``KernelGraph.abstract_beside``)."""
    say = progress or (lambda _message: None)
    started = time.perf_counter()
    kernel, provenance = kernel_for(policy, domains, subject, cache, say, generated, symmetry)
    translated = time.perf_counter() - started
    started = time.perf_counter()
    found, shards = _searched(
        kernel,
        _Sharding(workers, ray, generating(), progress_every),
        partial(
            KernelSetup, policy=policy, domains=domains, model=subject.model, symmetry=symmetry
        ),
        max_states,
        max_depth,
        stop_at_first,
        say,
    )
    seconds = time.perf_counter() - started
    space = InputSpace(policy, domains)
    result = SearchResult(
        engine="kernel",
        policy=policy,
        implementation=subject.implementation_path,
        domains=space.describe(),
        domain_lines=space.lines(),
        symmetry=kernel.canonical is not None,
        states=found.states,
        transitions=found.transitions,
        depth=found.depth,
        seconds=seconds,
        complete=found.complete,
        stopped_by=_stopped_by(found),
        findings=[
            initial_failure(policy, name, subject, "kernel") for name in kernel.initial_failures
        ],
        properties_checked=len(kernel.checked),
        coverage_measured=False,
        max_states=max_states,
        max_depth=max_depth,
        violation_summary=found.summary,
        details={
            **_details(kernel, found, translated),
            "kernel_cache": provenance,
            "search_shards": shards,
            "search_on_ray": ray and shards > 1,
        },
        notes=_notes(kernel, found, translated, seconds, provenance, shards),
        artifact=kernel.source,
    )
    if found.seen is not None:
        _fired(result, kernel, found.seen, subject)
        witnesses = Witnesses(kernel, found.seen, policy, subject, result.fired)
        result.witness = witnesses
        if kernel.decoding is not None:
            result.graph = graph = KernelGraph(witnesses, kernel.decoding)
            if abstract_beside:
                graph.abstract_beside()
        _traps(result, kernel, found, found.seen, subject)
    for prop, numbers in found.violations:
        violation = replay_calls(
            policy,
            subject,
            kernel.calls,
            list(kernel.unchecked),
            numbers,
            prop,
            "the kernel",
            "kernel",
            {"engine": "kernel", "kernel_digest": kernel.digest},
        )
        violation.report_in(result, "the kernel")
    return result


@dataclass(frozen=True)
class _Sharding:
    """How a search may be sharded: over ``workers`` (Ray actors with ``ray``), unless
    another domain's kernel is ``generating``; progress every ``progress_every`` s."""

    workers: int
    ray: bool
    generating: bool
    progress_every: float


def _searched(
    kernel: Kernel,
    sharding: _Sharding,
    setup: Callable[..., KernelSetup],
    max_states: int | None,
    max_depth: int | None,
    stop_at_first: bool,
    say: Callable[[str], None],
) -> tuple[Search, int]:
    """The kernel's search, sharded where ``sharded.py`` can (``setup``: what Ray
    actors compile the kernel from), and over how many shards."""
    shards = sharding.workers if sharding.ray or sharding.workers > 1 else 1
    if shards > 1 and not stop_at_first:
        say(
            "kernel: searching in one process (a search going on through violations is not sharded)"
        )
        shards = 1
    if shards > 1 and not sharding.ray and sharding.generating:
        say("kernel: searching in one process (another domain's kernel is being generated)")
        shards = 1
    if shards > 1:
        where = "Ray actors" if sharding.ray else "processes"
        say(f"searching ({kernel.groups} kernel functions, sharded over {shards} {where})")
        actors = None
        if sharding.ray:
            if kernel.generated is None:
                raise RuntimeError("kernel: no generated text for the Ray actors to compile")
            actors = setup(generated=kernel.generated)
        found = search_sharded(
            kernel, shards, max_states, max_depth, say, actors, sharding.progress_every
        )
        if found is not None:
            return found, shards
        say(
            "kernel: the shards met a violation or max_states; searching in one process, "
            "which stops where a serial search does"
        )
    say(f"searching ({kernel.groups} kernel functions)")
    return search(kernel, max_states, say, max_depth, stop_at_first), 1


def kernel_for(
    policy: Policy,
    domains: Domains,
    subject: Subject,
    cache: KernelCache | None,
    say: Callable[[str], None],
    generate_apart: Callable[[], GeneratedKernel] | None = None,
    symmetry: bool | None = None,
) -> tuple[Kernel, dict[str, Any]]:
    """The kernel, and where it came from (JSON-ready): taken from ``cache`` when it
    holds a sound entry for these inputs, else generated (by ``generate_apart`` when
    given, else here; and kept there). Only the project's own subject is cached
    (``kernel_cache.py`` says why)."""

    def generated() -> GeneratedKernel:
        if generate_apart is not None:
            return generate_apart()
        return generate(
            policy, domains, subject.model, subject.model_class, say, contract=subject.contract
        )

    if cache is None:
        return compiled(generated(), policy, domains, subject.model, symmetry), {"status": "off"}
    if subject != PROJECT:
        kernel = compiled(generated(), policy, domains, subject.model, symmetry)
        return kernel, {"status": "not cached", "why": f"{subject.name}: not the project's bodies"}
    key = cache_key(policy, domains, subject.model)
    path = str(cache.path(key))
    damage = None
    try:
        kept = cache.load(key)
    except DamagedEntry as error:
        kept, damage = None, str(error)
    if kept is not None:
        try:
            say(f"compiling the kernel kept at {path}")
            return compiled(kept, policy, domains, subject.model, symmetry), {
                "status": "reused",
                "path": path,
            }
        except (ValueError, RuntimeError, KeyError) as error:  # e.g. a table of other calls
            damage = str(error)
    fresh = generated()
    provenance: dict[str, Any] = {"status": "generated", "path": path}
    if damage is not None:
        provenance.update(status="regenerated", why=f"the entry kept there was unsound: {damage}")
    try:
        cache.store(key, fresh)
    except OSError as error:
        provenance.update(path=None, why=f"not kept: {error.strerror or error}")
    return compiled(fresh, policy, domains, subject.model, symmetry), provenance


def _fired(result: SearchResult, kernel: Kernel, seen: Seen, subject: Subject) -> None:
    """The report's coverage, as the Python explorer gives it: which declared
    transitions fired (with the number of expanded states each fired in), and which
    stop reasons were reached."""
    labels = subject.controller.transitions
    counts = dict(seen.fired_dynamic)
    for mode, expanded in enumerate(seen.expanded_per_mode):
        for number in kernel.fired_static[mode] if expanded else ():
            counts[number] = counts.get(number, 0) + expanded
    members = kernel.modes
    reached = {members[mode] for mode in {state[kernel.mode_position] for state in seen.states}}
    result.labels = labels
    result.fired = {labels[n]: count for n, count in sorted(counts.items()) if n >= 0}
    result.stop_reasons = {str(reason): str(reason) in reached for reason in StopReason}
    result.coverage_measured = True
    result.fired_unit = "expanded_states"


def _traps(
    result: SearchResult, kernel: Kernel, found: Search, seen: Seen, subject: Subject
) -> None:
    """The traps (complete searches only: states from which no stopped state is
    reachable), and the judgement of them and of what fired (``judge_reachability``)."""
    members = kernel.modes
    if found.complete:
        trapped = traps(kernel, seen, members)
        result.traps = len(trapped)
        if trapped:
            numbers = calls_to(kernel, seen.parent, seen.states, trapped[0])
            result.trap_example = operations_of(result.policy, subject, kernel.calls, numbers)
    judge_reachability(result, subject.controller)


def _stopped_by(found: Search) -> str | None:
    return "violation" if found.stopped_at_violation else found.capped


def _details(kernel: Kernel, found: Search, translated: float) -> dict[str, Any]:
    """The kernel's own figures, for ``--json``."""
    return {
        "transitions_evaluated": found.evaluated,
        "translate_seconds": round(translated, 3),
        "kernel_digest": kernel.digest,
        "kernel_functions": kernel.groups,
        "state_variables": len(kernel.variables),
        "calls_per_state": len(kernel.calls),
        "checked": kernel.checked,
        "unchecked": kernel.unchecked,
    }


def _notes(
    kernel: Kernel,
    found: Search,
    translated: float,
    seconds: float,
    provenance: dict[str, Any],
    shards: int,
) -> list[str]:
    """What the kernel's report says beyond the counts every engine gives."""
    share = found.evaluated / found.transitions if found.transitions else 0.0
    per_state = any(count is not None for count in kernel.offered)
    calls = (
        f"{len(kernel.calls)} calls, each where a state offers it"
        if per_state
        else f"{len(kernel.calls)} calls per state"
    )
    # a call offered only in some states is counted wherever its declared state is
    # expanded, so with such calls the figure is a bound
    bound = "at most " if per_state else ""
    notes = [
        f"engine: the generated kernel ({calls}, "
        f"{kernel.groups} functions over a {len(kernel.variables)}-variable state; "
        f"kernel {kernel.digest[:19]})",
        f"  evaluated: {bound}{found.evaluated:,} calls' code for {found.transitions:,} "
        f"transitions ({bound}{share:.0%}); the rest leave their state unchanged with every "
        "property decided when the kernel was generated, or have the same code as a call "
        "evaluated (the same class of arguments in that state)",
        f"  translate {translated:.1f} s ({_provenance_text(provenance)}), search {seconds:.2f} s"
        + (f" over {shards} shards" if shards > 1 else ""),
        f"properties checked on every transition: {len(kernel.checked)}",
    ]
    notes += [
        f"  not checked by the kernel: {name} ({why})"
        for name, why in sorted(kernel.unchecked.items())
    ]
    return notes


def _provenance_text(provenance: dict[str, Any]) -> str:
    status = provenance["status"]
    if status == "reused":
        return f"the kernel kept at {provenance['path']}"
    if status == "off":
        return "generated afresh, not cached"
    text = "generated again" if status == "regenerated" else "generated"
    if provenance.get("path"):
        text += f", kept at {provenance['path']}"
    return f"{text}; {provenance['why']}" if provenance.get("why") else text


class KernelEngine:
    """The generated kernel as an engine (``--engine kernel``): the declaration's
    dispatch as pure Python over a state tuple, searched breadth first."""

    name = "kernel"
    supports = frozenset(
        {
            "max_states",
            "max_depth",
            "kernel_cache",
            "stop_at_first",
            "workers",
            "ray",
            "symmetry",
        }
    )

    def search(
        self,
        subject: Subject,
        policy: Policy,
        domains: Domains | Sequence[Domains] | None,
        options: SearchOptions,
    ) -> SearchResult:
        cache = None if options.kernel_cache is None else KernelCache(options.kernel_cache)
        every = [domains] if isinstance(domains, Domains) else domains
        every = default_report_domains(policy) if every is None else every
        jobs = {
            each: partial(_generate, policy, each, subject, options.progress)
            for each in every
            if not _kept(cache, policy, each, subject)
        }
        with Apart(jobs) as apart:

            def one(each: Domains) -> SearchResult:
                return explore_kernel(
                    policy,
                    each,
                    subject,
                    max_states=options.max_states,
                    max_depth=options.max_depth,
                    progress=options.progress,
                    cache=cache,
                    stop_at_first=options.stop_at_first,
                    generated=partial(apart.kernel, each) if each in apart else None,
                    workers=options.workers,
                    ray=options.ray,
                    generating=lambda: apart.generating,
                    progress_every=options.progress_every,
                    symmetry=options.symmetry,
                    abstract_beside=options.keep_graph and options.workers > 1,
                )

            if isinstance(domains, Domains):
                return one(domains)
            return search_each(every, one, options.stop_at_first, subject.controller)


def _generate(
    policy: Policy,
    domains: Domains,
    subject: Subject,
    progress: Callable[[str], None] | None,
) -> GeneratedKernel:
    """The kernel of ``subject`` over ``domains``, its progress lines naming the domain
    (the domains' kernels may be generated at once)."""

    def say(message: str) -> None:
        if progress is not None:
            progress(f"{domains.name}: {message}")

    model, model_class = subject.model, subject.model_class
    return generate(policy, domains, model, model_class, say, contract=subject.contract)


def _kept(cache: KernelCache | None, policy: Policy, domains: Domains, subject: Subject) -> bool:
    """Whether ``cache`` has an entry for this kernel (read, and checked, when taken)."""
    if cache is None or subject != PROJECT:
        return False
    return cache.path(cache_key(policy, domains, subject.model)).is_file()


__all__ = ["KernelEngine", "Search", "Seen", "explore_kernel", "kernel_for", "search"]
