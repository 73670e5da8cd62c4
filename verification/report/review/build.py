"""What the review page shows, gathered from the records other tools own.

``build_review`` takes verify's report (read back from ``verify.json``), the
recordings already played (``verification.engines.conform.playback``) and, with ``--against``, the
older machine and verify's ``against`` check, and renders the diagrams: the overview
and the full view of the machine, the full view with the campaign's coverage, and
the diff. Each SVG is inlined with its ids prefixed by its view (``ov-``, ``full-``,
``cov-``, ``diff-``), since one HTML document holds all of them, and ``elements``
says which element of each view stands for each declared transition, so the player
highlights by looking a label up, never by guessing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any

from replan.controller.policy import Policy, policy_to_dict
from replan.spec.model import MachineModel
from replan.verification.engines.conform.playback import Playback
from replan.verification.report.diagram import overview, render
from replan.verification.report.diagram.dot import (
    GraphvizFailed,
    GraphvizMissing,
    dot_available,
    edge_id,
)
from replan.verification.report.diagram.graph import Diagram, build, diff, with_coverage
from replan.verification.report.diagram.overlays import OldMachine
from replan.verification.report.records import CheckResult, VerifyReport

#: The views of the machine the player highlights in, and their id prefixes.
PLAYER_VIEWS = {"overview": "ov-", "full": "full-"}
COVERAGE_PREFIX = "cov-"
DIFF_PREFIX = "diff-"


@dataclass
class Review:
    """Everything the page shows (the SVGs are markup ready to inline; ``""`` where
    Graphviz is missing, and the page shows the Mermaid source instead)."""

    command: str
    policy: Policy
    policy_name: str
    model: MachineModel
    diagram: Diagram
    report: VerifyReport
    verify_source: str
    playbacks: list[Playback]
    views: dict[str, str]
    mermaid: str
    #: The font family Graphviz measured the text with (``measured_font``).
    font: str = ""
    coverage: Diagram | None = None
    coverage_svg: str = ""
    against: CheckResult | None = None
    diff: Diagram | None = None
    diff_svg: str = ""
    diff_mermaid: str = ""
    #: transition label -> view -> the ids of the elements that stand for it
    elements: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    #: state id -> the ids of its node in each view
    states: dict[str, list[str]] = field(default_factory=dict)

    @property
    def graphviz(self) -> bool:
        return bool(self.views)

    def to_json(self) -> dict[str, Any]:
        """The records the page embeds for its player and ``replan review --json``
        prints: verify's report as verify writes it, every recording played back,
        and where each transition is drawn."""
        return {
            "command": self.command,
            "machine": {
                "name": self.model.name,
                "digest": self.model.digest,
                "caption": self.diagram.caption,
            },
            "policy_name": self.policy_name,
            "policy": policy_to_dict(self.policy),
            "verify": {"source": self.verify_source, **self.report.to_json()},
            "views": list(self.views) or ["mermaid"],
            "traces": [playback.to_json() for playback in self.playbacks],
            "elements": self.elements,
            "states": self.states,
            "against": None if self.against is None else self.against.to_json(),
        }


def inline_svg(svg: bytes, prefix: str) -> str:
    """Graphviz's SVG as markup to put in HTML: no XML prolog, DOCTYPE (whose URL is
    a name, but a name the page has no need of) or comments, every id and in-document
    link prefixed so that several diagrams live in one document."""
    text = svg.decode()
    text = text[text.index("<svg") :]
    text = re.sub(r"<!--.*?-->\s*", "", text, flags=re.DOTALL)
    text = re.sub(r'\bid="', f'id="{prefix}', text)
    text = text.replace('xlink:href="#', f'xlink:href="#{prefix}')
    return text.replace("<svg ", '<svg class="diagram" ', 1)


def measured_font() -> str:
    """The family Graphviz measured the diagrams' text with. It writes
    ``font-family="Helvetica,sans-Serif"`` but measures "Helvetica" as its PostScript
    alias, the generic sans-serif that fontconfig resolves (DejaVu Sans on Debian),
    while a browser's "Helvetica" is often another, narrower font (Liberation Sans):
    rows would gap. The page draws the text in this family, where the viewer has it.
    ``""`` when fontconfig cannot say (the SVG's own font-family then applies)."""
    executable = shutil.which("fc-match")
    if executable is None:
        return ""
    try:
        completed = subprocess.run(
            [executable, "-f", "%{family[0]}", "sans-serif"],
            capture_output=True,
            text=True,
            check=False,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    family = completed.stdout.strip()
    return family if completed.returncode == 0 and re.fullmatch(r"[\w .-]+", family) else ""


def _elements(diagram: Diagram) -> dict[str, dict[str, list[str]]]:
    found: dict[str, dict[str, list[str]]] = {}
    for edge in diagram.edges:
        identity = edge_id(edge)
        full = [f"a_{identity}-row"]
        if not (edge.internal and edge.source == edge.target):
            full.insert(0, identity)
        found[edge.key] = {
            "overview": [PLAYER_VIEWS["overview"] + i for i in overview.elements_of(edge)],
            "full": [PLAYER_VIEWS["full"] + i for i in full],
        }
    return found


def _coverage(report: VerifyReport, diagram: Diagram) -> Diagram | None:
    """The full view weighted by the campaign's fire counts, from verify's record."""
    campaign = next((c for c in report.checks if c.name == "campaign"), None)
    transitions = ((campaign.details if campaign else {}).get("coverage") or {}).get("transitions")
    if not isinstance(transitions, dict) or not isinstance(transitions.get("fired"), dict):
        return None
    declared = {e.key for e in diagram.edges}
    counts = {k: int(v) for k, v in transitions["fired"].items() if k in declared}
    dead = {str(k): str(v) for k, v in (transitions.get("dead_under_policy") or {}).items()}
    return with_coverage(diagram, counts, dead)


def _svg(diagram: Diagram, view: str, prefix: str) -> str:
    """One view as inline markup; every row's and arrow's title a ``<title>``, which a
    browser shows on pointing (the full view's are the transitions' labels)."""
    try:
        svg = overview.with_titles(render(diagram, "svg", view).decode()).encode()
        return inline_svg(svg, prefix)
    except (GraphvizMissing, GraphvizFailed):
        return ""


def build_review(
    *,
    command: str,
    policy: Policy,
    policy_name: str,
    model: MachineModel,
    report: VerifyReport,
    verify_source: str,
    playbacks: list[Playback],
    old: OldMachine | None = None,
    against: CheckResult | None = None,
) -> Review:
    """Render the diagrams and gather the records into one ``Review``."""
    diagram = build(model, policy)
    graphviz = dot_available()
    views = (
        {name: _svg(diagram, name, prefix) for name, prefix in PLAYER_VIEWS.items()}
        if graphviz
        else {}
    )
    views = {name: markup for name, markup in views.items() if markup}
    review = Review(
        command=command,
        policy=policy,
        policy_name=policy_name,
        model=model,
        diagram=diagram,
        report=report,
        verify_source=verify_source,
        playbacks=playbacks,
        views=views,
        mermaid=render(diagram, "mermaid").decode(),
        font=measured_font() if views else "",
        against=against,
        elements=_elements(diagram),
        states={
            node.id: [f"{prefix}state-{node.id}" for prefix in PLAYER_VIEWS.values()]
            for node in diagram.nodes
        },
    )
    review.coverage = _coverage(report, diagram)
    if review.coverage is not None and views:
        review.coverage_svg = _svg(review.coverage, "full", COVERAGE_PREFIX)
    if old is not None:
        review.diff = diff(old.model, old.policy, model, policy, old.name, old.model_class)
        review.diff_mermaid = render(review.diff, "mermaid").decode()
        if views:
            review.diff_svg = _svg(review.diff, "full", DIFF_PREFIX)
    return review
