"""Termination: the rank a run has left falls with every model-facing call and
every observation that teaches nothing, so a run stops within a bound computed from
its limits. z3 proves it for any limits; here the bound is checked against the
explorer's reachable graph of the default policy, and shown to be the one that
``replan prove`` prints."""

from __future__ import annotations

import functools
import sys

from replan.controller import DEFAULT_POLICY
from replan.spec.properties import rank, termination_bound
from replan.verification.core.domains import Domains, observation_domains, plan_domains
from replan.verification.engines.explore.engine import explore
from replan.verification.engines.prove.engine import prove_all

MEANINGFUL = "--observe[changes_state]-->"  # new evidence: the host's, not counted


def test_the_bound_is_three_per_proposal_one_per_step_and_per_no_progress_call() -> None:
    from replan.controller import Controller

    assert termination_bound(DEFAULT_POLICY) == 3 * 8 + 4 + 3 + 1 == 32
    assert rank(Controller()) == termination_bound(DEFAULT_POLICY) - 1


def test_no_explored_run_makes_more_counted_calls_than_the_bound() -> None:
    """In the explorer's graph of the default policy, the calls that change a run
    without bringing new evidence form no cycle (the rank falls along every one), and
    the longest chain of them is within the bound."""
    deepest = max(
        _longest_counted_chain(domains)
        for domains in (observation_domains(DEFAULT_POLICY), plan_domains())
    )
    bound = termination_bound(DEFAULT_POLICY)
    assert 0 < deepest <= bound, (deepest, bound)


def _longest_counted_chain(domains: Domains) -> int:
    result = explore(DEFAULT_POLICY, domains, keep_graph=True, check_invariants=False)
    graph = result.graph
    assert graph is not None and result.complete
    successors: dict[int, set[int]] = {}
    for source, number, target in graph.edges:
        label = graph.edge_labels[number] or ""
        if target is None or target == source or MEANINGFUL in label:
            continue
        if label.split(" --", 1)[-1].split("[", 1)[0].split("-", 1)[0] not in (
            "propose",
            "execute",
            "observe",
        ):
            continue
        successors.setdefault(source, set()).add(target)

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 100_000))
    visiting: set[int] = set()

    @functools.cache
    def longest(state: int) -> int:
        assert state not in visiting, "a cycle of counted calls: the rank did not fall"
        visiting.add(state)
        found = 1 + max((longest(t) for t in successors.get(state, ())), default=-1)
        visiting.discard(state)
        return found

    return max(longest(state) for state in range(graph.states))


def test_replan_prove_prints_the_bound_once_both_properties_are_proved() -> None:
    report = prove_all(DEFAULT_POLICY)
    assert report.ok
    assert report.termination is not None and report.termination["bound"] == 32
    assert "at most 32 calls that change it" in report.text()
    # without the proof of the rank's fall, no bound is claimed
    report.results = [r for r in report.results if r.name != "calls-lower-the-rank"]
    assert report.termination is None
