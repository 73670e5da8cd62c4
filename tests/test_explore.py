"""The breadth-first explorer (verification/engines/explore/engine.py): state identity, the fast
successor function, coverage verdicts, shortest counterexamples, caps, symmetry.

The two slow figures (the default report, SPIN's (1, 1) count) are in
``test_explore_cli.py``; everything here explores small domains in well under a second
or two each.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest
from conftest import never_stopping_model

from replan.controller import Controller, Plan
from replan.controller.fields import position
from replan.controller.policy import DEFAULT_POLICY, policy_from_dict, policy_to_dict
from replan.controller.run import Run
from replan.spec.declaration import Replanning
from replan.spec.generator import load_controller
from replan.spec.model import extract
from replan.spec.properties import CONTRACT
from replan.verification.core.abstraction import abstract_state
from replan.verification.core.domains import (
    Domains,
    InputSpace,
    current_plans_only,
    product_domains,
)
from replan.verification.core.harness import apply, load_counterexample, run_sequence
from replan.verification.core.reachability import guard_analysis
from replan.verification.engines.explore.coverage import compare_campaign, coverage
from replan.verification.engines.explore.engine import (
    explore,
    shortest_path_to_violation,
    state_of_snapshot,
)
from replan.verification.engines.explore.search import normal_state
from replan.verification.subjects.mutants import mutant_controller, without

#: A domain small enough to explore exhaustively in a fraction of a second (979 states).
TINY = current_plans_only(
    "tiny", versions=1, keys=("parser",), evidence_states=("Unknown", "Passed"), ids=1
)
#: TINY, where a plan may also cite the previous evidence revision.
STALE = dataclasses.replace(TINY, name="stale", evidence_offsets=(0, -1))
#: Two interchangeable ids (2,577 states; 1,459 up to renaming).
PAIR = dataclasses.replace(
    TINY,
    name="pair",
    evidence_states=("Passed",),
    ids=2,
    one_id_per_kind=False,
    steps=("inspect-parser",),
)
#: Long plan histories, fresh ids, nothing but parser Passed (5,827 states, symmetric).
LONG = dataclasses.replace(
    TINY, name="long", evidence_states=("Passed",), ids=None, steps=("inspect-parser",)
)
#: Older and renumbered versions, conflicts, stale and malformed plans (7,792 states).
VARIED = dataclasses.replace(
    TINY,
    name="varied",
    versions=2,
    evidence_offsets=(0, -1),
    malformed_plan=True,
    malformed_observation=True,
    steps=("inspect-parser", "commit-import"),
)


def test_export_state_holds_exactly_what_the_snapshot_holds() -> None:
    """The explorer's identity of a state (``Run._export_state``) and ``snapshot()``
    hold the same information on every reachable state: each converts into the other,
    and distinct tuples are distinct snapshots."""
    result = explore(DEFAULT_POLICY, VARIED, keep_graph=True, check_invariants=False)
    assert result.graph is not None and result.complete
    seen_snapshots = set()
    for index in range(result.graph.states):
        state = result.graph.state(index)
        controller = Controller(DEFAULT_POLICY)
        controller._import_state(state)
        snapshot = controller.snapshot()
        assert normal_state(state_of_snapshot(snapshot)) == normal_state(state)
        assert normal_state(controller._export_state()) == normal_state(state)
        seen_snapshots.add(json.dumps(snapshot, sort_keys=True))
    assert len(seen_snapshots) == result.graph.states


class ReplacesContainers(Run):
    """Replaces a container instead of changing it (the explorer must notice)."""

    __slots__ = ()

    def accept_plan(self, plan: Plan) -> bool:
        self._proposals += 1
        self._pending = plan
        self._plan_revision = plan.revision
        self._accepted = self._accepted | {plan.id}
        return True


@pytest.mark.parametrize(
    ("implementation", "domains"),
    [(Controller, VARIED), (load_controller(extract(Replanning), ReplacesContainers), PAIR)],
    ids=["generated", "replacing-containers"],
)
def test_fast_successors_are_the_controllers_own(implementation: type, domains: Domains) -> None:
    """The hot loop (tracked containers, only changed parts re-exported) computes the
    same successors as importing the state, calling the controller and exporting."""
    result = explore(
        DEFAULT_POLICY, domains, implementation, keep_graph=True, check_invariants=False
    )
    graph = result.graph
    assert graph is not None and result.complete
    space = InputSpace(DEFAULT_POLICY, domains)
    fast: dict[int, set[int | None]] = {}
    for source, _, target in graph.edges:
        fast.setdefault(source, set()).add(target)
    for index in range(0, graph.states, 5):
        state = graph.state(index)
        pending = state[position("_pending")]
        scratch = implementation(DEFAULT_POLICY)
        scratch._import_state(state)
        operations = space.operations(
            state[position("_plan_revision")],
            state[position("_evidence_revision")],
            state[position("_accepted")],
            state[position("_completed")],
            None if pending is None else pending[0],
            run=scratch,
        )
        slow = set()
        for operation in operations:
            controller = implementation(DEFAULT_POLICY)
            controller._import_state(state)
            apply(controller, operation)
            slow.add(graph.index_of(controller._export_state()))
        assert slow == fast.get(index, set()), index


def test_every_declared_transition_fires_and_no_warning_with_a_duplicate_counted_policy() -> None:
    """The policy switch: with count_duplicate_deliveries = false the uncounted
    duplicate transitions fire and the counted ones are disabled by the policy (not
    warnings)."""
    document = policy_to_dict(DEFAULT_POLICY)
    document["limits"]["count_duplicate_deliveries"] = False
    policy = policy_from_dict(document)
    disabled, dead = guard_analysis(Controller, policy)
    assert not dead
    entered = {  # no step of the policy needs approval: its states are never entered
        label
        for label in disabled
        if label.startswith(("awaiting_approval ", "approved "))
        or label == "pending --execute[needs_approval]--> awaiting_approval"
    }
    assert set(disabled) - entered == {
        "idle --observe[duplicate_delivery and counts_duplicates and exhausts_no_progress]"
        "--> no_new_evidence",
        "idle --observe[duplicate_delivery and counts_duplicates]--> idle",
        "pending --observe[duplicate_delivery and counts_duplicates and exhausts_no_progress]"
        "--> no_new_evidence",
        "pending --observe[duplicate_delivery and counts_duplicates]--> pending",
        # no budget is set: no charge can stop the run
        "idle --charge[sets_a_budget and exhausts_budget]--> budget_exhausted",
        "pending --charge[sets_a_budget and exhausts_budget]--> budget_exhausted",
    }
    result = explore(policy, TINY)
    assert "idle --observe[duplicate_delivery]--> idle" in result.fired
    assert "pending --observe[duplicate_delivery]--> pending" in result.fired


def _with_impossible_transition() -> tuple[type, str]:
    """The declaration plus one transition whose guard can never hold, placed where it
    would otherwise be tried (before the unconditional observe of idle)."""
    model = extract(Replanning)
    transitions = list(model.transitions)
    position = next(
        i
        for i, t in enumerate(transitions)
        if t.source == "idle" and t.event == "observe" and not t.cond
    )
    impossible = dataclasses.replace(
        transitions[position], cond="changes_state and not changes_state", target="pending"
    )
    transitions.insert(position, impossible)
    transformed = without(
        dataclasses.replace(model, transitions=tuple(transitions)), lambda t: False
    )
    return load_controller(transformed, name="impossible-guard"), impossible.label


def test_a_guard_that_can_never_hold_is_warned_by_name() -> None:
    implementation, label = _with_impossible_transition()
    result = explore(DEFAULT_POLICY, TINY, implementation)
    assert result.complete and result.ok
    warned = [w for w in result.warnings if w.startswith("unreachable transition:")]
    assert any(label in w and "can never hold" in w for w in warned), result.warnings
    assert label not in result.fired
    # the declaration as shipped gets no such warning for the same transitions: every
    # one the tiny domain cannot reach is named, and the impossible one only there
    plain = explore(DEFAULT_POLICY, TINY)
    assert not any(label in w for w in plain.warnings)


#: The rule the stale-plan mutant breaks first (a stale plan accepted; pending-current
#: breaks with it).
STALE_RULE = "propose-evidence-must-be-current"


def test_stale_plan_mutant_gives_a_shortest_replayable_counterexample(tmp_path) -> None:
    mutant = mutant_controller("stale-plan-check-removed")
    first = explore(DEFAULT_POLICY, STALE, mutant)
    assert not first.ok and first.stopped_by == "violation"
    finding = first.findings[0]
    assert finding.property == STALE_RULE
    # keep going: every violating transition of the domain is found; none is shorter
    everything = explore(DEFAULT_POLICY, STALE, mutant, stop_at_first=False)
    summary = everything.violation_summary[STALE_RULE]
    assert summary["transitions"] > 100
    assert len(finding.operations) == summary["first"] == summary["shortest"]
    kept = next(f for f in everything.findings if f.property == STALE_RULE)
    assert len(kept.operations) == len(finding.operations)
    # the saved file is the shared format, and replaying it reproduces the failure
    path = finding.save(tmp_path / "explore-stale.json")
    policy, name, operations, recorded = load_counterexample(path)
    assert name == STALE_RULE and len(recorded) == len(operations)
    report = run_sequence(policy, operations, mutant)
    assert report.failure == STALE_RULE and report.failed_at == len(operations) - 1
    assert run_sequence(policy, operations, Controller).failure is None


def test_a_counterexample_needing_a_long_history_is_shortest() -> None:
    """The step-limit mutant breaks its rule only at the execution after max_steps:
    the counterexample is exactly that long, the shortest (breadth-first) way there."""
    result = explore(DEFAULT_POLICY, LONG, mutant_controller("step-limit-off-by-one"))
    finding = result.findings[0]
    assert finding.property == "execute-step-limit-stops"
    assert [o.op for o in finding.operations] == ["propose", "execute"] * 5
    assert result.violation_summary["execute-step-limit-stops"]["first"] == 10
    assert result.violation_summary["step-bound"]["first"] == 10


def test_shortest_path_to_violation_offers_the_shortest_equivalent_trace() -> None:
    """What a campaign failure is offered: the shortest run breaking the same invariant."""
    mutant = mutant_controller("stale-plan-check-removed")
    finding = shortest_path_to_violation(DEFAULT_POLICY, STALE_RULE, mutant, STALE)
    assert finding is not None and finding.property == STALE_RULE
    assert run_sequence(DEFAULT_POLICY, finding.operations, mutant).failure == STALE_RULE
    assert shortest_path_to_violation(DEFAULT_POLICY, STALE_RULE, Controller, STALE) is None
    with pytest.raises(ValueError, match="not a named property"):
        shortest_path_to_violation(DEFAULT_POLICY, "no-such-invariant")


@pytest.mark.parametrize(
    ("name", "domains"),
    [
        ("replay-counts-a-step", TINY),
        ("stopped-run-revived", TINY),
        ("older-overwrites-newer", VARIED),
        ("unknown-treated-as-passed", TINY),
        ("renumbered-unknown-is-progress", TINY),
    ],
)
def test_each_mutant_is_caught_with_a_replayable_counterexample(
    name: str, domains: Domains
) -> None:
    mutant = mutant_controller(name)
    result = explore(DEFAULT_POLICY, domains, mutant)
    assert not result.ok
    finding = result.findings[0]
    assert finding.property in CONTRACT
    assert run_sequence(DEFAULT_POLICY, finding.operations, mutant).failure == finding.property


def test_symmetry_stores_fewer_states_for_the_same_verdict() -> None:
    plain = explore(DEFAULT_POLICY, PAIR, symmetry=False)
    reduced = explore(DEFAULT_POLICY, PAIR, symmetry=True)
    assert plain.ok and reduced.ok and plain.complete and reduced.complete
    assert reduced.states < plain.states
    assert set(plain.fired) == set(reduced.fired)
    assert plain.stop_reasons == reduced.stop_reasons
    assert plain.traps == reduced.traps == 0
    mutant = mutant_controller("replay-counts-a-step")
    broken_plain = explore(DEFAULT_POLICY, PAIR, mutant, symmetry=False)
    broken_reduced = explore(DEFAULT_POLICY, PAIR, mutant, symmetry=True)
    assert [f.property for f in broken_plain.findings] == [
        f.property for f in broken_reduced.findings
    ]
    assert len(broken_plain.findings[0].operations) == len(broken_reduced.findings[0].operations)
    assert run_sequence(DEFAULT_POLICY, broken_reduced.findings[0].operations, mutant).failure


def test_the_state_cap_stops_cleanly_and_says_incomplete() -> None:
    result = explore(DEFAULT_POLICY, VARIED, max_states=200)
    assert not result.complete and result.stopped_by == "max_states"
    assert result.states >= 200 and result.traps is None
    assert any("incomplete" in w for w in result.warnings)
    assert not any(w.startswith("unreachable") for w in result.warnings)
    assert result.to_json()["complete"] is False
    bounded = explore(DEFAULT_POLICY, VARIED, max_depth=2)
    assert bounded.stopped_by == "max_depth" and bounded.depth == 2


def test_a_run_that_can_never_stop_is_a_trap() -> None:
    """A controller whose cancel and plan-limit transitions stay where they are, in a
    domain where nothing else can stop a run (one id: no StepLimit; only parser is
    observed: no Completed; uncounted duplicates: no NoNewEvidence): every state is a
    trap, and the report says so, beside the rules those transitions break."""
    model, policy = never_stopping_model()
    never_stops = load_controller(model, name="stuck")
    result = explore(policy, TINY, never_stops, stop_at_first=False)
    assert result.complete and not result.ok
    assert {"cancel-stops-an-active-run", "propose-budget-stops"} <= set(result.violation_summary)
    assert result.traps == result.states
    assert result.trap_example == []  # the initial state already is one
    assert any("trap states" in w for w in result.warnings)
    assert explore(policy, TINY).traps == 0


def test_campaign_states_map_onto_the_explored_graph() -> None:
    """Coverage: snapshots a controller visits map onto the explorer's states (ids
    renamed canonically, whatever their spelling); the figure and the unreached part."""
    from replan.controller import EvidenceState, Observation

    result = explore(DEFAULT_POLICY, TINY, keep_graph=True, symmetry=True)
    controller = Controller(DEFAULT_POLICY)
    states = [controller.snapshot()]
    transitions = []
    for operation, argument in [
        ("observe", Observation("parser", 1, EvidenceState.PASSED, "fixture")),
        ("propose", Plan("plan-7", 1, 2, "inspect-parser", "input-A")),
        ("execute", "plan-7"),
    ]:
        before = controller.snapshot()
        getattr(controller, operation)(argument)
        states.append(controller.snapshot())
        transitions.append((before, controller.trace[-1]["transition"]))
    figure = coverage(result, states, transitions)
    assert figure.states_reached == 4 and figure.outside_states == 0
    assert figure.transitions_reached == 3 and figure.outside_transitions == 0
    assert figure.states_total <= result.states  # the abstraction merges some states
    assert figure.line().startswith(f"states 4/{figure.states_total} (")
    assert figure.unreached["states"] == figure.states_total - 4
    assert figure.unreached["shallowest"]
    outside = coverage(result, [{**states[-1], "steps": 99}])
    assert outside.states_reached == 0 and outside.outside_states == 1


def test_abstract_state_forgets_only_what_the_contract_cannot_tell_apart() -> None:
    from replan.controller import EvidenceState, Observation

    def run(ids: tuple[str, str], versions: tuple[int, int], source: str) -> Controller:
        controller = Controller(DEFAULT_POLICY)
        controller.observe(Observation("parser", versions[0], EvidenceState.UNKNOWN, source))
        controller.observe(Observation("parser", versions[1], EvidenceState.PASSED, source))
        controller.propose(Plan(ids[0], 1, 2, "inspect-parser", "input-A"))
        controller.execute(ids[0])
        controller.propose(Plan(ids[1], 2, 2, "inspect-parser", "input-A"))
        return controller

    one = run(("p1", "p2"), (1, 2), "fixture")
    other = run(("plan-b", "plan-a"), (4, 7), "ci")
    assert one.snapshot() != other.snapshot()
    assert abstract_state(one._export_state()) == abstract_state(other._export_state())
    different = run(("p1", "p2"), (1, 2), "fixture")
    different.cancel()
    assert abstract_state(different._export_state()) != abstract_state(one._export_state())


def test_campaign_comparison_gives_coverage_and_the_shortest_equivalent_trace(tmp_path) -> None:
    """Item 5: a campaign failure gets the explorer's shortest run breaking the same
    property, saved beside it; the coverage figure comes with it."""
    from replan.verification.engines.campaign.run import run_campaign

    mutant = mutant_controller("stale-plan-check-removed")
    campaign = run_campaign(
        DEFAULT_POLICY,
        "ci",
        seed=3,
        examples=30,
        steps=20,
        implementation=mutant,
        out_dir=None,
        database=None,
    )
    assert campaign.finding is not None
    comparison = compare_campaign(campaign, DEFAULT_POLICY, mutant, tmp_path, domains=STALE)
    assert comparison.shortest is not None
    assert comparison.shortest.property == campaign.finding.property
    assert len(comparison.shortest.operations) <= len(campaign.finding.operations)
    assert comparison.saved is not None and comparison.saved.exists()
    document = comparison.to_json()
    assert document["domains"]["stale"]["summary"].startswith("states ")
    assert any("shortest equivalent trace" in line for line in comparison.lines())


def test_several_workers_find_the_same_states_and_counterexamples() -> None:
    serial = explore(DEFAULT_POLICY, VARIED)
    parallel = explore(DEFAULT_POLICY, VARIED, workers=2)
    for name in ("states", "transitions", "distinct_edges", "invariant_evaluations", "depth"):
        assert getattr(serial, name) == getattr(parallel, name), name
    assert serial.fired == parallel.fired and serial.traps == parallel.traps == 0
    mutant = mutant_controller("older-overwrites-newer")
    one = explore(DEFAULT_POLICY, VARIED, mutant).findings[0]
    two = explore(DEFAULT_POLICY, VARIED, mutant, workers=2).findings[0]
    assert (one.property, one.operations) == (two.property, two.operations)


def _labelled_edges(result: Any) -> set[tuple[Any, Any, Any]]:
    graph = result.graph
    assert graph is not None
    return {
        (graph.state(source), graph.edge_labels[number], graph.state(target))
        for source, number, target in graph.edges
    }


@pytest.mark.parametrize("domains", [VARIED, PAIR], ids=["fixed-ids", "fresh-ids-symmetric"])
def test_a_sharded_search_keeps_the_serial_graph_and_depths(domains: Domains) -> None:
    """The reachable graph (states, labelled edges), every state's number and
    breadth-first depth and each label's witness are the serial search's, whichever
    shard a state's hash gave it."""
    serial = explore(DEFAULT_POLICY, domains, keep_graph=True)
    sharded = explore(DEFAULT_POLICY, domains, keep_graph=True, workers=2)
    assert _labelled_edges(serial) == _labelled_edges(sharded)
    assert serial.graph is not None and sharded.graph is not None
    depths = {serial.graph.state(i): serial.graph.depth(i) for i in range(serial.states)}
    assert depths == {sharded.graph.state(i): sharded.graph.depth(i) for i in range(sharded.states)}
    assert [serial.graph.state(i) for i in range(serial.states)] == [
        sharded.graph.state(i) for i in range(sharded.states)
    ]
    for label in serial.fired:
        one, two = serial.graph.witness(label), sharded.graph.witness(label)
        assert one is not None and one == two, label
    assert (serial.traps, serial.fired, serial.absorbed) == (
        sharded.traps,
        sharded.fired,
        sharded.absorbed,
    )


def test_a_sharded_search_stops_at_the_same_depth_bound() -> None:
    serial = explore(DEFAULT_POLICY, VARIED, max_depth=3)
    sharded = explore(DEFAULT_POLICY, VARIED, max_depth=3, workers=3)
    assert (serial.states, serial.depth, serial.stopped_by) == (
        sharded.states,
        sharded.depth,
        sharded.stopped_by,
    )


def test_a_sharded_search_finds_a_state_invariant_broken_on_another_shard() -> None:
    """A state one shard reaches and another stores is checked by its owner: the
    broken state invariant is reported with a shortest counterexample."""
    mutant = mutant_controller("replay-counts-a-step")
    one = explore(DEFAULT_POLICY, VARIED, mutant, stop_at_first=False, max_depth=7)
    assert "step-bound" in one.violation_summary  # a state invariant
    many = explore(DEFAULT_POLICY, VARIED, mutant, stop_at_first=False, max_depth=7, workers=3)
    assert [(f.property, f.operations) for f in one.findings] == [
        (f.property, f.operations) for f in many.findings
    ]
    assert one.violation_summary.keys() == many.violation_summary.keys()


def test_progress_names_the_frontier_and_the_rates() -> None:
    """A long exploration is never silent: each progress line names the depth, the
    states, the frontier still to expand and the rates."""
    lines: list[str] = []
    explore(DEFAULT_POLICY, product_domains(1, 1), progress=lines.append, progress_every=0.0)
    assert lines
    assert all(
        re.search(r"depth \d+, [\d,]+ states, frontier [\d,]+, .* states/s, .* transitions/s", line)
        for line in lines
    ), lines[:3]


def test_verify_announces_an_exploration_larger_than_the_defaults() -> None:
    from replan.controller.policy import load_policy
    from replan.verification.pipeline.estimate import explorer_estimate

    assert explorer_estimate(DEFAULT_POLICY) is None
    line = explorer_estimate(load_policy("tests/policies/first-policy.toml"))
    assert line is not None and "keys 3 (default 2)" in line and "max_steps 6" in line


def test_a_property_checked_once_per_edge_still_catches_the_controller_that_breaks_it() -> None:
    # propose-uses-a-slot never reads the plan, so the explorer evaluates it once per
    # distinct edge of a state: a malformed proposal that uses no slot is its own edge
    # (the state does not change), and it is caught there.
    assert not CONTRACT["propose-uses-a-slot"].reads_argument_on("propose")
    mutant = mutant_controller("malformed-proposal-uses-no-slot")
    result = explore(DEFAULT_POLICY, dataclasses.replace(TINY, malformed_plan=True), mutant)
    assert not result.ok
    assert "propose-uses-a-slot" in {finding.property for finding in result.findings}
    assert explore(DEFAULT_POLICY, dataclasses.replace(TINY, malformed_plan=True)).ok


def test_remembered_arguments_keep_equal_but_different_values_apart() -> None:
    """The explorer's derived arguments are built once per distinct candidate set;
    ``True`` equals ``1`` in Python, yet a plan with revision True digests differently
    (and a broken controller could hold one), so the cache must not confuse them."""
    from replan.controller.records import plan_digest
    from replan.spec import inputs

    def pending_run(revision: Any) -> Any:
        run: Any = Controller(DEFAULT_POLICY)
        run._pending = Plan("p1", revision, 1, "commit-import", "input-A")
        return run

    for revision in (1, True, 1):
        run = pending_run(revision)
        assert inputs.digests(run)[0] == plan_digest(run._pending)
        approvals = inputs.arguments("Approval", run)
        assert {a.digest for a in approvals} >= {plan_digest(run._pending)}
        # the plans tried from a plan revision True cite True, not a remembered 1
        run._plan_revision = revision
        revisions = {type(plan.revision) for plan in inputs.arguments("Plan", run)}
        assert type(revision) in revisions
