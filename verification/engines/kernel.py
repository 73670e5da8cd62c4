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
generated.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from replan.controller.policy import Policy
from replan.controller.records import StopReason
from replan.verification.core.combined import search_each
from replan.verification.core.domains import Domains, InputSpace, default_report_domains
from replan.verification.core.harness import Operation, apply, run_view
from replan.verification.core.reachability import judge_reachability
from replan.verification.core.search import SearchOptions, SearchResult
from replan.verification.core.subject import PROJECT, Subject
from replan.verification.engines.trail import initial_failure, operations_of, replay_calls
from replan.verification.translate.kernel import (
    Broken,
    GeneratedKernel,
    Kernel,
    State,
    compiled,
    generate,
    successors_by_call,
)
from replan.verification.translate.kernel.apart import Apart
from replan.verification.translate.kernel_cache import DamagedEntry, KernelCache, cache_key

#: The declared states a run stops in (their values are the stop reasons).
_STOP_VALUES = frozenset(str(reason) for reason in StopReason)
#: How often (in states) the search reports progress.
PROGRESS_EVERY = 250_000


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
) -> SearchResult:
    """Generate the kernel of ``subject`` over ``domains`` (or take it from ``cache``;
    ``generated``: how to generate it, if not here) and search it: up to the first
    violation, or (``stop_at_first`` false) through every violation, with the
    shortest counterexample of each property broken."""
    say = progress or (lambda _message: None)
    started = time.perf_counter()
    kernel, provenance = kernel_for(policy, domains, subject, cache, say, generated)
    translated = time.perf_counter() - started
    say(f"searching ({kernel.groups} kernel functions)")
    started = time.perf_counter()
    found = search(kernel, max_states, say, max_depth, stop_at_first)
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
        details={**_details(kernel, found, translated), "kernel_cache": provenance},
        notes=_notes(kernel, found, translated, seconds, provenance),
        artifact=kernel.source,
    )
    if found.seen is not None:
        _coverage(result, kernel, found, found.seen, subject)
        result.witness = _Witnesses(kernel, found.seen, policy, subject, result.fired)
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


def kernel_for(
    policy: Policy,
    domains: Domains,
    subject: Subject,
    cache: KernelCache | None,
    say: Callable[[str], None],
    generate_apart: Callable[[], GeneratedKernel] | None = None,
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
        return compiled(generated(), policy, domains, subject.model), {"status": "off"}
    if subject != PROJECT:
        kernel = compiled(generated(), policy, domains, subject.model)
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
            return compiled(kept, policy, domains, subject.model), {
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
    return compiled(fresh, policy, domains, subject.model), provenance


def _coverage(
    result: SearchResult, kernel: Kernel, found: Search, seen: Seen, subject: Subject
) -> None:
    """The report's coverage, as the Python explorer gives it: which declared
    transitions fired (with the number of expanded states each fired in), which stop
    reasons were reached, the traps (complete searches only), and the judgement of
    both (``judge_reachability``)."""
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
    if found.complete:
        trapped = _traps(kernel, seen, members)
        result.traps = len(trapped)
        if trapped:
            numbers = _calls_to(kernel, seen.parent, seen.states, trapped[0])
            result.trap_example = operations_of(result.policy, subject, kernel.calls, numbers)
    judge_reachability(result, subject.controller)


class _Witnesses:
    """Runs that fire a declared transition last, as the Python explorer's graph gives
    them (the campaign asks for one per transition it missed): the search's path to
    the shallowest expanded state where a call fires it, then that call (found on the
    controller, whose trace names the transition each call fires)."""

    def __init__(
        self,
        kernel: Kernel,
        seen: Seen,
        policy: Policy,
        subject: Subject,
        fired: Mapping[str, int],
    ) -> None:
        self.kernel, self.seen, self.policy, self.subject = kernel, seen, policy, subject
        self.labels = list(subject.controller.transitions)
        self.fired = frozenset(self.labels.index(label) for label in fired)
        self._shallowest: dict[int, int] | None = None

    def __call__(self, label: str) -> list[Operation] | None:
        """A run firing ``label`` last; None when no call fired it."""
        if label not in self.labels:
            return None
        wanted = self.labels.index(label)
        index = self.shallowest().get(wanted)
        if index is None:
            return None
        kernel, policy, subject = self.kernel, self.policy, self.subject
        calls = _calls_to(kernel, self.seen.parent, self.seen.states, index)
        path = operations_of(policy, subject, kernel.calls, calls)
        controller: Any = subject.controller(policy)
        for operation in path:
            apply(controller, operation)
        here = controller._export_state()
        view = run_view(controller)
        for call in kernel.calls:
            if not call.offered_in(view):
                continue
            operation = Operation(call.event, call.concrete(view))
            trial: Any = subject.controller(policy)
            trial._import_state(here)
            apply(trial, operation)
            if trial._trace and trial._trace[-1][5] == wanted:
                return [*path, operation]
        return None

    def shallowest(self) -> dict[int, int]:
        """Per declared transition fired, the first expanded state (breadth first, so
        the shallowest) where a call fires it: one pass over the states, for every
        transition, made on the first question and kept."""
        if self._shallowest is None:
            found: dict[int, int] = {}
            kernel, states = self.kernel, self.seen.states
            for index in range(len(self.seen.ends)):  # the expanded states
                state = states[index]
                mode = state[kernel.mode_position]
                for number in kernel.fired_static[mode]:
                    found.setdefault(number, index)
                dynamic = kernel.fired[mode]
                for number in dynamic(state) if dynamic is not None else ():
                    found.setdefault(number, index)
                if len(found) >= len(self.fired) and self.fired <= found.keys():
                    break
            self._shallowest = found
        return self._shallowest


def _traps(kernel: Kernel, seen: Seen, members: list[str]) -> list[int]:
    """The states (by index, shallowest first) from which no stopped state is
    reachable: all but those a backward search from the stopped states reaches."""
    stopped = {n for n, member in enumerate(members) if member in _STOP_VALUES}
    count = len(seen.states)
    predecessors: list[list[int]] = [[] for _ in range(count)]
    start = 0
    for source, end in enumerate(seen.ends):
        for target in seen.targets[start:end]:
            predecessors[target].append(source)
        start = end
    position = kernel.mode_position
    alive = bytearray(count)
    frontier = [n for n, state in enumerate(seen.states) if state[position] in stopped]
    for n in frontier:
        alive[n] = 1
    while frontier:
        following = []
        for n in frontier:
            for before in predecessors[n]:
                if not alive[before]:
                    alive[before] = 1
                    following.append(before)
        frontier = following
    return [n for n in range(count) if not alive[n]]


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
    kernel: Kernel, found: Search, translated: float, seconds: float, provenance: dict[str, Any]
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
        f"  translate {translated:.1f} s ({_provenance_text(provenance)}), search {seconds:.2f} s",
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
    supports = frozenset({"max_states", "max_depth", "kernel_cache", "stop_at_first"})

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
            index: partial(_generate, policy, each, subject, options.progress)
            for index, each in enumerate(every)
            if not _kept(cache, policy, each, subject)
        }
        with Apart(jobs) as apart:
            searched = iter(range(len(every)))

            def one(each: Domains) -> SearchResult:
                index = next(searched)
                return explore_kernel(
                    policy,
                    each,
                    subject,
                    max_states=options.max_states,
                    max_depth=options.max_depth,
                    progress=options.progress,
                    cache=cache,
                    stop_at_first=options.stop_at_first,
                    generated=partial(apart.kernel, index) if index in apart else None,
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


@dataclass
class Search:
    states: int
    transitions: int
    evaluated: int
    depth: int
    #: (property, the calls reaching it): the first violation of each property broken,
    #: in the order found (shortest first); one when the search stopped at it
    violations: list[tuple[str, list[int]]]
    #: property -> {"transitions": how many break it, "shortest", "first": their
    #: lengths}, as the Python explorer counts them
    summary: dict[str, dict[str, int]]
    stopped_at_violation: bool
    #: what the search saw, for the report's coverage (``_coverage``)
    seen: Seen | None = None
    #: the bound that stopped it early ("max_states", "max_depth"), if any
    capped: str | None = None

    @property
    def complete(self) -> bool:
        """Every reachable state was expanded: neither a violation nor a bound stopped it."""
        return not self.stopped_at_violation and self.capped is None


@dataclass
class Seen:
    """What the search saw beyond the counts: the states themselves and their parents,
    how many states of each declared state were expanded, the declared transitions
    fired that depend on the state (index -> states where they fired), and every
    expanded state's successors (``ends[i]`` is one past state i's last in
    ``targets``), from which the traps are found."""

    states: list[State]
    parent: array[int]
    expanded_per_mode: list[int]
    fired_dynamic: dict[int, int]
    targets: array[int]
    ends: array[int]


def search(
    kernel: Kernel,
    max_states: int | None,
    say: Callable[[str], None],
    max_depth: int | None = None,
    stop_at_first: bool = True,
) -> Search:
    """Breadth-first over the kernel's states: the first violation of a property found
    is on a shortest path (every transition of a depth is tried before the next
    depth). Only a state's parent is kept; the call between them is found again for a
    counterexample (``_calls_to``). ``max_depth`` leaves the states at that depth
    unexpanded, as the Python explorer does. Without ``stop_at_first``, a state whose
    ``expand`` breaks a property is expanded call by call instead (``_every_outcome``):
    every violation is counted and the search goes on from the states they reach, as
    the Python explorer's does."""
    initial = kernel.initial
    index: dict[State, int] = {initial: 0}
    states = [initial]
    seen = Seen(states, array("q", [-1]), [0] * len(kernel.expand), {}, array("q"), array("q"))
    parent, targets, ends = seen.parent, seen.targets, seen.ends  # 8 bytes an entry
    expand, fired, fired_static = kernel.expand, kernel.fired, kernel.fired_static
    expanded, fired_dynamic = seen.expanded_per_mode, seen.fired_dynamic
    invariants, mode_position = kernel.invariants, kernel.mode_position
    offered_static, offered = kernel.offered_static, kernel.offered
    canonical = kernel.canonical
    transitions = 0
    limit = max_states if max_states is not None else -1
    depth, source, level_end = 0, 0, 1  # level_end: one past the current depth's last
    found = _Violations(kernel, parent, states)
    capped: str | None = None
    next_report = PROGRESS_EVERY
    while source < len(states):
        if source == level_end:
            depth, level_end = depth + 1, len(states)
        if max_depth is not None and depth >= max_depth:
            capped = "max_depth"
            break
        state = states[source]
        mode = state[mode_position]
        expanded[mode] += 1
        transitions += offered_static[mode]
        if offered[mode] is not None:
            transitions += offered[mode](state)  # type: ignore[misc]
        successors = expand[mode](state)
        if successors.__class__ is str:
            if stop_at_first:
                found.first_call(source)
                break
            successors = _every_outcome(kernel, state, found, source, depth)
        if fired[mode] is not None:
            for number in fired[mode](state) - fired_static[mode]:  # type: ignore[misc]
                fired_dynamic[number] = fired_dynamic.get(number, 0) + 1
        if canonical is not None:
            successors = [canonical(successor) for successor in successors]
        for successor in successors:
            target = index.get(successor)
            if target is None:
                target = index[successor] = len(states)
                states.append(successor)
                parent.append(source)
                failed = invariants(successor)
                if failed is not None:
                    found.add(
                        (failed,), depth + 1, partial(_calls_to, kernel, parent, states, target)
                    )
                    if stop_at_first:
                        break
            targets.append(target)
        if found.list and stop_at_first:
            break
        ends.append(len(targets))
        source += 1
        if len(states) >= next_report:
            say(f"kernel: {len(states):,} states, {transitions:,} transitions, depth {depth}")
            next_report += PROGRESS_EVERY
        if limit >= 0 and len(states) >= limit:
            capped = "max_states"
            break
    evaluated = sum(n * classes for n, classes in zip(expanded, kernel.classes, strict=True))
    stopped = bool(found.list) and stop_at_first
    return Search(
        len(states),
        transitions,
        evaluated,
        depth,
        violations=found.list,
        summary=found.summary,
        stopped_at_violation=stopped,
        seen=seen,
        capped=capped,
    )


class _Violations:
    """The violations a search finds: the first of each property with the calls
    reaching it (found again only for that first one), and every one counted."""

    def __init__(self, kernel: Kernel, parent: Sequence[int], states: list[State]) -> None:
        self.kernel, self.parent, self.states = kernel, parent, states
        self.list: list[tuple[str, list[int]]] = []
        self.summary: dict[str, dict[str, int]] = {}

    def add(self, names: Sequence[str], length: int, path: Callable[[], list[int]]) -> None:
        """One transition, of ``length`` calls, breaking ``names``."""
        for name in names:
            counted = self.summary.get(name)
            if counted is None:
                self.summary[name] = {"transitions": 1, "shortest": length, "first": length}
                self.list.append((name, path()))
            else:
                counted["transitions"] += 1
                counted["shortest"] = min(counted["shortest"], length)

    def first_call(self, source: int) -> None:
        """The first call of ``states[source]`` that breaks a property (its ``expand``
        said one does), as the one violation of a search that stops there."""
        outcomes = successors_by_call(self.kernel, self.states[source])
        broken = [(n, o) for n, o in outcomes.items() if isinstance(o, Broken)]
        if not broken:
            raise RuntimeError(
                "kernel: no call's function breaks the property its expand function broke "
                "(the two disagree: a generator bug)"
            )
        number, outcome = broken[0]
        path = _calls_through(self.kernel, self.parent, self.states, source, number)
        self.add(outcome.names[:1], len(path), partial(list, path))


def _every_outcome(
    kernel: Kernel, state: State, found: _Violations, source: int, depth: int
) -> list[State]:
    """Every call not settled in ``state``'s declared state run on its own, as
    ``expand`` runs them: the successors in the calls' order (the settled calls leave
    the state as it is and are not listed), each violation added to ``found``."""
    successors: list[State] = []
    for number, step in kernel.steps[state[kernel.mode_position]]:
        outcome = step(state)
        if outcome is None:  # not offered in this state
            continue
        if isinstance(outcome, Broken):
            path = partial(_calls_through, kernel, found.parent, found.states, source, number)
            found.add(outcome.names, depth + 1, path)
            outcome = outcome.successor
        successors.append(outcome)
    return successors


def _calls_through(
    kernel: Kernel, parent: Sequence[int], states: list[State], source: int, number: int
) -> list[int]:
    """The calls to ``states[source]``, then call ``number`` (with a renaming of ids,
    the call doing the same in the state the path reaches)."""
    calls, reached = _walk(kernel, parent, states, source)
    if reached == states[source]:
        return [*calls, number]
    wanted = successors_by_call(kernel, states[source])[number]
    for other, outcome in successors_by_call(kernel, reached).items():
        if type(outcome) is type(wanted) and _stored(kernel, outcome) == _stored(kernel, wanted):
            return [*calls, other]
    raise RuntimeError("kernel: no call does in a renamed state what it did in the stored one")


def _calls_to(kernel: Kernel, parent: Sequence[int], states: list[State], target: int) -> list[int]:
    """The calls along the search's path to ``states[target]``."""
    return _walk(kernel, parent, states, target)[0]


def _walk(
    kernel: Kernel, parent: Sequence[int], states: list[State], target: int
) -> tuple[list[int], State]:
    """The calls along the search's path to ``states[target]``, each found again as the
    first call taking the state reached so far to one stored as the next, and the
    state they reach (``states[target]`` itself, or a renaming of it whose ids the
    calls name as they are: what the controller is driven through)."""
    path = [target]
    while path[-1] > 0:
        path.append(parent[path[-1]])
    numbers: list[int] = []
    here = kernel.initial
    for index in reversed(path[:-1]):
        outcomes = successors_by_call(kernel, here)
        found = [n for n, o in outcomes.items() if _stored(kernel, o) == states[index]]
        if not found:
            raise RuntimeError(
                "kernel: no call's function gives the state its expand function gave "
                "(the two disagree: a generator bug)"
            )
        numbers.append(found[0])
        here = _reached(outcomes[found[0]])
    return numbers, here


def _stored(kernel: Kernel, outcome: State | Broken) -> State:
    """The state an outcome is stored as (its canonical form, with a renaming)."""
    reached = _reached(outcome)
    return reached if kernel.canonical is None else kernel.canonical(reached)


def _reached(outcome: State | Broken) -> State:
    return outcome.successor if isinstance(outcome, Broken) else outcome
