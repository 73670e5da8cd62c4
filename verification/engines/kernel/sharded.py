"""The kernel's breadth-first search over shards (``--workers N``, ``--ray``): each
shard stores the states whose hash falls to it and expands them, level by level, by
``verification/runtime/levels.py``'s rounds; the parent then numbers every state, and
lays out every parent and successor, exactly as ``search.py``'s serial search does, so
the report, the coverage, the witnesses and the traps are computed from the same
``Seen``.

Why a shard remembers the other shards' states it has met (``KernelShard.ids``): a state is
reached from many others (the deploy agent's plans domain: 2.4 million successors
for 310,857 states), and a successor crosses to its owner only the first time a
shard meets it, not at every transition reaching it.

What is not sharded: a search that goes on through violations. A sharded search that
meets a violation, or reaches ``max_states``, is done again serially: a serial search
stops inside a level (at the violation it meets first, at the state the bound
allows), a sharded one only at a level's end; so the counterexample, and the states
of a capped search, are the same whatever the workers.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from replan.controller.policy import Policy
from replan.spec.model import MachineModel
from replan.verification.core.domains import Domains
from replan.verification.engines.kernel.search import Search, Seen
from replan.verification.runtime import levels
from replan.verification.translate.kernel import GeneratedKernel, Kernel, State, compiled


class KernelShard:
    """The states of one shard (those whose hash modulo the shard count is its
    number), answering the rounds of ``runtime/levels.py``. Every id another shard
    or the parent sees is global: local index times the shard count, plus the shard."""

    def __init__(self, kernel: Kernel, shard: tuple[int, int]) -> None:
        self.kernel = kernel
        self.shard, self.shards = shard
        #: every state met, by global id: this shard's own, the other shards' once
        #: their owner gave one, and this level's sent away by a placeholder
        #: (``-1 - k``, k indexing ``refs``); one lookup per successor
        self.ids: dict[State, int] = {}
        self.states: list[State] = []  # this shard's own, by local index
        #: per own state: its first discoverer (the parent's serial number, the
        #: successor's position among the parent's), its level and serial number
        self.parent, self.via = array("q"), array("q")
        self.levels, self.ranks = array("q"), array("q")
        #: per placeholder: the state sent, and (owner, its position in what was sent)
        self.sent: list[State] = []
        self.refs: list[tuple[int, int]] = []
        self.outgoing: list[list[tuple[State, int, int]]] = [[] for _ in range(self.shards)]
        #: the states expanded, in order (by serial number), and their successors
        #: (``ends`` and ``targets`` as in ``Seen``; placeholders until patched)
        self.expanded_order = array("q")
        self.targets, self.ends = array("q"), array("q")
        self.unpatched = array("q")  # positions in ``targets`` holding placeholders
        self.expanded = [0] * len(kernel.expand)
        self.fired_dynamic: dict[int, int] = {}
        self.transitions = 0
        self.violations = 0
        if hash(kernel.initial) % self.shards == self.shard:
            self._add(kernel.initial, -1, 0, 0)

    def handle(self, command: str, payload: Any) -> Any:
        if command == "insert":
            level, start = payload["level"], payload["start"]
            indices = [self._insert(batch, level) for batch in payload["batches"]]
            return {
                "indices": indices,
                "discovered": list(
                    zip(self.parent[start:].tolist(), self.via[start:].tolist(), strict=True)
                ),
                "states": len(self.states),
                "violations": self.violations,
            }
        if command == "expand":
            self._patch(payload["replies"])
            self.ranks.extend(payload["ranks"])
            start, end = payload["start"], len(self.states)
            self._expand(sorted(range(start, end), key=self.ranks.__getitem__), payload["level"])
            outgoing, self.outgoing = self.outgoing, [[] for _ in range(self.shards)]
            return {"outgoing": outgoing, "next": end}
        if command == "ranks":  # the search is over: the last replies and numbers
            self._patch(payload["replies"])
            self.ranks.extend(payload["ranks"])
            return self.ranks
        if command == "finish":
            return self._dump(payload)
        raise ValueError(f"unknown round {command!r}")

    def _add(self, state: State, parent: int, via: int, level: int) -> int:
        """A new state of this shard; its global id."""
        local = len(self.states)
        self.ids[state] = found = local * self.shards + self.shard
        self.states.append(state)
        self.parent.append(parent)
        self.via.append(via)
        self.levels.append(level)
        # the initial state's invariants are the kernel's ``initial_failures``, as in
        # the serial search
        if parent >= 0 and self.kernel.invariants(state) is not None:
            self.violations += 1
        return found

    def _insert(self, batch: list[tuple[State, int, int]], level: int) -> list[int]:
        """Add the successors another shard sent; their global ids. A state of this
        level keeps its least first discoverer, as a serial search keeps the first."""
        indices: list[int] = []
        ids, parent, via, levels_ = self.ids, self.parent, self.via, self.levels
        for state, source, position in batch:
            found = ids.get(state)
            if found is None:
                found = self._add(state, source, position, level)
            else:
                local = found // self.shards
                if levels_[local] == level and (source, position) < (parent[local], via[local]):
                    parent[local], via[local] = source, position
            indices.append(found)
        return indices

    def _expand(self, order: list[int], level: int) -> None:
        """Expand the states of one level (by local index, in serial order), as
        ``search.py`` does: their successors stored here or sent to their owners,
        their counts kept."""
        kernel, states, ranks = self.kernel, self.states, self.ranks
        position_of_mode, expand = kernel.mode_position, kernel.expand
        offered_static, offered, fired, fired_static = (
            kernel.offered_static,
            kernel.offered,
            kernel.fired,
            kernel.fired_static,
        )
        canonical, expanded, fired_dynamic = kernel.canonical, self.expanded, self.fired_dynamic
        ids, add, targets, ends = self.ids, self._add, self.targets, self.ends
        unpatched, refs, sent, outgoing = self.unpatched, self.refs, self.sent, self.outgoing
        shards, shard, following = self.shards, self.shard, level + 1
        for local in order:
            state = states[local]
            mode = state[position_of_mode]
            expanded[mode] += 1
            self.transitions += offered_static[mode]
            if offered[mode] is not None:
                self.transitions += offered[mode](state)  # type: ignore[misc]
            outcome = expand[mode](state)
            self.expanded_order.append(local)
            if isinstance(outcome, str):  # a call breaks a property
                self.violations += 1
                ends.append(len(targets))
                continue
            if fired[mode] is not None:
                for number in fired[mode](state) - fired_static[mode]:  # type: ignore[misc]
                    fired_dynamic[number] = fired_dynamic.get(number, 0) + 1
            successors = outcome if canonical is None else [canonical(s) for s in outcome]
            rank = ranks[local]
            for position, successor in enumerate(successors):
                target = ids.get(successor)
                if target is None:
                    owner = hash(successor) % shards
                    if owner == shard:
                        target = add(successor, rank, position, following)
                    else:
                        target = ids[successor] = -1 - len(refs)
                        sent.append(successor)
                        refs.append((owner, len(outgoing[owner])))
                        outgoing[owner].append((successor, rank, position))
                if target < 0:
                    unpatched.append(len(targets))
                targets.append(target)
            ends.append(len(targets))

    def _patch(self, replies: dict[int, list[int]]) -> None:
        """The placeholders of the last level's successors sent away, replaced by the
        owners' global ids (kept for those states too)."""
        if not self.refs:
            return
        resolved = [replies[owner][position] for owner, position in self.refs]
        ids = self.ids
        for state, found in zip(self.sent, resolved, strict=True):
            ids[state] = found
        targets = self.targets
        for at in self.unpatched:
            targets[at] = resolved[-1 - targets[at]]
        self.unpatched = array("q")
        self.sent.clear()
        self.refs.clear()

    def _dump(self, ranks: list[array[int]]) -> dict[str, Any]:
        """This shard's states, and its expanded states' successors by serial number
        (``ranks``: every shard's serial numbers, by local index): the parent only
        lays them out."""
        shards = self.shards
        targets = array("q", [ranks[target % shards][target // shards] for target in self.targets])
        return {
            "states": self.states,
            "ranks": self.ranks,
            "parent": self.parent,
            "expanded_order": self.expanded_order,
            "targets": targets,
            "ends": self.ends,
            "expanded": self.expanded,
            "fired_dynamic": self.fired_dynamic,
            "transitions": self.transitions,
        }


class RayKernelShard(KernelShard):
    """A shard on a Ray node: the kernel compiled there from its generated text (a
    compiled kernel holds functions, which do not travel)."""

    def __init__(self, setup: KernelSetup, shard: tuple[int, int]) -> None:
        kernel = compiled(setup.generated, setup.policy, setup.domains, setup.model, setup.symmetry)
        super().__init__(kernel, shard)


@dataclass(frozen=True)
class KernelSetup:
    """What a Ray shard compiles its kernel from."""

    generated: GeneratedKernel
    policy: Policy
    domains: Domains
    model: MachineModel
    symmetry: bool | None = None


def search_sharded(
    kernel: Kernel,
    shards: int,
    max_states: int | None,
    max_depth: int | None,
    say: Callable[[str], None],
    ray: KernelSetup | None = None,
    progress_every: float = 30.0,
) -> Search | None:
    """The breadth-first search of ``kernel`` over ``shards`` forked workers (Ray
    actors when ``ray`` gives what they compile the kernel from): the serial
    search's ``Search``, or None when it met a violation or ``max_states`` (the
    serial search then stops where it does)."""
    workers: levels.Workers = (
        levels.RayWorkers(RayKernelShard, ray, shards)
        if ray is not None
        else levels.ForkedWorkers(partial(KernelShard, kernel), shards)
    )
    try:
        depth, stopped_by, last = levels.run_levels(
            workers, max_states, max_depth, True, say, progress_every, "kernel"
        )
        ranks = workers.ask([("ranks", last[shard]) for shard in range(shards)])
        dumps = workers.ask([("finish", ranks)] * shards)
    finally:
        workers.close()
    if stopped_by in ("violation", "max_states"):
        return None
    return _merged(kernel, dumps, depth, stopped_by)


def _merged(kernel: Kernel, dumps: list[dict[str, Any]], depth: int, capped: str | None) -> Search:
    """The shards' states, parents and successors under the serial search's numbers."""
    count = sum(len(dump["states"]) for dump in dumps)
    states: list[State] = [()] * count
    parent = array("q", bytes(8 * count))
    for dump in dumps:
        for local, rank in enumerate(dump["ranks"]):
            states[rank] = dump["states"][local]
            parent[rank] = dump["parent"][local]
    # the states each shard expanded, merged by serial number (each shard's already in
    # that order), and their successors laid out in it
    order = sorted(
        (dump["ranks"][local], shard, position)
        for shard, dump in enumerate(dumps)
        for position, local in enumerate(dump["expanded_order"])
    )
    targets, ends = array("q"), array("q")
    for _, shard, position in order:
        dump = dumps[shard]
        start = dump["ends"][position - 1] if position else 0
        targets.extend(dump["targets"][start : dump["ends"][position]])
        ends.append(len(targets))
    expanded = [sum(counts) for counts in zip(*(d["expanded"] for d in dumps), strict=True)]
    fired_dynamic: dict[int, int] = {}
    for dump in dumps:
        for number, times in dump["fired_dynamic"].items():
            fired_dynamic[number] = fired_dynamic.get(number, 0) + times
    seen = Seen(states, parent, expanded, fired_dynamic, targets, ends)
    evaluated = sum(n * classes for n, classes in zip(expanded, kernel.classes, strict=True))
    transitions = sum(dump["transitions"] for dump in dumps)
    return Search(count, transitions, evaluated, depth, [], {}, False, seen, capped)
