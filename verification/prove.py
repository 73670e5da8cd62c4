"""``replan prove``: z3 proofs over the controller's step relation.

Owns what is proved and how it is reported: (1) the commit equivalence of
CONTRACT.md "Fixed workflow baseline": for every assignment of Unknown/Passed/Failed
to the evidence keys, an active run with a current, in-budget commit plan pending
executes it exactly when ``decide`` says ``ReadyToCommit``; (2) the contract's safety
invariants, proved inductive over one step of the controller with the limits left
symbolic (``Init ⇒ Inv`` and ``Inv ∧ Step ⇒ Inv'``, strengthened by the auxiliary
invariants of ``spec/invariants.py``), so they hold in every reachable state for any
``max_steps``, ``max_proposals`` and ``no_progress_limit``; (3) ``decision_difference``:
evidence on which two policies' commit decisions differ, for ``replan verify
--against``.

The controller side is never restated here: the gate and the step relation come from
``verification.symbolic.encode_event``, which reads the declaration's transitions and
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

from controller.policy import Policy, policy_to_dict
from controller.records import EvidenceState, ExecuteResult, Observation, Plan
from controller.run import Run
from controller.workflow import decide
from spec.model import MachineModel
from verification.symbolic import (
    EVIDENCE,
    FIELD_KINDS,
    UNDECLARED,
    ContentMap,
    FMap,
    FormulaOnRuns,
    IdSet,
    Opt,
    Record,
    State,
    StepEncoding,
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


def _declaration() -> MachineModel:
    from spec.declaration import Replanning
    from spec.model import extract

    return extract(Replanning)


# ---- results -----------------------------------------------------------------------


@dataclass
class PropertyResult:
    """One proof obligation: proved, or failed with a counterexample."""

    name: str
    kind: str  # equivalence | invariant | auxiliary | well-defined
    proved: bool
    seconds: float
    statement: str
    message: str = ""  # the readable counterexample when not proved
    counterexample: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "status": "proved" if self.proved else "failed",
            "milliseconds": round(self.seconds * 1000, 2),
            "statement": self.statement,
        }
        if not self.proved:
            document["message"] = self.message
            document["counterexample"] = self.counterexample
        return document


@dataclass
class ProofReport:
    """Everything ``replan prove`` proved (or refuted) for one policy."""

    policy: Policy
    digest: str
    results: list[PropertyResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(r.proved for r in self.results)

    @property
    def failures(self) -> list[PropertyResult]:
        return [r for r in self.results if not r.proved]

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": "replan prove",
            "proved": self.ok,
            "declaration": self.digest,
            "policy": policy_to_dict(self.policy),
            "seconds": round(self.seconds, 4),
            "properties": [r.to_json() for r in self.results],
        }

    def text(self) -> str:
        lines = []
        for result in self.results:
            status = "proved" if result.proved else "FAILED"
            milliseconds = f"{result.seconds * 1000:8.1f} ms"
            lines.append(f"  {status:6}  {result.name:30} {milliseconds}   {result.statement}")
            if not result.proved:
                lines.extend(f"          {line}" for line in result.message.splitlines())
        proved = sum(r.proved for r in self.results)
        lines.append(
            f"{proved} of {len(self.results)} properties proved in {self.seconds:.2f} s"
            + ("" if self.ok else f"; {len(self.failures)} failed")
        )
        return "\n".join(lines)


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
        *(inv.holds(u, pre) for inv in AUXILIARY),
        *encoding.assumptions,
    )
    evidence = {k: u.evidence_state(pre, k) for k in policy.keys}
    opens = encoding.answer == u.answer_of(ExecuteResult.EXECUTED)
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
    policy: Policy, model: MachineModel | None = None, model_class: type = Run
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
        gate = commit_gate(policy, step, model, model_class)
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
        finding = equivalence_finding(policy, step, assignment, model, model_class)
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
    from verification.harness import Operation

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
    step: str,
    assignment: Mapping[str, str],
    model: MachineModel | None = None,
    model_class: type = Run,
) -> Any:
    """The counterexample as the shared ``Finding`` (replayable), with the results the
    generated controller really gives."""
    from verification.harness import Finding, apply

    model = model or _declaration()
    controller_class = _controller_class(model, model_class)
    controller = controller_class(policy)
    operations = equivalence_operations(policy, step, assignment)
    results = [apply(controller, operation) for operation in operations]  # type: ignore[arg-type]
    decision = decide({k: EvidenceState(v) for k, v in assignment.items()}, policy)
    return Finding(
        "commit-equivalence",
        policy,
        operations,
        results,
        message=f"execute answered {results[-1]}, decide says {decision}",
        source="prove",
    )


def _controller_class(model: MachineModel, model_class: type) -> type[Run]:
    from spec.generator import load_controller

    if model_class is Run and model == _declaration():
        from controller import Controller

        return Controller
    return load_controller(model, model_class, "prove")


@dataclass
class DecisionDifference:
    """Evidence on which two policies decide a commit differently."""

    step: str
    assignment: dict[str, str]
    old_commits: bool
    new_commits: bool

    def text(self) -> str:
        old = "commits" if self.old_commits else "refuses"
        new = "commits" if self.new_commits else "refuses"
        return f"{_render(self.assignment)}: {self.step}: old policy {old}, new policy {new}"

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "assignment": self.assignment,
            "old": "commits" if self.old_commits else "refuses",
            "new": "commits" if self.new_commits else "refuses",
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
    decide a commit plan differently, or None when z3 proves they never do. A step
    that is not a ``completes_run`` step of a policy is never committed under it.
    ``model``/``model_class`` build the new controller's gate, ``old_model``/
    ``old_model_class`` the old one's (default: the same), so an older declaration or
    older bodies can be compared too."""
    model = model or _declaration()
    builds = {
        "old": (old_model or model, old_model_class or model_class),
        "new": (model, model_class),
    }
    keys = list(dict.fromkeys([*old.keys, *new.keys]))
    shared = {k: z3.Const(f"evidence[{k}]", EVIDENCE.sort) for k in keys}
    steps = list(dict.fromkeys(s.name for p in (old, new) for s in p.steps if s.completes_run))
    for step in steps:
        constraints: list[z3.BoolRef] = []
        decisions: list[z3.BoolRef] = []
        for label, policy in (("old", old), ("new", new)):
            if step in policy.terminal_steps:
                declaration, bodies = builds[label]
                gate = commit_gate(policy, step, declaration, bodies, prefix=f"{label}.{step}.")
                constraints.append(gate.premise)
                constraints += [gate.evidence[k] == shared[k] for k in policy.keys]
                decisions.append(gate.opens)
            else:
                decisions.append(z3.BoolVal(False))
        constraints.append(decisions[0] != decisions[1])
        witness = _minimal_model(constraints, shared)
        if witness is None:
            continue
        assignment = _assignment(witness, shared)
        return DecisionDifference(
            step,
            assignment,
            z3.is_true(witness.eval(decisions[0], model_completion=True)),
            z3.is_true(witness.eval(decisions[1], model_completion=True)),
        )
    return None


# ---- invariants over the step relation ----------------------------------------------------


@dataclass(frozen=True)
class StateInvariant:
    """A predicate over one state: proved ``Init ⇒ I`` and ``I ∧ Aux ∧ Step ⇒ I'``."""

    name: str
    meaning: str
    holds: Callable[[Universe, State], z3.BoolRef]
    #: assumed before the step by every other proof (mutual induction); one stated for
    #: an arbitrary value of a free constant is not (it would assume it for one value)
    shared: bool = True


@dataclass(frozen=True)
class StepInvariant:
    """A predicate over one step (before, argument, answer, after): proved for every
    step from a state satisfying the auxiliary invariants (so every reachable step)."""

    name: str
    meaning: str
    holds: Callable[[StepEncoding], z3.BoolRef]


def _mode(state: State) -> z3.ExprRef:
    return state["_declared_state"]


def _stopped(u: Universe, state: State) -> z3.BoolRef:
    return z3.Or(*(_mode(state) == f for f in u.final_modes))


def _plan(state: State) -> Opt:
    plan: Opt = state["_pending"]
    return plan


def _answer_is(step: StepEncoding, *values: object) -> z3.BoolRef:
    return z3.Or(*(step.answer == step.universe.answer_of(v) for v in values))


def _same_fields(a: State, b: State, names: Sequence[str]) -> z3.BoolRef:
    from verification.symbolic import _same

    return z3.And(*(_same(a[n], b[n]) for n in names))


def _unchanged_except(step: StepEncoding, *changing: str) -> z3.BoolRef:
    return _same_fields(step.pre, step.post, [n for n in FIELD_KINDS if n not in changing])


def _lookup(fmap: FMap, key: z3.ExprRef, default: z3.ExprRef) -> z3.ExprRef:
    result = default
    for name, entry in fmap.entries.items():
        member = fmap.domain.members[name]
        result = z3.If(z3.And(key == member, entry.some), entry.value, result)
    return result


def _requirements_passed(u: Universe, state: State, step_term: z3.ExprRef) -> z3.BoolRef:
    """Every key the named step requires is Passed in ``state`` (a step the policy
    does not declare requires nothing, as ``requirements.get(step, ())``)."""
    return z3.And(
        *(
            z3.Implies(
                step_term == u.step.members[s.name],
                z3.And(*(u.evidence_state(state, k) == PASSED for k in s.requires)),
            )
            for s in u.policy.steps
        )
    )


def _meaningful(step: StepEncoding) -> z3.BoolRef:
    """CONTRACT observe rule 7, from the state before (as ``spec.invariants.meaningful``):
    a valid observation on an active run, of a (key, version) never seen, not older
    than the key's latest, whose state differs from the key's state."""
    if step.event != "observe" or not isinstance(step.argument, Record):
        return z3.BoolVal(False)
    u, pre, obs = step.universe, step.pre, step.argument.fields
    contents: ContentMap = pre["_contents"]
    from verification.symbolic import CONTENT

    seen = CONTENT.is_some(z3.Select(contents.array, obs["key"], obs["version"]))
    latest = _lookup(pre["_latest_version"], obs["key"], z3.IntVal(0))
    known = _lookup(pre["_known"], obs["key"], UNKNOWN)
    return z3.And(
        z3.Not(step.raised),
        z3.Not(_stopped(u, pre)),
        z3.Not(seen),
        z3.Not(latest > obs["version"]),
        obs["state"] != known,
    )


def _passed_tracks_known(u: Universe, state: State) -> z3.BoolRef:
    members = state["_passed"].members
    return all_of(*(members[k] == u.is_passed(state, k) for k in u.policy.keys))


def _pending_matches_state(u: Universe, state: State) -> z3.BoolRef:
    plan = _plan(state)
    return z3.And(
        z3.Implies(_mode(state) == u.mode_of("idle"), z3.Not(plan.some)),
        z3.Implies(
            _mode(state) == u.mode_of("pending"),
            z3.And(plan.some, plan.value.fields["step"] != u.step.members[UNDECLARED]),
        ),
    )


def _pending_not_completed(u: Universe, state: State) -> z3.BoolRef:
    plan = _plan(state)
    completed: IdSet = state["_completed"]
    return z3.Implies(plan.some, z3.Not(z3.Select(completed.array, plan.value.fields["id"])))


def _counters_in_range(u: Universe, state: State) -> z3.BoolRef:
    return z3.And(
        state["_evidence_revision"] >= 1,
        *(state[name] >= 0 for name in ("_plan_revision", "_steps", "_proposals", "_no_progress")),
    )


#: The auxiliary invariants of spec/invariants.py ("Auxiliary invariants"), in z3.
AUXILIARY: tuple[StateInvariant, ...] = (
    StateInvariant(
        "counters-in-range",
        "evidence_revision >= 1; plan_revision, steps, proposals, no_progress >= 0",
        _counters_in_range,
    ),
    StateInvariant(
        "passed-tracks-known",
        "a key is in the passed set exactly when its latest state is Passed",
        _passed_tracks_known,
    ),
    StateInvariant(
        "pending-matches-state",
        "idle has no pending plan; pending has one, naming a declared step",
        _pending_matches_state,
    ),
    StateInvariant(
        "pending-not-completed",
        "the pending plan's id has never been executed",
        _pending_not_completed,
    ),
)


#: CONTRACT.md's state invariants, in z3.
def _latest_is_newest(u: Universe, state: State) -> z3.BoolRef:
    """For each key: a remembered version is at most the latest recorded one, and the
    latest recorded version is remembered (so it is the highest seen).

    "Every remembered version" is a quantifier; it is stated for one arbitrary
    version ``any_version``, a free constant, instead. Proving ``P(s, v) ∧ Step ⇒
    P(s', v)`` for a free ``v`` is sound for ``∀v. P`` (the premise is the quantified
    one instantiated at ``v``, so weaker) and keeps every query quantifier-free: z3
    then always answers, and a counterexample names the offending version."""
    from verification.symbolic import CONTENT

    contents: ContentMap = state["_contents"]
    version = z3.Int("any_version")
    parts = []
    for key in u.policy.keys:
        latest = state["_latest_version"].entries[key]
        member = u.key.members[key]
        remembered = CONTENT.is_some(z3.Select(contents.array, member, version))
        newest = CONTENT.is_some(z3.Select(contents.array, member, latest.value))
        parts.append(z3.Implies(remembered, z3.And(latest.some, version <= latest.value)))
        parts.append(z3.Implies(latest.some, newest))
    return all_of(*parts)


STATE_INVARIANTS: tuple[StateInvariant, ...] = (
    StateInvariant(
        "step-bound", "steps <= max_steps", lambda u, s: s["_steps"] <= u.limits["max_steps"]
    ),
    StateInvariant(
        "proposal-bound",
        "proposals <= max_proposals",
        lambda u, s: s["_proposals"] <= u.limits["max_proposals"],
    ),
    StateInvariant(
        "pending-current",
        "a pending plan cites the current evidence revision",
        lambda u, s: z3.Implies(
            _plan(s).some, _plan(s).value.fields["evidence_revision"] == s["_evidence_revision"]
        ),
    ),
    StateInvariant(
        "latest-is-newest",
        "the latest record of a key has the highest version seen for it",
        _latest_is_newest,
        shared=False,
    ),
)


def _commit_grounded(step: StepEncoding) -> z3.BoolRef:
    if step.event != "execute":
        return z3.BoolVal(True)
    plan = _plan(step.pre)
    return z3.Implies(
        _answer_is(step, ExecuteResult.EXECUTED),
        z3.And(
            plan.some,
            plan.value.fields["id"] == step.argument,
            _requirements_passed(step.universe, step.pre, plan.value.fields["step"]),
        ),
    )


def _stop_absorbing(step: StepEncoding) -> z3.BoolRef:
    quiet = _answer_is(step, False, None, ExecuteResult.REPLAYED, ExecuteResult.STOPPED)
    return z3.Implies(
        _stopped(step.universe, step.pre),
        z3.And(_unchanged_except(step), z3.Or(step.raised, quiet)),
    )


def _revision_honest(step: StepEncoding) -> z3.BoolRef:
    rise = step.post["_evidence_revision"] - step.pre["_evidence_revision"]
    return rise == z3.If(_meaningful(step), 1, 0)


def _completed_iff_terminal_step(step: StepEncoding) -> z3.BoolRef:
    u = step.universe
    completed = u.mode_of("completed")
    newly = z3.And(_mode(step.pre) != completed, _mode(step.post) == completed)
    if step.event != "execute":
        return z3.Not(newly)
    plan = _plan(step.pre)
    terminal = z3.Or(
        *(plan.value.fields["step"] == u.step.members[s] for s in sorted(u.policy.terminal_steps))
    )
    executed = z3.And(_answer_is(step, ExecuteResult.EXECUTED), plan.some, terminal)
    return newly == executed


def _replay_inert(step: StepEncoding) -> z3.BoolRef:
    if step.event != "execute":
        return z3.BoolVal(True)
    completed: IdSet = step.pre["_completed"]
    done = z3.Select(completed.array, step.argument)
    return z3.And(
        z3.Implies(_answer_is(step, ExecuteResult.REPLAYED), z3.And(_unchanged_except(step), done)),
        z3.Implies(_answer_is(step, ExecuteResult.EXECUTED), z3.Not(done)),
    )


def _rejection_atomic(step: StepEncoding) -> z3.BoolRef:
    mode = "_declared_state"
    parts = [z3.Implies(step.raised, _unchanged_except(step))]
    if step.event == "propose":
        parts.append(
            z3.Implies(_answer_is(step, False), _unchanged_except(step, "_proposals", mode))
        )
    if step.event == "execute":
        parts.append(
            z3.Implies(
                z3.Not(_answer_is(step, ExecuteResult.EXECUTED)), _unchanged_except(step, mode)
            )
        )
    if step.event == "observe":
        parts.append(
            z3.Implies(
                _answer_is(step, False),
                _unchanged_except(step, "_no_progress", "_contents", "_latest_version", mode),
            )
        )
    return z3.And(*parts)


#: CONTRACT.md's step invariants, in z3.
STEP_INVARIANTS: tuple[StepInvariant, ...] = (
    StepInvariant(
        "commit-grounded",
        "every executed step had all its required keys Passed when it ran",
        _commit_grounded,
    ),
    StepInvariant(
        "revision-honest",
        "evidence_revision rises by exactly 1 on a meaningful observation, never otherwise",
        _revision_honest,
    ),
    StepInvariant(
        "stop-absorbing",
        "once stopped, nothing changes and only False/None/Replayed/Stopped come out",
        _stop_absorbing,
    ),
    StepInvariant("replay-inert", "Replayed changes nothing; no id executes twice", _replay_inert),
    StepInvariant(
        "rejection-atomic",
        "a rejected call or a raised error changes nothing beyond its counters and stop",
        _rejection_atomic,
    ),
    StepInvariant(
        "completed-iff-terminal-step",
        "the run stops Completed exactly when a completes_run step executed",
        _completed_iff_terminal_step,
    ),
)

CONTRACT_INVARIANTS: tuple[str, ...] = (
    *(i.name for i in STATE_INVARIANTS),
    *(i.name for i in STEP_INVARIANTS),
)


# ---- describing counterexamples ------------------------------------------------------------


def _value(model: z3.ModelRef, term: z3.ExprRef, u: Universe) -> Any:
    found = model.eval(term, model_completion=True)
    if z3.is_int_value(found):
        return found.as_long()
    if z3.is_true(found) or z3.is_false(found):
        return z3.is_true(found)
    domain = u.domain_of(found.sort())
    return domain.name_of(found) if domain is not None else str(found)


def describe_state(model: z3.ModelRef, u: Universe, state: State) -> dict[str, Any]:
    """The readable part of an abstract state in a model: declared state, counters,
    the pending plan and each key's evidence state."""
    plan = _plan(state)
    pending = None
    if _value(model, plan.some, u):
        pending = {name: _value(model, term, u) for name, term in plan.value.fields.items()}
        pending["id"] = f"#{pending['id']}"
    return {
        "state": _value(model, _mode(state), u),
        "evidence_revision": _value(model, state["_evidence_revision"], u),
        "plan_revision": _value(model, state["_plan_revision"], u),
        "steps": _value(model, state["_steps"], u),
        "proposals": _value(model, state["_proposals"], u),
        "no_progress": _value(model, state["_no_progress"], u),
        "pending": pending,
        "evidence": {k: _value(model, u.evidence_state(state, k), u) for k in u.policy.keys},
        "latest_version": {
            k: _value(model, e.value, u) if _value(model, e.some, u) else None
            for k, e in state["_latest_version"].entries.items()
        },
        "passed": [k for k in u.policy.keys if _value(model, state["_passed"].members[k], u)],
    }


def _describe_argument(model: z3.ModelRef, step: StepEncoding) -> Any:
    argument = step.argument
    if isinstance(argument, Record):
        fields = {n: _value(model, t, step.universe) for n, t in argument.fields.items()}
        for name in ("id", "source"):
            if name in fields:
                fields[name] = f"#{fields[name]}"
        return fields
    if isinstance(argument, z3.ExprRef):
        return f"#{_value(model, argument, step.universe)}"
    return None


def describe_step(model: z3.ModelRef, step: StepEncoding) -> dict[str, Any]:
    u = step.universe
    fired = _value(model, step.fired, u)
    free = {d.name(): d for d in model.decls()}
    return {
        "limits": {name: _value(model, term, u) for name, term in u.limits.items()},
        **(
            {"any_version": _value(model, z3.Int("any_version"), u)}
            if "any_version" in free
            else {}
        ),
        "before": describe_state(model, u, step.pre),
        "event": step.event,
        "argument": _describe_argument(model, step),
        "inputs": {text: _value(model, term, u) for text, term in step.inputs.items()},
        "transition": step.label_of(fired),
        "answer": _value(model, step.answer, u),
        "after": describe_state(model, u, step.post),
    }


def _state_line(state: Mapping[str, Any]) -> str:
    pending = state["pending"]
    plan = (
        "none"
        if pending is None
        else f"{pending['id']} {pending['step']} (evidence_revision {pending['evidence_revision']})"
    )
    versions = state.get("latest_version", {})
    evidence = ", ".join(
        f"{k}={v}" + (f"@v{versions[k]}" if versions.get(k) is not None else "")
        for k, v in state["evidence"].items()
    )
    return (
        f"{state['state']}; evidence_revision={state['evidence_revision']} "
        f"steps={state['steps']} proposals={state['proposals']} "
        f"no_progress={state['no_progress']}; pending={plan}; {evidence or 'no keys'}"
    )


def step_text(description: Mapping[str, Any]) -> str:
    limits = ", ".join(f"{k}={v}" for k, v in description["limits"].items())
    if "any_version" in description:
        limits += f"; the offending version: {description['any_version']}"
    return "\n".join(
        [
            f"limits: {limits}",
            f"before: {_state_line(description['before'])}",
            f"{description['event']}({description['argument']}) fires "
            f"`{description['transition']}` -> {description['answer']}",
            f"after:  {_state_line(description['after'])}",
        ]
    )


# ---- proving the invariants ------------------------------------------------------------------


Query = tuple[str, Sequence[z3.BoolRef], z3.BoolRef, StepEncoding | None, State | None]


def _check(
    name: str, kind: str, statement: str, queries: Sequence[Query], universe: Universe
) -> PropertyResult:
    """Each query is (label, premises, goal, step, state): the premises must imply the
    goal. The first query whose premises and negated goal are satisfiable gives the
    counterexample. Premises that are unsatisfiable on their own would make the proof
    vacuous: that is a failure too, never a proof."""
    started = time.perf_counter()
    for label, premises, goal, step, state in queries:
        solver = _solver()
        solver.add(*premises)
        verdict = solver.check()
        if verdict == z3.sat:
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


def prove_invariants(
    policy: Policy, model: MachineModel | None = None, model_class: type = Run
) -> list[PropertyResult]:
    """The auxiliary and contract invariants, inductive over every event's step with
    the limits symbolic, plus the bodies' well-definedness on reachable states."""
    model = model or _declaration()
    u = Universe(policy, model, symbolic_limits=True)
    init = initial_state(u, model_class)
    steps = [encode_event(u, event, model_class) for event in model.events]

    def aux(state: State) -> list[z3.BoolRef]:
        # Mutual induction: every state invariant may assume all of them before the
        # step (sound once each is proved: their conjunction is then inductive).
        return [inv.holds(u, state) for inv in (*AUXILIARY, *STATE_INVARIANTS) if inv.shared]

    results = []
    for inv in (*AUXILIARY, *STATE_INVARIANTS):
        auxiliary = inv in AUXILIARY
        queries: list[Query] = [("Init ⇒ Inv", u.assumptions, inv.holds(u, init), None, init)]
        queries += [
            (
                f"Inv ∧ {step.event} ⇒ Inv'",
                [*step.assumptions, inv.holds(u, step.pre), *aux(step.pre)],
                inv.holds(u, step.post),
                step,
                None,
            )
            for step in steps
        ]
        statement = f"{inv.meaning} (Init ⇒ Inv, Inv ∧ Step ⇒ Inv'; limits symbolic)"
        results.append(
            _check(inv.name, "auxiliary" if auxiliary else "invariant", statement, queries, u)
        )
    for prop in STEP_INVARIANTS:
        queries = [
            (
                f"Reach ∧ {step.event} ⇒ {prop.name}",
                [*step.assumptions, *aux(step.pre)],
                prop.holds(step),
                step,
                None,
            )
            for step in steps
        ]
        statement = f"{prop.meaning} (every step from a reachable state; limits symbolic)"
        results.append(_check(prop.name, "invariant", statement, queries, u))
    obligations: list[Query] = [
        (
            f"{step.event}: {obligation.text}",
            [*step.assumptions, *aux(step.pre)],
            obligation.condition,
            step,
            None,
        )
        for step in steps
        for obligation in step.obligations
    ]
    results.append(
        _check(
            "bodies-well-defined",
            "well-defined",
            f"{len(obligations)} conditions the bodies take for granted (no None "
            "dereference, no missing key, a transition for every case) hold when reached",
            obligations,
            u,
        )
    )
    return results


def prove_all(
    policy: Policy, model: MachineModel | None = None, model_class: type = Run
) -> ProofReport:
    """Everything ``replan prove`` proves: the commit equivalence, the invariants."""
    started = time.perf_counter()
    model = model or _declaration()
    report = ProofReport(policy, model.digest)
    report.results.append(prove_equivalence(policy, model, model_class))
    report.results.extend(prove_invariants(policy, model, model_class))
    report.seconds = time.perf_counter() - started
    return report
