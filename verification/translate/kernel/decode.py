"""Kernel states read back as the controller's states: the layout run backwards.

Why: the kernel stores a state as a tuple of small ints, and what a report says about
the reachable set (which of its states and transitions a campaign visited, whether a
proof's counterexample state is one of them) is said in the controller's own terms,
``abstract_state`` of a ``RunState``. Decoding a state is a few dozen tuple reads, so
the kernel keeps no graph of controller states: it decodes the ones a report asks for.

What decoding needs is plain data read from the translation's layout when the kernel
is generated (``Decoding``), so a kernel taken from a cache decodes too: which
positions hold each field, the members of each enumeration by their number, and the
names (plan ids, sources) by the numbers the translation interned them as.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from replan.controller.fields import STATE_FIELDS
from replan.controller.records import EvidenceState, Plan
from replan.verification.translate.layout import Layout
from replan.verification.translate.symbolic import FIELD_KINDS, RECORD_FIELDS

State = tuple[int, ...]
_UNKNOWN = EvidenceState.UNKNOWN


@dataclass(frozen=True)
class Decoding:
    """How a kernel's state tuple reads as a ``RunState``: plain data (JSON-ready)."""

    #: per state field, in ``STATE_FIELDS`` order: (its layout kind, its base name)
    fields: tuple[tuple[str, str], ...]
    #: the state tuple's layout, one name per position
    variables: tuple[str, ...]
    keys: tuple[str, ...]
    #: per enumeration kind (mode, key, step, resource, evidence): its members' names
    #: by their number
    members: tuple[tuple[str, tuple[str, ...]], ...]
    #: (interned number, name) of every plan id and source the translation met
    names: tuple[tuple[int, str], ...]
    #: the interned plan id at each position of an id set
    ids: tuple[int, ...]
    #: the (key, version) at each position of the contents
    contents: tuple[tuple[str, int], ...]

    def field_readers(self) -> list[Callable[[State], Any]]:
        """Per state field, the function reading its part of the ``RunState``."""
        position = {name: index for index, name in enumerate(self.variables)}
        members = dict(self.members)
        names = dict(self.names)
        return [
            _field_reader(kind, base, position, self, members, names) for kind, base in self.fields
        ]

    def positions_of(self, fields: slice) -> list[int]:
        """The positions of the state tuple that the fields ``fields`` (a slice of the
        state fields, in order) are read from."""
        wanted = [base for _, base in self.fields[fields]]
        return [
            index
            for index, name in enumerate(self.variables)
            if any(name == base or name.startswith((f"{base}_", f"{base}[")) for base in wanted)
        ]

    def positions_except(self, field: int, plan_part: str) -> list[int]:
        """Every position of the state tuple but those the state field at ``field``
        is read from, and the part ``plan_part`` of every plan field."""
        left_out = set(self.positions_of(slice(field, field + 1)))
        left_out |= {
            index
            for index, name in enumerate(self.variables)
            for kind, base in self.fields
            if kind == "plan?" and name == f"{base}_{plan_part}"
        }
        return [index for index in range(len(self.variables)) if index not in left_out]


def decoding(layout: Layout) -> Decoding | None:
    """The layout's decoding; None when a name the translation interned is neither a
    string nor an int (it would not survive a cache) or a field has no layout here."""
    u = layout.u
    names: list[tuple[int, str]] = []
    for (_, value), number in u.interned().items():
        if not isinstance(value, str):
            return None
        names.append((number, value))
    fields = []
    for field in STATE_FIELDS:
        kind = FIELD_KINDS.get(field.attribute)
        if kind is None:
            return None
        fields.append((kind, layout.base_name(field.attribute)))
    by_number = {number: key for key, number in _key_numbers(layout).items()}
    contents = sorted(layout.content_positions.items(), key=lambda item: item[1])
    return Decoding(
        fields=tuple(fields),
        variables=tuple(layout.variables()),
        keys=layout.keys,
        members=tuple(
            (kind, tuple(domain.members))
            for kind, domain in (
                ("mode", u.mode),
                ("key", u.key),
                ("step", u.step),
                ("resource", u.resource),
                ("evidence", u.evidence),
            )
        ),
        names=tuple(sorted(names)),
        ids=tuple(layout.ids),
        contents=tuple((by_number[key], version) for (key, version), _ in contents),
    )


def _key_numbers(layout: Layout) -> dict[str, int]:
    return {key: layout.member(layout.u.key, key) for key in layout.keys}


def _field_reader(
    kind: str,
    base: str,
    position: dict[str, int],
    decoding: Decoding,
    members: dict[str, tuple[str, ...]],
    names: dict[int, str],
) -> Callable[[State], Any]:
    """One field's part of the ``RunState`` (as ``controller.fields`` exports it).

    Long: one branch per layout kind, each the inverse of ``Layout._declare``'s."""
    keys = decoding.keys
    if kind == "mode":
        at, modes = position[base], members["mode"]
        return lambda s: modes[s[at]]
    if kind == "int":
        at = position[base]
        return lambda s: s[at]
    if kind == "plan?":
        return _plan_reader(base, position, members, names)
    evidence = [EvidenceState(name) for name in members["evidence"]]
    if kind == "key->int":
        present = [position[f"{base}_present[{i}]"] for i in range(len(keys))]
        value = [position[f"{base}[{i}]"] for i in range(len(keys))]
        pairs = sorted(zip(keys, present, value, strict=True))
        return lambda s: tuple((k, s[v]) for k, p, v in pairs if s[p])
    if kind == "key->evidence":
        at = sorted((key, position[f"{base}[{i}]"]) for i, key in enumerate(keys))
        unknown = evidence.index(_UNKNOWN)
        return lambda s: tuple((k, evidence[s[p]]) for k, p in at if s[p] != unknown)
    if kind == "key set":
        at = sorted((key, position[f"{base}[{i}]"]) for i, key in enumerate(keys))
        return lambda s: tuple(k for k, p in at if s[p])
    if kind == "id set":
        ids = [(names[plan_id], position[f"{base}[{i}]"]) for i, plan_id in enumerate(decoding.ids)]
        return lambda s: tuple(sorted(name for name, p in ids if s[p]))
    if kind == "contents":
        slots = [
            (
                entry,
                position[f"{base}_present[{i}]"],
                position[f"{base}_state[{i}]"],
                position[f"{base}_source[{i}]"],
            )
            for i, entry in enumerate(decoding.contents)
        ]
        slots.sort()
        return lambda s: tuple(
            (entry, (evidence[s[state]], names[s[source]]))
            for entry, present, state, source in slots
            if s[present]
        )
    raise ValueError(f"kernel: no decoding for a {kind} field ({base})")


def _plan_reader(
    base: str, position: dict[str, int], members: dict[str, tuple[str, ...]], names: dict[int, str]
) -> Callable[[State], Plan | None]:
    """The pending plan: None when its presence bit is off, else a ``Plan`` of its
    parts (a name by its interned number, an enumeration's member by its number)."""
    present = position[f"{base}_present"]
    parts: list[tuple[str, int, Callable[[int], Any]]] = []
    for part, kind in RECORD_FIELDS["Plan"].items():
        at = position[f"{base}_{part}"]
        if kind == "int":
            parts.append((part, at, int))
        elif kind == "name":
            parts.append((part, at, names.__getitem__))
        else:
            parts.append((part, at, members[kind].__getitem__))

    def read(s: State) -> Plan | None:
        if not s[present]:
            return None
        return Plan(**{part: convert(s[at]) for part, at, convert in parts})

    return read
