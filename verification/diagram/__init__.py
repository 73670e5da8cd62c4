"""State diagrams of the declared machine, for review (``replan diagram``).

Drawn from ``spec.model.extract(Replanning)``, never by hand: every declared
transition, internal self-transitions included, with its event, priority and guard;
the final states with their stop reasons and what a stopped run answers; the policy in
the legend. Overlays mark coverage, a counterexample's path or a diff.

Modules: ``graph`` (the renderer-independent model and the overlays), ``guard_policy``
(which policy fields each guard reads), ``overlays`` (reading coverage, counterexample
and older-machine inputs), ``dot`` (DOT source, and SVG/PNG through Graphviz: the
only module that runs ``dot``), ``mermaid`` (``stateDiagram-v2`` and a strict reader
of it), ``readme`` (the README's embedded block).

Python use (``replan verify`` and tests)::

    from verification.diagram import machine_diagram, render
    render(machine_diagram(), "svg")       # bytes; GraphvizMissing without dot
"""

from __future__ import annotations

from controller.policy import DEFAULT_POLICY, Policy
from verification.diagram import dot, mermaid
from verification.diagram.graph import Diagram, build

FORMATS = ("svg", "png", "dot", "mermaid")
#: File suffixes that imply a format when ``--format`` is not given.
SUFFIXES = {".svg": "svg", ".png": "png", ".dot": "dot", ".gv": "dot", ".mmd": "mermaid"}


def machine_diagram(policy: Policy | None = None) -> Diagram:
    """The diagram of the declared machine (``spec.declaration.Replanning``)."""
    from spec.declaration import Replanning
    from spec.model import extract

    return build(extract(Replanning), DEFAULT_POLICY if policy is None else policy)


def render(diagram: Diagram, output_format: str) -> bytes:
    """The diagram in ``output_format`` (one of ``FORMATS``) as bytes."""
    if output_format == "mermaid":
        return mermaid.to_mermaid(diagram).encode()
    source = dot.to_dot(diagram)
    if output_format == "dot":
        return source.encode()
    if output_format in ("svg", "png"):
        return dot.render(source, output_format)
    raise ValueError(f"unknown format {output_format!r} (one of {', '.join(FORMATS)})")


def readme_mermaid() -> str:
    """The Mermaid block the README embeds: the default machine, no overlay."""
    return mermaid.to_mermaid(machine_diagram())
