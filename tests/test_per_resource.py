"""Evidence per resource: a per-resource key is a fact about one resource
(``cancellable@r1``), and a step that requires it requires it of the resource its plan
names. The model, the loader and the engines follow from the one policy; a fixed-key
policy reads, digests and runs as it did."""

from __future__ import annotations

from pathlib import Path

import pytest

from replan.controller import Controller, EvidenceState, Observation, Plan, handoff
from replan.controller.policy import (
    DEFAULT_POLICY,
    load_policy,
    policy_digest,
    policy_from_dict,
    policy_to_dict,
)
from replan.controller.records import ExecuteResult, PolicyError
from replan.controller.run import Run
from replan.verification.core.subject import Subject
from replan.verification.engines.prove.engine import prove_invariants
from replan.verification.pipeline.options import VerifyOptions
from replan.verification.pipeline.run import verify

POLICY_FILE = Path(__file__).parent / "policies" / "per-resource.toml"
POLICY = load_policy(POLICY_FILE)
PASSED = EvidenceState.PASSED


class ResourceFactOfAnother(Run):
    """BROKEN: a per-resource key is checked for the first allowed resource, not for
    the one the plan names (a fact about one reservation opens another)."""

    __slots__ = ()

    def prerequisites_passed(self) -> bool:
        pending = self._pending
        assert pending is not None
        first = self.policy.resources[0]
        return self._passed.issuperset(
            self.policy.requirements[pending.step]
        ) and self._passed.issuperset(self.policy.resource_requirements[pending.step][first])


def _cancel_on(resource: str, facts: list[Observation]) -> ExecuteResult:
    run = Controller(POLICY)
    for fact in facts:
        run.observe(fact)
    assert run.propose(Plan("c1", 1, run.evidence_revision, "cancel", resource))
    return run.execute("c1")


def test_a_per_resource_key_is_one_key_per_allowed_resource() -> None:
    assert POLICY.keys == ("user_known", "cancellable@r1", "cancellable@r2")
    assert POLICY.requirements["cancel"] == ("user_known",)
    assert POLICY.resource_requirements["cancel"]["r2"] == ("cancellable@r2",)


def test_a_fact_about_one_resource_never_opens_a_step_on_another() -> None:
    known = Observation("user_known", 1, PASSED, "host")
    r1 = Observation("cancellable@r1", 1, PASSED, "host")
    assert _cancel_on("r2", [known, r1]) is ExecuteResult.PRECONDITION_DENIED
    assert _cancel_on("r1", [known, r1]) is ExecuteResult.EXECUTED


def test_the_handoff_names_the_per_resource_fact_a_pending_plan_waits_for() -> None:
    run = Controller(POLICY)
    run.observe(Observation("user_known", 1, PASSED, "host"))
    run.observe(Observation("cancellable@r1", 1, PASSED, "host"))
    run.observe(Observation("cancellable@r2", 1, EvidenceState.FAILED, "host"))
    assert run.propose(Plan("c1", 1, run.evidence_revision, "cancel", "r2"))
    assert handoff(run)["pending"]["waiting_for"] == {"cancellable@r2": "Failed"}


def test_a_fixed_key_policy_reads_and_digests_as_before() -> None:
    document = policy_to_dict(DEFAULT_POLICY)
    assert "per_resource" not in document["evidence"] and "open" not in document["resources"]
    assert policy_digest(policy_from_dict(document)) == policy_digest(DEFAULT_POLICY)
    assert policy_from_dict(policy_to_dict(POLICY)) == POLICY


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"keys": ["a@b"]}, "evidence.keys[0]"),
        ({"per_resource": ["user_known"]}, "evidence.per_resource[0]"),
    ],
)
def test_the_loader_refuses_an_ambiguous_key(change: dict[str, list[str]], named: str) -> None:
    document = policy_to_dict(POLICY)
    document["evidence"] = {**document["evidence"], **change}
    with pytest.raises(PolicyError, match=rf"^{named.replace('[', '.').replace(']', '.')}"):
        policy_from_dict(document)


def test_a_step_that_completes_the_run_requires_no_per_resource_key() -> None:
    document = policy_to_dict(POLICY)
    document["steps"][2]["requires"] = ["cancellable"]
    with pytest.raises(PolicyError, match="per-resource key"):
        policy_from_dict(document)


def test_a_per_resource_key_checked_for_the_wrong_resource_is_not_proved() -> None:
    """The broken body checks the first allowed resource's fact: z3 refutes the rules
    that say a step runs only on its own resource's evidence."""
    broken = Subject("resource-fact-of-another", bodies=ResourceFactOfAnother)
    failed = {
        r.name
        for r in prove_invariants(POLICY, broken.model, broken.model_class, events=["execute"])
        if not r.proved
    }
    assert "execute-denied-without-prerequisites" in failed
    assert "commit-grounded" in failed
    assert not [r for r in prove_invariants(POLICY, events=["execute"]) if not r.proved]


@pytest.mark.slow
def test_verify_fails_on_a_per_resource_key_checked_for_the_wrong_resource(
    tmp_path: Path,
) -> None:
    broken = Subject("resource-fact-of-another", bodies=ResourceFactOfAnother)
    report = verify(
        POLICY,
        tmp_path,
        VerifyOptions(fail_fast=True, policy_file=str(POLICY_FILE)),
        broken,
        progress=lambda line: None,
    )
    assert not report.ok
    assert [check.name for check in report.checks if not check.ok] == ["proofs"]


def test_open_resources_are_slots_after_the_fixed_ones() -> None:
    document = policy_to_dict(POLICY)
    document["resources"] = {"allowed": ["account"], "open": ["slot1", "slot2"]}
    policy = policy_from_dict(document)
    assert policy.resources == ("account", "slot1", "slot2")
    assert policy.open_resources == ("slot1", "slot2")
    assert "cancellable@slot2" in policy.keys
    assert policy_to_dict(policy)["resources"] == document["resources"]
    document["resources"] = {"allowed": ["account"], "open": ["account"]}
    with pytest.raises(PolicyError, match=r"^resources\.open\[0\]"):
        policy_from_dict(document)
