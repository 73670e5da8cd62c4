"""The diagram as plain data: which states, edges and legend rows are drawn, and how
each is marked, independent of the output format.

Owns turning a ``spec.model.MachineModel`` and a ``Policy`` into a ``Diagram``, and
the three overlays that re-mark it: coverage (how often each transition fired), a
counterexample's path (which transition each step fired) and a diff against an older
machine or policy. Renderers (``dot``, ``mermaid``) read only ``Diagram``; nothing
here knows a drawing syntax, and nothing restates the declaration's structure: every
edge is one ``TransitionInfo``, internal self-transitions included (python-
statemachine's own renderers hide those, but a rejection that changes no state is
still a behaviour a reviewer must see).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from replan.controller.policy import Policy, policy_to_dict
from replan.controller.records import EvidenceState, Observation, Plan, StopReason
from replan.controller.run import Run
from replan.spec.model import MachineModel, TransitionInfo
from replan.verification.report.diagram.guard_policy import (
    condition_expression,
    guard_reading,
    reading_change,
)


class Change(StrEnum):
    """How an element differs from the older machine or policy (``--diff``)."""

    UNCHANGED = "unchanged"
    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"


@dataclass(frozen=True)
class Node:
    """One declared state. ``stop_reason`` is the value of a final state (the reason
    a run that enters it stopped with); ``notes`` are overlay remarks (a trace step
    absorbed or refused there)."""

    id: str
    name: str
    initial: bool
    final: bool
    stop_reason: str | None
    change: Change | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Edge:
    """One declared transition. ``key`` is its label (``TransitionInfo.label``, the
    name the trace and the coverage reports use) and ``index`` its position in its
    machine's declaration; ``ranked`` says whether several
    transitions leave ``source`` on ``event``, so that the priority must be shown."""

    key: str
    index: int
    source: str
    target: str
    event: str
    guard: str
    action: str
    priority: int
    ranked: bool
    internal: bool
    change: Change | None = None
    change_note: str = ""
    fired: int | None = None
    #: Why the transition cannot fire under the policy (coverage results say so).
    dead: str = ""
    steps: tuple[int, ...] = ()
    #: The guard as what it tests under the diagram's policy (``steps >= max_steps
    #: (4)``), from ``guard_policy.condition_expression``; ``""`` for no guard.
    guard_expression: str = ""
    #: Why the diagram's policy rules the transition out (a guard reading only the
    #: policy is constant under it, or it leaves a state the policy never enters:
    #: ``verification.core.liveness``); ``""`` when the policy lets it fire. The overview
    #: leaves these out; the full view draws every transition.
    switched_off: str = ""

    @property
    def trigger(self) -> str:
        """``event #priority`` (the priority only where several transitions compete)."""
        return f"{self.event} #{self.priority}" if self.ranked else self.event

    @property
    def guard_text(self) -> str:
        """``[guard]``; ``[else]`` for the unguarded last resort among several (``else``
        is a Python keyword, so it can never be mistaken for a guard name)."""
        if self.guard:
            return f"[{self.guard}]"
        return "[else]" if self.ranked else ""

    @property
    def text(self) -> str:
        """The one-line label: ``observe #3 [duplicate_delivery] / ignore_duplicate``."""
        head = f"{self.trigger} {self.guard_text}".strip()
        return f"{head} / {self.action}"


@dataclass(frozen=True)
class LegendRow:
    """One fact of the policy (or of the guards that read it): ``old`` is the older
    value when ``--diff`` found it changed."""

    section: str
    name: str
    value: str
    change: Change | None = None
    old: str | None = None


@dataclass(frozen=True)
class Diagram:
    """Everything a renderer draws."""

    title: str
    caption: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    legend: tuple[LegendRow, ...]
    #: What a final state answers, per event: (call, answer), read from the actions.
    final_answers: tuple[tuple[str, str], ...]
    #: Active overlays, each with a one-line key explaining its marks.
    overlays: tuple[tuple[str, str], ...] = ()

    def node(self, node_id: str) -> Node:
        return next(n for n in self.nodes if n.id == node_id)

    @property
    def max_fired(self) -> int:
        return max((e.fired or 0 for e in self.edges), default=0)


# ---- building the diagram of one machine and policy ---------------------------------


def build(model: MachineModel, policy: Policy, model_class: type[Run] = Run) -> Diagram:
    """The diagram of ``model`` under ``policy``: every state, every transition."""
    nodes = tuple(
        Node(
            id=s.id,
            name=s.name,
            initial=s.initial,
            final=s.final,
            stop_reason=s.value if s.final else None,
        )
        for s in model.states
    )
    from replan.verification.core.liveness import liveness

    switched_off = liveness(model_class, policy, [t.label for t in model.transitions]).switched_off
    edges = tuple(
        dataclasses.replace(
            _edge(model, t, condition_expression(model_class, t.cond, policy)),
            switched_off=switched_off.get(t.label, ""),
        )
        for t in model.transitions
    )
    internal = sum(1 for t in model.transitions if t.internal)
    caption = (
        f"{model.module}.{model.name}: {len(model.states)} states, "
        f"{len(model.transitions)} transitions ({internal} internal), "
        f"priority order; {model.digest[:19]}"
    )
    return Diagram(
        title=model.name,
        caption=caption,
        nodes=nodes,
        edges=edges,
        legend=tuple(legend_rows(model, policy, model_class)),
        final_answers=final_answers(model, policy, model_class),
    )


def _edge(model: MachineModel, t: TransitionInfo, expression: str = "") -> Edge:
    return Edge(
        key=t.label,
        index=t.index,
        source=t.source,
        target=t.target,
        event=t.event,
        guard=t.cond,
        action=t.action,
        priority=t.priority,
        ranked=len(model.leaving(t.source, t.event)) > 1,
        internal=t.internal,
        guard_expression=expression,
    )


def _words(items: Iterable[str]) -> str:
    text = ", ".join(items)
    return text or "none"


def legend_rows(
    model: MachineModel, policy: Policy, model_class: type[Run] = Run
) -> list[LegendRow]:
    """The policy as the legend shows it, then what each policy-reading guard reads."""
    document = policy_to_dict(policy)
    rows = [LegendRow("evidence", "keys", _words(document["evidence"]["keys"]))]
    for step in document["steps"]:
        facts = [f"requires {_words(step['requires'])}"]
        if step["completes_run"]:
            facts.append("completes_run")
        rows.append(LegendRow("steps", step["name"], " · ".join(facts)))
    rows.append(LegendRow("resources", "allowed", _words(document["resources"]["allowed"])))
    for name, value in document["limits"].items():
        shown = str(value).lower() if isinstance(value, bool) else str(value)
        rows.append(LegendRow("limits", name, shown))
    rows.append(
        LegendRow(
            "workflow", "ready_when_passed", _words(document["workflow"]["ready_when_passed"])
        )
    )
    guards = dict.fromkeys(name for t in model.transitions for name in t.guard_names)
    for guard in guards:
        reading = guard_reading(model_class, guard, policy)
        if reading:
            rows.append(LegendRow("guards reading the policy", guard, reading))
    return rows


# What the probe passes for each event parameter of an action run in a final state.
# A completed id and an unknown one, because a stopped run answers them differently.
_PROBE_ID = "probe-completed"


def _probe_arguments(parameter: str, policy: Policy) -> list[tuple[str, Any]]:
    if parameter == "plan_id":
        return [("completed id", _PROBE_ID), ("other id", "probe-other")]
    if parameter == "obs":
        key = policy.keys[0] if policy.keys else "probe"
        return [("", Observation(key, 1, EvidenceState.PASSED, "probe"))]
    if parameter == "plan":
        return [("", Plan("probe", 1, 1, policy.steps[0].name, policy.resources[0]))]
    return [("", None)]


def final_answers(
    model: MachineModel, policy: Policy, model_class: type[Run] = Run
) -> tuple[tuple[str, str], ...]:
    """What each event answers in a final state, read by running the action the
    interface names on a stopped run (not restated): ``execute(plan_id) -> Replayed
    (completed id) | Stopped (other id)``."""
    answers = []
    for event, entry in model.interface.items():
        action: Callable[..., Any] = getattr(model_class, entry.when_stopped)
        wanted = [p for p in inspect.signature(action).parameters if p != "self"]
        call = f"{event}({entry.parameter or ''})"
        variants: list[tuple[str, dict[str, Any]]] = [("", {})]
        for name in wanted:
            variants = [
                (label or case, {**kwargs, name: value})
                for label, kwargs in variants
                for case, value in _probe_arguments(name, policy)
            ]
        outcomes = []
        for case, kwargs in variants:
            answer = action(_stopped_run(model_class, policy), **kwargs)
            outcomes.append((case, "no-op" if answer is None else str(answer)))
        if len({text for _, text in outcomes}) == 1:
            answers.append((call, outcomes[0][1]))
        else:
            answers.append((call, " | ".join(f"{text} ({case})" for case, text in outcomes)))
    return tuple(answers)


def _stopped_run(model_class: type[Run], policy: Policy) -> Run:
    run = model_class(policy)
    run._declared_state = StopReason.CANCELED
    run._completed.add(_PROBE_ID)
    return run


# ---- overlays -------------------------------------------------------------------------


def with_coverage(
    diagram: Diagram, counts: Mapping[str, int], dead: Mapping[str, str] | None = None
) -> Diagram:
    """Mark each edge with how often it fired (absent from ``counts`` = never), and
    the ones that cannot fire under the policy (``dead``: label -> why) apart from
    the ones a run merely missed."""
    dead = dead or {}
    edges = tuple(
        dataclasses.replace(e, fired=int(counts.get(e.key, 0)), dead=dead.get(e.key, ""))
        for e in diagram.edges
    )
    missed = sum(1 for e in edges if not e.fired and not e.dead)
    impossible = sum(1 for e in edges if e.dead)
    key = (
        f"line width and bar grow with the fire count (max {max((e.fired or 0) for e in edges)}); "
        f"dashed red: never fired ({missed} of {len(edges)})"
    )
    if impossible:
        key += f"; dotted grey: cannot fire under this policy ({impossible})"
    return dataclasses.replace(
        diagram, edges=edges, overlays=(*diagram.overlays, ("coverage", key))
    )


@dataclass(frozen=True)
class TraceStep:
    """One step of a counterexample as replayed: the transition it fired (a label),
    or ``None`` with ``note`` saying what happened instead (a final state absorbed it,
    the input check refused it)."""

    number: int
    op: str
    transition: str | None
    state: str
    note: str = ""


def with_trace(diagram: Diagram, steps: Sequence[TraceStep], title: str = "") -> Diagram:
    """Highlight the path of a counterexample, numbering its steps on the edges."""
    numbers: dict[str, list[int]] = {}
    remarks: dict[str, list[str]] = {}
    for step in steps:
        if step.transition is not None:
            numbers.setdefault(step.transition, []).append(step.number)
        else:
            remarks.setdefault(step.state, []).append(f"step {step.number}: {step.note}")
    known = {e.key for e in diagram.edges}
    missing = [label for label in numbers if label not in known]
    if missing:
        raise ValueError(f"the trace fired {missing[0]!r}, which this diagram does not declare")
    edges = tuple(
        dataclasses.replace(e, steps=tuple(numbers.get(e.key, ()))) for e in diagram.edges
    )
    nodes = tuple(
        dataclasses.replace(n, notes=(*n.notes, *remarks.get(n.id, ()))) for n in diagram.nodes
    )
    key = f"bold blue: the path of {title or 'the trace'} ({len(steps)} steps, numbered)"
    return dataclasses.replace(
        diagram, edges=edges, nodes=nodes, overlays=(*diagram.overlays, ("trace", key))
    )


def diff(
    old_model: MachineModel,
    old_policy: Policy,
    new_model: MachineModel,
    new_policy: Policy,
    old_name: str,
    old_model_class: type[Run] = Run,
    model_class: type[Run] = Run,
) -> Diagram:
    """The new machine marked against the old: added transitions green, removed ones
    (drawn from the old machine) red, changed guards, priorities or actions and guards
    whose policy-given meaning changed orange, the rest grey; the legend likewise."""
    base = build(new_model, new_policy, model_class)
    edges = _diff_edges(
        base, old_model, old_policy, new_model, new_policy, old_model_class, model_class
    )
    nodes = _diff_nodes(base, old_model, new_model)
    legend = _diff_legend(legend_rows(old_model, old_policy, old_model_class), list(base.legend))
    counts = {c: sum(1 for e in edges if e.change is c) for c in Change}
    key = (
        f"against {old_name}: green added ({counts[Change.ADDED]}), red removed "
        f"({counts[Change.REMOVED]}), orange changed ({counts[Change.CHANGED]}), grey "
        f"unchanged ({counts[Change.UNCHANGED]})"
    )
    return dataclasses.replace(
        base,
        nodes=tuple(nodes),
        edges=tuple(edges),
        legend=tuple(legend),
        overlays=(*base.overlays, ("diff", key)),
    )


def _diff_edges(
    base: Diagram,
    old_model: MachineModel,
    old_policy: Policy,
    new_model: MachineModel,
    new_policy: Policy,
    old_model_class: type[Run],
    model_class: type[Run],
) -> list[Edge]:
    """The new machine's transitions marked added, changed (with why) or unchanged,
    then the old machine's removed ones."""
    old_edges = {t.label: _edge(old_model, t) for t in old_model.transitions}
    new_edges = {e.key: e for e in base.edges}
    pairs = _match(old_model, new_model)
    matched_old = {old for old, _ in pairs.values()}
    edges: list[Edge] = []
    for edge in base.edges:
        if edge.key not in pairs:
            edges.append(dataclasses.replace(edge, change=Change.ADDED))
            continue
        _, why = pairs[edge.key]
        notes = [why] if why else []
        for guard in dict.fromkeys(_guard_names(new_model, edge.key)):
            change = reading_change(old_model_class, model_class, guard, old_policy, new_policy)
            if change:
                notes.append(f"{guard} ({change})")
        edges.append(
            dataclasses.replace(
                edge,
                change=Change.CHANGED if notes else Change.UNCHANGED,
                change_note=" · ".join(notes),
            )
        )
    for key, edge in old_edges.items():
        if key not in matched_old and key not in new_edges:
            edges.append(dataclasses.replace(edge, change=Change.REMOVED))
    return edges


def _diff_nodes(base: Diagram, old_model: MachineModel, new_model: MachineModel) -> list[Node]:
    """The new machine's states marked added or unchanged, then the removed ones."""
    old_states = {s.id for s in old_model.states}
    new_states = {s.id for s in new_model.states}
    nodes = [
        dataclasses.replace(n, change=Change.UNCHANGED if n.id in old_states else Change.ADDED)
        for n in base.nodes
    ]
    nodes += [
        Node(s.id, s.name, s.initial, s.final, s.value if s.final else None, Change.REMOVED)
        for s in old_model.states
        if s.id not in new_states
    ]
    return nodes


def _guard_names(model: MachineModel, label: str) -> tuple[str, ...]:
    return next(t.guard_names for t in model.transitions if t.label == label)


def _match(old: MachineModel, new: MachineModel) -> dict[str, tuple[str, str]]:
    """new label -> (old label, what changed). Same source, event, guard and target
    is the same transition (its priority or action may have changed); otherwise the
    same source, event, target and action, in priority order, is the same transition
    with a changed guard."""
    pairs: dict[str, tuple[str, str]] = {}
    old_by_label = {t.label: t for t in old.transitions}
    used: set[str] = set()
    for t in new.transitions:
        before = old_by_label.get(t.label)
        if before is None:
            continue
        used.add(before.label)
        why = []
        if before.action != t.action:
            why.append(f"action was {before.action}")
        pairs[t.label] = (before.label, " · ".join(why))
    for t in new.transitions:
        if t.label in pairs:
            continue
        for before in old.transitions:
            if before.label in used:
                continue
            if (before.source, before.event, before.target, before.action) == (
                t.source,
                t.event,
                t.target,
                t.action,
            ):
                used.add(before.label)
                pairs[t.label] = (before.label, f"guard was [{before.cond or 'none'}]")
                break
    _mark_reordered(old, new, pairs)
    return pairs


def _mark_reordered(
    old: MachineModel, new: MachineModel, pairs: dict[str, tuple[str, str]]
) -> None:
    """A matched transition whose rank among the matched ones of its (source, event)
    moved was reordered: its priority now decides differently."""
    old_priority = {t.label: t.priority for t in old.transitions}
    groups: dict[tuple[str, str], list[TransitionInfo]] = {}
    for t in new.transitions:
        if t.label in pairs:
            groups.setdefault((t.source, t.event), []).append(t)
    for members in groups.values():
        by_old = sorted(members, key=lambda t: old_priority[pairs[t.label][0]])
        for rank, t in enumerate(members):
            if by_old[rank] is not t:
                old_label, why = pairs[t.label]
                moved = f"was #{old_priority[old_label]}, now #{t.priority}"
                pairs[t.label] = (old_label, f"{why} · {moved}" if why else moved)


def _diff_legend(old: list[LegendRow], new: list[LegendRow]) -> list[LegendRow]:
    before = {(r.section, r.name): r for r in old}
    rows = []
    for row in new:
        previous = before.pop((row.section, row.name), None)
        if previous is None:
            rows.append(dataclasses.replace(row, change=Change.ADDED))
        elif previous.value != row.value:
            rows.append(dataclasses.replace(row, change=Change.CHANGED, old=previous.value))
        else:
            rows.append(dataclasses.replace(row, change=Change.UNCHANGED))
    rows += [dataclasses.replace(r, change=Change.REMOVED) for r in before.values()]
    return rows


__all__ = [
    "Change",
    "Diagram",
    "Edge",
    "LegendRow",
    "Node",
    "TraceStep",
    "build",
    "diff",
    "final_answers",
    "legend_rows",
    "with_coverage",
    "with_trace",
]
