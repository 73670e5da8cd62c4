"""Hypothesis model-based campaign: drive a controller and the reference model in
lockstep through observe / propose / execute / cancel / replay interleavings, check
every property of spec/properties.py after every operation, and measure coverage of the declared
transitions, ExecuteResults and StopReasons.

  replan campaign --profile ci              the CI budget (the smallest profile)
  replan campaign --seed 7 --json           reproducible; JSON summary on stdout
  replan campaign --policy my-policy.toml   under another policy
  replan campaign --mutant step-limit-off-by-one
                                            show that it catches a broken controller
  replan campaign --implementation mypkg.fast:Controller
                                            test another implementation (module:Class)
  replan campaign --junit out/campaign.xml  also write a JUnit XML report
  replan campaign --coverage-vs-explorer    also measure it against replan explore's
                                            reachable states and transitions
  replan campaign --threads 8               concurrent mode: 8 threads on one shared
                                            run (SerializedController), every property
                                            checked on the history it serialized them into
  replan campaign --workers 4               the budget as 4 shares in 4 processes, each
                                            on its own seed; coverage merged
  replan campaign --workers 8 --ray auto --database redis://db:6379/0
                                            the shares as Ray tasks on a cluster, one
                                            example database shared through Redis

Profiles (--profile, default "ci", as for `replan verify`) set Hypothesis examples x
steps per example; --examples/--steps override them. The same --seed gives the same operations and
coverage (a random seed is chosen and printed otherwise). Failures found once are
kept in Hypothesis' example database and retried first.

Everything goes to -o DIR (default out/campaign/, in .gitignore): on a failure the
shrunk operation sequence is printed, saved as counterexample JSON and as a pytest
regression test there (re-run it with `replan replay FILE`); Hypothesis' directory
is DIR/.hypothesis/ (its example database DIR/.hypothesis/examples, and its cache),
not .hypothesis/ wherever you run it.

Concurrent mode (--threads N, at least 2): each trial starts N threads together on one
run, each making --steps calls (default 20) chosen from the operations of the state it
reads; --examples trials (default: the profile's examples). The run's trace must be a
serialization of the calls (each record some thread's next call, with the answer that
thread got; none lost, none twice), and that history, replayed serially beside the
reference model, must keep every property, give every answer the threads got and end
in the shared run's state. The default implementation is the thread-safe
replan.controller.serialized:SerializedController; --implementation
replan.controller:Controller (one caller at a time) shows a race being caught. A
failure's history is saved as DIR/concurrent-<property>.json.

Exit 0 all held, 1 a property failed (or coverage was incomplete with
--require-full-coverage), 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replan.common import (
    CliError,
    add_json_option,
    add_output_option,
    add_policy_option,
    check_writable,
    non_negative_int,
    policy_from_args,
    positive_int,
    print_json,
)
from replan.controller.policy import Policy
from replan.spec.properties import CONTRACT
from replan.spec.reference import ReferenceController
from replan.verification.core.subject import (
    DEFAULT_IMPLEMENTATION,
    ImplementationError,
    resolve_implementation,
)
from replan.verification.engines.campaign.database import DatabaseError, check_database
from replan.verification.engines.campaign.machine import (
    DEFAULT_OUT_DIR,
    DIVERGENCE,
    PROFILES,
    Progress,
    program,
)
from replan.verification.engines.campaign.run import CampaignResult, hypothesis_home, run_campaign
from replan.verification.runtime.files import write_atomically
from replan.verification.runtime.interrupt import say as say_line
from replan.verification.subjects import mutants
from replan.verification.subjects.mutants import MUTANTS, mutant_implementation

if TYPE_CHECKING:
    from replan.verification.core.harness import Finding
    from replan.verification.engines.explore.coverage import CampaignComparison


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``replan campaign``.

    Long: one ``add_argument`` per option; a list of flags reads best as one list, and
    splitting it would only scatter the ``--help`` text."""
    add_policy_option(parser)
    parser.add_argument(
        "--profile",
        choices=list(PROFILES),
        default="ci",
        help="budget (default: ci, as for replan verify): "
        + "; ".join(f"{p.name} {p.examples} x {p.steps}" for p in PROFILES.values()),
    )
    parser.add_argument("--examples", type=positive_int, metavar="N", help="Hypothesis examples")
    parser.add_argument(
        "--steps", type=positive_int, metavar="N", help="Hypothesis steps (rules) per example"
    )
    parser.add_argument(
        "--seed", type=non_negative_int, metavar="S", help="random seed (printed if omitted)"
    )
    add_json_option(parser)
    parser.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report")
    add_output_option(
        parser,
        metavar="DIR",
        default=str(DEFAULT_OUT_DIR),
        help="where a counterexample's JSON and pytest file go, and Hypothesis' directory "
        f"(DIR/.hypothesis: its example database; default {DEFAULT_OUT_DIR})",
        deprecated=("--out",),
    )
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument(
        "--implementation",
        metavar="MODULE:CLASS",
        help=f"the implementation under test (default {DEFAULT_IMPLEMENTATION})",
    )
    chosen.add_argument(
        "--mutant",
        metavar="NAME",
        help="test a deliberately broken controller: " + ", ".join(MUTANTS),
    )
    parser.add_argument(
        "--no-database",
        action="store_true",
        help="do not read or write Hypothesis' example database (-o DIR/.hypothesis/examples)",
    )
    parser.add_argument(
        "--database",
        metavar="LOCATION",
        help="Hypothesis' example database: a directory, or a Redis server every worker "
        "shares (redis://HOST:PORT/DB; the scale extra); default DIR/.hypothesis/examples",
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        default=1,
        help="run the budget as N shares on N workers (local processes, or Ray tasks "
        "with --ray), each on its own seed, sharing the example database; coverage "
        "merged, the first failure stops the others, a dead worker's share runs again",
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the shares as Ray tasks on the cluster at ADDRESS ('local': start one "
        "here; 'auto': the cluster this machine belongs to; ray://HOST:10001); needs "
        "the scale extra and replan on every node",
    )
    parser.add_argument(
        "--require-full-coverage",
        action="store_true",
        help="exit 1 when a live declared transition, ExecuteResult or StopReason was missed",
    )
    parser.add_argument(
        "--threads",
        type=positive_int,
        metavar="N",
        help="concurrent mode: N threads (at least 2) calling one run at once; the "
        "properties are checked on the history the run serialized them into",
    )
    parser.add_argument(
        "--coverage-vs-explorer",
        action="store_true",
        help="also explore the policy exhaustively (replan explore's default domains) and "
        "report the campaign's states and transitions against its reachable set; on a "
        "failure, save the shortest run there that breaks the same property too",
    )


def _progress_printer() -> tuple[Callable[[Progress], None], list[bool]]:
    """A progress callback drawing a bar on stderr (a line per quarter when stderr
    is not a terminal)."""
    interactive = sys.stderr.isatty()
    drawn = [False]
    quarters: set[int] = set()

    def show(progress: Progress) -> None:
        fraction = min(progress.examples / progress.budget, 1.0) if progress.budget else 1.0
        phase = "shrinking a failure" if progress.failing else "exploring"
        text = (
            f"[{'#' * int(fraction * 30):<30}] {progress.examples}/{progress.budget} examples, "
            f"{progress.operations} operations, {progress.seconds:.0f} s, {phase}"
        )
        if interactive:
            sys.stderr.write("\r" + text)
            drawn[0] = True
        else:
            quarter = int(fraction * 4)
            if quarter not in quarters and quarter > 0:
                quarters.add(quarter)
                sys.stderr.write(text + "\n")
        sys.stderr.flush()

    return show, drawn


def run(args: argparse.Namespace) -> int:
    policy = policy_from_args(args)
    if args.threads is not None:
        if args.workers > 1 or args.ray:
            raise CliError("--threads (one shared run) and --workers/--ray: choose one")
        return run_concurrent(args, policy)
    check_writable(args.junit, "--junit")
    implementation, reference = _subject(args)
    show, drawn = _progress_printer()
    out = Path(args.output)
    database = _database(args, out)
    _announce_budget(args, implementation)
    with hypothesis_home(out / ".hypothesis"):
        if args.workers > 1 or args.ray:
            result = _run_shares(args, policy, implementation, reference, database, out)
        else:
            result = run_campaign(
                policy,
                args.profile,
                seed=args.seed,
                examples=args.examples,
                steps=args.steps,
                implementation=implementation,
                reference=reference,
                out_dir=out,
                database=database,
                progress=show,
                collect_visited=True,
            )
    if drawn[0]:
        sys.stderr.write("\n")
    coverage_failed = args.require_full_coverage and not result.coverage.complete
    if args.junit:
        write_junit(Path(args.junit), result)
    comparison = None
    if args.coverage_vs_explorer:
        comparison = _against_explorer(result, policy, resolve_implementation(implementation), args)
    _report(args, result, comparison, coverage_failed)
    return 1 if (result.finding is not None or coverage_failed) else 0


def _against_explorer(
    result: Any, policy: Any, implementation: type, args: argparse.Namespace
) -> Any:
    """The campaign measured against the explorer's reachable set: searched by the
    kernel, as ``replan explore`` does, for the project's controller; by the Python
    explorer, which drives any class, for another implementation or a mutant (and
    where the translation cannot make the kernel, which stderr says)."""
    from replan.controller import Controller
    from replan.verification.core.search import SearchOptions
    from replan.verification.core.subject import PROJECT
    from replan.verification.engines import engine
    from replan.verification.engines.explore.coverage import campaign_against, compare_campaign
    from replan.verification.translate.kernel_cache import default_directory

    out = Path(args.output)
    if implementation is Controller:
        options = SearchOptions(
            keep_graph=True,
            stop_at_first=False,
            max_states=1_000_000,
            kernel_cache=default_directory(),
        )
        try:
            explored = engine("kernel").search(PROJECT, policy, None, options)
        except ValueError as error:  # TranslationError is one
            say_line(f"campaign: the kernel cannot search this ({error}); the Python explorer does")
        else:
            return campaign_against(result, explored, out)
    return compare_campaign(result, policy, implementation, out)


def _subject(args: argparse.Namespace) -> tuple[str, Any]:
    """The implementation to test ("module:Class") and the reference it runs in
    lockstep with: a mutant brings its own, or none when it changes the declaration
    (the properties judge alone)."""
    reference: Any = ReferenceController
    try:
        if args.mutant is not None:
            implementation = mutant_implementation(args.mutant)
            reference = MUTANTS[args.mutant].reference
        else:
            implementation = args.implementation or DEFAULT_IMPLEMENTATION
        resolve_implementation(implementation)
    except ImplementationError as error:
        raise CliError(str(error)) from None
    return implementation, reference


def _database(args: argparse.Namespace, out: Path) -> str | Path | None:
    """The Hypothesis example database: --database, none with --no-database, else a
    directory under the output."""
    if args.no_database and args.database is not None:
        raise CliError("--database and --no-database: choose one")
    database: str | Path | None = (
        None
        if args.no_database
        else args.database
        if args.database is not None
        else out / ".hypothesis" / "examples"
    )
    try:
        check_database(database)
    except DatabaseError as error:
        raise CliError(str(error)) from None
    return database


def _announce_budget(args: argparse.Namespace, implementation: str) -> None:
    budget = PROFILES[args.profile]
    shares = (
        f" as {args.workers} shares" + (f" on Ray ({args.ray})" if args.ray else "")
        if args.workers > 1 or args.ray
        else ""
    )
    print(
        f"replan campaign: {args.examples or budget.examples} examples x "
        f"{args.steps or budget.steps} steps against {implementation}{shares} ...",
        file=sys.stderr,
        flush=True,
    )


def _report(
    args: argparse.Namespace,
    result: CampaignResult,
    comparison: CampaignComparison | None,
    coverage_failed: bool,
) -> None:
    if args.json:
        document = result.to_json()
        document["exit_code"] = 1 if (result.finding or coverage_failed) else 0
        if comparison is not None:
            document["coverage_vs_explorer"] = comparison.to_json()
        print_json(document)
    else:
        print("\n".join(result.summary_lines()))
        if comparison is not None:
            print("\n".join(comparison.lines()))
        if result.finding is not None:
            print_failure(result)
        elif coverage_failed:
            print("coverage incomplete (--require-full-coverage): see MISSED above")


def _run_shares(
    args: argparse.Namespace,
    policy: Policy,
    implementation: str,
    reference: object,
    database: str | Path | None,
    out: Path,
) -> CampaignResult:
    """``--workers``/``--ray``: the budget as shares (``verification.engines.campaign.workers``)."""
    from replan.verification.engines.campaign.database import is_shared
    from replan.verification.engines.campaign.workers import WorkerError, run_workers
    from replan.verification.runtime.ray_cluster import LOCAL, RayError

    def say(text: str) -> None:
        say_line(f"replan campaign: {text}")

    if args.ray not in (None, LOCAL) and database is not None and not is_shared(database):
        say(
            f"warning: the example database {database} is a directory on this machine; "
            "workers on other nodes neither read nor write it (--database redis://...)"
        )
    try:
        return run_workers(
            policy,
            args.profile,
            workers=args.workers,
            seed=args.seed,
            examples=args.examples,
            steps=args.steps,
            implementation=implementation,
            mutant=args.mutant,
            subjects=f"{mutants.__name__}:MUTANTS",
            with_reference=reference is not None,
            database=database,
            out_dir=out,
            ray_address=args.ray,
            report=say,
        )
    except (RayError, WorkerError) as error:
        raise CliError(str(error)) from None


#: Calls per thread in concurrent mode unless --steps says otherwise.
CONCURRENT_STEPS = 20


def run_concurrent(args: argparse.Namespace, policy: Policy) -> int:
    """``--threads``: the concurrent mode (``verification.engines.campaign.concurrent``)."""
    from replan.verification.engines.campaign.concurrent import (
        DEFAULT_CONCURRENT_IMPLEMENTATION,
        LINEARIZABLE,
        run_concurrent_campaign,
    )

    _check_concurrent_options(args)
    implementation = args.implementation or DEFAULT_CONCURRENT_IMPLEMENTATION
    try:
        factory = resolve_implementation(implementation)
    except ImplementationError as error:
        raise CliError(str(error)) from None
    trials = args.examples or PROFILES[args.profile].examples
    steps = args.steps or CONCURRENT_STEPS
    print(
        f"replan campaign: {trials} trials x {args.threads} threads x {steps} calls on one "
        f"run of {implementation} ...",
        file=sys.stderr,
        flush=True,
    )
    quarters: set[int] = set()

    def show(done: int, total: int) -> None:
        quarter = done * 4 // total
        if quarter > 0 and quarter not in quarters:
            quarters.add(quarter)
            say_line(f"  {done}/{total} trials")

    result = run_concurrent_campaign(
        policy,
        factory=factory,
        implementation=implementation,
        threads=args.threads,
        trials=trials,
        steps=steps,
        seed=args.seed,
        out_dir=Path(args.output),
        progress=show,
    )
    if args.json:
        print_json({**result.to_json(), "exit_code": 0 if result.passed else 1})
    else:
        print("\n".join(result.summary_lines()))
        if result.finding is not None:
            _print_concurrent_failure(result.finding, result.saved, LINEARIZABLE)
    return 0 if result.passed else 1


def _check_concurrent_options(args: argparse.Namespace) -> None:
    """Refuse the sequential campaign's options in the concurrent mode."""
    if args.threads < 2:
        raise CliError(f"--threads {args.threads}: the concurrent mode needs at least 2")
    for given, name in (
        (args.mutant, "--mutant"),
        (args.junit, "--junit"),
        (args.coverage_vs_explorer, "--coverage-vs-explorer"),
        (args.require_full_coverage, "--require-full-coverage"),
    ):
        if given:
            raise CliError(f"{name} is not offered with --threads (the sequential campaign's)")


def _print_concurrent_failure(finding: Finding, saved: list[Path], linearizable: str) -> None:
    """The serialized history that failed, and how to replay it where a replay can
    show the failure (a linearizability failure is not one run's property)."""
    print()
    print(f"FAILED: {finding.property} - {finding.message}")
    print(f"the serialized history ({len(finding.operations)} operation(s)):")
    print(program(finding.operations, finding.results))
    for path in saved:
        print(f"saved: {path}")
        if finding.property != linearizable:
            print(f"replay: replan replay {path}")


def print_failure(result: CampaignResult) -> None:
    finding = result.finding
    assert finding is not None
    print()
    print(f"FAILED: {finding.property} - {finding.message}")
    print(f"shrunk to {len(finding.operations)} operation(s) on a fresh run:")
    print(program(finding.operations, finding.results))
    if not result.replayed:
        print("warning: replaying these operations through the harness did not fail again")
    for path in result.saved:
        print(f"saved: {path}")
    if result.saved:
        print(f"replay: replan replay {result.saved[0]}")
        print(f"test:   python -m pytest {result.saved[1]}")


def write_junit(path: Path, result: CampaignResult) -> None:
    """One test case per property, one for the lockstep comparison with the
    reference model and one for coverage; the failing property carries the
    counterexample."""
    finding = result.finding
    cases = [*CONTRACT.names, DIVERGENCE, "coverage"]
    suite = ET.Element(
        "testsuite",
        name="replan campaign",
        tests=str(len(cases)),
        failures=str(int(finding is not None) + int(not result.coverage.complete)),
        errors="0",
        time=f"{result.seconds:.3f}",
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("implementation", result.implementation),
        ("profile", result.profile),
        ("seed", str(result.seed)),
        ("operations", str(result.operations)),
        ("examples", str(result.examples)),
    ):
        ET.SubElement(properties, "property", name=name, value=value)
    for name in cases:
        case = ET.SubElement(suite, "testcase", classname="replan.campaign", name=name)
        if finding is not None and finding.property == name:
            failure = ET.SubElement(case, "failure", message=finding.message)
            failure.text = program(finding.operations, finding.results)
        elif name == "coverage" and not result.coverage.complete:
            failure = ET.SubElement(case, "failure", message="coverage incomplete")
            failure.text = "\n".join(result.coverage.lines())
    write_atomically(path, ET.tostring(suite, encoding="utf-8", xml_declaration=True))
