"""Check 5, campaign: the Hypothesis campaign checks every property after every
operation in lockstep with the reference model; its coverage is measured against the
declaration and against the explorer's reachable set."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from replan.verification.pipeline.findings import fired_transition
from replan.verification.pipeline.session import VerifySession
from replan.verification.report.records import CheckResult


def explorer_witness(session: VerifySession, label: str) -> Any:
    """The explorer's shortest run that fires ``label`` (any of its domains)."""
    for run in session.explored.runs or [session.explored]:
        if run.graph is not None:
            found = run.graph.witness(label)
        elif run.witness is not None:
            found = run.witness(label)
        else:
            found = None
        if found is not None:
            return found
    return None


def campaign_options(session: VerifySession) -> dict[str, Any]:
    """The campaign's arguments in this run."""
    return dict(
        seed=session.options.seed,
        implementation=session.subject.implementation_path,
        reference=session.subject.reference,
        out_dir=session.evidence / "counterexamples",
        database=None,  # reproducible: no examples carried over from other runs
    )


@contextmanager
def hypothesis_scratch() -> Iterator[None]:
    """Hypothesis' own directory (its constants cache) in a temporary one, so that a
    verify run leaves nothing of it behind."""
    from replan.verification.engines.campaign.run import hypothesis_home

    with tempfile.TemporaryDirectory(prefix="replan-hypothesis-") as home, hypothesis_home(home):
        yield


def run_campaign_alone(session: VerifySession) -> Any:
    """The campaign on its own: what needs no explorer, so it can run beside it."""
    from replan.verification.engines.campaign.run import run_campaign

    with hypothesis_scratch():
        return run_campaign(session.policy, session.options.profile, **campaign_options(session))


def check_campaign(session: VerifySession) -> CheckResult:
    from replan.verification.engines.campaign.run import seed_missed

    result = session.outcome("campaign", lambda: run_campaign_alone(session))
    if session.explored is not None:
        with hypothesis_scratch():  # what the campaign missed, run from the explorer's runs
            seed_missed(
                result,
                list(session.explored.fired),
                lambda label: explorer_witness(session, label),
                profile=session.options.profile,
                **campaign_options(session),
            )
    session.campaigned = result
    document = result.to_json()
    coverage = result.coverage.to_json()
    summary = (
        f"{result.operations:,} operations in {result.examples} examples"
        + (f" ({len(result.seeded)} transitions seeded from the explorer)" if result.seeded else "")
        + "; "
        + "; ".join(result.coverage.lines()[:1])
    )
    if session.explored is not None:
        measured, lines = _coverage_against_explorer(session, result)
        document["coverage_vs_explorer"] = measured
        summary += "".join(lines)
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
            result.finding.property: fired_transition(session, result.finding)
        }
    return check


def _coverage_against_explorer(
    session: VerifySession, result: Any
) -> tuple[dict[str, Any], list[str]]:
    """The campaign's states and transitions against each domain the explorer searched."""
    from replan.verification.engines.explore.coverage import coverage as explorer_coverage

    measured: dict[str, Any] = {}
    lines = []
    for run in session.explored.runs or [session.explored]:
        if run.graph is None:
            continue
        against = explorer_coverage(
            run,
            result.visited.abstract_states(),
            result.visited.abstract_transitions(),
            abstracted=True,
        )
        name = str(run.domains.get("name", "explorer"))
        measured[name] = against.to_json()
        lines.append(f"; vs explorer ({name}): {against.line()}")
    if not measured:
        why = f"the {session.explored.engine} engine keeps no graph of the controller's states"
        measured["not measured"] = why
        lines.append(f"; vs explorer: not measured ({why})")
    return measured, lines
