"""The boundary's rules as named properties (CONTRACT.md, "The effect boundary").

Owns the seven names, each rule's one-line statement, which rule owns which answer
(``owner``: a divergence between the real boundary and the model is reported under
the rule that governs the answer the model gave), and the checks over one step of
the model (``check_step``), which the explorer runs on every transition and the
campaign on every operation, over the model's world and over what the real
components did.

A property is a predicate over (the world before, the operation, what it did); each
check returns the violations it finds, as (property, one-line message).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from replan.verification.boundary.domains import Domains, Op, Request
from replan.verification.boundary.model import Expected, World

PROPERTIES: dict[str, str] = {
    "effect-only-after-executed": (
        "a tool's effect runs when, and only when, the controller answered Executed for "
        "that call as the model made it (or the owner abandoned its in-doubt attempt)"
    ),
    "effect-matches-what-was-accepted": (
        "the effect runs with exactly the accepted plan's step and resource and the call's "
        "bound content, with the call digest as its idempotency key; other content is "
        "refused before the controller is asked"
    ),
    "effect-at-most-once": (
        "per call id, across crashes, restores and retries, the effect runs at most once "
        "(plus once per owner abandon); a retry of a completed call answers from its receipt"
    ),
    "in-doubt-needs-the-owner": (
        "an in-doubt call is never rerun nor reported done until the owner resolves or "
        "abandons it, and the decision is recorded"
    ),
    "restore-is-exact-or-refuses": (
        "restore rebuilds exactly the run as of the last durable entry, or refuses in one "
        "line naming what is missing, changing nothing; never an older run"
    ),
    "approval-binds-the-call": (
        "an approval covers one execution of one call, by its digest over step, resource "
        "and arguments; it is void once the plan is superseded, the evidence changes or "
        "the run stops"
    ),
    "tool-time-and-usage-charged": (
        "every call whose effect ran is charged its tool time and usage before any answer "
        "of it reaches the model"
    ),
}

#: The rule that governs each answer the model gives (kind, tag); a divergence from the
#: model on that answer breaks it.
_OWNERS: dict[tuple[str, str], str] = {
    ("Executed", ""): "effect-only-after-executed",
    ("Executed", "rerun"): "in-doubt-needs-the-owner",
    ("Replayed", ""): "effect-at-most-once",
    ("InDoubt", "intent"): "in-doubt-needs-the-owner",
    ("InDoubt", "no record"): "in-doubt-needs-the-owner",
    ("ContentMismatch", "approval"): "approval-binds-the-call",
    ("ContentMismatch", "content"): "effect-matches-what-was-accepted",
    ("ContentMismatch", "accepted"): "effect-matches-what-was-accepted",
    ("Denied", ""): "effect-matches-what-was-accepted",
    ("AwaitingApproval", ""): "approval-binds-the-call",
}
#: The rule a crash point belongs to: what was just written there.
POINT_OWNERS: dict[str, str] = {
    "proposed": "effect-only-after-executed",
    "decided": "effect-only-after-executed",
    "intended": "in-doubt-needs-the-owner",
    "effected": "in-doubt-needs-the-owner",
    "receipted": "effect-at-most-once",
    "charged": "tool-time-and-usage-charged",
    "approval_recorded": "approval-binds-the-call",
    "approved": "approval-binds-the-call",
}
#: The rule a journal record belongs to.
RECORD_OWNERS: dict[str, str] = {
    "intent": "in-doubt-needs-the-owner",
    "completion": "effect-at-most-once",
    "abandon": "in-doubt-needs-the-owner",
    "approval": "approval-binds-the-call",
}


def owner(kind: str, tag: str = "") -> str:
    """The rule that governs the model's answer ``kind`` (the controller's refusals,
    and anything else, belong to ``effect-only-after-executed``)."""
    return _OWNERS.get((kind, tag), _OWNERS.get((kind, ""), "effect-only-after-executed"))


class Violation(NamedTuple):
    """A property that does not hold, and why (one line)."""

    property: str
    message: str


class EffectRun(NamedTuple):
    """One run of a call's effect, as seen by the effect itself: the call, the step,
    the resource and content it ran with, and the idempotency key it was handed
    (``matches``: whether that key is the call digest of what ran)."""

    call: str
    step: str
    content: tuple[str, str]
    matches: bool


def check_effects(
    domains: Domains, expected: Expected, ran: Sequence[EffectRun]
) -> list[Violation]:
    """The effects one operation ran (``ran``, in order) against the ones the model
    runs (``expected.effects``), by call: each one the model runs, with its content,
    and no other."""
    found: list[Violation] = []
    wanted = dict(expected.effects)
    answers = {a.call: a for a in expected.answers}
    for effect in ran:
        content = wanted.pop(effect.call, None)
        if content is None:
            model = answers.get(effect.call)
            rule = owner(model.kind, model.tag) if model is not None else "effect-at-most-once"
            said = model.kind if model is not None else "no effect (it ran before)"
            found.append(Violation(rule, f"{effect.call}'s effect ran; the model answers {said}"))
            continue
        call = domains.call(effect.call)
        if content != effect.content or effect.step != call.step:
            bound = expected.world.calls[domains.index(effect.call)]
            rule = (
                "approval-binds-the-call" if bound.approved else "effect-matches-what-was-accepted"
            )
            found.append(
                Violation(
                    rule,
                    f"{effect.call}'s effect ran {effect.step} with {effect.content}; the "
                    f"accepted call is {call.step} with {content}",
                )
            )
        elif not effect.matches:
            found.append(
                Violation(
                    "effect-matches-what-was-accepted",
                    f"{effect.call}'s effect was not handed its call digest as idempotency key",
                )
            )
    for call_id in wanted:
        model = answers.get(call_id)
        rule = owner(model.kind, model.tag) if model is not None else "effect-only-after-executed"
        found.append(Violation(rule, f"{call_id}: the model runs its effect; it did not run"))
    return found


def check_step(domains: Domains, before: World, op: Op, expected: Expected) -> list[Violation]:
    """The rules over one step of the model itself (the explorer runs it on every
    transition): each holds by the design, or the design is wrong."""
    found: list[Violation] = []
    after = expected.world
    for index, call in enumerate(domains.calls):
        old, new = before.calls[index], after.calls[index]
        ran = new.effects - old.effects
        if new.effects > 1 + new.abandons:
            found.append(
                Violation(
                    "effect-at-most-once",
                    f"{call.id}'s effect ran {new.effects} times, {new.abandons} abandons",
                )
            )
        if ran and "intent" not in new.records[len(old.records) :]:
            found.append(
                Violation("in-doubt-needs-the-owner", f"{call.id} ran with no intent written")
            )
        if ran and old.entry == "open":
            found.append(
                Violation("in-doubt-needs-the-owner", f"{call.id} ran again while in doubt")
            )
        if ran and new.approved and new.attempt is not None and new.bound != new.attempt[:2]:
            found.append(
                Violation(
                    "approval-binds-the-call", f"{call.id} ran {new.attempt[:2]}, not {new.bound}"
                )
            )
    if isinstance(op, Request) and op.channel == "model" and expected.crashed_at is None:
        # (after a crash in the reply the model never reads its answers)
        for answer in expected.answers:
            if answer.kind not in ("Executed", "Replayed"):
                continue
            state = after.calls[domains.index(answer.call)]
            if not state.charged_here:
                found.append(
                    Violation(
                        "tool-time-and-usage-charged",
                        f"{answer.call} answered {answer.kind} before it was charged",
                    )
                )
    return found


def first(violations: Iterable[Violation]) -> Violation | None:
    return next(iter(violations), None)


__all__ = [
    "POINT_OWNERS",
    "PROPERTIES",
    "RECORD_OWNERS",
    "EffectRun",
    "Violation",
    "check_effects",
    "check_step",
    "first",
    "owner",
]
