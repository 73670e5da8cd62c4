"""Mermaid: the ``Diagram`` as a ``stateDiagram-v2`` (renders natively in GitHub and
GitLab Markdown, needs nothing installed), and a strict reader of what it emits.

Mermaid cannot style one transition, so overlays travel as words in the labels
(``never fired``, ``fired 12x``, ``step 3``, ``added``...) and as classes on states.
Every declared transition is one line: ``A --> B : label`` for a transition to
another state, ``A : label ↺`` for an internal self-transition, which Mermaid draws
as a line of the state's box (UML's internal-transitions compartment): Mermaid's
layout draws one self-loop per state, so thirty loops would lose their labels.

``parse`` reads back the subset ``to_mermaid`` writes (``stateDiagram-v2``, comments,
``direction``, ``classDef``/``class``, ``[*]`` arrows, transitions with labels,
state descriptions, ``note ... end note`` blocks) and rejects anything else with the
line number: no Mermaid parser is installable with pip, and the real one (JavaScript)
is run by the tests only where ``npm ci --prefix verification/report/diagram/mermaid_check``
has installed it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from replan.verification.report.diagram.graph import Change, Diagram, Edge, Node
from replan.verification.report.text import MERMAID_ENTITY, visible
from replan.verification.report.text import mermaid as mermaid_label

HEADER = "stateDiagram-v2"
INDENT = "    "
#: Ends a state description that is an internal transition (the state stays).
INTERNAL_MARK = "↺"
#: Separates the transitions that share one arrow.
LINE_BREAK = "<br/>"
#: Mermaid wraps notes at 200 px; the legend's lines are wider.
INIT = '%%{init: {"flowchart": {"wrappingWidth": 560}}}%%'


def internal_row(edge: Edge) -> bool:
    """An internal self-transition: written as a line of its state's box."""
    return edge.internal and edge.source == edge.target


def edge_label(edge: Edge) -> str:
    """The transition's label with its overlay marks, in words."""
    marks = []
    if edge.steps:
        marks.append("step " + ", ".join(map(str, edge.steps)))
    if edge.dead and not edge.fired:
        marks.append("CANNOT FIRE under this policy")
    elif edge.fired is not None:
        marks.append(f"fired {edge.fired}x" if edge.fired else "NEVER FIRED")
    if edge.change is not None and edge.change is not Change.UNCHANGED:
        marks.append(str(edge.change).upper())
    text = edge.text
    if edge.change_note:
        text += f" ({edge.change_note})"
    if marks:
        text = f"{' · '.join(marks)} · {text}"
    return _safe(text)


def _safe(text: str) -> str:
    """A label as text: what Mermaid would read as syntax (``;`` ends a statement, a
    line break starts one, ``<`` is HTML, ...) written as its entity
    (``report.text.mermaid``). A name of the policy or a recorded step reaches a label,
    and must never add a statement (a transition, a ``click``) to the diagram."""
    return mermaid_label(text)


def _state_class(node: Node) -> str | None:
    if node.change in (Change.ADDED, Change.REMOVED, Change.CHANGED):
        return str(node.change)
    if node.notes:
        return "traced"
    return "final" if node.final else None


CLASS_STYLES = {
    "final": "fill:#f6f8fa,stroke:#24292f,stroke-width:2px",
    "added": "fill:#dafbe1,stroke:#1a7f37,stroke-width:2px",
    "removed": "fill:#ffebe9,stroke:#cf222e,stroke-width:2px,stroke-dasharray:4 2",
    "changed": "fill:#fff1e5,stroke:#d4730b,stroke-width:2px",
    "traced": "fill:#ddf4ff,stroke:#0550ae,stroke-width:2px",
}


def to_mermaid(diagram: Diagram) -> str:
    """The diagram as Mermaid ``stateDiagram-v2`` source (deterministic)."""
    lines = [
        INIT,
        HEADER,
        # a comment: one line, and no ";" (which ends a statement even here)
        f"{INDENT}%% {diagram.title}: {visible(diagram.caption).replace(';', ',')}",
        f"{INDENT}%% drawn by `replan diagram --format mermaid` from the declaration; "
        "do not edit by hand",
    ]
    events = list(dict.fromkeys(e.event for e in diagram.edges))
    for node in diagram.nodes:
        lines += _state_lines(diagram, node, events)
    for node in diagram.nodes:
        if node.initial:
            lines.append(f"{INDENT}[*] --> {node.id}")
    lines += _arrow_lines(diagram, events)
    for node in diagram.nodes:
        if node.final:
            lines.append(f"{INDENT}{node.id} --> [*]")
    lines += _note_lines(diagram)
    lines += _class_lines(diagram)
    return "\n".join(lines) + "\n"


def _leaving(diagram: Diagram, node: Node, events: list[str]) -> list[Edge]:
    """The transitions leaving ``node``, by event, the removed ones last, by priority."""
    return sorted(
        (e for e in diagram.edges if e.source == node.id),
        key=lambda e: (events.index(e.event), e.change is Change.REMOVED, e.priority),
    )


def _state_lines(diagram: Diagram, node: Node, events: list[str]) -> list[str]:
    """A state's box: its title, stop reason, remarks, and its internal transitions
    as lines of the box (UML's internal transitions compartment): Mermaid draws one
    self-loop per state legibly, not fifteen."""
    facts = [node.id]
    if node.initial:
        facts.append("(initial)")
    if node.change in (Change.ADDED, Change.REMOVED):
        facts.append(str(node.change).upper())
    lines = [f'{INDENT}state "{" ".join(facts)}" as {node.id}']
    if node.final:
        lines.append(f"{INDENT}{node.id} : stop reason {_safe(str(node.stop_reason))}")
    for remark in node.notes:
        lines.append(f"{INDENT}{node.id} : {_safe(remark)}")
    for edge in _leaving(diagram, node, events):
        if internal_row(edge):
            lines.append(f"{INDENT}{node.id} : {edge_label(edge)} {INTERNAL_MARK}")
    return lines


def _arrow_lines(diagram: Diagram, events: list[str]) -> list[str]:
    """The other transitions as arrows. Transitions between the same two states share
    one arrow, a line per transition: Mermaid's layout stacks the labels of parallel
    arrows on one spot."""
    arrows: dict[tuple[str, str], list[str]] = {}
    for node in diagram.nodes:
        for edge in _leaving(diagram, node, events):
            if not internal_row(edge):
                arrows.setdefault((edge.source, edge.target), []).append(edge_label(edge))
    return [
        f"{INDENT}{source} --> {target} : {LINE_BREAK.join(labels)}"
        for (source, target), labels in arrows.items()
    ]


def _note_lines(diagram: Diagram) -> list[str]:
    """What every final state answers, beside the last one; the legend beside the
    initial state."""
    lines: list[str] = []
    finals = [n for n in diagram.nodes if n.final]
    if finals:
        lines.append(f"{INDENT}note right of {finals[-1].id}")
        lines.append(f"{INDENT * 2}In every final state (a stopped run) nothing changes:")
        lines += [
            f"{INDENT * 2}{_safe(call)} → {_safe(answer)}" for call, answer in diagram.final_answers
        ]
        lines.append(f"{INDENT}end note")
    initial = next((n for n in diagram.nodes if n.initial), None)
    if initial is not None:
        lines.append(f"{INDENT}note left of {initial.id}")
        lines += [f"{INDENT * 2}{_safe(line)}" for line in legend_lines(diagram)]
        lines.append(f"{INDENT}end note")
    return lines


def _class_lines(diagram: Diagram) -> list[str]:
    """The style classes the states use, each with the states it applies to."""
    used: dict[str, list[str]] = {}
    for node in diagram.nodes:
        name = _state_class(node)
        if name is not None:
            used.setdefault(name, []).append(node.id)
    lines: list[str] = []
    for name, ids in used.items():
        lines.append(f"{INDENT}classDef {name} {CLASS_STYLES[name]}")
        lines.append(f"{INDENT}class {','.join(ids)} {name}")
    return lines


def legend_lines(diagram: Diagram) -> list[str]:
    """The legend as plain lines: how to read a transition, the policy (named by its
    TOML paths), what the policy-reading guards read, the overlays' keys."""
    lines = [
        "A transition: event #priority [guard] / action (↺ internal: the state stays)",
        "the first whose guard holds fires, [else]: no guard",
    ]
    for row in diagram.legend:
        value = row.value if row.old is None else f"{row.old} → {row.value}"
        mark = "" if row.change in (None, Change.UNCHANGED) else f" ({str(row.change).upper()})"
        if row.section == "steps":
            name = f"step {row.name}"
        elif row.section == "guards reading the policy":
            name = f"guard {row.name} reads"
        else:
            name = f"{row.section}.{row.name}"
        lines.append(f"{name}: {value}{mark}")
    lines += [f"{overlay}: {key}" for overlay, key in diagram.overlays]
    return lines


# ---- reading it back ----------------------------------------------------------------------


class MermaidError(ValueError):
    """Text outside the subset of ``stateDiagram-v2`` this module writes."""


@dataclass
class ParsedStateDiagram:
    """What the text declares. ``transitions`` holds (source, target, label) for
    every arrow between states and every internal transition (a state description
    ending in the internal mark), in the order written."""

    transitions: list[tuple[str, str, str]] = field(default_factory=list)
    initial: list[str] = field(default_factory=list)
    final: list[str] = field(default_factory=list)
    titles: dict[str, str] = field(default_factory=dict)
    descriptions: dict[str, list[str]] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    classes: dict[str, list[str]] = field(default_factory=dict)


_ID = r"[A-Za-z_][A-Za-z0-9_]*"
_TRANSITION = re.compile(rf"^({_ID}) --> ({_ID})(?: : (\S.*))?$")
_START = re.compile(rf"^\[\*\] --> ({_ID})$")
_END = re.compile(rf"^({_ID}) --> \[\*\]$")
_DESCRIPTION = re.compile(rf"^({_ID}) : (\S.*)$")
_STATE = re.compile(rf'^state "([^"]*)" as ({_ID})$')
_NOTE = re.compile(rf"^note (left|right) of ({_ID})$")
_CLASSDEF = re.compile(rf"^classDef ({_ID}) ([a-z-]+:[^;\s]+(?:,[a-z-]+:[^;,]+)*)$")
_CLASS = re.compile(rf"^class ({_ID}(?:,{_ID})*) ({_ID})$")
_DIRECTION = re.compile(r"^direction (LR|RL|TB|BT)$")
#: An entity Mermaid would decode that ``_safe`` never writes (it writes numeric ones).
_ENTITY = re.compile(r"#[A-Za-z_]\w*;")


def parse(text: str) -> ParsedStateDiagram:
    """Read Mermaid ``stateDiagram-v2`` text in the subset ``to_mermaid`` writes;
    ``MermaidError`` names the first line outside it."""
    result = ParsedStateDiagram()
    lines = text.splitlines()
    body = [(n, line.strip()) for n, line in enumerate(lines, 1)]
    body = [(n, line) for n, line in body if line]
    while body and body[0][1].startswith("%%"):
        body = body[1:]
    if not body or body[0][1] != HEADER:
        raise MermaidError(f"line 1: expected {HEADER!r} (after %% lines)")
    defined: set[str] = set()
    note_target: str | None = None
    for number, line in body[1:]:
        if note_target is not None:
            if line == "end note":
                note_target = None
            else:
                result.notes[note_target].append(line)
            continue
        if line.startswith("%%"):
            continue
        note_target = _statement(result, defined, number, line)
    if note_target is not None:
        raise MermaidError(f"note of {note_target!r} is not closed by 'end note'")
    for name in result.notes:
        if name not in defined:
            raise MermaidError(f"note of {name!r}: no such state")
    for ids in result.classes.values():
        for state in ids:
            if state not in defined:
                raise MermaidError(f"class applied to {state!r}: no such state")
    return result


def _statement(result: ParsedStateDiagram, defined: set[str], number: int, line: str) -> str | None:
    """Read one statement into ``result`` (the states it names into ``defined``); the
    state whose note it opens, if it opens one."""
    if _ENTITY.search(line):
        raise MermaidError(f"line {number}: {_ENTITY.search(line)!r} would be read as an entity")
    if match := _START.match(line):
        result.initial.append(match[1])
        defined.add(match[1])
    elif match := _END.match(line):
        result.final.append(match[1])
        defined.add(match[1])
    elif match := _TRANSITION.match(line):
        label = match[3] or ""
        if ";" in MERMAID_ENTITY.sub("", label):
            raise MermaidError(f"line {number}: ';' ends a Mermaid statement")
        for part in label.split(LINE_BREAK):
            result.transitions.append((match[1], match[2], part))
        defined.update((match[1], match[2]))
    elif match := _STATE.match(line):
        result.titles[match[2]] = match[1]
        defined.add(match[2])
    elif match := _NOTE.match(line):
        result.notes.setdefault(match[2], [])
        return match[2]
    elif match := _CLASSDEF.match(line):
        result.classes.setdefault(match[1], [])
    elif match := _CLASS.match(line):
        if match[2] not in result.classes:
            raise MermaidError(f"line {number}: class {match[2]!r} used before its classDef")
        result.classes[match[2]] += match[1].split(",")
    elif _DIRECTION.match(line):
        pass
    elif match := _DESCRIPTION.match(line):
        text = match[2]
        if ";" in MERMAID_ENTITY.sub("", text):
            raise MermaidError(f"line {number}: ';' ends a Mermaid statement")
        result.descriptions.setdefault(match[1], []).append(text)
        if text.endswith(f" {INTERNAL_MARK}"):
            label = text.removesuffix(f" {INTERNAL_MARK}")
            result.transitions.append((match[1], match[1], label))
        defined.add(match[1])
    else:
        raise MermaidError(f"line {number}: not a statement of the emitted subset: {line!r}")
    return None
