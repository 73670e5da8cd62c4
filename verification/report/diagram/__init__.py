"""State diagrams of the declared machine, for review (``replan diagram``).

Drawn from ``spec.model.extract(Replanning)``, never by hand: every declared
transition, internal self-transitions included, with its event, priority and guard;
the final states with their stop reasons and what a stopped run answers; the policy in
the legend. Overlays mark coverage, a counterexample's path or a diff.

Two views: ``full`` (every transition, a row of its state: today's review diagram)
and ``overview`` (the transitions that change the state as arrows with their guards
over the policy's values, each state's internal ones folded into one counted line per
event; readable at 1200 px).

Modules: ``graph`` (the renderer-independent model and the overlays), ``guard_policy``
(which policy fields each guard reads), ``overlays`` (reading coverage, counterexample
and older-machine inputs), ``dot`` (DOT source, and SVG/PNG through Graphviz: the
only module that runs ``dot``), ``overview`` (the overview's DOT), ``mermaid``
(``stateDiagram-v2`` and a strict reader of it), ``readme`` (the block the docs'
machine page embeds).

Python use (``replan verify`` and tests)::

    from replan.verification.report.diagram import machine_diagram, render
    render(machine_diagram(), "svg")       # bytes; GraphvizMissing without dot
    render(machine_diagram(), "svg", view="overview")
"""

from __future__ import annotations

from replan.controller.policy import DEFAULT_POLICY, Policy
from replan.verification.report.diagram import dot, mermaid, overview
from replan.verification.report.diagram.graph import Diagram, build

FORMATS = ("svg", "png", "dot", "mermaid")
VIEWS = ("full", "overview")
#: File suffixes that imply a format when ``--format`` is not given.
SUFFIXES = {".svg": "svg", ".png": "png", ".dot": "dot", ".gv": "dot", ".mmd": "mermaid"}


def machine_diagram(policy: Policy | None = None) -> Diagram:
    """The diagram of the declared machine (``replan.spec.declaration.Replanning``)."""
    from replan.spec.declaration import Replanning
    from replan.spec.model import extract

    return build(extract(Replanning), DEFAULT_POLICY if policy is None else policy)


def render(diagram: Diagram, output_format: str, view: str = "full") -> bytes:
    """The diagram in ``output_format`` (one of ``FORMATS``) and ``view`` (one of
    ``VIEWS``) as bytes. The overview is drawn by Graphviz only (svg, png, dot)."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r} (one of {', '.join(VIEWS)})")
    if output_format == "mermaid":
        if view == "overview":
            raise ValueError(
                "the overview is drawn by Graphviz: use --format svg, png or dot "
                "(Mermaid draws the full view)"
            )
        return mermaid.to_mermaid(diagram).encode()
    source = overview.to_dot(diagram) if view == "overview" else dot.to_dot(diagram)
    if output_format == "dot":
        return source.encode()
    if output_format in ("svg", "png"):
        data = dot.render(source, output_format)
        if view == "overview" and output_format == "svg":
            data = overview.with_titles(data.decode()).encode()
        return data
    raise ValueError(f"unknown format {output_format!r} (one of {', '.join(FORMATS)})")


def readme_mermaid() -> str:
    """The Mermaid block the docs' machine page embeds: the default machine, no overlay."""
    return mermaid.to_mermaid(machine_diagram())
