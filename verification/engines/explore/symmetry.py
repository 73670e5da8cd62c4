"""Symmetry: plan ids are interchangeable names, so the explorer stores a state under
a canonical renaming of them.

Two states that differ only in which fresh ids their plans carry behave alike, so
the search keeps one of them: the ids a state mentions (accepted, completed,
pending) are renamed, in a fixed order of what each id is used for, to the first
names of the domain's pool (``p1``, ``p2``, ... when the ids are fresh). Ids outside
the pool are kept as they are.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Sequence
from typing import Any

from replan.verification.core.domains import id_order


def renamable(plan_id: Any, pool: Collection[str] | None) -> bool:
    """Whether the symmetry may rename ``plan_id``: an id of the pool, or, with fresh
    ids, one of the domain's generated ones."""
    if not isinstance(plan_id, str):
        return False
    if pool is not None:
        return plan_id in pool
    return id_order(plan_id)[0] < (1 << 30)


def renaming(
    accepted: Sequence[Any],
    completed: Sequence[Any],
    pending_id: Any,
    pool: Sequence[str] | None,
) -> dict[str, str] | None:
    """The canonical renaming of the ids a state mentions, or None when it renames
    nothing."""
    mentioned = {*accepted, *completed, *(() if pending_id is None else (pending_id,))}
    movable = [plan_id for plan_id in mentioned if renamable(plan_id, pool)]
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
    taken = {plan_id for plan_id in mentioned if plan_id not in movable}
    fresh = (f"p{n}" for n in itertools.count(1)) if pool is None else iter(pool)
    rename: dict[str, str] = {}
    for plan_id in movable:
        name = next(fresh)
        while name in taken:
            name = next(fresh)
        rename[plan_id] = name
    if all(old == new for old, new in rename.items()):
        return None
    return rename
