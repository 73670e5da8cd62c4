"""The explorer's finite input domains: which operations are tried in every state.

Owns: stating, for a policy, exactly which observations, plans and plan ids the
breadth-first explorer (``verification/engines/explore/engine.py``) feeds to the controller in every
reachable state, in a fixed order (the order names an operation in a parent pointer),
and describing them for the report. Leaves the search itself to the explorer.

Two families, both finite and both printed in every report:

- ``default_report_domains``: the bounds of the default report, chosen to reach every
  declared transition and every stop reason of the default policy in seconds. They
  are two focused domains, explored one after the other (``observation_domains``:
  every kind of delivery on one key with one plan id; ``plan_domains``: long plan
  histories with fresh ids), because one product domain reaching both StepLimit
  (max_steps + 1 ids) and older-version deliveries (two versions per key) has more
  than a million states.
- ``product_domains``: one product domain of a chosen size (``--max-version``,
  ``--ids``).
- ``spin_domains``: exactly the domains of the SPIN model in
  ``shared/anchors/spin/controller.pml`` (observe key x version 1..V x state x source
  {fixture, owner}; propose id 1..K x revision {plan_revision, plan_revision + 1} x
  evidence revision {current, current - 1} x the 3 declared steps + 1 undeclared x
  resource {allowed, not allowed}; execute id 1..K or one never-proposed id; cancel):
  12V + 33K + 2 calls out of every state, so the distinct state count can be compared
  with SPIN's.

Plan ids. A fixed pool names ids ``p1..pK`` (plus ``p-unknown``, never proposed, for
execute). *Fresh* ids instead offer, in each state, every id the state mentions
(accepted, completed or pending) plus the first ``pN`` it does not: ids a state does
not mention are interchangeable (the contract only compares ids for equality), so one
fresh id stands for all of them, and the search covers every pool size up to renaming
without fixing K. ``max_proposals`` bounds how many ids a run can ever accept.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from replan.controller.policy import Policy
from replan.controller.records import EvidenceState, Observation, Plan
from replan.spec import inputs
from replan.verification.core.harness import MODEL, Operation

#: Operations are tried in this order in every state: the declaration's events.
GROUPS: tuple[str, ...] = MODEL.events
#: Each event's parameter type (the declaration's interface).
PARAMETER_TYPES: dict[str, str | None] = {
    event: interface.parameter_type for event, interface in MODEL.interface.items()
}
#: The parameter types the domains below spell out by hand; an event with any other
#: takes its arguments from ``spec.inputs`` (every combination of its record's
#: fields' candidates, in every state).
HAND_WRITTEN = frozenset({"Observation", "Plan", "str", None})


@dataclass(frozen=True)
class Domains:
    """What the explorer tries in every state (bounds live here, never in ``spec/``)."""

    name: str
    #: Observations carry versions 1..versions of every declared key.
    versions: int = 2
    #: Sources an observation may carry (its content is (state, source)).
    sources: tuple[str, ...] = ("fixture",)
    #: A fixed pool p1..pK of plan ids, or None for fresh ids (module docstring).
    ids: int | None = None
    #: Proposed plan revision = plan_revision + offset.
    revision_offsets: tuple[int, ...] = (0, 1)
    #: Proposed plan's evidence revision = evidence_revision + offset.
    evidence_offsets: tuple[int, ...] = (0, -1)
    #: How many step names the policy does not declare are proposed too.
    undeclared_steps: int = 1
    #: How many resources the policy does not allow are proposed too (beside the
    #: policy's first allowed resource).
    disallowed_resources: int = 1
    #: Also propose one malformed plan (an empty id): rejected, uses a slot.
    malformed_plan: bool = True
    #: Also observe one malformed observation (an undeclared key): InvalidInput.
    malformed_observation: bool = True
    #: Fresh ids: offer one id of each kind the state mentions (accepted, completed,
    #: pending: ids of one kind are interchangeable) instead of every mentioned id.
    one_id_per_kind: bool = True
    #: Keys observed (default: every key of the policy).
    keys: tuple[str, ...] | None = None
    #: Evidence states observations carry (default: all three).
    evidence_states: tuple[str, ...] = ("Unknown", "Passed", "Failed")
    #: Declared steps proposed (default: every step of the policy).
    steps: tuple[str, ...] | None = None
    #: Also try the events whose arguments come from ``spec.inputs`` (SPIN's model
    #: has only observe, propose, execute and cancel).
    derived_events: bool = True

    def renamed(self, symmetry: bool | None) -> bool:
        """Whether a search stores states under the canonical renaming of their plan
        ids: as ``symmetry`` asks, or (None: auto) with fresh ids only, whose pool is
        one id more than a run can accept. Both explorers decide it here."""
        return self.ids is None if symmetry is None else symmetry

    def __post_init__(self) -> None:
        if self.versions < 1:
            raise ValueError(f"versions: must be at least 1, got {self.versions}")
        if self.ids is not None and self.ids < 1:
            raise ValueError(f"ids: must be at least 1, got {self.ids}")
        if not self.sources:
            raise ValueError("sources: at least one source is required")


def current_plans_only(name: str, **bounds: Any) -> Domains:
    """A focused domain: every plan proposed is current (revision +1, the current
    evidence revision), names a declared step and the allowed resource, and nothing
    malformed is sent. ``bounds`` sets the rest (versions, keys, states, ids)."""
    return Domains(
        name,
        revision_offsets=(1,),
        evidence_offsets=(0,),
        undeclared_steps=0,
        disallowed_resources=0,
        malformed_plan=False,
        malformed_observation=False,
        **bounds,
    )


def observation_domains(policy: Policy) -> Domains:
    """The default report's first domain: every kind of delivery, on one key.

    The policy's first key at versions 1..2 in every evidence state (one source), plus
    a malformed observation; one plan id (p1, and p-unknown for execute) proposed in
    every variant (revision current/+1, evidence current/-1, every step plus an
    undeclared one, the allowed resource and a disallowed one, plus a malformed plan).
    Reaches duplicates, conflicts, older and renumbered versions, every rejection,
    in both active states. One key keeps it small: two keys at two versions square
    the evidence configurations (about 10^5 states more)."""
    return Domains(
        "observations",
        versions=2,
        keys=policy.keys[:1],
        ids=1,
    )


def plan_domains() -> Domains:
    """The default report's second domain: long plan histories, every key Passed.

    Every key at version 1, Passed; fresh plan ids (one of each kind the state
    mentions, and a new one), revision current+1, the current evidence, every
    declared step, the allowed resource. Reaches what needs several ids and all the
    steps: StepLimit (max_steps + 1 ids), Completed, a completed or stale id proposed
    or executed while another plan is pending."""
    return current_plans_only("plans", versions=1, evidence_states=("Passed",), ids=None)


def default_report_domains(policy: Policy) -> tuple[Domains, Domains]:
    """The default report's bounds: two focused domains (a single product domain that
    reaches both StepLimit and older-version deliveries has over a million states)."""
    return (observation_domains(policy), plan_domains())


def product_domains(versions: int = 1, ids: int | None = None) -> Domains:
    """One product domain of the given size (``--max-version``/``--ids``): every key
    at versions 1..versions in every state (one source), ids p1..pK or fresh, every
    plan variant, a malformed plan and observation."""
    return Domains("product", versions=versions, ids=ids)


def smoke_domains() -> Domains:
    """Both keys at one version in every state, one plan id, only current and allowed
    plans: 7,233 states under the default policy, explored in about a second (a smoke
    run of the explorer's ways of running, and a small reachable set to compare a
    campaign's visits with)."""
    return current_plans_only(
        "smoke",
        versions=1,
        keys=("parser", "access"),
        evidence_states=("Unknown", "Passed", "Failed"),
        ids=1,
    )


def spin_domains(versions: int = 1, ids: int = 1) -> Domains:
    """Exactly the SPIN model's domains for (V, K) = (versions, ids)."""
    return Domains(
        "spin",
        versions=versions,
        sources=("fixture", "owner"),
        ids=ids,
        malformed_plan=False,
        malformed_observation=False,
        one_id_per_kind=False,
        derived_events=False,
    )


def _fresh_name(taken: Iterable[str], stem: str) -> str:
    names = set(taken)
    if stem not in names:
        return stem
    number = 2
    while f"{stem}-{number}" in names:
        number += 1
    return f"{stem}-{number}"


def id_order(plan_id: str) -> tuple[int, str]:
    """p2 before p10: the order in which pool and fresh ids are named."""
    digits = plan_id[1:]
    return (int(digits), plan_id) if plan_id[:1] == "p" and digits.isdigit() else (1 << 30, plan_id)


class InputSpace:
    """``Domains`` bound to a policy: the concrete operations of every state."""

    def __init__(self, policy: Policy, domains: Domains) -> None:
        self.policy = policy
        self.domains = domains
        step_names = [
            step.name
            for step in policy.steps
            if domains.steps is None or step.name in domains.steps
        ]
        self.undeclared_steps: list[str] = []
        for number in range(domains.undeclared_steps):
            stem = "drop-table" if number == 0 else f"drop-table-{number + 1}"
            self.undeclared_steps.append(_fresh_name(step_names + self.undeclared_steps, stem))
        self.steps = tuple(step_names + self.undeclared_steps)
        self.allowed_resource = policy.resources[0]
        #: the allowed resources plans name: one, or with per-resource keys two (a
        #: fact about one resource must not open a step on another)
        self.allowed_resources = policy.resources[: 2 if policy.per_resource else 1]
        self.disallowed_resources: list[str] = []
        for number in range(domains.disallowed_resources):
            stem = "input-Z" if number == 0 else f"input-Z{number + 1}"
            self.disallowed_resources.append(
                _fresh_name(list(policy.resources) + self.disallowed_resources, stem)
            )
        self.resources = (*self.allowed_resources, *self.disallowed_resources)
        self.observed_keys = tuple(
            key for key in policy.keys if domains.keys is None or key in domains.keys
        )
        observations = [
            Observation(key, version, state, source)
            for key in self.observed_keys
            for version in range(1, domains.versions + 1)
            for state in map(EvidenceState, domains.evidence_states)
            for source in domains.sources
        ]
        if domains.malformed_observation:
            undeclared_key = _fresh_name(policy.keys, "undeclared-key")
            observations.append(
                Observation(undeclared_key, 1, EvidenceState.UNKNOWN, domains.sources[0])
            )
        self.observations: tuple[Observation, ...] = tuple(observations)
        self.pool: tuple[str, ...] | None = (
            None if domains.ids is None else tuple(f"p{n}" for n in range(1, domains.ids + 1))
        )
        self.unknown_id = None if self.pool is None else _fresh_name(self.pool, "p-unknown")
        self._plans: dict[tuple[int, int, tuple[str, ...]], tuple[Plan, ...]] = {}
        self._ids: dict[tuple[Any, ...], tuple[tuple[str, ...], tuple[str, ...]]] = {}

    # ---- per state --------------------------------------------------------------

    def ids(
        self, accepted: tuple[str, ...], completed: tuple[str, ...], pending_id: str | None
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(ids to propose, ids to execute) in a state with these accepted and
        completed ids and this pending id."""
        cache_key = (accepted, completed, pending_id)
        cached = self._ids.get(cache_key)
        if cached is None:
            mentioned = {*accepted, *completed, *(() if pending_id is None else (pending_id,))}
            if self.domains.one_id_per_kind:
                kinds: dict[tuple[bool, bool, bool], str] = {}
                for plan_id in sorted(mentioned, key=id_order):
                    kind = (plan_id in accepted, plan_id in completed, plan_id == pending_id)
                    kinds.setdefault(kind, plan_id)
                offered_ids = sorted(kinds.values(), key=id_order)
            else:
                offered_ids = sorted(mentioned, key=id_order)
            if self.pool is not None:
                assert self.unknown_id is not None
                if self.domains.one_id_per_kind:
                    unused = [plan_id for plan_id in self.pool if plan_id not in mentioned]
                    offered = tuple(sorted({*offered_ids, *unused[:1]}, key=id_order))
                else:
                    offered = self.pool
                cached = (offered, (*offered, self.unknown_id))
            else:
                number = 1
                while f"p{number}" in mentioned:
                    number += 1
                offered = (*offered_ids, f"p{number}")
                cached = (offered, offered)
            self._ids[cache_key] = cached
        return cached

    def plans(
        self, plan_revision: int, evidence_revision: int, ids: tuple[str, ...]
    ) -> tuple[Plan, ...]:
        """Every plan proposed in a state with these revisions and offered ids."""
        cache_key = (plan_revision, evidence_revision, ids)
        plans = self._plans.get(cache_key)
        if plans is None:
            built = [
                Plan(plan_id, plan_revision + dr, evidence_revision + de, step, resource)
                for plan_id in ids
                for dr in self.domains.revision_offsets
                for de in self.domains.evidence_offsets
                for step in self.steps
                for resource in self.resources
            ]
            if self.domains.malformed_plan:
                built.append(
                    Plan(
                        "",
                        plan_revision + 1,
                        evidence_revision,
                        self.steps[0],
                        self.allowed_resource,
                    )
                )
            plans = self._plans[cache_key] = tuple(built)
        return plans

    def arguments(
        self,
        event: str,
        plan_revision: int,
        evidence_revision: int,
        ids: tuple[tuple[str, ...], tuple[str, ...]],
        run: Any = None,
    ) -> Sequence[Any]:
        """Every argument ``event`` is tried with in a state (with these revisions, these
        (ids to propose, ids to execute), and ``run`` in that state, which the derived
        arguments of ``spec.inputs`` read)."""
        kind = PARAMETER_TYPES[event]
        if kind is None:
            return (None,)
        if kind == "Observation":
            return self.observations
        if kind == "Plan":
            return self.plans(plan_revision, evidence_revision, ids[0])
        if kind == "str":
            return ids[1]
        if not self.domains.derived_events:
            return ()
        if run is None:
            raise ValueError(f"{event}: its arguments depend on the run's state")
        return inputs.arguments(kind, run)

    def operations(
        self,
        plan_revision: int,
        evidence_revision: int,
        accepted: tuple[str, ...] = (),
        completed: tuple[str, ...] = (),
        pending_id: str | None = None,
        run: Any = None,
    ) -> list[Operation]:
        """Every operation tried in a state, in the explorer's order."""
        ids = self.ids(accepted, completed, pending_id)
        return [
            Operation(event, argument)
            for event in GROUPS
            for argument in self.arguments(event, plan_revision, evidence_revision, ids, run)
        ]

    # ---- the report ---------------------------------------------------------------

    def calls_per_state(self) -> int:
        """Calls out of the initial state (with a fixed pool: out of every state)."""
        to_propose, to_execute = self.ids((), (), None)
        return len(self.observations) + len(self.plans(0, 1, to_propose)) + len(to_execute) + 1

    def calls_per_state_text(self) -> str:
        if self.pool is not None:
            return str(self.calls_per_state())
        per_id = len(self.plans(0, 1, ("p1",))) - len(self.plans(0, 1, ())) + 1
        kind = "kind of id" if self.domains.one_id_per_kind else "id"
        return f"{self.calls_per_state()} + {per_id} per {kind} the state mentions"

    def describe(self) -> dict[str, Any]:
        """The domains as stated in the report (JSON-ready)."""
        d = self.domains
        ids: Any
        kinds = (
            "one id of each kind the state mentions (accepted, completed, pending)"
            if d.one_id_per_kind
            else "every id the state mentions"
        )
        if self.pool is None:
            ids = {
                "fresh": True,
                "propose": f"{kinds}, plus the first pN it does not mention",
                "execute": "the same ids (the new one answers UnknownPlan)",
            }
        elif d.one_id_per_kind:
            ids = {
                "fresh": False,
                "pool": list(self.pool),
                "propose": f"{kinds}, plus the first pool id it does not mention",
                "execute": f"the same ids, plus {self.unknown_id} (never proposed)",
            }
        else:
            ids = {
                "fresh": False,
                "propose": list(self.pool),
                "execute": [*self.pool, self.unknown_id],
            }
        described: dict[str, Any] = {
            "name": d.name,
            "observe": {
                "keys": list(self.observed_keys),
                "versions": [1, d.versions],
                "states": list(d.evidence_states),
                "sources": list(d.sources),
                "malformed": [
                    repr(o) for o in self.observations if o.key not in self.policy.key_set
                ],
            },
            "propose": {
                "ids": ids["propose"],
                "revision": [f"plan_revision{_signed(o)}" for o in d.revision_offsets],
                "evidence_revision": [f"evidence_revision{_signed(o)}" for o in d.evidence_offsets],
                "steps": list(self.steps),
                "undeclared_steps": list(self.undeclared_steps),
                "resources": list(self.resources),
                "allowed_resources": [self.allowed_resource],
                "malformed": ["Plan with an empty id"] if d.malformed_plan else [],
            },
            "execute": {"ids": ids["execute"]},
            "cancel": True,
            "calls_per_state": self.calls_per_state_text(),
        }
        return described

    def lines(self) -> list[str]:
        """The domains in a few lines of text, for the human report."""
        d = self.domains
        kinds = "one of each kind" if d.one_id_per_kind else "every id"
        if self.pool is None:
            ids = f"fresh ({kinds} the state mentions + a new pN)"
            execute_ids = "the same"
        elif d.one_id_per_kind and len(self.pool) > 1:
            ids = f"p1..p{len(self.pool)} ({kinds} the state mentions + an unused one)"
            execute_ids = f"the same + {self.unknown_id} (never proposed)"
        else:
            ids = f"p1..p{len(self.pool)}"
            execute_ids = f"{ids} + {self.unknown_id} (never proposed)"
        malformed_obs = " + 1 malformed (undeclared key)" if d.malformed_observation else ""
        malformed_plan = " + 1 malformed (empty id)" if d.malformed_plan else ""
        revisions = ", ".join("plan_revision" + _signed(o) for o in d.revision_offsets)
        evidence = ", ".join("current" + _signed(o) for o in d.evidence_offsets)
        return [
            f"domains ({d.name}):",
            f"  observe  key {{{', '.join(self.observed_keys)}}} x version 1..{d.versions}"
            f" x state {{{', '.join(d.evidence_states)}}} x source {{{', '.join(d.sources)}}}"
            f"{malformed_obs}",
            f"  propose  id {ids} x revision {{{revisions}}} x evidence_revision {{{evidence}}}"
            f" x step {{{', '.join(self.steps)}}} x resource {{{', '.join(self.resources)}}}"
            f"{malformed_plan}",
            f"  execute  id {execute_ids};  cancel",
            f"  calls per state: {self.calls_per_state_text()}",
        ]


def _signed(offset: int) -> str:
    return "" if offset == 0 else f"{offset:+d}"
