"""Mutation adequacy: does verification fail on every controller that breaks the contract?

Generates mutants of the shared source automatically: of the declaration
(spec/declaration.py: a guard's conjunct dropped or negated, two adjacent
transitions swapped), of the guard and action bodies (controller/run.py: a comparison
flipped, an operand of and/or dropped or negated, a negation dropped, a statement
deleted, an integer literal +-1) and of the policy defaults (controller/policy.py).
Each is judged by the engines of `replan verify`. The effect boundary's mutants (the
functions that decide in controller/middleware.py, executor.py, journal.py,
sqlite_journal.py and durable/: the same operator kinds, and a field left out of a
digest, a durable write skipped, a range read one short) are judged by the boundary
check, and counted per file. Verdicts:

  equivalent   z3 proves its step relation equal to the original's (from every
               state satisfying the invariants); listed with that reason, never a
               failure
  killed       the proofs, the policy check, the generator, the explorer or the
               campaign fails on it (the first that does, in that order)
  survived     nothing fails: a rule nobody checks; printed with its diff and a z3
               witness of where it differs from the original

  replan mutate                                every mutant, default policy
  replan mutate --scope boundary               the boundary's mutants only
  replan mutate --policy my.toml               under your policy
  replan mutate --operator swap-transitions    one operator (repeatable)
  replan mutate --mutant ID                    one mutant (repeatable; see --list)
  replan mutate --every-engine                 run every engine on each mutant, so
                                               the matrix shows what each one kills
  replan mutate --list                         list the mutants, run nothing
  replan mutate -o matrix.json --json          the matrix as JSON

Exit 0 when no mutant survives, 1 when one does (the survivors are printed), 2 on
bad input. The whole default run takes a few minutes (it prints each verdict as it
goes on stderr). `replan mutants` is the executor's mutation matrix.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from replan.common import (
    CliError,
    add_json_option,
    add_policy_option,
    policy_from_args,
    positive_int,
    print_json,
    write_json,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from replan.verification.boundary.mutation import OPERATORS as BOUNDARY_OPERATORS
    from replan.verification.subjects.mutation import OPERATORS

    operators = tuple(dict.fromkeys((*OPERATORS, *BOUNDARY_OPERATORS)))
    add_policy_option(parser)
    parser.add_argument(
        "--operator",
        action="append",
        choices=operators,
        metavar="NAME",
        help=f"only mutants of this operator (repeatable): {', '.join(operators)}",
    )
    parser.add_argument(
        "--scope",
        choices=("all", "controller", "boundary"),
        default="all",
        help="the controller's mutants, the effect boundary's, or both (default: all)",
    )
    parser.add_argument(
        "--mutant", action="append", metavar="ID", help="only this mutant (repeatable)"
    )
    parser.add_argument(
        "--every-engine",
        action="store_true",
        help="run every engine on every mutant instead of stopping at the first that fails",
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=min(2, os.cpu_count() or 1),
        help="judge mutants in this many processes (default: 2, or 1 on one core)",
    )
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the matrix as JSON to FILE")
    parser.add_argument("--quiet", action="store_true", help="no per-mutant progress on stderr")
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    from replan.verification.boundary.mutation import boundary_mutants
    from replan.verification.subjects.adequacy import mutants_for

    policy = policy_from_args(args)
    chosen = mutants_for(operators=args.operator) if args.scope != "boundary" else []
    boundary = boundary_mutants(args.operator) if args.scope != "controller" else []
    if args.mutant:
        known = {m.id for m in chosen} | {m.id for m in boundary}
        unknown = [m for m in args.mutant if m not in known]
        if unknown:
            raise CliError(f"--mutant {unknown[0]!r}: no such mutant (see replan mutate --list)")
        chosen = [m for m in chosen if m.id in set(args.mutant)]
        boundary = [m for m in boundary if m.id in set(args.mutant)]
    if args.list:
        for mutant in chosen:
            print(f"{mutant.id}\t{mutant.where}\t{mutant.description}")
        for found in boundary:
            print(f"{found.id}\t{found.file}: {found.function}\t{found.description}")
        print(f"{len(chosen) + len(boundary)} mutants", file=sys.stderr)
        return 0
    document, lines, ok = _run_controller(args, policy, chosen)
    if boundary:
        document["boundary"], more, boundary_ok = _run_boundary(args, policy, boundary)
        lines += more
        ok = ok and boundary_ok
    if args.output:
        try:
            write_json(args.output, document)
        except OSError as error:
            raise CliError(f"-o {args.output}: cannot write ({error.strerror or error})") from None
    if args.json:
        print_json(document)
    else:
        print("\n".join(lines))
    return 0 if ok else 1


def _say(
    args: argparse.Namespace, number: int, total: int, status: str, detail: str, name: str
) -> None:
    if not args.quiet:
        print(
            f"replan mutate: [{number}/{total}] {status:10} {detail:9} {name}",
            file=sys.stderr,
            flush=True,
        )


def _run_controller(
    args: argparse.Namespace, policy: Any, chosen: list[Any]
) -> tuple[dict[str, Any], list[str], bool]:
    from replan.verification.subjects.adequacy import Verdict, run_matrix

    def progress(number: int, total: int, verdict: Verdict) -> None:
        _say(args, number, total, verdict.status, verdict.killed_by or "", verdict.mutant.id)

    matrix = run_matrix(
        policy, chosen, every_engine=args.every_engine, progress=progress, workers=args.workers
    )
    return matrix.to_json(), matrix.lines() if chosen else [], matrix.ok


def _run_boundary(
    args: argparse.Namespace, policy: Any, chosen: list[Any]
) -> tuple[dict[str, Any], list[str], bool]:
    from replan.verification.boundary.adequacy import BoundaryVerdict, run_boundary_matrix

    def progress(number: int, total: int, verdict: BoundaryVerdict) -> None:
        _say(args, number, total, verdict.status, "boundary", verdict.mutant.id)

    matrix = run_boundary_matrix(policy, chosen, progress=progress, workers=args.workers)
    return matrix.to_json(), matrix.lines(), matrix.ok
