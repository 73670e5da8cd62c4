"""Kernels generated in forked processes (``verification/translate/kernel/apart.py``):
each domain's in a process of its own, as many at once as there are cores, the same
kernel as one generated here, a refusal raised here as it was there, and nothing left
running once the search is done."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import threading
from collections.abc import Callable

import pytest
from conftest import small_domains

from replan.controller.policy import DEFAULT_POLICY
from replan.verification.core.search import SearchOptions
from replan.verification.core.subject import PROJECT
from replan.verification.engines import engine
from replan.verification.runtime.beside import Beside
from replan.verification.translate.kernel import GeneratedKernel, generate
from replan.verification.translate.kernel import apart as apart_module
from replan.verification.translate.kernel.apart import Apart


def _small() -> GeneratedKernel:
    return generate(DEFAULT_POLICY, small_domains(), PROJECT.model, PROJECT.model_class)


@pytest.fixture(scope="module")
def made() -> GeneratedKernel:
    """A small kernel, generated once: what the jobs that are not about generating
    itself give."""
    return _small()


def _stamped(kernel: GeneratedKernel) -> Callable[[], GeneratedKernel]:
    """A job giving ``kernel``, its text naming the process that ran the job."""

    def run() -> GeneratedKernel:
        return dataclasses.replace(kernel, source=f"# pid {os.getpid()}\n")

    return run


def test_a_kernel_generated_apart_searches_as_the_one_generated_here(
    made: GeneratedKernel,
) -> None:
    """The kernel that comes back is plain data (no layout: z3's terms stay in the
    child), over the same variables and properties, and searching it gives what
    searching the one generated here gives. Its text, and so how many calls share code
    in a declared state, may differ: z3 orders the operands it returns by the ids of
    its terms, which depend on what the process made before (so two generations in
    one process differ the same way)."""
    from replan.verification.engines.kernel import search
    from replan.verification.translate.kernel import compiled

    with Apart({"small": _small}) as apart:
        there = apart.kernel("small")
    assert there.layout is None
    same = ("variables", "initial", "checked", "unchecked", "initial_failures")
    same += ("fired_static", "offered_static", "renaming")
    assert [getattr(there, name) for name in same] == [getattr(made, name) for name in same]
    searched = []
    for generated in (made, there):
        kernel = compiled(generated, DEFAULT_POLICY, small_domains(), PROJECT.model)
        found = search(kernel, None, lambda _: None, stop_at_first=False)
        searched.append((found.states, found.transitions, found.depth, found.summary))
    assert searched[0] == searched[1] and searched[0][0] > 100


def test_each_kernel_is_generated_in_a_process_of_its_own(made: GeneratedKernel) -> None:
    with Apart({key: _stamped(made) for key in ("a", "b")}) as apart:
        pids = {apart.kernel(key).source for key in ("a", "b")}
    assert f"# pid {os.getpid()}\n" not in pids and len(pids) == 2


def test_the_domains_kernels_are_generated_at_once(
    monkeypatch: pytest.MonkeyPatch, made: GeneratedKernel
) -> None:
    """Both children wait for each other at a barrier made before they fork: generated
    in turn, the first would wait alone and time out."""
    monkeypatch.setattr(apart_module, "usable_cores", lambda: 2)
    barrier = multiprocessing.get_context("fork").Barrier(2, timeout=60)

    def meeting() -> GeneratedKernel:
        barrier.wait()
        return made

    with Apart({"a": meeting, "b": meeting}) as apart:
        kernels = [apart.kernel("a"), apart.kernel("b")]
    assert kernels[0] == kernels[1]


def test_one_core_generates_one_kernel_at_a_time(
    monkeypatch: pytest.MonkeyPatch, made: GeneratedKernel
) -> None:
    monkeypatch.setattr(apart_module, "usable_cores", lambda: 1)
    with Apart({key: _stamped(made) for key in ("a", "b", "c")}) as apart:
        assert list(apart.started) == ["a"]
        apart.kernel("a")
        assert list(apart.started) == ["b"]
        assert apart.kernel("c").source.startswith("# pid ")
        assert list(apart.started) == ["b"]


def test_a_refusal_in_the_child_is_raised_here_as_a_value_error() -> None:
    """A body the translation does not read is a ``ValueError`` wherever it is
    generated: ``replan verify`` then gives the search to the Python explorer."""

    def refused() -> GeneratedKernel:
        raise ValueError("a body the translation does not read")

    with Apart({"x": refused}) as apart, pytest.raises(ValueError, match="does not read"):
        apart.kernel("x")


def test_a_child_that_dies_is_an_error_not_a_hang() -> None:
    def dies() -> GeneratedKernel:
        os._exit(3)

    with Apart({"x": dies}) as apart, pytest.raises(RuntimeError, match="died"):
        apart.kernel("x")


def test_kernels_not_collected_are_stopped_on_leaving() -> None:
    released = threading.Event()

    def forever() -> GeneratedKernel:
        released.wait()  # never set in the child
        raise AssertionError("unreachable")

    with Apart({"x": forever}) as apart:
        (child,) = [beside._process for beside in apart.started.values()]
        assert child.is_alive()
    assert not child.is_alive()


def test_where_forking_is_unsafe_the_kernel_is_generated_here(
    monkeypatch: pytest.MonkeyPatch, made: GeneratedKernel
) -> None:
    monkeypatch.setattr(Beside, "start", classmethod(lambda cls, calls: None))
    with Apart({"a": _stamped(made)}) as apart:
        assert not apart.started
        assert apart.kernel("a").source == f"# pid {os.getpid()}\n"


def test_the_kernel_engine_searches_kernels_generated_apart_with_the_same_counts() -> None:
    """Two domains searched by the engine, their kernels generated apart: the counts
    of each are those of a kernel generated here."""
    from replan.verification.engines.kernel import explore_kernel

    domains = [small_domains(), dataclasses.replace(small_domains(), name="other", ids=2)]
    found = engine("kernel").search(PROJECT, DEFAULT_POLICY, domains, SearchOptions())
    assert [run.details["kernel_cache"]["status"] for run in found.runs] == ["off", "off"]
    for run, each in zip(found.runs, domains, strict=True):
        here = explore_kernel(DEFAULT_POLICY, each, PROJECT)
        assert (run.states, run.transitions, run.depth) == (
            here.states,
            here.transitions,
            here.depth,
        )
        assert run.fired == here.fired and run.stop_reasons == here.stop_reasons
