"""A run's public surface is the contract's API (CONTRACT.md): its events, what it
reports, its snapshot and restore. The declaration's bodies (guards, actions, checks)
run inside the events, after the input check and the guards that choose them; on a
run they are absent, or ``execute_step("never-proposed")`` would mark an id completed
with no proposal, no evidence and no guard."""

from __future__ import annotations

import pytest
from conftest import PASSED, obs

from replan import Controller, EvidenceState
from replan.controller.surface import NotTheApi, hide_bodies
from replan.spec.declaration import Replanning
from replan.spec.model import extract
from replan.spec.reference import ReferenceController

MODEL = extract(Replanning)

#: The contract's API, listed by hand: a name added to or dropped from a run's surface
#: must be a decision, not a side effect of a new body.
CONTRACT_API = {
    # the events
    "observe", "propose", "execute", "approve", "charge", "cancel",
    # what a run reports
    "evidence_state", "state", "declared_state", "stop_reason", "pending", "plan_revision",
    "evidence_revision", "proposals", "steps", "no_progress", "tokens", "cost",
    "elapsed_ms", "trace", "policy",
    # the machine it runs, and a run as data (a run log restores a run:
    # replan.controller.durable.restore, not a method of the run)
    "events", "transitions", "snapshot",
}  # fmt: skip


def test_a_run_offers_the_contract_api_only() -> None:
    public = {name for name in dir(Controller()) if not name.startswith("_")}
    assert public == CONTRACT_API


def test_every_body_the_declaration_names_is_hidden() -> None:
    run = Controller()
    assert MODEL.body_names  # the guards, actions and checks of the declaration
    for name in MODEL.body_names:
        assert not hasattr(run, name), name
        assert callable(getattr(Controller, name)), name  # the tools read them on the class


def test_an_action_body_called_on_a_run_is_refused_and_changes_nothing() -> None:
    run = Controller()
    before = run.snapshot()
    with pytest.raises(AttributeError, match="not the contract's API"):
        run.execute_step("never-proposed")  # type: ignore[attr-defined]
    assert run.snapshot() == before
    assert run.steps == 0 and run.trace == []


def test_a_guard_called_on_a_run_is_refused_too() -> None:
    run = Controller()
    run.observe(obs("parser", 1, PASSED))
    with pytest.raises(AttributeError, match=r"Controller\.prerequisites_passed"):
        run.prerequisites_passed("commit-import")  # type: ignore[attr-defined]


def test_a_hidden_name_without_a_body_is_a_declaration_error() -> None:
    class Bodies:
        def real(self) -> int:
            return 1

    class Surface(Bodies):
        pass

    hide_bodies(Surface, ("real", "missing"))
    assert not hasattr(Surface(), "real")
    with pytest.raises(TypeError, match="no body of that name"):
        Surface.missing  # noqa: B018
    assert isinstance(vars(Surface)["real"], NotTheApi)


def test_code_outside_the_bodies_cannot_reach_them_through_a_run() -> None:
    """Only the bodies' own code reads a body on a run: a function elsewhere, even
    one handed the run by the bodies' class, gets AttributeError."""

    class Bodies:
        def helper(self) -> str:
            return "helper"

        def calls_helper(self) -> str:
            return self.helper()

        def calls_helper_in_a_comprehension(self) -> list[str]:
            return [self.helper() for _ in range(2)]

    class Surface(Bodies):
        pass

    hide_bodies(Surface, ("helper", "calls_helper", "calls_helper_in_a_comprehension"))
    run = Surface()
    assert Surface.calls_helper(run) == "helper"
    assert Surface.calls_helper_in_a_comprehension(run) == ["helper", "helper"]

    def outsider(target: Surface) -> str:
        return target.helper()  # type: ignore[attr-defined, no-any-return]

    with pytest.raises(AttributeError):
        outsider(run)


@pytest.mark.parametrize("implementation", [Controller, ReferenceController])
def test_what_is_known_about_a_key_is_read_as_evidence_state_and_state_is_a_deprecated_alias(
    implementation: type[Controller],
) -> None:
    run = implementation()
    run.observe(obs("parser", 1, PASSED))
    assert run.evidence_state("parser") is PASSED
    assert run.evidence_state("access") is EvidenceState.UNKNOWN
    with pytest.warns(DeprecationWarning, match=r"state\(key\) is deprecated: use evidence_state"):
        assert run.state("parser") is PASSED
