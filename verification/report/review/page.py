"""The review page as HTML: one file, the stylesheet and the script inline.

Owns the markup only; what it shows is a ``build.Review``. Tables are written here
from the records (so they read without JavaScript and print), and the same records go
into ``<script type="application/json" id="review-data">`` for the player. A
Content-Security-Policy ``default-src 'none'`` makes the browser refuse any fetch the
page might otherwise make: it is self-contained by construction, not by care.
"""

from __future__ import annotations

import json
from html import escape
from importlib import resources
from typing import Any

from replan.verification.engines.conform.playback import Playback
from replan.verification.report.diagram.graph import Change, Diagram
from replan.verification.report.records import CheckResult
from replan.verification.report.review.build import Review
from replan.verification.report.text import visible_lines

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
STATUS_MARK = {"passed": "✔", "holds": "✔", "failed": "✖", "broken": "✖", "error": "⚠"}


def _asset(name: str) -> str:
    return (resources.files("replan.verification.report.review") / "assets" / name).read_text(
        encoding="utf-8"
    )


def _e(value: object) -> str:
    """Text as HTML: markup escaped, and every control, invisible or bidirectional
    character written visibly (a name of the policy must read as the text that runs);
    the line breaks of a block (``<pre>``) stay."""
    return escape(visible_lines(str(value)), quote=True)


def _status(status: str) -> str:
    return f'<span class="status {_e(status)}">{STATUS_MARK.get(status, "?")} {_e(status)}</span>'


def _table(head: list[str], rows: list[str], caption: str = "") -> str:
    cells = "".join(f'<th scope="col">{_e(h)}</th>' for h in head)
    title = f"<caption>{_e(caption)}</caption>" if caption else ""
    return f"<table>{title}<thead><tr>{cells}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


# ---- the header ----------------------------------------------------------------------


def _header(review: Review, sections: list[tuple[str, str]]) -> str:
    report = review.report
    verdict_class = "ok" if report.ok else "failed"
    verdict = ("✔ " if report.ok else "✖ ") + ("All checks hold" if report.ok else report.verdict())
    links = "".join(f'<li><a href="#{anchor}">{_e(name)}</a></li>' for anchor, name in sections)
    return (
        "<header>"
        f"<h1>replan review: {_e(review.model.name)} under {_e(review.policy_name)}</h1>"
        f'<p class="verdict {verdict_class}" id="verdict">{_e(verdict)}</p>'
        f"<p>Machine <code>{_e(review.model.module)}.{_e(review.model.name)}</code> "
        f"({_e(review.model.digest[:19])}); verify report <code>{_e(review.verify_source)}"
        f"</code> (profile {_e(report.profile)}); written by <code>{_e(review.command)}</code>."
        "</p>"
        f'<nav aria-label="sections"><ul>{links}</ul></nav>'
        "</header>"
    )


# ---- the machine and the player -----------------------------------------------------------

VIEW_TEXT = {
    "overview": (
        "Overview",
        "the transitions that change the state, each with its guard as what it tests "
        "against this policy (point at a guard for its name); each state's internal "
        "transitions folded into one line per event (point at it for the list)",
    ),
    "full": (
        "Full",
        "every declared transition as a row of its state, in priority order per event "
        "(↺: internal, the state stays); the policy and the guards reading it in the legend",
    ),
}


def _machine(review: Review) -> str:
    parts = ['<section id="machine" aria-labelledby="machine-title">']
    parts.append('<h2 id="machine-title">The machine</h2>')
    if not review.views:
        parts.append(
            '<p class="warning">Graphviz (<code>dot</code>) is not installed, so the '
            "diagrams are not drawn: below is the Mermaid source of the full view "
            "(<code>apt-get install graphviz</code> and run <code>replan review</code> "
            "again). The player still shows every step.</p>"
        )
    else:
        parts.append('<div class="view-switch js-only" role="tablist" aria-label="view">')
        for name in review.views:
            label, _ = VIEW_TEXT[name]
            parts.append(
                f'<button type="button" role="tab" data-show-view="{name}" '
                f'aria-controls="view-{name}" aria-selected="false">{_e(label)}</button>'
            )
        parts.append("</div>")
    parts.append(_player(review))
    for name, markup in review.views.items():
        label, text = VIEW_TEXT[name]
        natural = " natural" if name == "full" else ""
        parts.append(
            f'<figure class="view" id="view-{name}" data-view="{name}">'
            f"<figcaption><strong>{_e(label)} view</strong>: {_e(text)}.</figcaption>"
            f'<div class="scroll{natural}">{markup}</div></figure>'
        )
    if not review.views:
        parts.append(f"<pre>{_e(review.mermaid)}</pre>")
    parts.append("</section>")
    return "".join(parts)


#: Two per line of the player's panel: (call, answer), (transition, state), ...
PLAYER_FIELDS = (
    ("call", "Call"),
    ("answer", "Answer"),
    ("transition", "Transition fired"),
    ("state", "State"),
    ("evidence-revision", "Evidence revision"),
    ("stop-reason", "Stop reason"),
    ("pending", "Pending plan"),
    ("counters", "Counters"),
    ("evidence", "Evidence"),
    ("note", "Note"),
)


def _player(review: Review) -> str:
    if not review.playbacks:
        return (
            '<p class="note">No recording to play: the evidence directory has no '
            "replan-trace.json and no counterexample, and no --trace was given.</p>"
        )
    options = "".join(
        f'<option value="{n}">{_e(p.title)} ({len(p.steps)} steps; {_e(p.source)})</option>'
        for n, p in enumerate(review.playbacks)
    )
    fields = "".join(
        f'<dt>{_e(label)}</dt><dd id="player-{name}"></dd>' for name, label in PLAYER_FIELDS
    )
    return (
        '<div class="player js-only" id="player" aria-label="trace player">'
        '<div class="controls">'
        f'<label for="player-trace">Recording</label> <select id="player-trace">{options}</select>'
        '<button type="button" id="player-prev" aria-keyshortcuts="ArrowLeft">◀ Previous</button>'
        '<button type="button" id="player-play" aria-pressed="false" aria-keyshortcuts="Space">'
        "▶ Play</button>"
        '<button type="button" id="player-next" aria-keyshortcuts="ArrowRight">Next ▶</button>'
        '<span class="position" id="player-position" aria-live="polite"></span></div>'
        f'<dl aria-live="polite">{fields}</dl>'
        '<p class="keys">Keys: → next, ← previous, Space play or pause, Home the start, End '
        "the last step. The fired transition: thick blue, a yellow band behind its row; the "
        "current state: a dashed orange outline.</p></div>"
        "<noscript><p>The step-through player needs JavaScript; every recording is listed "
        "step by step under <a href='#recordings'>Recorded runs</a>.</p></noscript>"
    )


def _plan(pending: dict[str, Any] | None) -> str:
    if not pending:
        return "none"
    return (
        f"{pending['id']} ({pending['step']}, revision {pending['revision']}, cites "
        f"{pending['evidence_revision']})"
    )


def _recording(number: int, playback: Playback) -> str:
    rows = []
    for step in playback.steps:
        counters = step.counters
        transition = step.transition or f"none: {step.note}"
        note = step.note if step.transition else ""
        if step.differs:
            warning = f"differs from the recording: {_e(step.differs)}"
            note = f'<span class="warning">{warning}</span>' + (f"; {_e(note)}" if note else "")
        else:
            note = _e(note)
        rows.append(
            f'<tr class="step" data-trace="{number}" data-step="{step.number}">'
            f'<td class="number">{step.number}</td><td class="mono">{_e(step.call)}</td>'
            f'<td>{_e(step.answer)}</td><td class="mono">{_e(transition)}</td>'
            f'<td class="number">{step.evidence_revision}</td><td>{_e(_plan(step.pending))}</td>'
            f'<td class="number">{counters["steps"]}</td>'
            f'<td class="number">{counters["proposals"]}</td>'
            f'<td class="number">{counters["no_progress"]}</td>'
            f"<td>{_e(step.stop_reason or '')}</td><td>{note}</td></tr>"
        )
    what = (
        f"a counterexample to <code>{_e(playback.property_name)}</code>"
        if playback.kind == "counterexample" and playback.property_name
        else f"an {playback.kind} record"
    )
    differing = (
        f' <span class="warning">Steps {", ".join(map(str, playback.differing))} answer '
        "differently on the generated controller than recorded (shown: what it does now).</span>"
        if playback.differing
        else ""
    )
    head = [
        "#",
        "call",
        "answer",
        "transition fired",
        "evidence revision",
        "pending plan",
        "steps",
        "proposals",
        "no progress",
        "stop reason",
        "note",
    ]
    return (
        f'<h3 id="recording-{number}">{_e(playback.title)}</h3>'
        f"<p><code>{_e(playback.source)}</code>: {what}, {len(playback.steps)} calls, replayed "
        f"on the generated controller.{differing}</p>"
        + '<div class="scroll">'
        + _table(head, rows).replace("<table>", '<table class="steps">', 1)
        + "</div>"
    )


def _recordings(review: Review) -> str:
    body = "".join(_recording(n, p) for n, p in enumerate(review.playbacks))
    return (
        '<section id="recordings" aria-labelledby="recordings-title">'
        '<h2 id="recordings-title">Recorded runs</h2>'
        "<p>Each call of each recording, as the generated controller answers it: the "
        "transition it fires and the run after it (the player steps through the same "
        "rows).</p>" + (body or '<p class="note">None.</p>') + "</section>"
    )


# ---- verify's results ---------------------------------------------------------------------


def _check_row(check: CheckResult, timed: bool = True) -> str:
    findings = "".join(f'<br><span class="warning">finding: {_e(w)}</span>' for w in check.warnings)
    failure = f"<pre>{_e(check.failure_text)}</pre>" if not check.ok and check.failure_text else ""
    replay = "".join(f"<br><code>{_e(command)}</code>" for command in check.replay)
    return (
        f'<tr class="{_e(check.status)}"><th scope="row">{_e(check.name)}</th>'
        f"<td>{_status(check.status)}</td><td>{_e(check.summary)}{findings}{failure}{replay}</td>"
        f'<td class="number">{f"{check.seconds:.1f} s" if timed else "&ndash;"}</td></tr>'
    )


def _properties(review: Review) -> str:
    broken = review.report.broken_properties
    proofs = next((c for c in review.report.checks if c.name == "proofs"), None)
    entries = list((proofs.details if proofs else {}).get("properties") or [])
    named = {str(e.get("name")) for e in entries}
    entries += [
        {"name": name, "kind": "", "status": "", "statement": ""}
        for name in broken
        if name not in named
    ]
    rows = []
    for entry in entries:
        name = str(entry.get("name", ""))
        status = "broken" if name in broken else "holds"
        proof = str(entry.get("status", "")) or "—"
        rows.append(
            f'<tr class="{status}"><th scope="row"><code>{_e(name)}</code></th>'
            f"<td>{_e(entry.get('kind', ''))}</td><td>{_status(status)}"
            + (f" ({_e(', '.join(broken[name]))})" if name in broken else "")
            + f"</td><td>{_e(proof)}</td><td>{_e(entry.get('statement', ''))}</td></tr>"
        )
    if not rows:
        return '<p class="note">The report lists no properties.</p>'
    return _table(
        ["property", "kind", "status (found broken by)", "z3", "statement"],
        rows,
        f"{len(rows)} properties: {len(broken)} broken",
    )


def _verify(review: Review) -> str:
    report = review.report
    rows = [_check_row(check, report.timed) for check in report.checks]
    printed = "\n".join(report.summary_lines())
    return (
        '<section id="verify" aria-labelledby="verify-title">'
        '<h2 id="verify-title">Verify results</h2>'
        f"<p>From <code>{_e(review.verify_source)}</code>, the report <code>replan verify</code> "
        "wrote; the properties are those of <code>spec/properties.py</code> (the contract, "
        "rule by rule), checked by the campaign, the explorer and z3.</p>"
        + _table(["check", "status", "figures", "time"], rows, f"{len(rows)} checks")
        + "<h3>Properties</h3>"
        + _properties(review)
        + "<h3>The same records, as <code>replan verify</code> prints them</h3>"
        + f"<pre>{_e(printed)}</pre></section>"
    )


# ---- coverage, the diff, the policy ------------------------------------------------------


def _coverage(review: Review) -> str:
    diagram = review.coverage
    parts = ['<section id="coverage" aria-labelledby="coverage-title">']
    parts.append('<h2 id="coverage-title">Coverage</h2>')
    if diagram is None:
        parts.append('<p class="note">The verify report has no campaign coverage.</p></section>')
        return "".join(parts)
    overlay = dict(diagram.overlays).get("coverage", "")
    parts.append(
        "<p>How often the campaign fired each declared transition (the campaign check of "
        f"the verify report): {_e(overlay)}.</p>"
    )
    if review.coverage_svg:
        parts.append(f'<div class="scroll natural">{review.coverage_svg}</div>')
    rows = []
    for edge in sorted(diagram.edges, key=lambda e: e.index):
        if edge.dead and not edge.fired:
            status = '<span class="status holds">○ cannot fire under this policy</span>'
        elif edge.fired:
            status = f"{edge.fired:,}"
        else:
            status = '<span class="status failed">✖ never fired</span>'
        rows.append(
            f'<tr><td class="mono">{_e(edge.key)}</td><td class="number">{status}</td>'
            f"<td>{_e(edge.dead)}</td></tr>"
        )
    parts.append(_table(["transition", "fired", "why it cannot fire"], rows))
    parts.append("</section>")
    return "".join(parts)


def _witness(details: dict[str, Any]) -> str:
    witness = details.get("commit_decision")
    if not witness:
        return (
            "<p><strong>Commit decisions:</strong> identical for every evidence assignment "
            "(proved by z3).</p>"
        )
    assignment = witness.get("assignment") or {}
    rows = [
        f"<tr><th scope='row'>{_e(key)}</th><td>{_e(value)}</td></tr>"
        for key, value in assignment.items()
    ]
    rows += [
        f"<tr><th scope='row'>{_e(key)}</th><td>{_e(value)} (one policy only)</td></tr>"
        for key, value in (witness.get("own_keys") or {}).items()
    ]
    return (
        "<p><strong>Commit decisions differ</strong> (a witness found by z3): with the "
        f"evidence below, on a plan for <code>{_e(witness.get('step'))}</code> the old policy "
        f"<strong>{_e(witness.get('old'))}</strong> and the new one "
        f"<strong>{_e(witness.get('new'))}</strong>.</p>"
        + _table(["evidence key", "state"], rows, "the witness")
    )


def _changes(review: Review) -> str:
    if review.against is None or review.diff is None:
        return ""
    check = review.against
    details = check.details
    lines = "".join(f"<li>{_e(line)}</li>" for line in review.report.against_lines)
    key = dict(review.diff.overlays).get("diff", "")
    changed = [
        e for e in review.diff.edges if e.change is not None and e.change is not Change.UNCHANGED
    ]
    rows = [
        f'<tr><td class="mono">{_e(e.key)}</td><td>{_e(e.change)}</td>'
        f"<td>{_e(e.change_note)}</td></tr>"
        for e in changed
    ]
    legend = [
        f"<tr><td>{_e(r.section)}</td><td>{_e(r.name)}</td>"
        f"<td>{_e(r.old)} → {_e(r.value)}</td></tr>"
        for r in review.diff.legend
        if r.change is Change.CHANGED
    ]
    figure = (
        f'<div class="scroll natural">{review.diff_svg}</div>'
        if review.diff_svg
        else f"<pre>{_e(review.diff_mermaid)}</pre>"
    )
    return (
        '<section id="changes" aria-labelledby="changes-title">'
        f'<h2 id="changes-title">What changed against {_e(details.get("old", ""))}</h2>'
        f"<p>The semantic diff of <code>replan verify --against</code> ({_e(check.summary)}).</p>"
        + _witness(details)
        + f"<ul>{lines}</ul>"
        + (_table(["policy section", "name", "old → new"], legend, "policy") if legend else "")
        + (_table(["transition", "change", "how"], rows, "transitions") if rows else "")
        + f"<p>{_e(key)}.</p>"
        + figure
        + "</section>"
    )


def _policy(diagram: Diagram) -> str:
    rows = [
        f"<tr><td>{_e(row.section)}</td><td><code>{_e(row.name)}</code></td>"
        f"<td>{_e(row.value)}</td></tr>"
        for row in diagram.legend
    ]
    answers = "".join(
        f"<tr><td><code>{_e(call)}</code></td><td>{_e(answer)}</td></tr>"
        for call, answer in diagram.final_answers
    )
    return (
        '<section id="policy" aria-labelledby="policy-title">'
        '<h2 id="policy-title">Policy</h2>'
        + _table(["section", "name", "value"], rows)
        + "<h3>What a stopped run answers</h3>"
        + _table(["call", "answer"], [answers])
        + "</section>"
    )


def _data(review: Review) -> str:
    """The records as the text of a ``<script>`` element: JSON with every ``<``, ``>``
    and ``&`` written as its ``\\u`` escape, which JSON reads as the same character. In
    a script element the HTML parser looks for ``</script`` and also for ``<!--``
    (after which a ``<script`` hides the real end tag); a name of the policy may hold
    either, and must not end or stall the page's script."""
    text = json.dumps(review.to_json(), separators=(",", ":"), sort_keys=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _font(review: Review) -> str:
    if not review.font:
        return ""
    return f'\nsvg.diagram text {{ font-family: "{review.font}", sans-serif; }}\n'


def to_html(review: Review) -> str:
    """The whole page."""
    sections = [("machine", "The machine"), ("recordings", "Recorded runs")]
    sections += [("verify", "Verify results"), ("coverage", "Coverage")]
    if review.against is not None:
        sections.append(("changes", "What changed"))
    sections.append(("policy", "Policy"))
    title = f"replan review: {review.model.name} under {review.policy_name}"
    return (
        '<!DOCTYPE html>\n<html lang="en" class="no-js"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_asset('review.css')}{_font(review)}</style>"
        "</head><body>"
        + _header(review, sections)
        + "<main>"
        + _machine(review)
        + _recordings(review)
        + _verify(review)
        + _coverage(review)
        + _changes(review)
        + _policy(review.diagram)
        + "</main>"
        + f"<footer><p>{_e(review.diagram.caption)}. Written by <code>{_e(review.command)}"
        "</code>; it loads nothing from the network.</p></footer>"
        + f'<script type="application/json" id="review-data">{_data(review)}</script>'
        + f"<script>{_asset('player.js')}</script></body></html>\n"
    )


__all__ = ["to_html"]
