"""The explorer's breadth-first search over forked worker processes, shared-nothing:
the state space is sharded by the hash of each state, as distributed TLC splits its
fingerprint set.

Owns: the shards (one ``Shard`` each, whose ``StateSearch`` owns the states
``StateSearch.owner`` maps to it: forked processes on this machine, or Ray actors on a
cluster, ``replan explore --ray``) and the merge of their states, edges and counts
into the parent's engine, so that the report, the graph, the traps and the shortest
counterexamples are computed from it exactly as after a serial search.
Leaves to ``verification/engines/explore/engine.py`` how one state is expanded and checked.

Why this shape: the earlier design kept the one index in the parent and had workers
expand chunks of each layer; every successor then went through the parent, which
re-keyed it serially, and two workers were slower than one. Here a worker keeps the
index of its own shard, so a successor crosses a process boundary only when another
shard owns it, once per level and sender.

The rounds (insert, then expand, per level) and the serial numbering between them
are ``verification/runtime/levels.py``'s, shared with the kernel's sharded search;
here, what one shard of the Python explorer does in each.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from functools import partial
from typing import Any

from replan.verification.runtime import levels

#: What a worker sends back at the end: everything the parent's engine needs.
Dump = dict[str, Any]


class Shard:
    """One shard's engine, answering the driver's rounds: in a forked process or as a
    Ray actor (``runtime/levels.py``), the same code either way."""

    def __init__(self, setup: dict[str, Any], shard: tuple[int, int]) -> None:
        from replan.verification.core.subject import resolve_implementation
        from replan.verification.engines.explore.search import StateSearch

        implementation = setup["implementation"]
        if isinstance(implementation, str):  # sent by name to another process
            setup = {**setup, "implementation": resolve_implementation(implementation)}
        self.engine = StateSearch(**setup, shard=shard)

    def handle(self, command: str, payload: Any) -> Any:
        engine = self.engine
        if command == "insert":
            engine.level = payload["level"]
            indices = [_insert(engine, batch) for batch in payload["batches"]]
            start = payload["start"]
            return {
                "indices": indices,
                # this level's states, each by its first discoverer: the driver
                # orders them all as a serial search numbers them
                "discovered": [
                    (engine.parent[local], engine.via[local])
                    for local in range(start, len(engine.keys))
                ],
                "states": len(engine.keys),
                "violations": len(engine.raw_violations) + len(engine.state_failures),
            }
        if command == "expand":
            _patch(engine, payload["replies"])
            engine.ranks.extend(payload["ranks"])
            start = payload["start"]
            engine.level = payload["level"] + 1
            end = len(engine.keys)
            ranks = engine.ranks
            for source in sorted(range(start, end), key=ranks.__getitem__):
                engine.expand(source)
            outgoing, engine.outgoing = engine.outgoing, [[] for _ in range(engine.shards)]
            return {"outgoing": outgoing, "next": end}
        if command == "finish":
            _patch(engine, payload["replies"])
            engine.ranks.extend(payload["ranks"])
            return _dump(engine)
        raise ValueError(f"unknown round {command!r}")


def _insert(engine: Any, batch: list[tuple[Any, int, int]]) -> list[int]:
    """Add the successors another shard sent (new ones checked against the state
    invariants, as a serial search checks a new state); their local indices. A state
    of this level keeps its first discoverer in serial order, the least (parent's
    serial number, operation index): the state's parent and the transition a serial
    search charges its invariants to."""
    indices: list[int] = []
    index = engine.index
    level = engine.level
    parents, vias, levels = engine.parent, engine.via, engine.levels
    scratch: Any = None
    for state, parent, via in batch:
        key = engine.key(state)
        found = index.get(key)
        if found is None:
            found = engine.add_state(key, parent, via)
            if engine.check_invariants:
                if scratch is None:
                    scratch = engine.implementation(engine.policy)
                scratch._import_state(engine.full(key))
                failures = engine.checker.state(scratch)
                if failures:
                    engine.state_failures[found] = failures
        elif levels[found] == level and (parent, via) < (parents[found], vias[found]):
            parents[found], vias[found] = parent, via
        indices.append(found)
    return indices


def _patch(engine: Any, replies: dict[int, list[int]]) -> None:
    """Replace the placeholders of the last exchange by the owners' global ids."""
    if not engine.foreign_refs:
        return
    shards = engine.shards
    resolved = [
        replies[owner][position] * shards + owner for owner, position in engine.foreign_refs
    ]

    def real(target: int) -> int:
        return resolved[-2 - target] if target < 0 else target

    for source in engine.unpatched_open:
        engine.open_states[source] = sorted(map(real, engine.open_states[source]))
    for source, number, target in engine.unpatched_edges:
        engine.edges.add((source, number, real(target)))
    engine.unpatched_open.clear()
    engine.unpatched_edges.clear()
    engine.foreign.clear()
    engine.foreign_refs.clear()


def _dump(engine: Any) -> Dump:
    """This shard's states (in local order, with their serial numbers, parents and
    levels), edges, counts and violations, with every id global."""
    shards, shard = engine.shards, engine.shard
    full = engine.full
    labels = engine.edge_labels
    violations = [
        (source, via, names, full(concrete))
        for source, via, names, concrete in engine.raw_violations
    ]
    violations += [
        (engine.parent[local], engine.via[local], names, full(engine.keys[local]))
        for local, names in engine.state_failures.items()
    ]
    # States as keys over this shard's interned parts, and edges as three arrays: the
    # parent maps part numbers instead of re-interning every state, and unpickles
    # numbers instead of a tuple per edge.
    edge_sources, edge_labels, edge_targets = array("l"), array("l"), array("l")
    for source, label, target in engine.edges:
        edge_sources.append(source * shards + shard)
        edge_labels.append(label)
        edge_targets.append(target)
    return {
        "keys": engine.keys,
        "parts": engine.parts,
        "ranks": engine.ranks,
        "parent": engine.parent,
        "via": engine.via,
        "levels": engine.levels,
        "edges": (edge_sources, edge_labels, edge_targets),
        "edge_labels": labels,
        "open": {s * shards + shard: targets for s, targets in engine.open_states.items()},
        "violations": violations,
        "transitions": engine.transitions,
        "distinct_edges": engine.distinct_edges,
        "evaluations": engine.evaluations,
        "fired": engine.fired,
        "absorbed": engine.absorbed,
    }


class NotImportable(ValueError):
    """An implementation no other process can import by name."""


def implementation_path(implementation: type, importable: str | None = None) -> str:
    """The ``module:Class`` another process resolves to this very class: ``importable``
    when the caller knows it (a subject's), else the class's own module's.
    ``NotImportable`` for a class no other process can import."""
    from replan.verification.core.subject import ImplementationError, resolve_implementation

    candidates = [f"{implementation.__module__}:{implementation.__qualname__}"]
    if importable is not None:
        candidates.insert(0, importable)
    for candidate in candidates:
        try:
            if resolve_implementation(candidate) is implementation:
                return candidate
        except ImplementationError:
            continue
    raise NotImportable(
        f"{implementation.__module__}.{implementation.__qualname__}: another process "
        "cannot import this implementation by name, so Ray workers cannot run it "
        "(give a module:Class, or a mutant of verification/subjects/mutants.py)"
    )


def _setup(engine: Any) -> dict[str, Any]:
    """What a shard's engine is built from (the parent engine's own settings)."""
    return dict(
        policy=engine.policy,
        space=engine.space,
        implementation=engine.implementation,
        contract=engine.contract,
        symmetry=engine.symmetry,
        check_invariants=engine.check_invariants,
        keep_graph=engine.keep_graph,
        stop_at_first=engine.stop_at_first,
    )


def _forked(engine: Any, shards: int) -> levels.ForkedWorkers:
    setup = _setup(engine)
    return levels.ForkedWorkers(partial(Shard, setup), shards)


def _ray_actors(engine: Any, shards: int) -> levels.RayWorkers:
    # by name: a class Ray would copy by value (a mutant built in this process) could
    # arrive as something else
    setup = {
        **_setup(engine),
        "implementation": implementation_path(engine.implementation, engine.importable),
    }
    return levels.RayWorkers(Shard, setup, shards)


def search_sharded(
    engine: Any,
    shards: int,
    max_states: int | None,
    max_depth: int | None,
    stop_at_first: bool,
    progress: Callable[[str], None] | None,
    progress_every: float,
    label: str,
    ray: bool = False,
) -> tuple[int, str | None]:
    """The breadth-first search of ``engine`` over ``shards`` forked workers (Ray
    actors with ``ray``, on the cluster this process joined); on return the engine
    holds the whole search's states, edges and counts. (depth, why it stopped early
    or None), as ``search_serial`` returns."""
    workers = _ray_actors(engine, shards) if ray else _forked(engine, shards)
    try:
        depth, stopped_by, last = levels.run_levels(
            workers, max_states, max_depth, stop_at_first, progress, progress_every, label
        )
        dumps = workers.ask([("finish", last[shard]) for shard in range(shards)])
    finally:
        workers.close()
    _adopt(engine, dumps, shards)
    return depth, stopped_by


def _adopt(engine: Any, dumps: list[Dump], shards: int) -> None:
    """Fill the parent's engine from the shards: every state under the number a
    serial search gives it, every id and count merged."""
    order = sorted(
        (rank, shard, local)
        for shard, dump in enumerate(dumps)
        for local, rank in enumerate(dump["ranks"])
    )
    number_of = {local * shards + shard: rank for rank, shard, local in order}
    engine.keys, engine.index = [], {}
    engine.parent, engine.via, engine.levels = array("l"), array("l"), array("l")
    engine.stop_seen = set()
    from replan.verification.core.abstraction import SCALARS as scalars

    part_numbers = [[engine.intern(part) for part in dump["parts"]] for dump in dumps]
    for _, shard, local in order:
        dump = dumps[shard]
        numbers = part_numbers[shard]
        key = dump["keys"][local]
        engine.level = dump["levels"][local]
        engine.add_state(
            (*key[:scalars], *(numbers[n] for n in key[scalars:])),
            dump["parent"][local],
            dump["via"][local],
        )
    engine.open_states = {}
    engine.edges = set()
    found = []
    for dump in dumps:
        for source, targets in dump["open"].items():
            engine.open_states[number_of[source]] = sorted(number_of[t] for t in targets)
        label_numbers = []
        for label in dump["edge_labels"]:
            number = engine.edge_label_index.get(label)
            if number is None:
                number = engine.edge_label_index[label] = len(engine.edge_labels)
                engine.edge_labels.append(label)
            label_numbers.append(number)
        add_edge = engine.edges.add
        for source, label_number, target in zip(*dump["edges"], strict=True):
            add_edge((number_of[source], label_numbers[label_number], number_of[target]))
        found.extend(dump["violations"])
        engine.transitions += dump["transitions"]
        engine.distinct_edges += dump["distinct_edges"]
        engine.evaluations += dump["evaluations"]
        for fired, count in dump["fired"].items():
            engine.fired[fired] = engine.fired.get(fired, 0) + count
        for shown, count in dump["absorbed"].items():
            engine.absorbed[shown] = engine.absorbed.get(shown, 0) + count
    # One transition's violations are one finding, as in a serial search: the shard
    # that expanded it reports the call properties and the shard that owns the new
    # state its invariants. Sources are serial numbers already.
    merged: dict[tuple[int, int], tuple[list[str], tuple[Any, ...]]] = {}
    for source, via, names, concrete in found:
        merged.setdefault((source, via), ([], concrete))[0].extend(names)
    for (source, via), (names, concrete) in sorted(merged.items()):
        engine._violation(names, source, via, engine.key(concrete))
