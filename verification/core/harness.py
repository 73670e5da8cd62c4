"""The one model interface every checker drives, and the shared counterexample record.

Owns: applying an ``Operation`` to any implementation (``Controller``,
``ReferenceController``, a deliberately broken one) and observing it as a ``Call``
(the run before and after it, as ``Run`` objects the properties read); checking a
call against every property of ``spec/properties.py`` and, optionally, against a
second implementation in lockstep; the counterexample JSON format of
DESIGN.md (encode, decode, replay) and its rendering as a pytest regression test.

The campaign (Hypothesis), the explorer (BFS) and ``replan replay`` all go through
here, so they agree on what an operation, a failure and a counterexample are.
Reporters read only ``Finding``s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from replan.controller import input_limits
from replan.controller._generated import Controller
from replan.controller.call_encoding import canonical, decode_argument
from replan.controller.fields import RunState
from replan.controller.policy import Policy, policy_from_dict, policy_to_dict
from replan.controller.records import (
    Approval,
    EvidenceState,
    ExecuteResult,
    Observation,
    Plan,
    Usage,
)
from replan.controller.run import Run, state_of_snapshot
from replan.spec.checker import Checker
from replan.spec.declaration import Replanning
from replan.spec.model import extract
from replan.spec.properties import CONTRACT

MODEL = extract(Replanning)

#: The declared events and their parameters (the declaration's interface).
OPS: tuple[str, ...] = MODEL.events
ARGUMENT_NAME: dict[str, str] = {
    event: interface.parameter
    for event, interface in MODEL.interface.items()
    if interface.parameter is not None
}


class Implementation(Protocol):
    def observe(self, obs: Observation) -> bool: ...
    def propose(self, plan: Plan) -> bool: ...
    def execute(self, plan_id: str) -> ExecuteResult: ...
    def cancel(self) -> None: ...
    def snapshot(self) -> dict[str, Any]: ...


Factory = Callable[[Policy], Implementation]


class Operation(NamedTuple):
    op: str
    argument: Any = None

    def __str__(self) -> str:
        if self.op not in ARGUMENT_NAME:
            return f"{self.op}()"
        return f"{self.op}({self.argument!r})"


def apply(implementation: Implementation, operation: Operation) -> Any:
    """Run one operation; the answer, or the class of the error it raised."""
    method = getattr(implementation, operation.op)
    try:
        return method(operation.argument) if operation.op in ARGUMENT_NAME else method()
    except Exception as error:  # an error is an outcome to compare, not a crash
        return type(error)


@dataclass(frozen=True)
class Call:
    """One operation and what it did: the run before and after it (copies, as
    ``Run`` objects whatever the implementation), its answer or error class, and the
    trace records it appended."""

    policy: Policy
    before: Run
    op: str
    argument: Any
    result: Any
    after: Run
    appended: tuple[Any, ...] = ()

    @property
    def raised(self) -> bool:
        return isinstance(self.result, type) and issubclass(self.result, BaseException)


def run_view(implementation: Any) -> Run:
    """A copy of an implementation's state as a plain ``Run`` (what the properties
    read): exported and imported for a ``Run``, rebuilt from ``snapshot()`` for any
    other implementation of the contract."""
    view = Run(implementation.policy)
    if isinstance(implementation, Run):
        view._import_state(implementation._export_state())
    else:
        view._import_state(state_of_snapshot(implementation.snapshot()))
    return view


def trace_length(implementation: Any) -> int:
    trace = getattr(implementation, "_trace", None)
    return len(trace) if isinstance(trace, list) else 0


def appended_since(implementation: Any, mark: int) -> tuple[Any, ...]:
    trace = getattr(implementation, "_trace", None)
    return tuple(trace[mark:]) if isinstance(trace, list) else ()


def observe_call(
    policy: Policy, implementation: Implementation, operation: Operation, before: Run | None = None
) -> Call:
    """Run one operation and observe it (``before``: a view taken already)."""
    if before is None:
        before = run_view(implementation)
    mark = trace_length(implementation)
    result = apply(implementation, operation)
    return Call(
        policy,
        before,
        operation.op,
        operation.argument,
        result,
        run_view(implementation),
        appended_since(implementation, mark),
    )


def violated(call: Call, checker: Checker | None = None) -> list[str]:
    """The names of the properties this call breaks: the call properties of its
    event, then the state invariants of the state after it (empty when all hold).
    ``checker``: the contract's (default: ``spec.properties.CONTRACT``'s)."""
    checker = checker or CONTRACT.checker
    return checker.call(
        call.op, call.before, call.argument, call.result, call.after, call.appended
    ) + checker.state(call.after)


def same_outcome(left: Any, right: Any) -> bool:
    return bool(left == right and type(left) is type(right)) or (
        isinstance(left, type) and left is right
    )


# ---- encoding arguments and results as JSON --------------------------------------


#: The records an operation takes, encoded as ``{"$type": name, **fields}``.
RECORDS = (Observation, Plan, Approval, Usage)
RECORD_NAMED: dict[str, type[Any]] = {record.__name__: record for record in RECORDS}


def encode_value(value: Any) -> Any:
    """Records become plain objects of their fields; anything else that is not JSON
    is kept as ``{"$raw": ...}`` (JSON values) or ``{"$repr": ...}`` (not replayable
    exactly, replayed as an opaque object: it is malformed either way)."""
    if isinstance(value, RECORDS):
        fields = {
            name: _encode_field(item) for name, item in zip(value._fields, value, strict=True)
        }
        return {"$type": type(value).__name__, **fields}
    if isinstance(value, type) and issubclass(value, BaseException):
        return {"$error": value.__name__}
    if isinstance(value, str | int | float | bool) or value is None:
        return str(value) if isinstance(value, EvidenceState | ExecuteResult) else value
    if isinstance(value, list | dict | tuple):
        try:
            return {"$raw": json.loads(json.dumps(value))}
        except (TypeError, ValueError):
            pass
    return {"$repr": repr(value)}


def _encode_field(item: Any) -> Any:
    if isinstance(item, EvidenceState):
        return str(item)
    if isinstance(item, str | int | float | bool) or item is None:
        return item
    return {"$repr": repr(item)}


class Opaque:
    """A stand-in for an argument that was not JSON (see ``encode_value``)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def decode_value(value: Any) -> Any:
    if isinstance(value, dict):
        if "$raw" in value:
            raw = value["$raw"]
            return raw
        if "$repr" in value:
            return Opaque(value["$repr"])
        if "$error" in value:
            return value["$error"]
        record = RECORD_NAMED.get(str(value.get("$type")))
        if record is not None:
            fields = [_decode_field(name, value.get(name)) for name in record._fields]
            return record(*fields)
    return value


def _decode_field(name: str, item: Any) -> Any:
    if isinstance(item, dict) and "$repr" in item:
        return Opaque(item["$repr"])
    if name == "state" and isinstance(item, str) and item in {s.value for s in EvidenceState}:
        return EvidenceState(item)
    return item


def encode_result(result: Any) -> Any:
    return encode_value(result)


def result_text(result: Any) -> str:
    if isinstance(result, type):
        return f"raises {result.__name__}"
    return str(result) if isinstance(result, ExecuteResult) else repr(result)


# ---- findings: the one counterexample record ---------------------------------------


@dataclass
class Finding:
    """A property that failed, with the operations that lead to it."""

    property: str
    policy: Policy
    operations: list[Operation]
    results: list[Any]
    message: str = ""
    source: str = ""  # campaign | explorer | prove | replay
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": policy_to_dict(self.policy),
            "property": self.property,
            "message": self.message,
            "source": self.source,
            "steps": [
                {
                    "op": operation.op,
                    "args": _arguments(operation),
                    "result": encode_result(result),
                }
                for operation, result in zip(self.operations, self.results, strict=True)
            ],
            **self.extra,
        }

    def save(self, path: str | Path) -> Path:
        from replan.verification.runtime.files import write_atomically

        return write_atomically(path, json.dumps(self.to_json(), indent=2) + "\n")

    def program(self) -> str:
        """The failing sequence as lines a person can paste."""
        lines = []
        for number, (operation, result) in enumerate(
            zip(self.operations, self.results, strict=True), start=1
        ):
            lines.append(f"{number:3}. {operation}  ->  {result_text(result)}")
        return "\n".join(lines)


class CounterexampleError(ValueError):
    """A counterexample file that cannot be read (one line, names the file)."""


def load_counterexample(path: str | Path) -> tuple[Policy, str, list[Operation], list[Any]]:
    """Read a counterexample file: its policy, property, operations and the results
    it recorded (as JSON values)."""
    source = Path(path)
    try:
        document = input_limits.load_json(source, what="a counterexample")
    except FileNotFoundError:
        raise CounterexampleError(f"{source}: no such file") from None
    except input_limits.InputLimitError as error:
        raise CounterexampleError(str(error)) from None
    except (OSError, ValueError) as error:
        raise CounterexampleError(f"{source}: not a counterexample JSON file ({error})") from None
    if not isinstance(document, dict) or not isinstance(document.get("steps"), list):
        raise CounterexampleError(f"{source}: expected an object with a 'steps' list")
    try:
        policy = policy_from_dict(document["policy"])
    except (KeyError, ValueError) as error:
        raise CounterexampleError(f"{source}: policy: {error}") from None
    operations: list[Operation] = []
    recorded: list[Any] = []
    for index, step in enumerate(document["steps"]):
        if not isinstance(step, dict) or step.get("op") not in OPS:
            raise CounterexampleError(f"{source}: steps[{index}].op: expected one of {OPS}")
        op = step["op"]
        args = step.get("args") or {}
        argument = decode_value(args.get(ARGUMENT_NAME[op])) if op in ARGUMENT_NAME else None
        operations.append(Operation(op, argument))
        recorded.append(step.get("result"))
    return policy, str(document.get("property", "")), operations, recorded


# ---- running a sequence: lockstep and properties --------------------------------------


@dataclass
class RunReport:
    """What running a sequence of operations showed."""

    results: list[Any]
    failure: str | None = None  # the property that broke, or "divergence"
    failed_at: int | None = None  # index of the operation where it broke
    detail: str = ""


def run_sequence(
    policy: Policy,
    operations: Sequence[Operation],
    implementation: Factory,
    reference: Factory | None = None,
    start: RunState | None = None,
    checker: Checker | None = None,
) -> RunReport:
    """Run ``operations`` on a fresh ``implementation`` (and, in lockstep, a fresh
    ``reference``), checking every property after every operation. Stops at the
    first failure. ``start``: both are put in that state first (a proof's
    counterexample starts from one); the state invariants are checked on it.
    ``checker``: the contract checked (default: ``spec.properties.CONTRACT``'s)."""
    checker = checker or CONTRACT.checker
    subject = implementation(policy)
    twin = reference(policy) if reference is not None else None
    if start is not None:
        for run in (subject, twin):
            if run is not None:
                run._import_state(start)  # type: ignore[attr-defined]  (every Run has it)
    results: list[Any] = []
    fresh = run_view(subject)
    if start is not None:
        broken = checker.state(fresh)
        if broken:
            return RunReport(
                results, broken[0], None, f"the saved state breaks {', '.join(broken)}"
            )
    else:
        broken = checker.initial(fresh, policy) + checker.state(fresh)
        if broken:
            return RunReport(results, broken[0], None, f"a fresh run breaks {', '.join(broken)}")
    for index, operation in enumerate(operations):
        call = observe_call(policy, subject, operation)
        results.append(call.result)
        broken = violated(call, checker)
        if broken:
            return RunReport(
                results,
                broken[0],
                index,
                f"{operation} -> {result_text(call.result)} breaks {', '.join(broken)}",
            )
        divergence = None if twin is None else _divergence(subject, twin, operation, call)
        if divergence is not None:
            return RunReport(results, "divergence", index, divergence)
    return RunReport(results)


def _divergence(subject: Any, twin: Any, operation: Operation, call: Call) -> str | None:
    """How ``subject`` and the reference ``twin`` part after ``operation`` (``call``
    is the subject's): another answer, or the same answer and another snapshot."""
    expected = apply(twin, operation)
    if not same_outcome(call.result, expected):
        return (
            f"{operation}: implementation answered {result_text(call.result)}, "
            f"the reference model {result_text(expected)}"
        )
    if subject.snapshot() != twin.snapshot():
        differing = sorted(k for k, v in subject.snapshot().items() if twin.snapshot()[k] != v)
        return f"{operation}: same answer but the snapshots differ in {', '.join(differing)}"
    return None


def pytest_source(
    policy: Policy,
    property_name: str,
    operations: Iterable[Operation],
    name: str,
    implementation: str = "replan.controller:Controller",
) -> str:
    """A ready-to-run pytest regression test for a counterexample: it replays the
    operations on ``implementation`` ("module:Class", the one the failure was found
    in) beside the reference model, and fails while the property still breaks."""
    module_name, _, class_name = implementation.partition(":")
    steps = [
        {
            "op": o.op,
            "args": _arguments(o),
        }
        for o in operations
    ]
    document = {"policy": policy_to_dict(policy), "property": property_name, "steps": steps}
    function = "".join(c if c.isalnum() else "_" for c in name).strip("_") or "counterexample"
    return f'''"""Regression test written by replan for a counterexample to {property_name!r}.

Replays the recorded operations on the generated controller and the reference model,
checking every property after every operation; it fails while the bug is present.
"""

import json

from replan.controller.policy import policy_from_dict
from replan.spec.reference import ReferenceController
from replan.verification.core.harness import decode_steps, run_sequence
from {module_name} import {class_name} as Implementation

COUNTEREXAMPLE = json.loads({json.dumps(json.dumps(document))})


def test_{function}_stays_fixed() -> None:
    policy = policy_from_dict(COUNTEREXAMPLE["policy"])
    operations = decode_steps(COUNTEREXAMPLE["steps"])
    report = run_sequence(policy, operations, Implementation, ReferenceController)
    assert report.failure is None, report.detail
'''


def operations_from_trace(trace: Sequence[Mapping[str, Any]]) -> list[Operation]:
    """The calls a controller trace records (``Controller.trace``, the ``calls`` of
    ``evidence/replan-trace.json``), as operations to replay: each event and its
    argument read through the declaration's interface (``Controller.events``) and the
    run log's exact decoding (``controller.durable.log``), so every declared event,
    ``approve`` and ``charge`` included, replays. Trace arguments are JSON renderings
    of records; one that is not decodes to an error (``CounterexampleError``)."""
    operations = []
    for index, record in enumerate(trace):
        try:
            op, args = record["op"], record["args"]
            parameter, parameter_type, _caller = Controller.events[op]
            argument = (
                None
                if parameter is None
                else decode_argument(parameter_type, canonical(args[parameter]))
            )
            operations.append(Operation(op, argument))
        except KeyError as error:
            raise CounterexampleError(
                f"calls[{index}]: not a trace record of this declaration's events "
                f"({', '.join(Controller.events)}): missing {error}"
            ) from None
        except (TypeError, ValueError) as error:
            raise CounterexampleError(f"calls[{index}]: not a trace record ({error})") from None
    return operations


def decode_steps(steps: Sequence[dict[str, Any]]) -> list[Operation]:
    operations = []
    for step in steps:
        op = step["op"]
        args = step.get("args") or {}
        argument = decode_value(args.get(ARGUMENT_NAME[op])) if op in ARGUMENT_NAME else None
        operations.append(Operation(op, argument))
    return operations


def _arguments(operation: Operation) -> dict[str, Any]:
    parameter = ARGUMENT_NAME.get(operation.op)
    return {} if parameter is None else {parameter: encode_value(operation.argument)}
