"""What the boundary check costs ``replan verify`` (``replan bench --tool boundary``).

``replan verify --profile ci`` on the default policy, run with the boundary check and
without it, interleaved (with, without, with, ...), each run a fresh process whose
report goes to a temporary directory: the median wall time of each, their difference
and ratio, and the boundary check's own time as verify reports it. Both runs go through
``python -m replan.verification.bench.boundary``, which calls the same ``verify()`` as
the command with the same options but ``boundary``, so the difference is the check's.

The goal: the boundary check adds at most ``LIMIT_SECONDS`` to the ci profile's run.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from replan.verification.runtime.interrupt import say

#: The most the boundary check may add to ``replan verify --profile ci`` (seconds).
LIMIT_SECONDS = 15.0
COMMAND = "replan verify --profile ci"


def stderr_progress(text: str) -> None:
    say(f"replan bench: {text}")


def _one(boundary: bool, scratch: Path) -> tuple[float, float | None, bool]:
    """One verify run in a fresh process: its wall time, the boundary check's time
    (None: not run) and whether every check held."""
    directory = scratch / f"{'with' if boundary else 'without'}-{time.monotonic_ns()}"
    command = [sys.executable, "-m", __name__, "with" if boundary else "without", str(directory)]
    started = time.perf_counter()
    subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    report = directory / "verify.json"
    document = json.loads(report.read_text(encoding="utf-8")) if report.is_file() else {}
    checks = {c["name"]: c for c in document.get("checks", [])}
    own = checks["boundary"]["seconds"] if "boundary" in checks else None
    return seconds, own, bool(document.get("ok"))


def boundary_figures(
    quick: bool, progress: Callable[[str], None] = stderr_progress, samples: int | None = None
) -> dict[str, Any]:
    """Every figure of ``replan bench --tool boundary`` (``samples`` runs of each; 1
    with ``--quick``, else 3)."""
    count = samples or (1 if quick else 3)
    with_boundary: list[float] = []
    without: list[float] = []
    own: list[float] = []
    held = True
    with tempfile.TemporaryDirectory(prefix="replan-bench-boundary-") as scratch:
        for sample in range(count):
            for boundary in (True, False):
                progress(
                    f"boundary bench: {COMMAND} {'with' if boundary else 'without'} the "
                    f"boundary check, sample {sample + 1}/{count}"
                )
                seconds, check_seconds, ok = _one(boundary, Path(scratch))
                held = held and ok
                (with_boundary if boundary else without).append(seconds)
                if check_seconds is not None:
                    own.append(check_seconds)
    median_with, median_without = statistics.median(with_boundary), statistics.median(without)
    added = median_with - median_without
    return {
        "command": f"{COMMAND} (default policy), with and without the boundary check",
        "samples": count,
        "with_median_s": round(median_with, 1),
        "without_median_s": round(median_without, 1),
        "added_s": round(added, 1) or 0.0,  # never "-0.0"
        "ratio": round(median_with / max(median_without, 1e-9), 2),
        "check_median_s": round(statistics.median(own), 1) if own else None,
        "limit_s": LIMIT_SECONDS,
        "within_limit": added <= LIMIT_SECONDS,
        "all_held": held,
        "runs_s": {
            "with": [round(s, 1) for s in with_boundary],
            "without": [round(s, 1) for s in without],
            "check": [round(s, 1) for s in own],
        },
    }


def boundary_lines(figures: dict[str, Any]) -> list[str]:
    """The table's lines for these figures."""
    runs = figures["runs_s"]
    return [
        f"{figures['command']}: {figures['samples']} runs of each, interleaved",
        f"median {figures['with_median_s']} s with, {figures['without_median_s']} s without: "
        f"the boundary check adds {figures['added_s']} s (ratio {figures['ratio']}; the "
        f"check itself {figures['check_median_s']} s); goal <= {figures['limit_s']:.0f} s: "
        f"{'met' if figures['within_limit'] else 'MISSED'}",
        f"runs: with {runs['with']} s, without {runs['without']} s, check {runs['check']} s",
    ]


def _verify(boundary: bool, directory: Path) -> int:
    """``replan verify --profile ci`` on the default policy into ``directory``, with or
    without the boundary check: 0 when every check held."""
    import logging

    from replan.controller.policy import DEFAULT_POLICY
    from replan.verification.pipeline import VerifyOptions, verify

    logging.getLogger("agent_framework").setLevel(logging.CRITICAL)
    options = VerifyOptions(profile="ci", workers=None, boundary=boundary)  # the command's
    report = verify(DEFAULT_POLICY, directory, options, progress=lambda _text: None)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(_verify(sys.argv[1] == "with", Path(sys.argv[2])))
