"""The generator copies guard, check and action bodies into the dispatch instead of
calling them, and rewrites the copies so they do not repeat work. These tests pin
that the copies mean exactly what the bodies mean: a subclass's override is what gets
copied, a body that cannot be copied is called, copied locals never collide with the
method's own names, a field is read into a local only when nothing rebinds it, and
the input check's error messages are its own.

Every subclass here is built by the real generator (``load_controller``) and run
side by side with the generated ``Controller`` on the same calls.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import FAILED, PASSED, UNKNOWN, obs, plan

from replan.controller import Controller, ExecuteResult, InvalidInput, Observation
from replan.controller.run import Run
from replan.spec.declaration import Replanning
from replan.spec.generator import GENERATED_PATH, load_controller, render_controller
from replan.spec.model import extract

MODEL = extract(Replanning)


def _episode(run: Run) -> list[Any]:
    """A run through observe (new, renumbered, older, duplicate), propose, execute."""
    answers: list[Any] = [
        run.observe(obs("parser", 2, PASSED)),
        run.observe(obs("parser", 3, PASSED)),  # renumbered: same state
        run.observe(obs("parser", 1, FAILED)),  # older than the latest
        run.observe(obs("parser", 3, PASSED)),  # a duplicate delivery
        run.observe(obs("access", 1, UNKNOWN)),
        run.observe(obs("access", 2, PASSED)),
        run.propose(plan("c", 1, run.evidence_revision, step="commit-import")),
        run.execute("c"),
    ]
    return answers


def _same_run(subject: Run, expected: Run) -> None:
    assert _episode(subject) == _episode(expected)
    assert subject.snapshot() == expected.snapshot()
    assert subject.trace == expected.trace


# ---- the real controller ------------------------------------------------------------


def test_action_and_check_bodies_are_copied_into_the_dispatch_each_named() -> None:
    source = GENERATED_PATH.read_text(encoding="utf-8")
    for action in {t.action for t in MODEL.transitions}:
        assert f"# action: {action}\n" in source, action
        assert f"self.{action}(" not in source, action
    assert "# check: check_observation\n" in source
    assert "self.check_observation(" not in source


def test_observation_fields_are_read_from_the_unpacked_locals() -> None:
    source = GENERATED_PATH.read_text(encoding="utf-8")
    observe = source[source.index("def observe") : source.index("def propose")]
    assert "key, version, state, source = obs\n" in observe
    assert "obs." not in observe


def test_no_method_reads_an_enumeration_member_through_its_class() -> None:
    source = GENERATED_PATH.read_text(encoding="utf-8")
    methods = source[source.index("class Controller") :]
    for enumeration in ("ExecuteResult.", "StopReason.", "EvidenceState."):
        assert enumeration not in methods
    assert "EXECUTED = ExecuteResult.EXECUTED\n" in source


def test_single_return_module_functions_are_copied_too() -> None:
    source = GENERATED_PATH.read_text(encoding="utf-8")
    assert "well_formed_plan(" not in source
    assert "type(plan) is Plan" in source


@pytest.mark.parametrize(
    "malformed",
    [
        "not an observation",
        Observation("nope", 1, PASSED, "ci"),
        Observation(3, 1, PASSED, "ci"),  # type: ignore[arg-type]
        Observation("parser", 0, PASSED, "ci"),
        Observation("parser", True, PASSED, "ci"),
        Observation("parser", 1, "Passed", "ci"),  # type: ignore[arg-type]
        Observation("parser", 1, PASSED, ""),
    ],
)
def test_a_malformed_observation_is_refused_with_the_checks_own_message(malformed: Any) -> None:
    with pytest.raises(InvalidInput) as expected:
        Run().check_observation(malformed)
    run = Controller()
    with pytest.raises(InvalidInput) as raised:
        run.observe(malformed)
    assert str(raised.value) == str(expected.value)
    assert run.trace[-1]["result"] == {"error": "InvalidInput"}
    assert run.trace[-1]["transition"] is None


# ---- subclasses: what is copied is the subclass's body ------------------------------


class ProposalNotCounted(Run):
    __slots__ = ()

    def accept_plan(self, plan: Any) -> bool:
        """BROKEN on purpose: the accepted proposal uses no slot."""
        self._pending = plan
        self._plan_revision = plan.revision
        self._accepted.add(plan.id)
        return True


def test_an_overridden_action_is_what_gets_copied() -> None:
    broken = load_controller(MODEL, ProposalNotCounted, "not-counted")()
    assert broken.propose(plan("p", 1, 1)) is True
    assert broken.proposals == 0
    real = Controller()
    assert real.propose(plan("p", 1, 1)) is True
    assert real.proposals == 1


class ReplayOnStoppedCounts(Run):
    __slots__ = ()

    def answer_stopped(self, plan_id: str) -> ExecuteResult:
        """An early return: this body cannot be copied, so it is called."""
        if self.id_completed(plan_id):
            self._steps += 1
            return ExecuteResult.REPLAYED
        return ExecuteResult.STOPPED


def test_a_body_that_returns_early_is_called_not_copied() -> None:
    source = render_controller(MODEL, ReplayOnStoppedCounts)
    assert "result = ReplayOnStoppedCounts.answer_stopped(self, plan_id)" in source
    run = load_controller(MODEL, ReplayOnStoppedCounts, "early-return")()
    assert not hasattr(run, "answer_stopped")  # called through its class, hidden on a run
    run.observe(obs("parser", 1, PASSED))
    run.observe(obs("access", 1, PASSED))
    run.propose(plan("c", 1, 3, step="commit-import"))
    assert run.execute("c") is ExecuteResult.EXECUTED
    assert run.execute("c") is ExecuteResult.REPLAYED  # on the stopped run
    assert run.steps == 2  # the override ran, and the body it calls (id_completed) too


class ClashingLocals(Run):
    __slots__ = ()

    def record_meaningful(self, obs: Observation) -> bool:
        """Run's body, with locals named like the dispatch's own."""
        result = obs.key
        current = obs.state
        fired = (result, obs.version)
        self._contents[fired] = (current, obs.source)
        self._latest_version[result] = obs.version
        self._known[result] = current
        if current is PASSED:
            self._passed.add(result)
        else:
            self._passed.discard(result)
        self._evidence_revision += 1
        self._pending = None
        self._no_progress = 0
        return True


def test_copied_locals_never_collide_with_the_methods_names() -> None:
    source = render_controller(MODEL, ClashingLocals)
    assert "# action: record_meaningful" in source
    _same_run(load_controller(MODEL, ClashingLocals, "clashing")(), Controller())


class KnownRebound(Run):
    __slots__ = ()

    def record_meaningful(self, obs: Observation) -> bool:
        """Run's body, but ``_known`` is replaced by a new dict before the write."""
        self._known = dict(self._known)
        self._contents[(obs.key, obs.version)] = (obs.state, obs.source)
        self._latest_version[obs.key] = obs.version
        self._known[obs.key] = obs.state
        if obs.state is PASSED:
            self._passed.add(obs.key)
        else:
            self._passed.discard(obs.key)
        self._evidence_revision += 1
        self._pending = None
        self._no_progress = 0
        return True


class KnownReboundByACall(Run):
    __slots__ = ()

    def record_meaningful(self, obs: Observation) -> bool:
        """As ``KnownRebound``, through a method that is called, not copied."""
        self._fresh_known()
        self._contents[(obs.key, obs.version)] = (obs.state, obs.source)
        self._latest_version[obs.key] = obs.version
        self._known[obs.key] = obs.state
        if obs.state is PASSED:
            self._passed.add(obs.key)
        else:
            self._passed.discard(obs.key)
        self._evidence_revision += 1
        self._pending = None
        self._no_progress = 0
        return True

    def _fresh_known(self) -> None:
        for _ in range(1):  # a loop: never copied
            self._known = dict(self._known)


@pytest.mark.parametrize("model_class", [KnownRebound, KnownReboundByACall])
def test_a_field_that_gets_rebound_is_never_read_into_a_local(model_class: type[Run]) -> None:
    source = render_controller(MODEL, model_class)
    observe = source[source.index("def observe") : source.index("def propose")]
    assert "= self._known\n" not in observe
    assert "= self._contents\n" in observe  # the other fields still are
    _same_run(load_controller(MODEL, model_class, model_class.__name__)(), Controller())
