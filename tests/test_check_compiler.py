"""The compiled property checks (spec/check_compiler.py) mean what the properties say.

The explorer and the campaign run each event's properties as one generated function
with the bodies and helpers inlined and repeated subexpressions evaluated once. These
tests pin that it is an optimisation only: on random runs of the generated controller
and of every deliberately broken one, with hostile arguments too, the compiled check
names the same failures, with the same error messages, as calling each property alone.
And a property changed in its source is what the explorer then enforces, with no other
edit anywhere.
"""

from __future__ import annotations

import inspect
import random
from pathlib import Path
from typing import Any

import pytest

from replan.controller import Controller, EvidenceState, Observation, Plan
from replan.controller.policy import DEFAULT_POLICY
from replan.controller.run import Run
from replan.spec.check_compiler import check_source, compile_call_checks
from replan.spec.properties import CONTRACT
from replan.spec.vocabulary import Property
from replan.verification.core.domains import InputSpace, smoke_domains
from replan.verification.core.harness import (
    OPS,
    Call,
    Operation,
    observe_call,
    run_view,
)
from replan.verification.core.subject import Subject
from replan.verification.subjects.mutants import MUTANTS, mutant_controller

HOSTILE: dict[str, list[Any]] = {
    "observe": [
        None,
        Observation("parser", True, EvidenceState.PASSED, "ci"),
        Observation("parser", 0, EvidenceState.PASSED, "ci"),
        Observation("parser", 1, "Passed", "ci"),
        Observation("nope", 1, EvidenceState.PASSED, "ci"),
        Observation("parser", 1, EvidenceState.PASSED, ""),
    ],
    "propose": [None, 7, Plan("", 1, 0, "inspect-parser", "input-A"), Plan("p", True, 0, "x", "y")],
    "execute": [None, 3, "", "never-accepted"],
}


def one_by_one(properties: list[Property], call: Call) -> tuple[list[str], dict[str, str]]:
    """The reference meaning: each property called alone, an error failing it."""
    given = {
        "event": call.op,
        "before": call.before,
        "argument": call.argument,
        "answer": call.result,
        "after": call.after,
        "appended": call.appended,
    }
    failed: list[str] = []
    errors: dict[str, str] = {}
    for prop in properties:
        arguments = [given.get(p, call.argument) for p in prop.parameters]
        try:
            holds = prop.function(*arguments)
        except Exception as error:
            errors[prop.name] = f"{type(error).__name__}: {error}"
            holds = False
        if not holds:
            failed.append(prop.name)
    return failed, errors


def random_calls(implementation: type[Run], seed: int, walks: int = 12) -> list[Call]:
    """Calls from random runs: every operation of the smoke domains (and the hostile
    arguments) tried from each state a random walk passes."""
    chooser = random.Random(seed)
    space = InputSpace(DEFAULT_POLICY, smoke_domains())
    calls: list[Call] = []
    for _ in range(walks):
        run: Any = implementation(DEFAULT_POLICY)
        for _ in range(chooser.randint(3, 9)):
            pending = run._pending
            operations = space.operations(
                run._plan_revision,
                run._evidence_revision,
                tuple(run._accepted),
                tuple(run._completed),
                None if pending is None else pending[0],
                run=run,
            )
            operations += [
                Operation(op, value) for op, values in HOSTILE.items() for value in values
            ]
            for operation in chooser.sample(operations, min(12, len(operations))):
                trial: Any = implementation(DEFAULT_POLICY)
                trial._import_state(run._export_state())
                calls.append(observe_call(DEFAULT_POLICY, trial, operation))
            observe_call(DEFAULT_POLICY, run, chooser.choice(operations))
    return calls


@pytest.mark.parametrize("subject", ["generated", *sorted(MUTANTS)])
def test_compiled_checks_name_the_failures_each_property_names_alone(subject: str) -> None:
    implementation = Controller if subject == "generated" else mutant_controller(subject)
    compiled = {
        event: compile_call_checks(CONTRACT.checker.for_event(event), event) for event in OPS
    }
    for number, call in enumerate(random_calls(implementation, seed=len(subject))):
        properties = CONTRACT.checker.for_event(call.op)
        errors: dict[str, str] = {}
        found = compiled[call.op](
            errors, call.op, call.before, call.argument, call.result, call.after, call.appended
        )
        assert (found, errors) == one_by_one(properties, call), (number, call.op, call.argument)


def test_the_broken_controllers_make_the_comparison_meaningful() -> None:
    """The comparison above sees failing verdicts and raising properties too, not only
    holding ones."""
    failures = 0
    for subject in sorted(MUTANTS):
        for call in random_calls(mutant_controller(subject), seed=1, walks=4):
            failures += bool(one_by_one(CONTRACT.checker.for_event(call.op), call)[0])
    assert failures > 50


def test_an_event_test_is_decided_for_the_compiled_event() -> None:
    calls_lower = [CONTRACT["calls-lower-the-rank"]]
    source, _ = check_source(calls_lower, "cancel")
    assert "'observe'" not in source and "event ==" not in source


def test_every_registered_call_property_is_inlined() -> None:
    """No contract property falls back to being called: the explorer's speed depends
    on it, so a property written outside the inlinable subset shows up here."""
    for event in OPS:
        _, namespace = check_source(CONTRACT.checker.for_event(event), event)
        assert not [name for name in namespace if name.startswith("_called_")], event


def test_a_property_the_compiler_cannot_inline_is_called_as_it_is() -> None:
    """A closure (its free variables live in a cell) is called, not inlined."""
    limit = 0

    def never_negative(after: Run) -> bool:
        return after.steps >= limit

    prop = Property("never-negative", "call", "", None, never_negative, ("after",))
    source, namespace = check_source([prop], "cancel")
    assert any(value is never_negative for value in namespace.values())
    assert "after.steps >=" not in source


def test_a_changed_property_is_what_the_explorer_enforces(
    execute_never_executes: Subject,
) -> None:
    """Tighten one property in its source (a plan may never be executed: every
    execute must answer something else than Executed) and nothing else: the explorer,
    which compiles its checks from the properties' source, now reports that
    property broken on the unchanged controller."""
    from replan.verification.core.domains import current_plans_only
    from replan.verification.engines.explore.engine import explore

    checker = execute_never_executes.checker
    compiled_source, _ = check_source(checker.for_event("execute"), "execute")
    assert "answer is not ExecuteResult.EXECUTED" in compiled_source  # read from its source
    domains = current_plans_only("tightened", versions=1, ids=1)
    result = explore(
        DEFAULT_POLICY, domains, stop_at_first=True, contract=execute_never_executes.contract
    )
    assert not result.ok
    assert [finding.property for finding in result.findings] == ["execute-counts-one-step"]
    assert "execute-counts-one-step" not in checker.errors  # broken by its verdict, not an error
    assert result.findings[0].program().count("execute(") >= 1


#: Shapes a second reading found the first compiler getting wrong (a crash, or a
#: verdict or message unlike calling the property alone), each pinned here.
TRICKY_PROPERTIES = """
from replan.controller.records import EvidenceState
from replan.spec.vocabulary import unchanged

PASSED = EvidenceState.PASSED
limit = 10


def shared_iterable_a(before, after):  # a shared expression a comprehension iterates
    return all(k != "" for k in before.policy.key_set | after.policy.key_set)


def shared_iterable_b(before, after):
    return any(k == "x" for k in before.policy.key_set | after.policy.key_set)


def state_is(run, key, wanted=PASSED):  # a default that is not a plain constant
    return run.evidence_state(key) == wanted


def enum_default(before):
    return not state_is(before, "parser")


def check(run):  # a global named like the compiled function
    steps = run.steps
    return steps >= 0


def global_named_check(before):
    return check(before)


def undefined_name(after):  # alone: NameError
    return after.steps == before.steps


def any_passed(run, key):  # a parameter that is also a comprehension variable
    return any(run.evidence_state(key) == PASSED for key in run.policy.keys)


def captured_argument(before):
    return not any_passed(before, before)


def constant_captured(before):
    return not any_passed(before, "parser")


def one_run_unchanged(before, after):  # alone: TypeError
    return unchanged(before) or True


def folded_local(event, after):  # alone on cancel: UnboundLocalError
    if event == "observe":
        limit = 3
    return after.steps <= limit


def unbound_local(answer):
    if answer:
        x = 1
    return x


def zipped_list(before, after):  # an iterator two properties repeat
    return len(list(zip(before.policy.keys, after.policy.keys))) > 0


def zipped_tuple(before, after):
    return len(tuple(zip(before.policy.keys, after.policy.keys))) > 0


def bits(run, n=-5):  # a negative default
    return n.bit_length() == 3


def negative_default(before):
    return bits(before)


def first(a, b):
    return a


def unassigned_argument(before, answer):  # alone: UnboundLocalError before the call
    if answer:
        y = 1
    return first(before, y)
"""


def test_tricky_shapes_compile_to_what_each_property_says_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tricky_properties.py").write_text(TRICKY_PROPERTIES)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__("tricky_properties")
    names = [
        "shared_iterable_a", "shared_iterable_b", "enum_default", "global_named_check",
        "undefined_name", "captured_argument", "constant_captured", "one_run_unchanged",
        "folded_local", "unbound_local", "zipped_list", "zipped_tuple", "negative_default",
        "unassigned_argument",
    ]  # fmt: skip
    properties = []
    for name in names:
        function = getattr(module, name)
        parameters = tuple(inspect.signature(function).parameters)
        properties.append(Property(name, "call", "", None, function, parameters))
    run = Controller(DEFAULT_POLICY)
    call = Call(DEFAULT_POLICY, run_view(run), "cancel", None, None, run_view(run), ())
    errors: dict[str, str] = {}
    compiled = compile_call_checks(properties, "cancel")
    found = compiled(errors, "cancel", call.before, None, None, call.after, ())
    assert (found, errors) == one_by_one(properties, call)
    assert {"undefined_name", "folded_local", "unbound_local"} <= set(errors)
