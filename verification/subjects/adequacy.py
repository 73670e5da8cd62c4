"""Mutation adequacy: does verification fail on every controller that breaks the
contract? Every mutant of ``verification/subjects/mutation.py``, judged.

Owns the verdict on one mutant and the matrix of all of them (``replan mutate``).
A mutant is

- **equivalent** when z3 proves its step relation equal to the original's: from every
  state satisfying the invariants, for every event and argument, the same state after
  and the same answer (and the same initial state). By induction it then behaves as
  the original forever, so no engine could or should fail on it; the proof is the
  reason given;
- **killed** when an engine of ``replan verify`` fails on it: the proofs (only for the
  events it changed: the rest is the original's question, already proved), the policy
  check (a mutated default), the generator (it refuses the declaration), the explorer
  (default domains, stopping at the first violation) or the campaign (the ``ci``
  profile with no reference model: a changed declaration is the new reference);
- **survived** otherwise: a contract rule nobody checks. It is reported with its diff
  and the z3 witness of where it differs from the original.

Only the events a mutant can change are put to z3: those whose declared transitions
differ, or whose step can run a changed body (``reads``: the bodies an event's check,
guards, actions and stopped answer mention, transitively). The others are the
original's relation by construction. The generated controller is made when an engine
first runs it, or to confirm an equivalent mutant generates at all: the proofs kill
most mutants before that (the full matrix on the default declaration: 585 mutants,
the same verdicts as before, about a third of the time).

Leaves building mutants to ``verification/subjects/mutation.py`` and the engines to their
modules.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import z3  # type: ignore[import-untyped]

from replan.controller.policy import DEFAULT_POLICY, Policy, policy_from_dict
from replan.controller.run import Run
from replan.spec.contract import Contract
from replan.spec.model import MachineModel
from replan.verification.subjects.mutation import Mutant, all_mutants

if TYPE_CHECKING:
    from replan.verification.engines.prove.engine import Encoded

ENGINES = ("proofs", "explorer", "campaign")
#: The explorer stops a mutant's search here (a broken controller can make the state
#: space unbounded; its violations show long before).
EXPLORER_STATES = 200_000


@dataclass
class Verdict:
    """What verification made of one mutant."""

    mutant: Mutant
    status: str  # "killed" | "survived" | "equivalent"
    killed_by: str | None = None  # "proofs" | "policy" | "generate" | "explorer" | "campaign"
    properties: list[str] = field(default_factory=list)
    reason: str = ""
    seconds: float = 0.0
    #: per engine, when every engine ran: the properties it found broken ([] = none)
    engines: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "id": self.mutant.id,
            "operator": self.mutant.operator,
            "where": self.mutant.where,
            "description": self.mutant.description,
            "status": self.status,
            "killed_by": self.killed_by,
            "properties": self.properties,
            "reason": self.reason,
            "seconds": round(self.seconds, 3),
        }
        if self.engines:
            document["engines"] = self.engines
        if self.status == "survived":
            document["diff"] = self.mutant.diff
        return document


@dataclass
class Differences:
    """Where a mutant's steps differ from the original's (``Judge.differences``)."""

    events: list[str]
    initial: bool
    witness: str
    #: the mutant's steps of every event compared (its universe and encodings)
    encoded: Encoded


class Judge:
    """Judges mutants of one declaration under one policy. Building it translates
    the original once: its step relation per event, the invariants as premises."""

    def __init__(self, policy: Policy, model: MachineModel, contract: Contract) -> None:
        from replan.verification.engines.prove.engine import Decided
        from replan.verification.translate.property_terms import Reachable
        from replan.verification.translate.symbolic import (
            Translator,
            Universe,
            encode_event,
            initial_state,
        )

        self.policy = policy
        self.model = model
        self.contract = contract
        self.universe = Universe(policy, model, symbolic_limits=True)
        self.original = {e: encode_event(self.universe, e, Run) for e in model.events}
        reachable = Reachable(Translator(self.universe, Run), contract)
        self.premises = {
            e: [*enc.assumptions, *reachable(enc.pre)] for e, enc in self.original.items()
        }
        self.initial = initial_state(self.universe, Run)
        #: what z3 decided for earlier mutants (most obligations of a mutated event
        #: are its other mutants' too: the same terms, decided once)
        self.decided = Decided()
        #: per event, every body of ``Run`` and function of ``controller/run.py`` its
        #: step can run (``reads``)
        self.reads = {e: reads(model, e) for e in model.events}

    def unchanged(self, mutant: Mutant, event: str) -> bool:
        """The mutant's step relation for ``event`` is the original's by construction:
        the same declared transitions and interface for it, and no changed body among
        those it can run. (The encoding reads nothing else, so z3 need not be asked.)"""
        if mutant.model is not self.model and (
            _declared(mutant.model, event) != _declared(self.model, event)
        ):
            return False
        return not (self.reads[event] & {*mutant.methods, *mutant.functions})

    # -- equivalence ---------------------------------------------------------------------

    def differences(self, mutant: Mutant) -> Differences:
        """The events whose step relation the mutant changes, whether it changes the
        initial state, a witness of the first difference (empty when none), and the
        mutant's steps encoded to find them (the proofs take them as they are).

        Long: one symbolic comparison, event by event, with its imports kept local
        (the translator is loaded only when a mutant is judged)."""
        from replan.verification.engines.prove.describe import describe_state
        from replan.verification.engines.prove.engine import Encoded
        from replan.verification.translate.symbolic import (
            Universe,
            encode_event,
            initial_state,
            same_state,
        )

        u = Universe(self.policy, mutant.model, symbolic_limits=True)
        changed: list[str] = []
        witness = ""
        encoded = Encoded(u, {})
        for event, original in self.original.items():
            if self.unchanged(mutant, event):
                continue
            # the original's pre-state and argument are the terms a fresh encoding in
            # ``u`` would make (same names, same sorts): the step is the one the
            # proofs would encode, so they take it from ``encoded``
            encoding = encode_event(
                u, event, mutant.model_class, pre=original.pre, argument=original.argument
            )
            encoded.steps[event] = encoding
            solver = z3.Solver()
            solver.add(*self.premises[event])
            solver.add(
                z3.Not(
                    z3.And(
                        same_state(original.post, encoding.post),
                        original.answer == encoding.answer,
                    )
                )
            )
            verdict = solver.check()
            if verdict == z3.unsat:
                verdict = self._may_fail(event, encoding)
                if verdict == z3.unsat:
                    continue
                changed.append(event)
                witness = witness or (
                    f"{event}: a body reads what may not be there (it can raise where the "
                    "original does not)"
                )
                continue
            changed.append(event)
            if not witness and verdict == z3.sat:
                found = solver.model()
                before = describe_state(found, self.universe, original.pre)
                answer = u.answer.name_of(found.eval(original.answer, model_completion=True))
                changed_answer = u.answer.name_of(
                    found.eval(encoding.answer, model_completion=True)
                )
                witness = (
                    f"{event} from {before['state']} (evidence {before['evidence']}, "
                    f"steps {before['steps']}, proposals {before['proposals']}, "
                    f"no_progress {before['no_progress']}): the original answers {answer}, "
                    f"the mutant {changed_answer}"
                    + ("" if answer != changed_answer else ", and the states after differ")
                )
        mutant_initial = initial_state(u, mutant.model_class)
        solver = z3.Solver()
        solver.add(*self.universe.assumptions)
        solver.add(z3.Not(same_state(self.initial, mutant_initial)))
        initial_changed = solver.check() != z3.unsat
        if initial_changed and not witness:
            witness = "the initial state differs"
        return Differences(changed, initial_changed, witness, encoded)

    def equivalence_reason(self, mutant: Mutant) -> str:
        """Why an equivalent mutant is one: which events z3 compared, and which run no
        changed body (their relation is the original's as it stands)."""
        compared = [e for e in self.original if not self.unchanged(mutant, e)]
        untouched = [e for e in self.original if e not in compared]
        parts = []
        if compared:
            one = len(compared) == 1
            parts.append(
                f"z3: from every state satisfying the invariants, {', '.join(compared)} "
                f"{'leaves' if one else 'leave'} the same state and {'gives' if one else 'give'} "
                "the same answer as the original for every argument (unsat)"
            )
        if untouched:
            parts.append(
                f"{', '.join(untouched)}: the same declared transitions and no changed body"
            )
        parts.append("the initial state is the same (z3, unsat)")
        return "; ".join(parts)

    def _may_fail(self, event: str, encoding: Any) -> Any:
        """sat when a condition the mutant's bodies take for granted (no None, a key
        present, a field of the argument there) can fail from a reachable state."""
        if not encoding.obligations:
            return z3.unsat
        solver = z3.Solver()
        solver.add(*self.premises[event])
        solver.add(z3.Not(z3.And(*(o.condition for o in encoding.obligations))))
        return solver.check()

    # -- killing ---------------------------------------------------------------------------

    def proofs(self, mutant: Mutant, found: Differences) -> list[str]:
        from replan.verification.engines.prove.engine import prove_equivalence, prove_invariants

        events, initial = found.events, found.initial
        results = prove_invariants(
            self.policy,
            mutant.model,
            mutant.model_class,
            events=events,
            initial=initial,
            contract=self.contract,
            encoded=found.encoded,
            decided=self.decided,
        )
        if "execute" in events or initial:
            results.append(
                prove_equivalence(
                    self.policy, mutant.model, mutant.model_class, contract=self.contract
                )
            )
        return [r.name for r in results if not r.proved]

    def explorer(self, mutant: Mutant, controller: type[Run]) -> list[str]:
        from replan.verification.engines.explore.engine import explore

        result = explore(
            self.policy,
            implementation=controller,
            stop_at_first=True,
            max_states=EXPLORER_STATES,
            implementation_name=mutant.id,
            contract=self.contract,
        )
        return sorted({name for f in result.findings for name in [f.property]})

    def campaign(self, mutant: Mutant, controller: type[Run]) -> list[str]:
        from replan.verification.engines.campaign.run import run_campaign

        result = run_campaign(
            self.policy,
            "ci",
            seed=0,
            implementation=controller,
            reference=None,
            out_dir=None,
            database=None,
            collect_visited=False,
            contract=self.contract,
        )
        return [] if result.finding is None else [result.finding.property]

    def judge(self, mutant: Mutant, *, every_engine: bool = False) -> Verdict:
        """The verdict on ``mutant``: equivalent, or the first engine (in the order of
        ``ENGINES``; all of them with ``every_engine``) that fails on it."""
        started = time.perf_counter()
        verdict = self._judge(mutant, every_engine, self.contract.checker)
        verdict.seconds = time.perf_counter() - started
        return verdict

    def _judge(self, mutant: Mutant, every_engine: bool, checker: Any) -> Verdict:
        """Long: one ladder of engines, cheapest first, each returning its verdict as
        soon as it kills the mutant."""
        from replan.spec.generator import GenerationError, load_controller
        from replan.verification.translate.symbolic import TranslationError

        if mutant.changes_policy:
            broken = checker.policy(lambda document: policy_from_dict(document, mutant.defaults))
            if broken:
                return Verdict(mutant, "killed", "policy", broken, "the policy check fails")
            return Verdict(mutant, "survived", reason="no policy property fails")
        try:
            differences = self.differences(mutant)
        except TranslationError as error:
            # ``replan verify``'s proofs stop with this error: that is a failure of
            # verification, reported as the proofs refusing the mutant
            return Verdict(mutant, "killed", "proofs", [], f"the proofs refuse it: {error}")
        controller: type[Run] | None = None

        def generated() -> type[Run]:
            """The generated controller, made when an engine first runs it (the proofs
            kill most mutants without it)."""
            nonlocal controller
            if controller is None:
                controller = load_controller(mutant.model, mutant.model_class, mutant.id)
            return controller

        if not differences.events and not differences.initial:
            try:
                generated()
            except GenerationError as error:
                return Verdict(
                    mutant, "killed", "generate", [], f"the generator refuses it: {error}"
                )
            return Verdict(mutant, "equivalent", reason=self.equivalence_reason(mutant))
        found: dict[str, list[str]] = {}
        runs: list[tuple[str, Callable[[], list[str]]]] = [
            ("proofs", lambda: self.proofs(mutant, differences)),
            ("explorer", lambda: self.explorer(mutant, generated())),
            ("campaign", lambda: self.campaign(mutant, generated())),
        ]
        for engine, run in runs:
            try:
                found[engine] = run()
            except GenerationError as error:
                return Verdict(
                    mutant, "killed", "generate", [], f"the generator refuses it: {error}"
                )
            except Exception as error:  # an engine that crashes on it fails verification
                found[engine] = [f"error: {type(error).__name__}: {error}"]
            if found[engine] and not every_engine:
                break
        killer = next((engine for engine, broken in found.items() if broken), None)
        if killer is not None:
            return Verdict(
                mutant,
                "killed",
                killer,
                found[killer],
                f"{killer} fails: {', '.join(found[killer])}",
                engines=found if every_engine else {},
            )
        witness = differences.witness
        reason = f"differs from the original: {witness}" if witness else "no engine fails"
        return Verdict(mutant, "survived", reason=reason, engines=found if every_engine else {})


def _declared(model: MachineModel, event: str) -> tuple[Any, ...]:
    """What the declaration says about ``event``: its transitions in priority order,
    its interface, and the states they move between."""
    transitions = tuple(t for t in model.transitions if t.event == event)
    return transitions, model.interface[event], model.states


def reads(model: MachineModel, event: str, model_class: type = Run) -> frozenset[str]:
    """Every body of ``model_class`` and function of its module that ``event``'s step
    can run: its check, stopped answer, guards and actions, and every name of the
    class or module their sources mention, transitively (a superset: a name mentioned
    and never called only costs a proof that was not needed)."""
    import ast
    import inspect
    import sys

    from replan.spec import bodies

    module = vars(sys.modules[model_class.__module__])
    interface = model.interface[event]
    todo = [interface.when_stopped, *([interface.check] if interface.check else [])]
    for transition in model.transitions:
        if transition.event == event:
            todo += [*transition.guard_names, transition.action]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        found = bodies.plain_function(
            inspect.getattr_static(model_class, name, None) or module.get(name)
        )
        tree = None if found is None else bodies.definition(found)
        if tree is None:
            continue
        for node in ast.walk(tree):
            mentioned = (
                node.id
                if isinstance(node, ast.Name)
                else node.attr
                if isinstance(node, ast.Attribute)
                else None
            )
            if (
                mentioned is not None
                and mentioned not in seen
                and (hasattr(model_class, mentioned) or mentioned in module)
            ):
                todo.append(mentioned)
    return frozenset(seen)


# ---- the matrix ---------------------------------------------------------------------------


@dataclass
class Matrix:
    """Every verdict, and what they add up to."""

    policy: Policy
    verdicts: list[Verdict]
    seconds: float

    def count(self, status: str) -> int:
        return sum(v.status == status for v in self.verdicts)

    @property
    def score(self) -> float:
        """Killed among the non-equivalent mutants."""
        relevant = len(self.verdicts) - self.count("equivalent")
        return 1.0 if relevant == 0 else self.count("killed") / relevant

    @property
    def ok(self) -> bool:
        return self.count("survived") == 0

    def to_json(self) -> dict[str, Any]:
        from replan.controller.policy import policy_to_dict

        by_operator: dict[str, Counter[str]] = {}
        for verdict in self.verdicts:
            by_operator.setdefault(verdict.mutant.operator, Counter())[verdict.status] += 1
        killers = Counter(v.killed_by for v in self.verdicts if v.killed_by)
        return {
            "tool": "replan mutate",
            "ok": self.ok,
            "policy": policy_to_dict(self.policy),
            "generated": len(self.verdicts),
            "killed": self.count("killed"),
            "equivalent": self.count("equivalent"),
            "survived": self.count("survived"),
            "score": round(self.score, 4),
            "seconds": round(self.seconds, 1),
            "killed_by": dict(sorted(killers.items())),
            "by_operator": {op: dict(c) for op, c in sorted(by_operator.items())},
            "mutants": [v.to_json() for v in self.verdicts],
        }

    def lines(self) -> list[str]:
        lines = [
            f"replan mutate: {len(self.verdicts)} mutants generated, {self.count('killed')} "
            f"killed, {self.count('equivalent')} equivalent, {self.count('survived')} survived "
            f"(score {self.score:.1%} of the non-equivalent) in {self.seconds:.0f} s",
        ]
        killers = Counter(v.killed_by for v in self.verdicts if v.killed_by)
        lines.append(
            "  killed by: " + ", ".join(f"{name} {count}" for name, count in killers.most_common())
        )
        for verdict in self.verdicts:
            if verdict.status == "equivalent":
                lines.append(f"  equivalent  {verdict.mutant.id}: {verdict.mutant.description}")
                lines.append(f"              {verdict.reason}")
        for verdict in self.verdicts:
            if verdict.status == "survived":
                lines.append(f"  SURVIVED    {verdict.mutant.id} ({verdict.mutant.where})")
                lines.append(f"              {verdict.mutant.description}")
                lines.append(f"              {verdict.reason}")
                lines.extend(f"              {line}" for line in verdict.mutant.diff.splitlines())
        return lines


def mutants_for(
    model: MachineModel | None = None,
    operators: Iterable[str] | None = None,
    ids: Iterable[str] | None = None,
) -> list[Mutant]:
    from replan.spec.declaration import Replanning
    from replan.spec.model import extract

    model = model or extract(Replanning)
    chosen = all_mutants(model)
    if operators is not None:
        wanted = set(operators)
        chosen = [m for m in chosen if m.operator in wanted]
    if ids is not None:
        wanted_ids = set(ids)
        chosen = [m for m in chosen if m.id in wanted_ids]
    return chosen


def run_matrix(
    policy: Policy | None = None,
    mutants: Sequence[Mutant] | None = None,
    *,
    every_engine: bool = False,
    progress: Callable[[int, int, Verdict], None] | None = None,
    workers: int = 1,
    contract: Contract | None = None,
) -> Matrix:
    """Judge ``mutants`` (default: every one) by the engines checking ``contract``
    (default: ``spec.properties.CONTRACT``). ``workers`` > 1 judges them in that many
    processes (each builds its own z3 context and mutant modules), keeping the order
    of the verdicts."""
    from replan.spec.declaration import Replanning
    from replan.spec.model import extract
    from replan.spec.properties import CONTRACT

    contract = contract or CONTRACT
    policy = policy or DEFAULT_POLICY
    model = extract(Replanning)
    chosen = list(mutants if mutants is not None else mutants_for(model))
    started = time.perf_counter()
    verdicts: list[Verdict] = []
    if workers > 1 and len(chosen) > 1:
        verdicts = _in_processes(policy, chosen, every_engine, progress, workers, contract)
    else:
        judge = Judge(policy, model, contract)
        for number, mutant in enumerate(chosen, start=1):
            verdict = judge.judge(mutant, every_engine=every_engine)
            verdicts.append(verdict)
            if progress is not None:
                progress(number, len(chosen), verdict)
    return Matrix(policy, verdicts, time.perf_counter() - started)


# ---- judging in several processes -----------------------------------------------------------

_WORKER: dict[str, Any] = {}


def _start_worker(document: dict[str, Any], every_engine: bool, contract: Contract) -> None:
    from replan.spec.declaration import Replanning
    from replan.spec.model import extract
    from replan.verification.runtime.interrupt import ignore_in_worker

    ignore_in_worker()  # Ctrl-C is the parent's: it terminates the pool

    model = extract(Replanning)
    policy = policy_from_dict(document)
    _WORKER.update(
        judge=Judge(policy, model, contract),
        mutants={m.id: m for m in all_mutants(model)},
        every_engine=every_engine,
    )


def _judge_in_worker(mutant_id: str) -> dict[str, Any]:
    verdict = _WORKER["judge"].judge(
        _WORKER["mutants"][mutant_id], every_engine=_WORKER["every_engine"]
    )
    return {
        "status": verdict.status,
        "killed_by": verdict.killed_by,
        "properties": verdict.properties,
        "reason": verdict.reason,
        "seconds": verdict.seconds,
        "engines": verdict.engines,
    }


def _in_processes(
    policy: Policy,
    chosen: Sequence[Mutant],
    every_engine: bool,
    progress: Callable[[int, int, Verdict], None] | None,
    workers: int,
    contract: Contract,
) -> list[Verdict]:
    from replan.controller.policy import policy_to_dict
    from replan.verification.runtime.pool import judged_in_processes

    return judged_in_processes(
        chosen,
        [mutant.id for mutant in chosen],
        workers,
        (_start_worker, (policy_to_dict(policy), every_engine, contract)),
        _judge_in_worker,
        lambda mutant, found: Verdict(mutant, **found),
        progress,
    )
