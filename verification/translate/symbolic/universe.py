"""The abstraction: the z3 sorts for one policy and declaration, and which z3 shape each
field of the run and each record field takes (checked against ``Run.__slots__``).
"""

from __future__ import annotations

import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import z3  # type: ignore[import-untyped]

import replan.controller.records as _records_module
from replan.controller.fields import FIELDS
from replan.controller.policy import BUDGETS, Policy
from replan.controller.policy_schema import DOCUMENT
from replan.controller.records import RECORD_KINDS, EvidenceState, ExecuteResult
from replan.controller.run import Run
from replan.spec.model import MachineModel

if TYPE_CHECKING:
    from replan.verification.translate.symbolic.values import State


#: The enumeration member standing for a name the policy does not declare (a plan may
#: name any step or resource; the translation of "not in the policy" needs a value).
UNDECLARED = "<undeclared>"


class TranslationError(ValueError):
    """A guard or action body uses Python the translator does not understand."""


# ---- the abstraction ----------------------------------------------------------------

#: Each modelled field of the run and the z3 shape it takes: its kind's abstraction
#: (``controller/fields.py``; a kind without one explains and never decides).
FIELD_KINDS: dict[str, str] = {
    f.attribute: f.kind.abstraction for f in FIELDS if f.kind.abstraction is not None
}
#: ``policy`` is the universe's data and (symbolic) limits.
UNMODELLED_FIELDS = frozenset({f.attribute for f in FIELDS if f.kind.abstraction is None}) | {
    "policy"
}

#: The kinds z3 abstracts as an enumeration (the policy's names, the evidence states).
ENUM_KINDS = frozenset({"key", "step", "resource", "evidence"})


def _record_shape(name: str) -> dict[str, str]:
    """The z3 shape of each field of a record (``controller.records.RECORD_KINDS``):
    an enumeration kind as itself, an int field as ``int``, any other string as
    ``name`` (one integer per distinct value)."""
    record = getattr(_records_module, name)
    annotations = typing.get_type_hints(record)
    return {
        field: kind if kind in ENUM_KINDS else ("int" if annotations.get(field) is int else "name")
        for field, kind in RECORD_KINDS[name].items()
    }


#: The z3 shape of each field of the records an event receives, and the records.
RECORD_FIELDS: dict[str, dict[str, str]] = {name: _record_shape(name) for name in RECORD_KINDS}
RECORD_TYPES: dict[str, type] = {name: getattr(_records_module, name) for name in RECORD_KINDS}

#: The policy's limits, from the policy file's [limits] table: left symbolic for the
#: inductive proofs. A budget may be 0 (no limit); every other number is at least 1.
LIMITS = tuple(f.name for f in DOCUMENT.table("limits").fields if f.kind in ("positive", "boolean"))

_ERRORS = ("InvalidInput", "ObservationConflict")


def check_abstraction(model_class: type = Run) -> None:
    """Fail loudly when the run's fields or the records' fields changed without the
    abstraction above following."""
    slots: set[str] = set()
    for cls in model_class.__mro__:
        slots.update(getattr(cls, "__slots__", ()))
    missing = slots - set(FIELD_KINDS) - UNMODELLED_FIELDS
    if missing:
        raise TranslationError(
            f"{model_class.__name__} has fields that are not in controller/fields.py: "
            f"{', '.join(sorted(missing))} (declare them in FIELDS)"
        )
    for name, record in RECORD_TYPES.items():
        declared = tuple(getattr(record, "_fields", ()))
        if set(declared) != set(RECORD_FIELDS[name]):
            raise TranslationError(
                f"{name} fields {declared} differ from the z3 abstraction's "
                f"{tuple(RECORD_FIELDS[name])} (verification/translate/symbolic.py RECORD_FIELDS)"
            )


@dataclass(frozen=True)
class Domain:
    """A z3 enumeration whose members stand for Python values (by their ``str``)."""

    name: str
    sort: z3.DatatypeSortRef
    members: dict[str, z3.ExprRef]

    def const(self, value: object) -> z3.ExprRef | None:
        return self.members.get(str(value))

    def name_of(self, term: z3.ExprRef) -> str:
        for name, member in self.members.items():
            if member.eq(term):
                return name
        return str(term)


_ENUMS: dict[tuple[str, tuple[str, ...]], tuple[z3.DatatypeSortRef, list[z3.ExprRef]]] = {}
_ENUM_NAMES: dict[str, int] = {}


def _enum(name: str, values: Iterable[str], labels: Iterable[str] | None = None) -> Domain:
    """An enumeration sort, shared by every encoding that asks for the same values (z3
    refuses to declare one sort name twice)."""
    values = tuple(values)
    labels = tuple(labels) if labels is not None else values
    cache_key = (name, labels)
    if cache_key not in _ENUMS:
        count = _ENUM_NAMES.get(name, 0)
        _ENUM_NAMES[name] = count + 1
        sort, consts = z3.EnumSort(name if count == 0 else f"{name}#{count}", list(labels))
        _ENUMS[cache_key] = (sort, consts)
    sort, consts = _ENUMS[cache_key]
    return Domain(name, sort, dict(zip(values, consts, strict=True)))


EVIDENCE = _enum("EvidenceState", [str(s) for s in EvidenceState])

_content = z3.Datatype("Content")
_content.declare("none")
_content.declare("some", ("content_state", EVIDENCE.sort), ("content_source", z3.IntSort()))
CONTENT = _content.create()


def answer_key(value: object) -> str:
    """The name of an event's answer (or raised error class) in the ``Answer`` sort."""
    if isinstance(value, type) and issubclass(value, BaseException):
        return f"raised {value.__name__ if value.__name__ in _ERRORS else 'other'}"
    if value is None or isinstance(value, bool):
        return str(value)
    if isinstance(value, ExecuteResult):
        return str(value)
    raise TranslationError(f"{value!r} is not an answer the controller gives")


ANSWER = _enum(
    "Answer",
    ["False", "True", "None", *(str(r) for r in ExecuteResult)]
    + [f"raised {e}" for e in (*_ERRORS, "other")],
)


class Universe:
    """The sorts, constants and limits for one policy and one declaration."""

    def __init__(
        self, policy: Policy, model: MachineModel, *, symbolic_limits: bool = False
    ) -> None:
        self.policy = policy
        self.model = model
        self.evidence = EVIDENCE
        self.answer = ANSWER
        self.key = _enum("Key", [*policy.keys, UNDECLARED])
        self.step = _enum("Step", [*(s.name for s in policy.steps), UNDECLARED])
        self.resource = _enum("Resource", [*policy.resources, UNDECLARED])
        self.mode = _enum(
            "DeclaredState", [s.value for s in model.states], [s.id for s in model.states]
        )
        self.limits: dict[str, z3.ExprRef] = {}
        #: Facts every step may assume about the limits (the policy schema's rules).
        self.assumptions: list[z3.BoolRef] = []
        for name in LIMITS:
            value = getattr(policy, name)
            if not symbolic_limits:
                self.limits[name] = (
                    z3.BoolVal(value) if isinstance(value, bool) else z3.IntVal(value)
                )
            elif isinstance(value, bool):
                self.limits[name] = z3.Bool(name)
            else:
                term = z3.Int(name)
                self.limits[name] = term
                self.assumptions.append(term >= (0 if name in BUDGETS else 1))
        self._interned: dict[object, int] = {}
        self._evidence: dict[tuple[int, str], tuple[Any, z3.ExprRef]] = {}
        self._passed: dict[tuple[int, str], tuple[Any, z3.BoolRef]] = {}

    def kind_sort(self, kind: str) -> z3.SortRef:
        return {
            "int": z3.IntSort(),
            "name": z3.IntSort(),
            "key": self.key.sort,
            "step": self.step.sort,
            "resource": self.resource.sort,
            "evidence": self.evidence.sort,
            "mode": self.mode.sort,
        }[kind]

    def domain_of(self, sort: z3.SortRef) -> Domain | None:
        for domain in (self.evidence, self.key, self.step, self.resource, self.mode, self.answer):
            if domain.sort == sort:
                return domain
        return None

    def intern(self, value: object) -> int:
        """A distinct integer per distinct plan id or source (as the abstraction of
        strings that are only ever compared for equality)."""
        token = (type(value).__name__, value if _hashable(value) else repr(value))
        if token not in self._interned:
            self._interned[token] = len(self._interned) + 1
        return self._interned[token]

    def interned(self) -> dict[tuple[str, object], int]:
        """Every name interned so far, as (its type's name, the name) -> its number:
        what reads a translated state's numbers back as names."""
        return dict(self._interned)

    def mode_of(self, state_id: str) -> z3.ExprRef:
        value = self.model.state(state_id).value
        found = self.mode.const(value)
        assert found is not None
        return found

    @property
    def final_modes(self) -> list[z3.ExprRef]:
        return [self.mode_of(s.id) for s in self.model.final_states]

    def evidence_state(self, state: State, key: str) -> z3.ExprRef:
        """``state(key)``: the key's latest state, Unknown when never recorded."""
        known = state["_known"]
        cached = self._evidence.get((id(known), key))
        if cached is not None and cached[0] is known:
            return cached[1]
        entry = known.entries[key]
        term = z3.If(entry.some, entry.value, self.evidence.members["Unknown"])
        self._evidence[(id(known), key)] = (known, term)
        return term

    def is_passed(self, state: State, key: str) -> z3.BoolRef:
        """``state(key) == Passed`` (built once per state and key)."""
        known = state["_known"]
        cached = self._passed.get((id(known), key))
        if cached is not None and cached[0] is known:
            return cached[1]
        term = self.evidence_state(state, key) == self.evidence.members["Passed"]
        self._passed[(id(known), key)] = (known, term)
        return term

    def answer_of(self, value: object) -> z3.ExprRef:
        return self.answer.members[answer_key(value)]


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
