"""Check 6, diagram: the machine drawn from the declaration (SVG and Mermaid)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from replan.verification.pipeline.session import VerifySession
from replan.verification.report.records import CheckResult
from replan.verification.runtime.files import write_atomically

#: In the committed machine.svg: the digest of the DOT source it was drawn from.
SVG_SOURCE_MARK = "<!-- replan: drawn from DOT source sha256:{} -->\n"


def check_diagram(session: VerifySession) -> CheckResult:
    from replan.verification.report.diagram import machine_diagram, render
    from replan.verification.report.diagram.dot import dot_available

    diagram = machine_diagram(session.policy)
    mermaid = render(diagram, "mermaid").decode()
    session.report.mermaid = mermaid
    written = []
    if dot_available():
        target = session.evidence / "machine.svg"
        if session.deterministic:
            write_svg_once(target, render(diagram, "dot"), lambda: render(diagram, "svg"))
        else:
            write_atomically(target, render(diagram, "svg"))
        written.append(str(target))
    summary = f"{len(diagram.edges)} transitions drawn"
    summary += f"; wrote {', '.join(written)}" if written else "; Graphviz missing: Mermaid only"
    return CheckResult("diagram", "passed", summary, details={"files": written})


def write_svg_once(target: Path, dot: bytes, draw: Callable[[], bytes]) -> None:
    """Graphviz (2.43) lays the same DOT source out differently from run to run, so
    the committed SVG is redrawn only when its source changed: it carries the source's
    digest, and a file with the same digest is left as it is."""
    mark = SVG_SOURCE_MARK.format(hashlib.sha256(dot).hexdigest()).encode()
    try:
        if mark in target.read_bytes():
            return
    except OSError:
        pass
    svg = draw()
    at = svg.find(b"<svg")
    write_atomically(target, svg[:at] + mark + svg[at:] if at >= 0 else svg + mark)
