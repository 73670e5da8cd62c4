"""Exhaustive breadth-first exploration of every reachable state of a controller.

Owns: enumerating, for a policy and finite input domains (``verification/core/domains.py``),
every state the *generated* controller (or any controller class passed in, such as a
mutant) can reach; checking every property of ``spec/properties.py`` on every
transition (and every state invariant on every new state); the report (distinct
states, transitions, depth, speed, which declared transitions and stop reasons are
reachable, dead-transition warnings, traps); the
shortest counterexample on a violation, as a ``verification.core.harness.Finding``; and the
explorer's side of campaign coverage (``coverage``).
Leaves to others: what an operation and a counterexample are (``harness``), the
properties (``spec.properties``), the controller's behaviour (the controller: every
transition here is a real call of the real generated dispatch).

How a transition is explored (the design; figures in ``evidence/explore-*.json``,
rendered on the docs' Performance page):

- A state's identity is ``Run._export_state()``: a tuple holding exactly what
  ``snapshot()`` holds, field for field (equal tuples <=> equal snapshots; a test
  converts every reachable state of a small domain both ways). Its four container
  parts (latest records, contents, accepted, completed) are interned as small ints,
  so a state key is 11 flat fields and hashes in a fraction of a microsecond.
- The controller is put in a state once per state; before each operation only the
  scalar fields are rewritten. Its dicts and sets are replaced by *tracked* copies
  (subclasses whose every mutating method records the field it changed), so after a
  call only a changed container is re-exported and restored, and an unchanged one
  keeps its interned part; a field an action *replaced* is caught by identity. Reads
  go to the C methods of dict and set, untouched. A test checks these successors
  against import / call / export on hundreds of states.
- Properties are evaluated on the runs themselves: ``before`` is the controller the
  source state was imported into (never called), ``after`` the live one the call
  changed. Within one source state, the transitions that share (operation name, fired
  transition, answer, successor) get one evaluation of each property whose
  parameters do not include the argument (a property is a pure function of what it
  takes, so a call that agrees on all of it gets the same verdict); a property that
  takes the argument is evaluated on every transition. State invariants are
  evaluated once per new state. So every property holds on every transition; the
  report counts transitions, distinct edges and evaluations.
- Symmetry (optional; on by default for fresh-id domains): plan ids are
  interchangeable (the contract only compares them for equality), so a state can be
  stored under a canonical renaming of its ids (ordered by accepted, completed,
  pending); ``--symmetry both`` reports both counts and whether the verdicts agree.
- ``workers`` > 1: the state space is sharded by state hash over forked processes,
  shared-nothing, level by level (``verification/engines/explore/sharded.py``); the parent merges
  the shards, so the states, transitions, verdicts and counterexample lengths are the
  serial search's (a state's first-found parent may differ).

What dominates (cProfile, the default report's observation domain): the properties,
about half: each transition evaluates the properties of its event that take the
argument (most of them: a property starts by asking whether its rule applies to this
argument), through one generated function per operation group; the explorer's own
loop (restore, key, hash, memo) a sixth; the generated controller's calls a tenth.
"""

from __future__ import annotations

import itertools
import json
import operator
import sys
import time
import zlib
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from replan.controller import Controller
from replan.controller.fields import SCALAR_KINDS, STATE_FIELDS, state_of_snapshot
from replan.controller.fields import position as field_position
from replan.controller.policy import DEFAULT_POLICY, Policy, policy_to_dict
from replan.controller.records import Plan, StopReason
from replan.controller.run import Run, RunState
from replan.spec.vocabulary import REGISTRY
from replan.verification.core.domains import (
    GROUPS,
    PARAMETER_TYPES,
    Domains,
    InputSpace,
    default_report_domains,
    id_order,
    observation_domains,
    plan_domains,
    product_domains,
    spin_domains,
)
from replan.verification.core.harness import CHECKER, Finding, Operation, apply, violated
from replan.verification.core.liveness import liveness, stop_reasons_entered
from replan.verification.runtime import interrupt

__all__ = [
    "Coverage",
    "Domains",
    "ExploreResult",
    "abstract_state",
    "coverage",
    "default_report_domains",
    "explore",
    "observation_domains",
    "plan_domains",
    "product_domains",
    "shortest_path_to_violation",
    "spin_domains",
    "state_of_snapshot",
]

_STOP_VALUES = frozenset(reason.value for reason in StopReason)
_STOP_MEMBERS: dict[Any, StopReason] = {reason.value: reason for reason in StopReason}
#: The state tuple's layout (``controller/fields.py``): its leading scalar fields (the
#: hot loop rewrites them by name), then its containers (interned as small ints).
_SCALAR_NAMES = tuple(f.attribute for f in STATE_FIELDS if f.kind in SCALAR_KINDS)
_SCALARS = len(_SCALAR_NAMES)
if any(f.kind not in SCALAR_KINDS for f in STATE_FIELDS[:_SCALARS]):
    raise RuntimeError("controller/fields.py: the scalar fields must come first in FIELDS")
P_DECLARED = field_position("_declared_state")
P_EVIDENCE_REVISION = field_position("_evidence_revision")
P_PLAN_REVISION = field_position("_plan_revision")
P_PENDING = field_position("_pending")
P_LATEST = field_position("_latest_version")
P_KNOWN = field_position("_known")
P_CONTENTS = field_position("_contents")
P_ACCEPTED = field_position("_accepted")
P_COMPLETED = field_position("_completed")


def _written_out(name: str, source: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<explorer: {name}>", "exec"), namespace)
    function: Callable[..., Any] = namespace[name]
    return function


#: ``set_scalars(live, values)`` and ``successor(live, parts)``, written out for the
#: layout: they run on every transition.
_SET_SCALARS = _written_out(
    "set_scalars",
    "def set_scalars(live, values):\n    "
    + ", ".join(f"live.{n}" for n in _SCALAR_NAMES)
    + ", = values\n",
)
_SUCCESSOR = _written_out(
    "successor",
    "def successor(live, parts):\n    return ("
    + "".join(f"live.{n}, " for n in _SCALAR_NAMES)
    + "*parts)\n",
)

# ---- tracked containers: which field did a call change? --------------------------------


class _TrackedDict(dict):  # type: ignore[type-arg]
    """A dict that records, in a shared set, that it was changed. Every mutating
    method of ``dict`` is overridden; reads are the inherited C methods."""

    __slots__ = ("_dirty", "_slot")
    _dirty: set[str]
    _slot: str

    def __setitem__(self, key: Any, value: Any) -> None:
        self._dirty.add(self._slot)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: Any) -> None:
        self._dirty.add(self._slot)
        dict.__delitem__(self, key)

    def __ior__(self, other: Any) -> Any:  # type: ignore[misc]
        self._dirty.add(self._slot)
        return dict.__ior__(self, other)

    def clear(self) -> None:
        self._dirty.add(self._slot)
        dict.clear(self)

    def pop(self, *args: Any) -> Any:
        self._dirty.add(self._slot)
        return dict.pop(self, *args)

    def popitem(self) -> Any:
        self._dirty.add(self._slot)
        return dict.popitem(self)

    def setdefault(self, *args: Any) -> Any:
        self._dirty.add(self._slot)
        return dict.setdefault(self, *args)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self._dirty.add(self._slot)
        dict.update(self, *args, **kwargs)


class _TrackedSet(set):  # type: ignore[type-arg]
    """A set that records, in a shared set, that it was changed (every mutating
    method of ``set`` is overridden; reads are the inherited C methods)."""

    __slots__ = ("_dirty", "_slot")
    _dirty: set[str]
    _slot: str

    def add(self, element: Any) -> None:
        self._dirty.add(self._slot)
        set.add(self, element)

    def discard(self, element: Any) -> None:
        self._dirty.add(self._slot)
        set.discard(self, element)

    def remove(self, element: Any) -> None:
        self._dirty.add(self._slot)
        set.remove(self, element)

    def pop(self) -> Any:
        self._dirty.add(self._slot)
        return set.pop(self)

    def clear(self) -> None:
        self._dirty.add(self._slot)
        set.clear(self)

    def update(self, *others: Any) -> None:
        self._dirty.add(self._slot)
        set.update(self, *others)

    def intersection_update(self, *others: Any) -> None:
        self._dirty.add(self._slot)
        set.intersection_update(self, *others)

    def difference_update(self, *others: Any) -> None:
        self._dirty.add(self._slot)
        set.difference_update(self, *others)

    def symmetric_difference_update(self, other: Any) -> None:
        self._dirty.add(self._slot)
        set.symmetric_difference_update(self, other)

    def __ior__(self, other: Any) -> Any:  # type: ignore[misc]
        self._dirty.add(self._slot)
        return set.__ior__(self, other)

    def __iand__(self, other: Any) -> Any:  # type: ignore[misc]
        self._dirty.add(self._slot)
        return set.__iand__(self, other)

    def __isub__(self, other: Any) -> Any:  # type: ignore[misc]
        self._dirty.add(self._slot)
        return set.__isub__(self, other)

    def __ixor__(self, other: Any) -> Any:  # type: ignore[misc]
        self._dirty.add(self._slot)
        return set.__ixor__(self, other)


def _tracked(value: Any, dirty: set[str], slot: str) -> Any:
    copy: _TrackedDict | _TrackedSet
    if isinstance(value, dict):
        copy = _TrackedDict(value)
    elif isinstance(value, set):
        copy = _TrackedSet(value)
    else:
        return value
    copy._dirty = dirty
    copy._slot = slot
    return copy


# ---- what the search found ------------------------------------------------------------


@dataclass
class _Violation:
    invariants: list[str]
    source: int  # index of the source state
    via: int  # operation index in the source state's order
    concrete_key: tuple[Any, ...]  # the successor actually reached (before canonical renaming)
    length: int  # operations in a shortest run ending with this transition


@dataclass
class ExploreResult:
    """Everything one exploration established (``to_json`` for tools, ``lines`` for
    people). ``findings`` hold the shortest counterexamples, replayable."""

    policy: Policy
    implementation: str
    domains: dict[str, Any]
    domain_lines: list[str]
    symmetry: bool
    states: int
    transitions: int
    depth: int
    seconds: float
    complete: bool
    stopped_by: str | None  # None | "max_states" | "max_depth" | "violation"
    distinct_edges: int
    invariant_evaluations: int
    labels: tuple[str, ...]
    fired: dict[str, int]  # label -> distinct edges on which it fired
    absorbed: dict[str, int]  # "<StopReason> absorbs <op>" -> distinct edges
    stop_reasons: dict[str, bool]
    disabled_by_policy: dict[str, str]  # label -> why the policy switches it off
    warnings: list[str]
    traps: int | None
    trap_example: list[Operation] | None
    findings: list[Finding]
    max_states: int | None = None
    max_depth: int | None = None
    graph: ExploredGraph | None = field(default=None, repr=False)
    #: Several domains explored one after the other: each run's own result.
    runs: list[ExploreResult] = field(default_factory=list)
    #: invariant -> {"transitions": violating transitions found, "shortest": length of
    #: the shortest run ending in one, "first": length of the first one found}
    violation_summary: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def states_per_second(self) -> float:
        return self.states / self.seconds if self.seconds > 0 else 0.0

    @property
    def transitions_per_second(self) -> float:
        return self.transitions / self.seconds if self.seconds > 0 else 0.0

    @property
    def unreachable(self) -> list[str]:
        return [
            label
            for label in self.labels
            if label not in self.fired and label not in self.disabled_by_policy
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "complete": self.complete,
            "stopped_by": self.stopped_by,
            "implementation": self.implementation,
            "policy": policy_to_dict(self.policy),
            "domains": self.domains,
            "symmetry": self.symmetry,
            "bounds": {"max_states": self.max_states, "max_depth": self.max_depth},
            "states": self.states,
            "transitions": self.transitions,
            "distinct_edges": self.distinct_edges,
            "invariant_evaluations": self.invariant_evaluations,
            "depth": self.depth,
            "seconds": round(self.seconds, 3),
            "states_per_second": round(self.states_per_second),
            "transitions_per_second": round(self.transitions_per_second),
            "transitions_declared": len(self.labels),
            "transitions_reached": sum(1 for label in self.labels if label in self.fired),
            "transition_coverage": {
                label: (
                    "reached"
                    if label in self.fired
                    else "disabled by the policy"
                    if label in self.disabled_by_policy
                    else "unreachable"
                )
                for label in self.labels
            },
            "fired_on_distinct_edges": dict(self.fired),
            "absorbed_in_final_states": dict(self.absorbed),
            "disabled_by_policy": dict(self.disabled_by_policy),
            "stop_reasons": dict(self.stop_reasons),
            "traps": self.traps,
            "trap_example": None
            if self.trap_example is None
            else [str(operation) for operation in self.trap_example],
            "warnings": list(self.warnings),
            "violations": [finding.to_json() for finding in self.findings],
            "violation_summary": self.violation_summary,
            "runs": [
                {
                    key: value
                    for key, value in run.to_json().items()
                    if key not in ("policy", "implementation", "runs", "violations")
                }
                for run in self.runs
            ],
        }

    def lines(self) -> list[str]:
        """The human report."""
        out = [
            f"replan explore: {self.implementation}, "
            f"{'symmetry-reduced ' if self.symmetry else ''}breadth-first",
            *self.domain_lines,
        ]
        for run in self.runs:
            out.append(
                f"run {run.domains.get('name')}: {run.states:,} states, "
                f"{run.transitions:,} transitions, depth {run.depth}, {run.seconds:.2f} s"
                + ("" if run.complete else f" (INCOMPLETE: {run.stopped_by})")
            )
        if self.runs:
            out.append("together:")
        out += [
            f"states     {self.states:,} distinct"
            + ("" if self.complete else f"  (INCOMPLETE: stopped by {self.stopped_by})"),
            f"transitions {self.transitions:,}  ({self.distinct_edges:,} distinct edges; "
            f"{self.invariant_evaluations:,} invariant evaluations cover all of them)",
            f"depth      {self.depth}",
            f"time       {self.seconds:.2f} s  ({self.states_per_second:,.0f} states/s, "
            f"{self.transitions_per_second:,.0f} transitions/s)",
        ]
        reached = sum(1 for label in self.labels if label in self.fired)
        out.append(f"declared transitions reached: {reached}/{len(self.labels)}")
        for label, why in self.disabled_by_policy.items():
            out.append(f"  disabled by the policy: {label}  ({why})")
        stops = ", ".join(
            f"{reason} {'yes' if hit else 'NO'}" for reason, hit in self.stop_reasons.items()
        )
        out.append(f"stop reasons reachable: {stops}")
        if self.traps is None:
            out.append("traps: not determined (the search is incomplete)")
        elif self.traps == 0:
            out.append("traps: none (a stopped state is reachable from every reachable state)")
        else:
            out.append(f"traps: {self.traps} states from which no stopped state is reachable")
        for warning in self.warnings:
            out.append(f"warning: {warning}")
        for finding in self.findings:
            out.append(
                f"VIOLATION {finding.property}: shortest counterexample, "
                f"{len(finding.operations)} operations:"
            )
            out.append(finding.program())
            if finding.message:
                out.append(f"     {finding.message}")
        if not self.findings:
            out.append(
                f"all {len(REGISTRY)} properties hold on every transition explored"
                + ("" if self.complete else " (incomplete search)")
            )
        return out


# ---- the explored graph, kept for campaign coverage --------------------------------------


class ExploredGraph:
    """The reachable states and distinct edges of one exploration, in the explorer's
    abstraction (a state is a ``Run._export_state()`` tuple, ids canonically renamed
    when the search was symmetry-reduced; an edge is (state, fired transition label,
    successor)). What ``coverage`` measures a campaign against."""

    def __init__(self, engine: _Engine) -> None:
        self._engine = engine
        self._index: dict[RunState, int] | None = None
        self._witness_sources: dict[int, int] | None = None
        self.edge_labels: list[str | None] = engine.edge_labels

    @property
    def states(self) -> int:
        return len(self._engine.keys)

    @property
    def edges(self) -> set[tuple[int, int, int]]:
        return self._engine.edges

    @property
    def symmetry(self) -> bool:
        return self._engine.symmetry

    def state(self, index: int) -> RunState:
        return self._engine.full(self._engine.keys[index])

    def depth(self, index: int) -> int:
        return self._engine.depth_of(index)

    def index_of(self, state: RunState) -> int | None:
        """The index of a state (an ``_export_state`` tuple), after the same canonical
        renaming the search used; None when the search never reached it."""
        if self._index is None:
            self._index = {self.state(i): i for i in range(self.states)}
        if self._engine.symmetry:
            state = self._engine.canonical_full(state)
        return self._index.get(_normal(state))

    def path(self, index: int) -> list[Operation]:
        """The operations of a shortest run from the initial state to ``index``."""
        return self._engine.operations_to(index)

    def witness(self, label: str) -> list[Operation] | None:
        """A run that fires the declared transition ``label`` last: a shortest path to
        the shallowest state an edge labelled ``label`` leaves, then an operation of
        the search's domain that fires it there (tried on a concrete run, so the ids
        are the run's own even in a symmetry-reduced search). None when the search
        never fired it."""
        if self._witness_sources is None:
            shallowest: dict[int, int] = {}  # states are numbered breadth first
            for source, number, _ in self._engine.edges:
                if source < shallowest.get(number, source + 1):
                    shallowest[number] = source
            self._witness_sources = shallowest
        if label not in self.edge_labels:
            return None
        source = self._witness_sources.get(self.edge_labels.index(label))
        engine = self._engine
        if source is None or label not in engine.labels:
            return None
        wanted = engine.labels.index(label)
        path = self.path(source)
        controller: Any = engine.implementation(engine.policy)
        for operation in path:
            apply(controller, operation)
        here = controller._export_state()
        for operation in engine.operations(engine.key(here)):
            trial: Any = engine.implementation(engine.policy)
            trial._import_state(here)
            apply(trial, operation)
            if trial._trace and trial._trace[-1][5] == wanted:
                return [*path, operation]
        return None


def _normal(state: RunState) -> RunState:
    """A state tuple with plain strings for enum members, so that tuples built from
    snapshots and from controllers compare and hash alike (they already do; this
    only makes the stored form JSON-friendly and independent of the enum classes)."""
    normal = list(state)
    normal[P_DECLARED] = str(state[P_DECLARED])
    pending = state[P_PENDING]
    normal[P_PENDING] = None if pending is None else Plan(*pending)
    normal[P_KNOWN] = tuple((k, str(s)) for k, s in state[P_KNOWN])
    normal[P_CONTENTS] = tuple(((k, v), (str(s), src)) for (k, v), (s, src) in state[P_CONTENTS])
    return tuple(normal)


# ---- the search engine --------------------------------------------------------------------


def stable_hash(value: Any) -> int:
    """A hash of a state's part that is the same in every process and run: CRC-32 of
    its canonical text (sets sorted, enum members by value)."""
    return zlib.crc32(repr(_canonical(value)).encode())


def _canonical(value: Any) -> Any:
    if isinstance(value, bool):  # True == 1: the hash follows equality, as the index does
        return int(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, frozenset | set):
        return sorted((_canonical(item) for item in value), key=repr)
    if isinstance(value, tuple | list):
        return tuple(_canonical(item) for item in value)
    if isinstance(value, dict):
        return sorted(((_canonical(k), _canonical(v)) for k, v in value.items()), key=repr)
    return value


def _split_properties() -> tuple[list[Any], list[Any], list[int]]:
    """Per operation group: the compiled check of the properties whose verdict
    cannot depend on the argument, that of the others, and how many those are."""
    static: list[Any] = []
    dynamic: list[Any] = []
    counts: list[int] = []
    for event in GROUPS:
        chosen = CHECKER.for_event(event)
        static.append(
            CHECKER.compiled_for(tuple(p for p in chosen if not p.reads_argument_on(event)), event)
        )
        reading = tuple(p for p in chosen if p.reads_argument_on(event))
        dynamic.append(CHECKER.compiled_for(reading, event))
        counts.append(len(reading))
    return static, dynamic, counts


def _container_slots(controller: Run) -> tuple[str, ...]:
    names: list[str] = []
    for klass in type(controller).__mro__:
        for name in getattr(klass, "__slots__", ()):
            if name not in names and isinstance(getattr(controller, name, None), dict | set):
                names.append(name)
    return tuple(sorted(names))


def _replacement_check(slots: tuple[str, ...]) -> Callable[[Run, tuple[Any, ...]], bool]:
    """A function telling whether any container field of a run is no longer the object
    loaded into it (an action may assign a new set instead of changing the old one).
    Written out for the field names: about 5 times faster than a generic loop, and it
    runs after every call."""
    names = [f"c{number}" for number in range(len(slots))]
    source = (
        f"def replaced(live, loaded):\n    {', '.join(names)}, = loaded\n    return "
        + " or ".join(f"live.{slot} is not {name}" for slot, name in zip(slots, names, strict=True))
        + "\n"
    )
    namespace: dict[str, Any] = {}
    exec(compile(source, "<explorer: replaced containers>", "exec"), namespace)
    check: Callable[[Run, tuple[Any, ...]], bool] = namespace["replaced"]
    return check


class _Engine:
    """One breadth-first search (see the module docstring for the design)."""

    def __init__(
        self,
        policy: Policy,
        space: InputSpace,
        implementation: type[Run],
        *,
        symmetry: bool,
        check_invariants: bool,
        keep_graph: bool,
        stop_at_first: bool,
        shard: tuple[int, int] = (0, 1),
    ) -> None:
        self.policy = policy
        self.space = space
        self.implementation = implementation
        self.symmetry = symmetry
        self.check_invariants = check_invariants
        self.keep_graph = keep_graph
        self.stop_at_first = stop_at_first
        # Any: the generated subclasses add observe/propose/execute/cancel to Run.
        self.live: Any = implementation(policy)
        self.proto: Any = implementation(policy)
        self.dirty: set[str] = set()
        self.slots = _container_slots(self.live)
        self.get_containers = operator.attrgetter(*self.slots)
        self.replaced = _replacement_check(self.slots)
        #: (this shard, shards): in a sharded search
        #: (``verification/engines/explore/sharded.py``) this engine owns the states
        #: ``owner`` maps to it; a state's global id is its local index * shards + shard.
        #: (0, 1): the whole search.
        self.shard, self.shards = shard
        #: per interned part, its stable hash (``stable_hash``: the same in every
        #: process, forked or not, and in every run)
        self.part_hashes: list[int] = []
        self.scalar_hashes: dict[tuple[Any, ...], int] = {}
        #: the breadth-first level new states get (kept by the sharded driver)
        self.level = 0
        self.levels = array("l")
        #: successors another shard owns, met since the last exchange: key -> its
        #: placeholder (a negative target), and per placeholder (shard, batch position)
        self.foreign: dict[tuple[Any, ...], int] = {}
        self.foreign_refs: list[tuple[int, int]] = []
        self.outgoing: list[list[tuple[RunState, int, int]]] = [[] for _ in range(self.shards)]
        self.unpatched_open: list[int] = []
        self.unpatched_edges: list[tuple[int, int, int]] = []
        #: In a shard: (source's serial number, operation index, call properties broken,
        #: concrete successor), and per local state the state invariants it breaks
        #: (charged to its first discoverer, which a later exchange may still change).
        self.raw_violations: list[tuple[int, int, list[str], tuple[Any, ...]]] = []
        self.state_failures: dict[int, list[str]] = {}
        #: In a shard: each local state's serial number, the index a serial search would
        #: give it (set by the driver once the state's level is complete).
        self.ranks = array("l")
        self.part_index: dict[Any, int] = {}
        self.parts: list[Any] = []
        self.keys: list[tuple[Any, ...]] = []
        self.index: dict[tuple[Any, ...], int] = {}
        self.parent = array("l")
        self.via = array("l")
        self.layer_starts: list[int] = [0]
        self.canon_cache: dict[tuple[Any, ...], tuple[dict[str, str] | None, int, int]] = {}
        #: per operation group: the properties of its event whose verdict cannot
        #: depend on the argument (evaluated once per distinct edge), and the rest
        #: (evaluated on every transition)
        self.split = _split_properties()
        self.labels = tuple(implementation.transitions)
        self.fired: dict[int, int] = {}
        self.absorbed: dict[str, int] = {}
        self.stop_seen: set[str] = set()
        self.transitions = 0
        self.distinct_edges = 0
        self.evaluations = 0
        self.violations: list[_Violation] = []
        self.first_violation: dict[str, _Violation] = {}
        #: invariant -> violating transitions found, shortest and first run lengths
        self.violation_summary: dict[str, dict[str, int]] = {}
        self.open_states: dict[int, list[int]] = {}  # no stopped successor: for traps
        self.edges: set[tuple[int, int, int]] = set()
        self.edge_labels: list[str | None] = []
        self.edge_label_index: dict[str | None, int] = {}
        initial = self.key(self.live._export_state())
        if symmetry:
            initial = self.canonical(initial)
        if self.owner(initial) == self.shard:
            self.add_state(initial, -1, -1)

    # -- states ---------------------------------------------------------------------------

    def intern(self, part: Any) -> int:
        number = self.part_index.get(part)
        if number is None:
            number = self.part_index[part] = len(self.parts)
            self.parts.append(part)
            if self.shards > 1:
                self.part_hashes.append(stable_hash(part))
        return number

    def owner(self, key: tuple[Any, ...]) -> int:
        """The shard that stores ``key``: a stable hash of its scalar fields and the
        contents of its parts (never their per-process numbers), modulo the shards.
        Stable, not Python's ``hash``: a Ray actor is not forked from this process, and
        string hashes differ from one process to the next."""
        if self.shards == 1:
            return 0
        hashes = self.part_hashes
        head = key[:_SCALARS]
        scalars = self.scalar_hashes.get(head)
        if scalars is None:  # a successor met again (after an exchange) is not rehashed
            scalars = self.scalar_hashes[head] = stable_hash(head)
        return zlib.crc32(repr((scalars, *(hashes[n] for n in key[_SCALARS:]))).encode()) % (
            self.shards
        )

    def key(self, state: RunState) -> tuple[Any, ...]:
        """The search's key of a state tuple (its parts interned). The declared state
        is the ``StopReason`` member when it is one: the hot loop writes it back into
        the controller as it is, and a plain string would not read as stopped."""
        intern = self.intern
        declared = _STOP_MEMBERS.get(state[P_DECLARED], state[P_DECLARED])
        scalars = list(state[:_SCALARS])
        scalars[P_DECLARED] = declared
        return (*scalars, *(intern(part) for part in state[_SCALARS:]))

    def full(self, key: tuple[Any, ...]) -> RunState:
        parts = self.parts
        return (*key[:_SCALARS], *(parts[number] for number in key[_SCALARS:]))

    def add_state(self, key: tuple[Any, ...], parent: int, via: int) -> int:
        number = len(self.keys)
        self.index[key] = number
        self.keys.append(key)
        self.parent.append(parent)
        self.via.append(via)
        self.levels.append(self.level)
        if key[P_DECLARED] in _STOP_VALUES:
            self.stop_seen.add(str(key[P_DECLARED]))
        return number

    def depth_of(self, index: int) -> int:
        depth = 0
        while self.parent[index] >= 0:
            index = self.parent[index]
            depth += 1
        return depth

    # -- symmetry -------------------------------------------------------------------------

    def _renamable(self, plan_id: Any) -> bool:
        if not isinstance(plan_id, str):
            return False
        pool = self.space.pool
        if pool is not None:
            return plan_id in pool
        return id_order(plan_id)[0] < (1 << 30)

    def _canon_parts(
        self, pending_id: Any, accepted_part: int, completed_part: int
    ) -> tuple[dict[str, str] | None, int, int]:
        accepted = self.parts[accepted_part]
        completed = self.parts[completed_part]
        mentioned = {*accepted, *completed, *(() if pending_id is None else (pending_id,))}
        movable = [plan_id for plan_id in mentioned if self._renamable(plan_id)]
        in_accepted, in_completed = set(accepted), set(completed)
        # Ids with the same signature are interchangeable, so any order among them
        # gives the same renamed state; id_order only makes the choice deterministic.
        movable.sort(
            key=lambda plan_id: (
                plan_id not in in_accepted,
                plan_id not in in_completed,
                plan_id != pending_id,
                id_order(plan_id),
            )
        )
        names = self.space.pool if self.space.pool is not None else None
        taken = {plan_id for plan_id in mentioned if plan_id not in movable}
        fresh = (f"p{n}" for n in itertools.count(1)) if names is None else iter(names)
        rename: dict[str, str] = {}
        for plan_id in movable:
            name = next(fresh)
            while name in taken:
                name = next(fresh)
            rename[plan_id] = name
        if all(old == new for old, new in rename.items()):
            return None, accepted_part, completed_part
        return (
            rename,
            self.intern(tuple(sorted(rename.get(x, x) for x in accepted))),
            self.intern(tuple(sorted(rename.get(x, x) for x in completed))),
        )

    def canonical(self, key: tuple[Any, ...]) -> tuple[Any, ...]:
        pending = key[P_PENDING]
        pending_id = None if pending is None else pending[0]
        cache_key = (pending_id, key[P_ACCEPTED], key[P_COMPLETED])
        hit = self.canon_cache.get(cache_key)
        if hit is None:
            hit = self.canon_cache[cache_key] = self._canon_parts(pending_id, *cache_key[1:])
        rename, accepted, completed = hit
        if rename is None:
            return key
        renamed = list(key)
        if pending is not None:
            renamed[P_PENDING] = Plan(rename.get(pending[0], pending[0]), *pending[1:])
        renamed[P_ACCEPTED], renamed[P_COMPLETED] = accepted, completed
        return tuple(renamed)

    def canonical_full(self, state: RunState) -> RunState:
        return self.full(self.canonical(self.key(state)))

    # -- operations -----------------------------------------------------------------------

    def mentioned(self, key: tuple[Any, ...]) -> tuple[Any, Any, Any]:
        """(accepted, completed, pending id): what the domain's ids depend on."""
        pending = key[P_PENDING]
        return (
            self.parts[key[P_ACCEPTED]],
            self.parts[key[P_COMPLETED]],
            None if pending is None else pending[0],
        )

    def operations(self, key: tuple[Any, ...]) -> list[Operation]:
        scratch = Run(self.policy)  # the derived arguments read the state
        scratch._import_state(self.full(key))
        return self.space.operations(
            key[P_PLAN_REVISION], key[P_EVIDENCE_REVISION], *self.mentioned(key), run=scratch
        )

    def operations_to(self, index: int) -> list[Operation]:
        """A shortest run to ``index`` (concrete: ids renamed back when symmetric)."""
        path = []
        while self.parent[index] >= 0:
            path.append((self.parent[index], self.via[index], index))
            index = self.parent[index]
        path.reverse()
        if not self.symmetry:
            return [self.operations(self.keys[source])[via] for source, via, _ in path]
        return self._concrete_path([(self.keys[target], None) for _, _, target in path])

    def _concrete_path(self, targets: list[tuple[tuple[Any, ...], str | None]]) -> list[Operation]:
        """Operations that drive a fresh controller through states whose canonical
        forms are ``targets`` (the last one, when an invariant is named, breaking it)."""
        from replan.verification.core.harness import observe_call

        controller = self.implementation(self.policy)
        chosen: list[Operation] = []
        for wanted, invariant in targets:
            here = self.key(controller._export_state())
            for operation in self.operations(here):
                trial: Any = self.implementation(self.policy)
                trial._import_state(controller._export_state())
                call = observe_call(self.policy, trial, operation)
                if self.canonical(self.key(trial._export_state())) != wanted:
                    continue
                if invariant is not None and invariant not in violated(call):
                    continue
                chosen.append(operation)
                controller = trial
                break
            else:  # pragma: no cover - the search and the replay disagree
                raise RuntimeError("could not rebuild a concrete run along the explored path")
        return chosen

    # -- expansion: the hot loop ------------------------------------------------------------

    def expand(self, source: int) -> None:
        key = self.keys[source]
        full = self.full(key)
        shards, shard = self.shards, self.shard
        # its serial number: the parent and the violation a serial search would record
        source_id = self.ranks[source] if shards > 1 else source
        proto = self.proto
        proto._import_state(full)
        live = self.live
        dirty = self.dirty
        slots = self.slots
        get_containers = self.get_containers
        for slot in slots:
            setattr(live, slot, _tracked(getattr(proto, slot), dirty, slot))
        dirty.clear()
        loaded = get_containers(live)
        live._trace = []
        scalars = key[:_SCALARS]
        parts = key[_SCALARS:]
        set_scalars = _SET_SCALARS
        make_successor = _SUCCESSOR
        space = self.space
        ids = space.ids(*self.mentioned(key))
        groups = [
            (
                group,
                getattr(live, event),
                PARAMETER_TYPES[event] is None,
                space.arguments(event, key[P_PLAN_REVISION], key[P_EVIDENCE_REVISION], ids, proto),
            )
            for group, event in enumerate(GROUPS)
        ]
        intern = self.intern
        index = self.index
        foreign = self.foreign
        symmetry = self.symmetry
        canonical = self.canonical
        check = self.check_invariants
        memo: dict[tuple[Any, ...], tuple[str, ...]] = {}
        checker = CHECKER
        static_properties, dynamic_properties, dynamic_count = self.split
        successors: set[int] = set()
        stopped_successor = key[P_DECLARED] in _STOP_VALUES
        position = -1
        replaced_check = self.replaced
        last_successor: tuple[Any, ...] | None = None
        last_target = -1
        last_clean = False
        last_result: Any = None
        last_fired: int | None = None
        last_group = -1
        for group, method, bare, arguments in groups:
            op = GROUPS[group]
            static_check = static_properties[group]
            dynamic = dynamic_properties[group]
            for argument in arguments:
                position += 1
                set_scalars(live, scalars)
                if dirty:
                    for slot in dirty:
                        setattr(live, slot, _tracked(getattr(proto, slot), dirty, slot))
                    dirty.clear()
                    loaded = get_containers(live)
                trace = live._trace
                mark = len(trace)
                try:
                    result = method() if bare else method(argument)
                except Exception as error:  # an error is an outcome, as in the harness
                    result = type(error)
                appended = trace[mark:]
                replaced = replaced_check(live, loaded)
                if dirty or replaced:
                    exported = live._export_state()
                    successor = (*exported[:_SCALARS], *map(intern, exported[_SCALARS:]))
                    if replaced:
                        dirty.update(slots)
                else:
                    successor = make_successor(live, parts)
                concrete = successor
                fired = appended[-1][5] if appended else None
                new_state = False
                if successor == last_successor:  # most calls repeat the previous outcome
                    target = last_target
                    if (
                        last_clean
                        and result is last_result
                        and fired == last_fired
                        and group == last_group
                    ):
                        continue  # the previous call's edge again, every property held
                else:
                    if symmetry:
                        successor = canonical(successor)
                    found = index.get(successor)
                    if found is not None:
                        target = found * shards + shard
                    elif shards > 1 and (placeholder := foreign.get(successor)) is not None:
                        target = placeholder  # sent to its shard already in this level
                    elif shards > 1 and (owner := self.owner(successor)) != shard:
                        target = self.send(successor, owner, source_id, position)
                    else:
                        target = self.add_state(successor, source_id, position) * shards + shard
                        new_state = True
                    last_successor, last_target = concrete, target
                edge = (
                    group,
                    fired,
                    result.__class__,
                    result,
                    concrete if symmetry else target,
                )
                verdict = memo.get(edge)
                last_result, last_fired, last_group = result, fired, group
                if verdict is None:
                    # A new distinct edge of this state: count it, and evaluate the
                    # properties whose verdict cannot depend on the argument once.
                    self.distinct_edges += 1
                    self._record_edge(source, op, fired, result, target, successors)
                    if concrete[P_DECLARED] in _STOP_VALUES:
                        stopped_successor = True
                    verdict = (
                        tuple(static_check(op, proto, argument, result, live, ())) if check else ()
                    )
                    memo[edge] = verdict
                last_clean = not verdict and not dynamic_count[group] and not new_state
                if not check or (last_clean and not verdict):
                    continue
                failures = list(verdict)
                if dynamic_count[group]:
                    self.evaluations += dynamic_count[group]
                    failures += dynamic(op, proto, argument, result, live, appended)
                if new_state:
                    if shards > 1:  # charged to the first discoverer when merged
                        broken = checker.state(live)
                        if broken:
                            self.state_failures[target // shards] = broken
                    else:
                        failures += checker.state(live)
                if failures:
                    self._violation(failures, source_id, position, concrete)
        self.transitions += position + 1
        if not stopped_successor:
            self.open_states[source] = ordered = sorted(successors)
            if ordered and ordered[0] < 0:  # a placeholder: patched after the exchange
                self.unpatched_open.append(source)

    def send(self, successor: tuple[Any, ...], owner: int, source_id: int, via: int) -> int:
        """A successor shard ``owner`` stores: queued for it once per exchange, and
        known here by a placeholder (a negative target) until its id comes back."""
        placeholder = self.foreign.get(successor)
        if placeholder is None:
            batch = self.outgoing[owner]
            placeholder = self.foreign[successor] = -2 - len(self.foreign_refs)
            self.foreign_refs.append((owner, len(batch)))
            batch.append((self.full(successor), source_id, via))
        return placeholder

    def _record_edge(
        self,
        source: int,
        op: str,
        fired: int | None,
        result: Any,
        target: int,
        successors: set[int],
    ) -> None:
        successors.add(target)
        label: str | None
        if fired is not None:
            self.fired[fired] = self.fired.get(fired, 0) + 1
            label = self.labels[fired]
        else:
            # No declared transition: a final state absorbed the call, or the input
            # check refused it; named as the trace's "transition" field names it.
            declared = self.keys[source][0]
            label = f"{declared} absorbs {op}" if declared in _STOP_VALUES else None
            shown = label or f"{op} refused by the input check"
            self.absorbed[shown] = self.absorbed.get(shown, 0) + 1
        if self.keep_graph:
            number = self.edge_label_index.get(label)
            if number is None:
                number = self.edge_label_index[label] = len(self.edge_labels)
                self.edge_labels.append(label)
            if target < 0:
                self.unpatched_edges.append((source, number, target))
            else:
                self.edges.add((source, number, target))

    def _violation(
        self, names: list[str], source: int, via: int, concrete: tuple[Any, ...]
    ) -> None:
        if self.shards > 1:  # a shard: the parent knows the depths
            self.raw_violations.append((source, via, names, concrete))
            return
        found = _Violation(
            sorted(set(names), key=list(REGISTRY).index),
            source,
            via,
            concrete,
            self.depth_of(source) + 1,
        )
        self.violations.append(found)
        for name in found.invariants:
            self.first_violation.setdefault(name, found)
            summary = self.violation_summary.setdefault(
                name, {"transitions": 0, "shortest": found.length, "first": found.length}
            )
            summary["transitions"] += 1
            summary["shortest"] = min(summary["shortest"], found.length)

    # -- traps ----------------------------------------------------------------------------

    def traps(self) -> list[int]:
        """States from which no stopped state is reachable. A state reaches one if it is
        stopped, has a stopped successor, or has a successor that reaches one; only
        states with neither of the first two kept their successor lists."""
        open_states = self.open_states
        reaches = {index: False for index in open_states}
        changed = True
        while changed:
            changed = False
            for index, successors in open_states.items():
                if reaches[index]:
                    continue
                if any(reaches.get(successor, True) for successor in successors):
                    reaches[index] = True
                    changed = True
        return sorted(index for index, ok in reaches.items() if not ok)


# ---- driving the search: one process, or a layer at a time over several ----------------


def _search_serial(
    engine: _Engine,
    max_states: int | None,
    max_depth: int | None,
    stop_at_first: bool,
    progress: Callable[[str], None] | None,
    progress_every: float,
    label: str,
) -> tuple[int, str | None]:
    """Expand states in index order (which is breadth-first order): (depth, why it
    stopped early or None)."""
    started = last_report = time.perf_counter()
    depth = 0
    layer_end = 1
    cursor = 0
    while cursor < len(engine.keys):
        if cursor == layer_end:
            depth += 1
            layer_end = len(engine.keys)
        if max_depth is not None and depth >= max_depth:
            return depth, "max_depth"
        if max_states is not None and len(engine.keys) >= max_states:
            return depth, "max_states"
        engine.expand(cursor)
        cursor += 1
        if engine.violations and stop_at_first:
            return depth, "violation"
        if cursor % 128 == 0:
            interrupt.check()
        if progress is not None and cursor % 128 == 0:
            now = time.perf_counter()
            if now - last_report >= progress_every:
                last_report = now
                _progress(progress, label, depth, engine, cursor, now - started)
    return depth, None


def _progress(
    progress: Callable[[str], None],
    label: str,
    depth: int,
    engine: _Engine,
    expanded: int,
    elapsed: float,
) -> None:
    states = len(engine.keys)
    rate = max(elapsed, 1e-9)
    progress(
        f"explore ({label}): depth {depth}, {states:,} states, frontier "
        f"{max(states - expanded, 0):,}, {engine.transitions:,} transitions; "
        f"{states / rate:,.0f} states/s, {engine.transitions / rate:,.0f} transitions/s, "
        f"{elapsed:.0f} s"
    )


# ---- the policy's switches: guards that read nothing but the policy ---------------------


def guard_analysis(
    implementation: type[Run], policy: Policy
) -> tuple[dict[str, str], dict[str, str]]:
    """(switched off by the policy, structurally dead): label -> why, for the
    implementation's own transitions (``verification.core.liveness``)."""
    found = liveness(implementation, policy, implementation.transitions)
    return found.switched_off, found.dead


# ---- the search ------------------------------------------------------------------------


def _implementation_name(implementation: type[Run]) -> str:
    module = implementation.__module__
    if implementation is Controller or module == "replan.controller._generated":
        return "replan.controller.Controller (generated)"
    return f"{module}:{implementation.__qualname__}"


def explore(
    policy: Policy | None = None,
    domains: Domains | Sequence[Domains] | None = None,
    implementation: type[Run] = Controller,
    *,
    symmetry: bool | None = None,
    max_states: int | None = None,
    max_depth: int | None = None,
    stop_at_first: bool = True,
    check_invariants: bool = True,
    keep_graph: bool = False,
    progress: Callable[[str], None] | None = None,
    progress_every: float = 2.0,
    implementation_name: str | None = None,
    workers: int = 1,
    ray: bool = False,
) -> ExploreResult:
    """Breadth-first search of every state ``implementation`` reaches under ``policy``
    with the operations of ``domains`` (default: ``default_report_domains(policy)``;
    several domains are explored one after the other and reported together, each in
    ``runs``), checking every invariant on every transition.

    Stops at the first violation when ``stop_at_first`` (its counterexample is then a
    shortest one: every state of smaller depth was fully expanded without one);
    otherwise it explores everything and keeps, per invariant, the first violation
    found, which is a shortest counterexample to that invariant. ``max_states`` caps
    the states stored per domain (the search stops cleanly, ``complete`` False);
    ``max_depth`` leaves states at that depth unexpanded (bounded search).
    ``symmetry`` stores states under a canonical renaming of their plan ids; None:
    for fresh-id domains (designed for it) but not for fixed pools (SPIN's count
    states unreduced). ``workers`` > 1 shards the search over that many forked
    processes, or with ``ray`` over that many Ray actors on the cluster this process
    joined (``verification.runtime.ray_cluster.connect``): the same states, transitions,
    verdicts and counterexamples as one process."""
    policy = DEFAULT_POLICY if policy is None else policy
    if domains is None:
        domains = default_report_domains(policy)
    name = implementation_name or _implementation_name(implementation)

    def one(each: Domains) -> ExploreResult:
        return _explore_one(
            policy,
            each,
            implementation,
            name,
            symmetry=symmetry,
            max_states=max_states,
            max_depth=max_depth,
            stop_at_first=stop_at_first,
            check_invariants=check_invariants,
            keep_graph=keep_graph,
            progress=progress,
            progress_every=progress_every,
            workers=workers,
            ray=ray,
        )

    if isinstance(domains, Domains):
        return one(domains)
    runs: list[ExploreResult] = []
    for each in domains:
        runs.append(one(each))
        if runs[-1].findings and stop_at_first:
            break
    return _combine(runs, implementation)


def _explore_one(
    policy: Policy,
    domains: Domains,
    implementation: type[Run],
    name: str,
    *,
    symmetry: bool | None,
    max_states: int | None,
    max_depth: int | None,
    stop_at_first: bool,
    check_invariants: bool,
    keep_graph: bool,
    progress: Callable[[str], None] | None,
    progress_every: float,
    workers: int,
    ray: bool = False,
) -> ExploreResult:
    space = InputSpace(policy, domains)
    if symmetry is None:
        symmetry = domains.ids is None
    started = time.perf_counter()
    engine = _Engine(
        policy,
        space,
        implementation,
        symmetry=symmetry,
        check_invariants=check_invariants,
        keep_graph=keep_graph,
        stop_at_first=stop_at_first,
    )
    label = domains.name
    # the initial state is checked like any other (and against the rules of a fresh run)
    initial_broken = (
        CHECKER.initial(engine.live, policy) + CHECKER.state(engine.live)
        if check_invariants
        else []
    )
    if initial_broken and stop_at_first:
        depth, stopped_by = 0, "violation"
    elif workers > 1 or ray:
        from replan.verification.engines.explore.sharded import search_sharded

        depth, stopped_by = search_sharded(
            engine,
            max(workers, 1),
            max_states,
            max_depth,
            stop_at_first,
            progress,
            progress_every,
            label,
            ray=ray,
        )
    else:
        depth, stopped_by = _search_serial(
            engine, max_states, max_depth, stop_at_first, progress, progress_every, label
        )
    seconds = time.perf_counter() - started
    complete = stopped_by is None
    labels = engine.labels
    fired = {labels[number]: count for number, count in sorted(engine.fired.items())}
    stop_reasons = {str(reason): str(reason) in engine.stop_seen for reason in StopReason}
    traps: int | None = None
    trap_example: list[Operation] | None = None
    if complete:
        trapped = engine.traps()
        traps = len(trapped)
        if trapped:
            trap_example = engine.operations_to(trapped[0])
    findings: list[Finding] = [
        Finding(
            broken,
            policy,
            [],
            [],
            message=f"the initial state breaks {broken}",
            source="explorer",
            extra={"implementation": name, "depth": 0},
        )
        for broken in initial_broken
    ]
    for broken in initial_broken:
        engine.violation_summary[broken] = {"transitions": 0, "shortest": 0, "first": 0}
    if initial_broken and stop_at_first:
        pass
    elif stopped_by == "violation":
        first = engine.violations[0]
        findings.append(_finding(engine, first, first.invariants[0], name))
    else:
        for invariant, violation in engine.first_violation.items():
            findings.append(_finding(engine, violation, invariant, name))
    result = ExploreResult(
        policy=policy,
        implementation=name,
        domains=space.describe(),
        domain_lines=space.lines(),
        symmetry=symmetry,
        states=len(engine.keys),
        transitions=engine.transitions,
        depth=depth,
        seconds=seconds,
        complete=complete,
        stopped_by=stopped_by,
        distinct_edges=engine.distinct_edges,
        invariant_evaluations=engine.evaluations,
        labels=labels,
        fired=fired,
        absorbed=dict(sorted(engine.absorbed.items())),
        stop_reasons=stop_reasons,
        disabled_by_policy={},
        warnings=[],
        traps=traps,
        trap_example=trap_example,
        findings=findings,
        max_states=max_states,
        max_depth=max_depth,
        graph=ExploredGraph(engine) if keep_graph else None,
        violation_summary=engine.violation_summary,
    )
    _judge(result, implementation)
    return result


def _judge(result: ExploreResult, implementation: type[Run]) -> None:
    """Fill in what the reachable set says about the declaration: transitions the
    policy switches off, and the warnings (unreachable transitions and stop reasons,
    traps), given only when the search was complete."""
    disabled, dead = guard_analysis(implementation, result.policy)
    result.disabled_by_policy = {
        label: why for label, why in disabled.items() if label not in result.fired
    }
    # a stop reason no transition that can fire enters is no target (BudgetExhausted
    # under a policy that sets no budget)
    from replan.verification.core.coverage import declared_model

    final = {state.id: str(state.value) for state in declared_model().states if state.final}
    entered = stop_reasons_entered(result.labels, {**disabled, **dead}, final)
    result.stop_reasons = {
        reason: hit for reason, hit in result.stop_reasons.items() if hit or reason in entered
    }
    warnings: list[str] = []
    if result.complete:
        for label in result.labels:
            if label in result.fired or label in result.disabled_by_policy:
                continue
            why = dead.get(label) or f"never fired in {result.states:,} reachable states"
            warnings.append(f"unreachable transition: {label} ({why})")
        for reason, reached in result.stop_reasons.items():
            if not reached:
                warnings.append(f"unreachable stop reason: {reason} (in these domains)")
        if result.traps:
            length = len(result.trap_example or [])
            warnings.append(
                f"{result.traps} trap states: no stopped state is reachable from them "
                f"(the shallowest after {length} operations)"
            )
    else:
        missing = [
            label
            for label in result.labels
            if label not in result.fired and label not in result.disabled_by_policy
        ]
        warnings.append(
            f"incomplete search (stopped by {result.stopped_by}): reachability and trap "
            f"verdicts cover only the explored part; {len(missing)} declared transitions "
            "not reached so far"
        )
    result.warnings = warnings


def _merge_summaries(runs: list[ExploreResult]) -> dict[str, dict[str, int]]:
    merged: dict[str, dict[str, int]] = {}
    for run in runs:
        for name, summary in run.violation_summary.items():
            if name not in merged:
                merged[name] = dict(summary)
            else:
                merged[name]["transitions"] += summary["transitions"]
                merged[name]["shortest"] = min(merged[name]["shortest"], summary["shortest"])
    return merged


def _combine(runs: list[ExploreResult], implementation: type[Run]) -> ExploreResult:
    """Several domains reported as one: totals, the union of what was reached, every
    run's findings, and each run kept in ``runs``."""
    first = runs[0]
    fired: dict[str, int] = {}
    absorbed: dict[str, int] = {}
    for run in runs:
        for label, count in run.fired.items():
            fired[label] = fired.get(label, 0) + count
        for label, count in run.absorbed.items():
            absorbed[label] = absorbed.get(label, 0) + count
    complete = all(run.complete for run in runs)
    stopped = [run.stopped_by for run in runs if run.stopped_by]
    traps = None if any(run.traps is None for run in runs) else sum(r.traps or 0 for r in runs)
    combined = ExploreResult(
        policy=first.policy,
        implementation=first.implementation,
        domains={"runs": [run.domains for run in runs]},
        domain_lines=[line for run in runs for line in run.domain_lines],
        symmetry=any(run.symmetry for run in runs),
        states=sum(run.states for run in runs),
        transitions=sum(run.transitions for run in runs),
        depth=max(run.depth for run in runs),
        seconds=sum(run.seconds for run in runs),
        complete=complete,
        stopped_by=stopped[0] if stopped else None,
        distinct_edges=sum(run.distinct_edges for run in runs),
        invariant_evaluations=sum(run.invariant_evaluations for run in runs),
        labels=first.labels,
        fired={label: fired[label] for label in first.labels if label in fired},
        absorbed=dict(sorted(absorbed.items())),
        stop_reasons={
            reason: any(run.stop_reasons[reason] for run in runs) for reason in first.stop_reasons
        },
        disabled_by_policy={},
        warnings=[],
        traps=traps,
        trap_example=next((run.trap_example for run in runs if run.trap_example), None),
        findings=[finding for run in runs for finding in run.findings],
        max_states=first.max_states,
        max_depth=first.max_depth,
        runs=runs,
        violation_summary=_merge_summaries(runs),
    )
    _judge(combined, implementation)
    return combined


def _finding(engine: _Engine, violation: _Violation, invariant: str, name: str) -> Finding:
    """The shortest counterexample ending with ``violation``, replayed to record the
    answers and to confirm it breaks ``invariant``."""
    from replan.verification.core.harness import apply, observe_call

    source_key = engine.keys[violation.source]
    if engine.symmetry:
        path_targets = []
        index = violation.source
        while engine.parent[index] >= 0:
            path_targets.append((engine.keys[index], None))
            index = engine.parent[index]
        path_targets.reverse()
        final = engine.canonical(violation.concrete_key)
        operations = engine._concrete_path([*path_targets, (final, invariant)])
    else:
        operations = [
            *engine.operations_to(violation.source),
            engine.operations(source_key)[violation.via],
        ]
    subject: Any = engine.implementation(engine.policy)
    results = [apply(subject, operation) for operation in operations[:-1]]
    last = observe_call(engine.policy, subject, operations[-1])
    results.append(last.result)
    broken = violated(last)
    if invariant not in broken:  # pragma: no cover - the search and the replay disagree
        raise RuntimeError(f"replaying the explored path does not break {invariant}")
    return Finding(
        property=invariant,
        policy=engine.policy,
        operations=operations,
        results=results,
        message=f"{operations[-1]} breaks {', '.join(broken)} "
        f"(shortest: {len(operations)} operations, breadth-first)",
        source="explorer",
        extra={"implementation": name, "depth": len(operations)},
    )


# ---- is a proof's counterexample state reachable? -----------------------------------

#: The fields of a described abstract state (``verification.engines.prove.engine.describe_state``)
#: that a reachable state is compared on (ids are z3's own numbers: not compared).
_DESCRIBED = ("state", "evidence_revision", "plan_revision", "steps", "proposals", "no_progress")


def _evidence(state: RunState) -> list[tuple[str, int, str]]:
    """(key, latest version, state) of every key with a record."""
    known = dict(state[P_KNOWN])
    return [(key, version, str(known.get(key, "Unknown"))) for key, version in state[P_LATEST]]


def _described(state: RunState) -> dict[str, Any]:
    pending = state[P_PENDING]
    counters = {name: state[field_position(f"_{name}")] for name in _DESCRIBED[1:]}
    return {
        "state": str(state[P_DECLARED]),
        **counters,
        "pending": None if pending is None else str(pending[3]),
        "evidence": {key: value for key, _, value in _evidence(state)},
    }


def unreachable_fields(
    results: Sequence[ExploreResult], description: Mapping[str, Any], keys: Sequence[str]
) -> list[str] | None:
    """Whether no state the explorer reached looks like ``description`` (a proof's
    counterexample state): None when one does (or the search was incomplete, or kept
    no graph), else the fields that show it, each ``field=value`` that no reachable
    state has (all of them when only the combination is new)."""
    wanted = {name: description.get(name) for name in _DESCRIBED}
    pending = description.get("pending")
    wanted["pending"] = None if pending is None else pending.get("step")
    evidence = description.get("evidence", {})
    wanted["evidence"] = {k: evidence.get(k, "Unknown") for k in keys}
    seen: dict[str, set[str]] = {name: set() for name in wanted}
    for result in results:
        if result.graph is None or not result.complete:
            return None
        for index in range(result.graph.states):
            found = _described(result.graph.state(index))
            found["evidence"] = {k: found["evidence"].get(k, "Unknown") for k in keys}
            if found == wanted:
                return None
            for name, value in found.items():
                seen[name].add(json.dumps(value, sort_keys=True))
    fields = [
        f"{name}={json.dumps(value)}"
        for name, value in wanted.items()
        if json.dumps(value, sort_keys=True) not in seen[name]
    ]
    return fields or [f"{name}={json.dumps(value)}" for name, value in wanted.items()]


# ---- the explorer's side of campaign coverage and shortest equivalent traces ------------


#: The counters coverage keeps as they are (every one but the plan revision).
_ABSTRACT_COUNTERS = tuple(
    index
    for index, f in enumerate(STATE_FIELDS)
    if f.kind == "counter" and f.attribute != "_plan_revision"
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
    return _abstract_with(state, _abstract_parts(state, None if pending is None else pending[0]))


def _abstract_with(state: RunState, parts: tuple[Any, ...]) -> tuple[Any, ...]:
    """``abstract_state`` from the state's scalars and its abstracted parts."""
    pending = state[P_PENDING]
    pending_name, evidence, contents, accepted, completed = parts
    return (
        str(state[P_DECLARED]),
        *(state[p] for p in _ABSTRACT_COUNTERS),
        None if pending is None else (pending_name, pending[2], pending[3], pending[4]),
        evidence,
        contents,
        accepted,
        completed,
    )


def _abstract_parts(state: RunState, pending_id: Any) -> tuple[Any, ...]:
    """What ``abstract_state`` makes of a state's parts (evidence, contents, accepted
    and completed ids) and the pending plan's id: the same for every state that
    shares them, so ``coverage`` computes it once per distinct combination."""
    accepted, completed = set(state[P_ACCEPTED]), set(state[P_COMPLETED])
    evidence = _evidence(state)
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


@dataclass
class Coverage:
    """A campaign's visited states and transitions measured against the explorer's
    reachable set, both mapped by ``abstract_state``; a transition is (abstract state,
    the trace's "transition" field)."""

    states_reached: int
    states_total: int
    transitions_reached: int
    transitions_total: int
    labels_reached: list[str]
    labels_total: list[str]
    outside_states: int
    outside_transitions: int
    unreached: dict[str, Any]
    domain: str = ""

    @staticmethod
    def _percent(part: int, whole: int) -> float:
        return 100.0 * part / whole if whole else 100.0

    def line(self) -> str:
        """``states x/N (p%), transitions y/M (q%)``."""
        return (
            f"states {self.states_reached:,}/{self.states_total:,} "
            f"({self._percent(self.states_reached, self.states_total):.1f}%), "
            f"transitions {self.transitions_reached:,}/{self.transitions_total:,} "
            f"({self._percent(self.transitions_reached, self.transitions_total):.1f}%)"
        )

    def lines(self) -> list[str]:
        where = f" ({self.domain})" if self.domain else ""
        out = [f"coverage vs explorer{where}: {self.line()}"]
        out.append(
            f"  declared transitions: {len(self.labels_reached)}/{len(self.labels_total)} "
            "of those the explorer reaches"
        )
        if self.outside_states or self.outside_transitions:
            out.append(
                f"  outside the explored domains: {self.outside_states:,} states, "
                f"{self.outside_transitions:,} transitions"
            )
        missing = self.unreached.get("declared_transitions", [])
        for label in missing:
            out.append(f"  never taken: {label}")
        by_state = self.unreached.get("states_by_declared_state", {})
        if by_state:
            out.append(
                "  unreached states by declared state: "
                + ", ".join(f"{name} {count:,}" for name, count in by_state.items())
            )
        for example in self.unreached.get("shallowest", []):
            out.append(f"  e.g. depth {example['depth']}: " + "; ".join(example["operations"]))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "summary": self.line(),
            "domain": self.domain,
            "abstraction": "abstract_state: ids, sources and version numbers renamed, "
            "plan revision dropped (verification/engines/explore/engine.py)",
            "states": {"reached": self.states_reached, "total": self.states_total},
            "transitions": {"reached": self.transitions_reached, "total": self.transitions_total},
            "declared_transitions": {
                "reached": len(self.labels_reached),
                "total": len(self.labels_total),
            },
            "outside_explored_domains": {
                "states": self.outside_states,
                "transitions": self.outside_transitions,
            },
            "unreached": self.unreached,
        }


StateLike = Mapping[str, Any] | RunState


def _as_state(value: StateLike) -> RunState:
    return state_of_snapshot(value) if isinstance(value, Mapping) else tuple(value)


def coverage(
    result: ExploreResult,
    visited_states: Iterable[StateLike],
    visited_transitions: Iterable[tuple[Any, ...]] = (),
    *,
    examples: int = 3,
    abstracted: bool = False,
) -> Coverage:
    """How much of ``result``'s reachable graph (explored with ``keep_graph=True``) a
    campaign visited, both mapped by ``abstract_state``. States are snapshots (dicts,
    or canonical JSON strings of them, or ``_export_state`` tuples); a transition is
    (state before the call, the trace record's "transition" field), the pair the
    campaign records, so the explorer's transitions are the distinct (abstract state,
    fired transition) pairs of its graph. ``abstracted``: the states given are
    ``abstract_state`` values already (a campaign's ``Visited`` records)."""
    graph = result.graph
    if graph is None:
        raise ValueError("coverage needs an exploration run with keep_graph=True")
    engine = graph._engine
    # Each abstract state is hashed once, here: the graph's millions of edges are then
    # pairs of small ints (an abstract state is a nested tuple whose hash Python
    # recomputes on every lookup).
    first_index: dict[tuple[Any, ...], int] = {}
    number_of = array("l")
    parts_of: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # by the key's interned parts
    for index, key in enumerate(engine.keys):
        state = engine.full(key)
        pending = state[P_PENDING]
        pending_id = None if pending is None else pending[0]
        shared = (pending_id, *key[_SCALARS:])
        parts = parts_of.get(shared)
        if parts is None:
            parts = parts_of[shared] = _abstract_parts(state, pending_id)
        number_of.append(first_index.setdefault(_abstract_with(state, parts), index))
    label_numbers = {label: number for number, label in enumerate(graph.edge_labels)}
    # a (state, label) pair as one int: hashing millions of them is most of the cost
    width = max(len(graph.edge_labels), 1)
    pairs = {number_of[source] * width + number for source, number, _ in graph.edges}

    def abstract(value: Any) -> tuple[Any, ...]:
        if abstracted:
            return tuple(value)
        if isinstance(value, str):
            value = json.loads(value)
        return abstract_state(_as_state(value))

    state_hits: set[int] = set()
    outside_states = 0
    for value in visited_states:
        found = first_index.get(abstract(value))
        if found is not None:
            state_hits.add(found)
        else:
            outside_states += 1
    pair_hits: set[int] = set()
    outside_transitions = 0
    for item in visited_transitions:
        number = label_numbers.get(item[1])
        found = None if number is None else first_index.get(abstract(item[0]))
        if found is None or found * width + number not in pairs:
            outside_transitions += 1
        else:
            pair_hits.add(found * width + number)
    reachable_labels = [label for label in result.labels if label in result.fired]
    taken = {graph.edge_labels[pair % width] for pair in pair_hits}
    labels_reached = [label for label in reachable_labels if label in taken]
    by_state: dict[str, int] = {}
    unreached_depths: dict[int, int] = {}
    shallowest: list[tuple[int, int]] = []
    for index in first_index.values():
        if index in state_hits:
            continue
        declared = str(engine.keys[index][0])
        by_state[declared] = by_state.get(declared, 0) + 1
        depth = engine.depth_of(index)
        unreached_depths[depth] = unreached_depths.get(depth, 0) + 1
        shallowest.append((depth, index))
    shallowest.sort()
    unreached = {
        "states": len(first_index) - len(state_hits),
        "transitions": len(pairs) - len(pair_hits),
        "declared_transitions": [label for label in reachable_labels if label not in taken],
        "states_by_declared_state": dict(sorted(by_state.items())),
        "states_by_depth": dict(sorted(unreached_depths.items())),
        "shallowest": [
            {"depth": depth, "operations": [str(op) for op in graph.path(index)]}
            for depth, index in shallowest[:examples]
        ],
    }
    return Coverage(
        states_reached=len(state_hits),
        states_total=len(first_index),
        transitions_reached=len(pair_hits),
        transitions_total=len(pairs),
        labels_reached=labels_reached,
        labels_total=reachable_labels,
        outside_states=outside_states,
        outside_transitions=outside_transitions,
        unreached=unreached,
        domain=str(result.domains.get("name", "")),
    )


def shortest_path_to_violation(
    policy: Policy | None,
    invariant_name: str,
    implementation: type[Run] = Controller,
    domains: Domains | Sequence[Domains] | None = None,
    *,
    max_states: int | None = 1_000_000,
) -> Finding | None:
    """The shortest run (in ``domains``, default the default report's) after which
    ``implementation`` breaks ``invariant_name``, or None when no explored transition
    breaks it. What a campaign offers beside its own (shrunk) failure: breadth-first
    search keeps the first violation of each invariant, and no counterexample to it in
    the same domain is shorter. With several domains, the shortest over all of them."""
    if invariant_name not in REGISTRY:
        raise ValueError(
            f"{invariant_name!r} is not a named property (known: {', '.join(REGISTRY)})"
        )
    policy = DEFAULT_POLICY if policy is None else policy
    if domains is None:
        domains = default_report_domains(policy)
    candidates: list[Finding] = []
    for each in [domains] if isinstance(domains, Domains) else list(domains):
        result = explore(policy, each, implementation, stop_at_first=False, max_states=max_states)
        candidates += [f for f in result.findings if f.property == invariant_name]
    return min(candidates, key=lambda finding: len(finding.operations), default=None)


@dataclass
class CampaignComparison:
    """A campaign measured against the explorer (``replan campaign
    --coverage-vs-explorer``): its coverage of each explored domain's reachable set
    and, when the campaign failed, the shortest run in those domains that breaks the
    same property, saved beside the campaign's own counterexample."""

    coverage: list[Coverage]
    explored: ExploreResult
    campaign_property: str | None = None
    campaign_length: int | None = None
    shortest: Finding | None = None
    saved: Path | None = None

    def lines(self) -> list[str]:
        out: list[str] = []
        for measured in self.coverage:
            out += measured.lines()
        if self.campaign_property is not None:
            if self.shortest is None:
                out.append(
                    f"shortest equivalent trace: none in the explored domains breaks "
                    f"{self.campaign_property}"
                )
            else:
                out.append(
                    f"shortest equivalent trace: {len(self.shortest.operations)} operations "
                    f"break {self.campaign_property} (the campaign's shrunk run: "
                    f"{self.campaign_length})" + (f"; saved {self.saved}" if self.saved else "")
                )
                out.append(self.shortest.program())
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "domains": {
                measured.domain or str(index): measured.to_json()
                for index, measured in enumerate(self.coverage)
            },
            "explored": {
                "states": self.explored.states,
                "transitions": self.explored.transitions,
                "complete": self.explored.complete,
                "seconds": round(self.explored.seconds, 3),
            },
            "shortest_equivalent": None
            if self.shortest is None
            else {
                "property": self.shortest.property,
                "operations": len(self.shortest.operations),
                "campaign_operations": self.campaign_length,
                "file": None if self.saved is None else str(self.saved),
            },
        }


def compare_campaign(
    campaign: Any,
    policy: Policy | None = None,
    implementation: type[Run] = Controller,
    out_dir: str | Path | None = None,
    *,
    domains: Domains | Sequence[Domains] | None = None,
    max_states: int | None = 1_000_000,
    progress: Callable[[str], None] | None = None,
) -> CampaignComparison:
    """Explore ``policy`` (default report domains unless given) on the campaign's
    implementation, keeping the graph and every invariant's shortest counterexample,
    then measure the campaign (``visited`` and
    ``finding`` of a ``verification.engines.campaign.machine.CampaignResult``) against it."""
    policy = DEFAULT_POLICY if policy is None else policy
    explored = explore(
        policy,
        domains,
        implementation,
        keep_graph=True,
        stop_at_first=False,
        max_states=max_states,
        progress=progress,
    )
    runs = explored.runs or [explored]
    measured = [
        coverage(
            run,
            campaign.visited.abstract_states(),
            campaign.visited.abstract_transitions(),
            abstracted=True,
        )
        for run in runs
    ]
    comparison = CampaignComparison(measured, explored)
    finding = getattr(campaign, "finding", None)
    if finding is not None:
        comparison.campaign_property = finding.property
        comparison.campaign_length = len(finding.operations)
        same = [f for f in explored.findings if f.property == finding.property]
        if same:
            comparison.shortest = min(same, key=lambda f: len(f.operations))
            if out_dir is not None:
                comparison.saved = comparison.shortest.save(
                    Path(out_dir) / f"explore-shortest-{finding.property}.json"
                )
    return comparison


def save_findings(result: ExploreResult, directory: str | Path) -> list[Path]:
    """Write each counterexample as ``explore-<invariant>.json`` (the shared format)."""
    target = Path(directory)
    return [
        finding.save(target / f"explore-{finding.property}.json") for finding in result.findings
    ]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
