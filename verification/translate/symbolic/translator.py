"""``Translator``: evaluates guard expressions and executes action bodies over
symbolic states (its expressions, statements and operations in sibling modules).
"""

from __future__ import annotations

import ast
import inspect
from collections import ChainMap
from collections.abc import Mapping
from typing import Any

import z3  # type: ignore[import-untyped]

from replan.verification.translate.symbolic.expressions import Expressions
from replan.verification.translate.symbolic.operations import Operations
from replan.verification.translate.symbolic.statements import Statements
from replan.verification.translate.symbolic.terms import all_of
from replan.verification.translate.symbolic.universe import (
    TranslationError,
    Universe,
    check_abstraction,
)
from replan.verification.translate.symbolic.values import Frame, Obligation, _where


class Translator(Statements, Expressions, Operations):
    """Evaluates guard expressions and executes action bodies over symbolic states."""

    def __init__(self, universe: Universe, model_class: type) -> None:
        check_abstraction(model_class)
        self.u = universe
        self.model_class = model_class
        self.obligations: list[Obligation] = []
        #: free boolean inputs: source text -> (term, parameter names it reads)
        self.inputs: dict[str, z3.BoolRef] = {}
        modules = []
        for cls in model_class.__mro__:
            module = inspect.getmodule(cls)
            if module is not None and module not in modules:
                modules.append(module)
        self.globals: Mapping[str, Any] = ChainMap(*(vars(m) for m in modules))

    # -- helpers ------------------------------------------------------------------------

    def fail(self, frame: Frame, node: ast.AST | str, problem: str) -> TranslationError:
        text = node if isinstance(node, str) else _where(node)
        return TranslationError(f"{frame.where}: {problem}: `{text}`")

    def require(self, frame: Frame, condition: z3.BoolRef, text: str) -> None:
        if z3.is_true(z3.simplify(condition)):
            return
        self.obligations.append(
            Obligation(z3.Implies(all_of(*frame.pc), condition), f"{frame.where}: {text}")
        )
