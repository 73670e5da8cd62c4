"""The expressions of the Promela model: a small IR of hash-consed tuples, folded as
it is built, simplified in context, and printed with shared subexpressions as temps.

Owns what makes the translated model small enough for gcc and fast for pan: constant
folding in the constructors (``conj``, ``ite``, ...), contextual simplification
(``Context``: a branch may assume its condition, which removes the step relation's
repeated "no earlier guard held"), and printing (``Printer``). Knows nothing of z3 or
of the run; ``verification/translate/layout.py`` lowers z3 terms into it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# ---- the IR: hash-consed expression tuples -----------------------------------------------

IR = tuple[Any, ...]


class Node(tuple):  # type: ignore[type-arg]
    """An IR node: a tuple whose hash is computed once, when it is made. A plain
    tuple's hash is recomputed over its whole tree at every dict lookup, and the
    folding looks nodes up in its memo and facts at every visit: with plain tuples
    generating the kernel spent most of its time hashing."""

    h: int

    def __hash__(self) -> int:
        return self.h


def make(*parts: Any) -> IR:
    made = Node(parts)
    made.h = tuple.__hash__(made)
    return made


TRUE: IR = make("c", 1)
FALSE: IR = make("c", 0)


def const(value: int) -> IR:
    return make("c", int(value))


def var(name: str) -> IR:
    return make("v", name)


def is_const(node: IR) -> bool:
    return bool(node[0] == "c")


def negate(node: IR) -> IR:
    if is_const(node):
        return const(not node[1])
    if node[0] == "!":
        inner: IR = node[1]
        return inner
    return make("!", node)


def conj(*parts: IR) -> IR:
    kept: list[IR] = []
    for part in parts:
        if part == FALSE or (is_const(part) and not part[1]):
            return FALSE
        if is_const(part):
            continue
        for item in part[1:] if part[0] == "&&" else (part,):
            if item not in kept:
                kept.append(item)
    if not kept:
        return TRUE
    return kept[0] if len(kept) == 1 else make("&&", *kept)


def disj(*parts: IR) -> IR:
    kept: list[IR] = []
    for part in parts:
        if is_const(part) and part[1]:
            return TRUE
        if is_const(part):
            continue
        for item in part[1:] if part[0] == "||" else (part,):
            if item not in kept:
                kept.append(item)
    if not kept:
        return FALSE
    return kept[0] if len(kept) == 1 else make("||", *kept)


def ite(condition: IR, then: IR, otherwise: IR) -> IR:
    if is_const(condition):
        return then if condition[1] else otherwise
    if then == otherwise:
        return then
    if then == TRUE and otherwise == FALSE:
        return condition
    if then == FALSE and otherwise == TRUE:
        return negate(condition)
    return make("?", condition, then, otherwise)


def binary(op: str, left: IR, right: IR) -> IR:
    if is_const(left) and is_const(right):
        a, b = left[1], right[1]
        folded = {
            "==": lambda: a == b,
            "!=": lambda: a != b,
            "<": lambda: a < b,
            "<=": lambda: a <= b,
            "+": lambda: a + b,
            "-": lambda: a - b,
            "*": lambda: a * b,
        }[op]()
        return const(folded)
    if op in ("==", "<=") and left == right:
        return TRUE
    if op in ("!=", "<") and left == right:
        return FALSE
    return make(op, left, right)


def equal(left: IR, right: IR) -> IR:
    return binary("==", left, right)


Content = tuple[IR, IR, IR]  # (present, state, source)
NO_CONTENT: Content = (FALSE, const(0), const(0))


def content_ite(condition: IR, then: Content, otherwise: Content) -> Content:
    return (
        ite(condition, then[0], otherwise[0]),
        ite(condition, then[1], otherwise[1]),
        ite(condition, then[2], otherwise[2]),
    )


def content_equal(left: Content, right: Content) -> IR:
    return conj(
        equal(left[0], right[0]),
        disj(negate(left[0]), conj(equal(left[1], right[1]), equal(left[2], right[2]))),
    )


# ---- printing ---------------------------------------------------------------------------------


class Printer:
    """IR -> Promela text; subexpressions used more than once become hidden temps.
    The syntax is in class attributes, so another target (the kernel's Python)
    overrides them and ``variable``."""

    NOT = "!{}"
    AND = " && "
    OR = " || "
    ITE = "({condition} -> {then} : {otherwise})"

    def __init__(self, first_temp: int = 0) -> None:
        self.names: dict[IR, str] = {}
        self.lines: list[str] = []
        self.next_temp = first_temp

    def variable(self, name: str) -> str:
        return name

    def share(self, roots: Iterable[IR]) -> None:
        """Give every compound node used twice or more (among ``roots`` and what is
        already named) a temp, assigned in dependency order."""
        counts: dict[IR, int] = {}
        order: list[IR] = []

        def visit(node: IR) -> None:
            if node[0] in ("c", "v") or node in self.names:
                return
            counts[node] = counts.get(node, 0) + 1
            if counts[node] > 1:
                return
            for child in node[1:]:
                visit(child)
            order.append(node)

        for root in roots:
            visit(root)
        for node in order:
            if counts[node] > 1:
                text = self.text(node)
                name = f"t{self.next_temp}"
                self.next_temp += 1
                self.lines.append(f"{name} = {text}")
                self.names[node] = name

    def text(self, node: IR) -> str:
        named = self.names.get(node)
        if named is not None:
            return named
        head = node[0]
        if head == "c":
            return str(node[1])
        if head == "v":
            return self.variable(node[1])
        if head == "!":
            return self.NOT.format(self.text(node[1]))
        if head in ("&&", "||"):
            joiner = self.AND if head == "&&" else self.OR
            return "(" + joiner.join(self.text(c) for c in node[1:]) + ")"
        if head == "?":
            return self.ITE.format(
                condition=self.text(node[1]),
                then=self.text(node[2]),
                otherwise=self.text(node[3]),
            )
        return f"({self.text(node[1])} {head} {self.text(node[2])})"


class Context:
    """Contextual folding: inside ``c -> a : b`` the branch ``a`` may assume ``c`` and
    ``b`` its negation; in ``x && y`` the right side may assume ``x`` (the
    expressions have no side effects, so the order of evaluation is free). Removes
    the repeated "no earlier guard held" of the step relation's priority chains."""

    def __init__(self, rewrites: dict[IR, IR]) -> None:
        self.memo: dict[tuple[IR, int], IR] = {}
        #: the same memo by identity, which answers most visits without comparing
        #: two equal trees node by node
        self.by_identity: dict[tuple[int, int], tuple[IR, IR]] = {}
        #: a number per facts dict (by identity: a set of facts compared by value at
        #: every new dict cost more than the memo hits it added)
        self.fact_dicts: dict[int, tuple[dict[IR, Any], int]] = {}
        #: equalities the layout guarantees (an absent value is stored as zero)
        self.rewrites = rewrites
        #: the facts dict made by assuming a condition in a facts dict, kept: the
        #: same branch reached again (another property's, say) folds with the same dict,
        #: so the memo answers it
        self.assumed: dict[tuple[int, IR, bool], dict[IR, Any]] = {}

    def _token(self, facts: dict[IR, Any]) -> int:
        seen = self.fact_dicts.get(id(facts))
        if seen is not None and seen[0] is facts:
            return seen[1]
        token = len(self.fact_dicts)
        self.fact_dicts[id(facts)] = (facts, token)  # the dict kept alive: ids are reused
        return token

    def run(self, node: IR, facts: dict[IR, Any]) -> IR:
        """``node`` folded, assuming ``facts`` (condition -> its value). A facts dict
        must not change once it has been passed here."""
        token = self._token(facts)
        key = (id(node), token)
        hit = self.by_identity.get(key)
        if hit is not None and hit[0] is node:
            return hit[1]
        result = self._run(node, facts, token)
        self.by_identity[key] = (node, result)  # the node kept alive: ids are reused
        return result

    def _run(self, node: IR, facts: dict[IR, Any], token: int) -> IR:
        if node in facts:
            return const(facts[node])
        node = self.rewrites.get(node, node)
        head = node[0]
        if head == "c":
            return node
        if head == "v":
            known = facts.get(("=", node))
            return node if known is None else const(known)
        key = (node, token)
        found = self.memo.get(key)
        if found is not None:
            return found
        result: IR
        if head == "?":
            condition = self.run(node[1], facts)
            if is_const(condition):
                result = self.run(node[2] if condition[1] else node[3], facts)
            else:
                result = ite(
                    condition,
                    self.run(node[2], self.assume(facts, token, condition, True)),
                    self.run(node[3], self.assume(facts, token, condition, False)),
                )
        elif head in ("&&", "||"):
            settled = head == "||"  # the value that decides the whole
            kept: list[IR] = []
            context = facts
            for part in node[1:]:
                value = self.run(part, context)
                if is_const(value):
                    if bool(value[1]) == settled:
                        result = const(settled)
                        break
                    continue
                kept.append(value)
                context = self.assume(context, self._token(context), value, not settled)
            else:
                result = disj(*kept) if settled else conj(*kept)
        elif head == "!":
            result = negate(self.run(node[1], facts))
        else:
            result = binary(head, self.run(node[1], facts), self.run(node[2], facts))
        result = self.rewrites.get(result, result)  # a rewrite may apply once folded
        self.memo[key] = result
        return result

    def assume(self, facts: dict[IR, Any], token: int, condition: IR, value: bool) -> dict[IR, Any]:
        """``assume``, one dict per (facts dict, condition, value)."""
        key = (token, condition, value)
        found = self.assumed.get(key)
        if found is None:
            found = self.assumed[key] = assume(facts, condition, value)
        return found


def assume(facts: dict[IR, Any], condition: IR, value: bool) -> dict[IR, Any]:
    """``facts`` and ``condition`` having ``value``."""
    out = dict(facts)
    if condition[0] == ("&&" if value else "||"):
        for part in condition[1:]:
            add_fact(out, part, value)
    else:
        add_fact(out, condition, value)
    return out


def add_fact(facts: dict[IR, Any], condition: IR, value: bool) -> None:
    if condition[0] == "!":
        add_fact(facts, condition[1], not value)
        return
    facts[condition] = value
    if value and condition[0] == "==":
        left, right = condition[1], condition[2]
        if left[0] == "v" and is_const(right):
            facts[("=", left)] = right[1]
        elif right[0] == "v" and is_const(left):
            facts[("=", right)] = left[1]
