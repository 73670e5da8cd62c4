"""The kernel search's reachable states as a graph, in the controller's terms: what a
campaign's coverage is measured against and a proof's counterexample state is looked
for in, as the Python explorer's ``ExploredGraph`` gives them.

Why no graph is built: the search already keeps every state (a tuple of small ints),
its parent and its successors; a state is decoded into the controller's ``RunState``
when a report asks for it (``translate/kernel/decode.py``), and the declared
transitions each expanded state fires are read from the kernel's firing tables, as
the report's coverage of declared transitions is.

Why the graph by abstract state may be made beside (``abstract_beside``): on a large
policy it takes seconds, and ``replan verify`` needs it only for the campaign's
coverage, after the search; made in a forked process as soon as the search ends, it
is ready when the campaign's check asks, while this process finishes the explorer's
report and runs what the campaign missed.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator
from operator import itemgetter
from typing import Any

from replan.controller.fields import position as field_position
from replan.controller.run import RunState
from replan.verification.core.abstraction import (
    IGNORED_FIELD,
    IGNORED_PLAN_PART,
    SCALARS,
    AbstractGraph,
    abstract_graph,
    abstract_numbering,
)
from replan.verification.core.harness import Operation
from replan.verification.engines.kernel.paths import Witnesses, calls_to
from replan.verification.engines.trail import operations_of
from replan.verification.runtime.beside import Beside, BesideError
from replan.verification.translate.kernel.decode import Decoding


class KernelGraph:
    """The states one kernel search stored (breadth first, the initial state 0), and
    for each expanded state the declared transitions its calls fire. Edge labels are
    the model's declared transitions, by their number."""

    def __init__(self, witnesses: Witnesses, decoding: Decoding) -> None:
        self.witnesses, self.decoding = witnesses, decoding
        self.kernel, self.seen = witnesses.kernel, witnesses.seen
        #: per state field, the function reading it from a state tuple (made once: a
        #: report decodes every reachable state)
        self.readers = decoding.field_readers()
        self.edge_labels: list[str | None] = list(witnesses.labels)
        self._abstracted: AbstractGraph | None = None
        self._beside: Beside | None = None

    @property
    def states(self) -> int:
        return len(self.seen.states)

    def state(self, index: int) -> RunState:
        state = self.seen.states[index]
        return tuple(read(state) for read in self.readers)

    def declared(self, index: int) -> str:
        return self.kernel.modes[self.seen.states[index][self.kernel.mode_position]]

    def depth(self, index: int) -> int:
        depth, parent = 0, self.seen.parent
        while parent[index] >= 0:
            index, depth = parent[index], depth + 1
        return depth

    def path(self, index: int) -> list[Operation]:
        """The operations of a shortest run from the initial state to ``index``."""
        numbers = calls_to(self.kernel, self.seen.parent, self.seen.states, index)
        policy, subject = self.witnesses.policy, self.witnesses.subject
        return operations_of(policy, subject, self.kernel.calls, numbers)

    def witness(self, label: str) -> list[Operation] | None:
        return self.witnesses(label)

    def abstract_numbering(self) -> tuple[dict[tuple[Any, ...], int], array[int]]:
        """Per abstract state, the first state mapped to it; per state, that number.
        A state is decoded once per combination of the positions the abstraction reads
        (states differing only in plan revisions are many), and its containers
        (evidence, contents, id sets) once per distinct combination of the positions
        holding them: far fewer than the states."""
        scalars, containers = self.readers[:SCALARS], self.readers[SCALARS:]
        held = _picker(self.decoding.positions_of(slice(SCALARS, None)))
        compared = _picker(
            self.decoding.positions_except(field_position(IGNORED_FIELD), IGNORED_PLAN_PART)
        )
        parts: dict[Any, tuple[Any, ...]] = {}

        def decode(state: tuple[int, ...]) -> RunState:
            key = held(state)
            found = parts.get(key)
            if found is None:
                found = parts[key] = tuple(read(state) for read in containers)
            return (*(read(state) for read in scalars), *found)

        states = self.seen.states
        keyed = zip(map(compared, states), map(held, states), states, strict=True)
        return abstract_numbering(keyed, decode)

    def abstract_beside(self) -> None:
        """Start making ``abstracted()`` in a forked process (where forking is safe)."""
        if self._abstracted is None and self._beside is None:
            self._beside = Beside.start({"abstracted": self._abstract})

    def abstracted(self) -> AbstractGraph:
        if self._abstracted is None:
            beside, self._beside = self._beside, None
            if beside is not None:
                try:
                    self._abstracted, _ = beside.collect("abstracted")
                except BesideError:  # e.g. the process was killed: made here instead
                    beside.cancel()
            if self._abstracted is None:
                self._abstracted = self._abstract()
        return self._abstracted

    def _abstract(self) -> AbstractGraph:
        labels = len(self.edge_labels)
        return abstract_graph(self.abstract_numbering(), self.fired_pairs(), labels)

    def fired_pairs(self) -> Iterator[tuple[int, int]]:
        """(state, declared transition) of every transition an expanded state's calls
        fire (a call that fires none is not one)."""
        kernel, states = self.kernel, self.seen.states
        position, fired, fired_static = kernel.mode_position, kernel.fired, kernel.fired_static
        for index in range(len(self.seen.ends)):  # the expanded states
            state = states[index]
            mode = state[position]
            numbers = set(fired_static[mode])
            dynamic = fired[mode]
            if dynamic is not None:
                numbers |= dynamic(state)
            for number in numbers:
                if number >= 0:
                    yield index, number


def _picker(positions: list[int]) -> Callable[[tuple[int, ...]], tuple[int, ...]]:
    """The function reading ``positions`` of a state tuple as a tuple."""
    if len(positions) == 1:
        (only,) = positions
        return lambda s: (s[only],)
    return itemgetter(*positions)
