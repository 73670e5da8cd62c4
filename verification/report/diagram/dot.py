"""Graphviz: the ``Diagram`` as DOT source, and SVG/PNG through the real ``dot``.

This is the only module that runs Graphviz. When ``dot`` is not on PATH,
``GraphvizMissing`` says how to install it; DOT and Mermaid output need nothing
installed.

Every transition is its own edge (``id="t<index>"``, its label as tooltip), so an
overlay can mark each one, and a test can find each one in the SVG. Self-loops are
most of this machine (rejections that leave the state as it was), so the layout keeps
them readable: each edge label is one short line, self-loops stack on the side of
their state, and the labels use Graphviz's own placement, which never overlaps them.
"""

from __future__ import annotations

import functools
import html
import math
import shutil
import subprocess

from replan.verification.report.diagram.graph import Change, Diagram, Edge, Node
from replan.verification.report.text import visible

INSTALL_HINT = (
    "Graphviz `dot` is not on PATH: install it (Debian/Ubuntu: `apt-get install graphviz`; "
    "macOS: `brew install graphviz`), or use --format dot or --format mermaid"
)

#: Colours: the diff's (added green, removed red, changed orange, unchanged grey) and
#: the overlays' (never fired red, trace path blue).
COLOUR = {
    Change.ADDED: "#1a7f37",
    Change.REMOVED: "#cf222e",
    Change.CHANGED: "#d4730b",
    Change.UNCHANGED: "#8c959f",
}
NEVER_FIRED = "#cf222e"
TRACE = "#0550ae"
FIRED = "#54aeff"
PLAIN = "#24292f"
MUTED = "#57606a"
FONT = "Helvetica"


class GraphvizMissing(RuntimeError):
    """``dot`` is not installed (the message says how to install it)."""


class GraphvizFailed(RuntimeError):
    """``dot`` ran and refused the source (a bug here, reported with its stderr)."""


def _escape(text: str) -> str:
    """Text of an HTML-like label: markup escaped, and every control, line-break,
    invisible or bidirectional character written visibly (``report.text.visible``),
    since a name of the policy reaches the labels."""
    return html.escape(visible(text), quote=True)


def _quote(text: str) -> str:
    """A DOT quoted string (a tooltip): one visible line, ``"`` and ``\\`` escaped."""
    return '"' + visible(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _edge_colour(edge: Edge) -> str:
    if edge.change is not None:
        return COLOUR[edge.change]
    if edge.steps:
        return TRACE
    if edge.dead:
        return COLOUR[Change.UNCHANGED]
    if edge.fired == 0:
        return NEVER_FIRED
    return PLAIN


def _marks(edge: Edge) -> str:
    """Overlay marks: the trace's step numbers, the fire count, added/removed."""
    marks = []
    if edge.steps:
        marks.append("step " + ", ".join(map(str, edge.steps)))
    if edge.dead and not edge.fired:
        marks.append("cannot fire under this policy")
    elif edge.fired is not None:
        marks.append(f"fired {edge.fired}x" if edge.fired else "never fired")
    if edge.change in (Change.ADDED, Change.REMOVED):
        marks.append(str(edge.change))
    return " · ".join(marks)


def _row(edge: Edge, max_fired: int) -> str:
    """One transition as a row of its source state's table: overlay marks, then
    ``observe #3 [guard] / action → target`` (``↺``: an internal transition, it
    stays), with a port on each side for the edge to another state.

    Internal transitions are drawn the UML way, inside their state: thirty loops
    around two boxes cannot be read. Overlays mark the row itself: a dashed border
    where the edge would be dashed, a bar where it would be thicker."""
    colour = _edge_colour(edge)
    text = f"<B>{_escape(edge.trigger)}</B>"
    if edge.guard_text:
        text += f" {_escape(edge.guard_text)}"
    action = f"/ {_escape(edge.action)}"
    text += f' <FONT COLOR="{MUTED}">{action}</FONT>' if colour == PLAIN else f" {action}"
    text += " ↺" if _drawn_inside(edge) else f" → <B>{_escape(edge.target)}</B>"
    if edge.change is Change.REMOVED:
        text = f"<S>{text}</S>"
    for note in (edge.change_note, edge.dead if not edge.fired else ""):
        if note:
            text += f'<BR ALIGN="LEFT"/>    <I>{_escape(note)}</I>'
    if colour != PLAIN:
        text = f'<FONT COLOR="{colour}">{text}</FONT>'
    if edge.steps:
        text = f"<B>{text}</B>"
    marks = _marks(edge)
    mark = f'<FONT COLOR="{colour}"><B>{_escape(marks)}</B></FONT>' if marks else ""
    bar = ""
    if max_fired:
        width = 2 + round(48 * math.log1p(edge.fired or 0) / math.log1p(max_fired))
        bar = (
            '<TD ALIGN="LEFT" WIDTH="52"><TABLE BORDER="0" CELLSPACING="0" CELLPADDING="0"><TR>'
            f'<TD WIDTH="{width}" HEIGHT="7" FIXEDSIZE="TRUE" '
            f'BGCOLOR="{FIRED if edge.fired else colour}"></TD>'
            "</TR></TABLE></TD>"
        )
    border = ""
    if _dashed(edge) or _dotted(edge):
        style = "dashed" if _dashed(edge) else "dotted"
        border = f' BORDER="1" STYLE="{style}" COLOR="{colour}"'
    identity = edge_id(edge)
    anchor = (
        f' ID="{identity}-mark" HREF="#{identity}" TITLE="{_escape(edge.key)}"' if marks else ""
    )
    return (
        f'<TR><TD PORT="w-{identity}" WIDTH="6"></TD>{bar}<TD ALIGN="RIGHT"{anchor}>{mark}</TD>'
        f'<TD ALIGN="LEFT" BALIGN="LEFT" ID="{identity}-row" HREF="#{identity}" '
        f'TITLE="{_escape(edge.key)}"{border}>{text}</TD>'
        f'<TD PORT="{identity}" WIDTH="6"></TD></TR>'
    )


def _drawn_inside(edge: Edge) -> bool:
    """An internal self-transition: a row of its state, no edge."""
    return edge.internal and edge.source == edge.target


def _dashed(edge: Edge) -> bool:
    return (edge.fired == 0 and not edge.dead) or edge.change is Change.REMOVED


def _dotted(edge: Edge) -> bool:
    return edge.fired == 0 and bool(edge.dead)


def _edge_attributes(edge: Edge, max_fired: int) -> dict[str, str]:
    """An edge to another state: its trigger as the label (the guard is in the row it
    leaves from), coloured and weighted by the overlays."""
    colour = _edge_colour(edge)
    identity = edge_id(edge)
    marks = _marks(edge)
    label = f"<B>{_escape(edge.trigger)}</B>" + (f"<BR/>{_escape(marks)}" if marks else "")
    attributes = {
        "id": _quote(identity),
        "tooltip": _quote(edge.key),
        "color": _quote(colour),
        "label": f'<<FONT COLOR="{colour}">{label}</FONT>>',
    }
    width = 1.2
    if edge.fired and max_fired > 0:
        width = 1.0 + 5.0 * math.log1p(edge.fired) / math.log1p(max_fired)
    if edge.steps:
        width = max(width, 3.0)
    if edge.change in (Change.ADDED, Change.REMOVED, Change.CHANGED):
        width = max(width, 2.2)
    attributes["penwidth"] = f"{width:.2f}"
    if _dashed(edge):
        attributes["style"] = "dashed"
    elif _dotted(edge):
        attributes["style"] = "dotted"
    return attributes


def _state_table(node: Node, edges: list[Edge], max_fired: int) -> str:
    """An active state: its name, then every transition leaving it, in priority
    order per event (the dispatch table the generated code follows)."""
    colour = COLOUR[node.change] if node.change not in (None, Change.UNCHANGED) else PLAIN
    head = f'<FONT POINT-SIZE="15"><B>{_escape(node.id)}</B></FONT>'
    facts = ["initial"] if node.initial else []
    if node.change in (Change.ADDED, Change.REMOVED):
        facts.append(str(node.change))
    if facts:
        head += f"  ({', '.join(facts)})"
    span = 5 if max_fired else 4
    rows = [f'<TR><TD COLSPAN="{span}" ALIGN="LEFT"><FONT COLOR="{colour}">{head}</FONT></TD></TR>']
    rows += [
        f'<TR><TD COLSPAN="{span}" ALIGN="LEFT"><FONT COLOR="{TRACE}">{_escape(n)}</FONT></TD></TR>'
        for n in node.notes
    ]
    event = None
    for edge in edges:
        if edge.event != event:
            if event is not None:
                # a rule between events (an <HR/> would take a dashed row's style)
                rows.append(
                    f'<TR><TD COLSPAN="{span}" HEIGHT="1" CELLPADDING="0" BGCOLOR="{MUTED}">'
                    "</TD></TR>"
                )
            event = edge.event
        rows.append(_row(edge, max_fired))
    return (
        f'<<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="0" CELLPADDING="3" STYLE="rounded" '
        f'BGCOLOR="#ddf4ff" COLOR="{colour}">' + "".join(rows) + "</TABLE>>"
    )


def _final_label(node: Node) -> str:
    rows = [f'<TR><TD><FONT POINT-SIZE="13"><B>{_escape(node.id)}</B></FONT></TD></TR>']
    rows.append(f"<TR><TD>stop reason: <B>{_escape(node.stop_reason or '')}</B></TD></TR>")
    if node.change in (Change.ADDED, Change.REMOVED):
        rows.append(f"<TR><TD>{_escape(str(node.change))}</TD></TR>")
    rows += [f'<TR><TD><FONT COLOR="{TRACE}">{_escape(n)}</FONT></TD></TR>' for n in node.notes]
    return '<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0">' + "".join(rows) + "</TABLE>>"


def _node_line(node: Node, edges: list[Edge], max_fired: int) -> str:
    colour = COLOUR[node.change] if node.change not in (None, Change.UNCHANGED) else PLAIN
    if not node.final:
        attributes = {
            "id": _quote(f"state-{node.id}"),
            "shape": "plaintext",
            "margin": "0",
            "label": _state_table(node, edges, max_fired),
        }
    else:
        attributes = {
            "id": _quote(f"state-{node.id}"),
            "label": _final_label(node),
            "shape": "box",
            "style": _quote("rounded,filled,bold"),
            "peripheries": "2",
            "fillcolor": _quote("#f6f8fa"),
            "color": _quote(colour),
        }
    return f"    {node.id} [{_attributes(attributes)}];"


def _attributes(attributes: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in attributes.items())


def _legend_label(diagram: Diagram) -> str:
    cell = '<TD ALIGN="LEFT" BALIGN="LEFT">'
    rows = [
        f'<TR><TD ALIGN="LEFT" COLSPAN="2"><B>{_escape(diagram.title)}</B>: '
        f"{_escape(diagram.caption)}</TD></TR>",
        '<TR><TD ALIGN="LEFT" COLSPAN="2">Each row of a state is one declared transition, '
        "in priority order per event:</TD></TR>",
        '<TR><TD ALIGN="LEFT" COLSPAN="2">  <B>event #priority</B> [guard] / action → target '
        "(↺: internal, the state stays); the first whose guard holds fires; "
        "[else]: no guard</TD></TR>",
    ]
    section = None
    for row in diagram.legend:
        if row.section != section:
            section = row.section
            rows.append(
                f'<TR><TD ALIGN="LEFT" COLSPAN="2"><B>policy: {_escape(section)}</B></TD></TR>'
                if section != "guards reading the policy"
                else f'<TR><TD ALIGN="LEFT" COLSPAN="2"><B>{_escape(section)}</B></TD></TR>'
            )
        value = _escape(row.value)
        if row.old is not None:
            value = f"{_escape(row.old)} → {value}"
        if row.change in (Change.ADDED, Change.REMOVED):
            value = f"{value} ({row.change})"
        if row.change is not None:
            colour = COLOUR[row.change]
            value = f'<FONT COLOR="{colour}">{value}</FONT>'
            name = f'<FONT COLOR="{colour}">{_escape(row.name)}</FONT>'
        else:
            name = _escape(row.name)
        rows.append(f"<TR>{cell}  {name}</TD>{cell}{value}</TD></TR>")
    for overlay, key in diagram.overlays:
        rows.append(
            f'<TR><TD ALIGN="LEFT" COLSPAN="2"><B>{_escape(overlay)}</B>: {_escape(key)}</TD></TR>'
        )
    return (
        '<<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="0" CELLPADDING="2" COLOR="#d0d7de">'
        + "".join(rows)
        + "</TABLE>>"
    )


def _final_note(diagram: Diagram) -> str:
    rows = [
        '<TR><TD ALIGN="LEFT" COLSPAN="2"><B>In every final state</B> (a stopped run): '
        "nothing changes, it is never revived</TD></TR>"
    ]
    rows += [
        f'<TR><TD ALIGN="LEFT">{_escape(call)}</TD><TD ALIGN="LEFT">→ {_escape(answer)}</TD></TR>'
        for call, answer in diagram.final_answers
    ]
    return '<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0">' + "".join(rows) + "</TABLE>>"


def edge_id(edge: Edge) -> str:
    """``t<index>`` (the transition's index in the declaration); ``removed-t<index>``
    for a transition only the older machine of a diff declares."""
    return f"removed-t{edge.index}" if edge.change is Change.REMOVED else f"t{edge.index}"


def to_dot(diagram: Diagram) -> str:
    """The diagram as DOT source (deterministic: same diagram, same bytes)."""
    lines = [
        f"digraph {diagram.title} {{",
        f'    graph [rankdir=TB, fontname="{FONT}", fontsize=11, nodesep=0.6, ranksep=0.8, '
        'newrank=true, pad=0.3, bgcolor="white"];',
        f'    node [fontname="{FONT}", fontsize=11];',
        f'    edge [fontname="{FONT}", fontsize=10, arrowsize=0.7];',
        '    __start [shape=point, width=0.15, label="", id="initial"];',
    ]
    leaving = {n.id: _rows_in_order(diagram, n.id) for n in diagram.nodes}
    active = [n for n in diagram.nodes if not n.final]
    final = [n for n in diagram.nodes if n.final]
    for node in active:
        lines.append(_node_line(node, leaving[node.id], diagram.max_fired))
    lines.append("    { rank=same; " + "; ".join(n.id for n in active) + "; }")
    lines.append("    subgraph cluster_final {")
    lines.append(
        '        graph [label="final states: the run has stopped", labeljust=l, '
        'style="rounded,dashed", color="#8c959f"];'
    )
    for node in final:
        lines.append("    " + _node_line(node, leaving[node.id], diagram.max_fired))
    lines.append("    }")
    lines.append(
        '    final_answers [id="final-answers", shape=note, style=filled, '
        f'fillcolor="#fff8c5", color="#d4a72c", label={_final_note(diagram)}];'
    )
    lines.append(
        '    legend [id="legend", shape=plaintext, margin=0, label=' + _legend_label(diagram) + "];"
    )
    for node in diagram.nodes:
        if node.initial:
            lines.append(f"    __start -> {node.id} [arrowsize=0.8];")
    # The note and the legend go below the final states (invisible edges only rank them).
    if final:
        middle = final[len(final) // 2].id
        lines.append(f"    {middle} -> final_answers [style=invis];")
        lines.append(f"    {middle} -> legend [style=invis];")
        lines.append("    { rank=same; final_answers; legend; }")
    order = [n.id for n in active]
    for node in diagram.nodes:
        for edge in leaving[node.id]:
            if _drawn_inside(edge):
                continue
            attributes = _edge_attributes(edge, diagram.max_fired)
            identity = edge_id(edge)
            if edge.source == edge.target:  # an external self-transition: a real loop
                tail = head = f'{edge.source}:"{identity}":e'
            else:
                leftwards = edge.target in order and order.index(edge.target) < order.index(
                    edge.source
                )
                port = f"w-{identity}" if leftwards else identity
                tail = f'{edge.source}:"{port}":{"w" if leftwards else "e"}'
                head = edge.target
            lines.append(f"    {tail} -> {head} [{_attributes(attributes)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _rows_in_order(diagram: Diagram, state: str) -> list[Edge]:
    """The transitions leaving ``state``: by event in declaration order, each event's
    in priority order; a diff's removed ones after the current ones of their event."""
    events = list(dict.fromkeys(e.event for e in diagram.edges))
    mine = [e for e in diagram.edges if e.source == state]
    return sorted(
        mine,
        key=lambda e: (events.index(e.event), e.change is Change.REMOVED, e.priority),
    )


def graphviz_problem() -> str | None:
    """Why Graphviz cannot draw SVG here, in one line (None: it can). A ``dot`` on PATH
    may still fail: a half-installed Graphviz without its SVG plugin, or a file that is
    no program. Asked once per ``dot`` found."""
    executable = shutil.which("dot")
    if executable is None:
        return "Graphviz `dot` is not on PATH"
    return _probe(executable)


@functools.cache
def _probe(executable: str) -> str | None:
    """Draw a one-node graph as SVG with ``executable``; why that failed, or None."""
    try:
        completed = subprocess.run(
            [executable, "-Tsvg"], input=b"digraph { a }", capture_output=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{executable} -Tsvg could not run ({error})"
    if completed.returncode != 0:
        message = completed.stderr.decode(errors="replace").strip().splitlines()
        return f"{executable} -Tsvg failed: {message[0] if message else 'no message'}"
    return None


def dot_available() -> bool:
    """Graphviz is on PATH and draws SVG (``graphviz_problem``): where it does not, a
    caller draws Mermaid only, as without Graphviz."""
    return graphviz_problem() is None


def render(source: str, output_format: str) -> bytes:
    """Run Graphviz ``dot -T<format>`` on ``source``; ``GraphvizMissing`` without it."""
    executable = shutil.which("dot")
    if executable is None:
        raise GraphvizMissing(INSTALL_HINT)
    try:
        completed = subprocess.run(
            [executable, f"-T{output_format}"],
            input=source.encode(),
            capture_output=True,
            check=False,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as error:  # not a program, or it hangs
        raise GraphvizFailed(f"{executable} -T{output_format} could not run ({error})") from None
    if completed.returncode != 0:
        message = completed.stderr.decode(errors="replace").strip().splitlines()
        raise GraphvizFailed(f"dot -T{output_format} failed: {message[0] if message else '?'}")
    return completed.stdout
