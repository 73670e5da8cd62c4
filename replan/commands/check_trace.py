"""Check recorded agent runs against the controller and the guard, without running
any tool: each recorded call goes through the guard's path (the step, the resource's
slot, the proposal, the execution through the executor with the recorded result as the
effect, the host's approval), with the adapter's observations from each recorded
result and message.

  replan check-trace runs.json --adapter examples/tau_airline/adapter.py \\
      --policy examples/tau_airline/policy.toml
  replan check-trace runs.json --adapter ... --policy ... --json
  replan check-trace runs.json --adapter ... --policy ... --sarif out/check-trace.sarif

The file is a τ-bench trajectory file (a JSON list of runs). The adapter is a Python
file defining ``new_adapter()``, which returns a fresh ``controller.adapter.Adapter``
for each run.

A run replan guarded is checked without an adapter: its durable run log (SQLite, with
its witness beside it) or its OpenTelemetry spans (OTLP/JSON, ``replan trace --otel``)
are replayed against the verified controller, as ``replan conform`` does; the first
call answered otherwise, or the first log entry altered or missing, is named, exit 1.

  replan check-trace out/runs/import-1.log
  replan check-trace spans.json --json

Prints, per run with a finding, every call the guard refuses (the recorded call id,
the tool, the rule of the written policy, why) and where the guard stops the run; then
the table: per reward, runs with a refusal (by rule), runs stopped, runs flagged, the
refusals a reward-1 run's ground truth needed (false refusals) and a plain signature
loop detector's stops. ``--json``: every run (task_id, trial, reward, refusals,
stopped, completed) and the table.

Exit 0 when every run conforms (no call refused, no run stopped by the guard); 1 when
any call would be refused or any run stopped; 2 for bad input (an unreadable or
malformed trajectory, an adapter that cannot be loaded or raises, a tool that is no
declared step): one line naming the run and the message, nothing written.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from replan.common import CliError, add_json_option, check_writable, policy_from_args, print_json
from replan.verification.engines.conform.check import ConformError, conform, is_guarded_record
from replan.verification.recorded.replay import (
    ReplayError,
    RunResult,
    load_adapter,
    replay_runs,
    summary,
)
from replan.verification.recorded.tau import RecordError, read_runs
from replan.verification.runtime.files import write_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        metavar="FILE",
        help="a τ-bench trajectory file (JSON list of runs), or a run replan guarded: its "
        "durable run log (SQLite) or its OpenTelemetry spans (OTLP/JSON)",
    )
    parser.add_argument(
        "--adapter",
        metavar="ADAPTER.py",
        help="the host's adapter: a Python file defining new_adapter() (for a τ-bench file)",
    )
    parser.add_argument(
        "--policy",
        metavar="FILE",
        help="the policy TOML file (for a τ-bench file; a run log names its own, and "
        "spans their policy's digest)",
    )
    add_json_option(parser)
    parser.add_argument(
        "--sarif", metavar="FILE", help="also write the refusals as a SARIF 2.1.0 log"
    )


def run(args: argparse.Namespace) -> int:
    check_writable(args.sarif, "--sarif")
    if is_guarded_record(args.file):
        return _check_guarded(args)
    if args.adapter is None or args.policy is None:
        raise CliError(f"{args.file}: a τ-bench trajectory file needs --adapter and --policy")
    policy = policy_from_args(args)
    started = time.perf_counter()
    try:
        factory = load_adapter(args.adapter)
        runs = read_runs(args.file)
        results = replay_runs(runs, policy, factory)
    except (RecordError, ReplayError) as error:
        raise CliError(str(error)) from None
    table = summary(runs, results)
    elapsed = time.perf_counter() - started
    if args.sarif:
        write_json(args.sarif, _sarif(args.file, results, factory().rules))
    if args.json:
        print_json({"file": args.file, "runs": [r.as_json() for r in results], "summary": table})
    else:
        _print(results, table, elapsed)
    conforms = all(not r.refusals and r.stopped is None for r in results)
    return 0 if conforms else 1


def _check_guarded(args: argparse.Namespace) -> int:
    """A run replan guarded, replayed against the verified controller (``replan
    conform``'s check): exit 1 at the first call the recorded run and the controller
    answer differently, or the first entry its log's chain or witness shows altered."""
    policy = policy_from_args(args) if args.policy else None
    try:
        found = conform(Path(args.file), policy)
    except ConformError as error:
        raise CliError(str(error)) from None
    divergence = found.divergence
    if args.sarif:
        results = [] if divergence is None else [_sarif_result(args.file, divergence.line())]
        write_json(args.sarif, _sarif_log(results, [_CONTRADICTS]))
    if args.json:
        print_json({"file": args.file, **found.as_json()})
    elif divergence is None:
        print(
            f"{args.file}: the recorded run agrees with the controller: all {found.calls} "
            f"calls of this {found.source}, every property held after each"
        )
    else:
        print(f"{args.file}: contradicts the controller at {divergence.line()}")
    return 0 if divergence is None else 1


def _print(results: list[RunResult], table: dict[str, Any], elapsed: float) -> None:
    for result in results:
        if not result.refusals and result.stopped is None:
            continue
        print(f"task {result.task_id} trial {result.trial} (reward {result.reward:g}):")
        for refusal in result.refusals:
            flag = "  [ground truth needed it]" if refusal.needed else ""
            arguments = json.dumps(dict(refusal.arguments), sort_keys=True)
            print(f"  refused {refusal.call_id} {refusal.tool} {arguments[:100]}{flag}")
            print(f"    {refusal.rule}: {refusal.reason}")
        if result.stopped is not None:
            reason, rule, why, call_id = result.stopped
            print(f"  stopped {reason} after {call_id}: {rule}: {why}")
    print()
    rules = sorted({rule for key in ("reward_1", "reward_0") for rule in table[key]["by_rule"]})
    one, zero = table["reward_1"], table["reward_0"]
    print(f"{'':48}{'reward 1':>10}{'reward 0':>10}")
    print(f"{'runs':48}{one['runs']:>10}{zero['runs']:>10}")
    for rule in rules:
        label = f"  with a refusal: {rule}"
        print(f"{label:48}{one['by_rule'].get(rule, 0):>10}{zero['by_rule'].get(rule, 0):>10}")
    for label, key in (
        ("runs with a refusal", "with_refusal"),
        ("runs stopped (no progress)", "stopped"),
        ("runs flagged (refused or stopped)", "flagged"),
        ("refused calls", "refusals"),
        ("signature detector stops (3 in a row)", "signature_stops"),
    ):
        print(f"{label:48}{one[key]:>10}{zero[key]:>10}")
    false = table["false_refusals"]
    runs = len({(f["task_id"], f["trial"]) for f in false})
    print(
        "false refusals (reward 1, ground truth needed the call): "
        f"{len(false)} calls in {runs} runs"
    )
    for found in false:
        print(
            f"  task {found['task_id']} trial {found['trial']} {found['call_id']} "
            f"{found['tool']}: {found['rule']}"
        )
    print(f"checked {len(results)} runs in {elapsed:.2f} s")


#: The one rule a run replan guarded is checked against.
_CONTRADICTS = (
    "contradicts-the-controller",
    "every recorded call is answered as the verified controller answers it, and the "
    "run's log holds each entry as written (its chain and its witness)",
)


def _sarif_result(
    file: str, text: str, rule: str = _CONTRADICTS[0], **properties: object
) -> dict[str, Any]:
    return {
        "ruleId": rule,
        "level": "error",
        "message": {"text": text},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": file}}}],
        "properties": properties,
    }


def _sarif_log(found: list[dict[str, Any]], rules: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "$schema": "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "replan check-trace",
                        "rules": [
                            {"id": rule, "fullDescription": {"text": text}} for rule, text in rules
                        ],
                    }
                },
                "results": found,
            }
        ],
    }


def _sarif(file: str, results: list[RunResult], rules: Any) -> dict[str, Any]:
    """One SARIF result per refusal and per stop, its rule the written policy's."""
    found = []
    for result in results:
        where = f"task {result.task_id} trial {result.trial}"
        run = {"task_id": result.task_id, "trial": result.trial}
        for refusal in result.refusals:
            text = f"{where}: {refusal.call_id} {refusal.tool}: {refusal.reason}"
            found.append(_sarif_result(file, text, refusal.rule, **run, call_id=refusal.call_id))
        if result.stopped is not None:
            reason, rule, why, call_id = result.stopped
            text = f"{where}: stopped {reason} after {call_id}: {why}"
            found.append(_sarif_result(file, text, rule, **run, call_id=call_id))
    return _sarif_log(found, [(rule.id, rule.text) for rule in dict(rules).values()])
