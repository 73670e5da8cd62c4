"""The reachable graph one exploration kept: what a campaign's coverage is measured
against, and where a witness for a declared transition is found.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import Any

from replan.controller.run import RunState
from replan.verification.core.abstraction import (
    SCALARS,
    AbstractGraph,
    abstract_graph,
    abstract_numbering,
)
from replan.verification.core.harness import Operation, apply
from replan.verification.engines.explore.search import StateSearch, normal_state


class ExploredGraph:
    """The reachable states and distinct edges of one exploration, in the explorer's
    abstraction (a state is a ``Run._export_state()`` tuple, ids canonically renamed
    when the search was symmetry-reduced; an edge is (state, fired transition label,
    successor)). What ``coverage`` measures a campaign against."""

    def __init__(self, engine: StateSearch) -> None:
        self._engine = engine
        self._index: dict[RunState, int] | None = None
        self._abstracted: AbstractGraph | None = None
        self._witness_sources: dict[int, int] | None = None
        self.edge_labels: list[str | None] = engine.edge_labels

    @property
    def states(self) -> int:
        return len(self._engine.keys)

    @property
    def edges(self) -> set[tuple[int, int, int]]:
        return self._engine.edges

    @property
    def symmetry(self) -> bool:
        return self._engine.symmetry

    def state(self, index: int) -> RunState:
        return self._engine.full(self._engine.keys[index])

    def declared(self, index: int) -> str:
        """The declared state of state ``index``."""
        return str(self._engine.keys[index][0])

    def abstract_numbering(self) -> tuple[dict[tuple[Any, ...], int], array[int]]:
        """Per abstract state, the first state mapped to it; per state, that number
        (``abstraction.abstract_numbering``, the containers by their interned numbers;
        no key per state: the search's keys hold the plan revision, so none is shared)."""
        engine = self._engine
        return abstract_numbering(((None, key[SCALARS:], key) for key in engine.keys), engine.full)

    def fired_pairs(self) -> Iterator[tuple[int, int]]:
        """(state, label number) of every distinct edge."""
        return ((source, number) for source, number, _ in self._engine.edges)

    def abstracted(self) -> AbstractGraph:
        if self._abstracted is None:
            labels = len(self.edge_labels)
            self._abstracted = abstract_graph(self.abstract_numbering(), self.fired_pairs(), labels)
        return self._abstracted

    def depth(self, index: int) -> int:
        return self._engine.depth_of(index)

    def index_of(self, state: RunState) -> int | None:
        """The index of a state (an ``_export_state`` tuple), after the same canonical
        renaming the search used; None when the search never reached it."""
        if self._index is None:
            self._index = {self.state(i): i for i in range(self.states)}
        if self._engine.symmetry:
            state = self._engine.canonical_full(state)
        return self._index.get(normal_state(state))

    def path(self, index: int) -> list[Operation]:
        """The operations of a shortest run from the initial state to ``index``."""
        return self._engine.operations_to(index)

    def witness(self, label: str) -> list[Operation] | None:
        """A run that fires the declared transition ``label`` last: a shortest path to
        the shallowest state an edge labelled ``label`` leaves, then an operation of
        the search's domain that fires it there (tried on a concrete run, so the ids
        are the run's own even in a symmetry-reduced search). None when the search
        never fired it."""
        if self._witness_sources is None:
            shallowest: dict[int, int] = {}  # states are numbered breadth first
            for source, number, _ in self._engine.edges:
                if source < shallowest.get(number, source + 1):
                    shallowest[number] = source
            self._witness_sources = shallowest
        if label not in self.edge_labels:
            return None
        source = self._witness_sources.get(self.edge_labels.index(label))
        engine = self._engine
        if source is None or label not in engine.labels:
            return None
        wanted = engine.labels.index(label)
        path = self.path(source)
        controller: Any = engine.implementation(engine.policy)
        for operation in path:
            apply(controller, operation)
        here = controller._export_state()
        for operation in engine.operations(engine.key(here)):
            trial: Any = engine.implementation(engine.policy)
            trial._import_state(here)
            apply(trial, operation)
            if trial._trace and trial._trace[-1][5] == wanted:
                return [*path, operation]
        return None
