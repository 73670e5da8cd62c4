"""Check a recorded run against the proved model, after the fact: every call of a run
log (``controller.durable``), of a controller's trace (JSON) or of its OpenTelemetry
spans (OTLP/JSON) is replayed through the reference model with every contract property
checked. A run log is first checked as a restore checks it: an entry altered or
missing since it was written (its chain, its witness ``LOG.head``) is the divergence.

  replan conform out/runs/import-1.log
  replan conform my-run.json --policy my.toml     a trace of a run under my.toml
  replan conform evidence/replan-trace.json --json
  replan conform spans.json                       spans as `replan trace --otel` writes
  replan conform runs.db --run import-1          one run of a DBOS database

Exit 0 when the model reproduces every recorded answer and no property breaks; 1 at
the first divergence (its position, the call, the recorded and the model's answer, or
what was altered); 2 when the file cannot be read. The file is opened read-only.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from replan.common import CliError, add_json_option, add_policy_option, policy_from_args, print_json
from replan.verification.engines.conform.check import ConformError, conform


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "log",
        metavar="LOG",
        help="a run log (SQLite, from controller.durable, its witness LOG.head beside it), "
        "a trace (JSON: a list of Controller.trace records, or an episode record with "
        "'calls') or a run's OpenTelemetry spans (OTLP/JSON)",
    )
    parser.add_argument(
        "--run",
        metavar="RUN_ID",
        help="which run, when LOG is a DBOS database (controller.durable.dbos) of many",
    )
    add_policy_option(parser)
    parser.epilog = (
        "A run log names its own policy and declaration (a log of another declaration "
        "is refused). Each trace record names the digest of the policy it ran under: a "
        "trace of the default policy, or an episode record (which holds its policy), "
        "is checked as it is; for a trace of another policy give that policy with "
        "--policy (a policy whose digest is not the recorded one is refused)."
    )
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    policy = policy_from_args(args) if args.policy else None
    try:
        found = conform(Path(args.log), policy, args.run)
    except ConformError as error:
        raise CliError(str(error)) from None
    divergence = found.divergence
    if args.json:
        print_json({"log": args.log, **found.as_json()})
    elif divergence is None:
        print(
            f"{args.log}: conforms: the model reproduces all {found.calls} recorded calls of "
            f"this {found.source} and every property held after each"
        )
    else:
        print(f"{args.log}: DIVERGES at {divergence.line()}")
    return 0 if divergence is None else 1
