"""The generated controller as text, as a loaded class, and as the committed file."""

from __future__ import annotations

import hashlib
import linecache
from pathlib import Path

from replan.controller.run import Run
from replan.spec.generator.common import GENERATED_PATH
from replan.spec.generator.writer import Generator
from replan.spec.model import MachineModel, extract


def generate_source(machine_class: type | None = None, model_class: type = Run) -> str:
    """The text of ``controller/_generated.py`` for a declaration (default: the
    project's ``replan.spec.declaration.Replanning``)."""
    if machine_class is None:
        from replan.spec.declaration import Replanning

        machine_class = Replanning
    return render_controller(extract(machine_class, model_class), model_class)


def render_controller(model: MachineModel, model_class: type = Run) -> str:
    """The generated source for an already extracted (possibly transformed) model:
    what mutation tests use to build deliberately broken controllers the same way
    the real one is built."""
    return Generator(model, model_class).render()


#: The module a controller loaded from another declaration or bodies is generated
#: into is this prefix and its name, dashes as underscores (a broken controller of
#: ``verification.subjects.mutants`` is importable there under that name too).
GENERATED_PREFIX = "replan_generated_"


def load_controller(model: MachineModel, model_class: type = Run, name: str = "") -> type[Run]:
    """Generate and load a controller class in memory (never written to disk)."""
    return load_source(render_controller(model, model_class), name or model.name)


def load_source(source: str, name: str) -> type[Run]:
    """The ``Controller`` class a generated module's ``source`` defines, loaded in
    memory. The source is registered like a file's, so its methods can be read back
    (the translation validation translates exactly what runs) and tracebacks show it."""
    filename = f"<generated {name} {hashlib.sha256(source.encode()).hexdigest()[:12]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, object] = {"__name__": GENERATED_PREFIX + name.replace("-", "_")}
    exec(compile(source, filename, "exec"), namespace)
    controller = namespace["Controller"]
    assert isinstance(controller, type) and issubclass(controller, Run)
    return controller


def check_generated(path: Path = GENERATED_PATH) -> bool:
    """True when the file on disk is exactly what the declaration generates."""
    try:
        on_disk = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    return on_disk == generate_source()


def write_generated(path: Path = GENERATED_PATH) -> bool:
    """Write the generated file; True when its content changed."""
    source = generate_source()
    try:
        if path.read_text(encoding="utf-8") == source:
            return False
    except FileNotFoundError:
        pass
    path.write_text(source, encoding="utf-8")
    return True
