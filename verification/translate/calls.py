"""The calls of the domains, as the translated models number them: SPIN's Promela and
the kernel's Python run one ``d_step`` or function per ``Call``.

Owns which concrete calls a domain makes (``domain_calls``) and how a call's argument
is stated relative to the state: a proposed plan's revisions as offsets
(``RELATIVE_FIELDS``), and, for the kernel, the fields a state derives and the
conditions under which a state offers the call (``derived.py``). Leaves lowering a
call to ``promela.Translation``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from replan.controller.policy import Policy
from replan.controller.records import Observation, Plan
from replan.spec.model import MachineModel
from replan.verification.core.domains import PARAMETER_TYPES, Domains, InputSpace, id_order
from replan.verification.translate.derived import Condition, Derivation, Template
from replan.verification.translate.derived import templates as derived_templates

#: The fields the domains' relative plan revisions are offsets of (``domains.py``:
#: a proposed plan's revision is ``plan_revision + offset``, its evidence revision
#: ``evidence_revision + offset``).
RELATIVE_FIELDS = {"revision": "_plan_revision", "evidence_revision": "_evidence_revision"}


@dataclass(frozen=True)
class Call:
    """One concrete call of the domains, as the model numbers it."""

    number: int
    event: str
    #: the argument; a Plan's revisions are offsets (``RELATIVE_FIELDS``), and a field
    #: the state derives holds a placeholder (``derived``)
    argument: Any
    #: the argument's fields the state derives (``derived.py``), by field name
    derived: tuple[tuple[str, Derivation], ...] = ()
    #: the conditions under which a state offers the call (none: every state does)
    offered: tuple[Condition, ...] = ()

    def concrete(self, run: Any) -> Any:
        """The argument in a state of ``run`` (a plan's revisions made absolute, the
        fields the state derives computed)."""
        argument = self.argument
        if isinstance(argument, Plan):
            argument = argument._replace(
                **{
                    part: getattr(argument, part) + getattr(run, field)
                    for part, field in RELATIVE_FIELDS.items()
                }
            )
        if self.derived:
            argument = argument._replace(
                **{field: derivation.value(run) for field, derivation in self.derived}
            )
        return argument

    def offered_in(self, run: Any) -> bool:
        """Whether a state of ``run`` offers this call."""
        return all(condition.holds(run) for condition in self.offered)


def domain_calls(
    policy: Policy, domains: Domains, model: MachineModel, per_state: bool = False
) -> list[Call]:
    """Every call of ``domains`` in the explorer's order, with relative plan revisions.
    Without ``per_state`` (SPIN) the domains must offer the same calls in every state:
    a fixed id pool, every id offered, no event whose arguments are derived from the
    state. With it (the kernel) a call may be offered only in some states and have
    fields the state derives (``derived.py``): one plan id of each kind, fresh ids (a
    pool of one more id than a run can accept), approve's and charge's arguments."""
    every_id = domains.ids is not None and not domains.one_id_per_kind
    if not per_state and not every_id:
        raise ValueError(
            f"domains {domains.name!r}: SPIN needs the same calls in every state "
            "(a fixed id pool, every id offered: --spin-domains)"
        )
    if domains.ids is None and not domains.one_id_per_kind:
        raise ValueError(
            f"domains {domains.name!r}: the kernel takes fresh ids one of each kind "
            "(every mentioned id: --engine python)"
        )
    space = InputSpace(policy, domains)
    offers: dict[str, tuple[Condition, ...]] = {}
    if every_id:
        proposed, executed = space.ids((), (), None)
        pool = proposed
    else:
        pool = space.pool or tuple(f"p{n}" for n in range(1, policy.max_proposals + 2))
        order = tuple(sorted(pool, key=id_order))
        offers = {
            i: (Condition("one of its kind or the first unmentioned", i, order),) for i in pool
        }
        proposed = pool
        executed = pool if space.unknown_id is None else (*pool, space.unknown_id)
    calls: list[Call] = []
    for event in model.events:
        kind = PARAMETER_TYPES.get(event)
        if kind is None and model.interface[event].parameter is None:
            templates: list[Template] = [(None, (), ())]
        elif kind == "Observation":
            templates = [(o, (), ()) for o in space.observations]
        elif kind == "Plan":
            templates = [(p, (), offers.get(p.id, ())) for p in space.plans(0, 0, proposed)]
        elif kind == "str":
            templates = [(i, (), offers.get(i, ())) for i in executed]
        elif not domains.derived_events:
            continue
        elif not per_state:
            raise ValueError(
                f"event {event!r}: its arguments depend on the state; SPIN needs domains "
                "without derived events (--spin-domains)"
            )
        else:
            assert kind is not None
            templates = derived_templates(kind, policy, pool)
        first = len(calls)
        calls.extend(
            Call(first + n, event, argument, derived, offered)
            for n, (argument, derived, offered) in enumerate(templates)
        )
    return calls


def call_text(call: Call) -> str:
    argument = call.argument
    if isinstance(argument, Plan):
        shown = (
            f"Plan({argument.id!r}, plan_revision{argument.revision:+d}, "
            f"evidence_revision{argument.evidence_revision:+d}, {argument.step!r}, "
            f"{argument.resource!r})"
        )
    elif isinstance(argument, Observation):
        shown = repr(argument).replace("EvidenceState.", "")
    elif argument is None:
        shown = ""
    else:
        shown = repr(argument)
    return f"{call.event}({shown})".replace("*/", "* /")
