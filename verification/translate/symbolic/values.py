"""The symbolic values the evaluator passes around: constants, optional values,
records, maps and sets over the policy's names, references to the run, and the
frame one body is evaluated in.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import z3  # type: ignore[import-untyped]

from replan.verification.translate.symbolic.universe import (
    CONTENT,
    EVIDENCE,
    UNDECLARED,
    Domain,
    TranslationError,
    Universe,
)

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
class Frame:
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

    def inner(self, **changes: Any) -> Frame:
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
        return Frame(**values)


@dataclass
class _Path:
    frame: Frame
    outcome: tuple[str, Any] | None  # ("return", value) | ("raise", class name) | None


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
