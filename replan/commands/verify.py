"""Check a policy end to end and write the evidence: the project's main job.

"I changed the policy (or the declaration): is the controller still safe, and what
exactly changed?" One command runs every check, in order, and stops at nothing:

  1. policy         the file validates (else exit 2), and the loader keeps the
                    contract's defaults (policy-defaults)
  2. drift          controller/_generated.py matches the declaration
  3. proofs         z3: every property of spec/properties.py (the contract, rule by
                    rule, inductive with the limits symbolic), commit equivalence with
                    the fixed workflow, the generated code equal to the declaration
  4. explorer       every reachable state within the stated bounds, every property
                    on every transition (stops at the first violation)
  5. campaign       Hypothesis lockstep campaign checking every property after every
                    operation, coverage against the explorer
  6. diagram        the machine drawn from the declaration (SVG + Mermaid)
  7. workflow       the running controller commits exactly when decide() says so
  8. episode        (default policy) the reference episode through the agent SDK

  replan verify                                   the default policy -> evidence/
  replan verify --policy my.toml                  your policy -> out/verify/my/
  replan verify --policy new.toml --against old.toml
                                                  also: what changed (z3 witnesses where
                                                  the commit decision differs, behaviours
                                                  only one version has, the diagram diff)
  replan verify --against HEAD~1                  against an earlier declaration
  replan verify --profile thorough --junit out/junit.xml --json
  replan verify --sarif out/replan.sarif          also a SARIF 2.1.0 log for code scanning
                                                  (github/codeql-action/upload-sarif): each
                                                  broken property, drift or gap on the
                                                  policy line or declared transition to change
  replan verify --mutant step-not-counted         every engine on a deliberately
                                                  broken controller: exit 1, naming
                                                  the rule it breaks

Profiles set the campaign's budget: ci (the default here: 200 examples x 60 steps),
default (600 x 80), thorough (3000 x 100). The campaign seed is
fixed (--seed), so a verify run is reproducible apart from timings.

Writes to --evidence DIR: verify-report.md (the reviewer's page), verify.json (the
same for machines), machine.svg (and diff.svg with --against), counterexamples/, and
for the default policy replan-trace.json and fixed-workflow.json. --junit FILE and
--sarif FILE are checked writable before any check runs and written on every run.

Exit 0 when every check held, 1 when any property failed (the report names the check
and its counterexample, with the replay command), 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.policy import DEFAULT_POLICY, Policy, load_policy
from controller.records import PolicyError
from replan.common import (
    CliError,
    add_json_option,
    check_writable,
    non_negative_int,
    print_json,
    write_atomically,
    write_json,
)
from verification import interrupt
from verification.report import CheckResult, VerifyReport, write_junit, write_markdown

PROFILES = ("ci", "default", "thorough")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policy", metavar="FILE", help="policy TOML file (default: spec/policy.toml)"
    )
    parser.add_argument(
        "--against",
        metavar="OLD",
        help="an older policy file or a git revision of the declaration: report what changed",
    )
    parser.add_argument(
        "--profile",
        choices=PROFILES,
        default="ci",
        help="the campaign's budget (default: ci, which already reaches every declared "
        "transition, result and stop reason of the default policy)",
    )
    parser.add_argument(
        "--evidence",
        metavar="DIR",
        help="where to write the report (default: evidence/ for the default policy, "
        "out/verify/<policy name>/ otherwise)",
    )
    parser.add_argument(
        "--seed",
        type=non_negative_int,
        default=0,
        help="the campaign's seed, an integer >= 0 (default: 0, reproducible)",
    )
    parser.add_argument("--junit", metavar="FILE", help="also write JUnit XML, one case per check")
    parser.add_argument(
        "--sarif",
        metavar="FILE",
        help="also write a SARIF 2.1.0 log for code scanning: one result per broken "
        "property, drift or gap, on the policy line or declared transition it concerns "
        "(written on every run; no results when everything holds)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 on gaps too: a live declared transition or a stop reason no engine "
        "exercised, or one the explorer reaches that the campaign missed",
    )
    parser.add_argument(
        "--mutate",
        action="store_true",
        help="also run `replan mutate` and put the mutation score in the report (about 90 s "
        "more on the default declaration: not part of the ci budget)",
    )
    parser.add_argument(
        "--mutant",
        metavar="NAME",
        help="verify a deliberately broken controller of verification/mutants.py instead "
        "of the project (its evidence goes to out/verify/mutant-NAME/)",
    )
    add_json_option(parser)


def _progress(text: str) -> None:
    print(f"replan verify: {text}", file=sys.stderr, flush=True)


class Pipeline:
    """Runs the checks in order, recording each one's result even when it fails."""

    def __init__(
        self, policy: Policy, evidence: Path, profile: str, seed: int, subject: Any = None
    ) -> None:
        from verification.subject import PROJECT

        self.subject = PROJECT if subject is None else subject
        self.policy = policy
        self.evidence = evidence
        self.profile = profile
        self.seed = seed
        self.report = VerifyReport(policy=policy, profile=profile, evidence=str(evidence))
        self.explored: Any = None  # the explorer's result, kept for the campaign's coverage
        self.campaigned: Any = None  # the campaign's result, kept for the gaps
        self.total = 0

    def run(self, number: int, name: str, check: Callable[[], CheckResult]) -> CheckResult:
        interrupt.check()  # Ctrl-C, even one swallowed inside the last check
        _progress(f"[{number}/{self.total}] {name} ...")
        started = time.perf_counter()
        try:
            result = check()
        except Exception as error:  # a crashed check is reported, the others still run
            result = CheckResult(
                name,
                "error",
                f"{type(error).__name__}: {error}",
                details={"traceback": traceback.format_exc()},
            )
        result.seconds = time.perf_counter() - started
        self.report.checks.append(result)
        _progress(
            f"[{number}/{self.total}] {name}: {result.status} - {result.summary} "
            f"({result.seconds:.1f} s)"
        )
        return result

    def find_gaps(self) -> None:
        """What no engine exercised: a live declared transition (one the policy does
        not switch off) or a stop reason nothing reached, and a transition or stop
        reason the explorer reaches that the campaign never fired. A gap is not a
        broken property; ``--strict`` makes it one."""
        explored, campaigned = self.explored, self.campaigned
        if explored is None or campaigned is None or not explored.ok or not campaigned.passed:
            return
        coverage = campaigned.coverage
        gaps = self.report.gaps
        reached = set(explored.fired)
        missed = [
            label
            for label in explored.labels
            if label not in explored.disabled_by_policy and not coverage.transitions[label]
        ]
        not_live = self.cannot_fire([label for label in missed if label not in reached])
        for label in missed:
            if label in reached:
                gaps.append(f"the campaign never fired {label} (the explorer reaches it)")
            elif label in not_live:
                self.report.not_live[label] = not_live[label]
            elif explored.complete:
                gaps.append(f"no engine reached {label}")
        for reason, explorer_reached in explored.stop_reasons.items():
            if coverage.stop_reasons[reason]:
                continue
            if explorer_reached:
                gaps.append(f"the campaign never stopped a run {reason} (the explorer does)")
            else:
                gaps.append(f"no engine stopped a run {reason}")

    def cannot_fire(self, labels: list[str]) -> dict[str, str]:
        """Which of ``labels`` z3 shows cannot fire from any state the invariants
        allow: asked only once the proofs passed (the invariants are then proved)."""
        proofs = next((c for c in self.report.checks if c.name == "proofs"), None)
        if not labels or proofs is None or not proofs.ok:
            return {}
        from verification.prove import cannot_fire

        return cannot_fire(self.policy, labels, self.subject.model, self.subject.model_class)

    def label_unreachable_counterexamples(self) -> None:
        """A proof's counterexample to induction from a state the explorer never
        reached (within its bounds) usually means an auxiliary invariant is missing,
        not a reachable bug: say so, with the fields that show it."""
        from verification.explore import unreachable_fields

        proofs = next((c for c in self.report.checks if c.name == "proofs"), None)
        if proofs is None or proofs.ok or self.explored is None:
            return
        runs = self.explored.runs or [self.explored]
        for entry in proofs.details.get("properties", []):
            counterexample = entry.get("counterexample") or {}
            before = counterexample.get("before")
            limits = counterexample.get("limits", {})
            if not isinstance(before, dict):
                continue
            if any(limits.get(name) != getattr(self.policy, name) for name in limits):
                entry["reachable"] = (
                    "not compared: the counterexample's limits are not the policy's"
                )
                continue
            fields = unreachable_fields(runs, before, self.policy.keys)
            if fields is None:
                continue
            note = (
                f"{entry['name']}: its counterexample starts from a state the explorer never "
                f"reached ({', '.join(fields)}): probably a missing auxiliary invariant "
                "rather than a reachable bug"
            )
            entry["reachable"] = note
            proofs.warnings.append(note)
            proofs.failure_text += f"\n(unreachable: {', '.join(fields)})"

    # ---- the checks -------------------------------------------------------------------

    def drift(self) -> CheckResult:
        from spec.generator import check_generated
        from verification.diagram import readme_mermaid
        from verification.diagram.readme import is_fresh

        generated = check_generated()
        readme = Path(__file__).resolve().parents[2] / "README.md"
        # an installed package has no README: then only the generated code is compared
        has_readme = readme.is_file()
        diagram_fresh = is_fresh(readme, readme_mermaid()) if has_readme else True
        problems = []
        if not generated:
            problems.append("controller/_generated.py is stale (run `replan generate`)")
        if not diagram_fresh:
            problems.append("README.md's diagram is stale (run `replan diagram --update-readme`)")
        details: dict[str, Any] = {
            "generated_fresh": generated,
            "readme_diagram_fresh": diagram_fresh if has_readme else None,
        }
        if not generated:  # where: what a reviewer (or the SARIF log) points at
            from spec.generator import GENERATED_PATH, generate_source
            from verification.locations import generated_drift

            details["generated"] = generated_drift(GENERATED_PATH, generate_source())
        if not diagram_fresh:
            details["readme"] = str(readme)
        return CheckResult(
            "drift",
            "passed" if not problems else "failed",
            "; ".join(problems)
            or (
                "generated code and README diagram match the declaration"
                if has_readme
                else "generated code matches the declaration (no README here to compare)"
            ),
            details=details,
        )

    def proofs(self) -> CheckResult:
        from replan.commands.prove import counterexample_document
        from verification.prove import prove_all

        subject = self.subject
        report = prove_all(self.policy, subject.model, subject.model_class, subject.controller)
        document = report.to_json()
        result = CheckResult(
            "proofs",
            "passed" if report.ok else "failed",
            f"{sum(1 for r in report.results if r.proved)} of {len(report.results)} "
            "properties proved"
            + (
                f"; not proved: {', '.join(r.name for r in report.failures)}"
                if not report.ok
                else ""
            ),
            details=document,
            properties=[r.name for r in report.failures],
        )
        if not report.ok:
            counterexample = counterexample_document(report)
            path = write_json(self.evidence / "counterexamples" / "prove.json", counterexample)
            result.counterexamples.append(str(path))
            failure = report.failures[0]
            result.failure_text = failure.message
            if counterexample.get("steps"):
                result.replay.append(f"replan replay {path}")
        return result

    def explorer(self) -> CheckResult:
        from verification.explore import explore, save_findings

        # Stops at the first violation: a broken controller can make the state space
        # unbounded, and its shortest counterexample is what a reviewer needs.
        result = explore(
            self.policy,
            implementation=self.subject.controller,
            implementation_name=self.subject.implementation_path,
            keep_graph=True,
            stop_at_first=True,
        )
        self.explored = result
        document = result.to_json()
        problems = [] if result.ok else [f.property for f in result.findings]
        status = "passed" if result.ok and result.complete else "failed"
        summary = (
            f"{result.states:,} states, {result.transitions:,} transitions, depth "
            f"{result.depth}; {len(result.fired)}/{len(result.labels)} declared transitions "
            f"reached; stop reasons reached: "
            f"{', '.join(k for k, v in result.stop_reasons.items() if v) or 'none'}"
        )
        if problems:
            summary = f"properties broken: {', '.join(problems)}; " + summary
        elif not result.complete:
            summary = f"incomplete ({result.stopped_by}); " + summary
        check = CheckResult("explorer", status, summary, details=document, properties=problems)
        check.warnings.extend(result.warnings)
        if result.findings:
            directory = self.evidence / "counterexamples"
            for path in save_findings(result, directory):
                check.counterexamples.append(str(path))
                if path.suffix == ".json":
                    check.replay.append(f"replan replay {path}")
            first = result.findings[0]
            check.failure_text = f"{first.property}: {first.message}\n{first.program()}"
            check.details["broken_by"] = {
                finding.property: self.fired_transition(finding) for finding in result.findings
            }
        return check

    def campaign(self) -> CheckResult:
        from verification.campaign import run_campaign, seed_missed

        options: dict[str, Any] = dict(
            seed=self.seed,
            implementation=self.subject.implementation_path,
            reference=self.subject.reference,
            out_dir=self.evidence / "counterexamples",
            database=None,  # reproducible: no examples carried over from other runs
        )
        result = run_campaign(self.policy, self.profile, **options)
        if self.explored is not None:
            seed_missed(
                result,
                list(self.explored.fired),
                self.explorer_witness,
                profile=self.profile,
                **options,
            )
        self.campaigned = result
        document = result.to_json()
        coverage = result.coverage.to_json()
        summary = (
            f"{result.operations:,} operations in {result.examples} examples"
            + (
                f" ({len(result.seeded)} transitions seeded from the explorer)"
                if result.seeded
                else ""
            )
            + f", {result.operations_per_second:,.0f} ops/s; "
            + "; ".join(result.coverage.lines()[:1])
        )
        if self.explored is not None:
            from verification.explore import coverage as explorer_coverage

            # The explorer may search several domains; coverage is measured against each.
            measured = {}
            for run in self.explored.runs or [self.explored]:
                if run.graph is None:
                    continue
                against = explorer_coverage(
                    run, result.visited_snapshots, result.visited_transitions
                )
                name = str(run.domains.get("name", "explorer"))
                measured[name] = against.to_json()
                summary += f"; vs explorer ({name}): {against.line()}"
            document["coverage_vs_explorer"] = measured
        status = "passed" if result.passed else "failed"
        broken = [] if result.finding is None else [result.finding.property]
        if broken:
            summary = f"properties broken: {broken[0]}; " + summary
        check = CheckResult("campaign", status, summary, details=document, properties=broken)
        check.details["coverage"] = coverage
        if result.finding is not None:
            check.failure_text = (
                f"{result.finding.property}: {result.finding.message}\n" + result.finding.program()
            )
            for path in result.saved:
                check.counterexamples.append(str(path))
                if path.suffix == ".json":
                    check.replay.append(f"replan replay {path}")
            check.details["broken_by"] = {
                result.finding.property: self.fired_transition(result.finding)
            }
        return check

    def fired_transition(self, finding: Any) -> str | None:
        """The declared transition the counterexample's last call fires (replayed on
        the controller under verification, read from its trace): where the property
        breaks. None when no transition fires (a final state, an input check) or the
        trace does not say."""
        from verification.harness import appended_since, apply, trace_length

        if not finding.operations:
            return None
        try:
            controller: Any = self.subject.controller(finding.policy)
            for operation in finding.operations[:-1]:
                apply(controller, operation)
            mark = trace_length(controller)
            apply(controller, finding.operations[-1])
            appended = appended_since(controller, mark)
            index = appended[-1][5] if appended and len(appended[-1]) > 5 else None
            labels = getattr(type(controller), "transitions", ())
        except Exception:  # a broken controller may break its replay too: no location
            return None
        if isinstance(index, int) and 0 <= index < len(labels):
            return str(labels[index])
        return None

    def explorer_witness(self, label: str) -> Any:
        """The explorer's shortest run that fires ``label`` (any of its domains)."""
        for run in self.explored.runs or [self.explored]:
            found = None if run.graph is None else run.graph.witness(label)
            if found is not None:
                return found
        return None

    def diagram(self) -> CheckResult:
        from verification.diagram import machine_diagram, render
        from verification.diagram.dot import dot_available

        diagram = machine_diagram(self.policy)
        mermaid = render(diagram, "mermaid").decode()
        self.report.mermaid = mermaid
        written = []
        if dot_available():
            target = self.evidence / "machine.svg"
            write_atomically(target, render(diagram, "svg"))
            written.append(str(target))
        summary = f"{len(diagram.edges)} transitions drawn"
        summary += (
            f"; wrote {', '.join(written)}" if written else "; Graphviz missing: Mermaid only"
        )
        return CheckResult("diagram", "passed", summary, details={"files": written})

    def workflow(self) -> CheckResult:
        from verification.fixed_workflow import fixed_workflow_table

        table = fixed_workflow_table(self.policy, self.subject.controller)
        write_json(self.evidence / "fixed-workflow.json", table)
        rows = table.get("rows", [])
        disagree = [row for row in rows if not row.get("agree")]
        summary = (
            f"the running controller and decide() agree on {len(rows) - len(disagree)}/"
            f"{len(rows)} evidence assignments"
        )
        check = CheckResult("workflow", "failed" if disagree else "passed", summary)
        check.details = {"rows": len(rows), "disagreements": disagree[:20]}
        if disagree:
            check.failure_text = "\n".join(json_line(row) for row in disagree[:5])
        return check

    def episode(self) -> CheckResult:
        from verification.episode import failing_facts, run_reference_episode

        record = run_reference_episode(self.subject.controller)
        write_json(self.evidence / "replan-trace.json", record)
        holds = bool(record.get("holds"))
        totals = record.get("totals", {})
        summary = (
            f"reference episode through the agent SDK (scripted provider): "
            f"{totals.get('executed_steps')} steps, {totals.get('proposals_considered')} "
            f"proposals, {totals.get('provider_calls_in_sdk_request')} provider calls, stop "
            f"{record.get('final', {}).get('stop_reason')}"
        )
        check = CheckResult("episode", "passed" if holds else "failed", summary)
        check.details = {"totals": totals, "facts": record.get("facts")}
        if not holds:
            check.failure_text = "\n".join(failing_facts(record))
        return check

    def mutation(self) -> CheckResult:
        """Mutation adequacy: every non-equivalent mutant of the declaration, the
        bodies and the policy defaults is killed by the engines above."""
        import os

        from verification.adequacy import run_matrix

        matrix = run_matrix(self.policy, workers=min(2, os.cpu_count() or 1))
        document = matrix.to_json()
        write_json(self.evidence / "mutate.json", document)
        summary = (
            f"{len(matrix.verdicts)} mutants: {matrix.count('killed')} killed, "
            f"{matrix.count('equivalent')} equivalent, {matrix.count('survived')} survived "
            f"(score {matrix.score:.1%}) in {matrix.seconds:.0f} s"
        )
        check = CheckResult(
            "mutation", "passed" if matrix.ok else "failed", summary, details=document
        )
        if not matrix.ok:
            check.failure_text = "\n".join(line for line in matrix.lines() if "SURVIVED" in line)
        return check

    def against(self, old: str) -> CheckResult:
        """What changed between OLD (a policy file or git revision) and this policy."""
        from spec.declaration import Replanning
        from spec.model import extract
        from verification.diagram import render
        from verification.diagram.dot import dot_available
        from verification.diagram.graph import diff
        from verification.diagram.overlays import load_old, repository_root
        from verification.explore import explore
        from verification.prove import decision_difference

        current = extract(Replanning)
        old_machine = load_old(old, repository_root(), current)
        witness = decision_difference(old_machine.policy, self.policy)
        details: dict[str, Any] = {
            "old": old_machine.name,
            "commit_decision": None if witness is None else witness.to_json(),
        }
        lines = [
            "commit decisions: identical for every evidence assignment (z3)"
            if witness is None
            else f"commit decisions differ: {witness.text()}"
        ]
        # Behaviours only one version has: declared transitions and stop reasons the
        # explorer reaches under the old machine and policy versus the new.
        from spec.generator import load_controller

        old_controller = load_controller(old_machine.model, old_machine.model_class, "old")
        old_result = explore(old_machine.policy, implementation=old_controller)
        new_result = self.explored or explore(self.policy)
        old_fired, new_fired = set(old_result.fired), set(new_result.fired)
        old_stops = {k for k, v in old_result.stop_reasons.items() if v}
        new_stops = {k for k, v in new_result.stop_reasons.items() if v}
        behaviour = {
            "transitions_only_old": sorted(old_fired - new_fired),
            "transitions_only_new": sorted(new_fired - old_fired),
            "stop_reasons_only_old": sorted(old_stops - new_stops),
            "stop_reasons_only_new": sorted(new_stops - old_stops),
            "states": {"old": old_result.states, "new": new_result.states},
        }
        details["behaviour"] = behaviour
        for key, text in (
            ("transitions_only_new", "new reachable transitions"),
            ("transitions_only_old", "lost transitions"),
            ("stop_reasons_only_new", "new stop paths"),
            ("stop_reasons_only_old", "lost stop paths"),
        ):
            if behaviour[key]:
                lines.append(f"{text}: {', '.join(behaviour[key])}")
        lines.append(f"reachable states: {old_result.states:,} -> {new_result.states:,}")
        diagram = diff(
            old_machine.model,
            old_machine.policy,
            current,
            self.policy,
            old_machine.name,
            old_machine.model_class,
        )
        self.report.diff_mermaid = render(diagram, "mermaid").decode()
        if dot_available():
            target = self.evidence / "diff.svg"
            write_atomically(target, render(diagram, "svg"))
            details["diagram"] = str(target)
        self.report.against_lines = lines
        # A change is information, not a failure: the checks above judge safety.
        return CheckResult("against", "passed", "; ".join(lines[:2]), details=details)


def relative_paths(document: Any, evidence: Path) -> Any:
    """Paths inside the evidence directory written relative to it, so that the same
    report written elsewhere is the same document."""
    prefix = f"{evidence}/"
    if isinstance(document, dict):
        return {k: relative_paths(v, evidence) for k, v in document.items()}
    if isinstance(document, list):
        return [relative_paths(v, evidence) for v in document]
    if isinstance(document, str) and prefix in document:
        return document.replace(prefix, "")
    return document


def json_line(row: Any) -> str:
    import json

    return json.dumps(row, sort_keys=True)


def _evidence_dir(args: argparse.Namespace) -> Path:
    if args.evidence:
        return Path(args.evidence)
    if args.mutant is not None:
        return Path("out") / "verify" / f"mutant-{args.mutant}"
    if args.policy is None:
        return Path("evidence")
    return Path("out") / "verify" / Path(args.policy).stem


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    policy = DEFAULT_POLICY
    if args.policy is not None:
        try:
            policy = load_policy(args.policy)
        except PolicyError as error:
            raise CliError(str(error)) from None
    if args.against is not None:
        _check_against(args.against)
    check_writable(args.junit, "--junit")
    check_writable(args.sarif, "--sarif")
    subject = _subject(args.mutant)
    evidence = _evidence_dir(args)
    try:
        (evidence / "counterexamples").mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CliError(f"--evidence {evidence}: cannot write ({error.strerror or error})") from None

    pipeline = Pipeline(policy, evidence, args.profile, args.seed, subject)
    steps: list[tuple[str, Callable[[], CheckResult]]] = [
        ("drift", pipeline.drift),
        ("proofs", pipeline.proofs),
        ("explorer", pipeline.explorer),
        ("campaign", pipeline.campaign),
        ("diagram", pipeline.diagram),
        ("workflow", pipeline.workflow),
    ]
    if policy == DEFAULT_POLICY:
        steps.append(("episode", pipeline.episode))
    if args.mutate:
        steps.append(("mutation", pipeline.mutation))
    if args.against is not None:
        old = args.against
        steps.append(("against", lambda: pipeline.against(old)))
    pipeline.total = len(steps) + 1
    pipeline.report.checks.append(_policy_check(args.policy, subject))
    _progress(f"[1/{pipeline.total}] policy: {pipeline.report.checks[0].status}")
    for number, (name, check) in enumerate(steps, start=2):
        pipeline.run(number, name, check)
    pipeline.label_unreachable_counterexamples()
    pipeline.find_gaps()

    report = pipeline.report
    report.seconds = time.perf_counter() - started
    document = report.to_json()
    write_json(evidence / "verify.json", relative_paths(document, evidence))
    write_markdown(report, evidence / "verify-report.md")
    if args.junit:
        write_junit(report, Path(args.junit))
    if args.sarif:
        _write_sarif(report, args, subject)
    if args.json:
        print_json(document)
    else:
        for line in report.summary_lines():
            print(line)
    if not report.ok:
        return 1
    return 1 if args.strict and report.gaps else 0


def _write_sarif(report: VerifyReport, args: argparse.Namespace, subject: Any) -> None:
    from verification.sarif import sarif_log_or_notice, write_sarif

    log = sarif_log_or_notice(
        report,
        args.policy,
        model=subject.model,
        model_class=subject.model_class,
        strict=args.strict,
    )
    try:
        write_sarif(log, args.sarif)
    except OSError as error:
        raise CliError(f"--sarif {args.sarif}: cannot write ({error.strerror or error})") from None


def _subject(name: str | None) -> Any:
    from verification.subject import PROJECT

    if name is None:
        return PROJECT
    from verification.mutants import MUTANTS

    if name not in MUTANTS:
        raise CliError(f"--mutant {name!r}: no such mutant (known: {', '.join(MUTANTS)})")
    return MUTANTS[name]


def _policy_check(path: str | None, subject: Any) -> CheckResult:
    """The file loaded (else exit 2, earlier); the loader's defaults are the contract's."""
    from verification.harness import CHECKER

    broken = CHECKER.policy(subject.load)
    name = path or "spec/policy.toml"
    if broken:
        check = CheckResult(
            "policy",
            "failed",
            f"{name} is valid, but the loader breaks {', '.join(broken)}",
            details={"properties": broken},
            properties=broken,
        )
        check.failure_text = "; ".join(
            f"{b}: {CHECKER.errors.get(b) or 'the defaults differ from the contract'}"
            for b in broken
        )
        return check
    return CheckResult(
        "policy", "passed", f"{name} is valid; the loader keeps the contract's defaults"
    )


def _check_against(old: str) -> None:
    """Bad --against input is a usage error (exit 2), found before any check runs."""
    from spec.declaration import Replanning
    from spec.model import extract
    from verification.diagram.overlays import OverlayError, load_old, repository_root

    try:
        load_old(old, repository_root(), extract(Replanning))
    except (OverlayError, PolicyError) as error:
        raise CliError(f"--against {old}: {error}") from None
