"""The run's guard and action bodies, translated to z3: one step of the controller as
a formula, derived from the declaration, the policy and the Python source.

Owns: the abstraction of a run's fields as z3 values (``Universe``: the sorts for one
policy and declaration; ``FIELD_KINDS``: which z3 shape each field of
``controller.run.Run`` takes), a small symbolic evaluator for the Python the bodies
are written in, and ``encode_event``: the declared transitions of one event, in
priority order, as a functional transition relation (post-state, answer and fired
transition as terms over the pre-state and the event's argument). Leaves to
``verification/engines/prove/engine.py`` what is proved with it.

Nothing about the controller's behaviour is written here a second time. Structure
comes from ``spec.model.extract`` (states, transitions, priority, guard expressions);
guard bodies come from ``spec.generator``'s inliner (the very expressions the
generated controller runs); action bodies are read from their Python source and
executed symbolically (assignments, ``+=``, ``set.add``/``discard``, stores into a
dict, ``if``, ``return``, ``raise``). What is hand-written is only the *abstraction*:
the z3 shape of each field and record field (checked against ``Run.__slots__`` and the
records' fields, and kept honest by the conformance test that replays random runs of
the generated controller through the relation). A body that uses anything the
evaluator does not understand fails loudly with ``TranslationError`` naming the guard
or action, so a changed body can never be silently mistranslated.

The abstraction, field by field: counters and revisions are integers; the declared
state is an enumeration of the declaration's states; ``_known`` and
``_latest_version`` are maps over the policy's evidence keys (one optional entry per
key); ``_passed`` is a set over those keys; ``_contents`` is an array from (key,
version) to an optional (state, source); ``_accepted`` and ``_completed`` are arrays
from plan ids (integers, one per distinct id) to booleans; the pending plan is an
optional record. A call of a module function on the event's argument alone
(``well_formed_plan(plan)``, ``isinstance(plan_id, str)``) is a property of the input
the caller chooses: it becomes a free boolean *input* of the step, pinned to its real
value by the conformance test. The event's input check (``check_observation``) is such
an input too: refused means the call raises and nothing changes.
"""

from __future__ import annotations

import ast
import builtins
import copy
import inspect
import textwrap
import typing
from collections import ChainMap
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from typing import Any

import z3  # type: ignore[import-untyped]

import replan.controller.records as _records_module
from replan.controller.fields import FIELDS
from replan.controller.policy import BUDGETS, Policy
from replan.controller.policy_schema import DOCUMENT
from replan.controller.records import RECORD_KINDS, EvidenceState, ExecuteResult, Plan, StopReason
from replan.controller.run import Run
from replan.spec.generator import _Generator
from replan.spec.model import MachineModel, TransitionInfo

#: The enumeration member standing for a name the policy does not declare (a plan may
#: name any step or resource; the translation of "not in the policy" needs a value).
UNDECLARED = "<undeclared>"


class TranslationError(ValueError):
    """A guard or action body uses Python the translator does not understand."""


# ---- the abstraction ----------------------------------------------------------------

#: The z3 shape of each kind of field of ``controller/fields.py`` (None: not
#: modelled: the trace explains and never decides).
Z3_KINDS: dict[str, str | None] = {
    "mode": "mode",
    "counter": "int",
    "plan?": "plan?",
    "key->version": "key->int",
    "key->evidence": "key->evidence",
    "key set": "key set",
    "contents": "contents",
    "id set": "id set",
    "trace": None,
}
#: Each modelled field of the run and the z3 shape it takes, from the field table.
FIELD_KINDS: dict[str, str] = {
    f.attribute: kind for f in FIELDS if (kind := Z3_KINDS[f.kind]) is not None
}
#: ``policy`` is the universe's data and (symbolic) limits.
UNMODELLED_FIELDS = frozenset({f.attribute for f in FIELDS if Z3_KINDS[f.kind] is None}) | {
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


# ---- symbolic values ---------------------------------------------------------------


@dataclass(frozen=True)
class Const:
    """A concrete Python value (policy data, a literal, an enum member, None)."""

    value: Any


@dataclass(frozen=True)
class Opt:
    """A value that may be None (the pending plan, a map entry)."""

    some: z3.BoolRef
    value: Any


@dataclass(frozen=True)
class Tup:
    items: tuple[Any, ...]


@dataclass(frozen=True)
class Record:
    """An Observation or a Plan: each field a symbolic value."""

    kind: str
    fields: dict[str, Any]


@dataclass(frozen=True)
class FMap:
    """A dict over a finite domain (the policy's keys): one optional entry each."""

    domain: Domain
    entries: Mapping[str, Opt]


class LazyEntries(Mapping[str, Any]):
    """A fresh map's entries, each made on first use: a step that never reads a
    field of a policy with hundreds of keys never pays for its variables."""

    def __init__(self, keys: Iterable[str], make: Callable[[str], Any]) -> None:
        self._keys = tuple(keys)
        self._known = frozenset(self._keys)
        self._make = make
        self._made: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        if key not in self._made:
            if key not in self._known:
                raise KeyError(key)
            self._made[key] = self._make(key)
        return self._made[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


@dataclass(frozen=True)
class FSet:
    """A set over a finite domain: one boolean per member."""

    domain: Domain
    members: dict[str, z3.BoolRef]


@dataclass(frozen=True)
class ContentMap:
    """``_contents``: an array from (key, version) to an optional (state, source)."""

    array: z3.ArrayRef


@dataclass(frozen=True)
class ContentEntry:
    """``_contents.get((key, version))``: a ``Content`` datatype term."""

    term: z3.DatatypeRef


@dataclass(frozen=True)
class IdSet:
    """A set of plan ids: an array from id to bool."""

    array: z3.ArrayRef


@dataclass(frozen=True)
class Choice:
    """A value that depends on a condition, one alternative per case (a dict looked up
    at a symbolic key). The cases are exclusive; a side obligation says one holds."""

    options: tuple[tuple[z3.BoolRef, Any], ...]


@dataclass(frozen=True)
class _Self:
    pass


@dataclass(frozen=True)
class _PolicyRef:
    pass


@dataclass(frozen=True)
class _Method:
    name: str


@dataclass(frozen=True)
class _Bound:
    receiver: Any
    name: str


@dataclass(frozen=True, eq=False)
class StateRef:
    """A run a property reads besides ``self``: the state before or after a call.
    Its fields, read-only members (``run.steps``) and pure methods (``run.evidence_state(k)``)
    read ``state``; nothing writes it."""

    state: State


@dataclass(frozen=True)
class _RunMethod:
    run: StateRef
    name: str


@dataclass(frozen=True)
class _TypeOf:
    """``type(<argument>)``: compared with a class, it is an input of the step."""

    path: str


@dataclass(frozen=True)
class _Raised:
    """The class of an error a body raised (``type(error)`` in an ``except``)."""

    member: str  # its ``Answer`` member: "raised InvalidInput", ...


@dataclass(frozen=True)
class TraceLog:
    """``_trace`` as far as one call sees it: how many records the call appended and
    the last of them (the generated dispatch appends one; a property says so)."""

    count: z3.ArithRef
    last: Any


@dataclass(frozen=True)
class _FieldAlias:
    """A local bound to a container field of ``self`` (``contents = self._contents``,
    as the generated code reads them): reads and writes go to the field."""

    name: str


SELF = _Self()
POLICY = _PolicyRef()
#: The local holding the name of the error an ``except`` caught (for a bare raise).
_RAISING = " raising"

State = dict[str, Any]


class _InParameterNames(ast.NodeTransformer):
    """An expression with each local standing for a part of the event's argument
    written as that part (``version`` -> ``obs.version``)."""

    def __init__(self, paths: Mapping[str, ast.expr]) -> None:
        self.paths = paths

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return self.paths.get(node.id, node)


def _where(node: ast.AST) -> str:
    return ast.unparse(node)


class Obligation:
    """Something the bodies take for granted (no None dereference, no missing dict
    key, a declared transition for every case), to be proved on reachable states."""

    def __init__(self, condition: z3.BoolRef, text: str) -> None:
        self.condition = condition
        self.text = text


@dataclass
class _Frame:
    state: State
    env: dict[str, Any]
    pc: tuple[z3.BoolRef, ...]
    where: str
    parameters: frozenset[str]
    #: local name -> the expression of the event's argument it stands for (``key`` ->
    #: ``obs.key`` after ``key, version, state, source = obs``), so a test of the
    #: argument's type reads as the same input wherever it is written
    paths: dict[str, ast.expr] = field(default_factory=dict)
    #: the globals names resolve in (None: the run's modules); a function's own
    #: module when its body is being run
    scope: Mapping[str, Any] | None = None

    def inner(self, **changes: Any) -> _Frame:
        """A frame for a sub-expression or branch: the same unless told otherwise."""
        values = {
            "state": self.state,
            "env": self.env,
            "pc": self.pc,
            "where": self.where,
            "parameters": self.parameters,
            "paths": self.paths,
            "scope": self.scope,
        }
        values.update(changes)
        return _Frame(**values)


@dataclass
class _Path:
    frame: _Frame
    outcome: tuple[str, Any] | None  # ("return", value) | ("raise", class name) | None


class Translator:
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

    def fail(self, frame: _Frame, node: ast.AST | str, problem: str) -> TranslationError:
        text = node if isinstance(node, str) else _where(node)
        return TranslationError(f"{frame.where}: {problem}: `{text}`")

    def require(self, frame: _Frame, condition: z3.BoolRef, text: str) -> None:
        if z3.is_true(z3.simplify(condition)):
            return
        self.obligations.append(
            Obligation(z3.Implies(all_of(*frame.pc), condition), f"{frame.where}: {text}")
        )

    def term(self, frame: _Frame, value: Any, sort: z3.SortRef | None = None) -> z3.ExprRef:
        """A z3 term for a scalar value (a Python constant needs the other side's sort)."""
        if isinstance(value, z3.ExprRef):
            return value
        if isinstance(value, Const):
            item = value.value
            if isinstance(item, bool):
                return z3.BoolVal(item)
            if isinstance(item, int):
                return z3.IntVal(item)
            if sort is not None and isinstance(item, str):
                domain = self.u.domain_of(sort)
                if domain is not None:
                    found = domain.const(item)
                    if found is not None:
                        return found
        raise self.fail(frame, frame.where, f"cannot use {value!r} as a z3 term")

    def boolean(self, frame: _Frame, value: Any) -> z3.BoolRef:
        if isinstance(value, Const):
            return z3.BoolVal(bool(value.value))
        if isinstance(value, z3.BoolRef):
            return value
        if isinstance(value, Choice):
            return self.lift(frame, value, lambda v: self.boolean(frame, v))
        raise self.fail(frame, frame.where, f"{value!r} is not a boolean")

    def merge(self, condition: z3.BoolRef, a: Any, b: Any) -> Any:
        """``a if condition else b`` for any symbolic value."""
        if a is b:
            return a
        if isinstance(a, TraceLog) and isinstance(b, TraceLog):
            last = a.last if b.last is None else b.last if a.last is None else None
            if a.last is not None and b.last is not None:
                last = self.merge(condition, a.last, b.last)
            return TraceLog(self.merge(condition, a.count, b.count), last)
        if isinstance(a, Const) and isinstance(b, Const):
            if a.value == b.value and type(a.value) is type(b.value):
                return a
            if {type(a.value), type(b.value)} <= {int, type(None)}:
                # an optional index (the fired transition): None reads as -1
                return z3.If(
                    condition,
                    z3.IntVal(-1 if a.value is None else a.value),
                    z3.IntVal(-1 if b.value is None else b.value),
                )
            if isinstance(a.value, bool) and isinstance(b.value, bool):
                return z3.If(condition, z3.BoolVal(a.value), z3.BoolVal(b.value))
            if isinstance(a.value, int) and isinstance(b.value, int):
                return z3.If(condition, z3.IntVal(a.value), z3.IntVal(b.value))
            return z3.If(condition, self.u.answer_of(a.value), self.u.answer_of(b.value))
        if isinstance(a, z3.ExprRef) or isinstance(b, z3.ExprRef):
            if isinstance(a, Const):
                a = self._coerce_const(a, b)
            if isinstance(b, Const):
                b = self._coerce_const(b, a)
            answer = self.u.answer.sort
            if a.sort() == answer and z3.is_bool(b):  # a boolean answer beside a raise
                b = z3.If(b, self.u.answer.members["True"], self.u.answer.members["False"])
            elif b.sort() == answer and z3.is_bool(a):
                a = z3.If(a, self.u.answer.members["True"], self.u.answer.members["False"])
            if a.eq(b):
                return a
            return z3.If(condition, a, b)
        if isinstance(a, Opt) and isinstance(b, Opt):
            return Opt(
                self.merge(condition, a.some, b.some), self.merge(condition, a.value, b.value)
            )
        if isinstance(a, Record) and isinstance(b, Record) and a.kind == b.kind:
            return Record(
                a.kind, {n: self.merge(condition, a.fields[n], b.fields[n]) for n in a.fields}
            )
        if isinstance(a, Tup) and isinstance(b, Tup) and len(a.items) == len(b.items):
            return Tup(
                tuple(self.merge(condition, x, y) for x, y in zip(a.items, b.items, strict=True))
            )
        if isinstance(a, FMap) and isinstance(b, FMap):
            return FMap(
                a.domain, {k: self.merge(condition, a.entries[k], b.entries[k]) for k in a.entries}
            )
        if isinstance(a, FSet) and isinstance(b, FSet):
            return FSet(
                a.domain, {k: self.merge(condition, a.members[k], b.members[k]) for k in a.members}
            )
        if isinstance(a, ContentMap) and isinstance(b, ContentMap):
            return ContentMap(z3.If(condition, a.array, b.array))
        if isinstance(a, IdSet) and isinstance(b, IdSet):
            return IdSet(z3.If(condition, a.array, b.array))
        if isinstance(a, ContentEntry) and isinstance(b, ContentEntry):
            return ContentEntry(z3.If(condition, a.term, b.term))
        raise TranslationError(f"cannot merge {a!r} and {b!r}")

    def _coerce_const(self, value: Const, other: z3.ExprRef) -> z3.ExprRef:
        item = value.value
        sort = other.sort()
        if item is None and sort == z3.IntSort():
            return z3.IntVal(-1)  # an optional index (the fired transition)
        if sort == self.u.answer.sort:
            return self.u.answer_of(item)
        if isinstance(item, bool):
            if z3.is_bool(other):
                return z3.BoolVal(item)
            if sort == self.u.answer.sort:
                return self.u.answer_of(item)
        if isinstance(item, int) and not isinstance(item, bool):
            return z3.IntVal(item)
        domain = self.u.domain_of(sort)
        if domain is not None and domain.const(item) is not None:
            return domain.const(item)
        raise TranslationError(f"cannot use {item!r} where a {sort} is expected")

    def lift(self, frame: _Frame, value: Any, function: Callable[[Any], Any]) -> Any:
        """Apply ``function`` to each alternative of a ``Choice`` (or to the value)."""
        if not isinstance(value, Choice):
            return function(value)
        results = [(condition, function(option)) for condition, option in value.options]
        merged = results[-1][1]
        for condition, result in reversed(results[:-1]):
            merged = self.merge(condition, result, merged)
        return merged

    # -- comparisons ---------------------------------------------------------------------

    def equal(self, frame: _Frame, a: Any, b: Any) -> z3.BoolRef:
        if a is POLICY or b is POLICY:
            return z3.BoolVal(a is b)
        if isinstance(b, FMap | FSet | IdSet | ContentMap) and isinstance(a, Const):
            a, b = b, a
        if isinstance(a, FMap | FSet | IdSet | ContentMap) and isinstance(b, Const):
            if isinstance(b.value, dict | set | frozenset) and not b.value:
                return _empty(self.u, a)
            raise self.fail(frame, frame.where, "a container compared with a non-empty constant")
        answer = self.u.answer.sort
        a_answer = isinstance(a, z3.ExprRef) and a.sort() == answer
        if isinstance(b, z3.ExprRef) and b.sort() == answer and not a_answer:
            a, b = b, a
        if isinstance(a, z3.ExprRef) and a.sort() == self.u.answer.sort:
            if isinstance(b, Const):
                return a == self.u.answer_of(b.value)
            if isinstance(b, _Raised):
                return a == self.u.answer.members[b.member]
            if isinstance(b, z3.BoolRef):  # a boolean answer
                return a == self.answer_term(frame, b)
        if isinstance(a, Opt) and isinstance(b, Opt):
            return all_of(a.some == b.some, z3.Implies(a.some, self.equal(frame, a.value, b.value)))
        if isinstance(a, Record) and isinstance(b, Record):
            if a.kind != b.kind:
                return z3.BoolVal(False)
            return all_of(*(self.equal(frame, a.fields[n], b.fields[n]) for n in a.fields))
        if isinstance(a, FMap | FSet | IdSet | ContentMap) and type(a) is type(b):
            return _same(a, b)
        if isinstance(a, Choice) or isinstance(b, Choice):
            return self.lift(
                frame, a, lambda x: self.lift(frame, b, lambda y: self.equal(frame, x, y))
            )
        if isinstance(a, Const) and isinstance(b, Const):
            return z3.BoolVal(bool(a.value == b.value))
        if isinstance(b, Opt | ContentEntry):
            a, b = b, a
        if isinstance(a, Opt):
            if isinstance(b, Const) and b.value is None:
                return z3.Not(a.some)
            return all_of(a.some, self.equal(frame, a.value, b))
        if isinstance(a, ContentEntry):
            if isinstance(b, Const) and b.value is None:
                return CONTENT.is_none(a.term)
            if isinstance(b, Tup) and len(b.items) == 2:
                state = self.term(frame, b.items[0], EVIDENCE.sort)
                source = self.term(frame, b.items[1], z3.IntSort())
                return all_of(
                    CONTENT.is_some(a.term),
                    CONTENT.content_state(a.term) == state,
                    CONTENT.content_source(a.term) == source,
                )
            raise self.fail(frame, frame.where, f"cannot compare a stored content with {b!r}")
        if isinstance(a, Tup) and isinstance(b, Tup):
            if len(a.items) != len(b.items):
                return z3.BoolVal(False)
            return all_of(*(self.equal(frame, x, y) for x, y in zip(a.items, b.items, strict=True)))
        if (isinstance(a, Const) and a.value is None) or (isinstance(b, Const) and b.value is None):
            return z3.BoolVal(False)  # a symbolic scalar is never None
        if isinstance(a, z3.ExprRef) or isinstance(b, z3.ExprRef):
            left = a if isinstance(a, z3.ExprRef) else None
            right = b if isinstance(b, z3.ExprRef) else None
            if left is None:
                assert right is not None
                return self._equal_const(frame, right, a)
            if right is None:
                return self._equal_const(frame, left, b)
            if left.sort() != right.sort():
                raise self.fail(frame, frame.where, f"comparing {left.sort()} with {right.sort()}")
            return left == right
        raise self.fail(frame, frame.where, f"cannot compare {a!r} with {b!r}")

    def _equal_const(self, frame: _Frame, term: z3.ExprRef, value: Any) -> z3.BoolRef:
        if not isinstance(value, Const):
            raise self.fail(frame, frame.where, f"cannot compare {term} with {value!r}")
        domain = self.u.domain_of(term.sort())
        if domain is not None:
            found = domain.const(value.value)
            return z3.BoolVal(False) if found is None else term == found
        if isinstance(value.value, str) and term.sort() == z3.IntSort():
            # an id or a source (strings abstracted as one integer each)
            return term == z3.IntVal(self.u.intern(value.value))
        return term == self.term(frame, value, term.sort())

    def contains(self, frame: _Frame, container: Any, item: Any) -> z3.BoolRef:
        if isinstance(container, Choice):
            return self.lift(frame, container, lambda c: self.contains(frame, c, item))
        if isinstance(container, Const):
            collection = container.value
            if isinstance(item, Const):
                return z3.BoolVal(item.value in collection)
            if isinstance(collection, set | frozenset):  # an order fixed by the values,
                collection = sorted(collection, key=repr)  # not by string hashing
            return any_of(*(self.equal(frame, item, Const(element)) for element in collection))
        if isinstance(container, FSet | FMap) and isinstance(item, Const):
            # a policy key, known: its own member (what the loop below gives, every
            # other case being False), not a disjunction over every key: a quantifier
            # over the keys, ``all(k in run._passed for k in ...)``, stays linear
            found = _entry_of(container, item.value)
            if found is not _NO_ENTRY:
                return found.some if isinstance(found, Opt) else found
        if isinstance(container, FSet):
            return any_of(
                *(
                    all_of(self.equal(frame, item, Const(k)), m)
                    for k, m in container.members.items()
                )
            )
        if isinstance(container, FMap):
            return any_of(
                *(
                    all_of(self.equal(frame, item, Const(k)), e.some)
                    for k, e in container.entries.items()
                )
            )
        if isinstance(container, IdSet):
            return z3.Select(container.array, self.term(frame, item, z3.IntSort()))
        if isinstance(container, ContentMap):
            return CONTENT.is_some(self.content_entry(frame, container, item).term)
        raise self.fail(frame, frame.where, f"membership in {container!r}")

    def content_entry(self, frame: _Frame, container: ContentMap, index: Any) -> ContentEntry:
        if not isinstance(index, Tup) or len(index.items) != 2:
            raise self.fail(frame, frame.where, "_contents is indexed by (key, version)")
        key = self.term(frame, index.items[0], self.u.key.sort)
        version = self.term(frame, index.items[1], z3.IntSort())
        return ContentEntry(z3.Select(container.array, key, version))

    def map_get(self, frame: _Frame, container: FMap, key: Any, default: Any) -> Any:
        """``container.get(key[, default])``: an ``Opt`` without a default."""
        if isinstance(key, Const):
            entry = container.entries.get(str(key.value))
            if entry is None:
                return default if default is not None else Const(None)
            return entry if default is None else self.merge(entry.some, entry.value, default)
        if not container.entries:
            return default if default is not None else Const(None)
        result: Any = None
        for name, entry in container.entries.items():
            here = self.equal(frame, key, Const(name))
            value = entry if default is None else self.merge(entry.some, entry.value, default)
            if result is None:
                result = Opt(z3.BoolVal(False), entry.value) if default is None else default
            result = self.merge(here, value, result)
        return result

    # -- expressions ---------------------------------------------------------------------

    def eval(self, node: ast.expr, frame: _Frame) -> Any:
        method = getattr(self, f"_eval_{type(node).__name__}", None)
        if method is None:
            raise self.fail(frame, node, f"{type(node).__name__} is not understood")
        return method(node, frame)

    def _eval_Constant(self, node: ast.Constant, frame: _Frame) -> Any:
        return Const(node.value)

    def _eval_Name(self, node: ast.Name, frame: _Frame) -> Any:
        if node.id in frame.env:
            value = frame.env[node.id]
            return frame.state[value.name] if isinstance(value, _FieldAlias) else value
        if node.id == "self":
            return SELF
        scope = self.globals if frame.scope is None else frame.scope
        if node.id in scope:
            return Const(scope[node.id])
        if hasattr(builtins, node.id):
            return Const(getattr(builtins, node.id))
        raise self.fail(frame, node, "unknown name")

    def _eval_Dict(self, node: ast.Dict, frame: _Frame) -> Any:
        if node.keys:
            raise self.fail(frame, node, "only an empty dict is understood")
        return Const({})

    def _eval_List(self, node: ast.List, frame: _Frame) -> Any:
        if node.elts:
            raise self.fail(frame, node, "only an empty list is understood")
        return Const([])

    def _eval_Tuple(self, node: ast.Tuple, frame: _Frame) -> Any:
        items = tuple(self.eval(e, frame) for e in node.elts)
        if all(isinstance(i, Const) for i in items):
            return Const(tuple(i.value for i in items))
        return Tup(items)

    def _eval_Attribute(self, node: ast.Attribute, frame: _Frame) -> Any:
        base = self.eval(node.value, frame)
        name = node.attr
        if base is SELF or isinstance(base, StateRef):
            fields = frame.state if base is SELF else base.state
            if name in fields:
                return fields[name]
            if name == "policy":
                return POLICY
            member = getattr(self.model_class, name, None)
            if isinstance(member, property) and member.fget is not None:
                # a read-only member (``run.steps``): its getter's body, on that run
                _, value = self.run_function(
                    member.fget, [base], frame, state=fields, where=f"member {name!r}"
                )
                return value
            if callable(member):
                return _Method(name) if base is SELF else _RunMethod(base, name)
            raise self.fail(frame, node, "not a modelled field of the run")
        if base is POLICY:
            if name in self.u.limits:
                return self.u.limits[name]
            if not hasattr(self.u.policy, name):
                raise self.fail(frame, node, "not a field of the policy")
            return Const(getattr(self.u.policy, name))
        if isinstance(base, Opt):
            self.require(frame, base.some, f"`{_where(node.value)}` is not None")
            base = base.value
        if isinstance(base, Record):
            if name not in base.fields:
                raise self.fail(frame, node, f"{base.kind} has no field {name!r}")
            path = self.path_of(node.value, frame)
            if path is not None:
                # a field of the event's argument exists only if it is that record:
                # Python raises AttributeError otherwise, so the body must know
                text = ast.unparse(path)
                self.require(
                    frame, self._atom(f"type({text}) is {base.kind}"), f"`{text}` is a {base.kind}"
                )
            return base.fields[name]
        if isinstance(base, Choice):
            return Choice(tuple((c, Const(getattr(v.value, name))) for c, v in base.options))
        if isinstance(base, Const):
            if isinstance(base.value, type) and issubclass(base.value, Enum):
                return Const(getattr(base.value, name))
            return _Bound(base, name)
        if isinstance(base, FMap | FSet | IdSet | ContentMap):
            return _Bound(base, name)
        raise self.fail(frame, node, "attribute of a value the translator does not model")

    def _eval_Compare(self, node: ast.Compare, frame: _Frame) -> Any:
        left = self.eval(node.left, frame)
        results: list[z3.BoolRef] = []
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self.eval(comparator, frame)
            results.append(self._compare(frame, node, op, left, right))
            left = right
        return results[0] if len(results) == 1 else all_of(*results)

    def _compare(self, frame: _Frame, node: ast.AST, op: ast.cmpop, a: Any, b: Any) -> z3.BoolRef:
        if isinstance(a, _TypeOf) and isinstance(op, ast.Is | ast.IsNot | ast.Eq | ast.NotEq):
            if not isinstance(b, Const) or not isinstance(b.value, type):
                raise self.fail(frame, node, "type() compared with something other than a class")
            atom = self._atom(f"type({a.path}) is {_class_text(b.value)}")
            return atom if isinstance(op, ast.Is | ast.Eq) else z3.Not(atom)
        if isinstance(op, ast.LtE) and isinstance(a, IdSet) and isinstance(b, IdSet):
            return _subset(a.array, b.array)
        if isinstance(op, ast.Eq | ast.Is):
            return self.equal(frame, a, b)
        if isinstance(op, ast.NotEq | ast.IsNot):
            return z3.Not(self.equal(frame, a, b))
        if isinstance(op, ast.In):
            return self.contains(frame, b, a)
        if isinstance(op, ast.NotIn):
            return z3.Not(self.contains(frame, b, a))
        if isinstance(a, Const) and isinstance(b, Const):
            return z3.BoolVal(bool(eval(f"a {_OPS[type(op)]} b", {"a": a.value, "b": b.value})))
        left = self.term(frame, a, z3.IntSort())
        right = self.term(frame, b, z3.IntSort())
        if isinstance(op, ast.Lt):
            return left < right
        if isinstance(op, ast.LtE):
            return left <= right
        if isinstance(op, ast.Gt):
            return left > right
        if isinstance(op, ast.GtE):
            return left >= right
        raise self.fail(frame, node, "comparison not understood")

    def _eval_BoolOp(self, node: ast.BoolOp, frame: _Frame) -> Any:
        is_and = isinstance(node.op, ast.And)
        values: list[z3.BoolRef] = []
        pc = frame.pc
        for operand in node.values:
            inner = frame.inner(pc=pc)
            value = self.boolean(frame, self.eval(operand, inner))
            frame.state = inner.state
            # Python stops at the first operand that decides: so does the translation
            # (a later operand may not even apply, ``event == "observe" and obs.key``)
            if z3.is_false(value) if is_and else z3.is_true(value):
                return Const(not is_and)
            values.append(value)
            pc = (*pc, value if is_and else z3.Not(value))
        return all_of(*values) if is_and else any_of(*values)

    def _eval_UnaryOp(self, node: ast.UnaryOp, frame: _Frame) -> Any:
        operand = self.eval(node.operand, frame)
        if isinstance(node.op, ast.Not):
            if isinstance(operand, Const):
                return Const(not operand.value)
            return z3.Not(self.boolean(frame, operand))
        if isinstance(node.op, ast.USub):
            if isinstance(operand, Const):
                return Const(-operand.value)
            return -self.term(frame, operand, z3.IntSort())
        raise self.fail(frame, node, "operator not understood")

    def _eval_BinOp(self, node: ast.BinOp, frame: _Frame) -> Any:
        left = self.eval(node.left, frame)
        right = self.eval(node.right, frame)
        if isinstance(left, Const) and isinstance(right, Const):
            return Const(eval(f"a {_BINOPS[type(node.op)]} b", {"a": left.value, "b": right.value}))
        a = self.term(frame, left, z3.IntSort())
        b = self.term(frame, right, z3.IntSort())
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        raise self.fail(frame, node, "arithmetic other than + and - is not understood")

    def _eval_IfExp(self, node: ast.IfExp, frame: _Frame) -> Any:
        decided = _decided(self.eval(node.test, frame))
        if isinstance(decided, Const):
            return self.eval(node.body if decided.value else node.orelse, frame)
        test = self.boolean(frame, decided)
        branches = []
        for condition, body in ((test, node.body), (z3.Not(test), node.orelse)):
            inner = frame.inner(state=dict(frame.state), pc=(*frame.pc, condition))
            branches.append((self.eval(body, inner), inner.state))
        frame.state = self.merge_states(test, branches[0][1], branches[1][1])
        return self.merge(test, branches[0][0], branches[1][0])

    def _eval_Subscript(self, node: ast.Subscript, frame: _Frame) -> Any:
        container = self.eval(node.value, frame)
        index = self.eval(node.slice, frame)
        if isinstance(index, Const) and isinstance(index.value, int):
            if isinstance(container, Tup):
                return container.items[index.value]
            if isinstance(container, TraceLog):
                if index.value not in (0, -1):
                    raise self.fail(frame, node, "only the one record a call appends is modelled")
                return container.last
        if isinstance(container, Const) and isinstance(container.value, Mapping):
            mapping = container.value
            if isinstance(index, Const):
                if index.value not in mapping:
                    raise self.fail(frame, node, f"{index.value!r} is not a key")
                return Const(mapping[index.value])
            options = tuple(
                (self.equal(frame, index, Const(k)), Const(v)) for k, v in mapping.items()
            )
            options = tuple(o for o in options if not z3.is_false(z3.simplify(o[0])))
            self.require(
                frame,
                any_of(*(c for c, _ in options)),
                f"`{_where(node.slice)}` is a key of `{_where(node.value)}`",
            )
            if not options:
                raise self.fail(frame, node, "no key can match")
            return Choice(options)
        if isinstance(container, FMap):
            entry = self.map_get(frame, container, index, None)
            self.require(
                frame, entry.some, f"`{_where(node.slice)}` is a key of `{_where(node.value)}`"
            )
            return entry.value
        raise self.fail(frame, node, "subscript of a value the translator does not model")

    def _eval_Call(self, node: ast.Call, frame: _Frame) -> Any:
        if node.keywords:
            raise self.fail(frame, node, "keyword arguments are not understood")
        function = self.eval(node.func, frame)
        if isinstance(function, _Method):
            arguments = [self.eval(a, frame) for a in node.args]
            state, value = self.call(function.name, arguments, frame, nodes=node.args)
            frame.state = state
            return value
        if isinstance(function, _RunMethod):
            arguments = [self.eval(a, frame) for a in node.args]
            method = getattr(self.model_class, function.name)
            _, value = self.run_function(
                method,
                [function.run, *arguments],
                frame,
                state=function.run.state,
                where=f"method {function.name!r}",
                nodes=[None, *node.args],
            )
            return value
        if isinstance(function, _Bound) and _is_body_of_class(function):
            # ``Run.name(self, ...)``: the generated code calls a body it does not copy
            # through the bodies' class (a run does not offer its bodies)
            arguments = [self.eval(a, frame) for a in node.args]
            kind = "guard" if function.name in _guard_names(self.u.model) else "action"
            owner = function.receiver.value
            state, value = self.run_function(
                getattr(owner, function.name),
                arguments,
                frame,
                state=frame.state,
                where=f"{kind} {function.name!r} ({owner.__name__})",
                nodes=node.args,
            )
            frame.state = state
            return value
        if isinstance(function, _Bound):
            arguments = [self.eval(a, frame) for a in node.args]
            return self._call_bound(frame, node, function, arguments)
        if not isinstance(function, Const):
            raise self.fail(frame, node, "call not understood")
        target = function.value
        if target in (any, all):
            return self._quantifier(frame, node, target is any)
        if target in (set, dict) and not node.args:
            return Const(target())
        if target is type and len(node.args) == 1:
            caught = self.eval(node.args[0], frame) if isinstance(node.args[0], ast.Name) else None
            if isinstance(caught, _Raised):  # ``type(error)`` in an except: its class
                return self.u.answer.members[caught.member]
        if target is isinstance or target is type:
            return self._type_test(frame, node, target)
        if target is len and len(node.args) == 1:
            return self._length(frame, node, self.eval(node.args[0], frame))
        helper = HELPERS.get(getattr(target, "__name__", ""))
        if helper is not None and helper[0] is target:
            arguments = [self.eval(a, frame) for a in node.args]
            return helper[1](self, frame, node, arguments)
        if getattr(target, "__replan_opaque__", False):
            arguments = [self.eval(a, frame) for a in node.args]
            return self._opaque(frame, node, target, arguments)
        if inspect.isfunction(target) and _has_source(target):
            arguments = [self.eval(a, frame) for a in node.args]
            state, value = self.run_function(
                target, arguments, frame, state=frame.state, nodes=node.args
            )
            frame.state = state
            return value
        if callable(target):
            return self._input(frame, node)
        raise self.fail(frame, node, "call not understood")

    # -- the argument's type: inputs of the step ------------------------------------------

    def path_of(self, node: ast.AST | None, frame: _Frame) -> ast.expr | None:
        """The expression of the event's argument ``node`` stands for (in the event
        parameter's name), or None when it is not a part of the argument."""
        if isinstance(node, ast.Name):
            return frame.paths.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.path_of(node.value, frame)
            return None if base is None else ast.Attribute(base, node.attr, ast.Load())
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            base = self.path_of(node.value, frame)
            return None if base is None else ast.Subscript(base, node.slice, ast.Load())
        return None

    def _atom(self, text: str) -> z3.BoolRef:
        if text not in self.inputs:
            self.inputs[text] = z3.Bool(text)
        return self.inputs[text]

    def _type_test(self, frame: _Frame, node: ast.Call, function: Any) -> Any:
        """``isinstance(<argument>, T)`` is an input of the step; ``type(<argument>)``
        is one once compared with a class. Written in the event parameter's name
        (``type(obs.key) is str``) whichever local the body reads it from, so the same
        test is the same input in the declaration, a property and the generated code."""
        path = self.path_of(node.args[0], frame) if node.args else None
        if path is None:
            return self._input(frame, node)
        if function is type and len(node.args) == 1:
            return _TypeOf(ast.unparse(path))
        if function is isinstance and len(node.args) == 2:
            kinds = self.eval(node.args[1], frame)
            if not isinstance(kinds, Const):
                raise self.fail(frame, node, "isinstance of a class the translator cannot name")
            return self._atom(f"isinstance({ast.unparse(path)}, {_class_text(kinds.value)})")
        raise self.fail(frame, node, "type test not understood")

    def _opaque(
        self, frame: _Frame, node: ast.Call, function: Any, arguments: list[Any]
    ) -> z3.ExprRef:
        """A call of an ``@opaque`` function: an uninterpreted function of the z3 terms
        of its arguments (a record's fields, an optional value once present)."""
        terms: list[z3.ExprRef] = []
        for argument in arguments:
            terms.extend(self._terms(frame, node, argument))
        result = typing.get_type_hints(function).get("return")
        sort = z3.BoolSort() if result is bool else z3.IntSort()  # a str: one int per value
        declared = z3.Function(function.__name__, *(t.sort() for t in terms), sort)
        return declared(*terms)

    def _terms(self, frame: _Frame, node: ast.AST, value: Any) -> list[z3.ExprRef]:
        if isinstance(value, Opt):
            self.require(frame, value.some, f"the argument of `{_where(node)}` is not None")
            return self._terms(frame, node, value.value)
        if isinstance(value, Record):
            return [
                t for name in value.fields for t in self._terms(frame, node, value.fields[name])
            ]
        if isinstance(value, z3.ExprRef):
            return [value]
        if isinstance(value, Const) and isinstance(value.value, str):
            return [z3.IntVal(self.u.intern(value.value))]
        if isinstance(value, Const) and isinstance(value.value, int):
            return [z3.IntVal(value.value)]
        raise self.fail(frame, node, f"an argument z3 cannot name: {value!r}")

    def _length(self, frame: _Frame, node: ast.Call, value: Any) -> Any:
        if isinstance(value, Const):
            return Const(len(value.value))
        if isinstance(value, Tup):
            return Const(len(value.items))
        if isinstance(value, TraceLog):
            return value.count
        raise self.fail(frame, node, "len of a value the translator does not model")

    def _input(self, frame: _Frame, node: ast.Call) -> z3.BoolRef:
        """A module function of the event's argument alone: a property of the input.
        A local standing for a part of the argument (``version`` after ``key, version,
        state, source = obs``) is that part: the input is written in the event
        parameter's name (``in_bounds(obs.version)``), so the same test is the same
        input wherever it is written."""
        used = {n.id for a in node.args for n in ast.walk(a) if isinstance(n, ast.Name)}
        parts = {n for n in used if n in frame.paths}
        free = {
            n
            for n in used - parts
            if n not in frame.parameters and n not in self.globals and not hasattr(builtins, n)
        }
        if (
            not (used & frame.parameters or parts)
            or free
            or any(
                isinstance(n, ast.Name) and n.id == "self" for a in node.args for n in ast.walk(a)
            )
        ):
            raise self.fail(frame, node, "a call over the run's fields is not understood")
        text = _where(_InParameterNames(frame.paths).visit(copy.deepcopy(node)))
        if text not in self.inputs:
            self.inputs[text] = z3.Bool(text)
        return self.inputs[text]

    def _quantifier(self, frame: _Frame, node: ast.Call, is_any: bool) -> Any:
        if len(node.args) != 1 or not isinstance(node.args[0], ast.GeneratorExp):
            raise self.fail(frame, node, "any/all over a generator expression only")
        generator = node.args[0]
        if len(generator.generators) != 1 or generator.generators[0].is_async:
            raise self.fail(frame, node, "one `for` clause only")
        clause = generator.generators[0]
        iterable = self.eval(clause.iter, frame)
        if isinstance(clause.target, ast.Tuple) and all(
            isinstance(e, ast.Name) for e in clause.target.elts
        ):
            variables = [e.id for e in clause.target.elts if isinstance(e, ast.Name)]
        elif isinstance(clause.target, ast.Name):
            variables = [clause.target.id]
        else:
            raise self.fail(frame, node, "the loop variable must be a name or a tuple of names")

        def holds_for(bindings: dict[str, Any]) -> tuple[z3.BoolRef, z3.BoolRef]:
            inner = frame.inner(env={**frame.env, **bindings})
            conditions = [self.boolean(inner, self.eval(c, inner)) for c in clause.ifs]
            return all_of(*conditions), self.boolean(inner, self.eval(generator.elt, inner))

        def unroll(collection: Any) -> z3.BoolRef:
            if isinstance(collection, ContentMap) and len(variables) == 2 and not is_any:
                # "every remembered (key, version)": stated for one arbitrary pair, free
                # constants named after the loop, so the same statement about the state
                # before and after a step speaks of the same pair. A validity proof over
                # free constants holds for all of them; z3's queries stay quantifier-free.
                where = ast.unparse(clause.iter)
                key = z3.Const(f"any {variables[0]} of {where}", self.u.key.sort)
                version = z3.Int(f"any {variables[1]} of {where}")
                condition, value = holds_for({variables[0]: key, variables[1]: version})
                seen = CONTENT.is_some(z3.Select(collection.array, key, version))
                return z3.Implies(all_of(seen, condition), value)
            if not isinstance(collection, Const):
                raise self.fail(frame, node, "iteration over a symbolic collection")
            parts = []
            for element in collection.value:
                values = element if len(variables) > 1 else (element,)
                bindings = {name: Const(item) for name, item in zip(variables, values, strict=True)}
                condition, value = holds_for(bindings)
                parts.append(all_of(condition, value) if is_any else z3.Implies(condition, value))
            return any_of(*parts) if is_any else all_of(*parts)

        return self.lift(frame, iterable, unroll)

    def _call_bound(
        self, frame: _Frame, node: ast.Call, bound: _Bound, arguments: list[Any]
    ) -> Any:
        receiver, name = bound.receiver, bound.name
        if isinstance(receiver, FMap) and name == "get" and 1 <= len(arguments) <= 2:
            return self.map_get(
                frame, receiver, arguments[0], arguments[1] if len(arguments) == 2 else None
            )
        if isinstance(receiver, ContentMap) and name == "get" and len(arguments) == 1:
            return self.content_entry(frame, receiver, arguments[0])
        if isinstance(receiver, FSet) and name == "issuperset" and len(arguments) == 1:

            def superset(collection: Any) -> z3.BoolRef:
                if not isinstance(collection, Const):
                    raise self.fail(frame, node, "issuperset of a symbolic collection")
                return all_of(
                    *(receiver.members.get(str(k), z3.BoolVal(False)) for k in collection.value)
                )

            return self.lift(frame, arguments[0], superset)
        pure = name in ("get", "issuperset", "issubset", "count", "index")
        if pure and isinstance(receiver, Const) and all(isinstance(a, Const) for a in arguments):
            return Const(getattr(receiver.value, name)(*(a.value for a in arguments)))
        raise self.fail(frame, node, f"method {name!r} is not understood here")

    # -- statements ------------------------------------------------------------------------

    def assign_field(self, frame: _Frame, node: ast.AST, name: str, value: Any) -> None:
        if name in UNMODELLED_FIELDS:
            return
        kind = FIELD_KINDS.get(name)
        if kind is None:
            raise self.fail(
                frame, node, f"assignment to {name!r}, which the abstraction does not model"
            )
        old = frame.state.get(name)
        frame.state[name] = self.coerce_field(frame, kind, value, old)

    def coerce_field(self, frame: _Frame, kind: str, value: Any, old: Any) -> Any:
        u = self.u
        if kind in ("int", "mode"):
            sort = z3.IntSort() if kind == "int" else u.mode.sort
            return self.term(frame, value, sort)
        if kind == "plan?":
            blank = old.value if isinstance(old, Opt) else _blank_plan(u)
            if isinstance(value, Const) and value.value is None:
                return Opt(z3.BoolVal(False), blank)
            if isinstance(value, Record) and value.kind == "Plan":
                return Opt(z3.BoolVal(True), value)
            if isinstance(value, Opt):
                return value
        if isinstance(value, Const) and isinstance(value.value, dict | set) and not value.value:
            return empty_field(u, kind)
        if isinstance(value, FMap | FSet | IdSet | ContentMap):
            return value
        raise self.fail(frame, frame.where, f"cannot store {value!r} in a {kind} field")

    def exec_block(self, statements: list[ast.stmt], index: int, frame: _Frame) -> list[_Path]:
        while index < len(statements):
            statement = statements[index]
            if isinstance(statement, ast.Return):
                value = (
                    Const(None) if statement.value is None else self.eval(statement.value, frame)
                )
                return [_Path(frame, ("return", value))]
            if isinstance(statement, ast.Raise):
                exception = statement.exc
                if exception is None:  # re-raise what the enclosing ``except`` caught
                    caught = frame.env.get(_RAISING)
                    if not isinstance(caught, str):
                        raise self.fail(frame, statement, "a bare raise outside an except")
                    return [_Path(frame, ("raise", caught))]
                target = exception.func if isinstance(exception, ast.Call) else exception
                name = target.id if isinstance(target, ast.Name) else "other"
                return [_Path(frame, ("raise", name))]
            if isinstance(statement, ast.Try):
                paths = []
                for path in self.exec_try(statement, frame):
                    if path.outcome is None:
                        paths.extend(self.exec_block(statements, index + 1, path.frame))
                    else:
                        paths.append(path)
                return paths
            if isinstance(statement, ast.If):
                test = _decided(self.eval(statement.test, frame))
                if isinstance(test, Const):
                    body = statement.body if test.value else statement.orelse
                    statements = [*body, *statements[index + 1 :]]
                    index = 0
                    continue
                condition = self.boolean(frame, test)
                paths: list[_Path] = []
                for guard, body in (
                    (condition, statement.body),
                    (z3.Not(condition), statement.orelse),
                ):
                    branch = frame.inner(
                        state=dict(frame.state),
                        env=dict(frame.env),
                        pc=(*frame.pc, guard),
                        paths=dict(frame.paths),
                    )
                    for path in self.exec_block(list(body), 0, branch):
                        if path.outcome is None:
                            paths.extend(self.exec_block(statements, index + 1, path.frame))
                        else:
                            paths.append(path)
                return paths
            self.exec_simple(statement, frame)
            index += 1
        return [_Path(frame, None)]

    def exec_try(self, statement: ast.Try, frame: _Frame) -> list[_Path]:
        """``try: ... except Exception as error: ...`` (what the generated dispatch
        wraps every call in): a path that raises continues in the handler, ``error``
        naming the class it raised."""
        handlers = statement.handlers
        if statement.orelse or statement.finalbody or len(handlers) != 1:
            raise self.fail(frame, statement, "only try / one except is understood")
        handler = handlers[0]
        caught = handler.type
        if not (isinstance(caught, ast.Name) and caught.id == "Exception"):
            raise self.fail(frame, statement, "only `except Exception` is understood")
        paths = []
        for path in self.exec_block(list(statement.body), 0, frame):
            if path.outcome is None or path.outcome[0] != "raise":
                paths.append(path)
                continue
            name = path.outcome[1]
            inner = path.frame
            inner.env = {**inner.env, _RAISING: name}
            if handler.name is not None:
                member = f"raised {name if name in _ERRORS else 'other'}"
                inner.env[handler.name] = _Raised(member)
            for after in self.exec_block(list(handler.body), 0, inner):
                after.frame.env.pop(_RAISING, None)
                paths.append(after)
        return paths

    def exec_simple(self, statement: ast.stmt, frame: _Frame) -> None:
        if isinstance(statement, ast.Pass):
            return
        if isinstance(statement, ast.Assert):
            # what the body takes for granted: an obligation, then assumed
            condition = self.boolean(frame, self.eval(statement.test, frame))
            self.require(frame, condition, f"`{_where(statement.test)}`")
            frame.pc = (*frame.pc, condition)
            return
        if isinstance(statement, ast.Expr):
            value = statement.value
            if isinstance(value, ast.Constant):
                return  # a docstring
            if (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute)
                and value.func.attr in ("add", "discard", "append")
                and self.field_of(value.func.value, frame) is not None
                and len(value.args) == 1
            ):
                name = self.field_of(value.func.value, frame)
                assert name is not None
                if name == "_trace":
                    if name in frame.state:  # the generated dispatch's trace record
                        log = frame.state[name]
                        item = self.eval(value.args[0], frame)
                        frame.state[name] = TraceLog(log.count + 1, item)
                    return
                item = self.eval(value.args[0], frame)
                frame.state[name] = self.set_update(
                    frame, statement, frame.state[name], item, value.func.attr == "add"
                )
                return
            if isinstance(value, ast.Call):
                self.eval(value, frame)
                return
            raise self.fail(frame, statement, "statement not understood")
        if isinstance(statement, ast.AnnAssign) and statement.value is None:
            return  # a declaration (``result: bool``)
        if isinstance(statement, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            if len(targets) != 1 or statement.value is None:
                raise self.fail(frame, statement, "one target, one value")
            target = targets[0]
            name = _self_field(target)
            if name in UNMODELLED_FIELDS:
                return
            value = self.eval(statement.value, frame)
            if isinstance(statement, ast.AugAssign):
                if name is None or not isinstance(statement.op, ast.Add | ast.Sub):
                    raise self.fail(frame, statement, "only `self.<field> += / -=` is understood")
                current = self.term(frame, frame.state[name], z3.IntSort())
                step = self.term(frame, value, z3.IntSort())
                value = current + step if isinstance(statement.op, ast.Add) else current - step
            if name is not None:
                self.assign_field(frame, statement, name, value)
            elif isinstance(target, ast.Name):
                self.bind(frame, target.id, value, statement.value)
            elif isinstance(target, ast.Tuple) and all(
                isinstance(e, ast.Name) for e in target.elts
            ):
                self.unpack(frame, statement, target, value, statement.value)
            elif isinstance(target, ast.Subscript) and self.field_of(target.value, frame):
                field_name = self.field_of(target.value, frame)
                assert field_name is not None
                index = self.eval(target.slice, frame)
                frame.state[field_name] = self.store(
                    frame, statement, frame.state[field_name], index, value
                )
            else:
                raise self.fail(frame, statement, "assignment target not understood")
            return
        raise self.fail(frame, statement, f"{type(statement).__name__} is not understood")

    def field_of(self, node: ast.AST, frame: _Frame) -> str | None:
        """The field of ``self`` that ``node`` names: ``self.<field>``, or a local
        alias of one (``contents`` after ``contents = self._contents``)."""
        name = _self_field(node)
        if name is not None:
            return name
        if isinstance(node, ast.Name):
            bound = frame.env.get(node.id)
            if isinstance(bound, _FieldAlias):
                return bound.name
        return None

    def bind(self, frame: _Frame, name: str, value: Any, node: ast.expr | None) -> None:
        """A local: an alias when it names a container field of ``self`` (writes
        through it reach the field), and the argument's part it reads, if any."""
        field_name = _self_field(node) if node is not None else None
        if field_name in FIELD_KINDS and not isinstance(value, z3.ExprRef | Const):
            frame.env[name] = _FieldAlias(field_name)
        else:
            frame.env[name] = value
        path = self.path_of(node, frame) if node is not None else None
        if path is None:
            frame.paths.pop(name, None)
        else:
            frame.paths[name] = path

    def unpack(
        self, frame: _Frame, node: ast.AST, target: ast.Tuple, value: Any, source: ast.expr
    ) -> None:
        """``a, b = <record or tuple>``: each name its field or item."""
        names = [e.id for e in target.elts if isinstance(e, ast.Name)]
        if isinstance(value, Record):
            fields = list(RECORD_TYPES[value.kind]._fields)  # type: ignore[attr-defined]
            items = [value.fields[f] for f in fields]
        elif isinstance(value, Tup):
            fields, items = [], list(value.items)
        else:
            raise self.fail(frame, node, "unpacking of a value the translator does not model")
        if len(items) != len(names):
            raise self.fail(frame, node, "unpacking into the wrong number of names")
        base = self.path_of(source, frame)
        for index, (name, item) in enumerate(zip(names, items, strict=True)):
            frame.env[name] = item
            if base is not None and fields:
                frame.paths[name] = ast.Attribute(base, fields[index], ast.Load())
            else:
                frame.paths.pop(name, None)

    def set_update(self, frame: _Frame, node: ast.AST, container: Any, item: Any, add: bool) -> Any:
        if isinstance(container, FSet):
            members = {
                k: z3.If(self.equal(frame, item, Const(k)), z3.BoolVal(add), m)
                for k, m in container.members.items()
            }
            return FSet(container.domain, members)
        if isinstance(container, IdSet):
            return IdSet(
                z3.Store(container.array, self.term(frame, item, z3.IntSort()), z3.BoolVal(add))
            )
        raise self.fail(frame, node, "set update of a value the translator does not model")

    def store(self, frame: _Frame, node: ast.AST, container: Any, index: Any, value: Any) -> Any:
        if isinstance(container, FMap):
            entries = {}
            for k, entry in container.entries.items():
                here = self.equal(frame, index, Const(k))
                stored = Opt(z3.BoolVal(True), self.term(frame, value, _sort_of(entry.value)))
                entries[k] = self.merge(here, stored, entry)
            return FMap(container.domain, entries)
        if isinstance(container, ContentMap):
            if not isinstance(value, Tup) or len(value.items) != 2 or not isinstance(index, Tup):
                raise self.fail(
                    frame, node, "_contents stores (state, source) under (key, version)"
                )
            key = self.term(frame, index.items[0], self.u.key.sort)
            version = self.term(frame, index.items[1], z3.IntSort())
            content = CONTENT.some(
                self.term(frame, value.items[0], EVIDENCE.sort),
                self.term(frame, value.items[1], z3.IntSort()),
            )
            return ContentMap(z3.Store(container.array, key, version, content))
        raise self.fail(frame, node, "store into a value the translator does not model")

    def merge_states(self, condition: z3.BoolRef, a: State, b: State) -> State:
        return {name: self.merge(condition, a[name], b[name]) for name in a}

    # -- calls -----------------------------------------------------------------------------

    def call(
        self,
        name: str,
        arguments: list[Any],
        caller: _Frame,
        *,
        as_answer: bool = False,
        nodes: list[ast.expr] | None = None,
    ) -> tuple[State, Any]:
        """Run the body of ``self.<name>(*arguments)``: the state after it and its value
        (as an ``Answer`` term when ``as_answer``: a raise is an answer then)."""
        definition = _definition(self.model_class, name)
        kind = "guard" if name in _guard_names(self.u.model) else "action"
        method = getattr(self.model_class, name, None)
        return self.run_definition(
            definition,
            [SELF, *arguments],
            caller,
            state=caller.state,
            where=f"{kind} {name!r} ({self.model_class.__name__})",
            as_answer=as_answer,
            # names in a method resolve in the module that defines it, whoever calls it
            scope=getattr(method, "__globals__", None),
            nodes=None if nodes is None else [None, *nodes],
        )

    def run_function(
        self,
        function: Callable[..., Any],
        arguments: list[Any],
        caller: _Frame,
        *,
        state: State,
        where: str = "",
        nodes: list[ast.expr | None] | None = None,
        as_answer: bool = False,
    ) -> tuple[State, Any]:
        """Run a plain function's body (a property, a helper of one, a member of the
        run, a generated method) with ``arguments``, names resolving in its own
        module."""
        return self.run_definition(
            _function_definition(function),
            arguments,
            caller,
            state=state,
            where=where or f"function {function.__name__!r}",
            scope=getattr(function, "__globals__", None),
            nodes=nodes,
            as_answer=as_answer,
        )

    def run_definition(
        self,
        definition: ast.FunctionDef,
        arguments: list[Any],
        caller: _Frame,
        *,
        state: State,
        where: str,
        as_answer: bool = False,
        scope: Mapping[str, Any] | None = None,
        nodes: list[ast.expr | None] | None = None,
    ) -> tuple[State, Any]:
        parameters = [a.arg for a in definition.args.args]
        if len(parameters) != len(arguments):
            raise TranslationError(
                f"{caller.where}: {definition.name} takes {parameters}, got "
                f"{len(arguments)} arguments"
            )
        argument_paths: dict[str, ast.expr] = {}
        for index, parameter in enumerate(parameters):
            node = None if nodes is None else nodes[index]
            found = self.path_of(node, caller) if node is not None else None
            if found is not None:
                argument_paths[parameter] = found
        env = dict(zip(parameters, arguments, strict=True))
        if env.get("self", SELF) is SELF:
            env.pop("self", None)  # ``self`` reads the frame's state
        frame = _Frame(
            dict(state),
            env,
            caller.pc,
            where,
            frozenset(parameters) | caller.parameters,
            argument_paths,
            scope if scope is not None else caller.scope,
        )
        paths = self.exec_block(list(definition.body), 0, frame)
        results: list[tuple[z3.BoolRef, State, Any]] = []
        for path in paths:
            condition = all_of(*path.frame.pc[len(caller.pc) :])
            outcome = path.outcome
            if outcome is None:
                value: Any = Const(None)
            elif outcome[0] == "return":
                value = outcome[1]
            elif as_answer:
                value = self.u.answer.members[
                    f"raised {outcome[1] if outcome[1] in _ERRORS else 'other'}"
                ]
            else:
                self.require(caller, z3.Not(condition), f"{definition.name} does not raise")
                value = Const(False)
            if as_answer:
                value = self.answer_term(caller, value)
            results.append((condition, path.frame.state, value))
        _, state, value = results[-1]
        for condition, other_state, other_value in reversed(results[:-1]):
            state = self.merge_states(condition, other_state, state)
            value = self.merge(condition, other_value, value)
        return state, value

    def answer_term(self, frame: _Frame, value: Any) -> z3.ExprRef:
        if isinstance(value, Const):
            return self.u.answer_of(value.value)
        if isinstance(value, z3.BoolRef):
            return z3.If(value, self.u.answer.members["True"], self.u.answer.members["False"])
        if isinstance(value, z3.ExprRef) and value.sort() == self.u.answer.sort:
            return value
        raise self.fail(frame, frame.where, f"{value!r} is not an answer")


_OPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_BINOPS = {ast.Add: "+", ast.Sub: "-"}


def all_of(*parts: z3.BoolRef) -> z3.BoolRef:
    """``z3.And`` that is True when empty and the part itself when single (and skips
    z3py's per-argument coercion, which dominates for a policy of hundreds of keys)."""
    return _nary(z3.Z3_mk_and, parts, True)


def any_of(*parts: z3.BoolRef) -> z3.BoolRef:
    """``z3.Or`` that is False when empty and the part itself when single."""
    return _nary(z3.Z3_mk_or, parts, False)


def _nary(make: Any, parts: tuple[z3.BoolRef, ...], empty: bool) -> z3.BoolRef:
    if not parts:
        return z3.BoolVal(empty)
    if len(parts) == 1:
        return parts[0]
    context = parts[0].ctx
    array = (z3.Ast * len(parts))(*(p.as_ast() for p in parts))
    return z3.BoolRef(make(context.ref(), len(parts), array), context)


_NO_ENTRY = object()


def _entry_of(container: FSet | FMap, key: object) -> Any:
    """The member (``FSet``) or entry (``FMap``) of a concrete ``key``, False when the
    container has none, ``_NO_ENTRY`` for a key a dict cannot look up (unhashable):
    the disjunction over every key then decides."""
    members: Mapping[str, Any] = (
        container.members if isinstance(container, FSet) else container.entries
    )
    try:
        found = members.get(key)  # type: ignore[call-overload]
    except TypeError:
        return _NO_ENTRY
    return z3.BoolVal(False) if found is None else found


def _self_field(node: ast.AST) -> str | None:
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    ):
        return node.attr
    return None


def _sort_of(value: Any) -> z3.SortRef | None:
    return value.sort() if isinstance(value, z3.ExprRef) else None


@cache
def _guard_names(model: MachineModel) -> frozenset[str]:
    return frozenset(g for t in model.transitions for g in t.guard_names)


@cache
def _inlined_guard(model: MachineModel, model_class: type, index: int) -> ast.expr:
    """The transition's guard with every named guard's body inlined by the generator
    (what the generated controller evaluates), parsed once per declaration."""
    transition = model.transitions[index]
    tree = transition.guard_tree
    assert tree is not None
    return _Generator(model, model_class).translate(tree, transition.event)


@cache
def _definition(model_class: type, name: str) -> ast.FunctionDef:
    function = getattr(model_class, name)
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    definition = tree.body[0]
    if not isinstance(definition, ast.FunctionDef):
        raise TranslationError(f"{name}: not a plain method")
    return definition


def _is_body_of_class(bound: _Bound) -> bool:
    """``bound`` is a function with readable source, read on a class (a body called
    through the bodies' class)."""
    receiver = bound.receiver
    if not isinstance(receiver, Const) or not isinstance(receiver.value, type):
        return False
    function = getattr(receiver.value, bound.name, None)
    return inspect.isfunction(function) and _has_source(function)


@cache
def _function_definition(function: Callable[..., Any]) -> ast.FunctionDef:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError) as error:
        raise TranslationError(
            f"{function.__name__}: its source cannot be read ({error})"
        ) from None
    definition = tree.body[0]
    if not isinstance(definition, ast.FunctionDef):
        raise TranslationError(f"{function.__name__}: not a plain function")
    return definition


def _decided(value: Any) -> Any:
    """A test whose outcome is already known, as a ``Const`` (Python then runs only
    the branch taken, and so does the translation)."""
    if isinstance(value, z3.BoolRef):
        simple = z3.simplify(value)
        if z3.is_true(simple) or z3.is_false(simple):
            return Const(z3.is_true(simple))
    return value


def _has_source(function: Callable[..., Any]) -> bool:
    try:
        inspect.getsourcefile(function)
        inspect.getsourcelines(function)
    except (OSError, TypeError):
        return False
    return True


def _class_text(kind: object) -> str:
    """How a class reads in an input's text (``str``, ``Observation``)."""
    if isinstance(kind, tuple):
        return "(" + ", ".join(_class_text(k) for k in kind) + ")"
    name = getattr(kind, "__name__", None)
    if not isinstance(kind, type) or name is None:
        raise TranslationError(f"{kind!r} is not a class")
    return str(name)


def _empty(u: Universe, container: Any) -> z3.BoolRef:
    """The container holds nothing."""
    if isinstance(container, FMap):
        return all_of(*(z3.Not(e.some) for e in container.entries.values()))
    if isinstance(container, FSet):
        return all_of(*(z3.Not(m) for m in container.members.values()))
    if isinstance(container, IdSet):
        return container.array == z3.K(z3.IntSort(), z3.BoolVal(False))
    assert isinstance(container, ContentMap)
    return container.array == empty_field(u, "contents").array


def _subset(small: z3.ArrayRef, large: z3.ArrayRef) -> z3.BoolRef:
    """Every member of ``small`` is in ``large`` (sets as arrays to bool), without a
    quantifier: ``large | small == large``."""
    union = z3.Map(z3.Or(z3.Bool("a"), z3.Bool("b")).decl(), large, small)
    return union == large


# ---- the vocabulary's helpers (spec/vocabulary.py), in z3 ---------------------------------


def _helper_raised(t: Translator, frame: _Frame, node: ast.AST, arguments: list[Any]) -> Any:
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


def _helper_unchanged(t: Translator, frame: _Frame, node: ast.AST, arguments: list[Any]) -> Any:
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
            parts.append(_same(before.state["_latest_version"], after.state["_latest_version"]))
            parts.extend(
                t.u.evidence_state(before.state, k) == t.u.evidence_state(after.state, k)
                for k in t.u.policy.keys
            )
        else:
            parts.extend(_same(before.state[f], after.state[f]) for f in fields)
    return all_of(*parts)


def _helper_with_entry(t: Translator, frame: _Frame, node: ast.AST, arguments: list[Any]) -> Any:
    container, index, value = arguments
    if not isinstance(container, ContentMap | FMap):
        raise t.fail(frame, node, "with_entry() of a value the translator does not model")
    return t.store(frame, node, container, index, value)


def _helper_with_member(t: Translator, frame: _Frame, node: ast.AST, arguments: list[Any]) -> Any:
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


def _blank_plan(u: Universe) -> Record:
    return Record(
        "Plan",
        {
            "id": z3.IntVal(0),
            "revision": z3.IntVal(0),
            "evidence_revision": z3.IntVal(0),
            "step": u.step.members[UNDECLARED],
            "resource": u.resource.members[UNDECLARED],
        },
    )


def empty_field(u: Universe, kind: str) -> Any:
    keys = list(u.policy.keys)
    if kind == "key->int":
        return FMap(u.key, {k: Opt(z3.BoolVal(False), z3.IntVal(0)) for k in keys})
    if kind == "key->evidence":
        return FMap(u.key, {k: Opt(z3.BoolVal(False), EVIDENCE.members["Unknown"]) for k in keys})
    if kind == "key set":
        return FSet(u.key, {k: z3.BoolVal(False) for k in keys})
    if kind == "id set":
        return IdSet(z3.K(z3.IntSort(), z3.BoolVal(False)))
    if kind == "contents":
        key, version = z3.Const("key", u.key.sort), z3.Int("version")
        return ContentMap(z3.Lambda([key, version], CONTENT.none))
    raise TranslationError(f"no empty value for a {kind} field")


# ---- states ------------------------------------------------------------------------------


def _fresh_entry(label: str, sort: z3.SortRef) -> Callable[[str], Opt]:
    def make(key: str) -> Opt:
        return Opt(z3.Bool(f"{label}[{key}]?"), z3.Const(f"{label}[{key}]", sort))

    return make


def fresh_record(u: Universe, kind: str, prefix: str) -> Record:
    return Record(
        kind,
        {
            name: z3.Const(f"{prefix}.{name}", u.kind_sort(k))
            for name, k in RECORD_FIELDS[kind].items()
        },
    )


def fresh_state(u: Universe, prefix: str) -> State:
    """A state whose every field is a fresh z3 constant (named ``prefix.field``)."""
    keys = list(u.policy.keys)
    state: State = {}
    for name, kind in FIELD_KINDS.items():
        label = f"{prefix}.{name.lstrip('_')}"
        if kind in ("int", "mode"):
            state[name] = z3.Const(label, u.kind_sort(kind))
        elif kind == "plan?":
            state[name] = Opt(z3.Bool(f"{label}?"), fresh_record(u, "Plan", label))
        elif kind == "key->int":
            state[name] = FMap(
                u.key,
                LazyEntries(keys, _fresh_entry(label, z3.IntSort())),
            )
        elif kind == "key->evidence":
            state[name] = FMap(
                u.key,
                LazyEntries(keys, _fresh_entry(label, EVIDENCE.sort)),
            )
        elif kind == "key set":
            state[name] = FSet(u.key, {k: z3.Bool(f"{label}[{k}]") for k in keys})
        elif kind == "id set":
            state[name] = IdSet(z3.Array(label, z3.IntSort(), z3.BoolSort()))
        elif kind == "contents":
            state[name] = ContentMap(z3.Array(label, u.key.sort, z3.IntSort(), CONTENT))
    return state


def initial_state(u: Universe, model_class: type = Run) -> State:
    """The state a fresh run of ``model_class`` is in (its ``__init__`` run, the policy
    the universe's), abstracted; checked against the declaration's initial state."""
    translator = Translator(u, model_class)
    definition = _definition(model_class, "__init__")
    _check_policy_kept(translator, definition, model_class)
    fresh = model_class(u.policy)
    missing = [name for name in FIELD_KINDS if not hasattr(fresh, name)]
    if missing:
        raise TranslationError(
            f"{model_class.__name__}.__init__ leaves {', '.join(missing)} unset "
            "(every field of controller/fields.py must be set)"
        )
    state = abstract_run(u, fresh)
    initial = next(s for s in u.model.states if s.initial)
    if not z3.is_true(z3.simplify(state["_declared_state"] == u.mode_of(initial.id))):
        raise TranslationError(
            f"{model_class.__name__}.__init__ does not start in the declaration's initial "
            f"state ({initial.id})"
        )
    return state


class _Given:
    """Stands for the policy a caller passes to ``__init__``."""


def _check_policy_kept(translator: Translator, definition: ast.FunctionDef, cls: type) -> None:
    """``__init__`` keeps the policy it is given, and takes the default for None: the
    z3 universe *is* that policy, so a body that swapped it would be invisible."""
    assignments = [
        s
        for s in definition.body
        if isinstance(s, ast.Assign | ast.AnnAssign) and _self_field(_target(s)) == "policy"
    ]
    parameters = [a.arg for a in definition.args.args]
    if len(assignments) != 1 or "policy" not in parameters or assignments[0].value is None:
        raise TranslationError(f"{cls.__name__}.__init__ must set self.policy once from `policy`")
    from replan.controller.policy import DEFAULT_POLICY

    given = _Given()
    for passed, expected in ((given, given), (None, DEFAULT_POLICY)):
        frame = _Frame({}, {"policy": Const(passed)}, (), f"{cls.__name__}.__init__", frozenset())
        value = translator.eval(assignments[0].value, frame)
        if not (isinstance(value, Const) and value.value is expected):
            raise TranslationError(
                f"{cls.__name__}.__init__ does not keep the policy it is given "
                f"(with {'a policy' if passed is given else 'None'}: `{_where(assignments[0])}`)"
            )


def _target(statement: ast.Assign | ast.AnnAssign) -> ast.expr:
    return statement.targets[0] if isinstance(statement, ast.Assign) else statement.target


def same_state(a: State, b: State) -> z3.BoolRef:
    """The two states are equal as the abstraction sees them (a None plan's fields and
    an absent entry's value do not count)."""
    parts: list[z3.BoolRef] = []
    for name in FIELD_KINDS:
        parts.append(_same(a[name], b[name]))
    return all_of(*parts)


def _same(a: Any, b: Any) -> z3.BoolRef:
    if isinstance(a, z3.ExprRef):
        return a == b
    if isinstance(a, Opt):
        return all_of(a.some == b.some, z3.Implies(a.some, _same(a.value, b.value)))
    if isinstance(a, Record):
        return all_of(*(_same(a.fields[n], b.fields[n]) for n in a.fields))
    if isinstance(a, FMap):
        return all_of(*(_same(a.entries[k], b.entries[k]) for k in a.entries))
    if isinstance(a, FSet):
        return all_of(*(a.members[k] == b.members[k] for k in a.members))
    if isinstance(a, IdSet | ContentMap):
        return a.array == b.array
    raise TranslationError(f"cannot compare {a!r}")


# ---- one step ----------------------------------------------------------------------------


@dataclass
class Branch:
    """One way the event can go: a declared transition, or a final state absorbing it,
    or the input check refusing it."""

    label: str
    index: int  # the declared transition's index; -1 absorbed or refused
    condition: z3.BoolRef
    state: State
    answer: z3.ExprRef


@dataclass
class StepEncoding:
    """One event as a function of the pre-state and the argument: the branches in
    priority order, and the merged post-state, answer and fired transition index."""

    universe: Universe
    event: str
    pre: State
    argument: Any
    parameter: str | None
    inputs: dict[str, z3.BoolRef]
    assumptions: list[z3.BoolRef]
    branches: list[Branch]
    post: State
    answer: z3.ExprRef
    fired: z3.ArithRef
    obligations: list[Obligation] = field(default_factory=list)
    #: the trace records the call appended, where the relation models the trace (the
    #: generated dispatch appends them; the declaration's relation does not)
    appended: TraceLog | None = None

    def models(self, prop: Any) -> bool:
        """Whether this relation models everything ``prop`` reads."""
        return self.appended is not None or "appended" not in prop.parameters

    @property
    def raised(self) -> z3.BoolRef:
        return any_of(
            *(
                self.answer == self.universe.answer.members[f"raised {e}"]
                for e in (*_ERRORS, "other")
            )
        )

    def label_of(self, index: int) -> str:
        for branch in self.branches:
            if branch.index == index:
                return branch.label
        return f"#{index}"


def fresh_argument(u: Universe, event: str, prefix: str = "arg") -> tuple[str | None, Any]:
    interface = u.model.interface[event]
    if interface.parameter is None:
        return None, Const(None)
    kind = interface.parameter_type
    if kind in RECORD_FIELDS:
        return interface.parameter, fresh_record(u, kind, f"{prefix}:{interface.parameter}")
    if kind == "str":
        return interface.parameter, z3.Int(f"{prefix}:{interface.parameter}")
    raise TranslationError(f"event {event!r}: parameter type {kind!r} has no z3 abstraction")


def encode_event(
    u: Universe,
    event: str,
    model_class: type = Run,
    pre: State | None = None,
    argument: Any = None,
    prefix: str = "",
) -> StepEncoding:
    """The declared transitions of ``event`` as one functional step relation."""
    model = u.model
    translator = Translator(u, model_class)
    generator = _Generator(model, model_class)
    if pre is None:
        pre = fresh_state(u, f"{prefix}pre")
    parameter, fresh = fresh_argument(u, event, f"{prefix}arg")
    if argument is None:
        argument = fresh
    interface = model.interface[event]
    env = {} if parameter is None else {parameter: argument}
    parameters = frozenset(env)
    paths = {} if parameter is None else {parameter: ast.Name(parameter, ast.Load())}
    nodes = [] if parameter is None else [ast.Name(parameter, ast.Load())]
    mode = pre["_declared_state"]
    branches: list[Branch] = []
    # The input check runs first: refused means its error is raised and nothing
    # changes. Its body is translated like any other (its tests of the argument's
    # type are inputs of the step), so a check that lets a malformed input through
    # is visible to the properties.
    accepted: z3.BoolRef = z3.BoolVal(True)
    refused_answer: z3.ExprRef | None = None
    if interface.check is not None:
        frame = _Frame(dict(pre), dict(env), (), f"check {interface.check!r}", parameters, paths)
        _, checked = translator.call(
            interface.check, [argument], frame, as_answer=True, nodes=nodes
        )
        accepted = z3.simplify(checked == u.answer.members["None"])
        refused_answer = checked
    entry_pc: tuple[z3.BoolRef, ...] = () if z3.is_true(accepted) else (accepted,)

    def run_action(
        label: str,
        index: int,
        action: str,
        condition: z3.BoolRef,
        pc: tuple[z3.BoolRef, ...],
        target: str | None,
    ) -> None:
        frame = _Frame(dict(pre), dict(env), (*entry_pc, *pc), label, parameters, paths)
        wanted = [
            p for p in inspect.signature(getattr(model_class, action)).parameters if p != "self"
        ]
        arguments = [argument] if wanted else []
        state, answer = translator.call(
            action, arguments, frame, as_answer=True, nodes=nodes[: len(arguments)]
        )
        if target is not None:
            # The generated dispatch sets the target after the action returns: an
            # action that raises leaves the declared state as the action left it.
            raised = any_of(
                *(answer == u.answer.members[f"raised {e}"] for e in (*_ERRORS, "other"))
            )
            state = dict(state)
            state["_declared_state"] = z3.simplify(
                z3.If(raised, state["_declared_state"], u.mode_of(target))
            )
        branches.append(Branch(label, index, condition, state, answer))

    sources = [s for s in model.active_states if model.leaving(s.id, event)]
    for source in sources:
        here = mode == u.mode_of(source.id)
        earlier: list[z3.BoolRef] = []
        exhaustive = False
        for transition in model.leaving(source.id, event):
            pc = (here, *(z3.Not(g) for g in earlier))
            guard = _guard_term(
                translator, generator, transition, event, env, pre, (*entry_pc, *pc), parameters
            )
            condition = all_of(*pc, guard)
            target = transition.target if transition.target != transition.source else None
            run_action(
                transition.label,
                transition.index,
                transition.action,
                condition,
                (*pc, guard),
                target,
            )
            if transition.cond == "":
                exhaustive = True
                break
            earlier.append(guard)
        if not exhaustive:
            translator.obligations.append(
                Obligation(
                    z3.Implies(here, any_of(*earlier)),
                    f"{source.id} --{event}-->: some declared transition applies",
                )
            )
    stopped = all_of(*(mode != u.mode_of(s.id) for s in sources))
    run_action(
        f"{event} in a final state ({interface.when_stopped})",
        -1,
        interface.when_stopped,
        stopped,
        (stopped,),
        None,
    )

    state, answer, fired = branches[-1].state, branches[-1].answer, z3.IntVal(branches[-1].index)
    for branch in reversed(branches[:-1]):
        state = translator.merge_states(branch.condition, branch.state, state)
        answer = z3.If(branch.condition, branch.answer, answer)
        fired = z3.If(branch.condition, z3.IntVal(branch.index), fired)
    assumptions = list(u.assumptions)
    if refused_answer is not None:
        state = translator.merge_states(accepted, state, pre)
        answer = z3.If(accepted, answer, refused_answer)
        fired = z3.If(accepted, fired, z3.IntVal(-1))
        branches.append(
            Branch(
                f"{event} refused by {interface.check}", -1, z3.Not(accepted), pre, refused_answer
            )
        )
        for branch in branches[:-1]:
            branch.condition = all_of(accepted, branch.condition)
    return StepEncoding(
        universe=u,
        event=event,
        pre=pre,
        argument=argument,
        parameter=parameter,
        inputs=translator.inputs,
        assumptions=assumptions,
        branches=branches,
        post=state,
        answer=answer,
        fired=fired,
        obligations=translator.obligations,
    )


def _guard_term(
    translator: Translator,
    generator: _Generator,
    transition: TransitionInfo,
    event: str,
    env: dict[str, Any],
    pre: State,
    pc: tuple[z3.BoolRef, ...],
    parameters: frozenset[str],
) -> z3.BoolRef:
    """The transition's whole guard, with each named guard's body inlined by the
    generator (exactly the expression the generated controller evaluates)."""
    tree = transition.guard_tree
    if tree is None:
        return z3.BoolVal(True)
    try:
        expression = _inlined_guard(generator.model, generator.model_class, transition.index)
    except Exception as error:
        raise TranslationError(
            f"{transition.label}: the generator cannot inline it: {error}"
        ) from None
    paths = {name: ast.Name(name, ast.Load()) for name in parameters}
    frame = _Frame(
        dict(pre), env, pc, f"guard [{transition.cond}] of {transition.label}", parameters, paths
    )
    value = translator.boolean(frame, translator.eval(expression, frame))
    for name in FIELD_KINDS:
        if frame.state[name] is not pre[name]:
            raise TranslationError(f"{transition.label}: guard [{transition.cond}] changes {name}")
    return value


# ---- concrete runs as abstract states ----------------------------------------------------


def abstract_value(u: Universe, kind: str, value: object) -> z3.ExprRef | None:
    """The z3 constant for a concrete value of a field of kind ``kind`` (None when the
    value has no counterpart, e.g. a malformed argument's field)."""
    if kind == "int":
        return z3.IntVal(value) if type(value) is int else None
    if kind == "name":
        return z3.IntVal(u.intern(value))
    domain = {
        "key": u.key,
        "step": u.step,
        "resource": u.resource,
        "evidence": u.evidence,
        "mode": u.mode,
    }[kind]
    if kind in ("key", "step", "resource"):
        if not isinstance(value, str):
            return None
        return _member(domain, value)
    if kind == "evidence" and not isinstance(value, EvidenceState):
        return None
    return domain.const(value)


def _member(domain: Domain, value: object) -> z3.ExprRef:
    found = domain.const(value)
    return domain.members[UNDECLARED] if found is None else found


def abstract_argument(u: Universe, event: str, value: object) -> Any:
    interface = u.model.interface[event]
    kind = interface.parameter_type
    if kind in RECORD_FIELDS:
        if not isinstance(value, RECORD_TYPES[kind]):
            return None
        return Record(
            kind,
            {
                name: abstract_value(u, k, getattr(value, name))
                for name, k in RECORD_FIELDS[kind].items()
            },
        )
    if kind == "str":
        return abstract_value(u, "name", value)
    return Const(None)


def abstract_run(u: Universe, run: Run, fields: Iterable[str] | None = None) -> State:
    """A concrete run's fields as z3 constants (the abstraction function); only
    ``fields`` when given (building every z3 term costs; a formula may need few)."""
    keys = list(u.policy.keys)

    def ids(values: Iterable[object]) -> IdSet:
        array = empty_field(u, "id set").array
        for plan_id in sorted(values, key=repr):
            array = z3.Store(array, z3.IntVal(u.intern(plan_id)), z3.BoolVal(True))
        return IdSet(array)

    def contents(value: Mapping[tuple[str, int], tuple[EvidenceState, str]]) -> ContentMap:
        array = empty_field(u, "contents").array
        for (key, version), (state, source) in sorted(value.items()):
            content = CONTENT.some(EVIDENCE.const(state), z3.IntVal(u.intern(source)))
            array = z3.Store(array, _member(u.key, key), z3.IntVal(version), content)
        return ContentMap(array)

    def pending(plan: Plan | None) -> Opt:
        if plan is None:
            return Opt(z3.BoolVal(False), _blank_plan(u))
        abstract = {
            name: abstract_value(u, kind, getattr(plan, name))
            for name, kind in RECORD_FIELDS["Plan"].items()
        }
        return Opt(z3.BoolVal(True), Record("Plan", abstract))

    unknown = EvidenceState.UNKNOWN

    def build(name: str) -> Any:
        kind = FIELD_KINDS[name]
        value = getattr(run, name)
        if kind == "mode":
            return u.mode.const(value)
        if kind == "int":
            return z3.IntVal(value)
        if kind == "plan?":
            return pending(value)
        if kind == "contents":
            return contents(value)
        if kind == "key->int":
            return FMap(
                u.key, {k: Opt(z3.BoolVal(k in value), z3.IntVal(value.get(k, 0))) for k in keys}
            )
        if kind == "key->evidence":
            return FMap(
                u.key,
                {
                    k: Opt(z3.BoolVal(k in value), EVIDENCE.const(value.get(k, unknown)))
                    for k in keys
                },
            )
        if kind == "key set":
            return FSet(u.key, {k: z3.BoolVal(k in value) for k in keys})
        if kind == "id set":
            return ids(value)
        raise TranslationError(f"no abstraction of a {kind} field")

    wanted = FIELD_KINDS if fields is None else fields
    return {name: build(name) for name in wanted}


def concrete_key(run: Run, name: str) -> object:
    """A hashable rendering of one field's concrete value: equal keys, equal
    abstractions (what memoised evaluation of a formula on runs relies on)."""
    value = getattr(run, name)
    if isinstance(value, dict):
        return tuple(sorted(value.items(), key=repr))
    if isinstance(value, set | frozenset):
        return tuple(sorted(value, key=repr))
    return (type(value).__name__, value)


class FormulaOnRuns:
    """A formula over a fresh state's variables (and free inputs), evaluated on
    concrete runs: the run's abstraction substituted into it, simplified to a
    constant. Memoised by the concrete values of the fields the formula mentions, of
    which it is a function, so evaluating thousands of runs stays cheap."""

    def __init__(self, universe: Universe, state: State, formula: z3.BoolRef) -> None:
        self.universe = universe
        self.state = state
        self.formula = formula
        self.fields = mentioned_fields(state, formula)
        self._memo: dict[object, bool] = {}

    def __call__(self, run: Run, extra: Iterable[tuple[z3.ExprRef, bool | int]] = ()) -> bool:
        extra = list(extra)
        key = (
            tuple(concrete_key(run, name) for name in self.fields),
            tuple((str(term), value) for term, value in extra),
        )
        if key not in self._memo:
            substitution = pairs(self.state, abstract_run(self.universe, run, self.fields))
            for term, value in extra:
                constant = z3.BoolVal(value) if isinstance(value, bool) else z3.IntVal(value)
                substitution.append((term, constant))
            value = z3.simplify(z3.substitute(self.formula, *substitution))
            if not (z3.is_true(value) or z3.is_false(value)):
                value = _decide_closed(value)  # free variables: valid for all values?
            self._memo[key] = z3.is_true(value)
        return self._memo[key]


def _decide_closed(formula: z3.BoolRef) -> z3.BoolRef:
    """Whether a formula over constants and free variables (``any_version``) holds
    for every value of the free variables, decided by the solver."""
    solver = z3.Solver()
    solver.add(z3.Not(formula))
    verdict = solver.check()
    if verdict == z3.unknown:
        raise AssertionError(f"z3 cannot decide {formula} ({solver.reason_unknown()})")
    return z3.BoolVal(verdict == z3.unsat)


def free_constants(term: z3.ExprRef) -> set[str]:
    """The names of the uninterpreted constants a term mentions."""
    seen: set[int] = set()
    found: set[str] = set()
    stack = [term]
    while stack:
        node = stack.pop()
        key = node.get_id()
        if key in seen:
            continue
        seen.add(key)
        if z3.is_const(node) and node.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            found.add(node.decl().name())
        stack.extend(node.children())
    return found


def mentioned_fields(state: State, term: z3.ExprRef) -> list[str]:
    """The fields of a fresh state whose variables ``term`` mentions."""
    names = free_constants(term)
    wanted = []
    for name in FIELD_KINDS:
        variables = {str(v) for v, _ in _variables(state[name])}
        if variables & names:
            wanted.append(name)
    return wanted


def _variables(value: Any) -> list[tuple[z3.ExprRef, None]]:
    if isinstance(value, z3.ExprRef):
        return [(value, None)]
    if isinstance(value, Opt):
        return _variables(value.some) + _variables(value.value)
    if isinstance(value, Record):
        return [p for v in value.fields.values() for p in _variables(v)]
    if isinstance(value, FMap):
        return [p for v in value.entries.values() for p in _variables(v)]
    if isinstance(value, FSet):
        return [p for v in value.members.values() for p in _variables(v)]
    if isinstance(value, IdSet | ContentMap):
        return [(value.array, None)]
    return []


def pairs(symbolic: Any, concrete: Any) -> list[tuple[z3.ExprRef, z3.ExprRef]]:
    """(variable, constant) pairs matching a fresh symbolic value to a concrete one,
    for ``z3.substitute`` (a None plan's or absent entry's fields are left out)."""
    if isinstance(symbolic, dict):
        return [p for name in concrete for p in pairs(symbolic[name], concrete[name])]
    if isinstance(symbolic, z3.ExprRef):
        return [] if concrete is None else [(symbolic, concrete)]
    if isinstance(symbolic, Opt):
        found = pairs(symbolic.some, concrete.some)
        if z3.is_true(concrete.some):
            found += pairs(symbolic.value, concrete.value)
        return found
    if isinstance(symbolic, Record):
        return [p for n in symbolic.fields for p in pairs(symbolic.fields[n], concrete.fields[n])]
    if isinstance(symbolic, FMap):
        return [
            p for k in symbolic.entries for p in pairs(symbolic.entries[k], concrete.entries[k])
        ]
    if isinstance(symbolic, FSet):
        return [
            p for k in symbolic.members for p in pairs(symbolic.members[k], concrete.members[k])
        ]
    if isinstance(symbolic, IdSet | ContentMap):
        return [(symbolic.array, concrete.array)]
    if isinstance(symbolic, Const):
        return []
    raise TranslationError(f"cannot pair {symbolic!r}")


def stop_reason_mode(u: Universe, reason: StopReason) -> z3.ExprRef:
    found = u.mode.const(reason)
    assert found is not None
    return found


# ---- conformance: does a concrete step satisfy the relation? -----------------------------


def input_values(
    u: Universe, encoding: StepEncoding, argument: object, names: Mapping[str, Any], checker: Any
) -> dict[str, bool]:
    """Each free input of ``encoding`` (a type test of the argument, the event's input
    check) evaluated on the real ``argument``: what pins the inputs to a concrete call
    (``names``: the bodies' module globals; ``checker``: a run whose input check runs)."""
    check = u.model.interface[encoding.event].check
    values = {}
    for text in encoding.inputs:
        if check is not None and text == f"{check}({encoding.parameter})":
            try:
                getattr(checker, check)(argument)
                values[text] = True
            except ValueError:
                values[text] = False
        else:
            env = {} if encoding.parameter is None else {encoding.parameter: argument}
            try:
                values[text] = bool(eval(text, dict(names), env))
            except Exception:  # a part of an argument that is not there (a field of
                continue  # a non-record): no body reads it, so it stays free
    return values


class RelationChecker:
    """Checks concrete steps of a real controller against the z3 step relation: the
    abstraction of the state before, the argument and the pinned inputs, with the
    relation, must admit exactly the answer, the fired transition and the abstraction
    of the state after that the controller showed."""

    def __init__(self, policy: Policy, model: MachineModel, model_class: type = Run) -> None:
        self.universe = u = Universe(policy, model)
        self.model_class = model_class
        self.encodings = {e: encode_event(u, e, model_class) for e in model.events}
        self.solvers: dict[str, z3.Solver] = {}
        #: per event: fresh variables bound to the post-state, answer and fired terms
        self.outputs: dict[str, tuple[State, z3.ExprRef, z3.ArithRef]] = {}
        for event, encoding in self.encodings.items():
            post = fresh_state(u, f"{event}.post")
            answer = z3.Const(f"{event}.answer", u.answer.sort)
            fired = z3.Int(f"{event}.fired")
            solver = z3.Solver()
            solver.add(*encoding.assumptions)
            solver.add(same_state(post, encoding.post), answer == encoding.answer)
            solver.add(fired == encoding.fired)
            self.solvers[event] = solver
            self.outputs[event] = (post, answer, fired)
        self._globals: Mapping[str, Any] = Translator(u, model_class).globals
        self._checker = model_class(policy)

    def input_values(self, event: str, argument: object) -> dict[str, bool]:
        """Each free input of the step, evaluated on the real argument."""
        return input_values(
            self.universe, self.encodings[event], argument, self._globals, self._checker
        )

    def check(
        self,
        event: str,
        before: State,
        argument: object,
        result: object,
        after: State,
        fired: int | None,
    ) -> str | None:
        """None when the relation admits the step, else what differs."""
        u = self.universe
        encoding = self.encodings[event]
        solver = self.solvers[event]
        post, answer, fired_term = self.outputs[event]
        solver.push()
        try:
            solver.add(*(v == c for v, c in pairs(encoding.pre, before)))
            concrete = abstract_argument(u, event, argument)
            if concrete is not None:
                solver.add(*(v == c for v, c in pairs(encoding.argument, concrete)))
            for text, value in self.input_values(event, argument).items():
                solver.add(encoding.inputs[text] == value)
            expected_answer = u.answer_of(result)
            expected_fired = -1 if fired is None else fired
            solver.push()
            solver.add(answer == expected_answer, fired_term == expected_fired)
            solver.add(*(v == c for v, c in pairs(post, after)))
            verdict = solver.check()
            solver.pop()
            if verdict == z3.sat:
                return None
            if solver.check() != z3.sat:
                return "the relation admits no step from this state and argument"
            model = solver.model()
            problems = []
            predicted = model.eval(answer, model_completion=True)
            if not predicted.eq(expected_answer):
                problems.append(f"answer: relation {predicted}, controller {expected_answer}")
            predicted = model.eval(fired_term, model_completion=True)
            if not predicted.eq(z3.IntVal(expected_fired)):
                problems.append(f"fired: relation {predicted}, controller {expected_fired}")
            for name in FIELD_KINDS:
                same = model.eval(_same(post[name], after[name]), model_completion=True)
                if not z3.is_true(same):
                    problems.append(f"{name} differs after the step")
            return "; ".join(problems) or "the relation and the controller disagree"
        finally:
            solver.pop()
