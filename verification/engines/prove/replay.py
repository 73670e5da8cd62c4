"""Replaying a proof's counterexample: run it on the controller from the state it
names, and prove the same obligation again, so ``replan replay`` says "passes now"
only when the very check that failed holds.

A proof's counterexample is not an episode from a fresh run: an equivalence
counterexample is a state with a commit plan pending (its evidence, its counters: a
step-limit bug shows only near the limit) and the ``execute`` of that plan; a
counterexample to induction is a state satisfying the invariants (perhaps one no run
reaches) and one step from it. ``verification.engines.prove.concrete`` made both concrete when
the proof failed. Replaying them:

- **on the controller**: the implementation is put in the saved state and makes the
  saved call, every property checked after it (``run_sequence`` with a ``start``); for
  the equivalence, the answer is also compared with ``decide`` on the state's
  evidence, since no per-call property states the equivalence;
- **as the proof**: the same property is proved again for the same event, on the
  implementation's declaration and bodies (the project's, or a named mutant's). A
  counterexample to induction may be a state no run reaches, where the controller's
  answer proves nothing either way; the proof is the check that failed.

It still fails when either shows the failure; it passes now only when both hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from replan.controller.policy import Policy
from replan.controller.records import Decision, EvidenceState, ExecuteResult
from replan.controller.run import Run
from replan.controller.workflow import decide
from replan.verification.core.harness import Operation, RunReport
from replan.verification.core.subject import Subject
from replan.verification.engines.prove.concrete import start_state

#: The kinds of proof counterexample a file may hold (its "check").
PROOF_CHECKS = ("commit-equivalence", "induction")


@dataclass(frozen=True)
class ProofReplay:
    """What replaying a proof's counterexample showed."""

    check: str
    #: the controller, from the saved state, breaks the check (or another property)
    reproduced: bool
    controller_detail: str
    #: the same obligation proved again (None: not for this implementation)
    proved_now: bool | None
    proof_detail: str

    @property
    def still_fails(self) -> bool:
        return self.reproduced or self.proved_now is False


def equivalence_holds(policy: Policy, start: Mapping[str, Any], result: object) -> tuple[bool, str]:
    """Whether the answer to the pending commit plan's ``execute`` from ``start`` is
    ``Executed`` exactly when ``decide`` says ``ReadyToCommit`` on its evidence."""
    run = Run(policy)
    run._import_state(start_state(start))
    states = {key: run.evidence_state(key) for key in policy.keys}
    decision = decide(states, policy)
    committed = result == ExecuteResult.EXECUTED
    shown = ", ".join(f"{k}={v}" for k, v in states.items() if v is not EvidenceState.PASSED)
    detail = f"execute answered {result}, decide says {decision} ({shown or 'every key Passed'})"
    return committed == (decision is Decision.READY_TO_COMMIT), detail


def replay_proof(
    document: Mapping[str, Any],
    policy: Policy,
    operations: Sequence[Operation],
    report: RunReport,
    subject: Subject | None,
) -> ProofReplay:
    """The two replays of a proof's counterexample (see the module docstring)."""
    check = str(document.get("check"))
    reproduced = report.failure is not None
    detail = report.detail
    if reproduced and report.failed_at is None:
        # a state the proof's premises allow and the invariants do not: no run is in
        # it, so the controller's answer from it shows nothing; the proof decides
        reproduced = False
        detail += " (a state no run reaches: not run; the proof decides)"
    elif check == "commit-equivalence" and not reproduced and report.results:
        holds, detail = equivalence_holds(policy, document["start"], report.results[-1])
        reproduced = not holds
    elif not reproduced:
        detail = "every property held after the saved step from the saved state"
    if subject is None:
        return ProofReplay(check, reproduced, detail, None, "not re-proved: not a known subject")
    proved, proof_detail = _prove_again(document, policy, subject)
    return ProofReplay(check, reproduced, detail, proved, proof_detail)


def _prove_again(document: Mapping[str, Any], policy: Policy, subject: Subject) -> tuple[bool, str]:
    from replan.verification.engines.prove.engine import prove_equivalence, prove_invariants

    name = str(document.get("property"))
    if document.get("check") == "commit-equivalence":
        result = prove_equivalence(policy, subject.model, subject.model_class)
    else:
        event = str(document.get("event"))
        found = [
            r
            for r in prove_invariants(
                policy, subject.model, subject.model_class, events=[event], initial=False
            )
            if r.name == name
        ]
        if not found:
            return False, f"{name}: no such property for {event} any more"
        result = found[0]
    if result.proved:
        return True, f"{name}: proved again for this step"
    return False, f"{name}: still fails: {result.message.splitlines()[0]}"


__all__ = ["PROOF_CHECKS", "ProofReplay", "equivalence_holds", "replay_proof"]
