"""Validate a policy file and print it in normal form (every default filled in).

  replan policy my-policy.toml          the normalised TOML
  replan policy my-policy.toml --json   the same as JSON

A completing step whose prerequisites differ from the fixed workflow's ([workflow]
ready_when_passed, which defaults to the one completing step's requires) is warned
about on stderr, naming both lists (the commit equivalence would fail).

An invalid file prints one line naming the file and the offending path, e.g.
  my-policy.toml: steps[2].requires[0]: 'acess' is not a declared evidence key
and exits 2.
"""

from __future__ import annotations

import argparse
import sys

from controller.policy import load_policy, policy_to_dict, policy_to_toml, workflow_disagreements
from controller.records import PolicyError
from replan.common import CliError, add_json_option, print_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="the policy TOML file to check")
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    try:
        policy = load_policy(args.file)
    except PolicyError as error:
        raise CliError(str(error)) from None
    for line in workflow_disagreements(policy):
        print(f"replan policy: warning: {args.file}: {line}", file=sys.stderr)
    if args.json:
        print_json(policy_to_dict(policy))
    else:
        print(policy_to_toml(policy), end="")
    return 0
