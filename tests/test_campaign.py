"""The model-based campaign on correct controllers: it passes at the ``ci`` profile on
the default policy and on two others, reaches every declared transition that can
fire, says what it missed when it did not, and is deterministic for a seed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replan.cli import main
from replan.controller.policy import DEFAULT_POLICY, Policy, policy_from_dict
from replan.controller.records import Plan
from replan.spec.properties import CONTRACT
from replan.verification.core.coverage import dead_transitions, declared_model, targets_for
from replan.verification.engines.campaign.run import CampaignResult, run_campaign

THREE_PREREQUISITES_TWO_STEPS = policy_from_dict(
    {
        "limits": {"max_steps": 2},
        "evidence": {"keys": ["parser", "access", "schema"]},
        "resources": {"allowed": ["input-A"]},
        "steps": [
            {"name": "inspect-parser"},
            {
                "name": "commit-import",
                "requires": ["parser", "access", "schema"],
                "completes_run": True,
            },
        ],
        "workflow": {"ready_when_passed": ["parser", "access", "schema"]},
    }
)

UNCOUNTED_DUPLICATES_TWO_RESOURCES = policy_from_dict(
    {
        "limits": {"count_duplicate_deliveries": False},
        "evidence": {"keys": ["parser", "access"]},
        "resources": {"allowed": ["input-A", "input-B"]},
        "steps": [
            {"name": "inspect-parser"},
            {"name": "inspect-access"},
            {"name": "commit-import", "requires": ["parser", "access"], "completes_run": True},
        ],
        "workflow": {"ready_when_passed": ["parser", "access"]},
    }
)


#: What cannot fire under the default policy: the two duplicate transitions it
#: switches off, and everything of approval (no step of it needs one).
DEFAULT_NOT_LIVE = frozenset(
    {
        "idle --observe[duplicate_delivery]--> idle",
        "pending --observe[duplicate_delivery]--> pending",
        "pending --execute[needs_approval]--> awaiting_approval",
        # no budget is set: no charge can stop the run
        "idle --charge[sets_a_budget and exhausts_budget]--> budget_exhausted",
        "pending --charge[sets_a_budget and exhausts_budget]--> budget_exhausted",
        *(
            t.label
            for t in declared_model().transitions
            if t.source in ("awaiting_approval", "approved")
        ),
    }
)


def ci_campaign(policy: Policy, tmp_path: Path, seed: int = 1) -> CampaignResult:
    return run_campaign(policy, "ci", seed=seed, out_dir=tmp_path / "out", database=None)


def test_ci_campaign_on_the_default_policy_holds_and_reaches_every_live_target(
    tmp_path: Path,
) -> None:
    result = ci_campaign(DEFAULT_POLICY, tmp_path)
    assert result.passed, result.finding and result.finding.message
    coverage = result.coverage
    # every live transition, the refused approvals and the counted charges included
    assert coverage.missed_transitions == []
    assert coverage.missed_execute_results == []
    assert coverage.missed_stop_reasons == []
    # not targets: the two transitions the policy switches off, and the approval
    # states' (no step of the default policy needs approval, so none is entered)
    assert {t.label for t in declared_model().transitions} - set(
        coverage.targets.live_transitions
    ) == (set(DEFAULT_NOT_LIVE))
    (line,) = [line for line in result.summary_lines() if line.startswith("coverage:")]
    assert line.count("(100.0%)") == 3, line
    assert result.invariants_checked == result.operations
    assert not list((tmp_path / "out").glob("*")), "nothing is written when all holds"


def test_visited_states_and_transitions_are_exposed_for_the_explorer(tmp_path: Path) -> None:
    result = run_campaign(DEFAULT_POLICY, "ci", seed=3, examples=10, steps=20, database=None)
    assert _initial_snapshot() in result.visited
    labels = {t.label for t in declared_model().transitions}
    assert result.visited.transition_count
    abstract_states = set(result.visited.abstract_states())
    for before, label in result.visited.abstract_transitions():
        assert before in abstract_states
        assert label in labels
    document = result.to_json()
    assert document["distinct_states_visited"] == len(result.visited)
    assert document["distinct_state_transitions_visited"] == result.visited.transition_count
    json.dumps(document)  # the summary is JSON


def _initial_snapshot() -> dict[str, object]:
    from replan.controller import Controller

    return Controller().snapshot()


def test_ci_campaign_holds_with_three_prerequisites_and_two_steps(tmp_path: Path) -> None:
    result = ci_campaign(THREE_PREREQUISITES_TWO_STEPS, tmp_path)
    assert result.passed, result.finding and result.finding.message
    assert result.coverage.stop_reasons["StepLimit"] > 0
    assert result.coverage.stop_reasons["Completed"] > 0


def test_ci_campaign_holds_without_counting_duplicates_and_with_two_resources(
    tmp_path: Path,
) -> None:
    result = ci_campaign(UNCOUNTED_DUPLICATES_TWO_RESOURCES, tmp_path)
    assert result.passed, result.finding and result.finding.message
    # the duplicate transitions that are dead under the default policy fire here
    assert result.coverage.transitions["idle --observe[duplicate_delivery]--> idle"] > 0
    assert result.coverage.transitions["pending --observe[duplicate_delivery]--> pending"] > 0


def test_dead_transitions_are_derived_from_the_policy() -> None:
    default_dead = dead_transitions(DEFAULT_POLICY)
    assert set(default_dead) == set(DEFAULT_NOT_LIVE)
    assert default_dead["idle --observe[duplicate_delivery]--> idle"].startswith(
        "counts_duplicates is always True"
    )
    assert (
        "needs_approval is False, False, False"
        in (default_dead["pending --execute[needs_approval]--> awaiting_approval"])
    )
    assert "enters awaiting_approval" in default_dead["awaiting_approval --cancel--> canceled"]
    uncounted = dead_transitions(UNCOUNTED_DUPLICATES_TWO_RESOURCES)
    approval = DEFAULT_NOT_LIVE - {
        "idle --observe[duplicate_delivery]--> idle",
        "pending --observe[duplicate_delivery]--> pending",
    }
    assert set(uncounted) - approval == {
        label
        for label in targets_for(DEFAULT_POLICY).transitions
        if "duplicate_delivery and counts_duplicates" in label and label not in approval
    }
    assert len(set(uncounted) - approval) == 4


def test_a_short_campaign_names_what_it_missed() -> None:
    result = run_campaign(DEFAULT_POLICY, "ci", seed=5, examples=2, steps=3, database=None)
    assert result.passed
    assert not result.coverage.complete
    missed = result.coverage.missed_transitions
    assert missed
    text = "\n".join(result.summary_lines())
    assert all(f"MISSED transition: {label}" in text for label in missed)
    assert result.to_json()["coverage"]["transitions"]["missed"] == missed


def _campaign_json(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    code = main(["campaign", "--json", "--no-database", *extra])
    output = capsys.readouterr().out
    assert code == 0, output
    document: dict[str, object] = json.loads(output)
    return document


def test_the_same_seed_gives_the_same_operations_and_coverage(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    budget = ("--profile", "ci", "--examples", "15", "--steps", "20", "--output", str(tmp_path))
    first = _campaign_json(capsys, "--seed", "7", *budget)
    second = _campaign_json(capsys, "--seed", "7", *budget)
    other = _campaign_json(capsys, "--seed", "8", *budget)
    for name in ("seed", "examples", "runs", "operations", "coverage", "operations_checked"):
        assert first[name] == second[name], name
    assert first["distinct_states_visited"] == second["distinct_states_visited"]
    assert (first["operations"], first["coverage"]) != (other["operations"], other["coverage"])


def test_the_command_writes_a_junit_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = tmp_path / "campaign.xml"
    budget = ("--profile", "ci", "--examples", "3", "--steps", "5", "--seed", "2")
    code = main(["campaign", "--no-database", "--junit", str(report), *budget])
    output = capsys.readouterr().out
    assert code == 0
    assert "examples:" in output and "operations/s" in output and "seed 2" in output
    text = report.read_text(encoding="utf-8")
    assert all(f'name="{name}"' in text for name in CONTRACT.names)
    assert 'name="divergence"' in text


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--mutant", "no-such-mutant"], "is not a mutant"),
        (["--implementation", "no_such_module:Controller"], "cannot import"),
        (["--implementation", "controller"], "expected module:Class"),
        (["--implementation", "replan.controller:NoSuchClass"], "has no"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    assert main(["campaign", "--no-database", *arguments]) == 2
    error = capsys.readouterr().err
    assert message in error
    assert len(error.strip().splitlines()) == 1


def test_a_bad_policy_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    policy = tmp_path / "bad.toml"
    policy.write_text('[evidence]\nkeys = ["parser"]\n', encoding="utf-8")
    assert main(["campaign", "--policy", str(policy), "--no-database"]) == 2
    assert "missing table" in capsys.readouterr().err


def test_examples_seeded_from_a_witness_check_the_prefix_too() -> None:
    """seed_missed never covers a transition without checking it: the seeded examples
    run under the same properties, and a broken controller's failure there becomes the
    campaign's finding."""
    from replan.verification.core.harness import Operation
    from replan.verification.engines.campaign.run import seed_missed
    from replan.verification.subjects.mutants import mutant_implementation

    implementation = mutant_implementation("step-not-counted")
    result = run_campaign(
        DEFAULT_POLICY,
        "ci",
        seed=0,
        examples=1,
        steps=1,
        implementation=implementation,
        reference=None,
        out_dir=None,
        database=None,
    )
    result.finding = None  # as if the rules had missed it
    label = "pending --execute[not prerequisites_passed]--> pending"
    result.coverage.transitions[label] = 0
    witness = [
        Operation("propose", Plan("p1", 1, 1, "inspect-parser", "input-A")),
        Operation("execute", "p1"),
    ]
    seeded = seed_missed(
        result,
        [label],
        lambda _: witness,
        profile="ci",
        seed=0,
        implementation=implementation,
        reference=None,
        out_dir=None,
        database=None,
    )
    assert seeded == [label]
    assert result.finding is not None and result.finding.property == "execute-counts-one-step"


def test_the_same_seed_gives_the_same_campaign_whatever_else_is_imported() -> None:
    """Hypothesis mixes the literals of every local module a process loaded into its
    draws; the campaign keeps them out, so a seed names one campaign in `replan
    verify`, in `replan campaign` and in a worker process that imported less."""
    import subprocess
    import sys

    program = (
        "{extra}\n"
        "from replan.controller.policy import DEFAULT_POLICY\n"
        "from replan.verification.engines.campaign.run import run_campaign\n"
        "r = run_campaign(DEFAULT_POLICY, 'ci', seed=11, examples=40, steps=30,"
        " out_dir=None, database=None)\n"
        "print(r.examples, r.operations, sorted(r.coverage.transitions.items()))\n"
    )
    extra = (
        "import replan.verification.report.review.page, replan.verification.report.sarif, "
        "replan.verification.bench.run, replan.controller.durable.dbos"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", program.format(extra=imports)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for imports in ("", extra)
    }
    assert len(outputs) == 1, outputs
