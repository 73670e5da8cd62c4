"""The vocabulary's helpers (``spec/vocabulary.py``) in z3: ``raised``,
``unchanged``, ``with_entry``, ``with_member``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import z3  # type: ignore[import-untyped]

from replan.verification.translate.symbolic.terms import all_of, any_of, same_value
from replan.verification.translate.symbolic.universe import (
    _ERRORS,
    TranslationError,
)
from replan.verification.translate.symbolic.values import (
    Const,
    ContentMap,
    FMap,
    Frame,
    FSet,
    IdSet,
    StateRef,
)

if TYPE_CHECKING:
    from replan.verification.translate.symbolic.translator import Translator


# ---- the vocabulary's helpers (spec/vocabulary.py), in z3 ---------------------------------


def _helper_raised(t: Translator, frame: Frame, node: ast.AST, arguments: list[Any]) -> Any:
    answer = arguments[0]
    kind = arguments[1].value if len(arguments) > 1 else Exception
    if not isinstance(answer, z3.ExprRef) or answer.sort() != t.u.answer.sort:
        raise t.fail(frame, node, "raised() of something other than a call's answer")
    if kind in (Exception, BaseException):
        names = [*_ERRORS, "other"]
    elif isinstance(kind, type) and kind.__name__ in _ERRORS:
        names = [kind.__name__]
    else:
        raise t.fail(frame, node, f"raised() of {kind!r}: only the contract's errors are modelled")
    return any_of(*(answer == t.u.answer.members[f"raised {n}"] for n in names))


def _helper_unchanged(t: Translator, frame: Frame, node: ast.AST, arguments: list[Any]) -> Any:
    from replan.spec.vocabulary import COMPONENTS

    before, after, *names = arguments
    if not isinstance(before, StateRef) or not isinstance(after, StateRef):
        raise t.fail(frame, node, "unchanged() compares two runs")
    changing = set()
    for name in names:
        if not isinstance(name, Const) or name.value not in COMPONENTS:
            raise t.fail(frame, node, f"{name!r} is not a component ({', '.join(COMPONENTS)})")
        changing.add(name.value)
    parts = []
    for component, fields in COMPONENTS.items():
        if component in changing:
            continue
        if component == "evidence":
            parts.append(
                same_value(before.state["_latest_version"], after.state["_latest_version"])
            )
            parts.extend(
                t.u.evidence_state(before.state, k) == t.u.evidence_state(after.state, k)
                for k in t.u.policy.keys
            )
        else:
            parts.extend(same_value(before.state[f], after.state[f]) for f in fields)
    return all_of(*parts)


def _helper_with_entry(t: Translator, frame: Frame, node: ast.AST, arguments: list[Any]) -> Any:
    container, index, value = arguments
    if not isinstance(container, ContentMap | FMap):
        raise t.fail(frame, node, "with_entry() of a value the translator does not model")
    return t.store(frame, node, container, index, value)


def _helper_with_member(t: Translator, frame: Frame, node: ast.AST, arguments: list[Any]) -> Any:
    container, item = arguments
    if not isinstance(container, IdSet | FSet):
        raise t.fail(frame, node, "with_member() of a value the translator does not model")
    return t.set_update(frame, node, container, item, True)


def _helpers() -> dict[str, tuple[Callable[..., Any], Callable[..., Any]]]:
    from replan.spec import vocabulary

    handlers = {
        "raised": _helper_raised,
        "unchanged": _helper_unchanged,
        "with_entry": _helper_with_entry,
        "with_member": _helper_with_member,
    }
    missing = {h.__name__ for h in vocabulary.HELPERS} - set(handlers)
    if missing:
        raise TranslationError(
            f"vocabulary helpers with no z3 meaning: {', '.join(sorted(missing))}"
        )
    return {name: (getattr(vocabulary, name), handler) for name, handler in handlers.items()}


HELPERS = _helpers()
