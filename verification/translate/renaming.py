"""Symmetry for the kernel: a state tuple stored under the canonical renaming of its
plan ids, the renaming the Python explorer applies (``engines/explore/symmetry.py``).

Why: with fresh ids the kernel's pool is one id more than a run can accept, and two
states that differ only in which of those ids their plans carry behave alike; without
the renaming the default report's plan domain has seven times the states. A fixed
pool's ids are as interchangeable (``--symmetry on``). The ids a state mentions that
may be renamed (the pool's, or every fresh one) are put in the order of what each is
used for (in each id set of the layout, in order, then pending) and given the
renamable ids' first names (p1 before p2) in that order, exactly as
``symmetry.renaming`` does for the explorer's states, so the two searches store the
same states. Any other id (a fixed pool's never-proposed one) keeps its place.

Which positions of the tuple hold ids is read from the layout when the kernel is
generated and kept with it (``Renaming``: plain data, so a cached kernel has it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter

from replan.verification.core.domains import id_order
from replan.verification.translate.layout import Layout
from replan.verification.translate.symbolic import FIELD_KINDS

State = tuple[int, ...]


@dataclass(frozen=True)
class Renaming:
    """Where a state tuple holds plan ids."""

    #: the interned number of each pool id, by its position in the id sets
    ids: tuple[int, ...]
    #: per id set of the layout, in the order of the fields: each pool id's position
    sets: tuple[tuple[int, ...], ...]
    #: the positions of the pending plan's presence bit and id
    present: int
    pending: int
    #: the indices (into ``ids``) of the ids a renaming may move, in the order of their
    #: names (p1 before p2 before p10): the new names are given in this order
    movable: tuple[int, ...]

    def canonical(self) -> Callable[[State], State]:
        """The function giving a state's canonical form (the state itself when it is
        already canonical). Many states share the part holding ids, so the renaming
        of each such part is computed once (the search calls this on every successor)."""
        positions = [position for positions in self.sets for position in positions]
        read = itemgetter(*positions, self.present, self.pending)
        pending = self.pending
        memo: dict[tuple[int, ...], tuple[tuple[int, ...], int] | None] = {}

        def canonical(s: State) -> State:
            part = read(s)
            try:
                found = memo[part]
            except KeyError:  # a part not seen before: few are
                found = memo[part] = self._renamed(part)
            if found is None:
                return s
            values, renamed_pending = found
            out = list(s)
            for position, value in zip(positions, values, strict=True):
                out[position] = value
            out[pending] = renamed_pending
            return tuple(out)

        return canonical

    def _renamed(self, part: tuple[int, ...]) -> tuple[tuple[int, ...], int] | None:
        """The id part of a state (each set's bits, the pending plan's presence and
        id) renamed: its new bits and pending id, or None when it is canonical."""
        count = len(self.ids)
        rows = [part[row * count : (row + 1) * count] for row in range(len(self.sets))]
        present, pending = part[-2], part[-1]
        held = self.ids.index(pending) if present and pending in self.ids else -1
        order = []
        for rank, i in enumerate(self.movable):
            flags = tuple(row[i] for row in rows)
            if i == held or any(flags):
                order.append((tuple(not flag for flag in flags), i != held, rank, i))
        order.sort()
        if all(key[3] == self.movable[j] for j, key in enumerate(order)):
            return None
        renamed_rows = [list(row) for row in rows]
        for renamed in renamed_rows:
            for i in self.movable:
                renamed[i] = 0
        renamed_pending = pending
        for j, (_, _, _, i) in enumerate(order):
            target = self.movable[j]
            for row, renamed in zip(rows, renamed_rows, strict=True):
                renamed[target] = row[i]
            if i == held:
                renamed_pending = self.ids[target]
        return tuple(value for row in renamed_rows for value in row), renamed_pending


def renaming(layout: Layout, variables: list[str], pool: Sequence[str] | None) -> Renaming:
    """The id positions of ``layout``'s state tuple (``variables``: its names), and
    which of its ids are renamable: ``pool``'s, or with fresh ids (``pool`` None)
    every generated one."""
    position = {name: i for i, name in enumerate(variables)}
    names = {
        number: value
        for (kind, value), number in layout.u.interned().items()
        if kind == "str" and isinstance(value, str)
    }
    renamable = [
        i
        for i, number in enumerate(layout.ids)
        if number in names
        and (names[number] in pool if pool is not None else id_order(names[number])[0] < (1 << 30))
    ]
    movable = tuple(sorted(renamable, key=lambda i: id_order(names[layout.ids[i]])))
    sets = tuple(
        tuple(position[f"{layout.base_name(field)}[{i}]"] for i in range(len(layout.ids)))
        for field, kind in FIELD_KINDS.items()
        if kind == "id set"
    )
    (plan,) = (layout.base_name(field) for field, kind in FIELD_KINDS.items() if kind == "plan?")
    return Renaming(layout.ids, sets, position[f"{plan}_present"], position[f"{plan}_id"], movable)
