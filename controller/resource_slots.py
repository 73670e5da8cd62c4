"""Open resources onto the policy's slots: the host gives each resource a run makes
known (a call's argument, a fact a tool result reports) the next free slot of
``Policy.open_resources``, in order of first appearance, and the controller sees only
slots. A fixed resource (``resources.allowed``) is its own slot. A resource that finds
no free slot gets none: the host refuses a call on it, and a fact about it is no
evidence."""

from __future__ import annotations

from replan.controller.policy import RESOURCE_SEPARATOR, Policy


class ResourceSlots:
    """One run's map from real resource ids to the policy's slots."""

    __slots__ = ("fixed", "free", "given")

    def __init__(self, policy: Policy) -> None:
        self.fixed = frozenset(r for r in policy.resources if r not in policy.open_resources)
        self.free = list(policy.open_resources)
        #: real id -> slot, in order of first appearance
        self.given: dict[str, str] = {}

    def slot(self, resource: str) -> str | None:
        """The slot of ``resource``, given now if it has none; None when none is free."""
        if resource in self.fixed:
            return resource
        found = self.given.get(resource)
        if found is None and self.free:
            found = self.given[resource] = self.free.pop(0)
        return found

    def real(self, slot: str) -> str:
        """The real id a slot was given to (the slot itself when it was not given)."""
        for resource, given in self.given.items():
            if given == slot:
                return resource
        return slot

    def key(self, key: str) -> str | None:
        """An observation's key with its resource mapped to a slot (``cancellable@9HBUV8``
        -> ``cancellable@s1``); a key of no resource is itself; None: no free slot."""
        name, separator, resource = key.partition(RESOURCE_SEPARATOR)
        if not separator:
            return key
        slot = self.slot(resource)
        return None if slot is None else f"{name}{RESOURCE_SEPARATOR}{slot}"


__all__ = ["ResourceSlots"]
