"""What a verification run checks: one controller, as every engine needs to see it.

Owns ``Subject``: the declaration (a ``MachineModel``, possibly transformed), the run
class whose guard and action bodies the generator copies and z3 reads, the generated
controller the explorer and the campaign drive, the policy loader's defaults, the
reference model the campaign runs in lockstep, and the contract it is checked against
(``spec.properties.CONTRACT`` unless a test or a tool passes another one) with that
contract's ``Checker``. ``PROJECT`` is the project as it
is; ``verification/subjects/mutants.py`` builds broken ones the same way, so ``replan verify
--mutant NAME`` runs every engine on exactly what a user's broken source would give.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from replan.controller.policy import DEFAULTS, policy_from_dict
from replan.controller.run import Run
from replan.spec.checker import Checker
from replan.spec.contract import Contract
from replan.spec.model import MachineModel


def _contract() -> Contract:
    from replan.spec.properties import CONTRACT

    return CONTRACT


def _declaration() -> MachineModel:
    from replan.spec.declaration import Replanning
    from replan.spec.model import extract

    return extract(Replanning)


@dataclass(frozen=True)
class Subject:
    """One controller under verification."""

    name: str
    description: str = "the project as it is"
    build_model: Callable[[], MachineModel] = _declaration
    bodies: type[Run] | Callable[[], type[Run]] = Run
    defaults: Mapping[str, int | bool] = field(default_factory=lambda: dict(DEFAULTS))
    #: the generated controller when it is not what the generator makes of the model
    #: (a hand-edited or badly generated file); None: generate it
    build_controller: Callable[[], type[Run]] | None = None
    #: the lockstep reference: "bodies" (python-statemachine over the project's
    #: declaration with these bodies) or None (the properties alone judge the run:
    #: a changed declaration has no python-statemachine class to run)
    reference_kind: str | None = "bodies"
    #: where its controller class can be imported from ("module:Class", for a saved
    #: counterexample and Ray's workers); None: the project's ``Controller``
    importable: str | None = None
    #: the properties every engine checks on this subject
    contract: Contract = field(default_factory=_contract)
    #: the effect boundary verify's boundary check drives: "real" (the shipped guard,
    #: executor, journal and run log) or a seeded bug kind of
    #: ``verification/boundary/subjects.py``
    boundary: str = "real"

    @property
    def checker(self) -> Checker:
        return self.contract.checker

    def with_contract(self, contract: Contract) -> Subject:
        """The same controller, checked against another contract (a tightened rule)."""
        return replace(self, contract=contract)

    @cached_property
    def model(self) -> MachineModel:
        return self.build_model()

    @cached_property
    def model_class(self) -> type[Run]:
        bodies = self.bodies
        if isinstance(bodies, type):
            return bodies
        return bodies()

    @cached_property
    def controller(self) -> type[Run]:
        """The generated controller class (the committed one for the project)."""
        if self.build_controller is not None:
            return self.build_controller()
        if self.name == PROJECT_NAME:
            from replan.controller import Controller

            return Controller
        from replan.spec.generator import load_controller

        return load_controller(self.model, self.model_class, self.name)

    @cached_property
    def reference(self) -> Callable[[Any], Any] | None:
        if self.reference_kind is None:
            return None
        from replan.spec.reference import ReferenceController

        if self.model_class is Run:
            return ReferenceController
        return type(
            f"Reference{self.model_class.__name__}",
            (ReferenceController, self.model_class),
            {"__slots__": ()},
        )

    def load(self, document: Mapping[str, Any]) -> Any:
        """The policy loader with this subject's defaults."""
        return policy_from_dict(document, self.defaults)

    @property
    def implementation_path(self) -> str:
        """How a saved counterexample names the controller ("module:Class")."""
        return self.importable or DEFAULT_IMPLEMENTATION


#: The project's generated controller, named as "module:Class".
DEFAULT_IMPLEMENTATION = "replan.controller:Controller"
PROJECT_NAME = "project"
PROJECT = Subject(PROJECT_NAME)


class ImplementationError(ValueError):
    """An implementation named as "module:Class" that cannot be loaded."""


def resolve_attribute(path: str) -> Any:
    """The object named ``module:attribute``."""
    module_name, colon, attribute = path.partition(":")
    if not colon or not module_name or not attribute:
        raise ImplementationError(f"{path!r}: expected module:attribute")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ImplementationError(f"{path!r}: cannot import {module_name!r} ({error})") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ImplementationError(f"{path!r}: {module_name} has no {attribute!r}") from None


def resolve_implementation(path: str) -> type[Any]:
    """Load the class named ``module:Class`` (e.g. ``controller:Controller``,
    ``verification.subjects.mutants:step_limit_off_by_one``)."""
    module_name, colon, class_name = path.partition(":")
    if not colon or not module_name or not class_name:
        raise ImplementationError(f"{path!r}: expected module:Class, e.g. {DEFAULT_IMPLEMENTATION}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ImplementationError(f"{path!r}: cannot import {module_name!r} ({error})") from None
    try:
        found = getattr(module, class_name)
    except AttributeError:
        raise ImplementationError(f"{path!r}: {module_name} has no {class_name!r}") from None
    if not callable(found):
        raise ImplementationError(f"{path!r}: {class_name!r} is not a class")
    return found  # type: ignore[no-any-return]
