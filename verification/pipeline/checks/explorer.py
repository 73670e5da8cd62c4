"""Check 4, explorer: every reachable state within the stated bounds, every property on
every transition, no traps; it stops at the first violation."""

from __future__ import annotations

import dataclasses
import sys

from replan.verification.core.search import SearchOptions, SearchResult
from replan.verification.pipeline.estimate import (
    auto_workers,
    explorer_engine,
    explorer_estimate,
)
from replan.verification.pipeline.findings import fired_transition
from replan.verification.pipeline.session import VerifySession
from replan.verification.report.records import CheckResult


def _search(session: VerifySession, name: str, options: SearchOptions) -> SearchResult:
    """The search by engine ``name``; a kernel that cannot be generated for this
    subject (a body the translation does not read) gives way to the Python explorer,
    saying why."""
    from replan.verification.engines import engine

    if name == "kernel":
        from replan.verification.translate.kernel_cache import default_directory

        try:
            return engine("kernel").search(
                session.subject,
                session.policy,
                None,
                dataclasses.replace(options, kernel_cache=default_directory()),
            )
        except ValueError as error:  # TranslationError is one
            session.progress(
                f"explorer: the kernel cannot search this ({error}); the Python explorer does"
            )
    return engine("python").search(session.subject, session.policy, None, options)


def check_explorer(session: VerifySession) -> CheckResult:
    estimate = explorer_estimate(session.policy)
    name = explorer_engine(session.options.engine)
    workers = auto_workers(estimate) if session.options.workers is None else session.options.workers
    if estimate is not None:
        shards = "" if workers == 1 else f"; sharded over {workers} processes"
        by = "; searched by the generated kernel" if name == "kernel" else ""
        session.progress(estimate + shards + by)
    # Stops at the first violation: a broken controller can make the state space
    # unbounded, and its shortest counterexample is what a reviewer needs.
    options = SearchOptions(
        keep_graph=True,
        stop_at_first=True,
        progress=session.progress,
        progress_every=2.0 if sys.stderr.isatty() else 30.0,
        workers=workers,
    )
    result = _search(session, name, options)
    session.explored = result
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
        directory = session.evidence / "counterexamples"
        for path in result.save_findings(directory):
            check.counterexamples.append(str(path))
            if path.suffix == ".json":
                check.replay.append(f"replan replay {path}")
        first = result.findings[0]
        check.failure_text = f"{first.property}: {first.message}\n{first.program()}"
        check.details["broken_by"] = {
            finding.property: fired_transition(session, finding) for finding in result.findings
        }
    return check
