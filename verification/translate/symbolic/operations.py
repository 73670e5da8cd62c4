"""The evaluator's operations on symbolic values: terms, merges of two branches,
equality, membership, map lookups.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import z3  # type: ignore[import-untyped]

from replan.verification.translate.symbolic.terms import (
    _NO_ENTRY,
    _empty,
    _entry_of,
    all_of,
    any_of,
    same_value,
)
from replan.verification.translate.symbolic.universe import CONTENT, EVIDENCE, TranslationError
from replan.verification.translate.symbolic.values import (
    POLICY,
    Choice,
    Const,
    ContentEntry,
    ContentMap,
    FMap,
    Frame,
    FSet,
    IdSet,
    Opt,
    Record,
    TraceLog,
    Tup,
    _Raised,
)


class Operations:
    """Terms of symbolic values, and the comparisons and merges over them."""

    def term(self, frame: Frame, value: Any, sort: z3.SortRef | None = None) -> z3.ExprRef:
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

    def boolean(self, frame: Frame, value: Any) -> z3.BoolRef:
        if isinstance(value, Const):
            return z3.BoolVal(bool(value.value))
        if isinstance(value, z3.BoolRef):
            return value
        if isinstance(value, Choice):
            return self.lift(frame, value, lambda v: self.boolean(frame, v))
        raise self.fail(frame, frame.where, f"{value!r} is not a boolean")

    def merge(self, condition: z3.BoolRef, a: Any, b: Any) -> Any:
        """``a if condition else b`` for any symbolic value.

        Long: one dispatch on the kinds of the two values merged, a few lines per
        kind; together they are the one definition of a conditional value.
        """
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

    def lift(self, frame: Frame, value: Any, function: Callable[[Any], Any]) -> Any:
        """Apply ``function`` to each alternative of a ``Choice`` (or to the value)."""
        if not isinstance(value, Choice):
            return function(value)
        results = [(condition, function(option)) for condition, option in value.options]
        merged = results[-1][1]
        for condition, result in reversed(results[:-1]):
            merged = self.merge(condition, result, merged)
        return merged

    # -- comparisons ---------------------------------------------------------------------

    def equal(self, frame: Frame, a: Any, b: Any) -> z3.BoolRef:
        """``a == b`` as a z3 term, over any two values the translator makes.

        Long: one dispatch on the kinds of the two values compared; each branch is a few
        lines, and the order of the tests (normalising which side is which first)
        is the comparison's meaning."""
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
            return same_value(a, b)
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

    def _equal_const(self, frame: Frame, term: z3.ExprRef, value: Any) -> z3.BoolRef:
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

    def contains(self, frame: Frame, container: Any, item: Any) -> z3.BoolRef:
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

    def content_entry(self, frame: Frame, container: ContentMap, index: Any) -> ContentEntry:
        if not isinstance(index, Tup) or len(index.items) != 2:
            raise self.fail(frame, frame.where, "_contents is indexed by (key, version)")
        key = self.term(frame, index.items[0], self.u.key.sort)
        version = self.term(frame, index.items[1], z3.IntSort())
        return ContentEntry(z3.Select(container.array, key, version))

    def map_get(self, frame: Frame, container: FMap, key: Any, default: Any) -> Any:
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
