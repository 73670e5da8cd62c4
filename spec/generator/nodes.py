"""The generated method before it is written out: lines, ``if`` arms and chains, the
scope of names one method binds, an inlined body.
"""

from __future__ import annotations

import ast
import builtins
import keyword
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar

from replan.spec.model import TransitionInfo

# ---- the generated method, before it is written out ----------------------------------


@dataclass
class _Line:
    """One statement (written with ``ast.unparse``), or a comment line when
    ``statement`` is None."""

    statement: ast.stmt | None
    comment: str = ""


@dataclass
class _Arm:
    test: ast.expr | None  # None: the ``else`` arm
    comment: str
    body: list[_Node]


@dataclass
class _Chain:
    """``if``/``elif``/``else``."""

    arms: list[_Arm]


_Node = _Line | _Chain
_Key = TypeVar("_Key", bound=Hashable)


def _unparse(tree: ast.AST) -> str:
    """``ast.unparse``, without the second pair of parentheses it writes around a
    generator that is a call's only argument (``tuple((x for x in y))``)."""
    text = ast.unparse(tree)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and len(node.args) == 1
            and not node.keywords
            and isinstance(node.args[0], ast.GeneratorExp)
        ):
            generator = ast.unparse(node.args[0])
            text = text.replace(f"({generator})", generator)
    return text


def _statement(source: str) -> ast.stmt:
    return ast.parse(source).body[0]


def _trees(nodes: Iterable[_Node]) -> Iterator[ast.AST]:
    """Every statement and test of the nodes."""
    for node in nodes:
        if isinstance(node, _Line):
            if node.statement is not None:
                yield node.statement
        else:
            for arm in node.arms:
                if arm.test is not None:
                    yield arm.test
                yield from _trees(arm.body)


def _rewrite(nodes: Iterable[_Node], rewrite: ast.NodeTransformer) -> None:
    for node in nodes:
        if isinstance(node, _Line):
            if node.statement is not None:
                node.statement = rewrite.visit(node.statement)
        else:
            for arm in node.arms:
                if arm.test is not None:
                    arm.test = rewrite.visit(arm.test)
                _rewrite(arm.body, rewrite)


def _most_on_a_path(
    nodes: Iterable[_Node], count: Callable[[ast.AST], Counter[_Key]]
) -> Counter[_Key]:
    """For each thing ``count`` finds, the most of it along one path through the
    nodes (an arm's test counts for every later arm, which evaluated it first)."""

    def statements(trees: Iterable[ast.stmt]) -> Counter[_Key]:
        total: Counter[_Key] = Counter()
        for tree in trees:
            if isinstance(tree, ast.If):
                total += count(tree.test) + (statements(tree.body) | statements(tree.orelse))
            else:
                total += count(tree)
        return total

    total: Counter[_Key] = Counter()
    for node in nodes:
        if isinstance(node, _Line):
            if node.statement is not None:
                total += statements([node.statement])
            continue
        tested: Counter[_Key] = Counter()
        best: Counter[_Key] = Counter()
        for arm in node.arms:
            if arm.test is not None:
                tested += count(arm.test)
            best |= tested + _most_on_a_path(arm.body, count)
        total += best
    return total


class _Scope:
    """The local names of one generated method: which are taken, which names the
    inlined code reads as globals (a local must never shadow them), and the names
    given to each inlined body's locals (the same body inlined twice reuses them)."""

    def __init__(self, taken: Iterable[str], module_globals: Mapping[str, object]) -> None:
        self.taken = set(taken)
        self.module_globals = module_globals
        self.globals: set[str] = set()
        self.given: dict[tuple[str, str], str] = {}

    def fresh(self, wanted: str) -> str:
        candidate, number = wanted, 2
        while (
            candidate in self.taken
            or candidate in self.globals
            or candidate in self.module_globals
            or keyword.iskeyword(candidate)
            or hasattr(builtins, candidate)
        ):
            candidate, number = f"{wanted}_{number}", number + 1
        self.taken.add(candidate)
        return candidate

    def local(self, owner: str, name: str) -> str:
        if (owner, name) not in self.given:
            self.given[(owner, name)] = self.fresh(name)
        return self.given[(owner, name)]


@dataclass
class _Body:
    """An inlined body: its statements and the expression it returns (None: it
    returns None)."""

    statements: list[ast.stmt]
    answer: ast.expr | None
    #: it ends in ``raise``: nothing after it runs
    raises: bool = False


@dataclass
class _Branch:
    conjuncts: list[ast.expr]  # remaining guard conjuncts, in order
    transition: TransitionInfo
