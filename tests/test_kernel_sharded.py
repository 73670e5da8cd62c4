"""The kernel's search sharded over processes (``--workers N``): every state, parent,
successor and count the serial search has, under the serial search's numbers, so the
report computed from them is the serial one; a violation or a ``max_states`` bound is
where the serial search stops, whatever the workers."""

from __future__ import annotations

import importlib
import os
from typing import Any

import pytest
from conftest import session_kernel_cache, small_domains

from replan.controller.policy import DEFAULT_POLICY
from replan.verification.core.domains import Domains, default_report_domains, spin_domains
from replan.verification.core.subject import PROJECT
from replan.verification.engines.kernel import explore_kernel, kernel_for
from replan.verification.engines.kernel.sharded import search_sharded
from replan.verification.runtime.levels import ForkedWorkers
from replan.verification.subjects.mutants import MUTANTS
from replan.verification.translate.kernel import generate

# the module, not the function of the same name the package exports
serial_search = importlib.import_module("replan.verification.engines.kernel.search").search

DOMAINS = [*default_report_domains(DEFAULT_POLICY), spin_domains(1, 1)]


def _kernel(domains: Domains) -> Any:
    kernel, _ = kernel_for(DEFAULT_POLICY, domains, PROJECT, session_kernel_cache(), print)
    return kernel


def _everything(found: Any) -> tuple[Any, ...]:
    seen = found.seen
    return (
        (found.states, found.transitions, found.evaluated, found.depth, found.capped),
        seen.states,
        seen.parent.tolist(),
        seen.targets.tolist(),
        seen.ends.tolist(),
        seen.expanded_per_mode,
        seen.fired_dynamic,
    )


@pytest.mark.parametrize("shards", [2, 3])
@pytest.mark.parametrize("domains", DOMAINS, ids=lambda d: d.name)
def test_a_sharded_search_keeps_the_serial_searchs_states_parents_and_successors(
    domains: Domains, shards: int
) -> None:
    """The default report's domains (fresh ids, stored under a renaming) and SPIN's
    (1, 1): state for state, parent for parent, successor for successor."""
    kernel = _kernel(domains)
    serial = serial_search(kernel, None, lambda _: None)
    sharded = search_sharded(kernel, shards, None, None, lambda _: None)
    assert sharded is not None and sharded.complete
    assert _everything(sharded) == _everything(serial)


@pytest.mark.parametrize("depth", [1, 3])
def test_a_sharded_search_leaves_the_same_depth_unexpanded(depth: int) -> None:
    kernel = _kernel(DOMAINS[1])
    serial = serial_search(kernel, None, lambda _: None, depth)
    sharded = search_sharded(kernel, 3, None, depth, lambda _: None)
    assert sharded is not None and sharded.capped == serial.capped == "max_depth"
    assert _everything(sharded) == _everything(serial)


def test_a_sharded_search_reaching_max_states_gives_the_serial_searchs_states() -> None:
    """A serial search stops at the state the bound allows, inside a level: the
    shards, which stop at a level's end, give way to it."""
    cache = session_kernel_cache()
    serial = explore_kernel(DEFAULT_POLICY, DOMAINS[1], PROJECT, max_states=500, cache=cache)
    sharded = explore_kernel(
        DEFAULT_POLICY, DOMAINS[1], PROJECT, max_states=500, cache=cache, workers=2
    )
    assert sharded.stopped_by == serial.stopped_by == "max_states"
    assert (sharded.states, sharded.transitions, sharded.depth) == (
        serial.states,
        serial.transitions,
        serial.depth,
    )
    assert sharded.details["search_shards"] == 1


def test_a_violation_met_by_shards_gives_the_serial_counterexample() -> None:
    subject = MUTANTS["invalidation-keeps-pending"]
    kernel = generate(DEFAULT_POLICY, small_domains(), subject.model, subject.model_class)
    serial = explore_kernel(DEFAULT_POLICY, small_domains(), subject, generated=lambda: kernel)
    sharded = explore_kernel(
        DEFAULT_POLICY, small_domains(), subject, generated=lambda: kernel, workers=2
    )
    assert not serial.ok and not sharded.ok and sharded.details["search_shards"] == 1
    assert [(f.property, f.operations) for f in sharded.findings] == [
        (f.property, f.operations) for f in serial.findings
    ]


def test_the_report_of_a_sharded_search_is_the_serial_report() -> None:
    """Counts, coverage, traps and the note saying how it was searched."""
    cache = session_kernel_cache()
    serial = explore_kernel(DEFAULT_POLICY, DOMAINS[0], PROJECT, cache=cache)
    sharded = explore_kernel(DEFAULT_POLICY, DOMAINS[0], PROJECT, cache=cache, workers=2)
    assert sharded.ok and sharded.complete and sharded.details["search_shards"] == 2
    assert (sharded.states, sharded.transitions, sharded.depth, sharded.traps) == (
        serial.states,
        serial.transitions,
        serial.depth,
        serial.traps,
    )
    assert sharded.fired == serial.fired and sharded.stop_reasons == serial.stop_reasons
    assert any("over 2 shards" in note for note in sharded.notes)
    assert not any("shards" in note for note in serial.notes)


def test_a_search_while_another_kernel_is_generated_is_not_sharded() -> None:
    """Generation takes the cores first: shards beside it would only wait for them."""
    said: list[str] = []
    result = explore_kernel(
        DEFAULT_POLICY,
        DOMAINS[0],
        PROJECT,
        cache=session_kernel_cache(),
        workers=2,
        generating=lambda: True,
        progress=said.append,
    )
    assert result.ok and result.details["search_shards"] == 1
    assert any("another domain's kernel is being generated" in line for line in said)


class _Dying:
    def __init__(self, shard: tuple[int, int]) -> None:
        self.shard = shard

    def handle(self, command: str, payload: Any) -> Any:
        os._exit(3)


def test_a_shard_whose_process_dies_is_one_error_naming_its_exit_code() -> None:
    workers = ForkedWorkers(_Dying, 2)
    try:
        with pytest.raises(
            RuntimeError, match=r"ended in the middle of the search \(exit code 3\)"
        ):
            workers.ask([("insert", {}), ("insert", {})])
    finally:
        workers.close()
