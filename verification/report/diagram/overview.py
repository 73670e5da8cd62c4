"""The overview: the declared machine as a reviewer first reads it, readable at 1200 px.

The full diagram (``dot.to_dot``) shows every one of the 46 transitions as a row of its
state; at its natural size it is over 3000 px wide. The overview keeps what changes the
state, and folds the rest:

- every transition to another state is its own arrow, labelled ``event #priority /
  action`` over its guard *as it tests this policy* (``steps >= max_steps (4)``, from
  ``guard_policy.condition_expression``), wrapped at its top-level ``and``/``or``; the
  guard's names (``steps_exhausted``) are the SVG ``<title>`` of that text, so a
  pointer over it shows them;
- the internal transitions of a state (rejections and bookkeeping that leave it as it
  was) are folded into one line per event that counts them (``observe: 5 rejections /
  bookkeeping ↺``), whose ``<title>`` lists them in priority order;
- the final states show their stop reason, and one note says what a stopped run
  answers;
- what the policy switches off is left out, and the caption says what and why: the
  transitions it rules out (``Edge.switched_off``: an approval row under a policy with
  no approval step, a budget row with no budget set) and the states only they enter
  (``awaiting_approval``, ``budget_exhausted``). An overlay's mark (a fired count, a
  trace step, a diff's change) keeps a transition drawn.

Element ids are the full diagram's where the element is the same (``t<index>`` for an
arrow, ``state-<id>`` for a state) and ``fold-<state>-<event>`` for a folded line, so
an overlay or the review page's player can find a transition in either view (see
``element_of``). Overlays (a trace's steps, coverage, a diff) colour arrows as the full
diagram does, and a folded line takes the marks of the transitions it holds.
"""

from __future__ import annotations

import re

from replan.verification.report.diagram.dot import (
    COLOUR,
    FONT,
    MUTED,
    PLAIN,
    TRACE,
    _attributes,
    _edge_attributes,
    _edge_colour,
    _escape,
    _quote,
    edge_id,
)
from replan.verification.report.diagram.graph import Change, Diagram, Edge, Node

#: Characters per line of a guard (about 330 px at 12 pt), so that the two active
#: states, the arrows and the final states fit in 1200 px at their natural size.
GUARD_WIDTH = 46
#: Points (= px in the SVG and PNG at Graphviz's 72 dpi) of the states' text.
FONT_SIZE = 12


def folded(edge: Edge) -> bool:
    """An internal self-transition: counted in its state's folded line, no arrow."""
    return edge.internal and edge.source == edge.target


def left_out(edge: Edge) -> bool:
    """A transition the policy switches off that no overlay marks: not drawn."""
    return bool(edge.switched_off) and not (
        edge.fired or edge.steps or edge.change not in (None, Change.UNCHANGED)
    )


def drawn(diagram: Diagram) -> tuple[list[Node], list[Edge]]:
    """The states and transitions the overview draws: every transition but those it
    leaves out, and the states the initial one reaches through them. A state an
    overlay marks stays, and so do both ends of a transition an overlay marks."""
    edges = [e for e in diagram.edges if not left_out(e)]
    entered = {n.id for n in diagram.nodes if n.initial}
    entered |= {n.id for n in diagram.nodes if n.change not in (None, Change.UNCHANGED) or n.notes}
    for edge in edges:
        if edge.switched_off:  # kept for its overlay mark
            entered |= {edge.source, edge.target}
    grown = True
    while grown:
        grown = False
        for edge in edges:
            if edge.source in entered and edge.target not in entered:
                entered.add(edge.target)
                grown = True
    nodes = [n for n in diagram.nodes if n.id in entered]
    return nodes, [e for e in edges if e.source in entered and e.target in entered]


def fold_id(state: str, event: str) -> str:
    return f"fold-{state}-{event}"


def elements_of(edge: Edge) -> list[str]:
    """The ids of the overview elements that stand for ``edge``: its folded line, or
    its arrow, its row and its guard (Graphviz gives the group of a table cell with
    an id the id ``a_<id>``)."""
    if folded(edge):
        return [f"a_{fold_id(edge.source, edge.event)}"]
    identity = edge_id(edge)
    found = [identity, f"a_{identity}-row"]
    if edge.guard:
        found.append(f"a_{identity}-guard")
    return found


def wrap_guard(expression: str, width: int = GUARD_WIDTH) -> list[str]:
    """``expression`` in lines of about ``width`` characters, broken only before a
    top-level ``and``/``or`` (never inside parentheses), so each line is a whole
    condition."""
    parts: list[str] = []
    depth = 0
    start = 0
    for match in re.finditer(r"[()]| (and|or) ", expression):
        token = match.group(0)
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        elif depth == 0:
            parts.append(expression[start : match.start()])
            start = match.start() + 1  # keep "and ..." on the next part
    parts.append(expression[start:])
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 1 + len(part) <= width:
            lines[-1] += " " + part
        else:
            lines.append(part)
    return lines


def _guard_row(edge: Edge, colour: str) -> str:
    """The guard of a row: its expression over the policy, wrapped, its names as the
    cell's title (the SVG ``<title>`` a pointer shows)."""
    if not edge.guard:
        return ""
    lines = wrap_guard(edge.guard_expression or edge.guard)
    text = "[" + '<BR ALIGN="LEFT"/>'.join(_escape(line) for line in lines) + "]"
    if len(lines) > 1:
        text += '<BR ALIGN="LEFT"/>'
    identity = edge_id(edge)
    return (
        f'<TR><TD></TD><TD ALIGN="LEFT" BALIGN="LEFT" ID="{identity}-guard" HREF="#{identity}" '
        f'TITLE="{_escape(edge.guard)}"><FONT COLOR="{colour}">{text}</FONT></TD><TD></TD></TR>'
    )


def _transition_rows(edge: Edge) -> list[str]:
    """A transition to another state as rows of its source's box: ``event #priority /
    action → target`` (titled with the transition's label, as in the full view),
    then its guard, then the overlays' marks; its arrow leaves from the port at the
    row's end."""
    colour = _edge_colour(edge)
    identity = edge_id(edge)
    head = f"<B>{_escape(edge.trigger)}</B>"
    head += f' <FONT COLOR="{MUTED if colour == PLAIN else colour}">/ {_escape(edge.action)}</FONT>'
    head += f" → <B>{_escape(edge.target)}</B>"
    if edge.change is Change.REMOVED:
        head = f"<S>{head}</S>"
    rows = [
        f'<TR><TD WIDTH="4"></TD><TD ALIGN="LEFT" ID="{identity}-row" HREF="#{identity}" '
        f'TITLE="{_escape(edge.key)}"><FONT COLOR="{colour}">{head}</FONT></TD>'
        f'<TD WIDTH="4" PORT="{identity}"></TD></TR>'
    ]
    guard = _guard_row(edge, colour)
    if guard:
        rows.append(guard)
    notes = [edge.change_note, _overlay_marks([edge])]
    for note in filter(None, notes):
        rows.append(
            f'<TR><TD></TD><TD ALIGN="LEFT"><FONT COLOR="{colour}"><I>{_escape(note)}</I>'
            "</FONT></TD><TD></TD></TR>"
        )
    return rows


def _overlay_marks(edges: list[Edge]) -> str:
    """The overlays' marks for one arrow or one folded line (the sum over its rows)."""
    marks = []
    steps = sorted(step for e in edges for step in e.steps)
    if steps:
        marks.append("step " + ", ".join(map(str, steps)))
    if any(e.fired is not None for e in edges):
        fired = sum(e.fired or 0 for e in edges)
        missed = sum(1 for e in edges if e.fired == 0 and not e.dead)
        marks.append(f"fired {fired}x" + (f", {missed} never" if missed else ""))
    changes = [e.change for e in edges if e.change not in (None, Change.UNCHANGED)]
    for change in (Change.ADDED, Change.REMOVED, Change.CHANGED):
        count = changes.count(change)
        if count:
            marks.append(f"{count} {change}" if len(edges) > 1 else str(change))
    return " · ".join(marks)


def _fold_colour(edges: list[Edge]) -> str:
    if any(e.steps for e in edges):
        return TRACE
    changes = {e.change for e in edges if e.change not in (None, Change.UNCHANGED)}
    if len(changes) == 1:
        return COLOUR[changes.pop()]
    if changes:
        return COLOUR[Change.CHANGED]
    if any(e.fired == 0 and not e.dead for e in edges):
        return COLOUR[Change.REMOVED]
    return PLAIN


def _fold_row(state: str, event: str, edges: list[Edge]) -> str:
    """One line for the internal transitions of ``state`` on ``event``; its title
    lists them, one per line, in priority order."""
    count = len(edges)
    noun = "rejection" if count == 1 else "rejections"
    colour = _fold_colour(edges)
    text = f"<B>{_escape(event)}</B>: {count} {noun} / bookkeeping ↺"
    marks = _overlay_marks(edges)
    if marks:
        text += f"  <B>{_escape(marks)}</B>"
    title = "&#10;".join(_escape(e.text) for e in edges)
    identity = fold_id(state, event)
    return (
        f'<TR><TD></TD><TD ALIGN="LEFT" ID="{identity}" HREF="#{identity}" TITLE="{title}">'
        f'<FONT COLOR="{colour}">{text}</FONT></TD><TD></TD></TR>'
    )


def _rule() -> str:
    return f'<TR><TD COLSPAN="3" HEIGHT="1" CELLPADDING="0" BGCOLOR="{MUTED}"></TD></TR>'


def _active_state(node: Node, edges: list[Edge], events: list[str]) -> str:
    """An active state: its name, then per event its transitions to other states (with
    their guards), then one line folding its internal ones."""
    colour = COLOUR[node.change] if node.change not in (None, Change.UNCHANGED) else PLAIN
    head = f'<FONT POINT-SIZE="16"><B>{_escape(node.id)}</B></FONT>'
    facts = ["initial"] if node.initial else []
    if node.change in (Change.ADDED, Change.REMOVED):
        facts.append(str(node.change))
    if facts:
        head += f"  ({', '.join(facts)})"
    rows = [f'<TR><TD COLSPAN="3" ALIGN="LEFT"><FONT COLOR="{colour}">{head}</FONT></TD></TR>']
    rows += [
        f'<TR><TD COLSPAN="3" ALIGN="LEFT"><FONT COLOR="{TRACE}">{_escape(n)}</FONT></TD></TR>'
        for n in node.notes
    ]
    for event in events:
        mine = sorted((e for e in edges if e.event == event), key=lambda e: e.priority)
        if not mine:
            continue
        rows.append(_rule())
        for edge in mine:
            if not folded(edge):
                rows += _transition_rows(edge)
        inside = [e for e in mine if folded(e)]
        if inside:
            rows.append(_fold_row(node.id, event, inside))
    return (
        f'<<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="0" CELLPADDING="2" STYLE="rounded" '
        f'BGCOLOR="#ddf4ff" COLOR="{colour}">' + "".join(rows) + "</TABLE>>"
    )


def _final_state(node: Node) -> str:
    rows = [f'<TR><TD><FONT POINT-SIZE="13"><B>{_escape(node.id)}</B></FONT></TD></TR>']
    rows.append(f"<TR><TD>stop reason: <B>{_escape(node.stop_reason or '')}</B></TD></TR>")
    if node.change in (Change.ADDED, Change.REMOVED):
        rows.append(f"<TR><TD>{_escape(str(node.change))}</TD></TR>")
    rows += [f'<TR><TD><FONT COLOR="{TRACE}">{_escape(n)}</FONT></TD></TR>' for n in node.notes]
    return '<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0">' + "".join(rows) + "</TABLE>>"


def _answers_note(diagram: Diagram) -> str:
    """What a stopped run answers, narrow enough for the final states' column."""
    rows = [
        '<TR><TD ALIGN="LEFT" COLSPAN="2"><B>In every final state</B> (a stopped run)</TD></TR>',
        '<TR><TD ALIGN="LEFT" COLSPAN="2">nothing changes, it is never revived:</TD></TR>',
    ]
    for call, answer in diagram.final_answers:
        for number, part in enumerate(answer.split(" | ")):
            rows.append(
                f'<TR><TD ALIGN="LEFT">{_escape(call) if number == 0 else ""}</TD>'
                f'<TD ALIGN="LEFT">{"→" if number == 0 else "|"} {_escape(part)}</TD></TR>'
            )
    return '<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0">' + "".join(rows) + "</TABLE>>"


def caption(diagram: Diagram) -> str:
    nodes, edges = drawn(diagram)
    arrows = sum(1 for e in edges if not folded(e))
    inside = len(edges) - arrows
    text = (
        f"{diagram.title}: {len(nodes)} states; {arrows} transitions change the "
        f"state, {inside} internal ones are folded (every row: the full view)"
    )
    return text + "".join(f"\n{line}" for line in left_out_lines(diagram))


def left_out_lines(diagram: Diagram) -> list[str]:
    """What this policy switches off and the overview leaves out, with why."""
    nodes, edges = drawn(diagram)
    shown = {n.id for n in nodes}
    states = [n.id for n in diagram.nodes if n.id not in shown]
    count = len(diagram.edges) - len(edges)
    if not count and not states:
        return []
    reasons = sorted(
        {
            reason
            for e in diagram.edges
            if e not in edges
            for reason in [e.switched_off]
            if reason and not reason.startswith("nothing that can fire")
        }
    )
    lines = [
        f"Left out, as this policy switches them off (the full view draws them): {count} "
        "transitions" + (f",\n  the states {', '.join(states)}" if states else ""),
    ]
    lines += [f"  {reason}" for reason in reasons]
    return lines


def to_dot(diagram: Diagram) -> str:
    """The overview as DOT source (deterministic: same diagram, same bytes)."""
    nodes, edges = drawn(diagram)
    events = list(dict.fromkeys(e.event for e in edges))
    active = [n for n in nodes if not n.final]
    final = [n for n in nodes if n.final]
    order = [n.id for n in active]
    label = '<BR ALIGN="LEFT"/>'.join(_escape(line) for line in caption(diagram).split("\n"))
    for overlay, key in diagram.overlays:
        label += f'<BR ALIGN="LEFT"/><B>{_escape(overlay)}</B>: {_escape(key)}'
    lines = [
        f"digraph {diagram.title}_overview {{",
        f'    graph [rankdir=LR, fontname="{FONT}", fontsize=12, nodesep=0.3, ranksep=0.8, '
        'newrank=true, pad=0.2, bgcolor="white", labelloc=t, labeljust=l, '
        f'label=<{label}<BR ALIGN="LEFT"/>>];',
        f'    node [fontname="{FONT}", fontsize={FONT_SIZE}];',
        f'    edge [fontname="{FONT}", fontsize=11, arrowsize=0.7];',
        '    __start [shape=point, width=0.15, label="", id="initial"];',
    ]
    for node in active:
        mine = [e for e in edges if e.source == node.id]
        attributes = {
            "id": _quote(f"state-{node.id}"),
            "shape": "plaintext",
            "margin": "0",
            "label": _active_state(node, mine, events),
        }
        lines.append(f"    {node.id} [{_attributes(attributes)}];")
    lines.append("    { rank=same; " + "; ".join(order) + "; }")
    lines += _final_cluster(diagram, final)
    for node in nodes:
        if node.initial:
            lines.append(f"    __start -> {node.id} [arrowsize=0.8];")
    lines += _arrows(edges, order, diagram.max_fired)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _final_cluster(diagram: Diagram, final: list[Node]) -> list[str]:
    """The final states in a dashed cluster, with what every one of them answers in
    a note in their column."""
    lines: list[str] = []
    lines.append("    subgraph cluster_final {")
    lines.append(
        '        graph [label="final states: the run has stopped", labeljust=l, '
        'style="rounded,dashed", color="#8c959f", fontsize=11];'
    )
    for node in final:
        colour = COLOUR[node.change] if node.change not in (None, Change.UNCHANGED) else PLAIN
        attributes = {
            "id": _quote(f"state-{node.id}"),
            "label": _final_state(node),
            "shape": "box",
            "style": _quote("rounded,filled,bold"),
            "peripheries": "2",
            "fillcolor": _quote("#f6f8fa"),
            "color": _quote(colour),
        }
        lines.append(f"        {node.id} [{_attributes(attributes)}];")
    lines.append("    }")
    if final:
        # In the final states' column (rank=same stacks a column in LR).
        lines.append(
            '    final_answers [id="final-answers", shape=note, style=filled, '
            f'fillcolor="#fff8c5", color="#d4a72c", fontsize=11, label={_answers_note(diagram)}];'
        )
        lines.append("    { rank=same; " + "; ".join(n.id for n in final) + "; final_answers; }")
    return lines


def _arrows(edges: list[Edge], order: list[str], max_fired: int) -> list[str]:
    """The transitions that change the state, each leaving from its row of the source
    state's table (folded ones are lines of that table only)."""
    lines: list[str] = []
    for edge in edges:
        if folded(edge):
            continue
        attributes = _edge_attributes(edge, max_fired)
        del attributes["label"]  # the row it leaves from says it all
        if edge.target in order and order.index(edge.target) < order.index(edge.source):
            # An arrow back to an earlier state must not pull it below: the initial
            # state stays on top, the others in declaration order under it.
            attributes["constraint"] = "false"
        identity = edge_id(edge)
        tail = f'{edge.source}:"{identity}":e'
        lines.append(f"    {tail} -> {edge.target} [{_attributes(attributes)}];")
    return lines


_ANCHOR = re.compile(r'(<a\b[^>]*?\bxlink:title="([^"]*)"[^>]*>)(?!<title>)')


def with_titles(svg: str) -> str:
    """Graphviz writes a cell's TITLE as ``xlink:title`` on its ``<a>``; SVG's own
    tooltip is a ``<title>`` child, which every browser shows and assistive technology
    reads. Add one to each anchor that has none, with the same text."""
    return _ANCHOR.sub(lambda m: f"{m[1]}<title>{m[2]}</title>", svg)
