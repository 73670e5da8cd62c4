"""Measure the controller against python-statemachine and a hand-written controller.

The replan-controller workload (a fresh controller, two Passed observations, a
matching commit proposal, an execution that must answer Executed and stop Completed)
runs on the generated Controller, on the declaration run by python-statemachine
(the reference model) and on a controller written by hand, with the samples of all
three interleaved; ratios are computed sample by sample. Memory is measured in a
separate tracemalloc pass. The speed figures of the explorer, the campaign, the
proofs, the executor and the agent middleware (its cost per guarded tool call, and
the tracing's per controller call without a provider and with the SDK) are added when
those tools are installed.

  replan bench                          7 samples x 1000 episodes after 2 warm-ups,
                                        writes out/bench/benchmark-results.json
  replan bench -o evidence/benchmark-results.json
                                        the committed figures (a quiet machine)
  replan bench --quick                  a smoke run of a few seconds (written to
                                        the temp directory unless -o is given)
  replan bench --samples 11 --episodes 5000 -o /tmp/bench.json
  replan bench --json                   the JSON document on stdout, no table
  replan bench --tool middleware        the controllers and one tool's figures only
  replan bench --tool boundary          the controllers, then `replan verify --profile ci`
                                        with and without the boundary check, interleaved
                                        (what the check adds; about 4 minutes)
  replan bench --explore                the controllers, then the explorer against SPIN,
                                        1 against 2 workers, and the first policy through
                                        verify (about 15 minutes; never in a plain run)

Goals are figures, not checks: the exit code is 0 when every episode completed,
1 when any episode did not end Executed/Completed, 2 on bad arguments.
Run it on a quiet machine; progress goes to stderr. A full run takes a few
minutes, most of it the explorer and the campaign; --no-tools measures the
controllers alone (about 15 s).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from replan.common import (
    OUT,
    CliError,
    add_json_option,
    non_negative_int,
    positive_int,
    print_json,
    write_json,
)
from replan.verification.runtime.files import announce
from replan.verification.runtime.interrupt import say

#: out/ is in .gitignore: the committed evidence/benchmark-results.json is rewritten
#: only when asked (-o evidence/benchmark-results.json, on a quiet machine).
DEFAULT_OUTPUT = OUT / "bench" / "benchmark-results.json"
QUICK_OUTPUT = Path(tempfile.gettempdir()) / "replan-bench-quick.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``replan bench``.

    Long: one ``add_argument`` per option; a list of flags reads best as one list, and
    splitting it would only scatter the ``--help`` text."""
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help=f"where to write the JSON results (default: {DEFAULT_OUTPUT}; "
        f"with --quick: {QUICK_OUTPUT})",
    )
    parser.add_argument(
        "--samples", type=positive_int, help="timed samples per series (default 7; --quick 3)"
    )
    parser.add_argument(
        "--episodes", type=positive_int, help="episodes per sample (default 1000; --quick 200)"
    )
    parser.add_argument(
        "--warmups",
        type=non_negative_int,
        help="warm-up rounds, discarded (default 2; --quick 1)",
    )
    parser.add_argument(
        "--reference-episodes",
        type=positive_int,
        metavar="N",
        help="episodes per sample for python-statemachine, ~1000x slower "
        "(default: episodes / 10; --quick 3)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run of a few seconds (not a measurement)"
    )
    parser.add_argument(
        "--no-tools",
        action="store_true",
        help="skip the explorer, campaign, proof, executor and middleware figures",
    )
    parser.add_argument(
        "--tool",
        action="append",
        default=[],
        metavar="NAME",
        help="measure only this tool's figures (repeatable): explorer, campaign, prove, "
        "executor, middleware, durable; and, only when named, explore, scale and boundary "
        "(what the boundary check adds to `replan verify --profile ci`: 3 runs with it and "
        "3 without, interleaved, about 4 minutes)",
    )
    parser.add_argument(
        "--durable",
        action="store_true",
        help="the durable run's figures only (--tool durable): the cost of logging a call, "
        "restore times for 10^4 and 10^5 logged calls, and the kill-and-restart matrix on "
        "SQLite and PostgreSQL (a few minutes)",
    )
    parser.add_argument(
        "--explore",
        action="store_true",
        help="the explorer's figures only (--tool explore; about 15 minutes): transitions/s "
        "against SPIN at (V, K) = (1, 1) and (1, 2) with both counts, 1 against 2 workers, "
        "and tests/policies/first-policy.toml through `replan verify --profile ci` "
        "(wall time, peak RSS, coverage); SPIN from `apt-get install -y spin`",
    )
    parser.add_argument(
        "--scale",
        action="store_true",
        help="the scale-out figures only (--tool scale; a few minutes): the campaign on 1, "
        "2 and 4 local workers and as 2 Ray tasks (operations/s, time to a first failure), "
        "the explorer at (V, K) = (1, 2) in one process, 2 shards and 2 Ray actors; Ray "
        "from the scale extra",
    )
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    from replan.verification.bench.measure import QUICK, Settings
    from replan.verification.bench.run import run_bench
    from replan.verification.bench.table import render_table
    from replan.verification.bench.tools import TOOLS

    unknown = sorted(set(args.tool) - set(TOOLS))
    if unknown:
        raise CliError(f"--tool {unknown[0]}: no such tool; known: {', '.join(TOOLS)}")

    base = QUICK if args.quick else Settings()
    settings = Settings(
        samples=args.samples or base.samples,
        episodes=args.episodes or base.episodes,
        warmups=base.warmups if args.warmups is None else args.warmups,
        reference_episodes=args.reference_episodes or base.reference_episodes,
        allocation_episodes=base.allocation_episodes,
        quick=args.quick,
        tools=not args.no_tools,
        only_tools=tuple(args.tool)
        + (("durable",) if args.durable else ())
        + (("explore",) if args.explore else ())
        + (("scale",) if args.scale else ()),
    )
    output = Path(args.output) if args.output else (QUICK_OUTPUT if args.quick else DEFAULT_OUTPUT)
    if output.exists() and output.is_dir():
        raise CliError(f"-o {output}: is a directory; give a file name")

    def progress(message: str) -> None:
        say(f"replan bench: {message}")

    document = run_bench(settings, progress)
    try:
        write_json(output, document)
    except OSError as error:
        raise CliError(f"-o {output}: cannot write ({error.strerror})") from None
    if args.json:
        print_json(document)
    else:
        print(render_table(document))
        announce(f"\nwrote {output}")
    return 0 if document["all_episodes_completed"] else 1
