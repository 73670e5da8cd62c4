"""The review page (``replan review``): one self-contained HTML file with the machine,
the verify results and a step-through player for any recorded run.

Owns gathering what the page shows (``build``: the two diagram views as inline SVG,
the coverage and diff overlays, the recordings played back) and writing it as HTML
(``page``: markup, the inline stylesheet and script from ``assets/``). Every figure on
the page comes from a record another tool already owns, never recomputed here:
verify's ``VerifyReport`` read back from its ``verify.json``, the diagrams of
``verification.report.diagram`` (Graphviz), the recordings played by
``verification.engines.conform.playback`` on the generated controller. ``replan review
--json`` prints the same records the page embeds, so the two cannot disagree.

The page loads nothing: no network, no CDN, its Content-Security-Policy forbids any
fetch. Everything but the player works without JavaScript (both views are shown one
after the other, every recording as a table of its steps); the player adds previous,
next and play controls, the keyboard, and the highlight of the fired transition.
"""

from replan.verification.report.review.build import Review, build_review
from replan.verification.report.review.page import to_html

__all__ = ["Review", "build_review", "to_html"]
