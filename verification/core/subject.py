"""What a verification run checks: one controller, as every engine needs to see it.

Owns ``Subject``: the declaration (a ``MachineModel``, possibly transformed), the run
class whose guard and action bodies the generator copies and z3 reads, the generated
controller the explorer and the campaign drive, the policy loader's defaults, and
the reference model the campaign runs in lockstep. ``PROJECT`` is the project as it
is; ``verification/subjects/mutants.py`` builds broken ones the same way, so ``replan verify
--mutant NAME`` runs every engine on exactly what a user's broken source would give.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from replan.controller.policy import DEFAULTS, policy_from_dict
from replan.controller.run import Run
from replan.spec.model import MachineModel


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
        if self.name == PROJECT_NAME:
            return "replan.controller:Controller"
        from replan.verification.subjects.mutants import importable_name

        return f"replan.verification.subjects.mutants:{importable_name(self.name)}"


PROJECT_NAME = "project"
PROJECT = Subject(PROJECT_NAME)
