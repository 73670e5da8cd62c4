"""``replan explore --engine spin``: SPIN as a backend for the explorer.

Owns running the Promela model that ``verification/translate/promela.py`` translates from the
declaration, the bodies, the policy and the properties: compiling SPIN's verifier
(``pan``) in safety mode, choosing how it stores states (exact, then collapse
compression, then bitstate when a memory budget is exceeded), reading its counts, and turning an
assertion it reports into a counterexample on the real generated controller. A
trail is replayed call by call on the controller; when the property SPIN names does
not fail there, the result is a *translation bug*, never a property failure.

SPIN (Debian's ``spin``) and gcc are needed; without them this raises a one-line
error naming the package.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from replan.controller.policy import Policy
from replan.verification.core.domains import Domains, InputSpace
from replan.verification.core.search import (
    EngineUnavailable,
    SearchOptions,
    SearchResult,
)
from replan.verification.core.subject import Subject
from replan.verification.engines.trail import ModelViolation, initial_failure, replay_calls
from replan.verification.translate.promela import PromelaModel, translate

#: How pan stores states, in the order tried when memory runs out: exact (every
#: state vector), collapse (each vector compressed losslessly into indices of its
#: parts: exact counts, less memory, slower) and bitstate (a few bits per state: a
#: collision hides a state, so the counts are lower bounds). Hash-compact (-DHC4) is
#: not offered: Debian's SPIN 6.5.2 loses states with it on this model and on the
#: hand-written anchor alike (39,993 of the anchor's 63,903 at (V, K) = (1, 1)).
STORAGES = ("exact", "collapse", "bitstate")
_STORAGE_FLAGS = {"exact": [], "collapse": ["-DCOLLAPSE"], "bitstate": ["-DBITSTATE"]}
#: pan's search depth limit, one call per step: runs of a bounded policy stop long
#: before (the termination rank); a deeper search is reported incomplete. Its stack
#: costs 46 bytes a step of memory.
MAX_DEPTH = 10_000


class SpinUnavailable(EngineUnavailable):
    """spin or gcc is not installed."""


def require_spin() -> None:
    missing = [tool for tool in ("spin", "gcc") if shutil.which(tool) is None]
    if missing:
        raise SpinUnavailable(
            f"{' and '.join(missing)} not found: --engine spin needs "
            "`apt-get update && apt-get install -y spin gcc`"
        )


def explore_spin(
    policy: Policy,
    domains: Domains,
    subject: Subject,
    *,
    memory_mb: int | None = None,
    storage: str | None = None,
    workdir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> SearchResult:
    """Translate, compile and run SPIN on ``subject`` over ``domains``. ``storage``
    None: exact, falling back to collapse then bitstate when ``memory_mb`` (pan's
    limit) is exceeded. Without ``workdir`` the model, pan and its output live in a
    temporary directory, removed afterwards."""
    require_spin()
    say = progress or (lambda _message: None)
    started = time.perf_counter()
    model = translate(
        policy, domains, subject.model, subject.model_class, progress=say, contract=subject.contract
    )
    translated = time.perf_counter() - started
    if workdir is not None:
        Path(workdir).mkdir(parents=True, exist_ok=True)
        return _run_pan(
            policy, domains, subject, model, Path(workdir), memory_mb, storage, translated, say
        )
    with tempfile.TemporaryDirectory(prefix="replan-spin-") as directory:
        return _run_pan(
            policy, domains, subject, model, Path(directory), memory_mb, storage, translated, say
        )


def _run_pan(
    policy: Policy,
    domains: Domains,
    subject: Subject,
    model: PromelaModel,
    directory: Path,
    memory_mb: int | None,
    storage: str | None,
    translated: float,
    say: Callable[[str], None],
) -> SearchResult:
    (directory / "model.pml").write_text(model.text)
    _run(["spin", "-a", "model.pml"], directory, "spin -a")
    tried = [storage] if storage is not None else list(STORAGES)
    notes: list[str] = []
    for index, mode in enumerate(tried):
        output, compiled = _compile_and_search(directory, mode, memory_mb, say)
        out_of_memory = "out of memory" in output or "reached -DMEMLIM bound" in output
        if out_of_memory and index + 1 < len(tried):
            notes.append(
                f"{mode} storage ran out of --memory {memory_mb} MB; trying {tried[index + 1]}"
            )
            continue
        summary = _summary(output)
        if out_of_memory:
            notes.append(f"pan ran out of memory ({memory_mb} MB): the search is incomplete")
        if "max search depth too small" in output:
            notes.append(f"a run is deeper than pan's depth limit ({MAX_DEPTH:,} calls)")
        if mode == "bitstate":
            notes.append("bitstate storage: a hash collision may have hidden states")
        complete = (
            mode != "bitstate"
            and "Search not completed" not in output
            and "max search depth too small" not in output
        )
        result = _result(policy, domains, subject, model, mode, summary, complete, notes)
        result.details["seconds"] = {
            "translate": round(translated, 3),
            "compile": round(compiled, 3),
            "search": round(summary["seconds"], 3),
        }
        result.notes.insert(
            1,
            f"  translate {translated:.1f} s, compile {compiled:.1f} s, search "
            f"{summary['seconds']:.2f} s; memory {summary['memory']:,.0f} MB (state vector "
            f"{summary['vector']} bytes)",
        )
        violated_property = _violated(output)
        if violated_property is not None:
            result.complete = False
            result.stopped_by = "violation"
            violation = replay_trail(policy, subject, model, directory, violated_property)
            violation.report_in(result, "SPIN's model")
        elif summary["errors"]:
            raise RuntimeError(
                f"pan reported {summary['errors']} error(s) that are not "
                f"assertions; see {directory / f'pan-{mode}.out'}"
            )
        return result
    raise AssertionError("unreachable: the last storage is always reported")


def _result(
    policy: Policy,
    domains: Domains,
    subject: Subject,
    model: PromelaModel,
    storage: str,
    summary: dict[str, Any],
    complete: bool,
    notes: list[str],
) -> SearchResult:
    """pan's figures as the one result every engine answers."""
    space = InputSpace(policy, domains)
    counts = "lower bounds: bitstate" if storage == "bitstate" else "exact"
    return SearchResult(
        engine="spin",
        policy=policy,
        implementation=subject.implementation_path,
        domains=space.describe(),
        domain_lines=space.lines(),
        symmetry=False,
        states=summary["states"],
        transitions=summary["transitions"],
        depth=summary["depth"],
        seconds=summary["seconds"],
        complete=complete,
        stopped_by=None if complete else "incomplete",
        findings=[
            initial_failure(policy, name, subject, "spin") for name in model.initial_failures
        ],
        properties_checked=len(model.checked),
        coverage_measured=False,
        details={
            "storage": storage,
            "exact_counts": storage != "bitstate",
            "state_vector_bytes": summary["vector"],
            "memory_mb": summary["memory"],
            "model_digest": model.digest,
            "calls_per_state": len(model.calls),
            "checked": model.checked,
            "unchecked": model.unchecked,
        },
        notes=[
            f"engine: SPIN (the declaration translated to Promela, {len(model.calls)} calls "
            f"per state; model {model.digest[:19]}; counts {counts})",
            f"properties asserted after every call: {len(model.checked)}",
            *(
                f"  not checked by SPIN: {name} ({why})"
                for name, why in sorted(model.unchecked.items())
            ),
            *notes,
        ],
        artifact=model.text,
    )


def _compile_and_search(
    directory: Path, mode: str, memory_mb: int | None, say: Callable[[str], None]
) -> tuple[str, float]:
    """(pan's output, seconds compiling) for one storage."""
    say(f"compiling pan ({mode} storage)")
    started = time.perf_counter()
    flags = ["-O1", "-DSAFETY", "-DNOREDUCE", *_STORAGE_FLAGS[mode]]
    if memory_mb is not None:
        flags.append(f"-DMEMLIM={memory_mb}")
    _run(["gcc", *flags, "-o", "pan", "pan.c"], directory, "gcc pan.c")
    compiled = time.perf_counter() - started
    say(f"searching ({mode} storage)")
    arguments = ["./pan", f"-m{MAX_DEPTH}", f"-w{_hash_width(mode, memory_mb)}"]
    output = _search(arguments, directory, say)
    (directory / f"pan-{mode}.out").write_text(output)
    return output, compiled


def _search(arguments: list[str], directory: Path, say: Callable[[str], None]) -> str:
    """Run pan, passing its progress lines (one per million states) to ``say``."""
    lines: list[str] = []
    with subprocess.Popen(
        arguments,
        cwd=directory,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            match = _PROGRESS.match(line)
            if match is not None:
                states, transitions, memory, seconds = match.groups()
                say(
                    f"pan: {float(states):,.0f} states, {float(transitions):,.0f} "
                    f"transitions, {float(memory):,.0f} MB, {float(seconds):.0f} s"
                )
    return "".join(lines)


_PROGRESS = re.compile(
    r"Depth=\s*\d+ States=\s*([\d.e+]+) Transitions=\s*([\d.e+]+) "
    r"Memory=\s*([\d.]+)\s+t=\s*([\d.]+)"
)


def _hash_width(storage: str, memory_mb: int | None) -> int:
    """pan's -w: log2 of the hash table's slots. Bitstate: a bit array of half the
    memory budget; otherwise a table of 8-byte slots of a quarter of it. Without a
    budget, pan's default table (2^24 slots, 128 MB: few collisions up to ~10^7
    states) or a bit array of 512 MB."""
    if memory_mb is None:
        return 32 if storage == "bitstate" else 24
    budget = memory_mb * 1024 * 1024
    size = budget // 2 * 8 if storage == "bitstate" else budget // 4 // 8
    return max(18, min(36, size.bit_length() - 1))


def _run(command: list[str], directory: Path, what: str) -> None:
    completed = subprocess.run(command, cwd=directory, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        message = (completed.stderr or completed.stdout).strip().splitlines()
        raise RuntimeError(
            f"{what} failed in {directory}: {message[0] if message else completed.returncode}"
        )


_PATTERNS = {
    "vector": re.compile(r"State-vector (\d+) byte"),
    "depth": re.compile(r"depth reached (\d+)"),
    "errors": re.compile(r"errors: (\d+)"),
    "states": re.compile(r"([\d.e+]+) states, stored"),
    "transitions": re.compile(r"([\d.e+]+) transitions \("),
    "seconds": re.compile(r"pan: elapsed time ([\d.e+]+) seconds"),
    "memory": re.compile(r"([\d.]+)\s+total actual memory usage"),
}


def _summary(output: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, pattern in _PATTERNS.items():
        match = pattern.search(output)
        if match is None:
            if name == "memory":
                found[name] = 0.0
                continue
            raise RuntimeError(f"could not read {name} from pan's output: {output[-300:]!r}")
        text = match.group(1)
        # pan prints large counts as 3.0510334e+08 (8 significant digits)
        found[name] = float(text) if name in ("seconds", "memory") else int(float(text))
    if found["states"] == 0:  # pan stopped before its first state: its clock never started
        found["seconds"] = 0.0
    return found


def _violated(output: str) -> str | None:
    match = re.search(r"assertion violated (\w+)", output)
    if match is None:
        return None
    return match.group(1)


class SpinEngine:
    """SPIN as an engine (``--engine spin``): the declaration, bodies, policy and
    properties translated to Promela and searched by pan."""

    name = "spin"
    supports = frozenset({"memory_mb", "storage"})

    def search(
        self,
        subject: Subject,
        policy: Policy,
        domains: Domains | Sequence[Domains] | None,
        options: SearchOptions,
    ) -> SearchResult:
        if not isinstance(domains, Domains):
            raise ValueError(
                f"--engine {self.name} needs one domain of fixed calls (--spin-domains)"
            )
        return explore_spin(
            policy,
            domains,
            subject,
            memory_mb=options.memory_mb,
            storage=options.storage,
            progress=options.progress,
        )


def replay_trail(
    policy: Policy, subject: Subject, model: PromelaModel, directory: Path, flag: str
) -> ModelViolation:
    """SPIN's trail as calls, run on the generated controller: a violation only when
    the property SPIN names fails there too."""
    completed = subprocess.run(
        ["spin", "-t", "model.pml"], cwd=directory, capture_output=True, text=True, check=False
    )
    calls = [int(n) for n in re.findall(r"^\s*CALL (\d+)$", completed.stdout, re.MULTILINE)]
    names = {f"p_{name.replace('-', '_')}": name for name in model.checked}
    prop = names.get(flag, flag)
    if flag == "int_range":
        return ModelViolation(
            prop, calls, False, None, "a counter left the model's short range (a translation limit)"
        )
    return replay_calls(
        policy,
        subject,
        model.calls,
        list(model.unchecked),
        calls,
        prop,
        "SPIN",
        "spin",
        {"engine": "spin", "model_digest": model.digest},
    )
