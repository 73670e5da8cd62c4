"""The boundary campaign: the real components in lockstep with the model, with crashes.

Owns the sequences of operations the real boundary is driven through, each in a fresh
run on disk (``Lockstep``), every rule checked after every operation:

- **every tampering in turn**, from the files of the longest situation stopped at
  each of a few crash points (a call in doubt, an approval alone, a charged call);
- **the situations** the explorer found (``verification.boundary.explore``): each
  one's shortest path, stopped at its crash point, then a restore (every fourth one
  first from tampered files: a log rolled back, its witness dropped, a journal record
  edited, a log of another declaration), the same request again, the owner's decision
  on each of its calls, and the request once more;
- **random walks**, seeded: any operation of the domains, a crash at any point it
  passes (three times in ten), a restore after each crash.

The first violation stops the campaign; its sequence is shrunk (operations dropped
while the same rule still breaks) and is the counterexample, replayable with
``replay``.
"""

from __future__ import annotations

import dataclasses
import random
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from replan.verification.boundary.domains import (
    TAMPERING,
    Approve,
    Cancel,
    Domains,
    Observe,
    Op,
    Request,
    Restart,
    Settle,
)
from replan.verification.boundary.explore import Exploration, alphabet, crashed, retry
from replan.verification.boundary.lockstep import Lockstep
from replan.verification.boundary.model import Model
from replan.verification.boundary.properties import Violation
from replan.verification.boundary.subjects import BoundarySubject

#: How many shrinking attempts a counterexample gets (each replays a sequence).
SHRINK_ATTEMPTS = 60


@dataclass
class Finding:
    """A rule the real boundary broke, and the operations that show it."""

    violation: Violation
    steps: list[Op]


@dataclass
class CampaignResult:
    sequences: int = 0
    operations: int = 0
    crashes: int = 0
    restores: int = 0
    tampered: int = 0
    finding: Finding | None = None
    points: dict[str, int] = field(default_factory=dict)


def scratch_root() -> str | None:
    """Where runs keep their files: memory-backed when the machine has it (the
    crashes are raised faults, so fsync speed proves nothing here)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None


def run_sequence(
    subject: BoundarySubject,
    domains: Domains,
    steps: Sequence[Op],
    result: CampaignResult | None = None,
) -> Finding | None:
    """Drive ``steps`` through a fresh run of ``subject`` beside the model: the first
    violation, with the steps up to it, or None."""
    with tempfile.TemporaryDirectory(prefix="replan-boundary-", dir=scratch_root()) as scratch:
        try:
            lockstep = Lockstep(subject, domains, Path(scratch))
        except Exception as error:  # the real boundary cannot even start a run
            message = f"a fresh run cannot start: {type(error).__name__}: {error}"
            return Finding(Violation("restore-is-exact-or-refuses", message), [])
        try:
            for position, op in enumerate(steps):
                found = lockstep.step(op)
                if result is not None:
                    _count(result, op, lockstep)
                if found:
                    return Finding(found[0], list(steps[: position + 1]))
        finally:
            lockstep.close()
    return None


def _count(result: CampaignResult, op: Op, lockstep: Lockstep) -> None:
    result.operations += 1
    if isinstance(op, Restart):
        result.restores += 1
        result.tampered += op.tamper is not None
    crash = op.crash if isinstance(op, Request | Approve) else None
    if crash is not None and lockstep.world.crashed:
        point = crash[0] if isinstance(crash, tuple) else crash
        result.crashes += 1
        result.points[point] = result.points.get(point, 0) + 1


def situation_sequences(domains: Domains, exploration: Exploration) -> Iterator[list[Op]]:
    """Each situation's path, its restore, the retry, and where the retry leaves a call
    in doubt the owner's decision and the retry once more."""
    model = Model(domains)
    paths = sorted(exploration.situations.values(), key=len)
    for number, path in enumerate(paths):
        stopped = path[-1]
        tamper = TAMPERING[(number // 4) % len(TAMPERING)] if number % 4 == 3 else None
        steps = [*path, Restart(tamper), *_retries(domains, stopped)]
        if isinstance(stopped, Request) and _leaves_doubt(model, steps, stopped):
            steps += [*(Settle(call) for call, _, _ in stopped.calls), retry(stopped)]
        yield steps


def _leaves_doubt(model: Model, steps: list[Op], stopped: Request) -> bool:
    world = model.initial()
    for op in steps:
        world = model.apply(world, op).world
    calls = [model.domains.index(call) for call, _, _ in stopped.calls]
    return any(world.calls[i].phase in ("in_doubt", "abandoned") for i in calls)


def approval_sequences(domains: Domains) -> Iterator[list[Op]]:
    """An approval void before it is given: the call awaits approval, then its plan is
    superseded (another call's proposal), its evidence changes, or the run stops, and
    the owner approves it anyway (refused), and the call is asked again."""
    approving = [c for c in domains.calls if c.step in domains.policy.approval_steps]
    others = [c for c in domains.calls if not domains.direct(c)]
    for call in approving:
        ask = Request("model", ((call.id, "A", domains.resource),))
        other = next(c for c in others if c.id != call.id)
        voiding: list[Op] = [
            Request("model", ((other.id, "A", domains.resource),)),
            *(Observe(key, "Failed") for key in domains.policy.keys[:1]),
            Cancel(),
        ]
        for void in voiding:
            yield [ask, void, Approve(call.id, "A"), ask, Restart(), ask]


def edge_sequences(domains: Domains) -> Iterator[list[Op]]:
    """The runs at the edges the situations do not start from: a restore before any
    call was logged, and two calls of one step and content on the host's executor and
    through ``perform`` (each must get an idempotency key of its own)."""
    first = next(c for c in domains.calls if not domains.direct(c))
    ask = Request("host", ((first.id, "A", domains.resource),))
    yield [Restart(), Restart("rollback-log"), ask, Restart(), Cancel(), Restart(), ask]
    alone = next((c for c in domains.calls if domains.direct(c) and c.step == first.step), None)
    if alone is not None:
        yield [
            Request("executor", ((alone.id, "A", domains.resource),)),
            ask,
            Approve(first.id, "A"),
            ask,
        ]


#: Where every tampering is tried in turn: a lone intent, a lone approval, the most
#: written (the records only the chain can vouch for, and the longest log).
_SWEPT_POINTS = ("intended", "approval_recorded", "charged")


def tampering_sweeps(exploration: Exploration) -> Iterator[list[Op]]:
    """The longest situation stopped at each of ``_SWEPT_POINTS``, then a restore
    after each tampering in turn (each from the same files: a refused restore leaves
    them as they were)."""
    for point in _SWEPT_POINTS:
        paths = [path for key, path in exploration.situations.items() if key[3] == point]
        if paths:
            yield [*max(paths, key=len), *(Restart(kind) for kind in TAMPERING)]


def answer_sequences(exploration: Exploration) -> Iterator[list[Op]]:
    """Each answer situation's path (the answer last), and the same request again."""
    for path in sorted(exploration.answered.values(), key=len):
        yield [*path, retry(path[-1])]


def _retries(domains: Domains, stopped: Op) -> list[Op]:
    again = retry(stopped)
    if isinstance(stopped, Approve):
        ask = Request("model", ((stopped.call, stopped.content, domains.resource),))
        return [ask, again, ask]
    return [again]


def random_walks(domains: Domains, seed: int, walks: int, length: int) -> Iterator[list[Op]]:
    """Seeded walks over the domains (see the module docstring)."""
    rng = random.Random(seed)
    model = Model(domains)
    ops = alphabet(domains)
    for _ in range(walks):
        world, steps = model.initial(), []
        while len(steps) < length:
            if world.crashed:
                tamper = rng.choice(TAMPERING) if rng.random() < 0.25 else None
                op: Op = Restart(tamper)
            else:
                op = rng.choice(ops)
                passed = model.apply(world, op).passed
                if passed and rng.random() < 0.3:
                    op = crashed(op, rng.choice(passed))
            steps.append(op)
            world = model.apply(world, op).world
        yield steps


#: A sequence to run, and the domains it runs under.
Planned = tuple[Domains, list[Op]]


def planned(
    domains: Domains, exploration: Exploration, seed: int, walks: int, length: int
) -> list[Planned]:
    """Every sequence of a campaign, in order: the crash situations, the answer
    situations, the voided approvals, then the seeded walks (every other one with a
    host that gives the guard no ``tool_usage``)."""
    fixed = [
        *situation_sequences(domains, exploration),
        *tampering_sweeps(exploration),
        *answer_sequences(exploration),
        *approval_sequences(domains),
        *edge_sequences(domains),
    ]
    bare = dataclasses.replace(domains, host_usage=False)
    return [
        *((domains, steps) for steps in fixed),
        *(
            (bare if number % 2 else domains, steps)
            for number, steps in enumerate(random_walks(domains, seed, walks, length))
        ),
    ]


def run_campaign(
    subject: BoundarySubject,
    sequences: Iterable[Planned],
    progress: Callable[[str], None] | None = None,
    *,
    shrink_finding: bool = True,
) -> CampaignResult:
    """Every sequence in turn until one breaks a rule (then shrunk, unless
    ``shrink_finding`` is false)."""
    result = CampaignResult()
    for domains, steps in sequences:
        result.sequences += 1
        finding = run_sequence(subject, domains, steps, result)
        if finding is not None:
            result.finding = shrink(subject, domains, finding) if shrink_finding else finding
            return result
        if progress is not None and result.sequences % 25 == 0:
            progress(f"{result.sequences} sequences, {result.operations} operations")
    return result


def shrink(subject: BoundarySubject, domains: Domains, finding: Finding) -> Finding:
    """Drop operations, one at a time from the first, in passes, while the same rule
    still breaks (a sequence that puts anything but a restore after a crash is not
    tried); at most ``SHRINK_ATTEMPTS`` replays."""
    best = finding
    attempts = 0
    shrunk = True
    while shrunk and attempts < SHRINK_ATTEMPTS:
        shrunk = False
        index = 0
        while index < len(best.steps) - 1 and attempts < SHRINK_ATTEMPTS:
            candidate = best.steps[:index] + best.steps[index + 1 :]
            attempts += 1
            try:
                found = run_sequence(subject, domains, candidate)
            except ValueError:  # an operation after a crash that is not a restore
                found = None
            if found is not None and found.violation.property == best.violation.property:
                best, shrunk = found, True
            else:
                index += 1
    return best


__all__ = [
    "CampaignResult",
    "Finding",
    "Planned",
    "answer_sequences",
    "approval_sequences",
    "edge_sequences",
    "planned",
    "random_walks",
    "run_campaign",
    "run_sequence",
    "scratch_root",
    "shrink",
    "situation_sequences",
    "tampering_sweeps",
]
