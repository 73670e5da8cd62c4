"""Re-run a saved counterexample against an implementation and the reference model,
checking every property after every operation, and show where they diverge or
which property breaks.

  replan replay out/campaign/campaign_controller_step_bound.json
  replan replay FILE --implementation controller:Controller
  replan replay FILE --mutant step-limit-off-by-one
  replan replay FILE --json

The implementation is, in order: --implementation / --mutant, the "implementation"
the file records (the campaign writes it), or the generated controller. Exit 1 when
the counterexample still fails, 0 when it passes now (the bug is fixed), 2 when the
file or the implementation cannot be used.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from replan.common import CliError, add_json_option, print_json
from spec.reference import ReferenceController
from verification.campaign import (
    DEFAULT_IMPLEMENTATION,
    ImplementationError,
    mutant_implementation,
    readable,
    resolve_implementation,
)
from verification.harness import (
    CounterexampleError,
    encode_result,
    load_counterexample,
    result_text,
    run_sequence,
)
from verification.mutants import MUTANTS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="a counterexample JSON file")
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument(
        "--implementation",
        metavar="MODULE:CLASS",
        help="the implementation to replay on (default: the one the file names, "
        f"else {DEFAULT_IMPLEMENTATION})",
    )
    chosen.add_argument(
        "--mutant", metavar="NAME", help="replay on a broken controller: " + ", ".join(MUTANTS)
    )
    add_json_option(parser)


def _recorded_implementation(path: Path) -> str | None:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    named = document.get("implementation") if isinstance(document, dict) else None
    return named if isinstance(named, str) and named else None


def run(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        policy, property_name, operations, recorded = load_counterexample(path)
    except CounterexampleError as error:
        raise CliError(str(error)) from None
    try:
        if args.mutant is not None:
            implementation = mutant_implementation(args.mutant)
        else:
            implementation = (
                args.implementation or _recorded_implementation(path) or DEFAULT_IMPLEMENTATION
            )
        subject = resolve_implementation(implementation)
    except ImplementationError as error:
        raise CliError(str(error)) from None

    report = run_sequence(policy, operations, subject, ReferenceController)
    still_fails = report.failure is not None
    steps: list[dict[str, Any]] = []
    for index, operation in enumerate(operations):
        ran = index < len(report.results)
        steps.append(
            {
                "index": index + 1,
                "operation": readable(operation),
                "result": encode_result(report.results[index]) if ran else None,
                "recorded": recorded[index] if index < len(recorded) else None,
                "ran": ran,
            }
        )
    if args.json:
        print_json(
            {
                "file": str(path),
                "implementation": implementation,
                "property": property_name,
                "operations": len(operations),
                "still_fails": still_fails,
                "failure": report.failure,
                "failed_at": None if report.failed_at is None else report.failed_at + 1,
                "detail": report.detail,
                "steps": steps,
            }
        )
        return 1 if still_fails else 0

    print(
        f"replaying {path}: {len(operations)} operation(s) recorded for {property_name!r}, "
        f"on {implementation} beside the reference model"
    )
    for index, operation in enumerate(operations):
        if index >= len(report.results):
            print(f"{index + 1:3}. {readable(operation)}  (not run)")
            continue
        line = f"{index + 1:3}. {readable(operation)}  ->  {result_text(report.results[index])}"
        if index == report.failed_at:
            line += f"    <-- {report.failure}"
        print(line)
    if still_fails:
        kind = (
            "diverges from the reference model"
            if report.failure == "divergence"
            else f"breaks {report.failure}"
        )
        print(f"STILL FAILS at operation {(report.failed_at or 0) + 1}: {kind}: {report.detail}")
        return 1
    print(
        f"passes now: every property held after each of the {len(operations)} operation(s) "
        "and the implementation agreed with the reference model"
    )
    return 0
