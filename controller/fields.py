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
from typing import Any

from replan.controller.records import EvidenceState, Plan, StopReason

UNKNOWN = EvidenceState.UNKNOWN
PASSED = EvidenceState.PASSED
_STOP_REASONS: dict[str, StopReason] = {reason.value: reason for reason in StopReason}


@dataclass(frozen=True)
class Field:
    """One field of the run."""

    attribute: str  # on the run, e.g. "_steps"
    kind: str
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
    Field("_declared_state", "mode", "idle", "declared_state"),
    Field("_evidence_revision", "counter", 1, "evidence_revision"),
    Field("_plan_revision", "counter", 0, "plan_revision"),
    Field("_steps", "counter", 0, "steps"),
    Field("_proposals", "counter", 0, "proposals"),
    Field("_no_progress", "counter", 0, "no_progress"),
    Field("_tokens", "counter", 0, "tokens"),
    Field("_cost", "counter", 0, "cost"),
    Field("_elapsed_ms", "counter", 0, "elapsed_ms"),
    Field("_pending", "plan?", None, "pending"),
    Field("_latest_version", "key->version", {}, "evidence"),
    Field("_known", "key->evidence", {}, "evidence"),
    Field("_contents", "contents", {}, "contents"),
    Field("_accepted", "id set", set(), "accepted"),
    Field("_completed", "id set", set(), "completed"),
    Field("_passed", "key set", set(), "", derive=_passed),
    Field("_trace", "trace", [], ""),
)

#: The fields a state is made of (the hashable value, the explorer's identity).
STATE_FIELDS: tuple[Field, ...] = tuple(f for f in FIELDS if f.component)
#: Fields that hold one value (rewritten by assignment), then the containers.
SCALAR_KINDS = frozenset({"mode", "counter", "plan?"})
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


def _export_part(kind: str, value: Any) -> Any:
    if kind in SCALAR_KINDS:
        return value
    if kind == "key->evidence":  # an Unknown entry is the same state as none
        return tuple(sorted((k, v) for k, v in value.items() if v != UNKNOWN))
    if kind in ("key->version", "contents"):
        return tuple(sorted(value.items()))
    if kind in ("id set", "key set"):
        return tuple(sorted(value))
    raise ValueError(f"no state form for a {kind} field")


def _import_part(kind: str, part: Any) -> Any:
    if kind == "mode":
        return _STOP_REASONS.get(part, part)
    if kind == "plan?":
        return None if part is None else Plan(*part)
    if kind == "counter":
        return part
    if kind == "key->evidence":
        return {key: EvidenceState(value) for key, value in part}
    if kind == "key->version":
        return dict(part)
    if kind == "contents":
        return {(k, v): (EvidenceState(state), source) for (k, v), (state, source) in part}
    if kind in ("id set", "key set"):
        return set(part)
    raise ValueError(f"no state form for a {kind} field")


def export_expression(field: Field, value: str) -> str:
    """``_export_part`` of ``field`` as Python source over the expression ``value``:
    what the generated controller's ``_export_state`` is written from."""
    kind = field.kind
    if kind in SCALAR_KINDS:
        return value
    if kind == "key->evidence":
        return f"tuple(sorted((k, v) for k, v in {value}.items() if v != UNKNOWN))"
    if kind in ("key->version", "contents"):
        return f"tuple(sorted({value}.items()))"
    if kind in ("id set", "key set"):
        return f"tuple(sorted({value}))"
    raise ValueError(f"no state form for a {kind} field")


def export_state(run: Any) -> RunState:
    """The run's state as one hashable value: each state field's part, in table order
    (containers as sorted tuples, so equal states give equal values)."""
    return tuple(_export_part(f.kind, getattr(run, f.attribute)) for f in STATE_FIELDS)


def import_state(run: Any, state: RunState) -> None:
    """Put ``run`` in ``state`` (a value of ``export_state``, strings standing for their
    enumeration members): fresh containers, derived fields rebuilt, the trace kept."""
    values = {
        f.attribute: _import_part(f.kind, part) for f, part in zip(STATE_FIELDS, state, strict=True)
    }
    for field in FIELDS:
        if field.derive is not None:
            values[field.attribute] = field.derive(values)
    for attribute, value in values.items():
        setattr(run, attribute, value)


# ---- the snapshot: the state as JSON, and back ------------------------------------------


def _jsonable_plan(plan: Plan | None) -> Any:
    if plan is None:
        return None
    return {name: str(v) if isinstance(v, StopReason) else v for name, v in plan._asdict().items()}


def snapshot(run: Any) -> dict[str, Any]:
    """The whole observable state (JSON-ready, canonical: equal for equal states),
    component by component."""
    document: dict[str, Any] = {}
    for component, attributes in COMPONENTS.items():
        values = [getattr(run, a) for a in attributes]
        kinds = [next(f.kind for f in STATE_FIELDS if f.attribute == a) for a in attributes]
        if component == "declared_state":
            declared = values[0]
            document["state"] = str(declared)
            document["stop_reason"] = str(declared) if declared in _STOP_REASONS else None
        elif kinds == ["key->version", "key->evidence"]:
            latest, known = values
            document[component] = {
                key: {"version": version, "state": str(known.get(key, UNKNOWN))}
                for key, version in sorted(latest.items())
            }
        else:
            document[component] = _json_part(kinds[0], values[0])
    return document


def _json_part(kind: str, value: Any) -> Any:
    if kind == "counter":
        return value
    if kind == "plan?":
        return _jsonable_plan(value)
    if kind == "contents":
        return [[k, v, str(state), source] for (k, v), (state, source) in sorted(value.items())]
    if kind in ("id set", "key set"):
        return sorted(value)
    raise ValueError(f"no JSON form for a {kind} field")


def state_of_snapshot(document: Mapping[str, Any]) -> RunState:
    """A snapshot as the state tuple ``export_state`` gives for the same run (the two
    hold the same components). A component the snapshot leaves out has its initial
    value, so an implementation that predates a field still reads."""
    parts = []
    for field in STATE_FIELDS:
        parts.append(_part_of_snapshot(field, document))
    return tuple(parts)


def _part_of_snapshot(field: Field, document: Mapping[str, Any]) -> Any:
    component = field.component
    if component == "declared_state":
        return str(document.get("state", field.initial))
    if component not in document:
        return _export_part(field.kind, field.fresh())
    value = document[component]
    if field.kind == "counter":
        return value
    if field.kind == "plan?":
        return None if value is None else Plan(*(value[name] for name in Plan._fields))
    if field.kind == "key->version":
        return tuple(sorted((key, entry["version"]) for key, entry in value.items()))
    if field.kind == "key->evidence":
        return tuple(
            sorted((key, str(e["state"])) for key, e in value.items() if e["state"] != UNKNOWN)
        )
    if field.kind == "contents":
        return tuple(sorted(((k, v), (str(state), source)) for k, v, state, source in value))
    if field.kind in ("id set", "key set"):
        return tuple(sorted(value))
    raise ValueError(f"no snapshot form for a {field.kind} field")
