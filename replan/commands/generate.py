"""Write controller/_generated.py from the declaration (spec/declaration.py).

The declaration is the source of truth for the controller's structure; the generated
file is never edited by hand. After editing the declaration (or a guard body in
controller/run.py), run `replan generate`, then the tests.

  replan generate            write the file (prints whether it changed)
  replan generate --check    exit 1, naming the file, when it is stale (for CI)
"""

from __future__ import annotations

import argparse
import sys

from replan.common import CliError, add_json_option, print_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if the generated file differs from the declaration",
    )
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    from replan.spec.generator import (
        GENERATED_PATH,
        check_generated,
        generate_source,
        write_generated,
    )
    from replan.spec.model import DeclarationError, extract

    try:
        from replan.spec.declaration import Replanning

        model = extract(Replanning)
        generate_source()
    except DeclarationError as error:
        raise CliError(f"spec/declaration.py: {error}") from None
    relative = "controller/_generated.py"
    if args.check:
        fresh = check_generated(GENERATED_PATH)
        if args.json:
            print_json({"file": relative, "fresh": fresh, "digest": model.digest})
        elif fresh:
            print(f"{relative} is up to date ({model.digest})")
        else:
            print(
                f"{relative} is stale: it does not match spec/declaration.py "
                "(run `replan generate`)",
                file=sys.stderr,
            )
        return 0 if fresh else 1
    changed = write_generated(GENERATED_PATH)
    if args.json:
        print_json({"file": relative, "changed": changed, "digest": model.digest})
    else:
        print(f"{'wrote' if changed else 'unchanged'} {relative} ({model.digest})")
    return 0
