"""Symmetry for the kernel: a state tuple stored under the canonical renaming of its
plan ids, the renaming the Python explorer applies (``engines/explore/symmetry.py``).

Why: with fresh ids the kernel's pool is one id more than a run can accept, and two
states that differ only in which of those ids their plans carry behave alike; without
the renaming the default report's plan domain has seven times the states. The ids a
state mentions are put in the order of what each is used for (in each id set of the
layout, in order, then pending), and given the pool's first positions in that order,
exactly as ``symmetry.renaming`` does for the explorer's states, so the two searches
store the same states.

Which positions of the tuple hold ids is read from the layout when the kernel is
generated and kept with it (``Renaming``: plain data, so a cached kernel has it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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

    def canonical(self) -> Callable[[State], State]:
        """The function giving a state's canonical form (the state itself when it is
        already canonical)."""
        ids, sets, present, pending = self.ids, self.sets, self.present, self.pending
        at = {number: i for i, number in enumerate(ids)}
        count = len(ids)

        def canonical(s: State) -> State:
            held = at.get(s[pending], -1) if s[present] else -1
            order = []
            for i in range(count):
                flags = tuple(s[positions[i]] for positions in sets)
                if i == held or any(flags):
                    order.append((tuple(not f for f in flags), i != held, i))
            order.sort()
            if all(key[2] == j for j, key in enumerate(order)):
                return s
            out = list(s)
            for positions in sets:
                for i in range(count):
                    out[positions[i]] = 0
            for j, (_, _, i) in enumerate(order):
                for positions in sets:
                    out[positions[j]] = s[positions[i]]
                if i == held:
                    out[pending] = ids[j]
            return tuple(out)

        return canonical


def renaming(layout: Layout, variables: list[str]) -> Renaming:
    """The id positions of ``layout``'s state tuple (``variables``: its names)."""
    position = {name: i for i, name in enumerate(variables)}
    sets = tuple(
        tuple(position[f"{layout.base_name(field)}[{i}]"] for i in range(len(layout.ids)))
        for field, kind in FIELD_KINDS.items()
        if kind == "id set"
    )
    (plan,) = (layout.base_name(field) for field, kind in FIELD_KINDS.items() if kind == "plan?")
    return Renaming(layout.ids, sets, position[f"{plan}_present"], position[f"{plan}_id"])
