"""The run's public surface: the contract's API, and not the declaration's bodies.

A ``Controller`` inherits its guards, actions and checks from the bodies' class
(``Run``), because the generated event methods run them. Called on their own they
would skip the input check and the guards that choose them:
``Controller().execute_step("never-proposed")`` would answer Executed and mark the id
completed with no proposal, no evidence and no guard. So the generated class hides
every body it names behind ``NotTheApi`` (``hide_bodies``):

- read on a run from outside, the name is absent (``AttributeError``, ``hasattr`` is
  False, ``dir()`` does not list it);
- read on a run from the bodies' own code (one body calling another, as plain Python
  writes it: ``self.id_completed(plan_id)``), it is the body, bound;
- read on the class it is the body's function, which the generated code calls as
  ``Run.name(self, ...)`` and the tools (the inliner, the z3 translation) read.

Which code may read it is decided by code identity, not by convention: the code
objects of the functions the bodies' classes define (nested ones included), never
the caller's name or module.
"""

from __future__ import annotations

import sys
from types import CodeType, FunctionType
from typing import Any

__all__ = ["NotTheApi", "contract_dir", "hide_bodies"]


def _codes(function: FunctionType) -> set[CodeType]:
    """The function's code and every code object nested in it (comprehensions,
    lambdas, inner functions run in frames of their own)."""
    found: set[CodeType] = set()
    pending = [function.__code__]
    while pending:
        code = pending.pop()
        found.add(code)
        pending.extend(c for c in code.co_consts if isinstance(c, CodeType))
    return found


class NotTheApi:
    """A body of the declaration, as an attribute of the generated ``Controller``."""

    __slots__ = ("_bodies", "name")

    def __init__(self) -> None:
        self.name = ""
        self._bodies: dict[type, tuple[Any, frozenset[CodeType]]] = {}

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def _resolve(self, owner: type) -> tuple[Any, frozenset[CodeType]]:
        """The body (the first definition after this descriptor in ``owner``'s MRO)
        and the code objects allowed to read it on a run."""
        cached = self._bodies.get(owner)
        if cached is not None:
            return cached
        body: Any = None
        codes: set[CodeType] = set()
        for cls in owner.__mro__:
            for value in vars(cls).values():
                if isinstance(value, FunctionType):
                    codes |= _codes(value)
                elif isinstance(value, (staticmethod, classmethod)) and isinstance(
                    value.__func__, FunctionType
                ):
                    codes |= _codes(value.__func__)
            value = vars(cls).get(self.name)
            if body is None and value is not None and not isinstance(value, NotTheApi):
                body = value
        if body is None:
            raise TypeError(f"{owner.__name__}.{self.name}: no body of that name to hide")
        resolved = (body, frozenset(codes))
        self._bodies[owner] = resolved
        return resolved

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        owner = type(instance) if owner is None else owner
        body, codes = self._resolve(owner)
        if instance is None:
            return body
        if sys._getframe(1).f_code in codes:
            return body.__get__(instance, owner)
        raise AttributeError(
            f"{owner.__name__}.{self.name} is a body of the declaration, not the "
            "contract's API: call the events (observe, propose, execute, approve, "
            "charge, cancel)"
        )


def contract_dir(run: object) -> list[str]:
    """``dir()`` of a run without the bodies its class hides."""
    hidden = {
        name
        for cls in type(run).__mro__
        for name, value in vars(cls).items()
        if isinstance(value, NotTheApi)
    }
    return sorted(set(object.__dir__(run)) - hidden)


def hide_bodies(cls: type, names: tuple[str, ...]) -> None:
    """Hide each named body on ``cls`` (the generated ``Controller``) and leave them
    out of its runs' ``dir()``."""
    for name in names:
        hidden = NotTheApi()
        hidden.__set_name__(cls, name)
        setattr(cls, name, hidden)
    cls.__dir__ = contract_dir  # type: ignore[assignment]
