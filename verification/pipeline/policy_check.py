"""The checks a user's own test suite runs on their policy (the pytest plugin's
``replan_campaign``): the commit equivalence with the fixed workflow, and the lockstep
campaign with every property of the contract.

Why both: the contract's properties are stated relative to the policy, so a policy
whose completing step requires less than ``[workflow] ready_when_passed`` keeps every
one of them; only the equivalence with the fixed workflow shows the weakened gate.
They are the two checks of ``replan verify`` that run in seconds; the proofs and the
explorer stay in ``replan verify``.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replan.controller.policy import Policy, workflow_disagreements
from replan.verification.engines.campaign.machine import program
from replan.verification.engines.campaign.run import CampaignResult, run_campaign
from replan.verification.subjects.fixed_workflow import fixed_workflow_table

#: The property a disagreement with the fixed workflow breaks (CONTRACT.md, and the
#: name ``replan verify`` reports it under).
WORKFLOW_PROPERTY = "commit-equivalence"


@dataclass(frozen=True)
class PolicyFailure:
    """A violated property: what broke, the counterexample, how to see it again."""

    property: str
    message: str
    counterexample: str
    command: str
    fix: str = ""

    def text(self) -> str:
        lines = [
            f"replan: {self.property} - {self.message}",
            "counterexample:",
            *("  " + line for line in self.counterexample.splitlines()),
            f"again: {self.command}",
        ]
        if self.fix:
            lines.append(f"fix: {self.fix}")
        return "\n".join(lines)


def _policy_argument(policy_path: Path | None) -> str:
    return "" if policy_path is None else f" --policy {shlex.quote(str(policy_path))}"


def campaign_failure(result: CampaignResult, policy_path: Path | None) -> PolicyFailure | None:
    finding = result.finding
    if finding is None:
        return None
    saved = [path for path in result.saved if path.suffix == ".json"]
    command = (
        f"replan replay {shlex.quote(str(saved[0]))}"
        if saved
        else f"replan campaign{_policy_argument(policy_path)} --seed {result.seed}"
    )
    return PolicyFailure(
        property=finding.property,
        message=finding.message,
        counterexample=program(finding.operations, finding.results),
        command=command,
    )


def workflow_failure(
    policy: Policy, policy_path: Path | None, controller_class: Any
) -> PolicyFailure | None:
    table = fixed_workflow_table(policy, controller_class)
    wrong = [row for row in table["rows"] if not row["agree"]]
    if not wrong:
        return None
    row = wrong[0]
    states = ", ".join(f"{key} {state}" for key, state in row["states"].items())
    commits = "commits" if row["controller"]["commits"] else "does not commit"
    return PolicyFailure(
        property=WORKFLOW_PROPERTY,
        message=(
            f"{len(wrong)} of {len(table['rows'])} evidence assignments: the controller "
            "and the fixed workflow's decide() disagree on the commit"
        ),
        counterexample=(
            f"evidence {states}: step {row['step']!r} {commits} "
            f"(execute answers {row['controller']['execute']}), decide() says {row['decide']}"
        ),
        command=f"replan verify{_policy_argument(policy_path)}",
        fix="; ".join(workflow_disagreements(policy)),
    )


def check_policy(
    policy: Policy,
    *,
    policy_path: Path | None = None,
    profile: str = "ci",
    seed: int = 0,
    examples: int | None = None,
    steps: int | None = None,
    out_dir: Path | None = None,
    implementation: Any = None,
) -> tuple[PolicyFailure | None, CampaignResult | None]:
    """The first violated property or None, and the campaign's result (None when the
    workflow check failed first: it takes milliseconds, the campaign seconds).
    ``implementation`` is a controller class, or None for the generated one. The
    example database is off: a user's test run is reproducible from its seed alone,
    and a counterexample goes to ``out_dir``, never into their repository uninvited."""
    from replan.controller import Controller

    failure = workflow_failure(policy, policy_path, implementation or Controller)
    if failure is not None:
        return failure, None
    result = run_campaign(
        policy,
        profile,
        seed=seed,
        examples=examples,
        steps=steps,
        implementation=implementation,
        out_dir=out_dir,
        database=None,
        collect_visited=False,
    )
    return campaign_failure(result, policy_path), result
