"""The expressions both translated engines share (``verification/translate/ir.py``):
folded in context, substituted and printed as Python (``verification/translate/kernel/writer.py``).
The kernel settles a call, and never runs it, when its checks fold to true, so the
folding must keep every value; none of this needs SPIN."""

from __future__ import annotations

import itertools
import random

from replan.verification.translate.ir import (
    IR,
    Context,
    add_fact,
    binary,
    conj,
    const,
    disj,
    equal,
    ite,
    negate,
    var,
)
from replan.verification.translate.kernel.writer import PythonPrinter, substitute

NAMES = ("a", "b", "mode")


def evaluate(node: IR, values: dict[str, int]) -> int:
    head = node[0]
    if head == "c":
        return int(node[1])
    if head == "v":
        return values[node[1]]
    parts = [evaluate(child, values) for child in node[1:]]
    if head == "!":
        return int(not parts[0])
    if head == "&&":
        return int(all(parts))
    if head == "||":
        return int(any(parts))
    if head == "?":
        return parts[1] if parts[0] else parts[2]
    a, b = parts
    return int(
        {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b}.get(head, 0)
        if head in ("==", "!=", "<", "<=")
        else {"+": a + b, "-": a - b, "*": a * b}[head]
    )


def condition(rng: random.Random, depth: int) -> IR:
    choice = rng.randrange(5 if depth else 2)
    if choice == 0:
        return equal(var(rng.choice(NAMES)), const(rng.randrange(3)))
    if choice == 1:
        return binary("<=", var(rng.choice(NAMES)), var(rng.choice(NAMES)))
    if choice == 2:
        return negate(condition(rng, depth - 1))
    parts = [condition(rng, depth - 1) for _ in range(rng.randrange(2, 4))]
    return conj(*parts) if choice == 3 else disj(*parts)


def value(rng: random.Random, depth: int) -> IR:
    if depth == 0 or rng.random() < 0.3:
        if rng.random() < 0.6:
            return var(rng.choice(NAMES))
        return const(rng.randrange(-2, 3))
    if rng.random() < 0.2:
        return binary(rng.choice("+-*"), value(rng, depth - 1), value(rng, depth - 1))
    return ite(condition(rng, 2), value(rng, depth - 1), value(rng, depth - 1))


def expressions(count: int) -> list[IR]:
    rng = random.Random(20261205)
    return [value(rng, 4) if rng.random() < 0.5 else condition(rng, 3) for _ in range(count)]


def test_contextual_folding_keeps_every_value() -> None:
    """A branch assumes its condition and a known declared state is a constant: on
    random expressions and every assignment of their variables, the folded expression
    has the same value. One Context serves every expression, as in a translation, so
    its memo (by identity and by value) is exercised across them."""
    context = Context({})
    checked = 0
    for number, node in enumerate(expressions(300)):
        mode = number % 3
        known: dict[IR, object] = {}
        add_fact(known, equal(var("mode"), const(mode)), True)
        folded = context.run(node, known)
        again = context.run(node, known)  # the memo's answer is the same
        assert again == folded
        for a, b in itertools.product(range(3), repeat=2):
            values = {"a": a, "b": b, "mode": mode}
            assert evaluate(folded, values) == evaluate(node, values), (node, folded)
            checked += 1
    assert checked == 300 * 9


def test_substituted_and_printed_python_keeps_every_value() -> None:
    """What the kernel does to a property: its post-state variables substituted by
    expressions over the pre-state, refolded, printed as Python (shared
    subexpressions as temps) and run: the same value as the IR evaluated."""
    context = Context({})
    rng = random.Random(7)
    checked = 0
    for node in expressions(300):
        replacement = {name: value(rng, 2) for name in NAMES if rng.random() < 0.5}
        substituted = context.run(substitute(node, replacement, {}), {})
        printer = PythonPrinter(lambda name: name)
        printer.share([substituted])
        source = "\n".join([*printer.lines, f"result = {printer.text(substituted)}"])
        code = compile(source, "<printed>", "exec")
        for a, b, mode in itertools.product(range(3), repeat=3):
            values = {"a": a, "b": b, "mode": mode}
            expected = evaluate(
                node, {**values, **{n: evaluate(e, values) for n, e in replacement.items()}}
            )
            namespace: dict[str, object] = dict(values)
            exec(code, namespace)
            assert int(namespace["result"]) == expected, (node, replacement, source)  # type: ignore[call-overload]
            checked += 1
    assert checked == 300 * 27
