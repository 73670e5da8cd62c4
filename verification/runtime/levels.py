"""A breadth-first search over shards, level by level: the driver both engines' sharded
searches share (the Python explorer's ``engines/explore/sharded.py``, the kernel's
``engines/kernel/sharded.py``), shared-nothing, as distributed TLC splits its
fingerprint set.

Owns: the workers (forked processes on this machine, or Ray actors on a cluster), the
rounds the driver asks of them, the routing of the successors each shard found to
the shards that own them, and the serial numbers of each level's states. Leaves to
a shard (``Shard``) how it stores, expands and inserts its states.

One level is two rounds:

1. **insert**: every shard adds the successors the others sent it (the least first
   discoverer kept, as a serial search keeps the first) and answers with their
   local indices and the first discoverer of each state of the level;
2. **expand**: every shard replaces its placeholders for the successors it sent with
   the owners' ids, takes the serial numbers the driver gave the level's states, then
   expands them in that order, queueing the successors other shards own.

Between the rounds the driver numbers the level's states as a serial search would
(by their first discoverer: the parent's serial number, then the successor's
position), so parents, state numbers and counterexamples are the serial search's,
whatever shard a state's hash gave it. A violation, a ``max_depth`` or a
``max_states`` ends the search at the end of a level; the caller then collects each
shard's states, its last round being ``finish`` (a forked worker ends after it).
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Protocol

from replan.verification.runtime import interrupt


class Shard(Protocol):
    """One shard of a sharded search: answers ``insert``, ``expand`` and ``finish``."""

    def handle(self, command: str, payload: Any) -> Any: ...


#: How a forked worker makes its shard: from (its number, how many there are).
MakeShard = Callable[[tuple[int, int]], Shard]


def _serve(connection: Connection, make: MakeShard, shard: tuple[int, int]) -> None:
    """A forked worker: one shard, answering the driver's rounds until "finish"."""
    interrupt.ignore_in_worker()  # Ctrl-C is the parent's: it terminates the workers
    worker = make(shard)
    while True:
        command, payload = connection.recv()
        connection.send(worker.handle(command, payload))
        if command == "finish":
            return


class ForkedWorkers:
    """The shards in forked processes and their pipes. ``make`` runs in the child,
    after the fork, so what it closes over (a compiled kernel, an engine's settings)
    is inherited, never pickled."""

    def __init__(self, make: MakeShard, shards: int) -> None:
        context = multiprocessing.get_context("fork")
        self.pipes: list[Connection] = []
        self.processes: list[Any] = []
        for shard in range(shards):
            mine, theirs = context.Pipe()
            process = context.Process(
                target=_serve, args=(theirs, make, (shard, shards)), daemon=True
            )
            process.start()
            theirs.close()
            self.pipes.append(mine)
            self.processes.append(process)

    @property
    def shards(self) -> int:
        return len(self.pipes)

    def ask(self, messages: list[tuple[str, Any]]) -> list[Any]:
        """Send each worker its message, then collect every answer (they work at once)."""
        for pipe, message in zip(self.pipes, messages, strict=True):
            pipe.send(message)
        answers = []
        for pipe, process in zip(self.pipes, self.processes, strict=True):
            try:
                while not pipe.poll(0.2):
                    interrupt.check()
                answers.append(pipe.recv())
            except EOFError:
                process.join(1.0)
                raise RuntimeError(
                    f"a shard's worker process ended in the middle of the search "
                    f"(exit code {process.exitcode})"
                ) from None
        return answers

    def close(self) -> None:
        for process in self.processes:
            if process.is_alive():
                process.terminate()
            process.join()


class RayWorkers:
    """The shards as Ray actors (``runtime/ray_cluster.py``): the same rounds, each a
    method call, on whatever nodes the cluster places them. ``shard_class`` is built
    on its node from ``setup`` (pickled: plain data, or classes by name) and the
    shard's (number, count)."""

    def __init__(self, shard_class: type, setup: Any, shards: int) -> None:
        from replan.verification.runtime import ray_cluster

        self._ray = ray_cluster
        actor = ray_cluster.remote_class(shard_class)
        self.actors = [actor.remote(setup, (shard, shards)) for shard in range(shards)]

    @property
    def shards(self) -> int:
        return len(self.actors)

    def ask(self, messages: list[tuple[str, Any]]) -> list[Any]:
        pending = [
            actor.handle.remote(command, payload)
            for actor, (command, payload) in zip(self.actors, messages, strict=True)
        ]
        remaining = list(pending)
        while remaining:  # every shard works at once; Ctrl-C is checked meanwhile
            interrupt.check()
            _, remaining = self._ray.wait_one(remaining, timeout=0.2)
        return self._ray.get(pending)

    def close(self) -> None:
        self._ray.kill(self.actors)


Workers = ForkedWorkers | RayWorkers


def serial_numbers(answers: list[dict[str, Any]], numbered: int) -> list[list[int]]:
    """Per shard, the serial numbers of its states of the level just completed: a
    serial search numbers a level's states in the order of their first discoverers
    (parent's serial number, then the successor's position), after the ``numbered``
    states of the levels before."""
    order = sorted(
        (discoverer, shard, position)
        for shard, answer in enumerate(answers)
        for position, discoverer in enumerate(answer["discovered"])
    )
    ranks = [[0] * len(answer["discovered"]) for answer in answers]
    for number, (_, shard, position) in enumerate(order, start=numbered):
        ranks[shard][position] = number
    return ranks


def run_levels(
    workers: Workers,
    max_states: int | None,
    max_depth: int | None,
    stop_at_first: bool,
    progress: Callable[[str], None] | None,
    progress_every: float,
    label: str,
) -> tuple[int, str | None, list[dict[str, Any]]]:
    """The rounds, level by level: (depth, why it stopped early, per shard the
    replies it still has to patch in and the serial numbers of its last level: what
    the caller sends each shard as the search ends)."""
    shards = workers.shards
    started = last_report = time.perf_counter()
    starts = [0] * shards
    incoming: list[list[list[Any]]] = [[] for _ in range(shards)]  # per owner, per sender
    senders: list[list[int]] = [[] for _ in range(shards)]
    numbered = 0  # the states of the completed levels
    level = 0
    while True:
        answers = workers.ask(
            [
                ("insert", {"level": level, "batches": incoming[s], "start": starts[s]})
                for s in range(shards)
            ]
        )
        replies = _replies(answers, senders, shards)
        ranks = serial_numbers(answers, numbered)
        last = [{"replies": replies[s], "ranks": ranks[s]} for s in range(shards)]
        frontier = sum(len(a["discovered"]) for a in answers)
        numbered += frontier
        states = sum(a["states"] for a in answers)
        if stop_at_first and any(a["violations"] for a in answers):
            return max(level - 1, 0), "violation", last
        if frontier == 0:
            return max(level - 1, 0), None, last
        if max_depth is not None and level >= max_depth:
            return level, "max_depth", last
        if max_states is not None and states >= max_states:
            return level, "max_states", last
        answers = workers.ask(
            [("expand", {**last[s], "start": starts[s], "level": level}) for s in range(shards)]
        )
        incoming, senders = _route(answers, starts, shards)
        level += 1
        now = time.perf_counter()
        if progress is not None and now - last_report >= progress_every:
            last_report = now
            progress(
                f"explore ({label}): depth {level}, {states:,} states, frontier "
                f"{frontier:,}, {shards} shards, {states / max(now - started, 1e-9):,.0f} "
                f"states/s, {now - started:.0f} s"
            )


def _replies(
    answers: list[dict[str, Any]], senders: list[list[int]], shards: int
) -> list[dict[int, list[int]]]:
    """Per sender, per owner: the ids the owner gave the successors the sender sent
    it (the owners answer in the order the batches came)."""
    replies: list[dict[int, list[int]]] = [{} for _ in range(shards)]
    for owner, answer in enumerate(answers):
        for sender, indices in zip(senders[owner], answer["indices"], strict=True):
            replies[sender][owner] = indices
    return replies


def _route(
    answers: list[dict[str, Any]], starts: list[int], shards: int
) -> tuple[list[list[list[Any]]], list[list[int]]]:
    """The successors each shard expanded, routed to the shards that own them: per
    owner, the batches and who sent each. Records where each sender's next level
    starts in ``starts``."""
    incoming: list[list[list[Any]]] = [[] for _ in range(shards)]
    senders: list[list[int]] = [[] for _ in range(shards)]
    for sender, answer in enumerate(answers):
        starts[sender] = answer["next"]
        for owner, batch in enumerate(answer["outgoing"]):
            if batch:
                incoming[owner].append(batch)
                senders[owner].append(sender)
    return incoming, senders
