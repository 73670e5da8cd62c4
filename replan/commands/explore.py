"""Explore every reachable state of the controller, breadth-first, checking every
property of spec/properties.py on every transition, over finite input domains that
the report states in full.

  replan explore                          the default report: two focused domains that
                                          reach every declared transition and stop reason
  replan explore --json                   the same, as JSON on stdout
  replan explore --spin-domains --ids 2   SPIN's domains (V, K) = (1, 2): 280,380 states,
                                          comparable with ../shared/anchors/spin
  replan explore --spin-domains --ids 2 --symmetry both --compare-spin --workers 2
                                          SPIN on the same model and domains, side by
                                          side; the symmetry-reduced count beside it
  replan explore --max-version 2 --ids 1 --max-states 100000   one product domain, capped
  replan explore --mutant stale-plan-check-removed   a deliberately broken controller
  replan explore --ray auto --workers 8   the shards as Ray actors on a cluster
  replan explore --engine spin --spin-domains --max-version 2 --ids 2
                                          the declaration, bodies, policy and properties
                                          translated to Promela and searched by SPIN
                                          (apt-get install -y spin); every trail is
                                          replayed on the generated controller
  replan explore --engine python --spin-domains --ids 2
                                          the same, by the explorer driving the generated
                                          controller (the kernel is about 15x faster)
  replan explore --spin-domains --kernel-source k.py
                                          ... and the kernel written out, for review

The report gives distinct states, transitions, depth, states/s, which declared
transitions and stop reasons are reachable (a transition the policy switches off,
like a duplicate that is not counted under count_duplicate_deliveries = true, is
listed apart; one that no explored state reaches is a warning), and whether a stopped
state is reachable from every reachable state (traps).

On a violation the shortest counterexample (breadth-first: no shorter run in these
domains breaks a property) is printed and saved as -o DIR/kernel-<property>.json
(explore-<property>.json with --engine python, spin-<property>.json with --engine
spin) in the shared counterexample format: `replan replay FILE` re-runs it.

With --engine spin a violation is reported only when SPIN's trail, replayed on the
generated controller, breaks the same property; a trail that does not is reported as
a translation bug (exit 1). --memory MB caps pan; exact storage then falls back to
collapse compression (exact) and bitstate (counts become lower bounds).
--engine kernel works the same way without SPIN: the model's shortest path to a
violation is replayed on the generated controller before it is reported. Its kernel
is kept under out/cache/kernels (--no-cache: generated afresh) and its report gives
the reachable transitions, stop reasons and traps as the Python explorer does.

Exit codes: 0 every property held on every transition explored; a search stopped by
--max-states or --max-depth also exits 0 but says INCOMPLETE (JSON "complete": false),
and then makes no reachability claims; 1 a property failed; 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from replan.common import (
    OUT,
    CliError,
    add_json_option,
    add_output_option,
    add_policy_option,
    policy_from_args,
    positive_int,
    print_json,
)
from replan.verification.core.search import (
    Engine,
    EngineUnavailable,
    SearchOptions,
    SearchResult,
)
from replan.verification.core.subject import PROJECT, Subject
from replan.verification.runtime.checkout import SPIN_ANCHOR
from replan.verification.runtime.interrupt import say

#: Where counterexamples go when -o is not given (out/ is in .gitignore).
DEFAULT_OUT = OUT / "explore"
#: States stored per domain before the search stops cleanly (about 0.5 GB at most).
DEFAULT_MAX_STATES = 1_000_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``replan explore``.

    Long: one ``add_argument`` per option; a list of flags reads best as one list, and
    splitting it would only scatter the ``--help`` text."""
    add_policy_option(parser)
    parser.add_argument(
        "--spin-domains",
        action="store_true",
        help="SPIN's exact domains (versions 1..V, ids p1..pK; default V = K = 1)",
    )
    parser.add_argument(
        "--max-version",
        type=positive_int,
        metavar="V",
        help="one product domain: observe versions 1..V of every key (with --spin-domains: V)",
    )
    parser.add_argument(
        "--ids",
        type=positive_int,
        metavar="K",
        help="plan ids p1..pK (default in a product domain: fresh ids)",
    )
    parser.add_argument(
        "--max-depth", type=positive_int, metavar="D", help="leave states at depth D unexpanded"
    )
    parser.add_argument(
        "--max-states",
        type=positive_int,
        metavar="N",
        default=DEFAULT_MAX_STATES,
        help=f"stop cleanly after storing N states per domain (default {DEFAULT_MAX_STATES:,})",
    )
    parser.add_argument(
        "--symmetry",
        choices=("auto", "on", "off", "both"),
        default="auto",
        help="store states under a canonical renaming of plan ids: auto (fresh ids only), "
        "on, off, or both (two searches; both counts and whether the verdicts agree)",
    )
    parser.add_argument(
        "--keep-going",
        action="store_true",
        help="do not stop at the first violation: the shortest counterexample per property",
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        metavar="N",
        help="shard the search by state hash over N forked processes (same states, "
        "verdicts and counterexamples; worth it on 10^5 states or more with N free cores)",
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the shards (--workers N, default 2 here) as Ray actors on the cluster at "
        "ADDRESS ('local': start one here; 'auto': this machine's cluster; "
        "ray://HOST:10001); same result; needs the scale extra and replan on every node",
    )
    parser.add_argument(
        "--compare-spin",
        nargs="?",
        const=str(SPIN_ANCHOR),
        metavar="DIR",
        help="with --spin-domains: also run SPIN on the same model and domains "
        f"(DIR/run_spin.sh, default {SPIN_ANCHOR}; needs `apt-get install -y spin`) and "
        "print both side by side",
    )
    parser.add_argument(
        "--engine",
        choices=("auto", "python", "spin", "kernel"),
        default="auto",
        help="auto (default): kernel, or python where the translation cannot make the "
        "kernel (a subject whose bodies it does not read); python: the "
        "breadth-first explorer driving the generated controller (every domain, the "
        "full report); spin: the declaration, bodies, policy and properties translated "
        "to Promela and searched by SPIN (needs `apt-get install -y spin`); kernel: the "
        "same translation as pure Python functions over a state tuple, searched here. "
        "spin needs --spin-domains; spin and kernel replay a violation on the generated "
        "controller before reporting it",
    )
    parser.add_argument(
        "--kernel-source",
        metavar="FILE",
        help="with --engine kernel: also write the generated kernel's Python to FILE",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="with --engine kernel: generate the kernel afresh and keep nothing (default: "
        "reuse the kernel generated from the same declaration, bodies, policy and "
        "domains, kept under out/cache/kernels or $REPLAN_KERNEL_CACHE)",
    )
    parser.add_argument(
        "--memory",
        type=positive_int,
        metavar="MB",
        help="with --engine spin: pan's memory limit; when exact storage exceeds it, "
        "collapse compression (exact) and then bitstate storage (counts then lower "
        "bounds) are tried",
    )
    parser.add_argument(
        "--storage",
        choices=("exact", "collapse", "bitstate"),
        help="with --engine spin: how pan stores states (default: exact, falling back "
        "as --memory says)",
    )
    parser.add_argument(
        "--mutant",
        metavar="NAME",
        help="explore a deliberately broken controller from verification/subjects/mutants.py",
    )
    add_output_option(
        parser,
        metavar="DIR",
        default=str(DEFAULT_OUT),
        help=f"where counterexamples are saved (default {DEFAULT_OUT})",
        deprecated=("--out",),
    )
    add_json_option(parser)


def _domains(args: argparse.Namespace) -> Any:
    from replan.verification.core.domains import product_domains, spin_domains

    if args.spin_domains:
        return spin_domains(args.max_version or 1, args.ids or 1)
    if args.max_version is not None or args.ids is not None:
        return product_domains(args.max_version or 1, args.ids)
    return None  # the default report


def _subject(args: argparse.Namespace) -> Subject:
    """The project, or the deliberately broken controller ``--mutant`` names."""
    if args.mutant is None:
        return PROJECT
    from replan.verification.subjects import mutants

    if args.mutant not in mutants.MUTANTS:
        raise CliError(
            f"--mutant {args.mutant!r}: not a mutant (known: {', '.join(sorted(mutants.MUTANTS))})"
        )
    return mutants.MUTANTS[args.mutant]


#: Flags that set a search option, and the option each sets (checked against what the
#: chosen engine ``supports``).
OPTION_FLAGS: tuple[tuple[str, str, Callable[[argparse.Namespace], bool]], ...] = (
    ("--ray", "ray", lambda a: a.ray is not None),
    ("--symmetry on/both", "symmetry", lambda a: a.symmetry in ("on", "both")),
    ("--keep-going", "stop_at_first", lambda a: a.keep_going),
    ("--workers", "workers", lambda a: a.workers != 1),
    ("--max-depth", "max_depth", lambda a: a.max_depth is not None),
    ("--max-states", "max_states", lambda a: a.max_states != DEFAULT_MAX_STATES),
    ("--memory", "memory_mb", lambda a: a.memory is not None),
    ("--no-cache", "kernel_cache", lambda a: a.no_cache),
    ("--storage", "storage", lambda a: a.storage is not None),
)


def _engine_name(args: argparse.Namespace) -> str:
    """The engine ``--engine`` names; for ``auto``, the kernel (the same report as the
    Python explorer, many times faster, as ``replan verify`` chooses; ``run`` falls
    back to the Python explorer where the translation cannot make the kernel)."""
    return "kernel" if args.engine == "auto" else str(args.engine)


def _check_flags(args: argparse.Namespace, engine: Engine) -> None:
    """A flag the engine does not honour is bad input, said before anything runs."""
    from replan.verification.engines import ENGINES
    from replan.verification.engines import engine as engine_named

    for flag, option, given in OPTION_FLAGS:
        if given(args) and option not in engine.supports:
            takers = [name for name in ENGINES if option in engine_named(name).supports]
            raise CliError(
                f"{flag} is not for --engine {engine.name}"
                + (f" (it is for --engine {' or '.join(takers)})" if takers else "")
            )
    if args.kernel_source is not None and engine.name != "kernel":
        raise CliError("--kernel-source is for --engine kernel")
    if args.compare_spin is not None and engine.name == "spin":
        raise CliError("--compare-spin is not for --engine spin (it compares another engine)")
    if args.compare_spin is not None and not args.spin_domains:
        raise CliError("--compare-spin needs --spin-domains (SPIN's model has only those)")
    if engine.name == "spin" and not args.spin_domains:
        raise CliError("--engine spin needs --spin-domains (the same calls in every state)")
    if args.kernel_source is not None:
        parent = Path(args.kernel_source).absolute().parent
        if not parent.is_dir():
            raise CliError(f"--kernel-source {args.kernel_source}: no directory {parent}")


def _options(args: argparse.Namespace, subject: Subject, engine: Engine) -> SearchOptions:
    """The search's options from the flags (the Ray cluster joined here)."""
    from replan.verification.translate.kernel_cache import default_directory

    workers, ray = args.workers, False
    if args.ray is not None:
        from replan.verification.engines.explore.sharded import NotImportable, implementation_path
        from replan.verification.runtime import ray_cluster

        try:
            # Ray's workers import the controller by name
            implementation_path(subject.controller, subject.importable)
            ray_cluster.connect(args.ray)
        except (NotImportable, ray_cluster.RayError) as error:
            raise CliError(str(error)) from None
        workers, ray = max(args.workers, 2), True
    return SearchOptions(
        stop_at_first=not args.keep_going,
        max_states=args.max_states,
        max_depth=args.max_depth,
        symmetry={"auto": None, "on": True, "off": False, "both": False}[args.symmetry],
        workers=workers,
        ray=ray,
        progress=_progress,
        memory_mb=args.memory,
        storage=args.storage,
        kernel_cache=None if args.no_cache or engine.name != "kernel" else default_directory(),
    )


def _progress(message: str) -> None:
    say(message)


class _Refused(CliError):
    """A search the engine refused before it began (a ``ValueError``: a body the
    translation does not read, domains it does not take); one line, like any error."""


def _search(
    engine: Engine, subject: Subject, policy: Any, domains: Any, options: SearchOptions
) -> SearchResult:
    """One search; a missing tool, a failed translation or a Ray actor that failed is
    one line, not a traceback."""
    from replan.verification.core.domains import Domains
    from replan.verification.runtime.ray_cluster import RayError
    from replan.verification.translate.calls import domain_calls

    try:
        if isinstance(domains, Domains) and engine.name != "python":
            # refused before spin is sought or a kernel generated
            domain_calls(policy, domains, subject.model, per_state=engine.name == "kernel")
        return engine.search(subject, policy, domains, options)
    except ValueError as error:
        raise _Refused(str(error)) from None
    except (EngineUnavailable, RuntimeError, RayError) as error:
        raise CliError(str(error)) from None


def run(args: argparse.Namespace) -> int:
    from replan.verification.engines import engine as engine_named

    policy = policy_from_args(args)
    domains = _domains(args)
    subject = _subject(args)
    engine = engine_named(_engine_name(args))
    _check_flags(args, engine)
    options = _options(args, subject, engine)
    try:
        result = _search(engine, subject, policy, domains, options)
    except _Refused as error:
        if not (args.engine == "auto" and engine.name == "kernel"):
            raise
        # the kernel cannot be made for this subject: the Python explorer searches it
        # (an error once it is made, such as a generator bug, is not refused: it stops)
        say(f"explore: the kernel cannot search this ({error}); the Python explorer does")
        engine = engine_named("python")
        options = _options(args, subject, engine)
        result = _search(engine, subject, policy, domains, options)
    reduced = None
    if args.symmetry == "both":
        reduced = _search(engine, subject, policy, domains, replace(options, symmetry=True))
    spin = None
    if args.compare_spin is not None:
        from replan.verification.engines.spin.anchor import run_spin

        try:
            spin = run_spin(Path(args.compare_spin), args.max_version or 1, args.ids or 1)
        except (OSError, ValueError) as error:
            raise CliError(f"--compare-spin: {error}") from None
    saved = result.save_findings(args.output) if result.findings else []
    if args.json:
        document = result.to_json()
        document["saved"] = [str(path) for path in saved]
        if reduced is not None:
            document["symmetry_comparison"] = _comparison(result, reduced)
        if spin is not None:
            document["spin_comparison"] = _spin_comparison(result, reduced, spin)
        print_json(document)
    else:
        _print(result, reduced, spin, saved)
    if args.kernel_source is not None and result.artifact is not None:
        _write_kernel(args.kernel_source, result.artifact)
    if result.stopped_by in ("max_states", "max_depth"):
        print(
            f"replan explore: INCOMPLETE: stopped by {result.stopped_by} "
            f"(--max-states {args.max_states:,}"
            + (f", --max-depth {args.max_depth}" if args.max_depth else "")
            + "); the verdicts cover only the states explored",
            file=sys.stderr,
        )
    if reduced is not None and _comparison(result, reduced)["same_verdict"] is False:
        print("replan explore: the symmetry-reduced search disagrees", file=sys.stderr)
        return 1
    return 0 if result.ok else 1


def _print(result: SearchResult, reduced: Any, spin: Any, saved: list[Path]) -> None:
    print("\n".join(result.lines()))
    if reduced is not None:
        comparison = _comparison(result, reduced)
        print(
            f"symmetry: {comparison['states_unreduced']:,} states unreduced, "
            f"{comparison['states_reduced']:,} under canonical id renaming "
            f"({comparison['reduction']}x fewer); same verdict: "
            f"{'yes' if comparison['same_verdict'] else 'NO'}"
        )
    if spin is not None:
        print("\n".join(_spin_lines(_spin_comparison(result, reduced, spin))))
    for path in saved:
        print(f"saved {path}  (replay: replan replay {path})")


def _write_kernel(path: str, source: str) -> None:
    from replan.verification.runtime.files import write_atomically

    try:
        write_atomically(path, source)
    except OSError as error:
        raise CliError(f"--kernel-source {path}: {error.strerror or error}") from None


def _comparison(unreduced: Any, reduced: Any) -> dict[str, Any]:
    def verdict(result: Any) -> tuple[Any, ...]:
        return (
            result.ok,
            min((len(finding.operations) for finding in result.findings), default=None),
            sorted(result.fired),
            sorted(reason for reason, hit in result.stop_reasons.items() if hit),
            result.traps,
        )

    return {
        "states_unreduced": unreduced.states,
        "states_reduced": reduced.states,
        "transitions_unreduced": unreduced.transitions,
        "transitions_reduced": reduced.transitions,
        "reduction": round(unreduced.states / reduced.states, 2) if reduced.states else None,
        "same_verdict": verdict(unreduced) == verdict(reduced),
        "seconds_unreduced": round(unreduced.seconds, 3),
        "seconds_reduced": round(reduced.seconds, 3),
    }


def _spin_comparison(result: Any, reduced: Any, spin: Any) -> dict[str, Any]:
    """The same model and domains in SPIN and here, side by side (SPIN counts its
    initial state as one more transition)."""
    rows = [
        {
            "tool": "SPIN",
            "states": spin.states,
            "transitions": spin.transitions,
            "seconds": spin.seconds,
            "transitions_per_second": round(spin.transitions / spin.seconds)
            if spin.seconds
            else None,
        },
        {
            "tool": f"replan explore ({result.engine})",
            "states": result.states,
            "transitions": result.transitions,
            "seconds": round(result.seconds, 3),
            "transitions_per_second": round(result.transitions_per_second),
        },
    ]
    if reduced is not None:
        rows.append(
            {
                "tool": f"replan explore ({reduced.engine}), symmetry-reduced",
                "states": reduced.states,
                "transitions": reduced.transitions,
                "seconds": round(reduced.seconds, 3),
                "transitions_per_second": round(reduced.transitions_per_second),
            }
        )
    ratio = (
        rows[0]["transitions_per_second"] / rows[1]["transitions_per_second"]
        if rows[0]["transitions_per_second"] and rows[1]["transitions_per_second"]
        else None
    )
    return {
        "versions": spin.versions,
        "ids": spin.ids,
        "same_states": spin.states == result.states,
        "spin_errors": spin.errors,
        "rows": rows,
        "spin_faster_by": None if ratio is None else round(ratio, 1),
    }


def _spin_lines(comparison: dict[str, Any]) -> list[str]:
    out = [
        f"side by side with SPIN, (V, K) = ({comparison['versions']}, {comparison['ids']}):",
        f"  {'':34} {'states':>11} {'transitions':>13} {'time':>9} {'transitions/s':>14}",
    ]
    for row in comparison["rows"]:
        out.append(
            f"  {row['tool']:34} {row['states']:>11,} {row['transitions']:>13,} "
            f"{row['seconds']:>8.2f}s {row['transitions_per_second'] or 0:>14,}"
        )
    out.append(
        f"  same distinct states: {'yes' if comparison['same_states'] else 'NO'}; "
        f"SPIN is {comparison['spin_faster_by']}x faster per transition"
    )
    return out
