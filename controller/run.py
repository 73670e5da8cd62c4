"""The data of one run, and the meaning of every guard and action the declaration names.

Owns: the run's fields (CONTRACT.md "State of one run"), the input validation that
happens before any transition is chosen, the bodies of the named guards and actions,
the read-only public view (properties, ``evidence_state(key)``, ``snapshot()``,
``trace``).

Leaves to others: *which* transition fires for which state and event. That dispatch
is declared in ``spec/declaration.py`` and is either generated
(``controller/_generated.py``) or run by python-statemachine
(``spec/reference.py``); both run the bodies below (the generator copies them into
its dispatch, the reference calls them), so the two can only differ in dispatch,
which is exactly what the campaign compares.

Guards are predicates with no side effects. A guard whose body is a single
``return <expression>`` is inlined by the generator (the expression is copied into
the generated dispatch, with a comment naming the guard), so keep them that way.
Actions return the answer of the event. An action (or the input check) written as
plain statements ending in at most one ``return`` is copied too; one with an early
``return``, a loop or a nested scope is called instead (``spec/generator.py``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

import replan.controller.records as _records_module
from replan.controller.fields import FIELDS, SLOTS, RunState, export_state, import_state, snapshot
from replan.controller.fields import state_of_snapshot as state_of_snapshot
from replan.controller.policy import DEFAULT_POLICY, Policy
from replan.controller.records import LARGEST_INT as LARGEST_INT  # the checks' bound
from replan.controller.records import (
    RECORD_KINDS,
    Approval,
    EvidenceState,
    ExecuteResult,
    InvalidInput,
    Observation,
    ObservationConflict,
    Plan,
    StopReason,
    Usage,
    plan_digest,
)
from replan.controller.records import in_bounds as in_bounds

PASSED = EvidenceState.PASSED
UNKNOWN = EvidenceState.UNKNOWN

#: Where every run starts: the declaration's initial state.
INITIAL_STATE = next(f.initial for f in FIELDS if f.attribute == "_declared_state")

# A trace entry as stored: (operation, argument, result or error class, evidence
# revision after, declared state after, index of the fired transition or None when a
# final state absorbed the call or the input check refused it). It becomes a
# JSON-ready dict only when read, so tracing costs one tuple per call on the hot path.
TraceEntry = tuple[str, Any, Any, int, Any, int | None]


def shown(value: object) -> str:
    """``repr(value)`` for an error message, bounded and never raising: a hostile
    ``__repr__`` or an integer too long to print must not replace the error."""
    try:
        text = repr(value)
    except Exception:
        return f"<{type(value).__name__} object>"
    return text if len(text) <= 80 else f"{text[:77]}..."


def well_formed_plan(plan: object) -> bool:
    """A ``Plan`` whose fields have exactly the contract's types: a subclass (a bool
    for an int, a str subclass with its own ``__eq__``) is malformed, so nothing a
    model sends can compare equal to what it is not. Its revisions are within
    ``LARGEST_INT`` either way: a run stores the revision it accepts, and its snapshot,
    trace and log must write it as JSON, exactly."""
    return (
        type(plan) is Plan
        and type(plan.id) is str
        and plan.id != ""
        and type(plan.revision) is int
        and in_bounds(plan.revision)
        and type(plan.evidence_revision) is int
        and in_bounds(plan.evidence_revision)
        and type(plan.step) is str
        and type(plan.resource) is str
    )


#: The records an argument can be (rendered field by field in the trace).
_RECORDS = tuple(getattr(_records_module, name) for name in RECORD_KINDS)
#: An int with more bits than this is shown by its size: past ~4,300 digits Python
#: refuses to print it, so ``json.dumps`` of the trace would raise.
_LARGEST_SHOWN_BITS = 13_000


def jsonable(value: object) -> Any:
    """A JSON-ready rendering of an argument or result (records as objects, anything
    unexpected as its bounded ``repr``, so that a malformed input is still explained).
    Never raises, and never calls a method a hostile subclass could override: the
    trace must stay JSON whatever the model sent."""
    try:
        return _jsonable(value)
    except Exception:  # a __class__ that raises, say: name it by its real type
        return f"<{type(value).__name__} object>"


def _jsonable(value: object) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, StopReason | EvidenceState | ExecuteResult):
        return str.__str__(value)
    if isinstance(value, int):
        bits = int.bit_length(value)
        return int.__add__(value, 0) if bits <= _LARGEST_SHOWN_BITS else f"<int of {bits} bits>"
    if isinstance(value, float):
        exact = float.__float__(value)
        return exact if math.isfinite(exact) else float.__repr__(exact)
    if isinstance(value, str):
        return str.__str__(value)
    if type(value) in _RECORDS:
        names: tuple[str, ...] = getattr(type(value), "_fields")  # noqa: B009
        items: tuple[Any, ...] = tuple(tuple.__iter__(value))  # type: ignore[arg-type]
        return {name: _jsonable(item) for name, item in zip(names, items, strict=True)}
    if isinstance(value, type) and issubclass(value, BaseException):
        return {"error": value.__name__}
    return shown(value)


class Run:
    """One run's remembered state plus the named guards and actions over it."""

    __slots__ = (*SLOTS, "policy")

    # The fields' types, for mypy (``controller/fields.py`` declares the fields; a test
    # checks these name exactly its attributes).
    _declared_state: str  # the declared state's value, or the StopReason of a final one
    _evidence_revision: int
    _plan_revision: int
    _steps: int
    _proposals: int
    _no_progress: int
    _tokens: int  # charged so far, counted only under a max_tokens (likewise below)
    _cost: int
    _elapsed_ms: int
    _pending: Plan | None
    _latest_version: dict[str, int]
    _known: dict[str, EvidenceState]  # key -> state of its latest record (absent: Unknown)
    _contents: dict[tuple[str, int], tuple[EvidenceState, str]]  # every content remembered
    _accepted: set[str]
    _completed: set[str]
    _passed: set[str]  # keys whose latest state is Passed: the commit gate is one set test
    _trace: list[TraceEntry]

    #: Labels of the declared transitions, by index (set by each implementation from
    #: the declaration; the trace names the transition that fired with it).
    transitions: tuple[str, ...] = ()
    #: Every event: (parameter, parameter type, caller), from the declaration's
    #: interface (set by each implementation; the trace names arguments with it).
    events: ClassVar[Mapping[str, tuple[str | None, str | None, str]]] = MappingProxyType({})

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = DEFAULT_POLICY if policy is None else policy
        for field in FIELDS:
            setattr(self, field.attribute, field.fresh())

    # ---- input validation (before any transition is chosen) -----------------------

    def check_observation(self, obs: object) -> None:
        """Raise ``InvalidInput`` naming the field, for a malformed observation
        (CONTRACT observe rule 1: a host bug, loud, whether or not the run stopped).
        Exact types only: a subclass of ``str`` or ``int`` is malformed."""
        if type(obs) is not Observation:
            raise InvalidInput(f"observation: expected an Observation, got {type(obs).__name__}")
        key, version, state, source = obs
        if type(key) is not str or key not in self.policy.key_set:
            raise InvalidInput(
                f"observation.key: {shown(key)} is not a declared evidence key "
                f"(declared: {', '.join(self.policy.keys) or 'none'})"
            )
        if type(version) is not int or version < 1 or not in_bounds(obs.version):
            raise InvalidInput(
                f"observation.version: expected an int in 1..{LARGEST_INT}, got {shown(version)}"
            )
        if type(state) is not EvidenceState:
            raise InvalidInput(f"observation.state: expected an EvidenceState, got {shown(state)}")
        if type(source) is not str or source == "":
            raise InvalidInput(
                f"observation.source: expected a non-empty string, got {shown(source)}"
            )

    def check_approval(self, approval: object) -> None:
        """Raise ``InvalidInput`` naming the field, for a malformed approval (a host
        bug, like a malformed observation). Exact types only."""
        if type(approval) is not Approval:
            raise InvalidInput(f"approval: expected an Approval, got {type(approval).__name__}")
        plan_id, digest = approval
        if type(plan_id) is not str or plan_id == "":
            raise InvalidInput(
                f"approval.plan_id: expected a non-empty string, got {shown(plan_id)}"
            )
        if type(digest) is not str or digest == "":
            raise InvalidInput(f"approval.digest: expected a non-empty string, got {shown(digest)}")

    def check_usage(self, usage: object) -> None:
        """Raise ``InvalidInput`` naming the field, for a malformed usage (a host bug:
        the host turns what a provider reported into a ``Usage``, so whatever a model
        or provider says never reaches here malformed). Exact types only."""
        if type(usage) is not Usage:
            raise InvalidInput(f"usage: expected a Usage, got {type(usage).__name__}")
        tokens, cost, elapsed_ms = usage
        if type(tokens) is not int or tokens < 0 or not in_bounds(usage.tokens):
            raise InvalidInput(
                f"usage.tokens: expected an int in 0..{LARGEST_INT}, got {shown(tokens)}"
            )
        if type(cost) is not int or cost < 0 or not in_bounds(usage.cost):
            raise InvalidInput(
                f"usage.cost: expected an int in 0..{LARGEST_INT}, got {shown(cost)}"
            )
        if type(elapsed_ms) is not int or elapsed_ms < 0 or not in_bounds(usage.elapsed_ms):
            raise InvalidInput(
                f"usage.elapsed_ms: expected an int in 0..{LARGEST_INT}, got {shown(elapsed_ms)}"
            )

    # ---- guards: observe ----------------------------------------------------------

    def duplicate_delivery(self, obs: Observation) -> bool:
        """This (key, version) was seen before with the same content."""
        return self._contents.get((obs.key, obs.version)) == (obs.state, obs.source)

    def conflicting_content(self, obs: Observation) -> bool:
        """This (key, version) was seen before with other content."""
        return (obs.key, obs.version) in self._contents and not self.duplicate_delivery(obs)

    def older_than_latest(self, obs: Observation) -> bool:
        """A newer version of this key is already recorded."""
        return self._latest_version.get(obs.key, 0) > obs.version

    def changes_state(self, obs: Observation) -> bool:
        """The observation's state differs from the key's current state."""
        return obs.state != self._known.get(obs.key, UNKNOWN)

    def counts_duplicates(self) -> bool:
        """The policy counts duplicate deliveries as no progress."""
        return self.policy.count_duplicate_deliveries

    def exhausts_no_progress(self) -> bool:
        """Counting one more call without progress reaches ``no_progress_limit``."""
        return self._no_progress + 1 >= self.policy.no_progress_limit

    # ---- guards: propose ----------------------------------------------------------

    def proposals_exhausted(self) -> bool:
        """Every proposal slot of the run is used."""
        return self._proposals >= self.policy.max_proposals

    def plan_malformed(self, plan: Plan) -> bool:
        """Not a Plan with the contract's field types."""
        return not well_formed_plan(plan)

    def plan_outdated(self, plan: Plan) -> bool:
        """The plan's revision does not exceed the last accepted plan revision."""
        return plan.revision <= self._plan_revision

    def evidence_stale(self, plan: Plan) -> bool:
        """The plan cites an evidence revision other than the current one."""
        return plan.evidence_revision != self._evidence_revision

    def resource_not_allowed(self, plan: Plan) -> bool:
        """The plan's resource is not one the policy allows."""
        return plan.resource not in self.policy.resource_set

    def step_unknown(self, plan: Plan) -> bool:
        """The plan names a step the policy does not declare."""
        return plan.step not in self.policy.requirements

    def plan_completed(self, plan: Plan) -> bool:
        """A plan with this id was already executed."""
        return plan.id in self._completed

    # ---- guards: execute ----------------------------------------------------------

    def id_completed(self, plan_id: str) -> bool:
        """This id was executed earlier (its execution is a replay)."""
        return type(plan_id) is str and plan_id in self._completed

    def is_pending_id(self, plan_id: str) -> bool:
        """This id names the pending plan."""
        return type(plan_id) is str and self._pending is not None and self._pending.id == plan_id

    def was_accepted(self, plan_id: str) -> bool:
        """This id was accepted once (and has since been invalidated or superseded)."""
        return type(plan_id) is str and plan_id in self._accepted

    def steps_exhausted(self) -> bool:
        """Every step of the run's budget is used."""
        return self._steps >= self.policy.max_steps

    def prerequisites_passed(self) -> bool:
        """Every key the pending plan's step requires is currently Passed: a
        per-resource key, of the resource the plan names."""
        return self._passed.issuperset(
            self.policy.requirements[self._pending.step]  # type: ignore[union-attr]
        ) and self._passed.issuperset(
            self.policy.resource_requirements[self._pending.step][self._pending.resource]  # type: ignore[union-attr]
        )

    def completes_run(self) -> bool:
        """The pending plan's step ends the run when executed."""
        return self._pending.step in self.policy.terminal_steps  # type: ignore[union-attr]

    def needs_approval(self) -> bool:
        """The pending plan's step runs only once a person approves the plan."""
        return self._pending.step in self.policy.approval_steps  # type: ignore[union-attr]

    # ---- guards: approve ----------------------------------------------------------

    def approval_matches(self, approval: Approval) -> bool:
        """The approval names the waiting plan and the digest of its exact content."""
        pending = self._pending
        return (
            pending is not None
            and approval.plan_id == pending.id
            and approval.digest == plan_digest(pending)
        )

    # ---- guards: charge -----------------------------------------------------------

    def sets_a_budget(self) -> bool:
        """The policy sets a budget (without one, no charge can stop the run)."""
        return self.policy.max_tokens > 0 or self.policy.max_cost > 0 or self.policy.max_wall_ms > 0

    def exhausts_budget(self, usage: Usage) -> bool:
        """Adding ``usage`` reaches a budget the policy sets (0: no limit)."""
        policy = self.policy
        return (
            0 < policy.max_tokens <= self._tokens + usage.tokens
            or 0 < policy.max_cost <= self._cost + usage.cost
            or 0 < policy.max_wall_ms <= self._elapsed_ms + usage.elapsed_ms
        )

    # ---- actions: each returns the event's answer -----------------------------------

    def count_no_progress(self) -> bool:
        """A call that taught nothing: count it."""
        self._no_progress += 1
        return False

    def ignore_duplicate(self) -> bool:
        """A duplicate delivery the policy does not count."""
        return False

    def refuse_conflict(self, obs: Observation) -> bool:
        """Other content under a seen (key, version): raise, change nothing."""
        raise ObservationConflict(
            f"observation ({obs.key!r}, version {obs.version}): content "
            f"{(str(obs.state), obs.source)} conflicts with the recorded "
            f"{tuple(str(x) for x in self._contents[(obs.key, obs.version)])}"
        )

    def remember_older(self, obs: Observation) -> bool:
        """Remember an older version's content (for conflict detection); it never
        overwrites the newer record, and it is no progress."""
        self._contents[(obs.key, obs.version)] = (obs.state, obs.source)
        self._no_progress += 1
        return False

    def record_meaningful(self, obs: Observation) -> bool:
        """A changed state: new evidence revision, the pending plan invalidated."""
        key = obs.key
        state = obs.state
        self._contents[(key, obs.version)] = (state, obs.source)
        self._latest_version[key] = obs.version
        self._known[key] = state
        if state is PASSED:
            self._passed.add(key)
        else:
            self._passed.discard(key)
        self._evidence_revision += 1
        self._pending = None
        self._no_progress = 0
        return True

    def record_renumbered(self, obs: Observation) -> bool:
        """The same state under a higher version: recorded, but no progress."""
        self._contents[(obs.key, obs.version)] = (obs.state, obs.source)
        self._latest_version[obs.key] = obs.version
        self._no_progress += 1
        return False

    def refuse_plan(self) -> bool:
        """Refused without using a slot (the budget is spent)."""
        return False

    def reject_plan(self) -> bool:
        """Refused, and the proposal used its slot."""
        self._proposals += 1
        return False

    def accept_plan(self, plan: Plan) -> bool:
        """The plan becomes pending (superseding any other); it used its slot."""
        self._proposals += 1
        self._pending = plan
        self._plan_revision = plan.revision
        self._accepted.add(plan.id)
        return True

    def answer_replayed(self) -> ExecuteResult:
        """A completed id again: the recorded outcome, no new work."""
        return ExecuteResult.REPLAYED

    def answer_stale(self) -> ExecuteResult:
        """An id that was accepted once but is pending no longer."""
        return ExecuteResult.STALE_PLAN

    def answer_unknown(self) -> ExecuteResult:
        """An id never accepted."""
        return ExecuteResult.UNKNOWN_PLAN

    def answer_step_limit(self) -> ExecuteResult:
        """The step budget is spent (the target state stops the run)."""
        return ExecuteResult.STEP_LIMIT

    def deny_precondition(self) -> ExecuteResult:
        """A required key is not Passed: the plan stays pending."""
        return ExecuteResult.PRECONDITION_DENIED

    def execute_step(self, plan_id: str) -> ExecuteResult:
        """The step happens: counted, its id completed, nothing pending."""
        self._steps += 1
        self._completed.add(plan_id)
        self._pending = None
        return ExecuteResult.EXECUTED

    def await_approval(self) -> ExecuteResult:
        """The step needs a person's approval first: nothing runs, no step is used,
        the plan stays pending until it is approved (or invalidated)."""
        return ExecuteResult.AWAITING_APPROVAL

    def accept_approval(self) -> bool:
        """The waiting plan is approved: its next execution runs it."""
        return True

    def refuse_approval(self) -> bool:
        """An approval of no waiting plan, or of another plan or content: refused,
        nothing changes."""
        return False

    def record_charge(self, usage: Usage) -> bool:
        """Count the usage against each budget the policy sets (a dimension without a
        limit is not counted: the host's own telemetry has it, and the run's state
        stays finite for the explorer)."""
        if self.policy.max_tokens > 0:
            self._tokens += usage.tokens
        if self.policy.max_cost > 0:
            self._cost += usage.cost
        if self.policy.max_wall_ms > 0:
            self._elapsed_ms += usage.elapsed_ms
        return True

    def cancel_run(self) -> None:
        """The caller stops the run (the target state holds the reason)."""

    # ---- answers of a stopped run (final states admit no transition) ---------------

    def refuse_stopped(self) -> bool:
        """Observe or propose on a stopped run: nothing changes, nothing is consumed."""
        return False

    def answer_stopped(self, plan_id: str) -> ExecuteResult:
        """Execute on a stopped run: a completed id still replays; anything else is
        answered Stopped."""
        return ExecuteResult.REPLAYED if self.id_completed(plan_id) else ExecuteResult.STOPPED

    # ---- the read-only public view ---------------------------------------------------

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
    def tokens(self) -> int:
        """Tokens charged so far (counted only under a ``max_tokens``)."""
        return self._tokens

    @property
    def cost(self) -> int:
        """Cost charged so far, in micro-units (counted only under a ``max_cost``)."""
        return self._cost

    @property
    def elapsed_ms(self) -> int:
        """Milliseconds charged so far (counted only under a ``max_wall_ms``)."""
        return self._elapsed_ms

    @property
    def stop_reason(self) -> StopReason | None:
        current = self._declared_state
        return current if isinstance(current, StopReason) else None

    @property
    def pending(self) -> Plan | None:
        return self._pending

    @property
    def declared_state(self) -> str:
        """The declaration's state the run is in (``idle``, ``pending`` or the stop
        reason of a final state)."""
        return str(self._declared_state)

    def evidence_state(self, key: str) -> EvidenceState:
        """What is known about ``key`` (never observed reads as Unknown)."""
        return self._known.get(key, UNKNOWN)

    def state(self, key: str) -> EvidenceState:
        """Deprecated: ``evidence_state(key)``. The name read as the machine's state,
        which is ``declared_state``; kept for one release, and it says so."""
        warnings.warn(
            "Run.state(key) is deprecated: use evidence_state(key) (the machine's own "
            "state is declared_state)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.evidence_state(key)

    def snapshot(self) -> dict[str, Any]:
        """The whole observable state except the trace: JSON-ready, canonical (equal
        for equal states), the identity of a state for the explorer."""
        return snapshot(self)

    # ---- the state as one hashable value (the explorer's fast copy and restore) -----

    def _export_state(self) -> RunState:
        """The run's state as a hashable tuple (``controller.fields.export_state``):
        equal tuples <=> equal snapshots; the trace is not part of it. The explorer
        uses it as a state's identity."""
        return export_state(self)

    def _import_state(self, state: RunState) -> None:
        """Put this run in ``state`` (a value of ``_export_state``, or one built from a
        snapshot); fresh containers, the trace untouched."""
        import_state(self, state)

    @property
    def trace(self) -> list[dict[str, Any]]:
        """One JSON-ready record per call, rejections and raised errors included; each
        names the digest of the policy the run is under (``policy``), so a trace
        written to a file is checked (``replan conform``) and played (``replan
        review --trace``) under the rules it ran under, never another policy's."""
        digest = self.policy.digest
        records = []
        for sequence, (op, argument, result, revision, declared, fired) in enumerate(
            self._trace, start=1
        ):
            parameter = self.events.get(op, (None, None, ""))[0]
            records.append(
                {
                    "seq": sequence,
                    "op": op,
                    "args": {} if parameter is None else {parameter: jsonable(argument)},
                    "result": jsonable(result),
                    "evidence_revision": revision,
                    "stop_reason": str(declared) if isinstance(declared, StopReason) else None,
                    "transition": _transition_name(self.transitions, op, declared, fired, result),
                    "policy": digest,
                }
            )
        return records


def _transition_name(
    labels: tuple[str, ...], op: str, declared: object, fired: int | None, result: object
) -> str | None:
    if fired is not None:
        return labels[fired]
    if isinstance(result, type):  # the input check refused it before any transition
        return None
    if isinstance(declared, StopReason):
        return f"{declared} absorbs {op}"
    return None
