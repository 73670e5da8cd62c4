"""The model-based campaign: Hypothesis drives an implementation and the reference
model in lockstep through interleavings of observe, propose, execute, cancel and
replay, checking every named invariant after every operation.

Owns: the ``RuleBasedStateMachine`` (``build_machine``: one class per policy and
implementation), the input strategies, the profiles (budgets), running Hypothesis
programmatically with a seed and an example database (``run_campaign``), turning the
shrunk failure into a ``harness.Finding`` with its JSON and pytest files, and the
``CampaignResult`` that ``replan campaign`` prints and ``replan verify`` consumes.

Leaves to others: what an operation, a failure and a counterexample are
(``verification.core.harness``), what the properties say (``spec.properties``), what the
coverage targets are (``verification.core.coverage``, from the declaration).

How inputs are drawn (why): a real run stresses the controller with inputs *near*
the current state, so every rule builds its input relative to the last snapshot:
the current evidence and plan revisions and their neighbours, versions just below,
at and above a key's latest, redeliveries of recorded contents (identical or
conflicting), plan ids that were completed, invalidated or never seen (a
``Bundle``), plus unknown keys, steps and resources and malformed records. There is
one rule per *kind* of input, so Hypothesis' built-in swarm testing (it switches
rules off per example) yields runs that, say, only propose and execute, or never
cancel. Two rules act in bursts because the deep targets need runs of a certain
shape: ``advance`` (1-8 operations of a cooperative model: propose a runnable step,
execute it) reaches step limits and ``Completed`` after replans, and
``observe_no_progress`` (1-3 observations that teach nothing) reaches the
no-progress limit from either active state. ``target()`` was tried for depth and
dropped: it spent the budget deepening a few runs and cost breadth elsewhere.
Choices shrink toward the first option, and Hypothesis draws the first option more
often, so the first option of every choice is the common, valid case.

One example drives several runs: once a run has stopped and absorbed
``ABSORBED_CALLS`` further calls (which checks ``stop-absorbing`` with whatever came
next), the machine starts a fresh run. A counterexample is always the operations of
one run from its start, so it replays on a fresh controller.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NoReturn

from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    multiple,
    precondition,
    rule,
)

from replan.controller.policy import DEFAULT_POLICY, Policy
from replan.controller.records import EvidenceState, Observation, Plan
from replan.spec import inputs
from replan.spec.contract import Contract
from replan.spec.reference import ReferenceController
from replan.verification.core.coverage import declared_model, targets_for
from replan.verification.core.domains import PARAMETER_TYPES
from replan.verification.core.harness import (
    Implementation,
    Operation,
    appended_since,
    apply,
    result_text,
    run_view,
    same_outcome,
    trace_length,
)
from replan.verification.engines.campaign.recorder import (  # noqa: F401  (re-exported)
    Progress,
    PropertyFailure,
    Recorder,
    program,
    readable,
)

Factory = Callable[[Policy], Implementation]

#: The implementation tested when none is named: the generated controller.
#: Where a failure's JSON and pytest file go when no directory is named (out/ is in
#: the repository's .gitignore; nothing is written into the repository uninvited).
DEFAULT_OUT_DIR = Path("out") / "campaign"
#: Hypothesis' example database (a failure found once is retried first next time):
#: with the output, in Hypothesis' own directory there (``hypothesis_home``).
DEFAULT_DATABASE = DEFAULT_OUT_DIR / ".hypothesis" / "examples"
#: Calls a stopped run absorbs (each checked) before the machine starts a fresh run.
ABSORBED_CALLS = 3
#: Labels of the two ways a run can fail that are not invariants.
DIVERGENCE = "divergence"

SOURCES = ("ci", "owner")
#: The events the rules below spell out, each with arguments chosen near the state.
RULED_EVENTS = frozenset({"observe", "propose", "execute", "cancel"})
#: Every other declared event: each gets a rule of its own in every machine
#: (``build_machine``), its argument drawn from what ``spec.inputs`` says it can be in
#: the state, so a new event is sampled as often as a ruled one, with no edit here.
DERIVED_EVENTS = tuple(e for e in PARAMETER_TYPES if e not in RULED_EVENTS)
STATES = (EvidenceState.PASSED, EvidenceState.FAILED, EvidenceState.UNKNOWN)
#: size -> the strategy of an index into that many options (``CampaignMachine._index``)
_INDEXES: dict[int, st.SearchStrategy[int]] = {}


@dataclass(frozen=True)
class Profile:
    """A budget: Hypothesis examples, and operations (steps) per example."""

    name: str
    examples: int
    steps: int
    description: str


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("ci", 200, 60, "the test suite and CI: full coverage on the default policy"),
        Profile("default", 600, 80, "a local check after a change"),
        Profile("thorough", 3000, 100, "before a release"),
    )
}


# ---- the machine ----------------------------------------------------------------------


def ill_typed(record: Callable[..., Any], *fields: Any) -> Any:
    """A record built with fields of the wrong type, on purpose (malformed input)."""
    return record(*fields)


def _other(options: Sequence[str], taken: Sequence[str], stem: str) -> str:
    """A name not in ``taken`` (an unknown key, step or resource for this policy)."""
    candidate, number = stem, 1
    while candidate in taken or candidate in options:
        number += 1
        candidate = f"{stem}-{number}"
    return candidate


class CampaignMachine(RuleBasedStateMachine):
    """Lockstep: every operation a rule makes is applied to the implementation and
    to the reference; after it, same outcome, equal snapshots, every invariant holds.

    Subclasses (``build_machine``) fix the policy, the implementation and the
    recorder; the rules below read only those and the last snapshot."""

    policy: ClassVar[Policy] = DEFAULT_POLICY
    implementation: ClassVar[Any]  # a Factory: called with the policy, one run
    reference: ClassVar[Any] = ReferenceController  # None: no lockstep
    recorder: ClassVar[Recorder]
    contract: ClassVar[Contract]
    unknown_key: ClassVar[str] = "unknown-key"
    unknown_step: ClassVar[str] = "unknown-step"
    disallowed_resource: ClassVar[str] = "resource-not-allowed"
    commit_first: ClassVar[tuple[str, ...]] = ()  # step names, run-completing first

    #: declared state id -> event -> the live transitions it can fire there
    leaving: ClassVar[dict[str, dict[str, tuple[str, ...]]]] = {}
    #: a snapshot's ``state`` (a state's value) -> the declared state's id
    state_ids: ClassVar[dict[str, str]] = {}
    #: operations every example starts with (an explorer witness: ``seed_missed``)
    prefix: ClassVar[tuple[Operation, ...]] = ()
    #: (reference factory, policy, its instance) reset for every run (``_fresh_twin``)
    _twin: ClassVar[tuple[Any, Policy, ReferenceController] | None] = None

    plan_ids = Bundle("plan_ids")

    def __init__(self) -> None:
        super().__init__()
        self.recorder.example_started()
        self._fresh = 0
        #: (declared state, event) pairs ``untried`` has drawn in this example
        self.tried: set[tuple[str, str]] = set()
        self._new_run()
        for operation in self.prefix:
            self._do(operation.op, operation.argument)

    # ---- running one operation on both, and checking it ---------------------------------

    def _new_run(self) -> None:
        self.subject = self.implementation(self.policy)
        # None: the properties alone judge the run (``replan mutate`` does this for a
        # changed declaration, which the reference model could not follow)
        self.twin = self._fresh_twin()
        self.operations: list[Operation] = []
        self.results: list[Any] = []
        #: per call: (canonical snapshot before, op, outcome, stop reason it caused);
        #: joined with the trace's transition labels when the run ends (``_tally``).
        self.calls: list[tuple[str, str, Any, str | None]] = []
        self.absorbed = 0
        self.last: dict[str, Any] = self.subject.snapshot()
        self.view = run_view(self.subject)  # what the properties read as "before"
        self.last_key = (
            self.recorder.visited.state(self.last) if self.recorder.collect_visited else b""
        )
        self.recorder.runs += 1
        checker = self.contract.checker
        broken = checker.initial(self.view, self.policy) + checker.state(self.view)
        if broken:
            self._fail(broken[0], f"a fresh run breaks {', '.join(broken)}")
        if self.twin is not None and self.last != self.twin.snapshot():
            self._fail(DIVERGENCE, "a fresh run's snapshot differs from the reference model's")

    def _fresh_twin(self) -> Any:
        """The reference model for a new run: this machine class's one
        ``ReferenceController``, ``reset`` (building one costs more than a whole run
        of operations: ``spec.reference``), or a new instance of any other reference.
        Only one run is live at a time in an engine, and a class is built per engine
        (``build_machine``), so its instance is never shared by two live runs."""
        factory = self.reference
        if factory is None:
            return None
        machine = type(self)
        kept = machine._twin
        if kept is not None and kept[0] is factory and kept[1] is self.policy:
            kept[2].reset()
            return kept[2]
        twin = factory(self.policy)
        if isinstance(twin, ReferenceController):
            machine._twin = (factory, self.policy, twin)
        return twin

    def _tally(self) -> None:
        """Count what the run's calls fired, by the transition label each trace record
        names (the implementation's trace; the reference's if it keeps none). Done
        once per run: reading a trace renders all of it."""
        labels: list[str | None] = []
        for implementation in (
            (self.subject, self.twin) if self.twin is not None else (self.subject,)
        ):
            trace = getattr(implementation, "trace", None)
            if isinstance(trace, list) and len(trace) >= len(self.calls):
                labels = [record.get("transition") for record in trace[: len(self.calls)]]
                break
        labels += [None] * (len(self.calls) - len(labels))
        recorder = self.recorder
        for (before_key, op, result, stopped_now), label in zip(self.calls, labels, strict=True):
            recorder.coverage.record(label, op, result, stopped_now)
            if recorder.collect_visited and label is not None and " absorbs " not in label:
                recorder.visited.transition(before_key, label)
        self.calls = []

    def teardown(self) -> None:
        self._tally()

    def _fail(self, property_name: str, detail: str) -> NoReturn:
        self.recorder.failures += 1
        if self.recorder.first_failure_at is None:
            self.recorder.first_failure_at = self.recorder.examples
        raise PropertyFailure(property_name, detail, self.operations, self.results)

    def _do(self, op: str, argument: Any = None) -> Any:
        operation = Operation(op, argument)
        before = self.last
        mark = trace_length(self.subject)
        result = apply(self.subject, operation)
        after = self.subject.snapshot()
        view = run_view(self.subject)
        self.operations.append(operation)
        self.results.append(result)
        recorder = self.recorder
        recorder.operations += 1
        stopped_now = after["stop_reason"] if before["stop_reason"] is None else None
        self.calls.append((self.last_key, op, result, stopped_now))
        if recorder.collect_visited:
            self.last_key = recorder.visited.state(after)
        recorder.properties_checked += 1
        broken = self.contract.checker.call(
            op, self.view, argument, result, view, appended_since(self.subject, mark)
        ) + self.contract.checker.state(view)
        self.view = view
        self._remember_entry(after)
        if broken:
            self._fail(
                broken[0], f"{operation} -> {result_text(result)} breaks {', '.join(broken)}"
            )
        if self.twin is not None:
            self._lockstep(operation, result, after)
        self.last = after
        if before["stop_reason"] is not None:
            self.absorbed += 1
            if self.absorbed >= ABSORBED_CALLS:
                self._tally()
                self._new_run()
        return result

    def _remember_entry(self, after: dict[str, Any]) -> None:
        """Keep the shortest run into this declared state for each kind of history it
        can have (how many plans were accepted and completed, whether the proposal
        slots or the no-progress budget are nearly spent): a revisit of a rare state
        then starts from each, and reaches what needs that history there."""
        policy = self.policy
        kind = (
            min(len(after["accepted"]), 2),
            min(len(after["completed"]), 1),
            after["proposals"] >= policy.max_proposals - 1,
            after["no_progress"] >= policy.no_progress_limit - 1,
        )
        kinds = self.recorder.entered.setdefault(self._declared_state_of(after), {})
        known = kinds.get(kind)
        if known is None or len(self.operations) < len(known):
            kinds[kind] = tuple(self.operations)

    def _lockstep(self, operation: Operation, result: Any, after: dict[str, Any]) -> None:
        expected = apply(self.twin, operation)
        if not same_outcome(result, expected):
            self._fail(
                DIVERGENCE,
                f"{operation}: implementation answered {result_text(result)}, "
                f"the reference model {result_text(expected)}",
            )
        reference_after = self.twin.snapshot()
        if after != reference_after:
            differing = sorted(k for k in after if after[k] != reference_after.get(k))
            self._fail(
                DIVERGENCE,
                f"{operation}: same answer but the snapshots differ in {', '.join(differing)}",
            )

    # ---- drawing relative to the current state -----------------------------------------

    def _index(self, data: st.DataObject, size: int) -> int:
        """An index into ``size`` options, drawn through the test case's own
        ``ConjectureData``: the same choice and the same span as ``data.draw`` makes,
        so the same examples and the same shrinking, without what ``DataObject.draw``
        adds around each draw for a run the campaign never makes (the explain phase's
        argument comments, a printed line per draw, a check that the strategy left
        the global random state alone: together more than the draw itself, and the
        rules draw two to four times per operation). ``conjecture_data`` is the
        semi-stable attribute Hypothesis keeps for this; pyproject.toml pins it."""
        strategy = _INDEXES.get(size)
        if strategy is None:
            strategy = _INDEXES[size] = st.integers(0, size - 1)
        return data.conjecture_data.draw(strategy)

    def _pick(self, data: st.DataObject, options: Sequence[Any]) -> Any:
        """One of ``options``; shrinks toward the first."""
        return options[self._index(data, len(options))] if len(options) > 1 else options[0]

    def _latest(self, key: str) -> int:
        entry = self.last["evidence"].get(key)
        return 0 if entry is None else int(entry["version"])

    def _state(self, key: str) -> EvidenceState:
        entry = self.last["evidence"].get(key)
        return EvidenceState.UNKNOWN if entry is None else EvidenceState(entry["state"])

    def _fresh_id(self) -> str:
        self._fresh += 1
        return f"p{self._fresh}"

    def _older_gaps(self) -> list[tuple[str, int]]:
        seen = {(k, v) for k, v, _, _ in self.last["contents"]}
        return [
            (key, version)
            for key in self.policy.keys
            for version in range(1, self._latest(key))
            if (key, version) not in seen
        ]

    # ---- observe ---------------------------------------------------------------------

    @rule(data=st.data())
    def observe_change(self, data: st.DataObject) -> None:
        """A newer version with another state: meaningful evidence."""
        key = self._pick(data, self.policy.keys)
        state = self._pick(data, [s for s in STATES if s != self._state(key)])
        version = self._latest(key) + self._pick(data, (2, 1, 3))
        self._do("observe", Observation(key, version, state, self._pick(data, SOURCES)))

    @precondition(lambda self: bool(self._not_passed()))
    @rule(data=st.data())
    def observe_pass(self, data: st.DataObject) -> None:
        """Prerequisites that were not Passed now are, all of them or one (the
        evidence a run needs to reach Completed, as its own rule so that swarm
        testing can favour it)."""
        missing = self._not_passed()
        for key in missing if self._pick(data, (True, False)) else missing[:1]:
            if self.last["stop_reason"] is not None:
                break
            version = self._latest(key) + self._pick(data, (2, 1))
            self._do("observe", Observation(key, version, EvidenceState.PASSED, SOURCES[0]))

    def _not_passed(self) -> list[str]:
        policy = self.policy
        required = {key for keys in policy.requirements.values() for key in keys} | {
            key
            for by_resource in policy.resource_requirements.values()
            for keys in by_resource.values()
            for key in keys
        }
        return [
            key
            for key in self.policy.keys
            if key in required and self._state(key) != EvidenceState.PASSED
        ]

    @rule(data=st.data())
    def observe_no_progress(self, data: st.DataObject) -> None:
        """One to three observations that teach nothing, as a stalled evidence source
        sends them: a newer version with the same state (Unknown for a key never
        observed), a version below the key's latest never seen, or an identical
        redelivery. (A burst, so that the no-progress limit is reached in any state.)"""
        for _ in range(self._pick(data, (1, 2, 3))):
            if self.last["stop_reason"] is not None:
                break
            gaps = self._older_gaps()
            how = self._pick(data, ("renumbered", "older", "redelivered"))
            if how == "older" and gaps:
                key, version = self._pick(data, gaps)
                state, source = self._pick(data, STATES), self._pick(data, SOURCES)
            elif how == "redelivered" and self.last["contents"]:
                key, version, state, source = self._pick(data, self.last["contents"])
            else:
                key = self._pick(data, self.policy.keys)
                version = self._latest(key) + self._pick(data, (1, 2))
                state, source = self._state(key), self._pick(data, SOURCES)
            self._do("observe", Observation(key, version, EvidenceState(state), source))

    @precondition(lambda self: bool(self.last["contents"]))
    @rule(data=st.data())
    def observe_redelivery(self, data: st.DataObject) -> None:
        """A recorded (key, version) again: identical, or with other content."""
        key, version, state, source = self._pick(data, self.last["contents"])
        how = self._pick(data, ("identical", "other state", "other source"))
        if how == "other state":
            state = self._pick(data, [s for s in STATES if s != state])
        elif how == "other source":
            source = next(s for s in (*SOURCES, "replayer") if s != source)
        self._do("observe", Observation(key, version, EvidenceState(state), source))

    @rule(data=st.data())
    def observe_near(self, data: st.DataObject) -> None:
        """Any field near the current state: declared or unknown key, version below,
        at or above the latest (or not valid), any state, a source or an empty one;
        now and then a host bug (not an Observation, a field of the wrong type)."""
        if self._pick(data, (False, False, False, True)):
            self._do("observe", self._pick(data, self._malformed_observations()))
            return
        key = self._pick(data, (*self.policy.keys, self.unknown_key))
        latest = self._latest(key) if key in self.policy.key_set else 1
        version = self._pick(data, (latest + 1, latest, latest - 1, 1, 0))
        state = self._pick(data, STATES)
        source = self._pick(data, (*SOURCES, ""))
        self._do("observe", Observation(key, version, state, source))

    def _malformed_observations(self) -> list[Any]:
        key = self.policy.keys[0]
        version = self._latest(key) + 1
        passed = EvidenceState.PASSED
        return [
            None,
            (key, version, "Passed", "ci"),
            *(
                ill_typed(Observation, *fields)
                for fields in (
                    (key, True, passed, "ci"),
                    (key, str(version), passed, "ci"),
                    (key, version, "Passed", "ci"),
                    (key, version, passed, None),
                    (None, version, passed, "ci"),
                )
            ),
        ]

    # ---- propose ---------------------------------------------------------------------

    def _current_plan(self, data: st.DataObject, plan_id: str) -> Plan:
        """A plan the controller should accept. Its step is drawn run-completing
        steps first: a model eager to commit before the evidence is in is the case
        the commit gate exists for."""
        return Plan(
            plan_id,
            self.last["plan_revision"] + self._pick(data, (1, 2)),
            self.last["evidence_revision"],
            self._pick(data, self.commit_first),
            self._pick(data, self.policy.resources),
        )

    @rule(target=plan_ids, data=st.data())
    def propose_current(self, data: st.DataObject) -> str:
        """A plan citing the current revisions, a declared step, an allowed resource
        and a fresh id: accepted on an active run with slots left (superseding a
        pending one)."""
        plan = self._current_plan(data, self._fresh_id())
        self._do("propose", plan)
        return plan.id

    @rule(target=plan_ids, data=st.data())
    def propose_near(self, data: st.DataObject) -> str:
        """A current plan with one or two fields moved to a neighbour: a revision
        -1, +-0 or +1 off, an unknown step, a resource not allowed, an id once
        accepted or completed; or not a well-formed plan at all."""
        last = self.last
        fields: dict[str, Any] = {
            "id": None,  # a fresh one unless an old one is drawn below
            "revision": last["plan_revision"] + 1,
            "evidence_revision": last["evidence_revision"],
            "step": self._pick(data, [s.name for s in self.policy.steps]),
            "resource": self._pick(data, self.policy.resources),
        }
        for _ in range(self._pick(data, (1, 1, 1, 2))):
            how = self._pick(data, ("evidence", "revision", "step", "resource", "id", "malformed"))
            if how == "revision":
                fields["revision"] = last["plan_revision"] + self._pick(data, (0, -1))
            elif how == "evidence":
                fields["evidence_revision"] = last["evidence_revision"] + self._pick(data, (-1, 1))
            elif how == "step":
                fields["step"] = self.unknown_step
            elif how == "resource":
                fields["resource"] = self.disallowed_resource
            elif how == "id" and (last["accepted"] or last["completed"]):
                fields["id"] = self._pick(data, (*last["completed"], *last["accepted"]))
            elif how == "malformed":
                plan_id = fields["id"] or self._fresh_id()
                self._do("propose", self._pick(data, self._malformed_plans(plan_id)))
                return plan_id
        fields["id"] = fields["id"] or self._fresh_id()
        plan = Plan(**fields)
        self._do("propose", plan)
        return plan.id

    def _malformed_plans(self, plan_id: str) -> list[Any]:
        revision = self.last["plan_revision"] + 1
        evidence = self.last["evidence_revision"]
        step = self.policy.steps[0].name
        resource = self.policy.resources[0]
        return [
            None,
            "commit everything",
            *(
                ill_typed(Plan, *fields)
                for fields in (
                    ("", revision, evidence, step, resource),
                    (7, revision, evidence, step, resource),
                    (plan_id, True, evidence, step, resource),
                    (plan_id, float(revision), evidence, step, resource),
                    (plan_id, revision, str(evidence), step, resource),
                    (plan_id, revision, evidence, None, resource),
                    (plan_id, revision, evidence, step, None),
                )
            ),
        ]

    @precondition(lambda self: bool(self.last["completed"]))
    @rule(data=st.data())
    def propose_completed(self, data: st.DataObject) -> None:
        """A current, otherwise valid plan reusing a completed id."""
        self._do("propose", self._current_plan(data, self._pick(data, self.last["completed"])))

    @precondition(lambda self: self.last["pending"] is not None)
    @rule(data=st.data())
    def while_pending(self, data: st.DataObject) -> None:
        """With a plan pending, what must leave it pending: a rejected or
        superseding proposal, or evidence that teaches nothing. (A rule of its own
        because runs spend most operations idle: an accepted plan is soon executed
        or invalidated, yet every rejection has a pending twin to reach.)"""
        kinds: list[Callable[[st.DataObject], Any]] = [
            self.propose_near,
            self.observe_no_progress,
        ]
        if self.last["contents"]:
            kinds.append(self.observe_redelivery)
        if self.last["completed"]:
            kinds.append(self.propose_completed)
        self._pick(data, kinds)(data)

    # ---- execute, replay, cancel ---------------------------------------------------------

    @precondition(lambda self: self.last["pending"] is not None)
    @rule()
    def execute_pending(self) -> None:
        """Execute the pending plan, whether or not its prerequisites are Passed."""
        self._do("execute", self.last["pending"]["id"])

    @rule(target=plan_ids, data=st.data())
    def advance(self, data: st.DataObject) -> Any:
        """Move the run forward as a cooperative model would, for one or several
        operations: execute the pending plan when its prerequisites are Passed,
        otherwise propose a current plan for a step that may run now. (The happy
        path as its own rule, several operations at a time, so that runs get deep:
        that is how step limits and Completed after replans are reached.)"""
        proposed = []
        for _ in range(self._pick(data, (1, 2, 3, 5, 8))):
            if self.last["stop_reason"] is not None:
                break
            pending = self.last["pending"]
            if pending is not None and self._may_run(pending["step"]):
                self._do("execute", pending["id"])
                continue
            # a cooperative planner commits as soon as it may: run-completing steps first
            runnable = [name for name in self.commit_first if self._may_run(name)]
            plan = Plan(
                self._fresh_id(),
                self.last["plan_revision"] + 1,
                self.last["evidence_revision"],
                self._pick(data, runnable or [s.name for s in self.policy.steps]),
                self._pick(data, self.policy.resources),
            )
            self._do("propose", plan)
            proposed.append(plan.id)
        return multiple(*proposed)

    def _may_run(self, step: str) -> bool:
        requires = self.policy.requirements.get(step, ())
        return all(self._state(key) == EvidenceState.PASSED for key in requires)

    @rule(plan_id=plan_ids, data=st.data())
    def execute_id(self, plan_id: str, data: st.DataObject) -> None:
        """Execute an id proposed earlier in the example (pending, completed,
        invalidated, superseded, rejected, or from an earlier run: never seen here),
        or one never proposed or not a non-empty string (UnknownPlan, never raises)."""
        if self._pick(data, (False, False, False, True)):
            plan_id = self._pick(data, ("never-seen", "", None, 7))
        self._do("execute", plan_id)

    @precondition(lambda self: bool(self._stale_ids()))
    @rule(data=st.data())
    def execute_stale(self, data: st.DataObject) -> None:
        """Execute an id that was accepted and has since been invalidated by new
        evidence or superseded by another plan: StalePlan."""
        self._do("execute", self._pick(data, self._stale_ids()))

    def _stale_ids(self) -> list[str]:
        pending = self.last["pending"]
        current = None if pending is None else pending["id"]
        completed = set(self.last["completed"])
        return [i for i in self.last["accepted"] if i != current and i not in completed]

    @precondition(lambda self: bool(self.last["completed"]))
    @rule(data=st.data())
    def replay(self, data: st.DataObject) -> None:
        """Execute a completed id again: Replayed, nothing changes."""
        self._do("execute", self._pick(data, self.last["completed"]))

    @rule(data=st.data())
    def untried(self, data: st.DataObject) -> None:
        """The events with a live declared transition leaving the run's declared
        state that this example has not tried there yet, one after the other while
        the run stays in that state (one live event when every one has), each
        argument drawn from what ``spec.inputs`` says it can be here, the common valid
        one half the time. Derived from the declaration alone: a deep state (an
        approved plan) is tried with every event once an example reaches it, however
        rarely the rules lead there. (Per example, so that replaying an example draws
        the same operations.)"""
        here = self._declared_state()
        leaving = list(self.leaving.get(here, {})) or list(PARAMETER_TYPES)
        fresh = [event for event in leaving if (here, event) not in self.tried]
        for event in fresh if fresh else [self._pick(data, leaving)]:
            if self._declared_state() != here:
                break
            self.tried.add((here, event))
            candidates = inputs.arguments(PARAMETER_TYPES[event], self.view)
            first = self._pick(data, (True, False))
            self._do(event, candidates[0] if first else self._pick(data, candidates))

    def _declared_state(self) -> str:
        """The run's declared state's id."""
        return self._declared_state_of(self.last)

    def _declared_state_of(self, snapshot: dict[str, Any]) -> str:
        """A snapshot's declared state's id (it names a final one by its value)."""
        value = str(snapshot["state"])
        return self.state_ids.get(value, value)

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        """The host cancels the run (rarely: a cancel ends the run, and deep states
        need long runs; a skipped cancel is no operation)."""
        if self._pick(data, (False, False, True)):
            self._do("cancel")


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text).strip("_")


def _event_rule(event: str) -> Callable[[CampaignMachine, st.DataObject], None]:
    """The rule of an event no rule of ``CampaignMachine`` spells out: its argument
    drawn among what ``spec.inputs`` says it can be in this state (the common valid
    one first), every state alike: the self-loops where it is refused included."""

    def draw(self: CampaignMachine, data: st.DataObject) -> None:
        candidates = inputs.arguments(PARAMETER_TYPES[event], self.view)
        # the common valid argument half the time: an approval of the plan awaiting
        # it moves the run on, and only then are the next state's transitions reached
        first = self._pick(data, (True, False))
        self._do(event, candidates[0] if first else self._pick(data, candidates))

    draw.__name__ = draw.__qualname__ = f"event_{event}"
    return draw


def _live_leaving(
    policy: Policy,
) -> tuple[dict[str, dict[str, tuple[str, ...]]], dict[str, str]]:
    """Per declared state, per event, the live transitions leaving it under
    ``policy``; and each state's value mapped to its id (``CampaignMachine.untried``)."""
    model = declared_model()
    live = set(targets_for(policy).live_transitions)
    leaving: dict[str, dict[str, tuple[str, ...]]] = {}
    for transition in model.transitions:
        if transition.label in live:
            events = leaving.setdefault(transition.source, {})
            events[transition.event] = (*events.get(transition.event, ()), transition.label)
    return leaving, {str(state.value): state.id for state in model.states}


def _project_contract() -> Contract:
    from replan.spec.properties import CONTRACT

    return CONTRACT


def build_machine(
    policy: Policy,
    implementation: Factory,
    recorder: Recorder,
    *,
    identity: str,
    reference: Factory | None = ReferenceController,
    prefix: Sequence[Operation] = (),
    contract: Contract | None = None,
) -> type[CampaignMachine]:
    """A machine class for this policy and implementation. ``identity`` names the
    pair in the example database, so a failure saved for one implementation or
    policy is retried first for the same one."""
    keys = policy.keys
    steps = [s.name for s in policy.steps]
    attributes: dict[str, Any] = {
        "policy": policy,
        "implementation": staticmethod(implementation),
        "reference": None if reference is None else staticmethod(reference),
        "recorder": recorder,
        "contract": contract if contract is not None else _project_contract(),
        "unknown_key": _other(keys, (), "unknown-key"),
        "unknown_step": _other(steps, (), "unknown-step"),
        "disallowed_resource": _other(policy.resources, (), "resource-not-allowed"),
        "commit_first": tuple(
            s.name for s in sorted(policy.steps, key=lambda step: not step.completes_run)
        ),
        "prefix": tuple(prefix),
        # function_digest(machine) hashes this in: the example database's key.
        "_hypothesis_internal_add_digest": identity.encode(),
    }
    for event in DERIVED_EVENTS:
        attributes[f"event_{event}"] = rule(data=st.data())(_event_rule(event))
    attributes["leaving"], attributes["state_ids"] = _live_leaving(policy)
    return type(f"Campaign_{_slug(identity)[:40]}", (CampaignMachine,), attributes)
