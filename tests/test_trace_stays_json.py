"""Hostile arguments: the trace stays JSON whatever the model sent
(huge integers, unprintable objects, subclasses with their own methods), and the
policy's lookups are read-only, so no run can change another's rules."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from replan.controller import DEFAULT_POLICY, Controller, Plan


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


class LyingStr(str):
    def __str__(self) -> str:
        raise RuntimeError("no str for you")

    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


class ClassRaises:
    @property  # type: ignore[misc]
    def __class__(self) -> Any:
        raise RuntimeError("no class for you")


HUGE = 10**5000


def test_a_huge_revision_keeps_the_trace_json() -> None:
    controller = Controller()
    assert controller.propose(Plan("p1", HUGE, 1, "inspect-parser", "input-A")) is False
    controller.execute(HUGE)  # type: ignore[arg-type]
    text = json.dumps(controller.trace)
    assert "<int of 16610 bits>" in text


@pytest.mark.parametrize(
    "make",
    [
        Unprintable,
        lambda: LyingStr("p1"),
        ClassRaises,
        lambda: float("nan"),
        lambda: [1, {2: Unprintable()}],
    ],
    ids=["unprintable", "lying-str", "class-raises", "nan", "nested"],
)
def test_an_unprintable_argument_keeps_every_later_read_of_the_trace(make: Any) -> None:
    argument = make()  # built in the test: pytest itself would trip over some of them
    controller = Controller()
    controller.execute(argument)
    controller.propose(argument)
    for _ in range(2):  # every read, not only the first
        records = controller.trace
        json.dumps(records, allow_nan=False)
    assert [r["op"] for r in records] == ["execute", "propose"]


def test_the_policys_requirements_are_read_only_and_shared_safely() -> None:
    with pytest.raises(TypeError):
        DEFAULT_POLICY.requirements["commit-import"] = ()  # type: ignore[index]
    assert Controller().policy.requirements["commit-import"] == ("parser", "access")
    # worker processes still receive policies (the derived lookups are rebuilt)
    assert pickle.loads(pickle.dumps(DEFAULT_POLICY)) == DEFAULT_POLICY
