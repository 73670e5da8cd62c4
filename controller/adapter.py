"""What a host knows about its own agent's world, in one object: which step a tool
call is, what a trusted tool result or a person's message makes known, whether a
call awaiting approval is approved, and which rule of the host's written policy a
refusal enforces.

Why one object: the controller decides from observations and approvals only; it never
reads a tool result or a conversation. Everything that turns the world into those
inputs is the host's, and the same adapter serves a live run (``ReplanMiddleware``)
and a recorded one (``replan check-trace``), so what a recorded run is judged by is
what a live run would do.

Rules an adapter keeps:

- **one read, one piece of evidence.** A result yields an observation for each fact
  whose state it changes; a result that changes nothing yields the observation of the
  fact it read, under a higher version (the contract counts it as no progress). So
  reading the same facts again and again stops the run, and a new fact never does;
- **facts about a resource are keyed by it**: ``key@resource`` with the resource's own
  id (the reservation id, the order id); the guard maps open resources onto the
  policy's slots;
- **never raise for what the world returns**: an unreadable result is no evidence
  (an empty list), not an exception.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from replan.controller.records import Observation


@dataclass(frozen=True)
class Verdict:
    """The host's decision on one call awaiting approval: approved or not, the rule of
    the host's written policy it applies, and why (shown to the model and the
    reviewer when it is not approved)."""

    approved: bool
    rule: str
    reason: str


@dataclass(frozen=True)
class Rule:
    """A rule of the host's written policy: its id and the sentence it enforces."""

    id: str
    text: str


class Adapter(Protocol):
    """The host's adapter (see the module docstring)."""

    #: every rule a refusal can name, by id
    rules: Mapping[str, Rule]

    def step_of(self, tool: str, arguments: Mapping[str, Any]) -> str:
        """The policy step a call of ``tool`` is (usually the tool's own name; a tool
        whose calls do different things under the written policy maps to one step
        each, e.g. a cabin change and a flight change of one update tool)."""
        ...

    def observe_result(
        self, tool: str, arguments: Mapping[str, Any], result: str
    ) -> Iterable[Observation]:
        """What the result of a call that ran makes known (the result as the model
        read it)."""
        ...

    def observe_message(self, role: str, text: str) -> Iterable[Observation]:
        """What a message of the conversation makes known (``role``: ``user`` or
        ``assistant``). The adapter also keeps it: an approval may depend on what was
        listed and what the person answered."""
        ...

    def approve(self, step: str, arguments: Mapping[str, Any]) -> Verdict:
        """Whether the host approves this call, awaiting approval now."""
        ...

    def explain(self, key: str, resource: str | None) -> tuple[str, str]:
        """The rule a required fact enforces and why it is not Passed (``key`` as the
        policy declares it; ``resource`` for a per-resource key)."""
        ...

    def explain_stop(self, reason: str) -> tuple[str, str]:
        """The rule a stop of the run (a ``StopReason`` value) enforces, and why."""
        ...
