"""``replan generate``: write ``controller/_generated.py`` from the declaration.

Owns turning a ``MachineModel`` (spec/model.py) into plain Python: one method per
event, dispatching on the declared state with an ``if``/``elif`` chain per state whose
order is the declaration's priority order. The named bodies of ``controller.run.Run``
(or of the ``model_class`` given, so a subclass's override is what gets copied) are
inlined the way a person would write them out, each named in a comment, so the hot
path makes no Python calls (``inlining``); consecutive transitions sharing a first
conjunct are nested; a record argument's fields, a field read twice along one path and
a tuple built twice are read or built once (``methods``); ``writer`` writes the
module out. The rewrites are mechanical and preserve meaning (``rewrite``); the output
is deterministic, which ``replan generate --check`` relies on (``output``).

``translate`` (what ``verification/translate/symbolic`` turns into z3) is the guard
before the method-local rewrites; they only change how the same values are read.
"""

from __future__ import annotations

from replan.spec.generator.common import GENERATED_PATH, GenerationError, diagram_label
from replan.spec.generator.output import (
    GENERATED_PREFIX,
    check_generated,
    generate_source,
    load_controller,
    load_source,
    render_controller,
    write_generated,
)
from replan.spec.generator.writer import Generator

__all__ = [
    "GENERATED_PATH",
    "GENERATED_PREFIX",
    "GenerationError",
    "Generator",
    "check_generated",
    "diagram_label",
    "generate_source",
    "load_controller",
    "load_source",
    "render_controller",
    "write_generated",
]
