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

from replan.common import CliError, add_json_option, print_json
from replan.controller.policy import DEFAULT_POLICY
from replan.verification.pipeline import VerifyOptions, verify
from replan.verification.runtime.checkout import COMMITTED_EVIDENCE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_json_option(parser)


def run(args: argparse.Namespace) -> int:
    evidence = COMMITTED_EVIDENCE
    if not evidence.is_dir():
        raise CliError(
            f"{evidence}: no evidence/ directory here (replan evidence regenerates a "
            "checkout's committed evidence; an installed package has none)"
        )
    # Run from the checkout's root, so that the paths the report records read
    # evidence/... wherever the command was started (the writes are absolute).
    started_in = Path.cwd()
    os.chdir(evidence.parent)
    try:
        report = verify(DEFAULT_POLICY, Path(evidence.name), VerifyOptions(deterministic=True))
    finally:
        os.chdir(started_in)
    if args.json:
        print_json(report.to_json())
    else:
        for line in report.summary_lines():
            print(line)
    return 0 if report.ok else 1
