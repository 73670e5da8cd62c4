"""Evaluating a contract's properties on concrete calls and states.

Owns ``Checker``: the campaign, the explorer, ``replan replay`` and the pytest plugin
ask it which properties one call or one state breaks. A call's properties are
compiled into one function per event (``spec/check_compiler.py``), so the hot loop
of the explorer pays one call, not one per property. A ``Checker`` belongs to one
``Contract`` (``spec/contract.py``): ``contract.checker``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from replan.spec.check_compiler import compile_call_checks
from replan.spec.vocabulary import Property


class Checker:
    """Evaluates a contract's properties on concrete calls and states.

    ``call`` and ``state`` return the names of the properties that do not hold (a
    property that raises does not hold either: its message is kept in ``errors``).
    ``before`` and ``after`` are runs (``controller.run.Run`` objects, or anything with
    the same fields); nothing here changes them."""

    def __init__(self, properties: Iterable[Property]) -> None:
        chosen = list(properties)
        self.properties = chosen
        self._by_event: dict[str, list[Property]] = {}
        self.invariants = [p for p in chosen if p.kind in ("invariant", "auxiliary")]
        self.policy_properties = [p for p in chosen if p.kind == "policy"]
        self.initial_properties = [p for p in chosen if p.kind == "initial"]
        self.errors: dict[str, str] = {}
        self._checks: dict[tuple[str, ...], Callable[..., list[str]]] = {}
        self._by_event_check: dict[str, Callable[..., list[str]]] = {}

    def for_event(self, event: str) -> list[Property]:
        found = self._by_event.get(event)
        if found is None:
            found = self._by_event[event] = [
                p for p in self.properties if p.kind == "call" and p.applies_to(event)
            ]
        return found

    def call(
        self,
        event: str,
        before: Any,
        argument: Any,
        answer: Any,
        after: Any,
        appended: Any = (),
    ) -> list[str]:
        return self.compiled(event)(event, before, argument, answer, after, appended)

    def compiled(self, event: str) -> Callable[..., list[str]]:
        """``call`` for one event, as one function: (event, before, argument, answer,
        after, appended) -> the names of the properties that do not hold."""
        check = self._by_event_check.get(event)
        if check is None:
            check = self._by_event_check[event] = self.compiled_for(
                tuple(self.for_event(event)), event
            )
        return check

    def compiled_for(
        self, properties: tuple[Property, ...], event: str
    ) -> Callable[..., list[str]]:
        """``call`` restricted to ``properties`` (the explorer's split), for calls of
        ``event``, as one function with their bodies inlined
        (``spec/check_compiler.py``)."""
        names = (event, *(p.name for p in properties))
        check = self._checks.get(names)
        if check is None:
            check = self._checks[names] = functools.partial(
                compile_call_checks(properties, event), self.errors
            )
        return check

    def initial(self, run: Any, policy: Any) -> list[str]:
        """The initial-state properties a fresh ``run`` created with ``policy`` breaks."""
        return self._failing(self.initial_properties, run, policy)

    def policy(self, load: Callable[[Mapping[str, Any]], Any]) -> list[str]:
        """The policy properties that do not hold for the loader ``load``."""
        return self._failing(self.policy_properties, load)

    def state(self, run: Any) -> list[str]:
        """The state invariants (the contract's and the auxiliary ones) ``run`` breaks."""
        return self._failing(self.invariants, run)

    def _failing(self, properties: Iterable[Property], *arguments: Any) -> list[str]:
        failed = []
        for prop in properties:
            try:
                holds = prop.function(*arguments)
            except Exception as error:  # a property that cannot be evaluated fails
                self.errors[prop.name] = f"{type(error).__name__}: {error}"
                holds = False
            if not holds:
                failed.append(prop.name)
        return failed
