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

Every engine's counterexample replays: the campaign's and the explorer's episodes
from a fresh run; the proofs' from the state they name (an equivalence
counterexample: a state with a commit plan pending and its execute, checked against
decide; a counterexample to induction: a state and one step). A proof's
counterexample also proves the same property again for the same event, on the
project's bodies or the mutant's, and passes now only when that proof and the run
both hold (a counterexample to induction may start from a state no run reaches).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from replan.common import CliError, add_json_option, print_json
from replan.controller.input_limits import load_json
from replan.spec.reference import ReferenceController
from replan.verification.core.harness import (
    CounterexampleError,
    Operation,
    RunReport,
    encode_result,
    load_counterexample,
    result_text,
    run_sequence,
)
from replan.verification.core.subject import (
    DEFAULT_IMPLEMENTATION,
    ImplementationError,
    resolve_implementation,
)
from replan.verification.engines.campaign.machine import readable
from replan.verification.engines.prove.replay import PROOF_CHECKS, ProofReplay, replay_proof
from replan.verification.subjects.mutants import MUTANTS, mutant_implementation


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


def _document(path: Path) -> dict[str, Any]:
    try:
        document = load_json(path)
    except (OSError, ValueError):  # load_counterexample says why, in one line
        return {}
    return document if isinstance(document, dict) else {}


def _recorded_implementation(document: Mapping[str, Any]) -> str | None:
    named = document.get("implementation")
    return named if isinstance(named, str) and named else None


def _start(path: Path, document: dict[str, Any]) -> Any:
    """The state a proof's counterexample starts from (None: a fresh run)."""
    from replan.verification.engines.prove.concrete import start_state

    start = document.get("start")
    if start is None:
        return None
    try:
        return start_state(start)
    except (KeyError, TypeError, ValueError) as error:
        raise CliError(f"{path}: start: not a state ({error})") from None


def _subject(args: argparse.Namespace, implementation: str) -> Any:
    """The subject a proof is re-run on: the mutant named, or the project when the
    implementation is the generated controller (None for any other class)."""
    from replan.verification.core.subject import PROJECT
    from replan.verification.subjects.mutants import MUTANTS

    if args.mutant is not None:
        return MUTANTS[args.mutant]
    return PROJECT if implementation == DEFAULT_IMPLEMENTATION else None


def run(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        policy, property_name, operations, recorded = load_counterexample(path)
    except CounterexampleError as error:
        raise CliError(str(error)) from None
    document = _document(path)
    implementation, subject = _implementation(args, document)

    if document.get("source") == "prove" and not operations:
        raise CliError(
            f"{path}: a proof failure with no state or step to replay (vacuous premises, "
            "or z3 could not decide): `replan prove` shows it"
        )
    start = _start(path, document)
    report = run_sequence(policy, operations, subject, ReferenceController, start=start)
    still_fails = report.failure is not None
    proof = None
    if document.get("check") in PROOF_CHECKS:
        proof = replay_proof(document, policy, operations, report, _subject(args, implementation))
        still_fails = proof.still_fails
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
                "steps": _steps_json(operations, report, recorded),
                "from_saved_state": start is not None,
                "proof": None if proof is None else _proof_json(proof),
            }
        )
        return 1 if still_fails else 0

    origin = "from the state it saved" if start is not None else "from a fresh run"
    print(
        f"replaying {path}: {len(operations)} operation(s) recorded for {property_name!r}, "
        f"{origin}, on {implementation} beside the reference model"
    )
    _print_steps(operations, report)
    if proof is not None:
        return _report_proof(proof, len(operations))
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


def _implementation(args: argparse.Namespace, document: Mapping[str, Any]) -> tuple[str, Any]:
    """The implementation to replay on ("module:Class") and its class: the mutant's,
    --implementation, the one the file records, else the generated controller."""
    try:
        if args.mutant is not None:
            implementation = mutant_implementation(args.mutant)
        else:
            implementation = (
                args.implementation or _recorded_implementation(document) or DEFAULT_IMPLEMENTATION
            )
        return implementation, resolve_implementation(implementation)
    except ImplementationError as error:
        raise CliError(str(error)) from None


def _steps_json(
    operations: Sequence[Operation], report: RunReport, recorded: Sequence[Any]
) -> list[dict[str, Any]]:
    """Each operation with the answer it got now and the one the file recorded."""
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
    return steps


def _print_steps(operations: Sequence[Operation], report: RunReport) -> None:
    """One line per operation with its answer, the failing one marked."""
    for index, operation in enumerate(operations):
        if index >= len(report.results):
            print(f"{index + 1:3}. {readable(operation)}  (not run)")
            continue
        line = f"{index + 1:3}. {readable(operation)}  ->  {result_text(report.results[index])}"
        if index == report.failed_at:
            line += f"    <-- {report.failure}"
        print(line)


def _proof_json(proof: ProofReplay) -> dict[str, Any]:
    return {
        "check": proof.check,
        "reproduced_on_the_controller": proof.reproduced,
        "controller": proof.controller_detail,
        "proved_now": proof.proved_now,
        "proof": proof.proof_detail,
    }


def _report_proof(proof: ProofReplay, operations: int) -> int:
    """A proof's counterexample: what the controller did from the saved state, and
    the proof again; passes now only when both hold."""
    ran = "STILL FAILS on the controller" if proof.reproduced else "holds on the controller"
    print(f"{ran}: {proof.controller_detail}")
    print(f"proof: {proof.proof_detail}")
    if proof.still_fails:
        print(f"STILL FAILS: {proof.check} ({'controller' if proof.reproduced else 'proof'})")
        return 1
    if proof.proved_now is None:
        print(
            f"passes on the controller: the saved {'step' if operations == 1 else 'steps'} "
            "kept every property, but the proof was not run again for this implementation "
            "(replan prove decides)"
        )
        return 0
    print(
        "passes now: the controller keeps the check from the saved state and the same "
        "property is proved again"
    )
    return 0
