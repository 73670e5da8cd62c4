"""The generated successor kernel: the declaration's dispatch as pure Python functions
from a state tuple to a successor tuple, for ``replan explore --engine kernel``.

Owns the fourth target of the translator that produces z3 and Promela: the same
lowered calls (``promela.Translation.lowered``: the z3 step relation's post-state
and the properties' terms, with the call's argument substituted) printed as Python,
one function per (call, group of declared states in which the call does the same).
Leaves the search and the replay of a violation to ``verification/engines/kernel.py``.

Why it is fast (the design; docs/engines/kernel.md says it for users):

- A state is a flat tuple of small ints, one per variable of the Promela layout
  (``promela_layout.py``: an absent value is zero, so equal states are equal tuples).
  No object, no trace, no snapshot.
- Each call is specialised to each declared state, and its properties are folded
  against the post-state it computes: a property becomes an expression over the
  pre-state alone, and most fold to true by construction (``promela_ir.Context``,
  checked against evaluation by a test). A call whose post-state is its pre-state
  and whose properties all fold to true in a declared state is not evaluated there:
  its transitions are counted, and their verdict is decided here, once, for every
  state of that declared state. So a property is still checked on every transition.
- Calls with the same code in a declared state (their guards cannot tell the
  arguments apart there: two ids neither accepted nor completed, say) run once per
  state: the input classes, derived from the guards.
- State invariants are one function of the state, evaluated once per new state.
- Which declared transition each call fires (the report's coverage) is folded the
  same way: a constant in most declared states, counted per state expanded there;
  the rest is one ``fired_M`` function per declared state.

The text is readable Python with a header naming its sources and digests, written
next to a run with ``--kernel-source``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from replan.controller.policy import Policy
from replan.spec.contract import Contract
from replan.spec.model import MachineModel
from replan.verification.core.domains import Domains
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
from replan.verification.translate.promela import (
    Call,
    LoweredCall,
    Translation,
    call_text,
    domain_calls,
)
from replan.verification.translate.renaming import Renaming, renaming
from replan.verification.translate.symbolic import Universe

State = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Broken:
    """A transition that breaks properties: every property it breaks (in the order the
    kernel checks them: the first is the one ``expand`` names) and the state it
    reaches, which a search that does not stop at the first violation goes on from."""

    names: tuple[str, ...]
    successor: State


#: A per-call function: the successor (the argument itself when the call changes
#: nothing), ``Broken`` when the transition breaks a property, or None when the state
#: does not offer the call.
Step = Callable[[State], "State | Broken | None"]
#: A per-declared-state function: the successors of every call that may differ from
#: the state, or the name of the first property a call breaks.
Expand = Callable[[State], "list[State] | str"]


@dataclass
class Kernel:
    """The generated kernel of one policy, model and domains."""

    source: str
    digest: str
    calls: list[Call]
    #: the translation's layout (None for a kernel taken from a cache)
    layout: Layout | None
    variables: list[str]  # the state tuple's layout, one name per position
    initial: tuple[int, ...]
    mode_position: int
    #: per declared state (the mode's value): the calls evaluated there, in order
    steps: list[list[tuple[int, Step]]]
    expand: list[Expand]
    #: per declared state: how many calls leave every state of it unchanged, with
    #: every property decided true (counted, never evaluated)
    settled: list[int]
    #: per declared state: the classes its other calls fall into (calls with the same
    #: code there: the guards cannot tell their arguments apart), each run once
    classes: list[int]
    invariants: Callable[[State], str | None]
    checked: list[str]
    unchecked: dict[str, str]
    initial_failures: list[str]
    groups: int = 0  # functions generated
    #: the declared states, by the mode's value (stopped ones by their stop reason)
    modes: list[str] = field(default_factory=list)
    #: per declared state: the declared transitions (indices into the model's
    #: transitions; -1 none) its calls fire in every state of it, and a function of
    #: the state giving those that depend on it (None: none do)
    fired_static: list[frozenset[int]] = field(default_factory=list)
    fired: list[Callable[[State], set[int]] | None] = field(default_factory=list)
    #: per declared state: how many calls every state of it offers, and a function of
    #: the state counting the calls offered only in some states (None: there are none)
    offered_static: list[int] = field(default_factory=list)
    offered: list[Callable[[State], int] | None] = field(default_factory=list)
    #: a state's canonical form under the renaming of its plan ids (None: states are
    #: stored as they are)
    canonical: Callable[[State], State] | None = None


@dataclass(frozen=True)
class GeneratedKernel:
    """What generating a kernel produces, before it is compiled: its text and the table
    that says which function runs which call in which declared state. Plain data
    (JSON-ready), so a kernel generated once can be kept and compiled again
    (``kernel_cache.py``) without the translation that made it."""

    source: str
    #: (call number, declared state, function name or None: settled there)
    table: tuple[tuple[int, int, str | None], ...]
    classes: tuple[int, ...]
    variables: tuple[str, ...]
    initial: tuple[int, ...]
    mode_position: int
    checked: tuple[str, ...]
    unchecked: tuple[tuple[str, str], ...]
    initial_failures: tuple[str, ...]
    groups: int
    #: per declared state: the declared transitions (indices) its calls fire in every
    #: state of it, and the function naming those that depend on the state, if any
    fired_static: tuple[tuple[int, ...], ...] = ()
    fired_functions: tuple[str | None, ...] = ()
    #: per declared state: how many calls every state of it offers, and the function
    #: counting those offered only in some states, if any
    offered_static: tuple[int, ...] = ()
    offered_functions: tuple[str | None, ...] = ()
    #: where the state holds plan ids, when states are stored under a canonical
    #: renaming of them (fresh ids, as the Python explorer does); None: as they are
    renaming: Renaming | None = None
    #: the translation's layout, which encodes a controller's state as the kernel's
    #: tuple (its interned names numbered as that translation met them); not kept in
    #: a cache: only generating the kernel again rebuilds it
    layout: Layout | None = field(default=None, compare=False, repr=False)

    @property
    def digest(self) -> str:
        return f"sha256:{hashlib.sha256(self.source.encode()).hexdigest()}"


def build(
    policy: Policy,
    domains: Domains,
    model: MachineModel,
    model_class: type,
    progress: Callable[[str], None] | None = None,
    contract: Contract | None = None,
) -> Kernel:
    """Translate ``model`` with ``model_class``'s bodies under ``policy`` over
    ``domains`` into a kernel checking ``contract`` (default: the project's), and
    compile it."""
    generated = generate(policy, domains, model, model_class, progress, contract)
    return compiled(generated, policy, domains, model)


def generate(
    policy: Policy,
    domains: Domains,
    model: MachineModel,
    model_class: type,
    progress: Callable[[str], None] | None = None,
    contract: Contract | None = None,
) -> GeneratedKernel:
    """The kernel's text and table: the translation, where the time of a build goes."""
    calls = domain_calls(policy, domains, model, per_state=True)
    translation = Translation(policy, model, model_class, calls, domains.versions, contract)
    layout = translation.layout
    writer = _Writer(layout, set(translation.invariants))
    by_event: dict[str, list[Call]] = {}
    for call in calls:
        by_event.setdefault(call.event, []).append(call)
    for event, event_calls in by_event.items():
        if progress is not None:
            progress(f"generating {event} ({len(event_calls)} calls)")
        for lowered in translation.lowered(event, event_calls):
            writer.call(lowered)
    writer.invariants(translation.state_invariants())
    writer.expanders()
    writer.firing()
    writer.offering(len(calls))
    return GeneratedKernel(
        source=writer.module(model, domains, policy),
        table=tuple(writer.table),
        classes=tuple(writer.classes),
        variables=tuple(writer.variables),
        initial=writer.initial,
        mode_position=writer.position[layout.mode_name],
        checked=tuple(sorted(translation.checked)),
        unchecked=tuple(sorted(translation.unchecked.items())),
        initial_failures=tuple(translation.initial_failures()),
        groups=writer.functions,
        fired_static=tuple(tuple(sorted(fired)) for fired in writer.fired_static),
        fired_functions=tuple(writer.fired_functions),
        offered_static=tuple(writer.offered_static),
        offered_functions=tuple(writer.offered_functions),
        renaming=None if domains.ids is not None else renaming(layout, writer.variables),
        layout=layout,
    )


def compiled(
    generated: GeneratedKernel, policy: Policy, domains: Domains, model: MachineModel
) -> Kernel:
    """The kernel ``generated`` describes, compiled; its calls are derived again from
    the inputs (cheap: no body is translated)."""
    calls = domain_calls(policy, domains, model, per_state=True)
    namespace = _compiled(generated.source, domains)
    members = list(Universe(policy, model).mode.members)
    modes = len(members)
    steps, settled = _step_table(generated.table, namespace, modes, len(calls))
    return Kernel(
        source=generated.source,
        digest=generated.digest,
        calls=calls,
        layout=generated.layout,
        variables=list(generated.variables),
        initial=generated.initial,
        mode_position=generated.mode_position,
        steps=steps,
        expand=[namespace[f"expand_{mode}"] for mode in range(modes)],
        settled=settled,
        classes=list(generated.classes),
        invariants=namespace["invariants"],
        checked=list(generated.checked),
        unchecked=dict(generated.unchecked),
        initial_failures=list(generated.initial_failures),
        groups=generated.groups,
        modes=members,
        fired_static=[frozenset(fired) for fired in generated.fired_static],
        fired=[None if name is None else namespace[name] for name in generated.fired_functions],
        offered_static=list(generated.offered_static),
        offered=[None if name is None else namespace[name] for name in generated.offered_functions],
        canonical=None if generated.renaming is None else generated.renaming.canonical(),
    )


def _compiled(source: str, domains: Domains) -> dict[str, Any]:
    """The kernel's module namespace; a domain too large for Python to compile is a
    ``ValueError`` that says to take the SPIN engine."""
    namespace: dict[str, Any] = {"Broken": Broken}
    try:
        exec(compile(source, "<replan kernel>", "exec"), namespace)
    except (SyntaxError, RecursionError, MemoryError) as error:  # e.g. nesting too deep
        raise ValueError(
            f"the kernel for domains {domains.name!r} is beyond what Python compiles "
            f"({type(error).__name__}: {error}); --engine spin takes larger domains"
        ) from None
    return namespace


def _step_table(
    table: Sequence[tuple[int, int, str | None]], namespace: dict[str, Any], modes: int, calls: int
) -> tuple[list[list[tuple[int, Step]]], list[int]]:
    """Per declared state, the compiled call functions by call number, and how many
    calls are settled there (they change nothing); every call is one or the other."""
    steps: list[list[tuple[int, Step]]] = [[] for _ in range(modes)]
    settled = [0] * modes
    for number, mode, function in table:
        if function is None:
            settled[mode] += 1
        else:
            steps[mode].append((number, namespace[function]))
    for mode in range(modes):  # every call of every declared state is accounted for
        if settled[mode] + len(steps[mode]) != calls:
            raise RuntimeError(f"kernel: declared state {mode} does not account for every call")
    return steps, settled


class _PythonPrinter(Printer):
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


class _Writer:
    """Collects the kernel's functions: one per (call, group of declared states doing
    the same), and one ``expand`` per declared state running every call there."""

    def __init__(self, layout: Layout, invariant_names: set[str]) -> None:
        self.layout = layout
        self.invariant_names = invariant_names
        self.variables = layout.variables()
        self.position = {name: i for i, name in enumerate(self.variables)}
        self.initial = tuple(value for slot in layout.slots for value in slot.initial)
        self.context = Context(layout.rewrites("b_"))
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
        flags = [(n, node) for n, node in lowered.flags if n not in self.invariant_names]
        groups: dict[tuple[Any, ...], list[int]] = {}
        for value in range(len(self.layout.u.mode.members)):
            known: dict[IR, Any] = {}
            add_fact(known, equal(var(f"b_{mode}"), const(value)), True)
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
                for name, node in flags
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
            printer = _PythonPrinter(self._local)
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
            printer = _PythonPrinter(self._local)
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
        printer = _PythonPrinter(self._local)
        printer.share([offered])
        condition = printer.text(offered)
        if target.collect:  # the call's own function
            return [*printer.lines, f"if not {condition}:", "    return None", *lines]
        return [*printer.lines, f"if {condition}:", *(f"    {line}" for line in lines or ["pass"])]

    def _unconditional(self, post: dict[str, IR], checks: Checks, target: _Target) -> list[str]:
        printer = _PythonPrinter(self._local)
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
        printer = _PythonPrinter(self._local)
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
            "the successor); Broken is given by verification/translate/kernel.py.",
            "expand_M(s) runs every call in declared state M that is not settled there:",
            "the successors, or the name of the first property a call breaks.",
            "fired_M(s) gives the declared transitions calls in M fire that depend on s.",
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


def successors_by_call(kernel: Kernel, state: State) -> dict[int, State | Broken]:
    """What each call ``state`` offers does to it (the settled calls leave it as it is)."""
    out: dict[int, State | Broken] = {number: state for number in range(len(kernel.calls))}
    for number, step in kernel.steps[state[kernel.mode_position]]:
        outcome = step(state)
        if outcome is None:
            del out[number]
        else:
            out[number] = outcome
    return out
