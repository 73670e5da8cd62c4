"""The run's fields, declared once: what a run remembers and how every layer reads it.

Owns ``FIELDS``: each field's attribute on the run, its kind, its initial value and
the observable component it belongs to (what ``snapshot()`` shows and what the
properties' ``unchanged`` compares). Everything else is derived from this table, by
kind: ``Run.__slots__`` and ``Run.__init__``, ``snapshot()`` and its inverse, the run's
state as one hashable value (``export_state``/``import_state``, the explorer's state
identity), the vocabulary's components, and the z3 encoding (``verification/
symbolic.py`` maps each kind to its abstraction). A new field is one line here plus
the bodies that use it.

Kinds (the z3 shape in brackets):

- ``mode``: the declared state, a state's value or a ``StopReason`` [an enumeration];
- ``counter``: an int [Int];
- ``plan?``: a ``Plan`` or None [an optional record];
- ``key->version``: evidence key -> latest version, absent reads 0 [a map over keys];
- ``key->evidence``: key -> ``EvidenceState``, absent reads Unknown, an Unknown entry
  is the same state as no entry [a map over keys];
- ``key set``: a set of evidence keys, derived from another field [booleans over keys];
- ``contents``: (key, version) -> (state, source) [an array];
- ``id set``: a set of plan ids [an array from ids to booleans];
- ``trace``: the list of trace entries: explains, never decides [not modelled].

Stdlib only: the generated controller and every checker import it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from replan.controller.records import EvidenceState, Plan, StopReason

UNKNOWN = EvidenceState.UNKNOWN
PASSED = EvidenceState.PASSED
_STOP_REASONS: dict[str, StopReason] = {reason.value: reason for reason in StopReason}


# ---- the kinds: how one kind of value is held, exported and written ---------------------


class Kind:
    """How a field of one kind is held in the state tuple (``export``/``restore``, and
    ``export_source``, the same as the generated controller's Python), and in a
    snapshot (``to_json``/``part_from_json``). ``abstraction`` names the shape z3 gives
    it (``verification/translate/symbolic.py``); None: not modelled."""

    name: ClassVar[str]
    abstraction: ClassVar[str | None]
    #: one value, rewritten by assignment (a container is changed in place)
    scalar: ClassVar[bool] = False

    def export(self, value: Any) -> Any:
        return value

    def export_source(self, value: str) -> str:
        return value

    def restore(self, part: Any) -> Any:
        return part

    def to_json(self, value: Any) -> Any:
        return value

    def part_from_json(self, value: Any) -> Any:
        return value

    def __repr__(self) -> str:
        return self.name


class Mode(Kind):
    """A state's value or a ``StopReason`` [an enumeration]."""

    name, abstraction, scalar = "mode", "mode", True

    def restore(self, part: Any) -> Any:
        return _STOP_REASONS.get(part, part)

    def to_json(self, value: Any) -> Any:
        return str(value)

    def part_from_json(self, value: Any) -> Any:
        return str(value)


class Counter(Kind):
    """An int [Int]."""

    name, abstraction, scalar = "counter", "int", True


class OptionalPlan(Kind):
    """A ``Plan`` or None [an optional record]."""

    name, abstraction, scalar = "plan?", "plan?", True

    def restore(self, part: Any) -> Any:
        return None if part is None else Plan(*part)

    def to_json(self, value: Any) -> Any:
        if value is None:
            return None
        return {n: str(v) if isinstance(v, StopReason) else v for n, v in value._asdict().items()}

    def part_from_json(self, value: Any) -> Any:
        return None if value is None else Plan(*(value[name] for name in Plan._fields))


class KeyToVersion(Kind):
    """Evidence key -> latest version, absent reads 0 [a map over keys]."""

    name, abstraction = "key->version", "key->int"

    def export(self, value: Any) -> Any:
        return tuple(sorted(value.items()))

    def export_source(self, value: str) -> str:
        return f"tuple(sorted({value}.items()))"

    def restore(self, part: Any) -> Any:
        return dict(part)

    def to_json(self, value: Any) -> Any:
        return dict(sorted(value.items()))

    def part_from_json(self, value: Any) -> Any:
        return tuple(sorted(value.items()))


class KeyToEvidence(Kind):
    """Key -> ``EvidenceState``, absent reads Unknown; an Unknown entry is the same
    state as no entry [a map over keys]."""

    name, abstraction = "key->evidence", "key->evidence"

    def export(self, value: Any) -> Any:
        return tuple(sorted((k, v) for k, v in value.items() if v != UNKNOWN))

    def export_source(self, value: str) -> str:
        return f"tuple(sorted((k, v) for k, v in {value}.items() if v != UNKNOWN))"

    def restore(self, part: Any) -> Any:
        return {key: EvidenceState(value) for key, value in part}

    def to_json(self, value: Any) -> Any:
        return {key: str(state) for key, state in sorted(value.items()) if state != UNKNOWN}

    def part_from_json(self, value: Any) -> Any:
        return tuple(sorted((k, str(s)) for k, s in value.items() if s != UNKNOWN))


class Contents(Kind):
    """(key, version) -> (state, source) [an array]."""

    name, abstraction = "contents", "contents"

    def export(self, value: Any) -> Any:
        return tuple(sorted(value.items()))

    def export_source(self, value: str) -> str:
        return f"tuple(sorted({value}.items()))"

    def restore(self, part: Any) -> Any:
        return {(k, v): (EvidenceState(state), source) for (k, v), (state, source) in part}

    def to_json(self, value: Any) -> Any:
        return [[k, v, str(state), source] for (k, v), (state, source) in sorted(value.items())]

    def part_from_json(self, value: Any) -> Any:
        return tuple(sorted(((k, v), (str(state), source)) for k, v, state, source in value))


class NameSet(Kind):
    """A set of names: plan ids [an array from ids to booleans], or evidence keys
    [booleans over keys]."""

    def __init__(self, name: str, abstraction: str) -> None:
        self.name, self.abstraction = name, abstraction  # type: ignore[misc]

    def export(self, value: Any) -> Any:
        return tuple(sorted(value))

    def export_source(self, value: str) -> str:
        return f"tuple(sorted({value}))"

    def restore(self, part: Any) -> Any:
        return set(part)

    def to_json(self, value: Any) -> Any:
        return sorted(value)

    def part_from_json(self, value: Any) -> Any:
        return tuple(sorted(value))


class Trace(Kind):
    """The list of trace entries: explains, never decides [not modelled]."""

    name, abstraction = "trace", None


MODE, COUNTER, OPTIONAL_PLAN = Mode(), Counter(), OptionalPlan()
KEY_TO_VERSION, KEY_TO_EVIDENCE, CONTENTS = KeyToVersion(), KeyToEvidence(), Contents()
ID_SET, KEY_SET, TRACE = NameSet("id set", "id set"), NameSet("key set", "key set"), Trace()


@dataclass(frozen=True)
class Field:
    """One field of the run."""

    attribute: str  # on the run, e.g. "_steps"
    kind: Kind
    initial: Any  # a container is copied for every run
    #: the observable component it belongs to ("" for a field derived from another
    #: one, or that explains without deciding)
    component: str
    #: a derived field: the function of the run's other fields that rebuilds it
    derive: Callable[[Mapping[str, Any]], Any] | None = None

    def fresh(self) -> Any:
        initial = self.initial
        return type(initial)(initial) if isinstance(initial, dict | set | list) else initial


def _passed(fields: Mapping[str, Any]) -> set[str]:
    return {key for key, state in fields["_known"].items() if state == PASSED}


#: Every field of one run, in the order the state tuple holds them.
FIELDS: tuple[Field, ...] = (
    Field("_declared_state", MODE, "idle", "declared_state"),
    Field("_evidence_revision", COUNTER, 1, "evidence_revision"),
    Field("_plan_revision", COUNTER, 0, "plan_revision"),
    Field("_steps", COUNTER, 0, "steps"),
    Field("_proposals", COUNTER, 0, "proposals"),
    Field("_no_progress", COUNTER, 0, "no_progress"),
    Field("_tokens", COUNTER, 0, "tokens"),
    Field("_cost", COUNTER, 0, "cost"),
    Field("_elapsed_ms", COUNTER, 0, "elapsed_ms"),
    Field("_pending", OPTIONAL_PLAN, None, "pending"),
    Field("_latest_version", KEY_TO_VERSION, {}, "evidence"),
    Field("_known", KEY_TO_EVIDENCE, {}, "evidence"),
    Field("_contents", CONTENTS, {}, "contents"),
    Field("_accepted", ID_SET, set(), "accepted"),
    Field("_completed", ID_SET, set(), "completed"),
    Field("_passed", KEY_SET, set(), "", derive=_passed),
    Field("_trace", TRACE, [], ""),
)

#: The field the declaration's state is kept in (its snapshot form is the top-level
#: ``state`` and ``stop_reason``).
DECLARED_STATE = "_declared_state"
#: The fields a state is made of (the hashable value, the explorer's identity).
STATE_FIELDS: tuple[Field, ...] = tuple(f for f in FIELDS if f.component)
#: The observable components and the fields each is stored in.
COMPONENTS: dict[str, tuple[str, ...]] = {}
for _field in STATE_FIELDS:
    COMPONENTS.setdefault(_field.component, ())
    COMPONENTS[_field.component] += (_field.attribute,)

#: What the run's attributes are (``Run.__slots__``, with ``policy``).
SLOTS: tuple[str, ...] = tuple(f.attribute for f in FIELDS)

RunState = tuple[Any, ...]


def position(attribute: str) -> int:
    """Where ``attribute`` sits in a state tuple."""
    for index, field in enumerate(STATE_FIELDS):
        if field.attribute == attribute:
            return index
    raise KeyError(f"{attribute} is not a state field (fields: {', '.join(SLOTS)})")


# ---- a field's value, as a hashable part of the state and back --------------------


def export_expression(field: Field, value: str) -> str:
    """``field``'s state part as Python source over the expression ``value``: what the
    generated controller's ``_export_state`` is written from."""
    return field.kind.export_source(value)


def export_state(run: Any) -> RunState:
    """The run's state as one hashable value: each state field's part, in table order
    (containers as sorted tuples, so equal states give equal values)."""
    return tuple(f.kind.export(getattr(run, f.attribute)) for f in STATE_FIELDS)


def import_state(run: Any, state: RunState) -> None:
    """Put ``run`` in ``state`` (a value of ``export_state``, strings standing for their
    enumeration members): fresh containers, derived fields rebuilt, the trace kept."""
    values = {
        f.attribute: f.kind.restore(part) for f, part in zip(STATE_FIELDS, state, strict=True)
    }
    for field in FIELDS:
        if field.derive is not None:
            values[field.attribute] = field.derive(values)
    for attribute, value in values.items():
        setattr(run, attribute, value)


# ---- the snapshot: the state as JSON, and back ------------------------------------------


def snapshot(run: Any) -> dict[str, Any]:
    """The whole observable state (JSON-ready, canonical: equal for equal states),
    component by component: one field's JSON form, or for a component of several
    fields an object of their forms by field (the evidence: each key's version and
    state)."""
    document: dict[str, Any] = {}
    for component, attributes in COMPONENTS.items():
        fields = [next(f for f in STATE_FIELDS if f.attribute == a) for a in attributes]
        if attributes == (DECLARED_STATE,):
            declared = getattr(run, DECLARED_STATE)
            document["state"] = str(declared)
            document["stop_reason"] = str(declared) if declared in _STOP_REASONS else None
        elif component == "evidence":
            latest, known = (getattr(run, f.attribute) for f in fields)
            document[component] = {
                key: {"version": version, "state": str(known.get(key, UNKNOWN))}
                for key, version in sorted(latest.items())
            }
        else:
            document[component] = fields[0].kind.to_json(getattr(run, attributes[0]))
    return document


def state_of_snapshot(document: Mapping[str, Any]) -> RunState:
    """A snapshot as the state tuple ``export_state`` gives for the same run (the two
    hold the same components). A component the snapshot leaves out has its initial
    value, so an implementation that predates a field still reads."""
    return tuple(_part_of_snapshot(field, document) for field in STATE_FIELDS)


def _part_of_snapshot(field: Field, document: Mapping[str, Any]) -> Any:
    if field.attribute == DECLARED_STATE:
        return str(document.get("state", field.initial))
    component = field.component
    if component not in document:
        return field.kind.export(field.fresh())
    value = document[component]
    if component == "evidence":  # the versions and states of the keys, in one object
        if field.kind is KEY_TO_VERSION:
            value = {key: entry["version"] for key, entry in value.items()}
        else:
            value = {key: entry["state"] for key, entry in value.items()}
    return field.kind.part_from_json(value)
