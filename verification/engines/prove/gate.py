"""The commit gate as z3 derives it, and the evidence witnesses read from it.

Owns ``commit_gate``: the ``execute`` step relation of one ``completes_run`` step from
a state where a current, in-budget plan for it is pending, open when the answer is
``Executed``; ``ready_to_commit``, ``decide``'s definition from the contract; and the
helpers that turn a solver's model into a readable evidence assignment. The
equivalence proof (``engine.py``) and the policy comparison (``difference.py``) both
ask their questions of this gate, so it is derived once, the same way, for both.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import z3  # type: ignore[import-untyped]

from replan.controller.policy import Policy
from replan.controller.records import ADMITTED
from replan.controller.run import Run
from replan.spec.contract import Contract
from replan.spec.model import MachineModel
from replan.verification.translate.property_terms import (
    Reachable,
)
from replan.verification.translate.symbolic import (
    EVIDENCE,
    FormulaOnRuns,
    StepEncoding,
    Translator,
    Universe,
    all_of,
    any_of,
    encode_event,
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


def declaration_model() -> MachineModel:
    from replan.spec.declaration import Replanning
    from replan.spec.model import extract

    return extract(Replanning)


def simplifying_solver() -> z3.Solver:
    """A solver that first simplifies and eliminates what the step relation defines
    (the post-state is a term over the pre-state): a stopped run's unchanged arrays
    are decided at once instead of by case splits (0.7 s -> 15 ms for observe)."""
    tactic = z3.Then("simplify", "propagate-values", "solve-eqs", "elim-uncnstr", "smt")
    return tactic.solver()


def solve(solver: z3.Solver) -> z3.CheckSatResult:
    verdict = solver.check()
    if verdict == z3.unknown:
        raise RuntimeError(f"z3 could not decide ({solver.reason_unknown()})")
    return verdict


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
    model = model or declaration_model()
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


def minimal_model(
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


def evidence_assignment(model: z3.ModelRef, evidence: Mapping[str, z3.ExprRef]) -> dict[str, str]:
    return {
        key: EVIDENCE.name_of(model.eval(term, model_completion=True))
        for key, term in evidence.items()
    }


def not_passed_pattern(
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
        pattern[key] = NOT_PASSED if solve(solver) == z3.sat else value
    return pattern


def render_assignment(assignment: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in assignment.items())
