"""What a complete reachable set says about the declaration, for every engine that
measures which declared transition each call fires (the Python explorer, the
generated kernel): the transitions the policy switches off, the stop reasons no
transition that can fire enters, and the warnings (an unreachable transition or stop
reason, traps). One judgement, so two engines on the same domains say the same."""

from __future__ import annotations

from replan.controller.policy import Policy
from replan.controller.run import Run
from replan.verification.core.liveness import liveness, stop_reasons_entered
from replan.verification.core.search import SearchResult


def guard_analysis(
    implementation: type[Run], policy: Policy
) -> tuple[dict[str, str], dict[str, str]]:
    """(switched off by the policy, structurally dead): label -> why, for the
    implementation's own transitions (``verification.core.liveness``)."""
    found = liveness(implementation, policy, implementation.transitions)
    return found.switched_off, found.dead


def judge_reachability(result: SearchResult, implementation: type[Run]) -> None:
    """Fill in what the reachable set says about the declaration: transitions the
    policy switches off, and the warnings (unreachable transitions and stop reasons,
    traps), given only when the search was complete."""
    disabled, dead = guard_analysis(implementation, result.policy)
    result.disabled_by_policy = {
        label: why for label, why in disabled.items() if label not in result.fired
    }
    # a stop reason no transition that can fire enters is no target (BudgetExhausted
    # under a policy that sets no budget)
    from replan.verification.core.coverage import declared_model

    final = {state.id: str(state.value) for state in declared_model().states if state.final}
    entered = stop_reasons_entered(result.labels, {**disabled, **dead}, final)
    result.stop_reasons = {
        reason: hit for reason, hit in result.stop_reasons.items() if hit or reason in entered
    }
    warnings: list[str] = []
    if result.complete:
        for label in result.labels:
            if label in result.fired or label in result.disabled_by_policy:
                continue
            why = dead.get(label) or f"never fired in {result.states:,} reachable states"
            warnings.append(f"unreachable transition: {label} ({why})")
        for reason, reached in result.stop_reasons.items():
            if not reached:
                warnings.append(f"unreachable stop reason: {reason} (in these domains)")
        if result.traps:
            length = len(result.trap_example or [])
            warnings.append(
                f"{result.traps} trap states: no stopped state is reachable from them "
                f"(the shallowest after {length} operations)"
            )
    else:
        missing = [
            label
            for label in result.labels
            if label not in result.fired and label not in result.disabled_by_policy
        ]
        warnings.append(
            f"incomplete search (stopped by {result.stopped_by}): reachability and trap "
            f"verdicts cover only the explored part; {len(missing)} declared transitions "
            "not reached so far"
        )
    result.warnings = warnings
