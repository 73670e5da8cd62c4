"""A z3 model made readable: the abstract state and step of a proof's counterexample.

What a reviewer reads when a property is not proved: the declared state, the
counters, the pending plan and each key's evidence before and after the step, the
event, its argument and the transition it fired (``describe_step``, ``step_text``);
and a failed obligation as a whole, with the form ``replan replay`` runs
(``describe_counterexample``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import z3  # type: ignore[import-untyped]

from replan.controller.records import PolicyError
from replan.verification.translate.symbolic import Opt, Record, State, StepEncoding, Universe


def _mode(state: State) -> z3.ExprRef:
    return state["_declared_state"]


def _plan(state: State) -> Opt:
    plan: Opt = state["_pending"]
    return plan


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


def describe_counterexample(
    model: z3.ModelRef,
    step: StepEncoding | None,
    state: State | None,
    universe: Universe,
    name: str,
    label: str,
) -> tuple[str, dict[str, Any]]:
    """A failed obligation's message and description: the step that breaks it (with
    a replayable form where one can be built), or the state that does."""
    description: dict[str, Any]
    if step is None:
        assert state is not None
        description = {"state": describe_state(model, universe, state)}
        return f"{label}: violated by {_state_line(description['state'])}", description
    description = describe_step(model, step)
    try:
        description["replay"] = induction_replay(model, step, name, label)
    except (PolicyError, ValueError, KeyError, TypeError) as error:
        # the proof's verdict stands; only the replayable form is missing
        description["unreplayable"] = f"{type(error).__name__}: {error}"
    return f"{label}: counterexample to induction\n{step_text(description)}", description


def induction_replay(
    model: z3.ModelRef, step: StepEncoding, name: str, label: str
) -> dict[str, Any]:
    """A counterexample to induction as ``replan replay`` runs it: the policy at the
    model's limits, the state before the step (made concrete) and the step's call."""
    from replan.controller.policy import policy_to_dict
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
