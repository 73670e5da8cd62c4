"""``replan prove``: z3 proofs over the controller's step relation.

Owns what is proved and how it is reported: (1) the commit equivalence of
CONTRACT.md "Fixed workflow baseline": for every assignment of Unknown/Passed/Failed
to the evidence keys, an active run with a current, in-budget commit plan pending
executes it exactly when ``decide`` says ``ReadyToCommit``; (2) the contract's safety
invariants, proved inductive over one step of the controller with the limits left
symbolic (``Init ⇒ Inv`` and ``Inv ∧ Step ⇒ Inv'``, strengthened by the auxiliary
invariants of ``spec/properties.py``), so they hold in every reachable state for any
``max_steps``, ``max_proposals`` and ``no_progress_limit``; (3) ``decision_difference``:
evidence on which two policies' commit decisions differ, for ``replan verify
--against``.

The controller side is never restated here: the gate and the step relation come from
``verification.translate.symbolic.encode_event``, which reads the declaration's transitions and
translates the guard and action bodies the generated controller runs. What *is*
stated here is what we want to hold: the invariants (CONTRACT.md's names, verbatim)
and ``decide``'s definition from the contract (the independent baseline). Every
function takes ``model`` (a possibly transformed ``MachineModel``) and ``model_class``
(a ``Run`` with possibly broken bodies) so that mutants are proved against too.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import z3  # type: ignore[import-untyped]

from replan.controller.policy import Policy, policy_to_dict, workflow_disagreements
from replan.controller.records import ADMITTED, EvidenceState, Observation, Plan, PolicyError
from replan.controller.run import Run
from replan.controller.workflow import decide
from replan.spec.contract import Contract
from replan.spec.model import MachineModel
from replan.verification.engines.prove.describe import (
    _state_line,
    describe_state,
    describe_step,
    step_text,
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
    EVIDENCE,
    POLICY,
    FormulaOnRuns,
    State,
    StateRef,
    StepEncoding,
    Translator,
    Universe,
    all_of,
    any_of,
    encode_event,
    initial_state,
)

PASSED = EVIDENCE.members["Passed"]
FAILED = EVIDENCE.members["Failed"]
UNKNOWN = EVIDENCE.members["Unknown"]
NOT_PASSED = "<not Passed>"


def contract_or_default(contract: Contract | None) -> Contract:
    """``contract``, or the project's (``spec.properties.CONTRACT``) when None."""
    if contract is not None:
        return contract
    from replan.spec.properties import CONTRACT

    return CONTRACT


def _declaration() -> MachineModel:
    from replan.spec.declaration import Replanning
    from replan.spec.model import extract

    return extract(Replanning)


def _solver() -> z3.Solver:
    """A solver that first simplifies and eliminates what the step relation defines
    (the post-state is a term over the pre-state): a stopped run's unchanged arrays
    are decided at once instead of by case splits (0.7 s -> 15 ms for observe)."""
    tactic = z3.Then("simplify", "propagate-values", "solve-eqs", "elim-uncnstr", "smt")
    return tactic.solver()


def _solve(solver: z3.Solver) -> z3.CheckSatResult:
    verdict = solver.check()
    if verdict == z3.unknown:
        raise RuntimeError(f"z3 could not decide ({solver.reason_unknown()})")
    return verdict


# ---- the commit gate and the fixed workflow --------------------------------------------


@dataclass
class Gate:
    """The controller's commit gate for one ``completes_run`` step, as z3 derives it:
    the ``execute`` step relation from a state where the premise holds (an active run
    with a current, in-budget plan for ``step`` pending, ``plan_id`` its id, states set
    through observations), open when the answer is ``Executed``."""

    universe: Universe
    step: str
    encoding: StepEncoding
    premise: z3.BoolRef
    opens: z3.BoolRef  # the answer is Executed
    evidence: dict[str, z3.ExprRef]  # state(key) for each policy key
    _opens: FormulaOnRuns | None = None
    _ready: FormulaOnRuns | None = None

    def open_for(self, run: Run, plan_id: object) -> bool:
        """The gate evaluated on a concrete run about to execute ``plan_id`` (the
        bridge to the real controller): the run's fields, abstracted, substituted into
        the very formula the equivalence proof uses; the free inputs (``isinstance(
        plan_id, str)``) are evaluated on the real argument."""
        u = self.universe
        if self._opens is None:
            self._opens = FormulaOnRuns(u, self.encoding.pre, self.opens)
        extra: list[tuple[z3.ExprRef, bool | int]] = [(self.encoding.argument, u.intern(plan_id))]
        env = {str(self.encoding.parameter): plan_id}
        for text, term in self.encoding.inputs.items():
            extra.append((term, bool(eval(text, dict(vars(builtins)), env))))
        return self._opens(run, extra)

    def ready_for(self, run: Run) -> bool:
        """The z3 statement of ``decide == ReadyToCommit`` on a concrete run."""
        if self._ready is None:
            ready = ready_to_commit(self.evidence, self.universe.policy.workflow_keys)
            self._ready = FormulaOnRuns(self.universe, self.encoding.pre, ready)
        return self._ready(run)


def ready_to_commit(evidence: Mapping[str, z3.ExprRef], workflow_keys: Sequence[str]) -> z3.BoolRef:
    """``decide(states) == ReadyToCommit``, from the contract: no prerequisite Failed
    and all Passed (which the second conjunct implies; both stated as written)."""
    states = [evidence[k] for k in workflow_keys]
    needs_owner = any_of(*(s == FAILED for s in states))
    all_passed = all_of(*(s == PASSED for s in states))
    return z3.And(z3.Not(needs_owner), all_passed)


def commit_gate(
    policy: Policy,
    step: str,
    model: MachineModel | None = None,
    model_class: type = Run,
    *,
    prefix: str = "",
    contract: Contract | None = None,
) -> Gate:
    """The gate of ``step`` (a ``completes_run`` step of ``policy``) under the premise
    of the equivalence, derived from the declaration's ``execute`` transitions."""
    model = model or _declaration()
    u = Universe(policy, model)
    encoding = encode_event(u, "execute", model_class, prefix=prefix)
    pre = encoding.pre
    pending = pre["_pending"]
    plan = pending.value.fields
    step_const = u.step.const(step)
    if step_const is None:
        raise ValueError(f"{step!r} is not a step of the policy")
    premise = z3.And(
        pre["_declared_state"] == u.mode_of("pending"),
        pending.some,
        plan["step"] == step_const,
        plan["evidence_revision"] == pre["_evidence_revision"],
        encoding.argument == plan["id"],
        z3.Not(z3.Select(pre["_completed"].array, encoding.argument)),
        pre["_steps"] >= 0,
        pre["_steps"] < u.limits["max_steps"],
        *(term == True for term in encoding.inputs.values()),  # noqa: E712  (plan_id is a str)
        *Reachable(Translator(u, model_class), contract_or_default(contract))(pre),
        *encoding.assumptions,
    )
    evidence = {k: u.evidence_state(pre, k) for k in policy.keys}
    opens = any_of(*(encoding.answer == u.answer_of(answer) for answer in sorted(ADMITTED)))
    return Gate(u, step, encoding, premise, opens, evidence)


def _minimal_model(
    constraints: Sequence[z3.BoolRef], evidence: Mapping[str, z3.ExprRef]
) -> z3.ModelRef | None:
    """A model with the fewest keys not Passed (None when unsatisfiable); among those,
    the fewest Failed ones, so the same question always gets the same readable answer
    (Unknown, the state of a key never observed, before Failed) whatever order z3
    happens to search in."""
    optimizer = z3.Optimize()
    optimizer.add(*constraints)
    if evidence:
        terms = [evidence[key] for key in sorted(evidence)]
        optimizer.minimize(z3.Sum(*(z3.If(e == PASSED, 0, 1) for e in terms)))
        failed = z3.Sum(*(z3.If(e == EVIDENCE.members["Failed"], 1, 0) for e in terms))
        optimizer.minimize(failed)
    verdict = optimizer.check()
    if verdict == z3.unknown:
        raise RuntimeError(f"z3 could not decide ({optimizer.reason_unknown()})")
    return optimizer.model() if verdict == z3.sat else None


def _assignment(model: z3.ModelRef, evidence: Mapping[str, z3.ExprRef]) -> dict[str, str]:
    return {
        key: EVIDENCE.name_of(model.eval(term, model_completion=True))
        for key, term in evidence.items()
    }


def _pattern(
    constraints: Sequence[z3.BoolRef],
    evidence: Mapping[str, z3.ExprRef],
    assignment: Mapping[str, str],
    shown: Sequence[str],
) -> dict[str, str]:
    """The witness generalised: a key not Passed whose other not-Passed value breaks
    the property too reads ``<not Passed>``."""
    pattern = {}
    for key in shown:
        value = assignment[key]
        if value == "Passed":
            pattern[key] = value
            continue
        other = "Failed" if value == "Unknown" else "Unknown"
        solver = z3.Solver()
        solver.add(*constraints)
        solver.add(*(evidence[k] == EVIDENCE.members[assignment[k]] for k in evidence if k != key))
        solver.add(evidence[key] == EVIDENCE.members[other])
        pattern[key] = NOT_PASSED if _solve(solver) == z3.sat else value
    return pattern


def _render(assignment: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in assignment.items())


def prove_equivalence(
    policy: Policy,
    model: MachineModel | None = None,
    model_class: type = Run,
    *,
    contract: Contract | None = None,
) -> PropertyResult:
    """The commit equivalence for every ``completes_run`` step of ``policy``."""
    model = model or _declaration()
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
        if _solve(solver) == z3.unsat:  # never a proof: the premise describes no state
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
        if _solve(solver) == z3.unsat:
            continue
        constraints = [gate.premise, gate.opens != ready]
        witness = _minimal_model(constraints, gate.evidence)
        assert witness is not None
        assignment = _assignment(witness, gate.evidence)
        commits = z3.is_true(witness.eval(gate.opens, model_completion=True))
        relevant = set(policy.requirements[step]) | set(policy.workflow_keys)
        shown = [k for k in policy.keys if k in relevant or assignment[k] != "Passed"]
        shown_assignment = {k: assignment[k] for k in shown}
        pattern = _pattern(constraints, gate.evidence, assignment, shown)
        states = {k: EvidenceState(v) for k, v in assignment.items()}
        decision = decide(states, policy)
        controller = "commits" if commits else "refuses"
        message = f"{_render(shown_assignment)}: controller {controller}, workflow says {decision}"
        if pattern != shown_assignment:
            message += f"\n(the same for {_render(pattern)})"
        for line in workflow_disagreements(policy):
            message += f"\nfix: {line}"
        finding = equivalence_finding(policy, gate, witness, decision, model, model_class)
        counterexample = {
            "step": step,
            "assignment": shown_assignment,
            "pattern": pattern,
            "controller": controller,
            "workflow": str(decision),
            "replay": finding.to_json(),
        }
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

    model = model or _declaration()
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

    if model_class is Run and model == _declaration():
        from replan.controller import Controller

        return Controller
    return load_controller(model, model_class, "prove")


@dataclass
class DecisionDifference:
    """Evidence on which two policies decide a commit differently."""

    step: str
    assignment: dict[str, str]
    old_commits: bool
    new_commits: bool
    #: keys one policy declares and the other does not, with their state in the
    #: witness (Unknown: never observed in the run of the policy that has them)
    own: dict[str, str] = field(default_factory=dict)

    def text(self) -> str:
        old = "commits" if self.old_commits else "refuses"
        new = "commits" if self.new_commits else "refuses"
        own = f" (of one policy only: {_render(self.own)})" if self.own else ""
        return f"{_render(self.assignment)}{own}: {self.step}: old policy {old}, new policy {new}"

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "step": self.step,
            "assignment": self.assignment,
            "old": "commits" if self.old_commits else "refuses",
            "new": "commits" if self.new_commits else "refuses",
        }
        if self.own:
            document["own_keys"] = self.own
        return document


#: The limits of a policy, in the file's order, as ``policy_changes`` compares them.
_LIMITS = (
    "max_steps",
    "max_proposals",
    "no_progress_limit",
    "count_duplicate_deliveries",
    "max_tokens",
    "max_cost",
    "max_wall_ms",
    "currency",
)


def _limit_value(policy: Policy, name: str) -> str:
    """A limit as a change names it: a budget left out (0) and no currency are none."""
    value = getattr(policy, name)
    if value is True or value is False:
        return str(value).lower()
    if name in ("max_tokens", "max_cost", "max_wall_ms", "currency") and not value:
        return "none"
    return str(value)


def policy_changes(old: Policy, new: Policy) -> dict[str, list[str]]:
    """Every difference between two policies, by kind: the limits that changed (with
    both values); keys, resources and steps added and removed; the per-resource keys
    and the open slots; steps that complete the
    run under one of them only; of the steps both declare, changed prerequisites,
    approvals and resource arguments; the fixed workflow's keys; and lists that hold
    the same names in another order. Two policies whose normal forms differ differ in
    at least one of these (the commit decisions are compared over what both share,
    ``decision_difference``)."""
    old_steps = {s.name: s for s in old.steps}
    new_steps = {s.name: s for s in new.steps}
    shared = [s for s in new.steps if s.name in old_steps]

    def names(values: tuple[str, ...]) -> str:
        return ", ".join(values) or "nothing"

    def reordered(label: str, before: list[str], after: list[str]) -> list[str]:
        same = sorted(before) == sorted(after) and before != after
        return [f"{label}: {', '.join(before)} -> {', '.join(after)}"] if same else []

    return {
        "limits_changed": [
            f"{name}: {_limit_value(old, name)} -> {_limit_value(new, name)}"
            for name in _LIMITS
            if _limit_value(old, name) != _limit_value(new, name)
        ],
        "keys_added": [k for k in new.keys if k not in old.keys],
        "keys_removed": [k for k in old.keys if k not in new.keys],
        "resources_added": [r for r in new.resources if r not in old.resources],
        "resources_removed": [r for r in old.resources if r not in new.resources],
        "per_resource_changed": (
            [f"{names(old.per_resource)} -> {names(new.per_resource)}"]
            if old.per_resource != new.per_resource
            else []
        ),
        "open_changed": (
            [f"{names(old.open_resources)} -> {names(new.open_resources)}"]
            if old.open_resources != new.open_resources
            else []
        ),
        "steps_added": [s.name for s in new.steps if s.name not in old_steps],
        "steps_removed": [s.name for s in old.steps if s.name not in new_steps],
        "completes_only_new": [
            s.name for s in shared if s.completes_run and s.name not in old.terminal_steps
        ],
        "completes_only_old": [
            s.name
            for s in old.steps
            if s.completes_run and s.name in new_steps and s.name not in new.terminal_steps
        ],
        "requires_changed": [
            f"{s.name}: {names(old_steps[s.name].requires)} -> {names(s.requires)}"
            for s in shared
            if old_steps[s.name].requires != s.requires
        ],
        "approval_changed": [
            f"{s.name}: "
            + " -> ".join(
                "needs approval" if step.needs_approval else "no approval"
                for step in (old_steps[s.name], s)
            )
            for s in shared
            if old_steps[s.name].needs_approval != s.needs_approval
        ],
        "resource_argument_changed": [
            f"{s.name}: {old_steps[s.name].resource_argument or 'the one resource'} -> "
            f"{s.resource_argument or 'the one resource'}"
            for s in shared
            if old_steps[s.name].resource_argument != s.resource_argument
        ],
        "workflow_changed": (
            [f"ready_when_passed: {names(old.workflow_keys)} -> {names(new.workflow_keys)}"]
            if old.workflow_keys != new.workflow_keys
            else []
        ),
        "order_changed": [
            *reordered("evidence.keys", list(old.keys), list(new.keys)),
            *reordered("resources.allowed", list(old.resources), list(new.resources)),
            *reordered("steps", [s.name for s in old.steps], [s.name for s in new.steps]),
        ],
    }


def decision_difference(
    old: Policy,
    new: Policy,
    model: MachineModel | None = None,
    model_class: type = Run,
    *,
    old_model: MachineModel | None = None,
    old_model_class: type | None = None,
) -> DecisionDifference | None:
    """A (minimal) evidence assignment on which the old and the new policy's controller
    decide a commit plan differently, or None when z3 proves they never do, over what
    both share: the keys both declare, and the steps that complete the run under both
    (``policy_changes`` names the others). A key one policy declares and the other
    does not is first taken as never observed in that policy's run (Unknown, as the
    contract reads a key never observed), so a prerequisite added or removed with its
    key shows as the decision it changes; when no difference shows that way, in any
    state (one gate waiting on ``access``, the other on ``owner``: they differ when
    one is Passed). The witness gives the shared keys and, apart, those keys.
    ``model``/``model_class`` build the new controller's gate, ``old_model``/
    ``old_model_class`` the old one's (default: the same), so an older declaration or
    older bodies can be compared too."""
    model = model or _declaration()
    builds = {
        "old": (old_model or model, old_model_class or model_class),
        "new": (model, model_class),
    }
    # Over what both policies share (``policy_changes`` reports the rest first): the
    # shared keys, the steps both let complete the run. A key of one policy only is
    # first asked never observed; when that shows no difference, any state.
    keys = [k for k in new.keys if k in old.keys]
    shared = {k: z3.Const(f"evidence[{k}]", EVIDENCE.sort) for k in keys}
    own_keys = [k for k in old.keys if k not in new.keys] + [
        k for k in new.keys if k not in old.keys
    ]
    own = {k: z3.Const(f"evidence[{k}]", EVIDENCE.sort) for k in own_keys}
    unknown = EVIDENCE.const(EvidenceState.UNKNOWN)
    steps = [s.name for s in new.steps if s.completes_run and s.name in old.terminal_steps]
    for never_observed in (True, False) if own else (True,):
        for step in steps:
            constraints: list[z3.BoolRef] = []
            decisions: list[z3.BoolRef] = []
            for label, policy in (("old", old), ("new", new)):
                declaration, bodies = builds[label]
                gate = commit_gate(policy, step, declaration, bodies, prefix=f"{label}.{step}.")
                constraints.append(gate.premise)
                constraints += [gate.evidence[k] == {**shared, **own}[k] for k in policy.keys]
                decisions.append(gate.opens)
            if never_observed:
                constraints += [term == unknown for term in own.values()]
            constraints.append(decisions[0] != decisions[1])
            witness = _minimal_model(constraints, {**shared, **own})
            if witness is None:
                continue
            return DecisionDifference(
                step,
                _assignment(witness, shared),
                z3.is_true(witness.eval(decisions[0], model_completion=True)),
                z3.is_true(witness.eval(decisions[1], model_completion=True)),
                _assignment(witness, own),
            )
    return None


# ---- proving the invariants ------------------------------------------------------------------


Query = tuple[str, Sequence[z3.BoolRef], z3.BoolRef, StepEncoding | None, State | None]


class Satisfiable:
    """The premises already found satisfiable (each property asks again of the same
    premises of one event's step: the vacuity check is made once per premise set,
    not once per property, about 10 s of z3 time at 300 keys). Keyed by the
    premises' z3 terms, which the cache keeps alive so that no other term takes
    their ids."""

    def __init__(self) -> None:
        self._known: dict[tuple[int, ...], Sequence[z3.BoolRef]] = {}

    @staticmethod
    def _key(premises: Sequence[z3.BoolRef]) -> tuple[int, ...]:
        return tuple(p.get_id() for p in premises)

    def __contains__(self, premises: Sequence[z3.BoolRef]) -> bool:
        return self._key(premises) in self._known

    def add(self, premises: Sequence[z3.BoolRef]) -> None:
        self._known[self._key(premises)] = list(premises)


def _check(
    name: str,
    kind: str,
    statement: str,
    queries: Sequence[Query],
    universe: Universe,
    satisfiable: Satisfiable | None = None,
) -> PropertyResult:
    """Each query is (label, premises, goal, step, state): the premises must imply the
    goal. The first query whose premises and negated goal are satisfiable gives the
    counterexample. Premises that are unsatisfiable on their own would make the proof
    vacuous: that is a failure too, never a proof (``satisfiable``: premises already
    found satisfiable, not asked again)."""
    started = time.perf_counter()
    for label, premises, goal, step, state in queries:
        interrupt.check()  # Ctrl-C between obligations (z3 itself is interrupted)
        solver = _solver()
        solver.add(*premises)
        known = satisfiable is not None and premises in satisfiable
        verdict = z3.sat if known else solver.check()
        if verdict == z3.sat:
            if satisfiable is not None and not known:
                satisfiable.add(premises)
            solver.add(z3.Not(goal))
            verdict = solver.check()
            if verdict == z3.unsat:
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
        model = solver.model()
        if step is not None:
            description = describe_step(model, step)
            try:
                description["replay"] = _induction_replay(model, step, name, label)
            except (PolicyError, ValueError, KeyError, TypeError) as error:
                # the proof's verdict stands; only the replayable form is missing
                description["unreplayable"] = f"{type(error).__name__}: {error}"
            message = f"{label}: counterexample to induction\n{step_text(description)}"
        else:
            assert state is not None
            description = {"state": describe_state(model, universe, state)}
            message = f"{label}: violated by {_state_line(description['state'])}"
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


def _induction_replay(
    model: z3.ModelRef, step: StepEncoding, name: str, label: str
) -> dict[str, Any]:
    """A counterexample to induction as ``replan replay`` runs it: the policy at the
    model's limits, the state before the step (made concrete) and the step's call."""
    from replan.verification.core.harness import _arguments
    from replan.verification.engines.prove.concrete import Concretizer

    concrete = Concretizer(model, step.universe)
    operation = concrete.operation(step)
    return {
        "policy": policy_to_dict(concrete.policy(step.universe.policy)),
        "property": name,
        "source": "prove",
        "check": "induction",
        "obligation": label,
        "event": step.event,
        "start": concrete.snapshot(step.pre, concrete.step_ids(step), concrete.step_entries(step)),
        "steps": [{"op": operation.op, "args": _arguments(operation), "result": None}],
    }


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


def prove_invariants(
    policy: Policy,
    model: MachineModel | None = None,
    model_class: type = Run,
    *,
    events: Sequence[str] | None = None,
    initial: bool = True,
    tick: Callable[[PropertyResult], PropertyResult] = _unreported,
    contract: Contract | None = None,
) -> list[PropertyResult]:
    """Every property of ``spec/properties.py`` over every event's step, the limits
    symbolic: the state invariants (auxiliary and the contract's) inductive, each call
    property for every step from a state satisfying them, and the bodies'
    well-definedness on such states. ``events`` (default: all) and ``initial``
    restrict the obligations to those steps (``replan mutate`` proves only what a
    mutant changed: the rest is the same question as for the original)."""
    model = model or _declaration()
    u = Universe(policy, model, symbolic_limits=True)
    translator = Translator(u, model_class)
    init = initial_state(u, model_class)
    chosen = model.events if events is None else [e for e in model.events if e in events]
    steps = [encode_event(u, event, model_class) for event in chosen]
    contract = contract_or_default(contract)
    reachable = Reachable(translator, contract)
    premises = {step.event: [*step.assumptions, *reachable(step.pre)] for step in steps}
    satisfiable = Satisfiable()
    results = []
    for prop in reachable.invariants:
        queries: list[Query] = (
            [("Init ⇒ Inv", u.assumptions, state_term(translator, prop, init), None, init)]
            if initial
            else []
        )
        queries += [
            (
                f"Inv ∧ {step.event} ⇒ Inv'",
                premises[step.event],
                state_term(translator, prop, step.post),
                step,
                None,
            )
            for step in steps
        ]
        statement = f"{prop.meaning} (Init ⇒ Inv, Inv ∧ Step ⇒ Inv'; limits symbolic)"
        if queries:
            results.append(tick(_check(prop.name, prop.kind, statement, queries, u, satisfiable)))
    for prop in contract.of_kind("initial") if initial else []:
        frame = property_frame(translator, init, f"initial {prop.name!r}")
        _, value = translator.run_function(
            prop.function, [StateRef(init), POLICY], frame, state=init, where=prop.name
        )
        term = translator.boolean(frame, value)
        queries = [("Init ⇒ " + prop.name, u.assumptions, term, None, init)]
        statement = f"{prop.meaning} (Init)"
        results.append(tick(_check(prop.name, "initial", statement, queries, u, satisfiable)))
    for prop in contract.of_kind("call"):
        relevant = [s for s in steps if prop.applies_to(s.event) and s.models(prop)]
        if not relevant:
            continue
        queries = [
            (
                f"Reach ∧ {step.event} ⇒ {prop.name}",
                premises[step.event],
                call_term(translator, prop, step),
                step,
                None,
            )
            for step in relevant
        ]
        statement = f"{prop.meaning} (every step from a reachable state; limits symbolic)"
        results.append(tick(_check(prop.name, "property", statement, queries, u, satisfiable)))
    obligations: list[Query] = [
        (
            f"{step.event}: {obligation.text}",
            premises[step.event],
            obligation.condition,
            step,
            None,
        )
        for step in steps
        for obligation in step.obligations
    ]
    results.append(
        tick(
            _check(
                "bodies-well-defined",
                "well-defined",
                f"{len(obligations)} conditions the bodies take for granted (no None "
                "dereference, no missing key, a transition for every case) hold when reached",
                obligations,
                u,
                satisfiable,
            )
        )
    )
    return results


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
    model = model or _declaration()
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
            solver = _solver()
            solver.add(*premises, step.fired == transition.index)
            if _solve(solver) == z3.unsat:
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
    model = model or _declaration()
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
