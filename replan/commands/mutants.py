"""Run the executor mutation matrix: every killing check against the real executor
and against every deliberately broken one (verification/boundary/executor/mutants.py).

Each mutant breaks one promise (grant not checked, digest not compared, replay reruns
the effect, receipt recorded before the effect, in-doubt treated as done, ...). Each
check is a named function (executor outcomes, SQLite reopen, real SIGKILLed processes,
the Hypothesis executor campaign, the controller wiring). A mutant is killed when at
least one check fails on it; the matrix holds when every check passes on the real
executor and every mutant is killed. A survivor exits 1.

  replan mutants                                    run it; print who killed whom
  replan mutants -o evidence/mutation-matrix.json   also write the matrix as JSON
  replan mutants --json                             the matrix as JSON on stdout
  replan mutants --list                             name the mutants and checks
  replan mutants --mutant digest-not-compared       only this mutant (repeatable)
  replan mutants --mutant digest-not-compared \\
      --without changed-content-refused --without executor-campaign
                                                    "revert" its killing checks:
                                                    it survives, exit 1
"""

from __future__ import annotations

import argparse
import sys

from replan.common import CliError, add_json_option, print_json, write_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the matrix as JSON to FILE (e.g. evidence/mutation-matrix.json)",
    )
    parser.add_argument(
        "--mutant",
        action="append",
        metavar="NAME",
        help="run only this mutant (repeatable; default: every mutant)",
    )
    parser.add_argument(
        "--without",
        action="append",
        metavar="CHECK",
        help="leave this check out, as if its test were reverted (repeatable)",
    )
    parser.add_argument("--list", action="store_true", help="list mutants and checks, run nothing")
    add_json_option(parser)


def _chosen(names: list[str] | None, known: dict[str, object], what: str) -> list[str]:
    for name in names or ():
        if name not in known:
            raise CliError(f"unknown {what} {name!r}; known: {', '.join(known)}")
    return list(names or ())


def run(args: argparse.Namespace) -> int:
    from replan.verification.boundary.executor.matrix import CHECKS, run_matrix
    from replan.verification.boundary.executor.mutants import MUTANTS

    mutants = _chosen(args.mutant, dict(MUTANTS), "mutant") or list(MUTANTS)
    without = set(_chosen(args.without, dict(CHECKS), "check"))
    if args.list:
        listing = {
            "mutants": {name: MUTANTS[name].description for name in MUTANTS},
            "checks": {name: check.description for name, check in CHECKS.items()},
        }
        if args.json:
            print_json(listing)
        else:
            for kind, entries in listing.items():
                print(f"{kind}:")
                for name, description in entries.items():
                    print(f"  {name:32} {description}")
        return 0
    checks = [check for name, check in CHECKS.items() if name not in without]
    matrix = run_matrix(
        [MUTANTS[name] for name in mutants],
        checks,
        progress=lambda name: print(f"replan mutants: checking {name}", file=sys.stderr),
    )
    document = matrix.to_json()
    document["summary"]["without"] = sorted(without)
    if args.output:
        write_json(args.output, document)
    if args.json:
        print_json(document)
    else:
        for name, failure in matrix.baseline_failures.items():
            print(f"BROKEN CHECK {name}: fails on the real executor: {failure}")
        for mutant in matrix.mutants:
            killers = matrix.killers(mutant.name)
            if killers:
                print(f"killed    {mutant.name:32} by {', '.join(killers)}")
            else:
                print(f"SURVIVED  {mutant.name:32} no check fails it ({mutant.description})")
        summary = document["summary"]
        print(
            f"{summary['killed']} of {summary['mutants']} mutants killed by "
            f"{summary['checks']} checks"
            + (f" (left out: {', '.join(sorted(without))})" if without else "")
            + (f"; wrote {args.output}" if args.output else "")
        )
    return 0 if matrix.holds else 1
