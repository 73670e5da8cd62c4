"""What a run hands to the person or the next process when it stops (or is paused):
the facts it accepted, what the pending plan still waits for, and why it stopped.

The summary is read from the run's public view only (``evidence_state(key)``, ``pending``,
``stop_reason``, the counters and the policy), so it says exactly what the controller
decided on, never what a plan's prose claimed. Stdlib only; JSON-ready.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from replan.controller.policy import Policy
from replan.controller.records import EvidenceState, Plan, StopReason


class RunView(Protocol):
    """The read-only public view of one run (``Controller`` has it)."""

    policy: Policy

    @property
    def evidence_revision(self) -> int: ...
    @property
    def steps(self) -> int: ...
    @property
    def proposals(self) -> int: ...
    @property
    def tokens(self) -> int: ...
    @property
    def cost(self) -> int: ...
    @property
    def elapsed_ms(self) -> int: ...
    @property
    def pending(self) -> Plan | None: ...
    @property
    def stop_reason(self) -> StopReason | None: ...
    @property
    def declared_state(self) -> str: ...
    def evidence_state(self, key: str) -> EvidenceState: ...


def handoff(run: RunView) -> dict[str, Any]:
    """The run's handoff summary: every declared key's accepted state, the pending plan
    with the keys its step still needs Passed (``waiting_for``: Failed ones call for an
    owner, Unknown ones for inspection), the budget used, and the stop reason (None
    while the run is active)."""
    policy = run.policy
    facts = {key: str(run.evidence_state(key)) for key in policy.keys}
    pending = run.pending
    summary: dict[str, Any] = {
        "stop_reason": None if run.stop_reason is None else str(run.stop_reason),
        "state": run.declared_state,
        "facts": facts,
        "evidence_revision": run.evidence_revision,
        "steps": f"{run.steps} of {policy.max_steps}",
        "proposals": f"{run.proposals} of {policy.max_proposals}",
        "pending": None,
    }
    # each budget the policy sets, used against its limit (absent: no limit set)
    for name, used, limit, unit in (
        ("tokens", run.tokens, policy.max_tokens, ""),
        ("cost", run.cost, policy.max_cost, f" micro-{policy.currency}"),
        ("elapsed_ms", run.elapsed_ms, policy.max_wall_ms, " ms"),
    ):
        if limit > 0:
            summary[name] = f"{used} of {limit}{unit}"
    if pending is not None:
        needs = (
            *policy.requirements.get(pending.step, ()),
            *policy.resource_requirements.get(pending.step, {}).get(pending.resource, ()),
        )
        summary["pending"] = {
            "id": pending.id,
            "step": pending.step,
            "resource": pending.resource,
            "waiting_for": {k: facts[k] for k in needs if facts[k] != str(EvidenceState.PASSED)},
            "needs_approval": pending.step in policy.approval_steps,
        }
    return summary


def stop_text(run: RunView) -> str:
    """The line the model reads in its last tool result once the run has stopped: that
    it stopped, why, and the handoff summary (what was done, what is still missing),
    so a model's last answer can say so instead of trying another call."""
    return (
        f"The run has stopped ({run.stop_reason}): no further tool call will run. "
        f"Handoff: {json.dumps(handoff(run), sort_keys=True, ensure_ascii=False)}"
    )
