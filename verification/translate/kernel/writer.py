"""The kernel's text: one Python function per (call, group of declared states doing
the same), one ``expand`` per declared state, and the functions of the state that
the search calls (invariants, the transitions fired, the calls offered)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from replan.controller.policy import Policy
from replan.spec.model import MachineModel
from replan.verification.core.domains import Domains
from replan.verification.translate.calls import Call, call_text
from replan.verification.translate.ir import (
    FALSE,
    IR,
    TRUE,
    Context,
    Printer,
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
from replan.verification.translate.layout import Layout
from replan.verification.translate.promela import LoweredCall


class PythonPrinter(Printer):
    """IR -> Python: pre-state variables read from the state tuple into locals."""

    NOT = "(not {})"
    AND = " and "
    OR = " or "
    ITE = "({then} if {condition} else {otherwise})"

    def __init__(self, local: Callable[[str], str]) -> None:
        super().__init__(0)
        self.variable = local  # type: ignore[method-assign]


def substitute(node: IR, values: dict[str, IR], memo: dict[IR, IR]) -> IR:
    """``node`` with each variable named in ``values`` replaced, refolded."""
    found = memo.get(node)
    if found is not None:
        return found
    head = node[0]
    result: IR
    if head == "c":
        result = node
    elif head == "v":
        result = values.get(node[1], node)
    elif head == "!":
        result = negate(substitute(node[1], values, memo))
    elif head == "&&":
        result = conj(*(substitute(c, values, memo) for c in node[1:]))
    elif head == "||":
        result = disj(*(substitute(c, values, memo) for c in node[1:]))
    elif head == "?":
        result = ite(*(substitute(c, values, memo) for c in node[1:]))
    else:
        result = binary(head, substitute(node[1], values, memo), substitute(node[2], values, memo))
    memo[node] = result
    return result


class Writer:
    """Collects the kernel's functions: one per (call, group of declared states doing
    the same), and one ``expand`` per declared state running every call there."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.variables = layout.variables()
        self.position = {name: i for i, name in enumerate(self.variables)}
        self.initial = tuple(value for slot in layout.slots for value in slot.initial)
        self.rewrites = layout.rewrites("b_")
        self.context = Context(self.rewrites)
        self.table: list[tuple[int, int, str | None]] = []
        self.functions = 0
        self.classes: list[int] = []
        self.blocks: list[str] = []
        modes = len(layout.u.mode.members)
        #: per declared state: (call number, post-state, checks, the condition under
        #: which a state offers it) of every call that is not settled there
        self.specialized: list[list[tuple[int, dict[str, IR], Checks, IR]]] = [
            [] for _ in range(modes)
        ]
        #: per declared state: the declared transitions its calls fire in every state of
        #: it, and the expressions (over the state) of those that depend on the state
        self.fired_static: list[set[int]] = [set() for _ in range(modes)]
        self.fired_dynamic: list[dict[IR, None]] = [{} for _ in range(modes)]
        self.fired_functions: list[str | None] = []
        #: per declared state: how many calls every state of it offers, the conditions
        #: of those offered only in some states, and how many no state of it offers
        self.offered_static = [0] * modes
        self.offered_dynamic: list[list[IR]] = [[] for _ in range(modes)]
        self.absent = [0] * modes
        self.offered_functions: list[str | None] = []

    def _local(self, name: str) -> str:
        """A pre-state variable (``b_x``) as the local it is read into."""
        if not name.startswith("b_") or name[2:] not in self.position:
            raise ValueError(f"kernel: {name!r} is not a pre-state variable")
        return f"v{self.position[name[2:]]}"

    def call(self, lowered: LoweredCall) -> None:
        """The call's functions, one per group of declared states doing the same."""
        mode = self.layout.mode_name
        groups: dict[tuple[Any, ...], list[int]] = {}
        for value in range(len(self.layout.u.mode.members)):
            # A fresh folding context per (call, declared state): its memo is kept per
            # facts dict, and no two declared states share one, so a memo kept longer
            # answers nothing more. Dropped here, the generation holds one call's
            # folding in one declared state (kept over every call, the memo held
            # several hundred megabytes), and the smaller dicts fold as fast.
            self.context = Context(self.rewrites)
            known = self._in_declared_state(value)
            offered = self.context.run(lowered.offered, known)
            if offered == FALSE:  # no state of this declared state offers the call
                groups.setdefault(((), (), FALSE), []).append(value)
                continue
            post: dict[str, IR] = {}
            for name, node in lowered.assigned:
                specialized = self.context.run(node, known)
                if specialized != var(f"b_{name}"):
                    post[name] = specialized
            if post.get(mode) == const(value):
                del post[mode]
            # the properties over the pre-state alone: the post-state and answer
            # substituted, folded in this declared state
            values = {name: post.get(name, var(f"b_{name}")) for name in self.variables}
            values["answer"] = self.context.run(lowered.answer, known)
            memo: dict[IR, IR] = {}
            checks = tuple(
                (name, folded)
                for name, node in lowered.flags
                if (folded := self.context.run(substitute(node, values, memo), known)) != TRUE
            )
            groups.setdefault((tuple(post.items()), checks, offered), []).append(value)
            fired = self.context.run(ite(offered, lowered.fired, const(-1)), known)
            if fired[0] == "c":
                self.fired_static[value].add(int(fired[1]))
            else:
                self.fired_dynamic[value].setdefault(fired, None)
        for (post_items, checks, offered), modes in groups.items():
            for m in modes:
                if offered == FALSE:
                    self.absent[m] += 1
                elif offered == TRUE:
                    self.offered_static[m] += 1
                else:
                    self.offered_dynamic[m].append(offered)
            if offered == FALSE:
                self.table.extend((lowered.call.number, m, _ABSENT) for m in modes)
                continue
            if not post_items and not checks and offered == TRUE:
                self.table.extend((lowered.call.number, m, None) for m in modes)
                continue
            name = f"call_{lowered.call.number}_{'_'.join(map(str, modes))}"
            body = self._body(dict(post_items), checks, _RETURN, offered)
            members = list(self.layout.u.mode.members)
            self.blocks.append(
                self._function(
                    f"{name}(s)",
                    f"{_describe(lowered.call)} in {', '.join(members[m] for m in modes)}",
                    body,
                    "return s",
                )
            )
            self.functions += 1
            for m in modes:
                self.table.append((lowered.call.number, m, name))
                if post_items or checks:  # one that changes nothing is only counted
                    self.specialized[m].append(
                        (lowered.call.number, dict(post_items), checks, offered)
                    )

    def _in_declared_state(self, value: int) -> dict[IR, Any]:
        """The facts of declared state ``value``."""
        known: dict[IR, Any] = {}
        add_fact(known, equal(var(f"b_{self.layout.mode_name}"), const(value)), True)
        return known

    def expanders(self) -> None:
        """Per declared state, one function running every call not settled there, in
        the calls' order: it returns the successors that may differ from the state
        (calls with the same code in that state run once), or the name of the first
        property a call breaks."""
        members = list(self.layout.u.mode.members)
        self.classes = []
        for mode, specialized in enumerate(self.specialized):
            seen: set[tuple[Any, ...]] = set()
            body: list[str] = []
            for number, post, checks, offered in specialized:
                key = (tuple(post.items()), checks, offered)
                if key in seen:
                    continue
                seen.add(key)
                body.append(f"# call {number}")
                body += self._body(post, checks, _APPEND, offered)
            self.classes.append(len(seen))
            self.blocks.append(
                self._function(
                    f"expand_{mode}(s)",
                    f"Every call in {members[mode]}: the successors, or a broken property.",
                    ["out = []", "append = out.append", *body],
                    "return out",
                )
            )

    def firing(self) -> None:
        """Per declared state whose calls fire a transition that depends on the state,
        one function of the state giving the indices of those transitions."""
        members = list(self.layout.u.mode.members)
        for mode, dynamic in enumerate(self.fired_dynamic):
            if not dynamic:
                self.fired_functions.append(None)
                continue
            printer = PythonPrinter(self._local)
            printer.share(list(dynamic))
            shown = ", ".join(printer.text(node) for node in dynamic)
            name = f"fired_{mode}"
            self.blocks.append(
                self._function(
                    f"{name}(s)",
                    f"The declared transitions calls in {members[mode]} fire that depend on s.",
                    list(printer.lines),
                    f"return {{{shown}}}",
                )
            )
            self.fired_functions.append(name)

    def offering(self, calls: int) -> None:
        """Per declared state with calls offered only in some of its states, one
        function of the state counting those it offers (with ``absent``, once, for
        the calls a declared state never offers)."""
        members = list(self.layout.u.mode.members)
        for mode, dynamic in enumerate(self.offered_dynamic):
            if self.offered_static[mode] + len(dynamic) + self.absent[mode] != calls:
                raise RuntimeError(f"kernel: declared state {mode} does not offer every call once")
            if not dynamic:
                self.offered_functions.append(None)
                continue
            printer = PythonPrinter(self._local)
            printer.share(dynamic)
            body = [*printer.lines, "n = 0"]
            for condition in dynamic:
                body += [f"if {printer.text(condition)}:", "    n += 1"]
            name = f"offered_{mode}"
            self.blocks.append(
                self._function(
                    f"{name}(s)",
                    f"How many calls offered only in some states of {members[mode]} s offers.",
                    body,
                    "return n",
                )
            )
            self.offered_functions.append(name)
        if any(self.absent):
            self.blocks.append(
                self._function(
                    f"{_ABSENT}(s)",
                    "A call no state of its declared state offers.",
                    [],
                    "return None",
                )
            )

    def _function(self, signature: str, doc: str, body: list[str], tail: str) -> str:
        used = sorted(
            {int(m) for line in body for m in _LOCAL.findall(line)}
            | {int(m) for m in _LOCAL.findall(tail)}
        )
        lines = [f"def {signature}:", f'    """{doc}"""']
        lines += [f"    v{i} = s[{i}]" for i in used]
        lines += [f"    {line}" for line in body]
        lines.append(f"    {tail}")
        return "\n".join(lines)

    def _body(
        self, post: dict[str, IR], checks: Checks, target: _Target, offered: IR = TRUE
    ) -> list[str]:
        """Statements computing the checks and the successor, straight-line (shared
        subexpressions as temps), under the condition of the states offering the call
        (a call function returns None where it is not offered). Branching on the step
        relation's guards, so that a call changing nothing computed only them, was
        measured: about 10% less search time for twice the generation time."""
        lines = self._unconditional(post, checks, target)
        if offered == TRUE:
            return lines
        printer = PythonPrinter(self._local)
        printer.share([offered])
        condition = printer.text(offered)
        if target.collect:  # the call's own function
            return [*printer.lines, f"if not {condition}:", "    return None", *lines]
        return [*printer.lines, f"if {condition}:", *(f"    {line}" for line in lines or ["pass"])]

    def _unconditional(self, post: dict[str, IR], checks: Checks, target: _Target) -> list[str]:
        printer = PythonPrinter(self._local)
        printer.share([*post.values(), *(node for _, node in checks)])
        lines = list(printer.lines)
        collect = target.collect and bool(checks)
        if collect:
            lines.append("broken = []")
        for prop, node in checks:
            lines.append(f"if not {printer.text(node)}:")
            lines.append(f"    broken.append({prop!r})" if collect else f"    return {prop!r}")
        if post:
            lines.append("n = list(s)")
            lines += [
                f"n[{self.position[name]}] = {printer.text(node)}" for name, node in post.items()
            ]
        if collect:
            successor = "tuple(n)" if post else "s"
            lines += ["if broken:", f"    return Broken(tuple(broken), {successor})"]
        if not post:
            return lines + list(target.same)
        return [*lines, target.successor.format("tuple(n)")]

    def invariants(self, invariants: list[tuple[str, IR]]) -> None:
        """One function of the state naming the first invariant it breaks."""
        printer = PythonPrinter(self._local)
        renamed = [
            (name, substitute(node, {v: var(f"b_{v}") for v in self.variables}, {}))
            for name, node in invariants
        ]
        renamed = [(name, self.context.run(node, {})) for name, node in renamed]
        body = []
        for prop, node in renamed:
            body.append(f"if not {printer.text(node)}:")
            body.append(f"    return {prop!r}")
        self.blocks.append(
            self._function(
                "invariants(s)", "The first state invariant s breaks, or None.", body, "return None"
            )
        )

    def module(self, model: MachineModel, domains: Domains, policy: Policy) -> str:
        members = ", ".join(f"{i}={m}" for i, m in enumerate(self.layout.u.mode.members))
        header = [
            '"""GENERATED by `replan explore --engine kernel` from replan.spec.declaration,',
            "the run's bodies, the policy and spec/properties.py; do not edit.",
            f"Declaration digest: {model.digest}",
            f"Domains: {domains.name} (versions 1..{domains.versions}, ids {domains.ids}).",
            "A state is a tuple; position: variable of verification/translate/layout.py:",
            *(f"  {i}: {name}" for i, name in enumerate(self.variables)),
            f"Declared states: {members}.",
            "call_N_M(s) is call N in the declared states M: it returns the successor (s",
            "itself when nothing changes), or Broken(the properties the transition breaks,",
            "the successor); Broken is given by verification/translate/kernel/model.py.",
            "expand_M(s) runs every call in declared state M that is not settled there:",
            "the successors, or the name of the first property a call breaks.",
            "fired_M(s) gives the declared transitions calls in M fire that depend on s.",
            "offered_M(s) counts the calls offered only in some states of M that s offers;",
            "a call function returns None in a state that does not offer the call (absent:",
            "a call no state of its declared state offers).",
            '"""',
            "",
        ]
        return "\n".join(header) + "\n\n" + "\n\n\n".join(self.blocks) + "\n"


Checks = tuple[tuple[str, IR], ...]
#: the function standing for a call no state of a declared state offers
_ABSENT = "absent"
_LOCAL = re.compile(r"\bv(\d+)\b")


@dataclass(frozen=True)
class _Target:
    """What a body does with its outcome: a per-call function returns it, an
    ``expand`` function collects successors and moves on to the next call."""

    same: tuple[str, ...]
    successor: str
    #: every property the call breaks, with its successor (``Broken``), rather than
    #: the first one's name
    collect: bool


_RETURN = _Target(("return s",), "return {}", collect=True)
_APPEND = _Target((), "append({})", collect=False)


def _describe(call: Call) -> str:
    return call_text(call).replace('"', "'").replace("\\", "/")
