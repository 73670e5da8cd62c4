"""What a campaign reached, measured against what the declaration says can happen.

Owns: the coverage targets of a run (every declared transition of
``spec.model.extract``, every ``ExecuteResult``, every ``StopReason``), the analysis
of which declared transitions *cannot* fire under a given policy, and the counting
of what fired. Targets are derived from the declaration and the records, never
restated: adding a transition to the declaration adds a target here.

Why a policy can make a transition dead: some guards read only the policy (e.g.
``counts_duplicates`` is ``policy.count_duplicate_deliveries``). Under the default
policy that guard is always true, so ``idle --observe[duplicate_delivery]--> idle``
is shadowed by the transition before it and can never fire. Such a transition is not
a coverage target for that policy; the report names it and why, instead of either
hiding it or demanding the impossible. The analysis is sound in one direction only:
guards that read run state are treated as free booleans, so a transition declared
dead here is dead for certain, while an unreached live one is simply reported
missed.

Leaves to others: running operations (``verification.engines.campaign.machine``), deciding what a
failure is (``spec.properties``, ``verification.core.harness``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from replan.controller.policy import Policy
from replan.controller.records import ExecuteResult, StopReason
from replan.controller.run import Run
from replan.spec.declaration import Replanning
from replan.spec.model import MachineModel, extract
from replan.verification.core.liveness import answers, liveness, stop_reasons_entered


@cache
def declared_model() -> MachineModel:
    """The declaration's model (extracted once)."""
    return extract(Replanning)


def dead_transitions(policy: Policy, model: MachineModel | None = None) -> dict[str, str]:
    """Declared transitions that can never fire under ``policy``: label -> why (dead,
    disabled by the policy, or leaving a state it never enters: ``liveness``)."""
    model = model or declared_model()
    return liveness(Run, policy, [t.label for t in model.transitions]).not_live


# ---- targets and counts --------------------------------------------------------------


@dataclass(frozen=True)
class Targets:
    """What a campaign under one policy should reach."""

    transitions: tuple[str, ...]  # every declared transition label, declaration order
    dead: Mapping[str, str]  # label -> why it cannot fire under this policy
    execute_results: tuple[str, ...]
    stop_reasons: tuple[str, ...]

    @property
    def live_transitions(self) -> tuple[str, ...]:
        return tuple(label for label in self.transitions if label not in self.dead)


def targets_for(policy: Policy, model: MachineModel | None = None) -> Targets:
    """What a campaign under ``policy`` should reach: the live transitions, the
    ``ExecuteResult`` members they can answer, and the stop reasons of the final
    states they enter (no BudgetExhausted under a policy that sets no budget)."""
    model = model or declared_model()
    dead = dead_transitions(policy, model)
    final = {state.id: str(state.value) for state in model.states if state.final}
    entered = stop_reasons_entered([t.label for t in model.transitions], dead, final)
    live_execute = [t.label for t in model.transitions if t.event == "execute"]
    results = answers(
        Run,
        {t.label: t.action for t in model.transitions},
        model.interface["execute"].when_stopped,
        [label for label in live_execute if label not in dead],
        ExecuteResult,
    )
    return Targets(
        transitions=tuple(t.label for t in model.transitions),
        dead=dead,
        execute_results=results,
        stop_reasons=tuple(str(reason) for reason in StopReason if str(reason) in entered),
    )


@dataclass
class Coverage:
    """Counts of what fired, against ``targets``."""

    targets: Targets
    transitions: Counter[str] = field(default_factory=Counter)
    execute_results: Counter[str] = field(default_factory=Counter)
    stop_reasons: Counter[str] = field(default_factory=Counter)
    absorbed: Counter[str] = field(default_factory=Counter)  # "<StopReason> absorbs <op>"
    refused: int = 0  # calls the input check refused before any transition

    def record(self, label: str | None, op: str, result: Any, stopped_now: str | None) -> None:
        """One call: the transition label its trace record named, the operation, its
        outcome, and the stop reason it caused (None if it did not stop the run)."""
        if label is None:
            self.refused += 1
        elif " absorbs " in label:
            self.absorbed[label] += 1
        else:
            self.transitions[label] += 1
        if op == "execute" and isinstance(result, ExecuteResult):
            self.execute_results[str(result)] += 1
        if stopped_now is not None:
            self.stop_reasons[stopped_now] += 1

    def not_live(self, why: Mapping[str, str]) -> None:
        """Take these transitions out of the targets: shown (by z3) unable to fire
        under the policy, whatever a guard-by-guard reading says; each with why."""
        self.targets = replace(self.targets, dead={**self.targets.dead, **why})

    @property
    def missed_transitions(self) -> list[str]:
        return [label for label in self.targets.live_transitions if not self.transitions[label]]

    @property
    def missed_execute_results(self) -> list[str]:
        return [name for name in self.targets.execute_results if not self.execute_results[name]]

    @property
    def missed_stop_reasons(self) -> list[str]:
        return [name for name in self.targets.stop_reasons if not self.stop_reasons[name]]

    @property
    def complete(self) -> bool:
        return not (
            self.missed_transitions or self.missed_execute_results or self.missed_stop_reasons
        )

    @staticmethod
    def _percent(reached: int, total: int) -> float:
        return round(100.0 * reached / total, 1) if total else 100.0

    def figures(self) -> dict[str, tuple[int, int, float]]:
        """name -> (reached, target count, percent)."""
        live = len(self.targets.live_transitions)
        results = len(self.targets.execute_results)
        reasons = len(self.targets.stop_reasons)
        reached = (
            live - len(self.missed_transitions),
            results - len(self.missed_execute_results),
            reasons - len(self.missed_stop_reasons),
        )
        return {
            "transitions": (reached[0], live, self._percent(reached[0], live)),
            "execute_results": (reached[1], results, self._percent(reached[1], results)),
            "stop_reasons": (reached[2], reasons, self._percent(reached[2], reasons)),
        }

    def to_json(self) -> dict[str, Any]:
        figures = self.figures()
        return {
            "complete": self.complete,
            "transitions": {
                "declared": len(self.targets.transitions),
                "live": figures["transitions"][1],
                "reached": figures["transitions"][0],
                "percent": figures["transitions"][2],
                "missed": self.missed_transitions,
                "dead_under_policy": dict(self.targets.dead),
                "fired": {label: self.transitions[label] for label in self.targets.transitions},
            },
            "execute_results": {
                "reached": figures["execute_results"][0],
                "of": figures["execute_results"][1],
                "percent": figures["execute_results"][2],
                "missed": self.missed_execute_results,
                "counts": {n: self.execute_results[n] for n in self.targets.execute_results},
            },
            "stop_reasons": {
                "reached": figures["stop_reasons"][0],
                "of": figures["stop_reasons"][1],
                "percent": figures["stop_reasons"][2],
                "missed": self.missed_stop_reasons,
                "counts": {n: self.stop_reasons[n] for n in self.targets.stop_reasons},
            },
            "absorbed_in_final_states": dict(sorted(self.absorbed.items())),
            "refused_by_input_check": self.refused,
        }

    def lines(self) -> list[str]:
        """The human summary: percentages, then what was missed or cannot fire."""
        figures = self.figures()
        t, r, s = figures["transitions"], figures["execute_results"], figures["stop_reasons"]
        declared = len(self.targets.transitions)
        dead = len(self.targets.dead)
        out = [
            f"coverage: transitions {t[0]}/{t[1]} ({t[2]}%)"
            + (f" of {declared} declared; {dead} cannot fire under this policy" if dead else "")
            + f", ExecuteResults {r[0]}/{r[1]} ({r[2]}%), StopReasons {s[0]}/{s[1]} ({s[2]}%)"
        ]
        for label, why in self.targets.dead.items():
            out.append(f"  not a target: {label}  ({why})")
        for label in self.missed_transitions:
            out.append(f"  MISSED transition: {label}")
        for name in self.missed_execute_results:
            out.append(f"  MISSED ExecuteResult: {name}")
        for name in self.missed_stop_reasons:
            out.append(f"  MISSED StopReason: {name}")
        return out
