"""z3 terms as Promela expressions: the step relation's and the properties' terms
(``verification/translate/symbolic.py``) lowered into the IR of ``verification/translate/ir.py``
over the variables of ``verification/translate/layout.py``.

Owns reading z3's operators (booleans, integers, enumerations, the ``Content``
datatype) and its arrays (stores, ifs, constant arrays and lambdas), which are read
at the domains' positions: an array is never a Promela value, only its cells are.
Anything else fails loudly with ``TranslationError`` naming the term.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import z3  # type: ignore[import-untyped]

from replan.verification.translate.ir import (
    FALSE,
    IR,
    NO_CONTENT,
    TRUE,
    Content,
    binary,
    conj,
    const,
    content_equal,
    content_ite,
    disj,
    equal,
    is_const,
    ite,
    negate,
    var,
)
from replan.verification.translate.layout import ArrayBase, Layout
from replan.verification.translate.symbolic import CONTENT, TranslationError


class Lowerer:
    """z3 terms over bound constants -> IR (arrays read at the domains' positions)."""

    def __init__(
        self, layout: Layout, scalars: dict[str, IR], arrays: dict[str, ArrayBase]
    ) -> None:
        self.layout = layout
        self.scalars = scalars
        self.arrays = arrays
        self._memo: dict[int, Any] = {}
        #: array reads by (array, index, content), the terms kept with the value (z3
        #: reuses the id of a freed term)
        self._reads: dict[tuple[Any, ...], tuple[z3.ExprRef, list[z3.ExprRef], Any]] = {}
        self._key_members = list(layout.u.key.members.values())

    def id_terms(self, index: tuple[int, ...]) -> list[z3.ExprRef]:
        return [z3.IntVal(index[0])]

    def content_terms(self, index: tuple[int, ...]) -> list[z3.ExprRef]:
        return [self._key_members[index[0]], z3.IntVal(index[1])]

    def fail(self, term: z3.ExprRef, problem: str) -> TranslationError:
        text = str(term)
        return TranslationError(
            f"Promela: {problem}: {text[:200]}{'...' if len(text) > 200 else ''}"
        )

    def scalar(self, term: Any) -> IR:
        if isinstance(term, bool):
            return const(term)
        # The term is kept with its value: z3 reuses the id of a freed term.
        key = term.get_id()
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = (term, self._scalar(term))
        result: IR = found[1]
        return result

    def _scalar(self, term: z3.ExprRef) -> IR:
        """A scalar z3 term as Promela IR.

        Long: one dispatch on the z3 operator, a table of a few lines per operator;
        splitting it would scatter the one mapping from z3 to Promela."""
        # one question to z3 for the term's kind, then one for its operator: z3's
        # is_true, is_int_value, ... each ask both again
        ast_kind = z3.Z3_get_ast_kind(term.ctx_ref(), term.as_ast())
        if ast_kind == z3.Z3_NUMERAL_AST and z3.is_int_value(term):
            return const(term.as_long())
        if ast_kind == z3.Z3_QUANTIFIER_AST:
            raise self.fail(term, "a quantifier")
        decl = term.decl()
        kind = decl.kind()
        if kind == z3.Z3_OP_TRUE:
            return TRUE
        if kind == z3.Z3_OP_FALSE:
            return FALSE
        if kind == z3.Z3_OP_UNINTERPRETED and term.num_args() == 0:
            name = decl.name()
            if name not in self.scalars:
                raise self.fail(term, f"the constant {name!r} is not bound")
            return self.scalars[name]
        if kind == z3.Z3_OP_DT_CONSTRUCTOR and term.num_args() == 0:
            enum_key = (term.sort().name(), decl.name())
            if enum_key in self.layout.enum_index:
                return const(self.layout.enum_index[enum_key])
        children = term.children()
        if kind == z3.Z3_OP_AND:
            return conj(*(self.scalar(c) for c in children))
        if kind == z3.Z3_OP_OR:
            return disj(*(self.scalar(c) for c in children))
        if kind == z3.Z3_OP_NOT:
            return negate(self.scalar(children[0]))
        if kind == z3.Z3_OP_IMPLIES:
            return disj(negate(self.scalar(children[0])), self.scalar(children[1]))
        if kind == z3.Z3_OP_XOR:
            return binary("!=", self.scalar(children[0]), self.scalar(children[1]))
        if kind == z3.Z3_OP_ITE:
            if children[1].sort() == CONTENT:
                raise self.fail(term, "a content value where a scalar is expected")
            return ite(self.scalar(children[0]), self.scalar(children[1]), self.scalar(children[2]))
        if kind in (z3.Z3_OP_EQ, z3.Z3_OP_DISTINCT):
            same = self._equal(children[0], children[1])
            if kind == z3.Z3_OP_DISTINCT:
                if len(children) != 2:
                    raise self.fail(term, "distinct over more than two values")
                return negate(same)
            return same
        comparisons = {
            z3.Z3_OP_LE: ("<=", False),
            z3.Z3_OP_LT: ("<", False),
            z3.Z3_OP_GE: ("<=", True),
            z3.Z3_OP_GT: ("<", True),
        }
        if kind in comparisons:
            op, swapped = comparisons[kind]
            left, right = self.scalar(children[0]), self.scalar(children[1])
            return binary(op, right, left) if swapped else binary(op, left, right)
        arithmetic = {z3.Z3_OP_ADD: "+", z3.Z3_OP_SUB: "-", z3.Z3_OP_MUL: "*"}
        if kind in arithmetic:
            result = self.scalar(children[0])
            for child in children[1:]:
                result = binary(arithmetic[kind], result, self.scalar(child))
            return result
        if kind == z3.Z3_OP_UMINUS:
            return binary("-", const(0), self.scalar(children[0]))
        if kind == z3.Z3_OP_SELECT:
            return self.at(children[0], children[1:])
        if kind == z3.Z3_OP_DT_ACCESSOR and children[0].sort() == CONTENT:
            triple = self.content(children[0])
            return triple[1] if decl.eq(CONTENT.content_state) else triple[2]
        if kind == z3.Z3_OP_DT_IS and children[0].sort() == CONTENT:
            present = self.content(children[0])[0]
            return present if decl.eq(CONTENT.is_some) else negate(present)
        raise self.fail(term, f"no Promela for {decl.name()}")

    def _equal(self, left: z3.ExprRef, right: z3.ExprRef) -> IR:
        sort = left.sort()
        if sort == CONTENT:
            return content_equal(self.content(left), self.content(right))
        if isinstance(sort, z3.ArraySortRef):
            base = self._array_base(left) or self._array_base(right)
            if base is None:
                raise self.fail(left, "an equality of arrays with no stored side")
            parts = []
            for index in base.positions:
                terms = self.id_terms(index) if base.kind == "id set" else self.content_terms(index)
                if base.kind == "id set":
                    parts.append(equal(self.at(left, terms), self.at(right, terms)))
                else:
                    parts.append(
                        content_equal(self.content_at(left, terms), self.content_at(right, terms))
                    )
            return conj(*parts)
        return equal(self.scalar(left), self.scalar(right))

    def _array_base(self, term: z3.ExprRef) -> ArrayBase | None:
        """The stored array a term is a version of (through stores and ifs)."""
        if z3.is_const(term) and term.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            return self.arrays.get(term.decl().name())
        if z3.is_quantifier(term):
            return None
        for child in term.children():
            if isinstance(child.sort(), z3.ArraySortRef):
                found = self._array_base(child)
                if found is not None:
                    return found
        return None

    # -- arrays, read at an index -------------------------------------------------------

    def at(self, array: z3.ExprRef, index: Sequence[z3.ExprRef]) -> IR:
        """``array[index]`` for an id set (a boolean)."""
        value = self._read(array, list(index), content=False)
        assert not isinstance(value[0], tuple)
        result: IR = value
        return result

    def content_at(self, array: z3.ExprRef, index: Sequence[z3.ExprRef]) -> Content:
        value: Content = self._read(array, list(index), content=True)
        return value

    def _read(self, array: z3.ExprRef, index: list[z3.ExprRef], content: bool) -> Any:
        # an array of stores is read at each index it is compared at: read once
        key = (array.get_id(), *(i.get_id() for i in index), content)
        found = self._reads.get(key)
        if found is None:
            found = self._reads[key] = (array, index, self._read_anew(array, index, content))
        return found[2]

    def _read_anew(self, array: z3.ExprRef, index: list[z3.ExprRef], content: bool) -> Any:
        if z3.is_quantifier(array):
            if not array.is_lambda():
                raise self.fail(array, "a quantifier where an array is expected")
            body = z3.simplify(z3.substitute_vars(array.body(), *reversed(index)))
            return self.content(body) if content else self.scalar(body)
        decl = array.decl()
        kind = decl.kind()
        children = array.children()
        if kind == z3.Z3_OP_UNINTERPRETED and array.num_args() == 0:
            base = self.arrays.get(decl.name())
            if base is None:
                raise self.fail(array, f"the array {decl.name()!r} is not bound")
            return self._stored(base, index, content)
        if kind == z3.Z3_OP_STORE:
            stored_at = children[1:-1]
            hit = conj(
                *(
                    equal(self.scalar(a), self.scalar(b))
                    for a, b in zip(stored_at, index, strict=True)
                )
            )
            below = self._read(children[0], index, content)
            if content:
                return content_ite(hit, self.content(children[-1]), below)
            return ite(hit, self.scalar(children[-1]), below)
        if kind == z3.Z3_OP_ITE:
            condition = self.scalar(children[0])
            then = self._read(children[1], index, content)
            otherwise = self._read(children[2], index, content)
            return (
                content_ite(condition, then, otherwise)
                if content
                else ite(condition, then, otherwise)
            )
        if kind == z3.Z3_OP_CONST_ARRAY:
            return self.content(children[0]) if content else self.scalar(children[0])
        raise self.fail(array, f"no Promela for the array operation {decl.name()}")

    def _stored(self, base: ArrayBase, index: list[z3.ExprRef], content: bool) -> Any:
        values = [self.scalar(i) for i in index]
        if all(is_const(v) for v in values):
            position = base.positions.get(tuple(self._index_value(i) for i in index))
            return self._cell(base, position, content)
        # A symbolic index: one alternative per position of the domains (outside them
        # nothing is ever stored).
        result: Any = NO_CONTENT if content else FALSE
        for known, position in base.positions.items():
            terms = self.id_terms(known) if base.kind == "id set" else self.content_terms(known)
            hit = conj(*(equal(v, self.scalar(t)) for v, t in zip(values, terms, strict=True)))
            cell = self._cell(base, position, content)
            result = content_ite(hit, cell, result) if content else ite(hit, cell, result)
        return result

    def _index_value(self, term: z3.ExprRef) -> int:
        lowered = self.scalar(term)
        value: int = lowered[1]
        return value

    def _cell(self, base: ArrayBase, position: int | None, content: bool) -> Any:
        if position is None:
            return NO_CONTENT if content else FALSE
        if content:
            return tuple(var(f"{name}[{position}]") for name in base.names)
        return var(f"{base.names[0]}[{position}]")

    def content(self, term: z3.ExprRef) -> Content:
        key = -1 - term.get_id()  # apart from the scalars' keys
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = (term, self._content(term))
        result: Content = found[1]
        return result

    def _content(self, term: z3.ExprRef) -> Content:
        decl = term.decl()
        kind = decl.kind()
        children = term.children()
        if kind == z3.Z3_OP_DT_CONSTRUCTOR:
            if decl.eq(CONTENT.none.decl()):
                return NO_CONTENT
            return (TRUE, self.scalar(children[0]), self.scalar(children[1]))
        if kind == z3.Z3_OP_ITE:
            return content_ite(
                self.scalar(children[0]), self.content(children[1]), self.content(children[2])
            )
        if kind == z3.Z3_OP_SELECT:
            return self.content_at(children[0], children[1:])
        raise self.fail(term, f"no Promela for the content {decl.name()}")
