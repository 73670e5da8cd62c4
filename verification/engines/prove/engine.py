"""``replan prove``: z3 proofs over the controller's step relation.

Owns what is proved and how it is reported: (1) the commit equivalence of
CONTRACT.md "Fixed workflow baseline": for every assignment of Unknown/Passed/Failed
to the evidence keys, an active run with a current, in-budget commit plan pending
executes it exactly when ``decide`` says ``ReadyToCommit``; (2) the contract's safety
invariants, proved inductive over one step of the controller with the limits left
symbolic (``Init ⇒ Inv`` and ``Inv ∧ Step ⇒ Inv'``, strengthened by the auxiliary
invariants of ``spec/properties.py``), so they hold in every reachable state for any
``max_steps``, ``max_proposals`` and ``no_progress_limit``; (3) ``decision_difference``
(``difference.py``, importable from here): evidence on which two policies' commit
decisions differ, for ``replan verify --against``. The commit gate both (1) and (3)
ask their questions of is ``gate.py``.

The controller side is never restated here: the gate and the step relation come from
``verification.translate.symbolic.encode_event``, which reads the declaration's transitions and
translates the guard and action bodies the generated controller runs. What *is*
stated here is what we want to hold: the invariants (CONTRACT.md's names, verbatim)
and ``decide``'s definition from the contract (the independent baseline). Every
function takes ``model`` (a possibly transformed ``MachineModel``) and ``model_class``
(a ``Run`` with possibly broken bodies) so that mutants are proved against too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import z3  # type: ignore[import-untyped]

from replan.controller.policy import Policy, workflow_disagreements
from replan.controller.records import EvidenceState, Observation, Plan
from replan.controller.run import Run
from replan.controller.workflow import decide
from replan.spec.contract import Contract
from replan.spec.model import MachineModel
from replan.spec.vocabulary import Property

# Re-exported: callers ask for the policy comparison through this module too.
from replan.verification.engines.prove.describe import describe_counterexample
from replan.verification.engines.prove.difference import (  # noqa: F401
    DecisionDifference,
    decision_difference,
    policy_changes,
)
from replan.verification.engines.prove.gate import (
    NOT_PASSED,  # noqa: F401
    Gate,
    commit_gate,
    contract_or_default,
    declaration_model,
    evidence_assignment,
    minimal_model,
    not_passed_pattern,
    ready_to_commit,
    render_assignment,
    simplifying_solver,
    solve,
)
from replan.verification.engines.prove.results import (
    ProofReport,
    PropertyResult,
)
from replan.verification.engines.prove.translation import validate
from replan.verification.runtime import interrupt
from replan.verification.translate.property_terms import (
    Reachable,
    call_term,
    property_frame,
    state_term,
)
from replan.verification.translate.symbolic import (
    POLICY,
    State,
    StateRef,
    StepEncoding,
    Translator,
    Universe,
    encode_event,
    initial_state,
)


def prove_equivalence(
    policy: Policy,
    model: MachineModel | None = None,
    model_class: type = Run,
    *,
    contract: Contract | None = None,
) -> PropertyResult:
    """The commit equivalence for every ``completes_run`` step of ``policy``."""
    model = model or declaration_model()
    started = time.perf_counter()
    terminal = [s.name for s in policy.steps if s.completes_run]
    keys = ", ".join(policy.workflow_keys) or "no keys"
    statement = (
        f"for every Unknown/Passed/Failed assignment: execute of a current in-budget "
        f"{'/'.join(terminal)} plan is Executed iff decide({keys}) == ReadyToCommit"
    )
    for step in terminal:
        gate = commit_gate(policy, step, model, model_class, contract=contract)
        ready = ready_to_commit(gate.evidence, policy.workflow_keys)
        solver = z3.Solver()
        solver.add(gate.premise)
        if solve(solver) == z3.unsat:  # never a proof: the premise describes no state
            return PropertyResult(
                "commit-equivalence",
                "equivalence",
                False,
                time.perf_counter() - started,
                statement,
                f"{step}: vacuous (no state satisfies the premise)",
                {"step": step, "vacuous": True},
            )
        solver.add(gate.opens != ready)
        if solve(solver) == z3.unsat:
            continue
        message, counterexample = _equivalence_counterexample(
            policy, step, gate, ready, model, model_class
        )
        return PropertyResult(
            "commit-equivalence",
            "equivalence",
            False,
            time.perf_counter() - started,
            statement,
            message,
            counterexample,
        )
    return PropertyResult(
        "commit-equivalence", "equivalence", True, time.perf_counter() - started, statement
    )


def _equivalence_counterexample(
    policy: Policy,
    step: str,
    gate: Gate,
    ready: z3.BoolRef,
    model: MachineModel,
    model_class: type,
) -> tuple[str, dict[str, Any]]:
    """Where the gate of ``step`` and ``decide`` disagree: the message (a minimal
    evidence assignment, generalised where a key's other not-Passed value disagrees
    too, and the policy's own disagreements as fixes) and the counterexample with its
    replayable episode."""
    constraints = [gate.premise, gate.opens != ready]
    witness = minimal_model(constraints, gate.evidence)
    assert witness is not None
    assignment = evidence_assignment(witness, gate.evidence)
    commits = z3.is_true(witness.eval(gate.opens, model_completion=True))
    relevant = set(policy.requirements[step]) | set(policy.workflow_keys)
    shown = [k for k in policy.keys if k in relevant or assignment[k] != "Passed"]
    shown_assignment = {k: assignment[k] for k in shown}
    pattern = not_passed_pattern(constraints, gate.evidence, assignment, shown)
    states = {k: EvidenceState(v) for k, v in assignment.items()}
    decision = decide(states, policy)
    controller = "commits" if commits else "refuses"
    message = (
        f"{render_assignment(shown_assignment)}: controller {controller}, workflow says {decision}"
    )
    if pattern != shown_assignment:
        message += f"\n(the same for {render_assignment(pattern)})"
    for line in workflow_disagreements(policy):
        message += f"\nfix: {line}"
    finding = equivalence_finding(policy, gate, witness, decision, model, model_class)
    return message, {
        "step": step,
        "assignment": shown_assignment,
        "pattern": pattern,
        "controller": controller,
        "workflow": str(decision),
        "replay": finding.to_json(),
    }


def equivalence_operations(policy: Policy, step: str, assignment: Mapping[str, str]) -> list[Any]:
    """The episode that sets ``assignment`` through observations, proposes a current
    plan for ``step`` and executes it (what the bridge test and the saved
    counterexample run)."""
    from replan.verification.core.harness import Operation

    operations = []
    revision = 1
    for key in policy.keys:
        state = EvidenceState(assignment.get(key, "Unknown"))
        if state is not EvidenceState.UNKNOWN:
            operations.append(Operation("observe", Observation(key, 1, state, "prove")))
            revision += 1
    plan = Plan("commit", 1, revision, step, policy.resources[0])
    operations.append(Operation("propose", plan))
    operations.append(Operation("execute", "commit"))
    return operations


def equivalence_finding(
    policy: Policy,
    gate: Gate,
    witness: z3.ModelRef,
    decision: Any,
    model: MachineModel | None = None,
    model_class: type = Run,
) -> Any:
    """The counterexample as the shared ``Finding`` (replayable): the witness's state
    (its evidence, counters and pending plan, so a bug that needs, say, the last step
    of the budget shows) and the ``execute`` of the pending plan from it, with the
    answer the generated controller really gives there."""
    from replan.verification.core.harness import Finding, apply
    from replan.verification.engines.prove.concrete import Concretizer, start_state

    model = model or declaration_model()
    concrete = Concretizer(witness, gate.universe)
    start = concrete.snapshot(gate.encoding.pre, concrete.step_ids(gate.encoding))
    operation = concrete.operation(gate.encoding)
    controller = _controller_class(model, model_class)(policy)
    controller._import_state(start_state(start))
    result = apply(controller, operation)  # type: ignore[arg-type]
    return Finding(
        "commit-equivalence",
        policy,
        [operation],
        [result],
        message=f"execute answered {result}, decide says {decision}",
        source="prove",
        extra={"start": start, "check": "commit-equivalence", "step": gate.step},
    )


def _controller_class(model: MachineModel, model_class: type) -> type[Run]:
    from replan.spec.generator import load_controller

    if model_class is Run and model == declaration_model():
        from replan.controller import Controller

        return Controller
    return load_controller(model, model_class, "prove")


# ---- proving the invariants ------------------------------------------------------------------


Query = tuple[str, Sequence[z3.BoolRef], z3.BoolRef, StepEncoding | None, State | None]


class Decided:
    """What z3 already decided in this context, by term: premise sets found
    satisfiable (each property asks again of the same premises of one event's step:
    the vacuity check is made once per premise set, not once per property, about
    10 s of z3 time at 300 keys), and obligations found valid (premises that imply
    their goal). z3 shares structurally equal terms, so an obligation asked again
    is recognised by its terms' ids: ``replan mutate`` asks every mutant of an event
    the obligations the event's other mutants share with it, and each is decided
    once. The cache keeps the terms alive so that no other term takes their ids."""

    def __init__(self) -> None:
        self._satisfiable: dict[tuple[int, ...], Sequence[z3.BoolRef]] = {}
        self._valid: dict[tuple[tuple[int, ...], int], tuple[Sequence[z3.BoolRef], z3.BoolRef]] = {}

    @staticmethod
    def _key(premises: Sequence[z3.BoolRef]) -> tuple[int, ...]:
        return tuple(p.get_id() for p in premises)

    def satisfiable(self, premises: Sequence[z3.BoolRef]) -> bool:
        return self._key(premises) in self._satisfiable

    def add_satisfiable(self, premises: Sequence[z3.BoolRef]) -> None:
        self._satisfiable[self._key(premises)] = list(premises)

    def valid(self, premises: Sequence[z3.BoolRef], goal: z3.BoolRef) -> bool:
        return (self._key(premises), goal.get_id()) in self._valid

    def add_valid(self, premises: Sequence[z3.BoolRef], goal: z3.BoolRef) -> None:
        self._valid[self._key(premises), goal.get_id()] = (list(premises), goal)


def _check(
    name: str,
    kind: str,
    statement: str,
    queries: Sequence[Query],
    universe: Universe,
    decided: Decided | None = None,
) -> PropertyResult:
    """Each query is (label, premises, goal, step, state): the premises must imply the
    goal. The first query whose premises and negated goal are satisfiable gives the
    counterexample. Premises that are unsatisfiable on their own would make the proof
    vacuous: that is a failure too, never a proof (``decided``: what z3 decided
    before, not asked again)."""
    started = time.perf_counter()
    decided = Decided() if decided is None else decided
    for label, premises, goal, step, state in queries:
        interrupt.check()  # Ctrl-C between obligations (z3 itself is interrupted)
        if decided.valid(premises, goal):
            continue
        solver = simplifying_solver()
        solver.add(*premises)
        known = decided.satisfiable(premises)
        verdict = z3.sat if known else solver.check()
        if verdict == z3.sat:
            if not known:
                decided.add_satisfiable(premises)
            solver.add(z3.Not(goal))
            verdict = solver.check()
            if verdict == z3.unsat:
                decided.add_valid(premises, goal)
                continue
        elif verdict == z3.unsat:
            return PropertyResult(
                name,
                kind,
                False,
                time.perf_counter() - started,
                statement,
                f"{label}: vacuous (its premises contradict each other)",
                {"obligation": label, "vacuous": True},
            )
        if verdict == z3.unknown:
            return PropertyResult(
                name,
                kind,
                False,
                time.perf_counter() - started,
                statement,
                f"{label}: z3 could not decide ({solver.reason_unknown()})",
                {"obligation": label, "unknown": solver.reason_unknown()},
            )
        message, description = describe_counterexample(
            solver.model(), step, state, universe, name, label
        )
        return PropertyResult(
            name,
            kind,
            False,
            time.perf_counter() - started,
            statement,
            message,
            {"obligation": label, **description},
        )
    return PropertyResult(name, kind, True, time.perf_counter() - started, statement)


class Ticker:
    """Says how far the proofs got, at most every ``every`` seconds (a policy with
    hundreds of keys takes minutes, and silence reads as a hang)."""

    def __init__(self, progress: Callable[[str], None] | None, every: float = 2.0) -> None:
        self.progress = progress
        self.every = every
        self.done = 0
        self.started = self.last = time.perf_counter()

    def __call__(self, result: PropertyResult) -> PropertyResult:
        self.done += 1
        now = time.perf_counter()
        if self.progress is not None and now - self.last >= self.every:
            self.last = now
            verdict = "proved" if result.proved else "NOT PROVED"
            self.progress(
                f"proofs: {self.done} properties checked ({now - self.started:.0f} s), "
                f"the last {result.name}: {verdict}"
            )
        return result


def _unreported(result: PropertyResult) -> PropertyResult:
    return result


@dataclass(frozen=True)
class Encoded:
    """Steps encoded in one universe, each as ``encode_event(universe, event,
    model_class)`` would encode it (a fresh pre-state and argument)."""

    universe: Universe
    steps: dict[str, StepEncoding]


def prove_invariants(
    policy: Policy,
    model: MachineModel | None = None,
    model_class: type = Run,
    *,
    events: Sequence[str] | None = None,
    initial: bool = True,
    tick: Callable[[PropertyResult], PropertyResult] = _unreported,
    contract: Contract | None = None,
    encoded: Encoded | None = None,
    decided: Decided | None = None,
) -> list[PropertyResult]:
    """Every property of ``spec/properties.py`` over every event's step, the limits
    symbolic: the state invariants (auxiliary and the contract's) inductive, each call
    property for every step from a state satisfying them, and the bodies'
    well-definedness on such states. ``events`` (default: all) and ``initial``
    restrict the obligations to those steps (``replan mutate`` proves only what a
    mutant changed: the rest is the same question as for the original). ``encoded``:
    steps already encoded in a universe of this policy and model (``replan mutate``
    encodes a mutant's changed events to compare them with the original's; the same
    terms, not made twice); the events it lacks are encoded here. ``decided``: what
    z3 decided in earlier calls (``replan mutate`` keeps one for all its mutants)."""
    model = model or declaration_model()
    u = encoded.universe if encoded is not None else Universe(policy, model, symbolic_limits=True)
    translator = Translator(u, model_class)
    init = initial_state(u, model_class)
    chosen = model.events if events is None else [e for e in model.events if e in events]
    known = {} if encoded is None else encoded.steps
    steps = [
        known[event] if event in known else encode_event(u, event, model_class) for event in chosen
    ]
    contract = contract_or_default(contract)
    reachable = Reachable(translator, contract)
    obligations = _Obligations(
        u,
        translator,
        init,
        steps,
        {step.event: [*step.assumptions, *reachable(step.pre)] for step in steps},
    )
    decided = Decided() if decided is None else decided
    results = []

    def check(name: str, kind: str, statement: str, queries: Sequence[Query]) -> None:
        results.append(tick(_check(name, kind, statement, queries, u, decided)))

    for prop in reachable.invariants:
        queries = obligations.inductive(prop, initial)
        statement = f"{prop.meaning} (Init ⇒ Inv, Inv ∧ Step ⇒ Inv'; limits symbolic)"
        if queries:
            check(prop.name, prop.kind, statement, queries)
    for prop in contract.of_kind("initial") if initial else []:
        check(prop.name, "initial", f"{prop.meaning} (Init)", obligations.initial(prop))
    for prop in contract.of_kind("call"):
        queries = obligations.every_step(prop)
        statement = f"{prop.meaning} (every step from a reachable state; limits symbolic)"
        if queries:
            check(prop.name, "property", statement, queries)
    well_defined = obligations.well_defined()
    check(
        "bodies-well-defined",
        "well-defined",
        f"{len(well_defined)} conditions the bodies take for granted (no None "
        "dereference, no missing key, a transition for every case) hold when reached",
        well_defined,
    )
    return results


@dataclass
class _Obligations:
    """The proof obligations of one contract over the steps of the chosen events: each
    method states one kind of obligation as queries for ``_check``."""

    u: Universe
    translator: Translator
    init: State
    steps: list[StepEncoding]
    #: per event: its step's assumptions and the reachable-state invariants of its pre
    premises: dict[str, list[z3.BoolRef]]

    def inductive(self, prop: Property, initial: bool) -> list[Query]:
        """A state invariant holds initially (when ``initial``) and after every step
        from a state satisfying them all."""
        translator = self.translator
        queries: list[Query] = (
            [
                (
                    "Init ⇒ Inv",
                    self.u.assumptions,
                    state_term(translator, prop, self.init),
                    None,
                    self.init,
                )
            ]
            if initial
            else []
        )
        queries += [
            (
                f"Inv ∧ {step.event} ⇒ Inv'",
                self.premises[step.event],
                state_term(translator, prop, step.post),
                step,
                None,
            )
            for step in self.steps
        ]
        return queries

    def initial(self, prop: Property) -> list[Query]:
        """An initial property of the initial state, under the policy."""
        translator, init = self.translator, self.init
        frame = property_frame(translator, init, f"initial {prop.name!r}")
        _, value = translator.run_function(
            prop.function, [StateRef(init), POLICY], frame, state=init, where=prop.name
        )
        term = translator.boolean(frame, value)
        return [("Init ⇒ " + prop.name, self.u.assumptions, term, None, init)]

    def every_step(self, prop: Property) -> list[Query]:
        """A call property for every step it applies to, from a reachable state."""
        return [
            (
                f"Reach ∧ {step.event} ⇒ {prop.name}",
                self.premises[step.event],
                call_term(self.translator, prop, step),
                step,
                None,
            )
            for step in self.steps
            if prop.applies_to(step.event) and step.models(prop)
        ]

    def well_defined(self) -> list[Query]:
        """What the bodies take for granted, where a reachable state reaches it."""
        return [
            (
                f"{step.event}: {obligation.text}",
                self.premises[step.event],
                obligation.condition,
                step,
                None,
            )
            for step in self.steps
            for obligation in step.obligations
        ]


def cannot_fire(
    policy: Policy,
    labels: Sequence[str],
    model: MachineModel | None = None,
    model_class: type = Run,
    *,
    contract: Contract | None = None,
) -> dict[str, str]:
    """label -> why, for each of the declared transitions ``labels`` that no step fires
    from a state the proved invariants allow, under this policy's own limits: it is
    not live under the policy (no engine can reach it), whatever a guard-by-guard
    reading suggests (``needs_approval`` and ``completes_run`` both read the pending
    plan's step, so under a policy whose only completing step needs approval the
    declared ``pending --execute[completes_run]--> completed`` never fires). Sound only
    where the invariants are proved for this policy: ``replan verify`` asks it after
    the proofs passed."""
    model = model or declaration_model()
    by_label = {t.label: t for t in model.transitions}
    wanted = [by_label[label] for label in labels if label in by_label]
    if not wanted:
        return {}
    u = Universe(policy, model)
    reachable = Reachable(Translator(u, model_class), contract_or_default(contract))
    found: dict[str, str] = {}
    for event in dict.fromkeys(t.event for t in wanted):
        step = encode_event(u, event, model_class)
        premises = [*step.assumptions, *reachable(step.pre)]
        for transition in (t for t in wanted if t.event == event):
            solver = simplifying_solver()
            solver.add(*premises, step.fired == transition.index)
            if solve(solver) == z3.unsat:
                found[transition.label] = (
                    "no step fires it from any state the proved invariants allow "
                    "under this policy (z3)"
                )
    return found


def prove_all(
    policy: Policy,
    model: MachineModel | None = None,
    model_class: type = Run,
    controller: type[Run] | None = None,
    progress: Callable[[str], None] | None = None,
    *,
    contract: Contract | None = None,
) -> ProofReport:
    """Everything ``replan prove`` proves: the commit equivalence, every property, and
    the generated ``controller`` (default: what the generator makes of ``model`` and
    ``model_class``, the committed file for the project) equal to the declaration.
    ``progress`` hears how far it got, at most every 2 s."""
    started = time.perf_counter()
    model = model or declaration_model()
    tick = Ticker(progress)
    report = ProofReport(policy, model.digest)
    report.results.append(tick(prove_equivalence(policy, model, model_class, contract=contract)))
    report.results.extend(
        prove_invariants(policy, model, model_class, tick=tick, contract=contract)
    )
    generated = controller if controller is not None else _controller_class(model, model_class)
    report.results.extend(
        tick(r) for r in validate(policy, generated, model, model_class, contract=contract)
    )
    report.seconds = time.perf_counter() - started
    return report
