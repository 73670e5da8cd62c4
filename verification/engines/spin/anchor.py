"""Running the SPIN model of the contract (``shared/anchors/spin``) for a side-by-side
figure: ``replan explore --spin-domains --compare-spin``.

Owns calling the anchor's ``run_spin.sh V K`` (it builds ``controller.pml`` with SPIN
and gcc and runs the exhaustive safety search) and reading its one-line summary. SPIN
is not a dependency of replan: without it, this raises a one-line error.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SpinRun:
    versions: int
    ids: int
    states: int
    transitions: int
    depth: int
    seconds: float
    errors: int


_FIELDS = re.compile(r"(\w+)=([\d.]+)s?")


def run_spin(anchor: Path, versions: int, ids: int, timeout: float = 3600) -> SpinRun:
    """SPIN's states, transitions, depth and time for (V, K) = (versions, ids)."""
    script = anchor / "run_spin.sh"
    if not script.is_file():
        raise OSError(f"{script}: no such file (the SPIN anchor directory)")
    if shutil.which("spin") is None or shutil.which("gcc") is None:
        raise OSError("spin and gcc are needed: apt-get update && apt-get install -y spin")
    completed = subprocess.run(
        ["bash", str(script), str(versions), str(ids)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    line = completed.stdout.strip().splitlines()[0] if completed.stdout.strip() else ""
    fields = dict(_FIELDS.findall(line))
    try:
        return SpinRun(
            versions=versions,
            ids=ids,
            states=int(fields["states"]),
            transitions=int(fields["transitions"]),
            depth=int(fields["depth"]),
            seconds=float(fields["time"]),
            errors=int(fields["errors"]),
        )
    except (KeyError, ValueError):
        raise ValueError(
            f"could not read SPIN's summary from {script} (got {line!r}; "
            f"stderr: {completed.stderr.strip()[:200]!r})"
        ) from None
