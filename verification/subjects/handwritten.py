"""The honest baseline: the controller a careful person would write by hand from
CONTRACT.md, with no declaration and no generator.

Why it exists: replan claims that generating the controller from the declaration costs
nothing at run time compared with writing it by hand. ``replan bench`` measures that
claim against this class, so it must be neither a strawman nor a cheat:

- it implements the *whole* contract (observe, propose, execute, charge, cancel,
  stopping; not the approval extension),
  not only the happy path the benchmark drives, and ``tests/test_handwritten.py``
  runs it in lockstep with the generated controller and the invariants;
- it does the same kind of work per call: it validates its input, appends one trace
  entry per call (errors included) and keeps the stop reason, the counters and the
  evidence records the public view and ``snapshot()`` expose;
- it is written the way a competent person writes Python: one class with
  ``__slots__``, the rules of each operation as ``if``s in the contract's order,
  small helpers where a rule repeats, no tricks (no global-to-local binding, no
  precomputed dispatch tables).

It shares only the vocabulary with the project (``controller.records`` and the
``Policy``); it does not import ``controller.run`` or the declaration, so it is an
independent statement of the contract. Its trace entries carry no ``transition``
field: a hand-written controller has no declared transitions to name.
"""

from __future__ import annotations

from typing import Any

from replan.controller.policy import DEFAULT_POLICY, Policy
from replan.controller.records import (
    EvidenceState,
    ExecuteResult,
    InvalidInput,
    Observation,
    ObservationConflict,
    Plan,
    StopReason,
    Usage,
)

_ARGUMENT_NAME = {"observe": "obs", "propose": "plan", "execute": "plan_id", "charge": "usage"}


def _is_int(value: object) -> bool:
    """An int that is not a bool (CONTRACT.md: a bool is not an int here)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _plain(value: object) -> Any:
    """A JSON-ready rendering of a trace argument or result."""
    if isinstance(value, Observation | Plan | Usage):
        return {name: _plain(item) for name, item in zip(value._fields, value, strict=True)}
    if isinstance(value, StopReason | EvidenceState | ExecuteResult):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, type) and issubclass(value, BaseException):
        return {"error": value.__name__}
    return repr(value)


class HandwrittenController:
    """One run of the controller, written by hand from CONTRACT.md."""

    __slots__ = (
        "_accepted",
        "_completed",
        "_contents",
        "_cost",
        "_elapsed_ms",
        "_evidence_revision",
        "_known",
        "_latest_version",
        "_no_progress",
        "_pending",
        "_plan_revision",
        "_proposals",
        "_steps",
        "_stop_reason",
        "_tokens",
        "_trace",
        "policy",
    )

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = DEFAULT_POLICY if policy is None else policy
        self._stop_reason: StopReason | None = None
        self._evidence_revision = 1
        self._plan_revision = 0
        self._steps = 0
        self._proposals = 0
        self._no_progress = 0
        self._tokens = self._cost = self._elapsed_ms = 0
        self._pending: Plan | None = None
        self._contents: dict[tuple[str, int], tuple[EvidenceState, str]] = {}
        self._latest_version: dict[str, int] = {}
        self._known: dict[str, EvidenceState] = {}
        self._accepted: set[str] = set()
        self._completed: set[str] = set()
        # (operation, argument, result or error class, evidence revision after, stop
        # reason after); rendered as dicts only when ``trace`` is read.
        self._trace: list[tuple[str, Any, Any, int, StopReason | None]] = []

    # ---- observe (host only) ---------------------------------------------------------

    def observe(self, obs: Observation) -> bool:
        """Record a trusted observation; True when it changed what is known."""
        self._check_observation(obs)
        result = self._observe(obs)
        self._trace.append(("observe", obs, result, self._evidence_revision, self._stop_reason))
        return result

    def _check_observation(self, obs: object) -> None:
        """Rule 1: a malformed observation is a host bug, raised whether or not the run
        stopped; the raise is traced and nothing else changes."""
        problem = None
        if not isinstance(obs, Observation):
            problem = f"observation: expected an Observation, got {type(obs).__name__}"
        elif not isinstance(obs.key, str) or obs.key not in self.policy.key_set:
            problem = f"observation.key: {obs.key!r} is not a declared evidence key"
        elif not _is_int(obs.version) or obs.version < 1:
            problem = f"observation.version: expected an int >= 1, got {obs.version!r}"
        elif not isinstance(obs.state, EvidenceState):
            problem = f"observation.state: expected an EvidenceState, got {obs.state!r}"
        elif not isinstance(obs.source, str) or not obs.source:
            problem = f"observation.source: expected a non-empty string, got {obs.source!r}"
        if problem is not None:
            self._trace.append(
                ("observe", obs, InvalidInput, self._evidence_revision, self._stop_reason)
            )
            raise InvalidInput(problem)

    def _observe(self, obs: Observation) -> bool:
        if self._stop_reason is not None:  # rule 2: a stopped run is never revived
            return False
        key = obs.key
        version = obs.version
        content = (obs.state, obs.source)
        seen = self._contents.get((key, version))
        if seen is not None:
            if seen == content:  # rule 3: a duplicate delivery
                if self.policy.count_duplicate_deliveries:
                    self._count_no_progress()
                return False
            # rule 4: other content under a seen (key, version)
            self._trace.append(
                ("observe", obs, ObservationConflict, self._evidence_revision, self._stop_reason)
            )
            raise ObservationConflict(
                f"observation ({key!r}, version {version}): content "
                f"{(str(obs.state), obs.source)} conflicts with the recorded "
                f"{(str(seen[0]), seen[1])}"
            )
        self._contents[(key, version)] = content  # rule 5
        if self._latest_version.get(key, 0) > version:  # rule 6: older never overwrites
            self._count_no_progress()
            return False
        self._latest_version[key] = version  # rule 7
        if obs.state != self._known.get(key, EvidenceState.UNKNOWN):
            self._known[key] = obs.state
            self._evidence_revision += 1
            self._pending = None
            self._no_progress = 0
            return True
        self._count_no_progress()  # rule 8: same state, higher version
        return False

    def _count_no_progress(self) -> None:
        self._no_progress += 1
        if self._no_progress >= self.policy.no_progress_limit:
            self._stop_reason = StopReason.NO_NEW_EVIDENCE

    # ---- propose (model-facing: never raises) --------------------------------------------

    def propose(self, plan: Plan) -> bool:
        """Consider a proposed plan; True when it became the pending plan."""
        result = self._propose(plan)
        self._trace.append(("propose", plan, result, self._evidence_revision, self._stop_reason))
        return result

    def _propose(self, plan: Plan) -> bool:
        if self._stop_reason is not None:  # rule 1
            return False
        policy = self.policy
        if self._proposals == policy.max_proposals:  # rule 2
            self._stop_reason = StopReason.PLAN_LIMIT
            return False
        self._proposals += 1  # rule 3: every proposal considered uses a slot
        if not (  # rule 4: the reasons to reject
            isinstance(plan, Plan)
            and isinstance(plan.id, str)
            and plan.id != ""
            and _is_int(plan.revision)
            and _is_int(plan.evidence_revision)
            and isinstance(plan.step, str)
            and isinstance(plan.resource, str)
        ):
            return False
        if (
            plan.revision <= self._plan_revision
            or plan.evidence_revision != self._evidence_revision
            or plan.resource not in policy.resource_set
            or plan.step not in policy.requirements
            or plan.id in self._completed
        ):
            return False
        self._pending = plan  # rule 5: accept (supersedes any other pending plan)
        self._plan_revision = plan.revision
        self._accepted.add(plan.id)
        return True

    # ---- execute (model-facing: never raises) --------------------------------------------

    def execute(self, plan_id: str) -> ExecuteResult:
        """Ask to run the pending plan's step; the answer says what happened."""
        result = self._execute(plan_id)
        self._trace.append(("execute", plan_id, result, self._evidence_revision, self._stop_reason))
        return result

    def _execute(self, plan_id: str) -> ExecuteResult:
        valid_id = isinstance(plan_id, str)
        if valid_id and plan_id in self._completed:  # rule 1, stopped or not
            return ExecuteResult.REPLAYED
        if self._stop_reason is not None:  # rule 2
            return ExecuteResult.STOPPED
        pending = self._pending
        if pending is None or pending.id != plan_id:  # rule 3
            if valid_id and plan_id in self._accepted:
                return ExecuteResult.STALE_PLAN
            return ExecuteResult.UNKNOWN_PLAN
        policy = self.policy
        if self._steps == policy.max_steps:  # rule 4
            self._stop_reason = StopReason.STEP_LIMIT
            return ExecuteResult.STEP_LIMIT
        for key in policy.requirements[pending.step]:  # rule 5
            if self._known.get(key) is not EvidenceState.PASSED:
                return ExecuteResult.PRECONDITION_DENIED
        self._steps += 1  # rule 6
        self._completed.add(plan_id)
        self._pending = None
        if pending.step in policy.terminal_steps:
            self._stop_reason = StopReason.COMPLETED
        return ExecuteResult.EXECUTED

    # ---- charge (host only) ---------------------------------------------------------

    def charge(self, usage: Usage) -> bool:
        """Count a usage against each budget the policy sets; reaching one stops the
        run BudgetExhausted. A malformed usage raises InvalidInput."""
        try:
            result = self._charge(usage)
        except InvalidInput as error:
            self._trace.append(
                ("charge", usage, type(error), self._evidence_revision, self._stop_reason)
            )
            raise
        self._trace.append(("charge", usage, result, self._evidence_revision, self._stop_reason))
        return result

    def _charge(self, usage: Usage) -> bool:
        if type(usage) is not Usage:
            raise InvalidInput(f"usage: expected a Usage, got {type(usage).__name__}")
        for name, amount in zip(usage._fields, usage, strict=True):
            if not _is_int(amount) or amount < 0:
                raise InvalidInput(f"usage.{name}: expected an int >= 0, got {amount!r}")
        if self._stop_reason is not None:
            return False
        policy = self.policy
        if policy.max_tokens:
            self._tokens += usage.tokens
        if policy.max_cost:
            self._cost += usage.cost
        if policy.max_wall_ms:
            self._elapsed_ms += usage.elapsed_ms
        if (
            (policy.max_tokens and self._tokens >= policy.max_tokens)
            or (policy.max_cost and self._cost >= policy.max_cost)
            or (policy.max_wall_ms and self._elapsed_ms >= policy.max_wall_ms)
        ):
            self._stop_reason = StopReason.BUDGET_EXHAUSTED
        return True

    # ---- cancel ------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop an active run with Canceled; a stopped run keeps its reason."""
        if self._stop_reason is None:
            self._stop_reason = StopReason.CANCELED
        self._trace.append(("cancel", None, None, self._evidence_revision, self._stop_reason))

    # ---- the read-only view -------------------------------------------------------------

    @property
    def evidence_revision(self) -> int:
        return self._evidence_revision

    @property
    def plan_revision(self) -> int:
        return self._plan_revision

    @property
    def steps(self) -> int:
        return self._steps

    @property
    def proposals(self) -> int:
        return self._proposals

    @property
    def no_progress(self) -> int:
        return self._no_progress

    @property
    def stop_reason(self) -> StopReason | None:
        return self._stop_reason

    @property
    def pending(self) -> Plan | None:
        return self._pending

    def evidence_state(self, key: str) -> EvidenceState:
        """What is known about ``key`` (never observed reads as Unknown)."""
        return self._known.get(key, EvidenceState.UNKNOWN)

    def snapshot(self) -> dict[str, Any]:
        """The whole observable state except the trace, in the same JSON-ready shape as
        ``controller.Controller.snapshot()`` so the two can be compared in lockstep.
        ``state`` is what the run is doing: its stop reason, else ``pending`` or
        ``idle``."""
        pending = self._pending
        stop = self._stop_reason
        if stop is not None:
            state = str(stop)
        elif pending is not None:
            state = "pending"
        else:
            state = "idle"
        return {
            "state": state,
            "stop_reason": None if stop is None else str(stop),
            "evidence_revision": self._evidence_revision,
            "plan_revision": self._plan_revision,
            "steps": self._steps,
            "proposals": self._proposals,
            "no_progress": self._no_progress,
            "tokens": self._tokens,
            "cost": self._cost,
            "elapsed_ms": self._elapsed_ms,
            "pending": None if pending is None else _plain(pending),
            "evidence": {
                key: {"version": version, "state": str(self.evidence_state(key))}
                for key, version in sorted(self._latest_version.items())
            },
            "contents": [
                [key, version, str(state), source]
                for (key, version), (state, source) in sorted(self._contents.items())
            ],
            "accepted": sorted(self._accepted),
            "completed": sorted(self._completed),
        }

    @property
    def trace(self) -> list[dict[str, Any]]:
        """One JSON-ready record per call, rejections and raised errors included."""
        return [
            {
                "seq": sequence,
                "op": op,
                "args": {} if op == "cancel" else {_ARGUMENT_NAME[op]: _plain(argument)},
                "result": _plain(result),
                "evidence_revision": revision,
                "stop_reason": None if stop is None else str(stop),
            }
            for sequence, (op, argument, result, revision, stop) in enumerate(self._trace, start=1)
        ]
