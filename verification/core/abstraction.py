"""The abstraction coverage is measured in: a run's state up to what the contract
cannot tell apart.

Owns ``abstract_state`` (and the positions of the state tuple's fields it reads):
plan ids renamed by kind, sources by first appearance, versions by rank, the plan
revision dropped. A campaign's visited states and the explorer's reachable set are
both mapped through it, so the two can be compared state for state
(``verification.core.visited``, ``verification.engines.explore.coverage``).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from replan.controller.fields import COUNTER, STATE_FIELDS
from replan.controller.fields import position as field_position
from replan.controller.records import Plan
from replan.controller.run import RunState

Stored = TypeVar("Stored")

#: The state tuple's leading scalar fields (``controller/fields.py``); its containers follow.
SCALAR_NAMES = tuple(f.attribute for f in STATE_FIELDS if f.kind.scalar)
SCALARS = len(SCALAR_NAMES)
#: Where the state tuple holds each field the abstraction reads.
P_DECLARED = field_position("_declared_state")
P_EVIDENCE_REVISION = field_position("_evidence_revision")
P_PLAN_REVISION = field_position("_plan_revision")
P_PENDING = field_position("_pending")
P_LATEST = field_position("_latest_version")
P_KNOWN = field_position("_known")
P_CONTENTS = field_position("_contents")
P_ACCEPTED = field_position("_accepted")
P_COMPLETED = field_position("_completed")


def evidence_of(state: RunState) -> list[tuple[str, int, str]]:
    """(key, latest version, state) of every key with a record."""
    known = dict(state[P_KNOWN])
    return [(key, version, str(known.get(key, "Unknown"))) for key, version in state[P_LATEST]]


#: What the abstraction never reads: the plan revision, and the pending plan's own
#: revision (its id is renamed, its other parts kept). A search that knows where a
#: state holds these can tell two states apart without them (``abstract_numbering``).
IGNORED_FIELD = "_plan_revision"
IGNORED_PLAN_PART = "revision"
#: The counters coverage keeps as they are (every one but the plan revision).
_ABSTRACT_COUNTERS = tuple(
    index
    for index, f in enumerate(STATE_FIELDS)
    if f.kind is COUNTER and f.attribute != IGNORED_FIELD
)
#: The pending plan's parts kept as they are (its id is renamed).
_PENDING_KEPT = tuple(
    index for index, part in enumerate(Plan._fields) if part not in ("id", IGNORED_PLAN_PART)
)


def abstract_state(state: RunState) -> tuple[Any, ...]:
    """The abstraction coverage is measured in: a state up to what the contract cannot
    tell apart, so that a campaign's states (any ids, sources, version numbers) land
    on the explorer's. Plan ids are renamed by kind (accepted, completed, pending) and
    sources by first appearance (the contract only compares them for equality);
    versions become their rank among the key's recorded versions (it only compares
    them by order); the plan revision is dropped (only its order against a proposed
    revision matters, and a campaign's revisions step by other amounts). Counters,
    evidence revision, evidence states, the pending plan's step, resource and cited
    evidence revision are kept as they are."""
    pending = state[P_PENDING]
    return abstract_with(state, abstract_parts(state, None if pending is None else pending[0]))


def abstract_with(state: RunState, parts: tuple[Any, ...]) -> tuple[Any, ...]:
    """``abstract_state`` from the state's scalars and its abstracted parts."""
    pending = state[P_PENDING]
    pending_name, evidence, contents, accepted, completed = parts
    return (
        str(state[P_DECLARED]),
        *(state[p] for p in _ABSTRACT_COUNTERS),
        None if pending is None else (pending_name, *(pending[i] for i in _PENDING_KEPT)),
        evidence,
        contents,
        accepted,
        completed,
    )


def abstract_parts(state: RunState, pending_id: Any) -> tuple[Any, ...]:
    """What ``abstract_state`` makes of a state's parts (evidence, contents, accepted
    and completed ids) and the pending plan's id: the same for every state that
    shares them, so ``coverage`` computes it once per distinct combination."""
    accepted, completed = set(state[P_ACCEPTED]), set(state[P_COMPLETED])
    evidence = evidence_of(state)
    ids = sorted(
        {*accepted, *completed, *(() if pending_id is None else (pending_id,))},
        key=lambda plan_id: (
            plan_id not in accepted,
            plan_id not in completed,
            plan_id != pending_id,
            str(plan_id),
        ),
    )
    id_names = {plan_id: f"id{number}" for number, plan_id in enumerate(ids, start=1)}
    versions: dict[str, list[int]] = {}
    for (key, version), _ in state[P_CONTENTS]:
        versions.setdefault(key, []).append(version)
    for key, version, _ in evidence:
        versions.setdefault(key, []).append(version)
    rank = {
        (key, version): number
        for key, seen in versions.items()
        for number, version in enumerate(sorted(set(seen)), start=1)
    }
    sources: dict[str, str] = {}
    contents = []
    for (key, version), (value, source) in sorted(state[P_CONTENTS], key=lambda item: item[0]):
        name = sources.setdefault(source, f"s{len(sources) + 1}")
        contents.append((key, rank[(key, version)], str(value), name))
    return (
        None if pending_id is None else id_names[pending_id],
        tuple((key, rank[(key, version)], value) for key, version, value in evidence),
        tuple(contents),
        tuple(sorted(id_names[x] for x in accepted)),
        tuple(sorted(id_names[x] for x in completed)),
    )


def abstract_numbering(
    states: Iterable[tuple[Hashable | None, Hashable, Stored]],
    decode: Callable[[Stored], RunState],
) -> tuple[dict[tuple[Any, ...], int], array[int]]:
    """Per abstract state, the first of ``states`` mapped to it; per state, that number.
    Each of ``states`` comes as it is stored (``decode`` makes a ``RunState`` of it)
    with two keys: one equal for states the abstraction cannot tell apart by what it
    reads (the stored state without the positions of ``IGNORED_FIELD`` and
    ``IGNORED_PLAN_PART``), so a state is decoded and abstracted once per key, or None
    where no state shares it (nothing is kept for it); and one equal for states
    sharing their containers (the parts after the scalars), so ``abstract_parts`` runs
    once per distinct combination.
    Each abstract state is hashed once, here: a graph's millions of edges are then
    pairs of small ints (an abstract state is a nested tuple whose hash Python
    recomputes on every lookup)."""
    first_index: dict[tuple[Any, ...], int] = {}
    number_of = array("l")
    number_by_key: dict[Hashable, int] = {}
    parts_of: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for index, (key, containers, stored) in enumerate(states):
        number = None if key is None else number_by_key.get(key)
        if number is None:
            state = decode(stored)
            pending = state[P_PENDING]
            pending_id = None if pending is None else pending[0]
            shared = (pending_id, containers)
            parts = parts_of.get(shared)
            if parts is None:
                parts = parts_of[shared] = abstract_parts(state, pending_id)
            abstract = abstract_with(state, parts)
            number = first_index.setdefault(abstract, index)
            if key is not None:
                number_by_key[key] = number
        number_of.append(number)
    return first_index, number_of


@dataclass(frozen=True)
class AbstractGraph:
    """A reachable graph by abstract state: what a campaign's coverage is measured
    against (``verification.engines.explore.coverage``)."""

    #: per abstract state, the first state mapped to it; per state, that number
    first_index: dict[tuple[Any, ...], int]
    number_of: array[int]
    #: every distinct (abstract state, edge label fired) pair, as the state's number
    #: times ``width`` plus the label's number (ints: hashing millions of pairs of
    #: nested tuples would be most of the cost)
    pairs: set[int]
    width: int


def abstract_graph(
    numbering: tuple[dict[tuple[Any, ...], int], array[int]],
    fired: Iterable[tuple[int, int]],
    labels: int,
) -> AbstractGraph:
    """The graph whose states ``numbering`` numbers (``abstract_numbering``) and whose
    edges ``fired`` gives as (state, label number, of ``labels``), by abstract state."""
    first_index, number_of = numbering
    width = max(labels, 1)
    pairs = {number_of[source] * width + label for source, label in fired}
    return AbstractGraph(first_index, number_of, pairs, width)
