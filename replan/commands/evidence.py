"""Regenerate the committed evidence/: the one command that writes into it.

Runs `replan verify` on the default policy (profile ci, seed 0) and writes its report
to the checkout's evidence/ in the committed form: deterministic, with no timings,
dates or versions in any file (they vary from run to run; stdout still shows them), so
re-running it on an unchanged checkout leaves `git status` clean:

  evidence/verify.json          the report for machines
  evidence/verify-report.md     the reviewer's page
  evidence/prove.json           the proofs (what `replan prove` writes)
  evidence/replan-trace.json    the reference episode through the agent SDK
  evidence/fixed-workflow.json  the controller against decide(), every assignment
  evidence/machine.svg          the declared machine (with Graphviz)

  replan evidence               regenerate them (about 30 s)
  replan evidence --json        and print verify's JSON document

Every other command writes to out/ (in .gitignore) unless an option names a file:
`replan verify` to out/verify/<policy name>/, and it refuses -o evidence/.
The other committed files are measurements, rewritten only when asked with -o:
`replan bench -o evidence/benchmark-results.json`, `replan mutate -o
evidence/mutate.json`, `replan mutants -o evidence/mutation-matrix.json`,
`replan diagram -o evidence/machine.png` (and .mmd).

Exit codes as for `replan verify`: 0 every check held, 1 one failed (the evidence
is written all the same: it shows the failure), 2 not a checkout with an evidence/
directory, 130 interrupted (nothing written).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from replan.common import CliError, add_json_option


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    from replan.commands import verify

    evidence = verify.COMMITTED_EVIDENCE
    if not evidence.is_dir():
        raise CliError(
            f"{evidence}: no evidence/ directory here (replan evidence regenerates a "
            "checkout's committed evidence; an installed package has none)"
        )
    parser = argparse.ArgumentParser()
    verify.add_arguments(parser)
    options = parser.parse_args(["--json"] if args.json else [])
    # Run from the checkout's root, so that the paths the report records read
    # evidence/... wherever the command was started (the writes are absolute).
    started_in = Path.cwd()
    os.chdir(evidence.parent)
    try:
        return verify.execute(options, Path(evidence.name), deterministic=True)
    finally:
        os.chdir(started_in)
