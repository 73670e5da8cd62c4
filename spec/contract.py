"""The contract as a value: the named properties one verification run checks.

Owns ``Contract``: an ordered, immutable collection of ``Property`` objects, collected
from a module's tagged functions (``Contract.collect``), with the ``Checker`` that
evaluates them. Nothing is registered by importing a module: ``spec/properties.py``
ends with ``CONTRACT = Contract.collect(globals())``, a subject under verification
carries the contract it is checked against (``verification.core.subject``), and a
test that tightens one property passes ``CONTRACT.replacing(stricter)`` instead of
patching a global.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from functools import cached_property
from types import ModuleType
from typing import Any

from replan.spec.checker import Checker
from replan.spec.vocabulary import Property, property_of


class ContractError(ValueError):
    """A contract that names a property twice, or a name it does not have."""


class Contract:
    """Named properties, in declaration order."""

    def __init__(self, properties: Iterable[Property]) -> None:
        by_name: dict[str, Property] = {}
        for prop in properties:
            if prop.name in by_name:
                raise ContractError(f"property {prop.name!r} is declared twice")
            by_name[prop.name] = prop
        self._by_name = by_name

    @classmethod
    def collect(cls, namespace: Mapping[str, Any]) -> Contract:
        """Every property a decorator tagged among ``namespace``'s values (a module's
        ``globals()``), in the order they were defined."""
        return cls(prop for value in namespace.values() if (prop := property_of(value)) is not None)

    @classmethod
    def defined_in(cls, *modules: ModuleType) -> Contract:
        """Every property a decorator tagged among the functions ``modules`` define
        (not those they merely import), module by module, each in the order defined:
        a contract written over several modules lists its properties in one fixed
        order, however the modules import each other."""
        return cls(
            prop
            for module in modules
            for value in vars(module).values()
            if (prop := property_of(value)) is not None
            and getattr(value, "__module__", None) == module.__name__
        )

    def __iter__(self) -> Iterator[Property]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __getitem__(self, name: str) -> Property:
        try:
            return self._by_name[name]
        except KeyError:
            raise ContractError(
                f"{name!r} is not a named property (known: {', '.join(self._by_name)})"
            ) from None

    def get(self, name: str) -> Property | None:
        return self._by_name.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._by_name)

    def of_kind(self, *kinds: str) -> list[Property]:
        """The properties of these kinds (every one when none is named), in order."""
        return [p for p in self if not kinds or p.kind in kinds]

    def replacing(self, *properties: Property) -> Contract:
        """This contract with each of ``properties`` in place of the one of its name
        (a stricter or weaker version of a rule); a new name is added at the end."""
        given = {p.name: p for p in properties}
        kept = [given.pop(p.name, p) for p in self]
        return Contract([*kept, *given.values()])

    def without(self, *names: str) -> Contract:
        """This contract without the named properties (each must be one of its)."""
        for name in names:
            self[name]  # an unknown name is an error, not a silent no-op
        return Contract(p for p in self if p.name not in names)

    @cached_property
    def checker(self) -> Checker:
        """The ``Checker`` of exactly these properties (built once)."""
        return Checker(self)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without its checker (compiled functions); a worker builds its own."""
        return {"_by_name": self._by_name}

    def __repr__(self) -> str:
        return f"Contract({len(self)} properties)"
