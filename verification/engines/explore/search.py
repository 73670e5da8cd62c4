"""The explorer's breadth-first search: one process's search over interned states.

Owns ``StateSearch`` (the design is in ``engines/explore/engine.py``'s docstring:
tracked containers, interned parts, properties evaluated once per distinct edge where
they cannot read the argument, symmetry); ``engines/explore/serial.py`` drives it in
one process, ``engines/explore/sharded.py`` the same objects level by level over
several. Leaves the report to ``engine.py``.
"""

from __future__ import annotations

import operator
import zlib
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from replan.controller.fields import STATE_FIELDS
from replan.controller.policy import Policy
from replan.controller.records import Plan, StopReason
from replan.controller.run import Run, RunState
from replan.spec.checker import Checker
from replan.spec.contract import Contract
from replan.verification.core.abstraction import (
    P_ACCEPTED,
    P_COMPLETED,
    P_CONTENTS,
    P_DECLARED,
    P_EVIDENCE_REVISION,
    P_KNOWN,
    P_PENDING,
    P_PLAN_REVISION,
    SCALAR_NAMES,
    SCALARS,
)
from replan.verification.core.domains import (
    GROUPS,
    PARAMETER_TYPES,
    InputSpace,
)
from replan.verification.core.harness import Operation, violated
from replan.verification.engines.explore.symmetry import renaming
from replan.verification.engines.explore.tracked import (
    container_slots,
    replacement_check,
    tracked,
)

_STOP_VALUES = frozenset(reason.value for reason in StopReason)
_STOP_MEMBERS: dict[Any, StopReason] = {reason.value: reason for reason in StopReason}
#: The state tuple's layout (``controller/fields.py``): its leading scalar fields (the
#: hot loop rewrites them by name), then its containers (interned as small ints).
_SCALAR_NAMES = SCALAR_NAMES
_SCALARS = SCALARS
if any(not f.kind.scalar for f in STATE_FIELDS[:_SCALARS]):
    raise RuntimeError("controller/fields.py: the scalar fields must come first in FIELDS")


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

# ---- what the search found ------------------------------------------------------------


@dataclass
class Violation:
    invariants: list[str]
    source: int  # index of the source state
    via: int  # operation index in the source state's order
    concrete_key: tuple[Any, ...]  # the successor actually reached (before canonical renaming)
    length: int  # operations in a shortest run ending with this transition


def normal_state(state: RunState) -> RunState:
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


def _split_properties(checker: Checker) -> tuple[list[Any], list[Any], list[int]]:
    """Per operation group: the compiled check of the properties whose verdict
    cannot depend on the argument, that of the others, and how many those are."""
    static: list[Any] = []
    dynamic: list[Any] = []
    counts: list[int] = []
    for event in GROUPS:
        chosen = checker.for_event(event)
        static.append(
            checker.compiled_for(tuple(p for p in chosen if not p.reads_argument_on(event)), event)
        )
        reading = tuple(p for p in chosen if p.reads_argument_on(event))
        dynamic.append(checker.compiled_for(reading, event))
        counts.append(len(reading))
    return static, dynamic, counts


class StateSearch:
    """One breadth-first search (see the module docstring for the design)."""

    def __init__(
        self,
        policy: Policy,
        space: InputSpace,
        implementation: type[Run],
        *,
        contract: Contract,
        symmetry: bool,
        check_invariants: bool,
        keep_graph: bool,
        stop_at_first: bool,
        shard: tuple[int, int] = (0, 1),
    ) -> None:
        """Declare every table the search keeps, then add the initial state.

        Long: one attribute per table the hot loop, the sharded driver and the report
        read; declaring them together is the one place to see the search's memory."""
        self.policy = policy
        self.space = space
        self.implementation = implementation
        self.contract = contract
        self.checker = contract.checker
        #: the "module:Class" another process imports ``implementation`` by (Ray)
        self.importable: str | None = None
        self.symmetry = symmetry
        self.check_invariants = check_invariants
        self.keep_graph = keep_graph
        self.stop_at_first = stop_at_first
        # Any: the generated subclasses add observe/propose/execute/cancel to Run.
        self.live: Any = implementation(policy)
        self.proto: Any = implementation(policy)
        self.dirty: set[str] = set()
        self.slots = container_slots(self.live)
        self.get_containers = operator.attrgetter(*self.slots)
        self.replaced = replacement_check(self.slots)
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
        self.split = _split_properties(self.checker)
        self.labels = tuple(implementation.transitions)
        self.fired: dict[int, int] = {}
        self.absorbed: dict[str, int] = {}
        self.stop_seen: set[str] = set()
        self.transitions = 0
        self.distinct_edges = 0
        self.evaluations = 0
        self.violations: list[Violation] = []
        self.first_violation: dict[str, Violation] = {}
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

    def _canon_parts(
        self, pending_id: Any, accepted_part: int, completed_part: int
    ) -> tuple[dict[str, str] | None, int, int]:
        accepted = self.parts[accepted_part]
        completed = self.parts[completed_part]
        rename = renaming(accepted, completed, pending_id, self.space.pool)
        if rename is None:
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
                if invariant is not None and invariant not in violated(call, self.checker):
                    continue
                chosen.append(operation)
                controller = trial
                break
            else:  # pragma: no cover - the search and the replay disagree
                raise RuntimeError("could not rebuild a concrete run along the explored path")
        return chosen

    # -- expansion: the hot loop ------------------------------------------------------------

    def _load(self, key: tuple[Any, ...]) -> tuple[Any, ...]:
        """Put the state ``key`` into the prototype and the live controller (its
        containers tracked) before its calls are tried; returns the live containers."""
        proto, live, dirty = self.proto, self.live, self.dirty
        proto._import_state(self.full(key))
        for slot in self.slots:
            setattr(live, slot, tracked(getattr(proto, slot), dirty, slot))
        dirty.clear()
        live._trace = []
        loaded: tuple[Any, ...] = self.get_containers(live)
        return loaded

    def _argument_groups(self, key: tuple[Any, ...]) -> list[tuple[int, Any, bool, Any]]:
        """Per operation group: its index, the live controller's bound method, whether
        it takes no argument, and the arguments the input space offers in ``key``."""
        space, live = self.space, self.live
        ids = space.ids(*self.mentioned(key))
        return [
            (
                group,
                getattr(live, event),
                PARAMETER_TYPES[event] is None,
                space.arguments(
                    event, key[P_PLAN_REVISION], key[P_EVIDENCE_REVISION], ids, self.proto
                ),
            )
            for group, event in enumerate(GROUPS)
        ]

    def _target(self, successor: tuple[Any, ...], source_id: int, via: int) -> tuple[int, bool]:
        """The global id of ``successor`` (a placeholder when another shard owns it and
        has not answered yet), and whether it is a state this search had not met."""
        shards, shard = self.shards, self.shard
        found = self.index.get(successor)
        if found is not None:
            return found * shards + shard, False
        if shards > 1 and (placeholder := self.foreign.get(successor)) is not None:
            return placeholder, False  # sent to its shard already in this level
        if shards > 1 and (owner := self.owner(successor)) != shard:
            return self.send(successor, owner, source_id, via), False
        return self.add_state(successor, source_id, via) * shards + shard, True

    def _new_state_failures(self, live: Any, target: int) -> list[str]:
        """The state invariants a newly met state breaks. A shard keeps them aside,
        charged to the state's first discoverer once the shards' levels are merged."""
        if self.shards == 1:
            broken: list[str] = self.checker.state(live)
            return broken
        broken = self.checker.state(live)
        if broken:
            self.state_failures[target // self.shards] = broken
        return []

    def _close(self, source: int, successors: set[int], stopped_successor: bool) -> None:
        """Keep the successors of a state without a stopped successor, for ``traps``."""
        if not stopped_successor:
            self.open_states[source] = ordered = sorted(successors)
            if ordered and ordered[0] < 0:  # a placeholder: patched after the exchange
                self.unpatched_open.append(source)

    def expand(self, source: int) -> None:
        """Try every call the input space offers in state ``source``; record each
        distinct edge, each new state and each property broken.

        Long: the per-transition loop runs once per call tried, millions of times in a
        large search; it binds everything to locals and stays one piece because a
        function call per transition costs measurably. What runs once per state or
        once per new successor lives in the helpers above."""
        key = self.keys[source]
        shards = self.shards
        # its serial number: the parent and the violation a serial search would record
        source_id = self.ranks[source] if shards > 1 else source
        loaded = self._load(key)
        proto, live, dirty = self.proto, self.live, self.dirty
        slots = self.slots
        get_containers = self.get_containers
        scalars = key[:_SCALARS]
        parts = key[_SCALARS:]
        set_scalars = _SET_SCALARS
        make_successor = _SUCCESSOR
        intern = self.intern
        symmetry = self.symmetry
        canonical = self.canonical
        check = self.check_invariants
        memo: dict[tuple[Any, ...], tuple[str, ...]] = {}
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
        for group, method, bare, arguments in self._argument_groups(key):
            op = GROUPS[group]
            static_check = static_properties[group]
            dynamic = dynamic_properties[group]
            for argument in arguments:
                position += 1
                set_scalars(live, scalars)
                if dirty:
                    for slot in dirty:
                        setattr(live, slot, tracked(getattr(proto, slot), dirty, slot))
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
                    target, new_state = self._target(successor, source_id, position)
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
                    failures += self._new_state_failures(live, target)
                if failures:
                    self._violation(failures, source_id, position, concrete)
        self.transitions += position + 1
        self._close(source, successors, stopped_successor)

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
        found = Violation(
            sorted(set(names), key=self.contract.names.index),
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
