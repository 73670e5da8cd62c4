"""Run the reference episode through Microsoft Agent Framework and record it.

One SDK request in which a SCRIPTED provider (verification.subjects.scripted.ScriptedChatClient:
a fixed script, not a language model, no network) proposes p1 and executes it through
the SDK's function invocation (at most 4 round trips, calls one at a time); then the
host's evidence and the later proposals: a stale proposal refused, p2 denied by its
precondition, p2 stale after the owner's confirmation, p3 executed, run Completed.
Every call is recorded in order with its result and whether the SDK, the host or a
direct call made it. Also writes the fixed-workflow table (nine parser x access
combinations: the controller's commit decision by running it, decide()'s, agreement).

  replan trace                       writes out/trace/replan-trace.json and
                                     out/trace/fixed-workflow.json
  replan trace -o /tmp/t.json        writes /tmp/t.json and /tmp/fixed-workflow.json
  replan trace --json                the summary as JSON on stdout
  replan trace --policy my.toml      an episode of your policy (its script is written
                                     from the policy: the provider proposes the step
                                     that completes the run and executes it, denied
                                     until the host observes its keys Passed, approved
                                     where it needs approval) -> out/trace/my/; play
                                     it with `replan review --policy my.toml --trace
                                     out/trace/my/replan-trace.json`
  replan trace --mutant stale-plan-check-removed
                                     the same episode on a deliberately broken
                                     controller: the facts fail, exit 1 (writes only with -o)
  replan trace --otel spans.json     also the episode's OpenTelemetry spans as OTLP/JSON
                                     (an invoke_agent span, a span per controller call
                                     named by the fired transition; needs
                                     opentelemetry-sdk: the otel extra)
  replan trace --run-log run.log     also the episode's durable run log (SQLite, and its
                                     witness run.log.head): `replan conform run.log`

Exit 0 when every fact of the episode holds and all combinations agree, 1 when one
does not (the failing facts are printed, the record is still written).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from replan.common import (
    OUT,
    CliError,
    add_json_option,
    add_policy_option,
    policy_from_args,
    print_json,
    write_json,
)
from replan.controller.policy import Policy
from replan.verification.runtime.files import announce

#: out/ is in .gitignore; the committed evidence/replan-trace.json is `replan evidence`'s.
DEFAULT_OUTPUT = OUT / "trace" / "replan-trace.json"
WORKFLOW_FILE = "fixed-workflow.json"
#: The most rows of the fixed-workflow table a run writes (3 ** 8: eight workflow keys).
MAX_WORKFLOW_ROWS = 6561


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_policy_option(parser)
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help=f"where to write the episode record (default: {DEFAULT_OUTPUT}; with "
        "--policy FILE: out/trace/<FILE's name>/replan-trace.json)",
    )
    parser.add_argument(
        "--workflow-output",
        metavar="FILE",
        help=f"where to write the fixed-workflow table (default: {WORKFLOW_FILE} next to -o)",
    )
    parser.add_argument(
        "--mutant",
        metavar="NAME",
        help="run on a deliberately broken controller from verification.subjects.mutants",
    )
    parser.add_argument(
        "--otel",
        metavar="FILE",
        help="also write the episode's OpenTelemetry spans to FILE as OTLP/JSON "
        "(needs opentelemetry-sdk: pip install 'replan[otel]')",
    )
    parser.add_argument(
        "--run-log",
        metavar="FILE",
        help="also log the episode's run durably into FILE (a new SQLite run log and its "
        "witness FILE.head, as controller.durable writes them): `replan conform FILE` "
        "checks it",
    )
    add_json_option(parser)


def _logging_into(path: Path) -> tuple[Callable[[Policy], Any], list[Any]]:
    """A controller class for the episode whose first controller (the episode's own)
    logs into a new run log at ``path``; the ones after it (the episode's replay
    against the model) do not. Also the logs opened, to close."""
    from replan.controller import Controller
    from replan.controller.durable import LoggedController, RunLogError, SqliteRunLog

    if path.exists() or Path(f"{path}.head").exists():
        raise CliError(
            f"--run-log {path}: exists; give a new file (a run log is never overwritten)"
        )
    opened: list[Any] = []

    def controller(policy: Policy) -> Any:
        if opened:
            return Controller(policy)
        try:
            opened.append(SqliteRunLog(path))
        except RunLogError as error:
            raise CliError(f"--run-log {path}: {error}") from None
        return LoggedController(policy, log=opened[0])

    controller.__module__ = LoggedController.__module__  # the record names the class
    controller.__qualname__ = LoggedController.__qualname__
    return controller, opened


def _otel_spans(controller_class: Any) -> dict[str, Any]:
    """The episode's spans as an OTLP/JSON document (``verification.report.otlp``)."""
    try:
        from replan.verification.report.otlp import otlp_json, reference_episode_spans
    except ModuleNotFoundError as error:
        if (error.name or "").startswith("opentelemetry"):
            raise CliError(
                f"--otel needs opentelemetry-sdk ({error.name} is not installed): "
                "pip install 'replan[otel]'"
            ) from None
        raise
    return otlp_json(reference_episode_spans(controller_class))


def _controller_class(name: str | None) -> Any:
    from replan.controller import Controller

    if name is None:
        return Controller
    from replan.verification.subjects.mutants import MUTANTS, mutant_controller

    if name not in MUTANTS:
        raise CliError(f"--mutant {name!r}: no such mutant; known: {', '.join(sorted(MUTANTS))}")
    return mutant_controller(name)


def _describe(call: dict[str, Any]) -> str:
    args = call["args"]
    if call["op"] == "observe":
        obs = args["obs"]
        what = f"observe {obs['key']}={obs['state']} v{obs['version']} ({obs['source']})"
    elif call["op"] == "propose":
        plan = args["plan"]
        if isinstance(plan, dict):
            what = (
                f"propose {plan['id']} {plan['step']} r{plan['revision']} "
                f"citing rev {plan['evidence_revision']}"
            )
        else:
            what = f"propose {plan}"
    elif call["op"] == "execute":
        what = f"execute {args['plan_id']}"
    else:
        what = call["op"]
    result = f"{call['result']!s:<18}"
    return (
        f"{call['seq']:>3} {call['via']:<6} {what:<48} -> {result} rev {call['evidence_revision']}"
    )


def run(args: argparse.Namespace) -> int:
    from replan.verification.subjects.episode import failing_facts, run_episode
    from replan.verification.subjects.fixed_workflow import fixed_workflow_table

    controller_class = _controller_class(args.mutant)
    policy = policy_from_args(args)
    outputs = _outputs(args)
    output, workflow_output, otel_output = outputs
    if otel_output is not None and args.policy:
        raise CliError("--otel records the reference episode, under the default policy only")
    _check_table_size(args.policy, policy)
    for path in outputs:
        if path is not None and path.exists() and path.is_dir():
            raise CliError(f"{path}: is a directory, expected a file to write")

    opened: list[Any] = []
    if args.run_log is not None:
        if args.mutant:
            raise CliError("--run-log logs the episode of the generated controller, not a mutant")
        controller_class, opened = _logging_into(Path(args.run_log))
    try:
        record = run_episode(policy, controller_class, policy_name=args.policy or "")
    finally:
        for log in opened:
            log.close()
    table = fixed_workflow_table(policy, controller_class)
    failing = failing_facts(record)
    failing += [
        f"fixed workflow: {row['states']} -> controller {row['controller']['execute']}, "
        f"decide {row['decide']}"
        for row in table["rows"]
        if not row["agree"]
    ]
    spans = None if otel_output is None else _otel_spans(_controller_class(args.mutant))
    try:
        for path, document in zip(outputs, (record, table, spans), strict=True):
            if path is not None:
                write_json(path, document)
    except OSError as error:
        raise CliError(f"cannot write: {error}") from None

    holds = not failing
    if args.json:
        print_json(
            {
                "holds": holds,
                "provider": "scripted (not a model)",
                "controller": record["controller"],
                "output": None if output is None else str(output),
                "workflow_output": None if workflow_output is None else str(workflow_output),
                "otel_output": None if otel_output is None else str(otel_output),
                "totals": record["totals"],
                "fixed_workflow": {
                    "combinations": table["combinations"],
                    "agreeing": table["agreeing"],
                },
                "failing": failing,
                "versions": record["versions"],
            }
        )
    else:
        _print_report(record, table, failing, [path for path in outputs if path is not None])
    return 0 if holds else 1


def _outputs(args: argparse.Namespace) -> tuple[Path | None, Path | None, Path | None]:
    """(the record, the fixed-workflow table, the OpenTelemetry spans): where each is
    written, None for not at all. A mutant's record is written only where asked; a
    policy's goes beside the reference record, under the policy's name."""
    if args.output is not None:
        output: Path | None = Path(args.output)
    elif args.mutant:
        output = None
    elif args.policy:
        output = OUT / "trace" / Path(args.policy).stem / DEFAULT_OUTPUT.name
    else:
        output = DEFAULT_OUTPUT
    if args.workflow_output is not None:
        workflow_output: Path | None = Path(args.workflow_output)
    else:
        workflow_output = None if output is None else output.with_name(WORKFLOW_FILE)
    otel_output = None if args.otel is None else Path(args.otel)
    return output, workflow_output, otel_output


def _check_table_size(policy_path: str | None, policy: Policy) -> None:
    """Refuse a policy whose fixed-workflow table is too large to run here."""
    rows = 3 ** len(policy.workflow_keys) * len(policy.terminal_steps)
    if rows > MAX_WORKFLOW_ROWS:
        raise CliError(
            f"--policy {policy_path}: the fixed-workflow table would have {rows:,} rows "
            f"(3 ** {len(policy.workflow_keys)} workflow keys); at most "
            f"{MAX_WORKFLOW_ROWS:,} are run here (`replan prove` checks any number)"
        )


def _print_report(
    record: dict[str, Any], table: dict[str, Any], failing: list[str], written: list[Path]
) -> None:
    """The episode for a reader: its calls one a line, the totals, the table's verdict."""
    versions = record["versions"]
    print(
        f"{record['episode']} episode: scripted provider (not a model), "
        f"agent-framework-core {versions['agent-framework-core']}, "
        f"controller {record['controller']}"
    )
    for call in record["calls"]:
        print(_describe(call))
    totals = record["totals"]
    print(
        f"totals: {totals['executed_steps']} executed steps, "
        f"{totals['proposals_considered']} proposals considered, "
        f"{totals['provider_calls_in_sdk_request']} provider calls in the one SDK request"
    )
    print(
        f"fixed workflow: {table['agreeing']}/{table['combinations']} combinations agree "
        "with decide()"
    )
    for line in failing:
        print(f"FAILED: {line}")
    if written:
        announce(f"wrote {', '.join(map(str, written))}")
