"""The fixed workflow baseline: ``decide``, written by hand from the policy's
``[workflow]`` table and independently of the controller, so that the equivalence
check (CONTRACT.md "Fixed workflow baseline") compares two separate statements of when
a commit is allowed.
"""

from __future__ import annotations

from collections.abc import Mapping

from replan.controller.policy import DEFAULT_POLICY, Policy
from replan.controller.records import Decision, EvidenceState


def decide(states: Mapping[str, EvidenceState], policy: Policy | None = None) -> Decision:
    """``NeedsOwner`` if any prerequisite is Failed; ``ReadyToCommit`` if all are
    Passed; ``Inspect`` otherwise. A key missing from ``states`` reads as Unknown."""
    prerequisites = (policy or DEFAULT_POLICY).workflow_keys
    found = [states.get(key, EvidenceState.UNKNOWN) for key in prerequisites]
    if EvidenceState.FAILED in found:
        return Decision.NEEDS_OWNER
    if all(state == EvidenceState.PASSED for state in found):
        return Decision.READY_TO_COMMIT
    return Decision.INSPECT
