"""The model and the real boundary side by side, one operation at a time.

Owns ``Lockstep``: it applies each operation to the model (``verification.boundary.
model``) and to the real components (``verification.boundary.real``), and compares
everything the rules speak of: where the work crashed, each call's answer, the
effects that ran and what they ran with, the owner's and the approval's verdicts,
the journal's records, the controller's state (after a restore: exactly, or the
restore broke its rule), and, across the run, how often each effect ran. A
difference is reported under the rule that governs the model's answer
(``properties.owner``), in one line.

Leaves choosing the operations to the campaign and the explorer.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from replan.controller import Controller
from replan.verification.boundary.domains import (
    Approve,
    ApprovePlan,
    Domains,
    Op,
    Request,
    Restart,
    Settle,
    describe,
)
from replan.verification.boundary.model import Expected, Model, World
from replan.verification.boundary.properties import (
    POINT_OWNERS,
    RECORD_OWNERS,
    Violation,
    check_effects,
    check_step,
    owner,
)
from replan.verification.boundary.real import Done, RealBoundary
from replan.verification.boundary.subjects import BoundarySubject


class Lockstep:
    """One run of the model and of the subject's real boundary (in ``directory``)."""

    def __init__(self, subject: BoundarySubject, domains: Domains, directory: Path) -> None:
        self.domains = domains
        self.model = Model(domains)
        self.world = self.model.initial()
        self.real = RealBoundary(subject, domains, directory)
        self.ran: Counter[str] = Counter()

    def close(self) -> None:
        self.real.close()

    def step(self, op: Op) -> list[Violation]:
        """Apply ``op`` to both; every rule it breaks (empty: all hold)."""
        if self.world.crashed and not isinstance(op, Restart):
            raise ValueError(f"{describe(op)}: after a crash the next operation is a restart")
        before = self.world
        expected = self.model.apply(before, op)
        self.world = expected.world
        found = check_step(self.domains, before, op, expected)
        try:
            done = self.real.apply(op)
        except Exception as error:  # the real boundary raised: the op's rule is broken
            rule = _op_owner(op, expected)
            return [
                *found,
                Violation(rule, f"{describe(op)} raised {type(error).__name__}: {error}"),
            ]
        found += done.violations
        try:
            found += self._compare(op, expected, done)
        except Exception as error:  # reading the real state raised: it is broken
            rule = _op_owner(op, expected)
            found.append(
                Violation(rule, f"{describe(op)}: reading its state raised {type(error).__name__}")
            )
        return found

    # ---- the comparisons -----------------------------------------------------------

    def _compare(self, op: Op, expected: Expected, done: Done) -> list[Violation]:
        found: list[Violation] = []
        if expected.crashed_at != done.crashed_at:
            point, call = expected.crashed_at or done.crashed_at or ("?", "?")
            found.append(
                Violation(
                    POINT_OWNERS.get(point, "effect-only-after-executed"),
                    f"{describe(op)}: the model stops after {_at(expected.crashed_at)}, the "
                    f"real boundary after {_at(done.crashed_at)}",
                )
            )
        found += self._answers(expected, done)
        found += check_effects(self.domains, expected, done.effects)
        for effect in done.effects:
            self.ran[effect.call] += 1
        for index, call in enumerate(self.domains.calls):
            allowed = 1 + self.world.calls[index].abandons
            if self.ran[call.id] > allowed:
                found.append(
                    Violation(
                        "effect-at-most-once",
                        f"{call.id}'s effect ran {self.ran[call.id]} times (at most {allowed})",
                    )
                )
        if isinstance(op, Approve) and expected.awaiting != done.awaiting:
            found.append(
                Violation(
                    "approval-binds-the-call",
                    f"{describe(op)}: the host reads {done.awaiting} as awaiting approval, "
                    f"the model {expected.awaiting}",
                )
            )
        if isinstance(op, Approve | ApprovePlan) and expected.approved != done.approved:
            found.append(
                Violation(
                    "approval-binds-the-call",
                    f"{describe(op)}: the model {'accepts' if expected.approved else 'refuses'} it",
                )
            )
        if isinstance(op, Settle) and expected.settled != done.settled:
            found.append(
                Violation(
                    "in-doubt-needs-the-owner",
                    f"{describe(op)}: the model's owner decides {expected.settled}, "
                    f"the real one {done.settled} ({done.refusal or 'no refusal'})",
                )
            )
        if isinstance(op, Settle) and done.refusal is not None and "\n" in done.refusal:
            found.append(Violation("in-doubt-needs-the-owner", "the refusal is not one line"))
        if done.crashed_at is None and not self.world.crashed:
            found += self._state(op, expected)
        return found

    def _answers(self, expected: Expected, done: Done) -> list[Violation]:
        wanted = [(a.call, a.kind, a.tag) for a in expected.answers]
        for position, (call, kind, tag) in enumerate(wanted):
            got = done.answers[position] if position < len(done.answers) else (call, "no answer")
            if got != (call, kind):
                return [
                    Violation(
                        owner(kind, tag),
                        f"{call}: the model answers {kind}{f' ({tag})' if tag else ''}, "
                        f"the real boundary {got[1]}",
                    )
                ]
        if len(done.answers) > len(wanted):
            call, kind = done.answers[len(wanted)]
            return [Violation("effect-only-after-executed", f"{call}: answered {kind} unasked")]
        return []

    def _state(self, op: Op, expected: Expected) -> list[Violation]:
        """The journal's records and the controller's state, against the model's."""
        rule = _op_owner(op, expected)
        records = self.real.records()
        for index, call in enumerate(self.domains.calls):
            model = self.world.calls[index].records
            real = records.get(call.id, ())
            if model != real:
                first = next(
                    (a for a, b in zip(model, real, strict=False) if a != b),
                    (model[len(real)] if len(model) > len(real) else real[len(model)]),
                )
                which = "restore-is-exact-or-refuses" if isinstance(op, Restart) else None
                return [
                    Violation(
                        which or RECORD_OWNERS.get(first, rule),
                        f"{describe(op)}: {call.id}'s journal holds {list(real)}, the model "
                        f"{list(model)}",
                    )
                ]
        wanted = model_snapshot(self.domains, self.world)
        real = self.real.snapshot()
        if real != wanted:
            changed = sorted(k for k in wanted if wanted.get(k) != real.get(k))
            shown = ", ".join(
                f"{k} {real.get(k)!r:.40} (model {wanted.get(k)!r:.40})" for k in changed[:3]
            )
            return [Violation(rule, f"{describe(op)}: the controller differs: {shown}")]
        return []


def model_snapshot(domains: Domains, world: World) -> dict[str, Any]:
    """The controller's snapshot in ``world``."""
    controller = Controller(domains.policy)
    controller._import_state(world.controller)
    return dict(controller.snapshot())


def _op_owner(op: Op, expected: Expected) -> str:
    """The rule an operation's outcome belongs to, when nothing more precise does."""
    if isinstance(op, Restart):
        return "restore-is-exact-or-refuses"
    if isinstance(op, Approve | ApprovePlan):
        return "approval-binds-the-call"
    if isinstance(op, Settle):
        return "in-doubt-needs-the-owner"
    if isinstance(op, Request) and expected.answers:
        last = expected.answers[-1]
        return owner(last.kind, last.tag)
    if isinstance(op, Request) and expected.crashed_at is not None:
        return POINT_OWNERS[expected.crashed_at[0]]
    return "restore-is-exact-or-refuses"


def _at(crashed: tuple[str, str] | None) -> str:
    return "nothing (no crash)" if crashed is None else f"{crashed[0]} of {crashed[1]}"


__all__ = ["Lockstep", "model_snapshot"]
