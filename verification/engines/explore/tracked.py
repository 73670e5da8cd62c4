"""Tracked containers: which of a controller's container fields did a call change?

The explorer loads a state into one live controller and tries every call on it.
Rebuilding the successor's containers after every call would dominate the search, so
each container is a copy that marks its field dirty when mutated; a call that leaves
every container clean reuses the source state's interned parts. An action may also
assign a fresh container, which ``replacement_check`` notices.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from replan.controller.run import Run


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


def tracked(value: Any, dirty: set[str], slot: str) -> Any:
    """A tracked copy of a dict or set field that adds ``slot`` to ``dirty`` when
    changed; any other value is returned as it is (it cannot change in place)."""
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


def container_slots(controller: Run) -> tuple[str, ...]:
    """The slots of ``controller`` holding a dict or set: the fields to track."""
    names: list[str] = []
    for klass in type(controller).__mro__:
        for name in getattr(klass, "__slots__", ()):
            if name not in names and isinstance(getattr(controller, name, None), dict | set):
                names.append(name)
    return tuple(sorted(names))


def replacement_check(slots: tuple[str, ...]) -> Callable[[Run, tuple[Any, ...]], bool]:
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
