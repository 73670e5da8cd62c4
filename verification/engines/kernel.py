"""``replan explore --engine kernel``: breadth-first search over the generated kernel.

Owns the search over ``verification/translate/kernel.py``'s state tuples (a dict from state to
its index, a parent per state for the shortest counterexample), the counts
(every call of the domains is a transition of every state, as in SPIN's model and
the object explorer), and the report. A violation found in the kernel is replayed on
the real generated controller before it is reported (``model_trail``): one that does
not reproduce is a translation bug, never a property failure.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from replan.controller.policy import Policy
from replan.verification.core.domains import Domains
from replan.verification.core.subject import Subject
from replan.verification.engines.trail import ModelViolation, replay_calls
from replan.verification.translate.kernel import Kernel, State, build, successors_by_call

#: How often (in states) the search reports progress.
PROGRESS_EVERY = 250_000


@dataclass
class KernelResult:
    """What the search over the generated kernel found."""

    domains: Domains
    states: int
    transitions: int
    evaluated: int  # transitions whose code ran (one per class; the rest were decided)
    depth: int
    translate_seconds: float
    search_seconds: float
    kernel: Kernel
    complete: bool = True
    violation: ModelViolation | None = None

    @property
    def ok(self) -> bool:
        return self.violation is None and not self.kernel.initial_failures

    @property
    def transitions_per_second(self) -> float:
        return self.transitions / self.search_seconds if self.search_seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        violation = self.violation
        kernel = self.kernel
        return {
            "engine": "kernel",
            "domains": self.domains.name,
            "complete": self.complete,
            "states": self.states,
            "transitions": self.transitions,
            "transitions_evaluated": self.evaluated,
            "depth": self.depth,
            "seconds": {
                "translate": round(self.translate_seconds, 3),
                "search": round(self.search_seconds, 3),
            },
            "transitions_per_second": round(self.transitions_per_second),
            "kernel_digest": kernel.digest,
            "kernel_functions": kernel.groups,
            "state_variables": len(kernel.variables),
            "calls_per_state": len(kernel.calls),
            "checked": kernel.checked,
            "unchecked": kernel.unchecked,
            "initial_failures": kernel.initial_failures,
            "ok": self.ok,
            "violation": None if violation is None else violation.to_json(),
        }

    def lines(self) -> list[str]:
        kernel = self.kernel
        share = self.evaluated / self.transitions if self.transitions else 0.0
        lines = [
            f"engine: the generated kernel ({len(kernel.calls)} calls per state, "
            f"{kernel.groups} functions over a {len(kernel.variables)}-variable state; "
            f"kernel {kernel.digest[:19]})",
            f"states: {self.states:,}  transitions: {self.transitions:,}  depth: {self.depth}",
            f"  evaluated: {self.evaluated:,} ({share:.0%}); the rest leave their state "
            "unchanged with every property decided when the kernel was generated, or have "
            "the same code as a call evaluated (the same class of arguments in that state)",
            f"time: translate {self.translate_seconds:.1f} s, search {self.search_seconds:.2f} s"
            f" ({self.transitions_per_second:,.0f} transitions/s)",
            f"properties checked on every transition: {len(kernel.checked)}",
        ]
        for name, why in sorted(kernel.unchecked.items()):
            lines.append(f"  not checked by the kernel: {name} ({why})")
        for name in kernel.initial_failures:
            lines.append(f"FAILED {name}: the initial state breaks it")
        violation = self.violation
        if violation is not None:
            if violation.reproduced:
                lines.append(
                    f"FAILED {violation.property} after {len(violation.calls)} calls (the "
                    "kernel's shortest path, replayed on the generated controller):"
                )
                assert violation.finding is not None
                lines.extend("  " + line for line in violation.finding.program().splitlines())
            else:
                lines.append(
                    f"TRANSLATION BUG: the kernel breaks {violation.property} after "
                    f"{len(violation.calls)} calls,"
                )
                lines.append(f"  but the generated controller does not: {violation.detail}")
        elif not kernel.initial_failures:
            lines.append("every property held on every transition explored")
            if not self.complete:
                lines.append("INCOMPLETE: --max-states was reached")
        return lines


def explore_kernel(
    policy: Policy,
    domains: Domains,
    subject: Subject,
    *,
    max_states: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> KernelResult:
    """Generate the kernel of ``subject`` over ``domains`` and search it."""
    say = progress or (lambda _message: None)
    started = time.perf_counter()
    kernel = build(policy, domains, subject.model, subject.model_class, progress=say)
    translated = time.perf_counter() - started
    say(f"searching ({kernel.groups} kernel functions)")
    started = time.perf_counter()
    found = search(kernel, max_states, say)
    seconds = time.perf_counter() - started
    result = KernelResult(
        domains=domains,
        states=found.states,
        transitions=found.transitions,
        evaluated=found.evaluated,
        depth=found.depth,
        translate_seconds=translated,
        search_seconds=seconds,
        kernel=kernel,
        complete=found.complete,
    )
    if found.broken is not None:
        prop, numbers = found.broken
        result.violation = replay_calls(
            policy,
            subject,
            kernel.calls,
            list(kernel.unchecked),
            numbers,
            prop,
            "the kernel",
            "kernel",
            {"engine": "kernel", "kernel_digest": kernel.digest},
        )
    return result


@dataclass
class Search:
    states: int
    transitions: int
    evaluated: int
    depth: int
    complete: bool
    broken: tuple[str, list[int]] | None  # (property, the calls reaching it)


def search(kernel: Kernel, max_states: int | None, say: Callable[[str], None]) -> Search:
    """Breadth-first over the kernel's states: the first violation found is on a
    shortest path (every transition of a depth is tried before the next depth). Only
    a state's parent is kept; the call between them is found again for a
    counterexample (``_calls_to``)."""
    initial = kernel.initial
    index: dict[State, int] = {initial: 0}
    states = [initial]
    parent = array("q", [-1])  # 8 bytes a state, not a boxed int
    expand = kernel.expand
    evaluated_per_mode = kernel.classes
    invariants = kernel.invariants
    mode_position = kernel.mode_position
    calls = len(kernel.calls)
    limit = max_states if max_states is not None else -1
    evaluated = 0
    depth = 0
    level_end = 1  # the index one past the last state of the current depth
    source = 0
    broken: tuple[str, list[int]] | None = None
    next_report = PROGRESS_EVERY
    while source < len(states):
        if source == level_end:
            depth += 1
            level_end = len(states)
        state = states[source]
        mode = state[mode_position]
        evaluated += evaluated_per_mode[mode]
        successors = expand[mode](state)
        if successors.__class__ is str:
            broken = _broken_call(kernel, parent, states, source)
            break
        for successor in successors:
            if successor in index:
                continue
            target = len(states)
            index[successor] = target
            states.append(successor)
            parent.append(source)
            failed = invariants(successor)
            if failed is not None:
                broken = (failed, _calls_to(kernel, parent, states, target))
                break
        if broken is not None:
            break
        source += 1
        if len(states) >= next_report:
            say(f"kernel: {len(states):,} states, {source * calls:,} transitions, depth {depth}")
            next_report += PROGRESS_EVERY
        if limit >= 0 and len(states) >= limit:
            return Search(len(states), source * calls, evaluated, depth, False, None)
    transitions = (source + (broken is not None)) * calls
    return Search(len(states), transitions, evaluated, depth, broken is None, broken)


def _calls_to(kernel: Kernel, parent: Sequence[int], states: list[State], target: int) -> list[int]:
    """The calls along the search's path to ``states[target]`` (each found again as
    the first call taking the parent to the child)."""
    numbers: list[int] = []
    while target > 0:
        source = parent[target]
        outcomes = successors_by_call(kernel, states[source])
        found = [n for n, state in outcomes.items() if state == states[target]]
        if not found:
            raise RuntimeError(
                "kernel: no call's function gives the state its expand function gave "
                "(the two disagree: a generator bug)"
            )
        numbers.append(found[0])
        target = source
    return numbers[::-1]


def _broken_call(
    kernel: Kernel, parent: Sequence[int], states: list[State], source: int
) -> tuple[str, list[int]]:
    """(property, calls) for the first call of ``states[source]`` breaking a property."""
    outcomes = successors_by_call(kernel, states[source])
    broken = [(n, s) for n, s in outcomes.items() if isinstance(s, str)]
    if not broken:
        raise RuntimeError(
            "kernel: no call's function breaks the property its expand function broke "
            "(the two disagree: a generator bug)"
        )
    number, failed = broken[0]
    assert isinstance(failed, str)
    return failed, [*_calls_to(kernel, parent, states, source), number]
