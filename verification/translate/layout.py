"""The run's fields as Promela variables, and z3 terms over them as expressions.

Owns the *layout*: one rule per field kind of ``controller/fields.py`` (so a new field
of a known kind needs no edit here), the initial values, which z3 constant of a fresh
state each variable stands for, and what the layout guarantees of every stored state
(an absent value is zero). Leaves lowering z3 terms to
``verification/translate/lower.py``.

- ``mode``, ``counter``: one ``byte`` or ``short`` variable (an int that leaves the
  ``short`` range fails the ``int_range`` assertion: a translation limit, never a
  wrong count);
- ``plan?``: a presence bit and one variable per ``Plan`` field, zero when absent;
- ``key->version``: per evidence key a presence bit and a ``short``;
- ``key->evidence``: per key the state, Unknown when absent (the field table: an
  Unknown entry is the same state as none);
- ``key set``: a bit per key; ``id set``: a bit per plan id of the domains;
- ``contents``: per (key, version) of the domains a presence bit, state and source.

Values that are absent are stored as zero, so equal states have equal vectors and
SPIN's "states stored" is the explorer's distinct-state count.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import z3  # type: ignore[import-untyped]

from replan.verification.translate.ir import (
    IR,
    binary,
    const,
    ite,
    var,
)
from replan.verification.translate.symbolic import (
    CONTENT,
    FIELD_KINDS,
    RECORD_FIELDS,
    ContentMap,
    Domain,
    IdSet,
    State,
    TranslationError,
    Universe,
    initial_state,
)

if TYPE_CHECKING:
    from replan.verification.translate.lower import Lowerer

#: Promela's reserved words a field name could collide with.
_RESERVED = frozenset(
    [
        "active",
        "assert",
        "atomic",
        "bit",
        "bool",
        "break",
        "byte",
        "chan",
        "d_step",
        "D_proctype",
        "do",
        "else",
        "empty",
        "enabled",
        "eval",
        "false",
        "fi",
        "full",
        "goto",
        "hidden",
        "if",
        "init",
        "inline",
        "int",
        "len",
        "local",
        "mtype",
        "nempty",
        "never",
        "nfull",
        "od",
        "of",
        "pc_value",
        "printf",
        "priority",
        "proctype",
        "provided",
        "run",
        "short",
        "skip",
        "timeout",
        "true",
        "typedef",
        "unless",
        "unsigned",
        "xr",
        "xs",
        "select",
        "trace",
        "notrace",
        "show",
    ]
)
#: The range of a ``short``: an int field outside it fails ``int_range``.
SHORT_RANGE = (-32768, 32767)


# ---- the layout ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    """One Promela variable of the state (``count`` > 1: an array)."""

    name: str
    type: str
    count: int = 1
    initial: tuple[int, ...] = (0,)


@dataclass
class ArrayBase:
    """A z3 array field, stored as Promela variables at the domains' positions."""

    kind: str  # "id set" | "contents"
    names: tuple[str, ...]  # (present,) or (present, state, source)
    positions: dict[tuple[int, ...], int]  # index values -> array position


class Layout:
    """The run's fields as Promela variables, for one universe and its domains."""

    def __init__(self, u: Universe, ids: Sequence[int], versions: int) -> None:
        self.u = u
        self.keys = tuple(u.policy.keys)
        self.ids = tuple(ids)
        self.versions = versions
        self.slots: list[Slot] = []
        self.ints: list[str] = []  # slots holding an int (checked against SHORT_RANGE)
        #: (presence variable or None, value variable, the value stored when absent)
        self.absent_values: list[tuple[str | None, str, int]] = []
        self.enum_index: dict[tuple[str, str], int] = {}
        for domain in (u.evidence, u.key, u.step, u.resource, u.mode, u.answer):
            for index, member in enumerate(domain.members.values()):
                self.enum_index[(member.sort().name(), member.decl().name())] = index
        self.unknown = self.member(u.evidence, "Unknown")
        self.content_positions: dict[tuple[int, ...], int] = {
            (self.member(u.key, key), version): number
            for number, (key, version) in enumerate(
                (k, v) for k in self.keys for v in range(1, versions + 1)
            )
        }
        self.id_positions: dict[tuple[int, ...], int] = {
            (plan_id,): number for number, plan_id in enumerate(self.ids)
        }
        initial = initial_state(u)
        self.mode_name = next(
            self.base_name(name) for name, kind in FIELD_KINDS.items() if kind == "mode"
        )
        for name, kind in FIELD_KINDS.items():
            self._declare(name, kind, initial[name])

    def encode(self, state: State) -> tuple[int, ...]:
        """The variables' values in a concrete state (``symbolic.abstract_run``), by
        the same rules that give the initial values: what a test compares a translated
        model's state with."""
        other = copy.copy(self)
        other.slots, other.ints, other.absent_values = [], [], []
        for name, kind in FIELD_KINDS.items():
            other._declare(name, kind, state[name])
        return tuple(value for slot in other.slots for value in slot.initial)

    def member(self, domain: Domain, value: str) -> int:
        member = domain.members[value]
        return self.enum_index[(member.sort().name(), member.decl().name())]

    @staticmethod
    def base_name(field: str) -> str:
        name = field.lstrip("_")
        return f"{name}_" if name in _RESERVED else name

    def _declare(self, field: str, kind: str, initial: Any) -> None:
        """Lay out one state field as Promela slots, with its initial values.

        Long: one branch per field kind, each laying out that kind's slots; the branches
        are the table of how every kind of field becomes Promela variables."""
        name = self.base_name(field)
        n_keys = len(self.keys)
        values = _Initial(self)
        if kind == "mode":
            self.slots.append(Slot(name, "byte", 1, (values.scalar(initial),)))
        elif kind == "int":
            self.slots.append(Slot(name, "short", 1, (values.scalar(initial),)))
            self.ints.append(name)
        elif kind == "plan?":
            present = values.scalar(initial.some)
            self.slots.append(Slot(f"{name}_present", "bit", 1, (present,)))
            for part, shape in RECORD_FIELDS["Plan"].items():
                value = values.scalar(initial.value.fields[part]) if present else 0
                self.absent_values.append((f"{name}_present", f"{name}_{part}", 0))
                typed = "short" if shape == "int" else "byte"
                self.slots.append(Slot(f"{name}_{part}", typed, 1, (value,)))
                if typed == "short":
                    self.ints.append(f"{name}_{part}")
        elif kind == "key->int":
            entries = [initial.entries[k] for k in self.keys]
            self.slots.append(
                Slot(
                    f"{name}_present", "bit", n_keys, tuple(values.scalar(e.some) for e in entries)
                )
            )
            self.slots.append(
                Slot(
                    name,
                    "short",
                    n_keys,
                    tuple(values.scalar(e.value) if values.scalar(e.some) else 0 for e in entries),
                )
            )
            self.ints.extend(f"{name}[{i}]" for i in range(n_keys))
            self.absent_values += [
                (f"{name}_present[{i}]", f"{name}[{i}]", 0) for i in range(n_keys)
            ]
        elif kind == "key->evidence":
            entries = [initial.entries[k] for k in self.keys]
            self.slots.append(
                Slot(
                    name,
                    "byte",
                    n_keys,
                    tuple(
                        values.scalar(e.value) if values.scalar(e.some) else self.unknown
                        for e in entries
                    ),
                )
            )
            self.absent_values += [(None, f"{name}[{i}]", self.unknown) for i in range(n_keys)]
        elif kind == "key set":
            self.slots.append(
                Slot(
                    name, "bit", n_keys, tuple(values.scalar(initial.members[k]) for k in self.keys)
                )
            )
        elif kind == "id set":
            self.slots.append(
                Slot(name, "bit", len(self.ids), values.positions(initial, self.id_positions))
            )
        elif kind == "contents":
            triples = values.contents(initial, self.content_positions)
            count = len(self.content_positions)
            for part, typed, column in (
                ("present", "bit", 0),
                ("state", "byte", 1),
                ("source", "byte", 2),
            ):
                self.slots.append(
                    Slot(f"{name}_{part}", typed, count, tuple(t[column] for t in triples))
                )
            for position in range(count):
                for part in ("state", "source"):
                    self.absent_values.append(
                        (f"{name}_present[{position}]", f"{name}_{part}[{position}]", 0)
                    )
        else:
            raise TranslationError(f"Promela: no layout for a {kind} field ({field})")

    # -- a fresh state's variables as IR ---------------------------------------------------

    def bind(self, state: State, prefix: str) -> tuple[dict[str, IR], dict[str, ArrayBase]]:
        """The z3 constants of a fresh state (``fresh_state``) and the Promela
        expression each stands for, with ``prefix`` before every variable name."""
        scalars: dict[str, IR] = {}
        arrays: dict[str, ArrayBase] = {}
        for field, kind in FIELD_KINDS.items():
            name = prefix + self.base_name(field)
            value = state[field]
            if kind in ("mode", "int"):
                scalars[str(value)] = var(name)
            elif kind == "plan?":
                scalars[str(value.some)] = var(f"{name}_present")
                for part, term in value.value.fields.items():
                    scalars[str(term)] = var(f"{name}_{part}")
            elif kind == "key->int":
                for i, key in enumerate(self.keys):
                    entry = value.entries[key]
                    scalars[str(entry.some)] = var(f"{name}_present[{i}]")
                    scalars[str(entry.value)] = var(f"{name}[{i}]")
            elif kind == "key->evidence":
                for i, key in enumerate(self.keys):
                    entry = value.entries[key]
                    scalars[str(entry.some)] = binary(
                        "!=", var(f"{name}[{i}]"), const(self.unknown)
                    )
                    scalars[str(entry.value)] = var(f"{name}[{i}]")
            elif kind == "key set":
                for i, key in enumerate(self.keys):
                    scalars[str(value.members[key])] = var(f"{name}[{i}]")
            elif kind == "id set":
                arrays[str(value.array)] = ArrayBase(kind, (name,), self.id_positions)
            elif kind == "contents":
                arrays[str(value.array)] = ArrayBase(
                    kind,
                    (f"{name}_present", f"{name}_state", f"{name}_source"),
                    self.content_positions,
                )
        return scalars, arrays

    def assignments(self, post: State, lower: Lowerer) -> list[tuple[str, IR]]:
        """(variable, value) for every variable of the state after a step whose
        post-state is ``post`` (absent values stored as zero)."""
        out: list[tuple[str, IR]] = []
        for field, kind in FIELD_KINDS.items():
            name = self.base_name(field)
            value = post[field]
            if kind in ("mode", "int"):
                out.append((name, lower.scalar(value)))
            elif kind == "plan?":
                present = lower.scalar(value.some)
                out.append((f"{name}_present", present))
                for part, term in value.value.fields.items():
                    out.append((f"{name}_{part}", ite(present, lower.scalar(term), const(0))))
            elif kind == "key->int":
                for i, key in enumerate(self.keys):
                    entry = value.entries[key]
                    present = lower.scalar(entry.some)
                    out.append((f"{name}_present[{i}]", present))
                    out.append((f"{name}[{i}]", ite(present, lower.scalar(entry.value), const(0))))
            elif kind == "key->evidence":
                for i, key in enumerate(self.keys):
                    entry = value.entries[key]
                    state = ite(
                        lower.scalar(entry.some), lower.scalar(entry.value), const(self.unknown)
                    )
                    out.append((f"{name}[{i}]", state))
            elif kind == "key set":
                for i, key in enumerate(self.keys):
                    out.append((f"{name}[{i}]", lower.scalar(value.members[key])))
            elif kind == "id set":
                for index, position in self.id_positions.items():
                    out.append(
                        (f"{name}[{position}]", lower.at(value.array, lower.id_terms(index)))
                    )
            elif kind == "contents":
                for index, position in self.content_positions.items():
                    triple = lower.content_at(value.array, lower.content_terms(index))
                    present = triple[0]
                    out.append((f"{name}_present[{position}]", present))
                    out.append((f"{name}_state[{position}]", ite(present, triple[1], const(0))))
                    out.append((f"{name}_source[{position}]", ite(present, triple[2], const(0))))
        return out

    def rewrites(self, prefix: str) -> dict[IR, IR]:
        """What the layout guarantees of every stored state: a value whose presence
        bit is off is zero, and an absent evidence state is Unknown, so "the value if
        present, else zero" is the value itself."""
        out: dict[IR, IR] = {}
        for present, value, absent in self.absent_values:
            stored = var(prefix + value)
            if present is None:
                condition = binary("!=", stored, const(absent))
            else:
                condition = var(prefix + present)
            out[ite(condition, stored, const(absent))] = stored
        return out

    def variables(self) -> list[str]:
        """Every state variable, array elements spelled out."""
        names = []
        for slot in self.slots:
            if slot.count == 1:
                names.append(slot.name)
            else:
                names.extend(f"{slot.name}[{i}]" for i in range(slot.count))
        return names


class _Initial:
    """Reads the initial state's z3 constants as numbers."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def scalar(self, term: Any) -> int:
        term = z3.simplify(term)
        if z3.is_true(term):
            return 1
        if z3.is_false(term):
            return 0
        if z3.is_int_value(term):
            value: int = term.as_long()
            return value
        key = (term.sort().name(), term.decl().name())
        if key in self.layout.enum_index:
            return self.layout.enum_index[key]
        raise TranslationError(f"Promela: the initial state has a non-constant value {term}")

    def positions(self, value: IdSet, positions: dict[tuple[int, ...], int]) -> tuple[int, ...]:
        out = [0] * len(positions)
        for (plan_id,), position in positions.items():
            out[position] = self.scalar(z3.Select(value.array, z3.IntVal(plan_id)))
        return tuple(out)

    def contents(
        self, value: ContentMap, positions: dict[tuple[int, ...], int]
    ) -> list[tuple[int, int, int]]:
        out = [(0, 0, 0)] * len(positions)
        members = list(self.layout.u.key.members.values())
        for (key, version), position in positions.items():
            entry = z3.simplify(z3.Select(value.array, members[key], z3.IntVal(version)))
            if z3.is_true(z3.simplify(CONTENT.is_some(entry))):
                out[position] = (
                    1,
                    self.scalar(CONTENT.content_state(entry)),
                    self.scalar(CONTENT.content_source(entry)),
                )
        return out
