"""The boundary's small domains, and the operations a run of the boundary is made of.

Owns what the explorer enumerates and the campaign draws from: the calls of a run
(one per step of the policy, and a second call of the first step), the two contents a
call can carry (``A``: one row, evidence Passed; ``B``: a million rows, evidence
Failed), the resources (the plan's, one the owner grants but the policy does not
allow, one nobody grants), the crash points (``CallLife.crash_points``), the tampering
a restore may meet, and the operations themselves as plain JSON-ready records (a saved
counterexample is a list of them).

The boundary is checked under ``boundary_policy(policy)``: the policy, with its first
step that does not complete the run needing approval when no step does (so the
approval path is exercised whatever the policy), with the tool argument ``resource``
holding the resource of each step that names none when the policy allows several
resources (the guard needs one there, and refuses the policy without it), and with
token, cost and time budgets no run of the domains reaches when it sets none (so every
charge is counted, and a charge missing or made twice shows in the run's state).

Leaves to ``verification.boundary.model`` what each operation does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from replan.controller.policy import Policy
from replan.verification.boundary.declaration import CallLife
from replan.verification.boundary.tamper import KINDS

#: The two contents a call can carry: its arguments (the guard's tools take both).
CONTENTS: dict[str, dict[str, Any]] = {
    "A": {"rows": 1, "verdict": "Passed"},
    "B": {"rows": 1_000_000, "verdict": "Failed"},
}
#: A content no call digest can cover (an integer beyond RFC 8785's): refused before
#: the controller is asked, on either channel.
UNDIGESTIBLE = "C"
#: Arguments that do not fit the tool's parameters: the guard refuses them before the
#: controller is asked (the model's channel only: the host's has no schema).
MISFIT = "M"
ARGUMENTS: dict[str, dict[str, Any]] = {
    **CONTENTS,
    UNDIGESTIBLE: {"rows": 2**60, "verdict": "Passed"},
    MISFIT: {"rows": "many", "verdict": "Passed"},
    "D": {"rows": 2**53 - 1, "verdict": "Passed"},
}
#: A tool the agent has that is no declared step: the guard refuses its calls.
STRAY = "x1"
#: A step the owner's grant leaves out (the host's executor-alone call e2 names it).
UNGRANTED_STEP = "ungranted-step"
#: The largest integer RFC 8785 carries: a content that must be accepted.
EDGE = "D"
#: The crash points, in the order one call reaches them.
CRASH_POINTS: tuple[str, ...] = CallLife.crash_points
#: The crash points a request (not an approval) can stop at, per channel: the host
#: channel (``perform``) charges nothing.
REQUEST_POINTS = {
    "model": ("proposed", "decided", "intended", "effected", "receipted", "charged"),
    "host": ("proposed", "decided", "intended", "effected", "receipted"),
    "executor": ("intended", "effected", "receipted"),
}
APPROVAL_POINTS = ("approval_recorded", "approved")
#: What may be done to the files before a restore (each must be refused).
TAMPERING = KINDS
#: The model's calls through the guard, the host's ``perform``, and the host's use of
#: the executor alone (no controller: the host decided itself).
CHANNELS = ("model", "host", "executor")


#: The tool argument that holds a step's resource where the policy allows several and
#: the step names no argument of its own.
RESOURCE_ARGUMENT = "resource"
#: The budgets set where a policy sets none: far beyond what a run of the domains
#: uses, so they stop nothing, but every charge is counted and compared.
UNREACHED_BUDGET = 10**9


def boundary_policy(policy: Policy) -> Policy:
    """The policy the boundary is checked under (see the module docstring)."""
    if not policy.approval_steps:
        chosen = next((s for s in policy.steps if not s.completes_run), policy.steps[0])
        steps = tuple(
            dataclasses.replace(s, needs_approval=True) if s is chosen else s for s in policy.steps
        )
        policy = dataclasses.replace(policy, steps=steps)
    if len(policy.resources) > 1:
        steps = tuple(
            s
            if s.resource_argument is not None
            else dataclasses.replace(s, resource_argument=RESOURCE_ARGUMENT)
            for s in policy.steps
        )
        policy = dataclasses.replace(policy, steps=steps)
    if policy.max_tokens == 0:
        policy = dataclasses.replace(policy, max_tokens=UNREACHED_BUDGET)
    if policy.max_wall_ms == 0:
        policy = dataclasses.replace(policy, max_wall_ms=UNREACHED_BUDGET)
    if policy.max_cost == 0:
        policy = dataclasses.replace(policy, max_cost=UNREACHED_BUDGET, currency="EUR")
    return policy


@dataclass(frozen=True)
class Call:
    """One call of the domain: its id, its tool (a step), and its number (the tokens
    the host's ``tool_usage`` charges for it; its tool takes ``tool_ms``)."""

    id: str
    step: str
    number: int

    @property
    def tool_ms(self) -> int:
        """Over a second, so a tool time charged in the wrong unit shows."""
        return 1000 * self.number + 7


@dataclass(frozen=True)
class Domains:
    """Everything a boundary run draws from, for one policy."""

    policy: Policy
    calls: tuple[Call, ...]
    #: the call of a tool that is no declared step (never in a world's calls)
    stray: Call
    resource: str  # the plan's (the policy's first)
    other_resource: str  # granted by the owner, not allowed by the policy
    ungranted: str  # granted by nobody
    #: whether the host gives the guard a ``tool_usage`` (without one: no usage)
    host_usage: bool = True

    @classmethod
    def of(cls, policy: Policy) -> Domains:
        steps = [s.name for s in policy.steps]
        names = [*steps, steps[0]]
        calls = [Call(f"c{n}", name, n) for n, name in enumerate(names, start=1)]
        # the host's calls of the executor alone: their own ids, never the controller's
        # (e2's step is one the owner grants nobody: the executor denies it)
        calls += [Call("e1", steps[0], len(names) + 1), Call("e2", UNGRANTED_STEP, len(names) + 2)]
        resource = policy.resources[0]
        stray = Call(STRAY, "undeclared-tool", len(calls) + 1)
        return cls(
            policy, tuple(calls), stray, resource, f"{resource}~granted", f"{resource}~ungranted"
        )

    def direct(self, call: Call) -> bool:
        """Whether ``call`` is one the host runs through the executor alone."""
        return call.id.startswith("e")

    def call(self, call_id: str) -> Call:
        for call in (*self.calls, self.stray):
            if call.id == call_id:
                return call
        raise KeyError(call_id)

    def index(self, call_id: str) -> int:
        return next(i for i, call in enumerate(self.calls) if call.id == call_id)

    @property
    def resources(self) -> tuple[str, ...]:
        return (self.resource, self.other_resource, self.ungranted)

    @property
    def granted(self) -> tuple[str, ...]:
        return (*self.policy.resources, self.other_resource)

    def arguments(self, call: Call, content: str, resource: str) -> dict[str, Any]:
        """The arguments of ``call`` carrying ``content`` (with the resource, when the
        step names it in an argument)."""
        arguments = dict(ARGUMENTS[content])
        declared = call.step in self.policy.requirements
        named = self.policy.step(call.step).resource_argument if declared else None
        if named is not None:
            arguments[named] = resource
        return arguments

    def observed_key(self, step: str) -> str | None:
        """The evidence key a step's result reports (a key its name contains)."""
        return next((key for key in self.policy.keys if key in step), None)


# ---- the operations ------------------------------------------------------------------


class Request(NamedTuple):
    """A request: the model's reply of one or more calls (channel ``model``, through
    the guard and the SDK's function loop), or the host's ``perform`` of one
    (``host``). Each call is (call id, content, resource). ``crash``: (point, call id)
    where the work stops, or None."""

    channel: str
    calls: tuple[tuple[str, str, str], ...]
    crash: tuple[str, str] | None = None


class Approve(NamedTuple):
    """The owner approves ``call`` with the digest of ``content``."""

    call: str
    content: str
    crash: str | None = None


class ApprovePlan(NamedTuple):
    """The host approves ``call``'s plan at the controller only (``Controller.approve``
    with the plan's digest), not the call: its arguments are bound by nothing, so the
    call must not run."""

    call: str


class Settle(NamedTuple):
    """The owner's word on ``call``. ``honest``: what happened (resolve when its
    in-doubt attempt ran, abandon when it did not; a call not in doubt: abandon, which
    must be refused). ``resolve``: resolve whatever happened. ``named``: abandon naming
    the call's operation (allowed only for a call with no record at all)."""

    call: str
    mode: str = "honest"


class Observe(NamedTuple):
    """The host delivers evidence: ``key`` is ``state``."""

    key: str
    state: str


class Cancel(NamedTuple):
    """The host cancels the run."""


class Restart(NamedTuple):
    """The process stops (or was killed); a fresh one restores from the files, first
    after ``tamper`` was done to them (which must be refused), then from the files as
    they were."""

    tamper: str | None = None


Op = Request | Approve | ApprovePlan | Settle | Observe | Cancel | Restart
_KINDS: dict[str, type[Any]] = {
    "request": Request,
    "approve": Approve,
    "approve-plan": ApprovePlan,
    "settle": Settle,
    "observe": Observe,
    "cancel": Cancel,
    "restart": Restart,
}


def op_to_json(op: Op) -> dict[str, Any]:
    kind = next(name for name, cls in _KINDS.items() if isinstance(op, cls))
    fields = {
        name: [list(item) for item in value] if name == "calls" else value
        for name, value in op._asdict().items()
    }
    return {"op": kind, **fields}


def op_from_json(document: Mapping[str, Any]) -> Op:
    """The operation ``op_to_json`` wrote; ``ValueError`` naming what is wrong."""
    try:
        cls = _KINDS[document["op"]]
        fields = {k: v for k, v in document.items() if k != "op"}
        if cls is Request:
            fields["calls"] = tuple(tuple(item) for item in fields["calls"])
            crash = fields.get("crash")
            fields["crash"] = None if crash is None else tuple(crash)
        op: Op = cls(**fields)
        return op
    except (KeyError, TypeError) as error:
        raise ValueError(f"not a boundary operation: {dict(document)!r:.120} ({error})") from None


def describe(op: Op) -> str:
    """One line naming ``op`` (a counterexample's steps are printed so)."""
    if isinstance(op, Request):
        calls = ", ".join(f"{c}[{content}]@{resource}" for c, content, resource in op.calls)
        crash = f", crash after {op.crash[0]} of {op.crash[1]}" if op.crash else ""
        return f"{op.channel} requests {calls}{crash}"
    if isinstance(op, Approve):
        crash = f", crash after {op.crash}" if op.crash else ""
        return f"the owner approves {op.call}[{op.content}]{crash}"
    if isinstance(op, ApprovePlan):
        return f"the host approves {op.call}'s plan only"
    if isinstance(op, Settle):
        return f"the owner settles {op.call}{'' if op.mode == 'honest' else f' ({op.mode})'}"
    if isinstance(op, Observe):
        return f"the host observes {op.key} {op.state}"
    if isinstance(op, Cancel):
        return "the host cancels the run"
    return f"restart{f' after {op.tamper}' if op.tamper else ''}"


def requests(domains: Domains, pairs: bool = True) -> Iterator[Request]:
    """Every request of the domain without a crash: each call alone on each channel
    with each content (the host's also on each resource), and, for the model, the
    first call followed by each other call in one reply."""
    for call in domains.calls:
        for content in CONTENTS:
            if domains.direct(call):
                yield Request("executor", ((call.id, content, domains.resource),))
                continue
            yield Request("model", ((call.id, content, domains.resource),))
            for resource in domains.resources:
                yield Request("host", ((call.id, content, resource),))
    if pairs:
        first = domains.calls[0]
        for call in domains.calls[1:-1]:
            yield Request(
                "model", ((first.id, "A", domains.resource), (call.id, "A", domains.resource))
            )


def with_crashes(request: Request) -> Iterator[Request]:
    """``request``, and the same request stopped at each crash point of each of its calls."""
    yield request
    for call_id, _content, _resource in request.calls:
        for point in REQUEST_POINTS[request.channel]:
            yield request._replace(crash=(point, call_id))


__all__ = [
    "APPROVAL_POINTS",
    "ARGUMENTS",
    "CHANNELS",
    "CONTENTS",
    "CRASH_POINTS",
    "EDGE",
    "MISFIT",
    "REQUEST_POINTS",
    "STRAY",
    "TAMPERING",
    "UNDIGESTIBLE",
    "UNGRANTED_STEP",
    "Approve",
    "ApprovePlan",
    "Call",
    "Cancel",
    "Domains",
    "Observe",
    "Op",
    "Request",
    "Restart",
    "Settle",
    "boundary_policy",
    "describe",
    "op_from_json",
    "op_to_json",
    "requests",
    "with_crashes",
]
