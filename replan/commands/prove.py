"""Prove with z3 that the controller commits exactly when the fixed workflow says
ReadyToCommit, for every Unknown/Passed/Failed assignment of the evidence, and that
every property of the contract (spec/properties.py) holds for every step from a
reachable state for any limits, and the generated code equals the declaration.

The proofs are derived from the declaration (spec/declaration.py), the guard and
action bodies of controller/run.py and the policy: the same sources the generated
controller is built from.

  replan prove                       prove for the default policy (spec/policy.toml)
  replan prove --policy my.toml      prove for your policy
  replan prove --json                a JSON summary on stdout (each property, its time)
  replan prove -o DIR                write DIR/prove.json (default: out/prove/)

Exit 0: every property proved. Exit 1: a counterexample, printed and saved as
DIR/prove-counterexample.json, which `replan replay DIR/prove-counterexample.json`
runs on the controller from the state it names and proves again. Exit 2: bad input. Exit 130: Ctrl-C
(z3 is interrupted too; nothing written). The committed evidence/prove.json is
`replan evidence`'s (the default policy, deterministic).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from replan.common import (
    OUT,
    CliError,
    add_json_option,
    add_output_option,
    add_policy_option,
    policy_from_args,
    print_json,
    write_json,
)
from replan.verification.runtime.interrupt import say

DEFAULT_OUT = OUT / "prove"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_policy_option(parser)
    add_json_option(parser)
    add_output_option(
        parser,
        metavar="DIR",
        default=str(DEFAULT_OUT),
        help=f"directory for prove.json and any counterexample (default: {DEFAULT_OUT}/)",
        deprecated=("--out",),
    )


def translation_source(error: Exception) -> str:
    """The file whose Python the z3 translator could not read."""
    text = str(error)
    if text.startswith(("property ", "invariant ", "function ", "member ", "method ")):
        return "spec/properties.py"
    if text.startswith("generated "):
        return "controller/_generated.py"
    return "controller/run.py"


def _progress(line: str) -> None:
    say(f"replan prove: {line}")


def run(args: argparse.Namespace) -> int:
    from replan.verification.engines.prove.engine import prove_all
    from replan.verification.engines.prove.results import counterexample_document
    from replan.verification.translate.symbolic import TranslationError

    policy = policy_from_args(args)
    print(
        f"replan prove: proving every property for a policy with {len(policy.keys)} keys, "
        f"{len(policy.steps)} steps ...",
        file=sys.stderr,
        flush=True,
    )
    try:
        report = prove_all(policy, progress=_progress)
    except TranslationError as error:
        raise CliError(f"{translation_source(error)}: {error}") from None
    out = Path(args.output)
    document = report.to_json()
    try:
        if not report.ok:
            path = write_json(out / "prove-counterexample.json", counterexample_document(report))
            document["counterexample_file"] = str(path)
        write_json(out / "prove.json", document)
    except OSError as error:
        raise CliError(f"-o {out}: cannot write ({error.strerror or error})") from None
    if args.json:
        print_json(document)
    else:
        print(f"replan prove: policy with {len(policy.keys)} keys, {len(policy.steps)} steps")
        print(report.text())
        if not report.ok:
            print(f"counterexample saved to {document['counterexample_file']}", file=sys.stderr)
    return 0 if report.ok else 1
