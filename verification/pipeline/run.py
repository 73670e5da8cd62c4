"""``verify``: every check in order, each recorded even when it fails, and the report
written. The one library call behind ``replan verify``, ``replan evidence``,
``replan review --against`` and the pytest plugin.

The order is the reader's: the policy file, drift, the proofs (fast, and a broken
proof explains the rest), the explorer, the campaign (which measures itself against
the explorer), the diagram, the fixed workflow, the effect boundary (the guard, the
executor, the journal and the run log between the controller's answers and the
world), the reference episode (default policy only), then what was asked for beyond:
mutation adequacy and the comparison with an older version. Nothing stops the run but
``fail_fast``: every check runs and reports.

With ``--workers auto`` on two cores, the campaign and the boundary check, which need
none of the explorer's results, start in processes of their own when the explorer
starts; each is collected in its turn, so the report is the same.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from replan.controller.policy import DEFAULT_POLICY, Policy
from replan.verification.core.subject import PROJECT, Subject
from replan.verification.pipeline.checks.against import check_against
from replan.verification.pipeline.checks.boundary import check_boundary, run_boundary_alone
from replan.verification.pipeline.checks.campaign import check_campaign, run_campaign_alone
from replan.verification.pipeline.checks.diagram import check_diagram
from replan.verification.pipeline.checks.drift import check_drift
from replan.verification.pipeline.checks.episode import check_episode
from replan.verification.pipeline.checks.explorer import check_explorer
from replan.verification.pipeline.checks.mutation import check_mutation
from replan.verification.pipeline.checks.policy import check_policy
from replan.verification.pipeline.checks.proofs import check_proofs
from replan.verification.pipeline.checks.workflow import check_workflow
from replan.verification.pipeline.estimate import (
    beside_explorer,
    explorer_engine,
    explorer_estimate,
)
from replan.verification.pipeline.findings import label_unreachable_counterexamples
from replan.verification.pipeline.gaps import find_gaps
from replan.verification.pipeline.options import VerifyOptions
from replan.verification.pipeline.session import Progress, VerifySession, stderr_progress
from replan.verification.report.records import CheckResult, VerifyReport, write_markdown

Check = Callable[[], CheckResult]

#: The checks whose work needs no other check's result: they may run beside the explorer.
BESIDE_EXPLORER: dict[str, Callable[[VerifySession], Any]] = {
    "campaign": run_campaign_alone,
    "boundary": run_boundary_alone,
}


def planned_checks(session: VerifySession) -> list[tuple[str, Check]]:
    """The checks this run includes, in order (the policy check is already done)."""
    options = session.options
    steps: list[tuple[str, Check]] = [
        ("drift", check_drift),
        ("proofs", lambda: check_proofs(session)),
        ("explorer", lambda: check_explorer(session)),
        ("campaign", lambda: check_campaign(session)),
        ("diagram", lambda: check_diagram(session)),
        ("workflow", lambda: check_workflow(session)),
    ]
    if options.boundary:
        steps.append(("boundary", lambda: check_boundary(session)))
    if session.policy == DEFAULT_POLICY:
        steps.append(("episode", lambda: check_episode(session)))
    if options.mutate:
        steps.append(("mutation", lambda: check_mutation(session)))
    if options.against is not None:
        old = options.against
        steps.append(("against", lambda: check_against(session, old, options.policy_file)))
    return steps


def verify(
    policy: Policy,
    evidence: Path,
    options: VerifyOptions | None = None,
    subject: Subject = PROJECT,
    progress: Progress = stderr_progress,
) -> VerifyReport:
    """Run every check on ``policy`` and write the report into ``evidence``
    (verify.json, verify-report.md, and what the checks write beside them)."""
    started = time.perf_counter()
    session = VerifySession(policy, evidence, options or VerifyOptions(), subject, progress)
    steps = planned_checks(session)
    session.total = len(steps) + 1
    session.report.checks.append(check_policy(session.options.policy_file, subject))
    progress(f"[1/{session.total}] policy: {session.report.checks[0].status}")
    try:
        # started now, not when the explorer starts: the drift check and the proofs
        # run in this process on one core, and the second would wait for the explorer
        start_beside_explorer(session, [planned for planned, _ in steps])
        for number, (name, check) in enumerate(steps, start=2):
            if session.options.fail_fast and not session.report.ok:
                session.report.not_run = [later for later, _ in steps[number - 2 :]]
                progress(f"--fail-fast: not running {', '.join(session.report.not_run)}")
                break
            session.run(number, name, check)
    finally:
        session.cancel_beside()
    label_unreachable_counterexamples(session)
    if not session.report.not_run:  # gaps are judged on a whole run only
        find_gaps(session)
    report = session.report
    report.seconds = time.perf_counter() - started
    document = report.to_json()
    session.write_json(evidence / "verify.json", relative_paths(document, evidence))
    write_markdown(report, evidence / "verify-report.md", timings=not session.deterministic)
    return report


def start_beside_explorer(session: VerifySession, planned: list[str]) -> None:
    """Start the planned checks that need no other check's result, in turn, in one
    process of their own, when ``--workers auto`` gives them the second core."""
    estimate = explorer_estimate(session.policy)
    engine = explorer_engine(session.options.engine)
    if not beside_explorer(session.options.workers, estimate, engine):
        return
    calls: dict[str, Callable[[], Any]] = {
        name: functools.partial(work, session)
        for name, work in BESIDE_EXPLORER.items()
        if name in planned
    }
    if calls and session.start_beside(calls):
        session.progress(f"{' and '.join(calls)}: started beside the explorer, in one process")


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
