"""Model input never changes what executes:
a Hypothesis fuzz of the model-facing calls with hostile objects (``str``/``int``
subclasses with lying ``__eq__``/``__hash__``, objects whose attribute access or
``__repr__`` raises, huge integers, unhashable values) asserts that propose and execute
never raise, that a rejection changes nothing but the proposal slot, that nothing
executes without its prerequisites Passed, and that the trace stays JSON."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replan.controller import (
    DEFAULT_POLICY,
    Controller,
    EvidenceState,
    ExecuteResult,
    InvalidInput,
    Observation,
    Plan,
)


class LyingStr(str):
    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return id(self) % 7


class LyingInt(int):
    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 1

    def __lt__(self, other: object) -> bool:
        return False

    def __le__(self, other: object) -> bool:
        return False


class EqualsEverything:
    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0


class Unhashable:
    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        return True


class RaisesEverywhere:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(name)

    def __repr__(self) -> str:
        raise RuntimeError("repr")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    __hash__ = object.__hash__


NAMES = ("p1", "commit-import", "inspect-parser", "input-A", "parser")
hostile_str = st.one_of(
    st.sampled_from(NAMES),
    st.sampled_from(NAMES).map(LyingStr),
    st.builds(EqualsEverything),
    st.builds(Unhashable),
    st.builds(RaisesEverywhere),
    st.just(""),
)
hostile_int = st.one_of(
    st.integers(-3, 5),
    st.integers(-3, 5).map(LyingInt),
    st.just(10**5000),
    st.just(-(10**5000)),
    st.booleans(),
    st.builds(EqualsEverything),
    st.builds(RaisesEverywhere),
)
plans = st.one_of(
    st.builds(Plan, hostile_str, hostile_int, hostile_int, hostile_str, hostile_str),
    st.builds(RaisesEverywhere),
    st.tuples(st.just("p1"), st.just(1), st.just(2), st.just("commit-import"), st.just("x")),
)
ids = st.one_of(hostile_str, hostile_int, st.lists(st.integers(), max_size=2))
calls = st.lists(
    st.one_of(st.tuples(st.just("propose"), plans), st.tuples(st.just("execute"), ids)),
    min_size=1,
    max_size=12,
)


def passed_run() -> Controller:
    """parser Passed, access Unknown: only the commit is gated, by access."""
    controller = Controller(DEFAULT_POLICY)
    controller.observe(Observation("parser", 1, EvidenceState.PASSED, "ci"))
    return controller


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(calls)
def test_hostile_model_input_never_raises_and_never_runs_an_ungated_step(
    sequence: list[tuple[str, Any]],
) -> None:
    controller = passed_run()
    for op, argument in sequence:
        before = controller.snapshot()
        answer = getattr(controller, op)(argument)  # model-facing: must not raise
        after = controller.snapshot()
        if op == "propose" and answer is False:
            assert {
                k: v for k, v in after.items() if k not in ("proposals", "state", "stop_reason")
            } == {k: v for k, v in before.items() if k not in ("proposals", "state", "stop_reason")}
        if op == "execute":
            assert isinstance(answer, ExecuteResult)
            if answer is ExecuteResult.EXECUTED:
                assert before["pending"]["step"] != "commit-import"  # access is Unknown
            else:
                assert {k: v for k, v in after.items() if k not in ("state", "stop_reason")} == {
                    k: v for k, v in before.items() if k not in ("state", "stop_reason")
                }
    json.dumps(controller.trace, allow_nan=False)
    assert controller.evidence_state("access") is EvidenceState.UNKNOWN
    assert all(type(i) is str for i in controller.snapshot()["accepted"])


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(hostile_str, hostile_int, hostile_str)
def test_a_hostile_observation_raises_invalid_input_and_changes_nothing(
    key: Any, version: Any, source: Any
) -> None:
    controller = passed_run()
    before = controller.snapshot()
    observation = Observation(key, version, EvidenceState.PASSED, source)
    exact = type(key) is str and type(version) is int and type(source) is str
    try:
        controller.observe(observation)
    except InvalidInput:
        assert controller.snapshot() == before
    except ValueError:  # ObservationConflict: a well-formed one, seen with other content
        assert exact and controller.snapshot() == before
    else:
        assert exact and key in DEFAULT_POLICY.keys and version >= 1 and source != ""
    json.dumps(controller.trace, allow_nan=False)
