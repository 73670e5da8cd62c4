"""Check 6, diagram: the machine drawn from the declaration (SVG and Mermaid).

Drawing is not verifying: a Graphviz that is missing or fails (half-installed, say)
leaves the check passed with Mermaid only and a finding about the SVG; no property
depends on it."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

from replan.verification.pipeline.session import VerifySession
from replan.verification.report.records import CheckResult
from replan.verification.runtime.files import write_atomically

#: In the committed machine.svg: the digest of the DOT source it was drawn from.
SVG_SOURCE_MARK = "<!-- replan: drawn from DOT source sha256:{} -->\n"


def check_diagram(session: VerifySession) -> CheckResult:
    from replan.verification.report.diagram import machine_diagram, render
    from replan.verification.report.diagram.dot import GraphvizFailed, graphviz_problem

    diagram = machine_diagram(session.policy)
    mermaid = render(diagram, "mermaid").decode()
    session.report.mermaid = mermaid
    written = []
    warnings = []
    summary = f"{len(diagram.edges)} transitions drawn"
    problem = graphviz_problem()
    if shutil.which("dot") is None:
        summary += "; Graphviz missing: Mermaid only"
    elif problem is not None:
        warnings.append(f"Graphviz cannot draw SVG here, so none was drawn: {problem}")
        summary += "; Graphviz failed: Mermaid only"
    else:
        target = session.evidence / "machine.svg"
        try:
            if session.deterministic:
                write_svg_once(target, render(diagram, "dot"), lambda: render(diagram, "svg"))
            else:
                write_atomically(target, render(diagram, "svg"))
            written.append(str(target))
        except GraphvizFailed as error:
            warnings.append(f"Graphviz cannot draw SVG here, so none was drawn: {error}")
            summary += "; Graphviz failed: Mermaid only"
    if written:
        summary += f"; wrote {', '.join(written)}"
    return CheckResult("diagram", "passed", summary, details={"files": written}, warnings=warnings)


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
