"""A bare Hypothesis lockstep machine: the baseline the campaign's throughput is
measured against (the campaign's operations per second at ci beside a bare
Hypothesis lockstep machine's).

Why it exists: the campaign (``verification.engines.campaign.machine``) runs each operation through
Hypothesis' stateful machinery, the generated controller and the reference model, and
on top of that draws its inputs relative to the current state, checks every property
after every operation and records coverage and visited states. How fast it can go at
best is how fast Hypothesis can drive the two implementations in lockstep with none
of that: this machine. Four rules (observe, propose, execute, cancel), each drawing
its whole argument with one ``st.`` strategy from fixed small domains; after every
operation the answers and the snapshots are compared, nothing else. It has the
campaign's budget (the ``ci`` profile's steps per example, any number of examples)
and its shape of runs: a stopped run absorbs ``campaign.ABSORBED_CALLS`` calls, then
a fresh run starts (on a new controller and the one reference model ``reset``, as the
campaign does, so building python-statemachine's machine is not what is measured).

Owns: the machine and ``bare_lockstep_rate``. Leaves to others: reporting the figure
(``replan bench``)."""

from __future__ import annotations

import time
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from replan.controller import Controller
from replan.controller.policy import DEFAULT_POLICY
from replan.controller.records import EvidenceState, Observation, Plan
from replan.spec.reference import ReferenceController
from replan.verification.core.harness import Operation, apply, same_outcome
from replan.verification.engines.campaign.machine import ABSORBED_CALLS, PROFILES

_POLICY = DEFAULT_POLICY
_IDS = st.sampled_from(("p1", "p2", "p3", "p4"))
_REVISIONS = st.integers(0, 4)
_OBSERVATIONS = st.builds(
    Observation,
    st.sampled_from(_POLICY.keys),
    st.integers(1, 4),
    st.sampled_from(tuple(EvidenceState)),
    st.sampled_from(("ci", "owner")),
)
_PLANS = st.builds(
    Plan,
    _IDS,
    _REVISIONS,
    _REVISIONS,
    st.sampled_from(tuple(s.name for s in _POLICY.steps)),
    st.sampled_from(_POLICY.resources),
)


class LockstepDiverged(AssertionError):
    """The controller and the reference model answered or ended differently."""


class BareLockstep(RuleBasedStateMachine):
    """The generated controller and the reference model, one operation at a time."""

    operations = 0  # counted across every example of one measurement
    reference: Any = ReferenceController(_POLICY)  # reset for every run

    def __init__(self) -> None:
        super().__init__()
        self._new_run()

    def _new_run(self) -> None:
        self.subject = Controller(_POLICY)
        self.reference.reset()
        self.absorbed = 0

    def _do(self, op: str, argument: Any = None) -> None:
        operation = Operation(op, argument)
        stopped = self.subject.stop_reason is not None
        answer = apply(self.subject, operation)
        expected = apply(self.reference, operation)
        type(self).operations += 1
        if not same_outcome(answer, expected):
            raise LockstepDiverged(f"{operation}: {answer!r} against {expected!r}")
        if self.subject.snapshot() != self.reference.snapshot():
            raise LockstepDiverged(f"{operation}: the snapshots differ")
        if stopped:
            self.absorbed += 1
            if self.absorbed >= ABSORBED_CALLS:
                self._new_run()

    @rule(obs=_OBSERVATIONS)
    def observe(self, obs: Observation) -> None:
        self._do("observe", obs)

    @rule(plan=_PLANS)
    def propose(self, plan: Plan) -> None:
        self._do("propose", plan)

    @rule(plan_id=_IDS)
    def execute(self, plan_id: str) -> None:
        self._do("execute", plan_id)

    @rule()
    def cancel(self) -> None:
        self._do("cancel")


def bare_lockstep_rate(seed: int, examples: int) -> dict[str, float | int]:
    """Run the bare machine for ``examples`` Hypothesis examples of the ``ci``
    profile's steps on ``seed`` (no example database): its operations, seconds and
    operations per second."""
    BareLockstep.operations = 0
    chosen = settings(
        max_examples=examples,
        stateful_step_count=PROFILES["ci"].steps,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.generate,),
        verbosity=Verbosity.quiet,
        print_blob=False,
    )
    started = time.perf_counter()
    run_state_machine_as_test(hypothesis_seed(seed)(BareLockstep), settings=chosen)
    seconds = time.perf_counter() - started
    operations = BareLockstep.operations
    return {
        "operations": operations,
        "seconds": round(seconds, 3),
        "operations_per_second": round(operations / seconds, 1) if seconds > 0 else 0.0,
    }


__all__ = ["BareLockstep", "bare_lockstep_rate"]
