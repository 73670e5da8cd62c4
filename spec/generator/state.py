"""The state of one generation: the names the module binds and imports, the method
being written. The inlining, the methods and the writer build on it.
"""

from __future__ import annotations

import builtins
import inspect
import sys
from collections.abc import Iterable
from types import ModuleType

import replan.controller.records as _records_module
from replan.spec.generator.common import _RECORDS
from replan.spec.generator.nodes import _Scope
from replan.spec.model import MachineModel


class GeneratorState:
    """What one generation holds while it runs."""

    def __init__(self, model: MachineModel, model_class: type) -> None:
        self.model = model
        self.model_class = model_class
        self.lines: list[str] = []
        #: module -> names the inlined bodies use from it
        self.imports: dict[str, set[str]] = {}
        #: name -> the object it stands for in the generated module
        self.globals: dict[str, object] = {}
        #: the method being generated (None when only translating guards)
        self.scope: _Scope | None = None
        #: the record fields read from locals in the method being generated
        self.fields: dict[str, str] = {}
        #: every name a generated method binds (no module constant may be one)
        self.bound: set[str] = set()
        #: "Enumeration.MEMBER" -> the module constant the methods read instead
        self.constants: dict[str, str] = {}
        #: the functions being copied right now (a recursive one is then called)
        self.inlining: set[str] = set()
        #: the states whose chain for the event is being emitted once for all of them
        self.sharing: tuple[str, ...] = ()
        for name in _RECORDS:
            self._import(name, _records_module)
        self._import(model_class.__name__, sys.modules[model_class.__module__])

    # -- names ------------------------------------------------------------------------

    def _import(self, name: str, module: ModuleType) -> bool:
        """Make ``name`` (a global of ``module``) a global of the generated module,
        imported from where it is defined when that is known; False when the name
        already stands for something else there."""
        value = getattr(module, name, None)
        if name in self.globals:
            return self.globals[name] is value
        home = sys.modules.get(getattr(value, "__module__", None) or "")
        source = home if home is not None and getattr(home, name, None) is value else module
        self.globals[name] = value
        self.imports.setdefault(source.__name__, set()).add(name)
        return True

    def _globals_of(self, free: Iterable[str], module: ModuleType, what: str) -> str | None:
        """Import the free names of an inlined body; the reason it cannot be inlined,
        or None."""
        for name in sorted(free):
            if hasattr(module, name):
                if not self._import(name, module):
                    return f"{what} uses {name!r}, which names something else here"
            elif not hasattr(builtins, name):
                return f"{what} uses {name!r}, which is not a global"
            if self.scope is not None:
                if name in self.scope.taken:
                    return f"{what} uses the global {name!r}, a local of the generated method"
                self.scope.globals.add(name)
        return None

    # -- expressions ------------------------------------------------------------------

    def _parameters(self, name: str) -> list[str]:
        signature = inspect.signature(getattr(self.model_class, name))
        return [p for p in signature.parameters if p != "self"]

    def _returns_nothing(self, name: str) -> bool:
        annotation = inspect.signature(getattr(self.model_class, name)).return_annotation
        return annotation in (None, "None")
