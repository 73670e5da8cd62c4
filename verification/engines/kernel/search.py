"""The kernel's breadth-first search: a dict from state to its index, a parent per
state for the shortest counterexample, the counts (every call a state offers is a
transition of it, as in SPIN's model and the Python explorer), and what the report's
coverage and the witnesses are read from (``Seen``)."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from replan.verification.engines.kernel.paths import calls_through, calls_to
from replan.verification.translate.kernel import Broken, Kernel, State, successors_by_call

#: How often (in states) the search reports progress.
PROGRESS_EVERY = 250_000


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
    counterexample (``calls_to``). ``max_depth`` leaves the states at that depth
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
                        (failed,), depth + 1, partial(calls_to, kernel, parent, states, target)
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
        path = calls_through(self.kernel, self.parent, self.states, source, number)
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
            path = partial(calls_through, kernel, found.parent, found.states, source, number)
            found.add(outcome.names, depth + 1, path)
            outcome = outcome.successor
        successors.append(outcome)
    return successors
