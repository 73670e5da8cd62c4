"""The fixed-workflow table: for every assignment of the workflow's prerequisite
states, the controller's commit decision (found by running it) next to ``decide``'s.

Owns: ``fixed_workflow_table(policy, controller_class) -> dict``, the document
``replan trace`` writes to ``evidence/fixed-workflow.json``. For the default policy
that is the nine parser x access combinations of CONTRACT.md "Fixed workflow
baseline".

How the controller's decision is found: a fresh controller; the host observes every
prerequisite that is Passed or Failed at version 1 (an Unknown one is left unobserved:
a never-observed key reads Unknown, and observing it would count no progress); a
commit plan citing the current evidence revision is proposed (a current, in-budget
plan of an active run) and executed. The controller commits exactly when the
proposal is accepted and ``execute`` answers ``Executed``.

Leaves to others: proving the equivalence for any policy (z3, ``replan prove``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from replan.controller import Controller
from replan.controller.policy import DEFAULT_POLICY, Policy
from replan.controller.records import ADMITTED, Decision, EvidenceState, Observation, Plan
from replan.controller.workflow import decide

#: Row order: Unknown, Passed, Failed for each key (the contract's vocabulary order).
STATES = (EvidenceState.UNKNOWN, EvidenceState.PASSED, EvidenceState.FAILED)


def _class_name(cls: object) -> str:
    return f"{getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', repr(cls))}"


def controller_commits(
    states: dict[str, EvidenceState],
    step: str,
    policy: Policy,
    controller_class: Callable[[Policy], Any] = Controller,
) -> dict[str, Any]:
    """Run one controller to the commit decision for ``states``."""
    controller = controller_class(policy)
    for key, state in states.items():
        if state != EvidenceState.UNKNOWN:
            controller.observe(Observation(key, 1, state, "host"))
    resource = policy.resources[0]
    accepted = controller.propose(Plan("commit", 1, controller.evidence_revision, step, resource))
    answer = controller.execute("commit")
    return {
        "proposal_accepted": accepted,
        "execute": str(answer),
        "commits": bool(accepted) and answer in ADMITTED,
    }


def fixed_workflow_table(
    policy: Policy | None = None,
    controller_class: Callable[[Policy], Any] = Controller,
) -> dict[str, Any]:
    """Every assignment of the workflow keys' states, for every step that completes the
    run: the controller's decision by running it, ``decide``'s, and whether they agree
    (the controller commits exactly when ``decide`` says ReadyToCommit)."""
    policy = DEFAULT_POLICY if policy is None else policy
    keys = policy.workflow_keys
    rows = []
    for step in sorted(policy.terminal_steps):
        for assignment in itertools.product(STATES, repeat=len(keys)):
            states = dict(zip(keys, assignment, strict=True))
            ran = controller_commits(states, step, policy, controller_class)
            decision = decide(states, policy)
            rows.append(
                {
                    "states": {key: str(state) for key, state in states.items()},
                    "step": step,
                    "controller": ran,
                    "decide": str(decision),
                    "agree": ran["commits"] == (decision == Decision.READY_TO_COMMIT),
                }
            )
    agreeing = sum(row["agree"] for row in rows)
    return {
        "description": (
            "For every assignment of the workflow prerequisites, the controller's commit "
            "decision (by running the generated controller: observe the Passed/Failed "
            "keys, propose a current commit plan, execute it) against the fixed "
            "workflow's decide(). They agree when the controller commits exactly when "
            "decide() says ReadyToCommit."
        ),
        "controller": _class_name(controller_class),
        "workflow_keys": list(keys),
        "rows": rows,
        "combinations": len(rows),
        "agreeing": agreeing,
        "holds": agreeing == len(rows),
    }
