"""The generated successor kernel: the declaration's dispatch as pure Python functions
from a state tuple to a successor tuple, for ``replan explore --engine kernel``.

Owns the fourth target of the translator that produces z3 and Promela: the same
lowered calls (``promela.Translation.lowered``: the z3 step relation's post-state
and the properties' terms, with the call's argument substituted) printed as Python,
one function per (call, group of declared states in which the call does the same).
Leaves the search and the replay of a violation to ``verification/engines/kernel/``.
Here: ``generate`` (the translation, the writer's input); ``model.py``: the kernel as
data and compiled; ``writer.py``: its text; ``apart.py``: kernels generated in forked
processes, side by side.

Why it is fast (the design; docs/engines/kernel.md says it for users):

- A state is a flat tuple of small ints, one per variable of the Promela layout
  (``translate/layout.py``: an absent value is zero, so equal states are equal tuples).
  No object, no trace, no snapshot.
- Each call is specialised to each declared state, and its properties are folded
  against the post-state it computes: a property becomes an expression over the
  pre-state alone, and most fold to true by construction (``ir.Context``,
  checked against evaluation by a test). A call whose post-state is its pre-state
  and whose properties all fold to true in a declared state is not evaluated there:
  its transitions are counted, and their verdict is decided here, once, for every
  state of that declared state. So a property is still checked on every transition.
- Calls with the same code in a declared state (their guards cannot tell the
  arguments apart there: two ids neither accepted nor completed, say) run once per
  state: the input classes, derived from the guards.
- A call offered only in some states (``derived.py``: an approval of the pending
  plan's digest, one plan id of each kind, a fresh id) has its condition folded in
  each declared state like the rest: where it folds to false the call is absent,
  where to true it is as any other, and elsewhere its code runs under the condition
  and one ``offered_M`` function per declared state counts the calls a state offers.
- State invariants are one function of the state, evaluated once per new state.
- Which declared transition each call fires (the report's coverage) is folded the
  same way: a constant in most declared states, counted per state expanded there;
  the rest is one ``fired_M`` function per declared state.

The text is readable Python with a header naming its sources and digests, written
next to a run with ``--kernel-source``.
"""

from __future__ import annotations

from collections.abc import Callable

from replan.controller.policy import Policy
from replan.spec.contract import Contract
from replan.spec.model import MachineModel
from replan.verification.core.domains import Domains, InputSpace
from replan.verification.translate.calls import Call, domain_calls
from replan.verification.translate.kernel.decode import decoding
from replan.verification.translate.kernel.model import (
    Broken,
    Expand,
    GeneratedKernel,
    Kernel,
    State,
    Step,
    compiled,
    successors_by_call,
)
from replan.verification.translate.kernel.writer import Writer
from replan.verification.translate.promela import Translation
from replan.verification.translate.renaming import renaming

__all__ = [
    "Broken",
    "Expand",
    "GeneratedKernel",
    "Kernel",
    "State",
    "Step",
    "build",
    "compiled",
    "generate",
    "successors_by_call",
]


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
    writer = Writer(layout)
    by_event: dict[str, list[Call]] = {}
    for call in calls:
        by_event.setdefault(call.event, []).append(call)
    for event, event_calls in by_event.items():
        if progress is not None:
            progress(f"generating {event} ({len(event_calls)} calls) ...")
        for lowered in translation.lowered(event, event_calls, invariants=False):
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
        renaming=renaming(layout, writer.variables, InputSpace(policy, domains).pool),
        decoding=decoding(layout),
        layout=layout,
    )
