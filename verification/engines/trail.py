"""A translated model's counterexample, replayed on the generated controller.

Owns the rule both translated engines (``--engine spin`` and ``--engine kernel``)
share: a sequence of calls that breaks a property in the model is reported as a
property failure only when the same calls break the same property on the real
controller; otherwise it is a *translation bug*. A property the model does not check
that fails earlier on the controller is reported instead (it is a real failure).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from replan.controller.policy import Policy
from replan.verification.core.harness import Finding, Operation, observe_call, run_view, violated
from replan.verification.core.search import SearchResult
from replan.verification.core.subject import Subject
from replan.verification.translate.calls import Call


@dataclass
class ModelViolation:
    """A property the model broke, replayed on the generated controller."""

    property: str
    calls: list[int]
    reproduced: bool
    finding: Finding | None
    detail: str

    def report_in(self, result: SearchResult, model: str) -> None:
        """Put it in the search's result: a finding when the controller reproduced it,
        else a translation bug (``model`` names the translation: "the kernel")."""
        if self.reproduced and self.finding is not None:
            result.findings.append(self.finding)
        else:
            result.translation_bugs.append(
                f"{model} breaks {self.property} after {len(self.calls)} calls, but the "
                f"generated controller does not: {self.detail}"
            )


def initial_failure(policy: Policy, name: str, subject: Subject, engine: str) -> Finding:
    """A state invariant the model's initial state breaks: a finding with no calls."""
    return Finding(
        property=name,
        policy=policy,
        operations=[],
        results=[],
        message=f"the initial state breaks {name}",
        source=engine,
        extra={"implementation": subject.implementation_path, "depth": 0},
    )


def operations_of(
    policy: Policy, subject: Subject, calls: Sequence[Call], numbers: list[int]
) -> list[Operation]:
    """The model's calls ``numbers`` as the operations they are on ``subject``'s
    controller (a relative plan revision made concrete in the state it is called in)."""
    controller: Any = subject.controller(policy)
    operations: list[Operation] = []
    for number in numbers:
        call = calls[number]
        operation = Operation(call.event, call.concrete(run_view(controller)))
        observe_call(policy, controller, operation)
        operations.append(operation)
    return operations


def replay_calls(
    policy: Policy,
    subject: Subject,
    calls: Sequence[Call],
    unchecked: Sequence[str],
    numbers: list[int],
    prop: str,
    engine: str,
    source: str,
    extra: dict[str, Any],
) -> ModelViolation:
    """Run the model's calls ``numbers`` on ``subject``'s controller: a violation only
    when ``prop`` fails there too, after the last call and not before."""
    named = prop
    controller: Any = subject.controller(policy)
    operations: list[Operation] = []
    results: list[Any] = []
    failures: list[str] = []
    for number in numbers:
        call = calls[number]
        operation = Operation(call.event, call.concrete(run_view(controller)))
        observed = observe_call(policy, controller, operation)
        operations.append(operation)
        results.append(observed.result)
        failures = violated(observed, subject.checker)
        if failures and len(operations) < len(numbers):
            missed = [name for name in failures if name in unchecked]
            if missed:  # a real failure, of a property the model does not check
                prop = missed[0]
                break
            return ModelViolation(
                prop,
                numbers,
                False,
                None,
                f"the controller breaks {', '.join(failures)} earlier, at call {len(operations)}",
            )
    if prop not in failures:
        detail = (
            f"after the {len(numbers)} calls of the trail, the controller breaks "
            f"{', '.join(failures) or 'nothing'}"
        )
        return ModelViolation(prop, numbers, False, None, detail)
    finding = Finding(
        property=prop,
        policy=policy,
        operations=operations,
        results=results,
        message=f"{engine}'s trail for {named}, replayed on {subject.name}"
        + ("" if prop == named else f" (it breaks {prop}, which {engine} does not check, first)"),
        source=source,
        extra={**extra, "implementation": subject.implementation_path},
    )
    return ModelViolation(prop, numbers, True, finding, "reproduced on the generated controller")
