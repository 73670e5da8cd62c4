"""Calls along the kernel search's stored paths: a counterexample's, a witness's (a
shortest run firing a declared transition, for the campaign), a trap's. States are
stored under a canonical renaming of their ids, so each path is walked forward,
choosing at each step the call whose successor is stored as the next state: the calls
then name ids as the controller sees them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from replan.controller.policy import Policy
from replan.controller.records import StopReason
from replan.verification.core.harness import Operation, apply, run_view
from replan.verification.core.subject import Subject
from replan.verification.engines.trail import operations_of
from replan.verification.translate.kernel import Broken, Kernel, State, successors_by_call

if TYPE_CHECKING:
    from replan.verification.engines.kernel.search import Seen

#: The declared states a run stops in (their values are the stop reasons).
_STOP_VALUES = frozenset(str(reason) for reason in StopReason)


class Witnesses:
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
        calls = calls_to(kernel, self.seen.parent, self.seen.states, index)
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


def traps(kernel: Kernel, seen: Seen, members: list[str]) -> list[int]:
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


def calls_through(
    kernel: Kernel, parent: Sequence[int], states: list[State], source: int, number: int
) -> list[int]:
    """The calls to ``states[source]``, then call ``number`` (with a renaming of ids,
    the call doing the same in the state the path reaches)."""
    calls, reached = walk(kernel, parent, states, source)
    if reached == states[source]:
        return [*calls, number]
    wanted = successors_by_call(kernel, states[source])[number]
    for other, outcome in successors_by_call(kernel, reached).items():
        if type(outcome) is type(wanted) and _stored(kernel, outcome) == _stored(kernel, wanted):
            return [*calls, other]
    raise RuntimeError("kernel: no call does in a renamed state what it did in the stored one")


def calls_to(kernel: Kernel, parent: Sequence[int], states: list[State], target: int) -> list[int]:
    """The calls along the search's path to ``states[target]``."""
    return walk(kernel, parent, states, target)[0]


def walk(
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
