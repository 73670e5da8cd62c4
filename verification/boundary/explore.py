"""The boundary explorer: every world of the model within small bounds, every crash.

Owns the search over the model (``verification.boundary.model``), breadth first from
a fresh run, over the operations of the domains without a crash (each call on each
channel with each content and resource, the owner's approvals and decisions, the
host's evidence and cancel, a clean restart), up to ``depth`` operations or
``max_states`` worlds. Then, for each world and operation, every crash point that
operation passes is tried in turn: the operation stopped there, a restore, and the
same request again (a retry), each checked against the rules (``check_step``). So
every combination of calls x crash points x restores x retries the bounds reach is
searched. A crash is tried once per *situation* (the operation, the phases of its
calls before it, the point): the same situation in another world adds nothing the
rules look at.

Each situation found keeps its shortest path from a fresh run: the campaign replays
those on the real components (``Exploration.situations``).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from replan.controller.records import EvidenceState
from replan.verification.boundary.domains import (
    CONTENTS,
    EDGE,
    MISFIT,
    UNDIGESTIBLE,
    Approve,
    ApprovePlan,
    Cancel,
    Domains,
    Observe,
    Op,
    Request,
    Restart,
    Settle,
)
from replan.verification.boundary.model import Model, World
from replan.verification.boundary.properties import Violation, check_step


@dataclass
class Exploration:
    """What the explorer found."""

    states: int = 0
    transitions: int = 0
    depth: int = 0
    truncated: bool = False
    violations: list[tuple[Violation, list[Op]]] = field(default_factory=list)
    #: situation -> the operations from a fresh run that reach it (its crash last)
    situations: dict[tuple[object, ...], list[Op]] = field(default_factory=dict)
    #: each answer the model gives, by kind, rule and the phase of the call it answers
    #: -> the operations from a fresh run that give it (that operation last)
    answered: dict[tuple[object, ...], list[Op]] = field(default_factory=dict)
    crash_points: Counter[str] = field(default_factory=Counter)
    answers: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return not self.violations


def alphabet(domains: Domains) -> list[Op]:
    """The operations without a crash the explorer tries from every world."""
    ops: list[Op] = []
    for call in domains.calls:
        ops.extend(Settle(call.id, mode) for mode in ("honest", "resolve", "named"))
        if domains.direct(call):
            for content in CONTENTS:
                ops.append(Request("executor", ((call.id, content, domains.resource),)))
            ops.append(Request("executor", ((call.id, "A", domains.ungranted),)))
            continue
        for content in CONTENTS:
            ops.append(Request("model", ((call.id, content, domains.resource),)))
            ops.append(Request("host", ((call.id, content, domains.resource),)))
        ops.append(Request("host", ((call.id, "A", domains.other_resource),)))
        ops.append(Request("host", ((call.id, "A", domains.ungranted),)))
        ops.append(Request("model", ((call.id, UNDIGESTIBLE, domains.resource),)))
        ops.append(Request("model", ((call.id, MISFIT, domains.resource),)))
        ops.append(Request("host", ((call.id, "A", ""),)))  # no resource: refused
        ops.extend(Approve(call.id, content) for content in CONTENTS)
        ops.append(ApprovePlan(call.id))
    ops.append(Request("model", ((domains.stray.id, "A", domains.resource),)))
    ops.append(Request("model", ((domains.calls[1].id, EDGE, domains.resource),)))
    if len(domains.calls) > 2:
        first, second = domains.calls[1], domains.calls[2]
        pair = ((first.id, "A", domains.resource), (second.id, "A", domains.resource))
        ops.append(Request("model", pair))
    for key in domains.policy.keys:
        ops.extend(Observe(key, state) for state in (EvidenceState.PASSED, EvidenceState.FAILED))
    ops.extend([Cancel(), Restart()])
    return ops


def crashed(op: Op, point: tuple[str, str]) -> Op:
    """``op`` stopped at ``point`` (a crash point and the call it belongs to)."""
    if isinstance(op, Request):
        return op._replace(crash=point)
    assert isinstance(op, Approve)
    return op._replace(crash=point[0])


def retry(op: Op) -> Op:
    """The same operation asked again, without a crash."""
    if isinstance(op, Request | Approve):
        return op._replace(crash=None)
    return op


def _calls_of(op: Op) -> tuple[str, ...]:
    if isinstance(op, Request):
        return tuple(call for call, _, _ in op.calls)
    if isinstance(op, Approve | Settle):
        return (op.call,)
    return ()


def explore(
    domains: Domains, depth: int = 3, max_states: int = 600, model: Model | None = None
) -> Exploration:
    """Search ``model`` (the boundary model of ``domains`` when None; see the module
    docstring)."""
    model = Model(domains) if model is None else model
    result = Exploration()
    ops = alphabet(domains)
    start = model.initial()
    paths: dict[World, list[Op]] = {start: []}
    frontier: deque[World] = deque([start])
    while frontier:
        world = frontier.popleft()
        path = paths[world]
        result.depth = max(result.depth, len(path))
        for op in ops:
            expected = model.apply(world, op)
            result.transitions += 1
            _check(result, domains, world, op, expected, path)
            for answer in expected.answers:
                result.answers[answer.kind] += 1
                phase = (
                    "stray"
                    if answer.call == domains.stray.id
                    else world.calls[domains.index(answer.call)].phase
                )
                # the content matters where the call's binding does
                detail = _kinds(op) if answer.kind in _CONTENT_MATTERS else ()
                key = (answer.kind, answer.tag, phase, detail, getattr(op, "channel", ""))
                result.answered.setdefault(key, [*path, op])
            if isinstance(op, Approve | ApprovePlan | Settle):
                phase = world.calls[domains.index(op.call)].phase
                outcome = (expected.approved, expected.settled)
                key = (type(op).__name__, _kinds(op), getattr(op, "mode", ""), phase, outcome)
                result.answered.setdefault(key, [*path, op])
            _crashes(result, model, domains, world, op, expected.passed, path)
            after = expected.world
            if after in paths or len(path) + 1 > depth:
                continue
            if len(paths) >= max_states:
                result.truncated = True
                continue
            paths[after] = [*path, op]
            frontier.append(after)
    result.states = len(paths)
    return result


def _check(
    result: Exploration, domains: Domains, world: World, op: Op, expected: object, path: list[Op]
) -> None:
    from replan.verification.boundary.model import Expected

    assert isinstance(expected, Expected)
    for violation in check_step(domains, world, op, expected):
        result.violations.append((violation, [*path, op]))


def _crashes(
    result: Exploration,
    model: Model,
    domains: Domains,
    world: World,
    op: Op,
    passed: list[tuple[str, str]],
    path: list[Op],
) -> None:
    """Every crash point ``op`` passed, tried as a new situation: stopped there, a
    restore, the retry."""
    for point in passed:
        phases = tuple(world.calls[domains.index(call)].phase for call in _calls_of(op))
        situation = (type(op).__name__, getattr(op, "channel", ""), phases, point[0], _kinds(op))
        if situation in result.situations:
            continue
        stopped = crashed(op, point)
        steps = [stopped, Restart(), retry(op)]
        current = world
        for step in steps:
            expected = model.apply(current, step)
            result.transitions += 1
            _check(result, domains, current, step, expected, [*path, *steps])
            current = expected.world
        result.crash_points[point[0]] += 1
        result.situations[situation] = [*path, stopped]


#: The answers whose situation depends on the content asked (the binding decides them).
_CONTENT_MATTERS = frozenset({"Executed", "Replayed", "ContentMismatch", "InDoubt"})


def _kinds(op: Op) -> tuple[str, ...]:
    """What distinguishes a request besides its calls' phases: contents and resources."""
    if isinstance(op, Request):
        return tuple(f"{content}@{resource}" for _, content, resource in op.calls)
    if isinstance(op, Approve):
        return (op.content,)
    return ()


def situations_in_order(exploration: Exploration) -> Iterator[list[Op]]:
    """The situations' paths, shortest first (the campaign's order)."""
    yield from sorted(exploration.situations.values(), key=len)


__all__ = ["Exploration", "alphabet", "crashed", "explore", "retry", "situations_in_order"]
