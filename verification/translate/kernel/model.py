"""The generated kernel as data (``GeneratedKernel``: its text and tables, JSON-ready,
what the cache keeps) and compiled (``Kernel``: the functions a search calls)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from replan.controller.policy import Policy
from replan.spec.model import MachineModel
from replan.verification.core.domains import Domains
from replan.verification.translate.calls import Call, domain_calls
from replan.verification.translate.kernel.decode import Decoding
from replan.verification.translate.layout import Layout
from replan.verification.translate.renaming import Renaming
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
    #: how a state tuple reads as the controller's ``RunState`` (None: not decodable)
    decoding: Decoding | None = None
    #: what it was compiled from (what a Ray shard compiles it from again)
    generated: GeneratedKernel | None = field(default=None, compare=False, repr=False)


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
    #: where the state holds plan ids and which may be renamed, for storing states
    #: under a canonical renaming of them (``compiled`` says when)
    renaming: Renaming | None = None
    #: how a state tuple reads as the controller's state (None: a name the translation
    #: met cannot be kept)
    decoding: Decoding | None = None
    #: the translation's layout, which encodes a controller's state as the kernel's
    #: tuple (its interned names numbered as that translation met them); not kept in
    #: a cache: only generating the kernel again rebuilds it
    layout: Layout | None = field(default=None, compare=False, repr=False)

    @property
    def digest(self) -> str:
        return f"sha256:{hashlib.sha256(self.source.encode()).hexdigest()}"


def compiled(
    generated: GeneratedKernel,
    policy: Policy,
    domains: Domains,
    model: MachineModel,
    symmetry: bool | None = None,
) -> Kernel:
    """The kernel ``generated`` describes, compiled; its calls are derived again from
    the inputs (cheap: no body is translated). ``symmetry``: whether states are stored
    under the canonical renaming of their plan ids (None: with fresh ids only, as the
    Python explorer chooses)."""
    renamed = domains.renamed(symmetry)
    if renamed and generated.renaming is None:
        raise ValueError("kernel: no renaming of plan ids was generated for the symmetry")
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
        canonical=generated.renaming.canonical() if renamed and generated.renaming else None,
        decoding=generated.decoding,
        generated=generated,
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
