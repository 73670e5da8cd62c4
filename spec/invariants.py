"""The contract's safety invariants, as named predicates over one call.

Each invariant looks at one ``Call``: the snapshot before it, the operation and its
argument, its outcome (the answer, or the class of the error it raised) and the
snapshot after it. That one shape serves every checker: the campaign and the explorer
evaluate these functions after every operation, and the z3 proofs state the same
names over the transition relation. Names are CONTRACT.md's, verbatim.

Where an invariant needs to know what *should* have happened (was this observation
meaningful?), it works that out from the snapshot before the call, never from the
controller's own answer, so a controller that lies about progress is caught.
Stdlib only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from controller.policy import Policy
from controller.records import ExecuteResult, Observation

if TYPE_CHECKING:
    from controller.run import Run

Snapshot = Mapping[str, Any]


@dataclass(frozen=True)
class Call:
    """One operation and what it did."""

    policy: Policy
    before: Snapshot
    op: str  # observe | propose | execute | cancel
    argument: Any
    result: Any  # the answer, or the error class when the call raised
    after: Snapshot

    @property
    def raised(self) -> bool:
        return isinstance(self.result, type) and issubclass(self.result, BaseException)


# ---- helpers over snapshots ------------------------------------------------------


def _key_state(snapshot: Snapshot, key: str) -> str:
    entry = snapshot["evidence"].get(key)
    return "Unknown" if entry is None else str(entry["state"])


def _content(snapshot: Snapshot, key: str, version: int) -> tuple[str, str] | None:
    for k, v, state, source in snapshot["contents"]:
        if k == key and v == version:
            return (state, source)
    return None


def meaningful(call: Call) -> bool:
    """Whether the call is an observation that the contract says is progress: a valid
    observation, on an active run, of a (key, version) never seen, not older than the
    key's latest, whose state differs from the key's state before it."""
    if call.op != "observe" or call.raised or call.before["stop_reason"] is not None:
        return False
    obs = call.argument  # read only for observations (the explorer shares the rest)
    if not isinstance(obs, Observation):
        return False
    if _content(call.before, obs.key, obs.version) is not None:
        return False
    latest = call.before["evidence"].get(obs.key)
    if latest is not None and latest["version"] > obs.version:
        return False
    return str(obs.state) != _key_state(call.before, obs.key)


_COUNTERS = ("evidence_revision", "plan_revision", "steps", "proposals", "no_progress")


def _changed(call: Call) -> set[str]:
    return {name for name in call.after if call.after[name] != call.before[name]}


# ---- the invariants --------------------------------------------------------------


def commit_grounded(call: Call) -> bool:
    """Every executed step had all its required keys Passed when it ran."""
    if call.op != "execute" or call.result != ExecuteResult.EXECUTED:
        return True
    pending = call.before["pending"]
    if pending is None or pending["id"] != call.argument:
        return False  # executed something that was not the pending plan
    requires = call.policy.requirements.get(pending["step"], ())
    return all(_key_state(call.before, key) == "Passed" for key in requires)


def step_bound(call: Call) -> bool:
    """steps <= max_steps."""
    return bool(call.after["steps"] <= call.policy.max_steps)


def proposal_bound(call: Call) -> bool:
    """proposals <= max_proposals."""
    return bool(call.after["proposals"] <= call.policy.max_proposals)


def pending_current(call: Call) -> bool:
    """A pending plan cites the current evidence revision."""
    pending = call.after["pending"]
    return pending is None or bool(pending["evidence_revision"] == call.after["evidence_revision"])


def revision_honest(call: Call) -> bool:
    """evidence_revision rises by exactly 1 on a meaningful observation and never
    otherwise (a renumbered same-state observation never raises it)."""
    rise: int = call.after["evidence_revision"] - call.before["evidence_revision"]
    return rise == (1 if meaningful(call) else 0)


def latest_is_newest(call: Call) -> bool:
    """The latest record of a key has the highest version seen for it."""
    highest: dict[str, int] = {}
    for key, version, _state, _source in call.after["contents"]:
        highest[key] = max(version, highest.get(key, 0))
    recorded = {key: entry["version"] for key, entry in call.after["evidence"].items()}
    return recorded == highest


def stop_absorbing(call: Call) -> bool:
    """Once stopped, the stop reason and every counter, revision and plan stay as they
    were, and nothing but False, None, Replayed or Stopped comes out."""
    if call.before["stop_reason"] is None:
        return True
    if call.raised:
        return call.after == call.before
    allowed = call.result in (False, None, ExecuteResult.REPLAYED, ExecuteResult.STOPPED)
    return allowed and call.after == call.before


def replay_inert(call: Call) -> bool:
    """Replayed changes nothing; no id executes twice."""
    if call.op != "execute":
        return True
    if call.result == ExecuteResult.REPLAYED:
        return call.after == call.before and call.argument in call.before["completed"]
    if call.result == ExecuteResult.EXECUTED:
        return call.argument not in call.before["completed"]
    return True


def rejection_atomic(call: Call) -> bool:
    """A rejected call or a raised error changes nothing beyond the documented
    counters and stop."""
    changed = _changed(call)
    if call.raised:
        return not changed
    stop_fields = {"state", "stop_reason"}
    if call.op == "propose" and call.result is False:
        return changed <= {"proposals"} | stop_fields
    if call.op == "execute" and call.result != ExecuteResult.EXECUTED:
        return changed <= stop_fields
    if call.op == "observe" and call.result is False:
        # a duplicate, an older version or a renumbered state: remembered, counted
        return changed <= {"no_progress", "contents", "evidence"} | stop_fields and not (
            "evidence" in changed
            and any(
                call.after["evidence"][k]["state"] != call.before["evidence"][k]["state"]
                for k in call.after["evidence"]
                if k in call.before["evidence"]
            )
        )
    return True


def completed_iff_terminal_step(call: Call) -> bool:
    """The run stops with Completed exactly when a completes_run step executed."""
    pending = call.before["pending"]
    terminal_executed = (
        call.op == "execute"
        and call.result == ExecuteResult.EXECUTED
        and pending is not None
        and pending["step"] in call.policy.terminal_steps
    )
    newly_completed = call.before["stop_reason"] != "Completed" and (
        call.after["stop_reason"] == "Completed"
    )
    return bool(terminal_executed == newly_completed)


#: CONTRACT.md's names -> predicates, in the contract's order.
INVARIANTS: dict[str, Callable[[Call], bool]] = {
    "commit-grounded": commit_grounded,
    "step-bound": step_bound,
    "proposal-bound": proposal_bound,
    "pending-current": pending_current,
    "revision-honest": revision_honest,
    "latest-is-newest": latest_is_newest,
    "stop-absorbing": stop_absorbing,
    "replay-inert": replay_inert,
    "rejection-atomic": rejection_atomic,
    "completed-iff-terminal-step": completed_iff_terminal_step,
}


def violated(call: Call) -> list[str]:
    """The names of the invariants this call breaks (empty when all hold)."""
    return [name for name, holds in INVARIANTS.items() if not holds(call)]


# ==== Auxiliary invariants (z3 induction strengtheners; verification/prove.py) ==========
# Not contract properties: facts about every reachable state that the inductive proofs
# of the contract's invariants need (an invariant is proved inductive together with
# these, which are proved inductive themselves). They concern the run's bookkeeping,
# so they are stated over its fields rather than a snapshot. The z3 forms are
# ``verification.prove.AUXILIARY``, under the same names; tests check both on every
# state of random runs.


def counters_in_range(run: Run) -> bool:
    """evidence_revision >= 1; plan_revision, steps, proposals, no_progress >= 0."""
    return (
        run._evidence_revision >= 1
        and min(run._plan_revision, run._steps, run._proposals, run._no_progress) >= 0
    )


def passed_tracks_known(run: Run) -> bool:
    """A key is in the passed set exactly when its latest state is Passed."""
    return run._passed == {key for key, state in run._known.items() if state == "Passed"}


def pending_matches_state(run: Run) -> bool:
    """Idle has no pending plan; pending has one, and it names a declared step."""
    if run._declared_state == "idle":
        return run._pending is None
    if run._declared_state == "pending":
        return run._pending is not None and run._pending.step in run.policy.requirements
    return True


def pending_not_completed(run: Run) -> bool:
    """The pending plan's id has never been executed."""
    return run._pending is None or run._pending.id not in run._completed


AUXILIARY_INVARIANTS: dict[str, Callable[[Run], bool]] = {
    "counters-in-range": counters_in_range,
    "passed-tracks-known": passed_tracks_known,
    "pending-matches-state": pending_matches_state,
    "pending-not-completed": pending_not_completed,
}
