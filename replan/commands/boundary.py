"""Check the effect boundary: the guard, the executor, the journal and the durable run
log, against the boundary's rules (CONTRACT.md, "The effect boundary"), with crashes.

  replan boundary                          the real boundary, default policy, ci budget
  replan boundary --policy my.toml         under your policy (with one step needing
                                           approval, when none does)
  replan boundary --subject NAME           a seeded bug kind (--list-subjects): exit 1,
                                           naming the rule it breaks
  replan boundary --profile thorough       a deeper search
  replan boundary -o DIR                   the counterexample, if any, in DIR
  replan boundary --replay FILE            run a saved counterexample again

Exit 0 when every rule holds, 1 when one breaks (the rule, the steps and the
counterexample file are printed), 2 on bad input.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from replan.common import (
    CliError,
    add_json_option,
    add_policy_option,
    non_negative_int,
    policy_from_args,
    print_json,
)
from replan.verification.runtime.interrupt import say


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_policy_option(parser)
    parser.add_argument(
        "--subject", default=None, help="a seeded bug kind (default: the real boundary)"
    )
    parser.add_argument("--profile", choices=("ci", "default", "thorough"), default="ci")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="the random walks' seed")
    parser.add_argument("-o", "--output", metavar="DIR", help="write the counterexample into DIR")
    parser.add_argument("--replay", metavar="FILE", help="run a saved counterexample again")
    parser.add_argument("--list-subjects", action="store_true", help="list the seeded bug kinds")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    from replan.verification.boundary.check import check_boundary, replay
    from replan.verification.boundary.domains import describe, op_from_json
    from replan.verification.boundary.subjects import MUTANTS

    logging.getLogger("agent_framework").setLevel(logging.CRITICAL)  # crashes stop tools
    if args.list_subjects:
        for name, (description, breaks) in MUTANTS.items():
            print(f"{name}\t{breaks}\t{description}")
        return 0
    if args.replay is not None:
        try:
            violation = replay(Path(args.replay), args.subject)
        except ValueError as error:
            raise CliError(str(error)) from None
        if violation is None:
            print(f"replan boundary: {args.replay}: every rule holds now")
            return 0
        print(f"replan boundary: {args.replay}: {violation.property}: {violation.message}")
        return 1

    def progress(text: str) -> None:
        if not args.quiet:
            say(f"replan boundary: {text}")

    try:
        result = check_boundary(
            policy_from_args(args),
            subject=args.subject,
            seed=args.seed,
            profile=args.profile,
            progress=progress,
            out_dir=None if args.output is None else Path(args.output),
        )
    except ValueError as error:
        raise CliError(str(error)) from None
    if args.json:
        print_json(result.to_json())
    else:
        print(f"replan boundary ({result.subject}): {result.summary()} ({result.seconds:.1f} s)")
        if not result.ok:
            for number, step in enumerate(result.steps, start=1):
                print(f"  {number}. {describe(op_from_json(step))}")
            if result.counterexample is not None:
                print(f"  counterexample: {result.counterexample}")
                print(f"  replay: replan boundary --replay {result.counterexample}")
    return 0 if result.ok else 1
