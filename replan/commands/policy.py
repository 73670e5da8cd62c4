"""Validate a policy file and print it in normal form (every default filled in), or
print the policy file's JSON Schema.

  replan policy my-policy.toml          the normalised TOML
  replan policy my-policy.toml --json   the same as JSON
  replan policy --check a.toml b.toml   only validate: one line per invalid file
                                        (the pre-commit hook replan-policy)
  replan policy --schema                the JSON Schema (draft 2020-12) of a policy file

A completing step whose prerequisites differ from the fixed workflow's ([workflow]
ready_when_passed, which defaults to the one completing step's requires) is warned
about on stderr, naming both lists (the commit equivalence would fail).

An invalid file prints one line naming the file and the offending path, e.g.
  my-policy.toml: steps[2].requires[0]: 'acess' is not a declared evidence key
and exits 2.

The schema is generated from the declaration the loader checks against, so an editor
flags what `replan policy` would refuse, with each field's description and default.
It cannot state the cross-references the loader checks too (a required key is a
declared one, step names are unique, ...); it lists them in x-replan-loader-checks.
For the Even Better TOML extension (VS Code) or any editor running taplo:

  replan policy --schema > policy.schema.json

then either make this the first line of the policy file (a path relative to it):

  #:schema ./policy.schema.json

or, for several policy files, add a rule to .taplo.toml at the workspace root
(paths relative to that file):

  [[rule]]
  include = ["policy.toml", "policies/*.toml"]
  [rule.schema]
  path = "policy.schema.json"

or, in VS Code's settings.json, map a regular expression over the document's URI to
the schema's absolute URI:

  "evenBetterToml.schema.associations": {
    "policy\\\\.toml$": "file:///absolute/path/to/policy.schema.json"
  }
"""

from __future__ import annotations

import argparse
import sys

from replan.common import CliError, add_json_option, print_json
from replan.controller.policy import (
    Policy,
    load_policy,
    policy_to_dict,
    policy_to_toml,
    workflow_disagreements,
)
from replan.controller.policy_schema import policy_schema
from replan.controller.records import PolicyError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        metavar="FILE",
        nargs="*",
        help="the policy TOML file to check (several with --check)",
    )
    add_json_option(parser)
    parser.add_argument(
        "--check",
        action="store_true",
        help="validate every FILE and print only the problems (one line per invalid file, "
        "and the workflow warnings); exit 2 when any is invalid",
    )
    parser.add_argument(
        "--schema",
        action="store_true",
        help="print the policy file's JSON Schema (for editors: see above) and exit; "
        "takes no FILE and no --json",
    )


def run(args: argparse.Namespace) -> int:
    if args.schema:
        if args.file:
            raise CliError("--schema takes no FILE (it prints the schema every policy file has)")
        if args.json or args.check:
            raise CliError(
                f"--schema takes no {'--json' if args.json else '--check'} "
                "(it prints the schema and exits)"
            )
        print_json(policy_schema())
        return 0
    if args.check:
        if args.json:
            raise CliError("--check takes no --json (it prints only problems)")
        if not args.file:
            raise CliError("--check expected at least one policy FILE")
        invalid = [problem for problem in map(_check, args.file) if problem is not None]
        for problem in invalid:
            print(f"replan policy: {problem}", file=sys.stderr)
        return 2 if invalid else 0
    if len(args.file) != 1:
        raise CliError(
            "expected one policy FILE to print (or --check FILE... to validate several, "
            "or --schema to print the JSON Schema)"
        )
    (path,) = args.file
    try:
        policy = load_policy(path)
    except PolicyError as error:
        raise CliError(str(error)) from None
    _warn(path, policy)
    if args.json:
        print_json(policy_to_dict(policy))
    else:
        print(policy_to_toml(policy), end="")
    return 0


def _warn(path: str, policy: Policy) -> None:
    for line in workflow_disagreements(policy):
        print(f"replan policy: warning: {path}: {line}", file=sys.stderr)


def _check(path: str) -> str | None:
    """The one-line problem of an invalid policy file, or None (after its warnings)."""
    try:
        policy = load_policy(path)
    except PolicyError as error:
        return str(error)
    _warn(path, policy)
    return None
