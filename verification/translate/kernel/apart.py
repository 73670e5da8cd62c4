"""Kernels generated in forked processes: every domain's at once, each in its own.

Why: generating a kernel is the translation (z3 terms lowered, then folded per
declared state), CPU-bound Python that runs once per domain, and what it allocates
(z3 terms, folded expressions) Python does not give back to the system. In
a process of its own each domain's generation runs on its own core (the default
report has two domains; a machine with two cores generates both in the time of the
larger), and its memory goes when the process ends, so the search that follows is
not stacked on top of it. What comes back is the kernel's plain data, as a cache
entry holds it (``model.GeneratedKernel`` without its layout).

Where forking is unsafe (``runtime.forking.worker_context``: a Ray driver) the
kernels are generated here, in turn, when they are needed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from replan.verification.runtime.beside import Beside, BesideError
from replan.verification.runtime.forking import usable_cores
from replan.verification.translate.kernel.model import GeneratedKernel

Key = TypeVar("Key")


class _Refused(ValueError):
    """A generation refused in its process (a ``ValueError``: a body the translation
    does not read, a domain too large), raised again here as it was raised there."""


def _refusal_kept(make: Callable[[], GeneratedKernel]) -> Callable[[], object]:
    """``make`` in the child: its kernel without the layout (z3 terms, which neither
    pickle nor are needed to search), or its refusal as a value the parent raises."""

    def run() -> object:
        try:
            return dataclasses.replace(make(), layout=None)
        except ValueError as error:
            return _Refused(str(error))

    return run


class Apart(Generic[Key]):
    """``jobs`` generating in forked processes, one each, as many at once as this
    process has cores (the rest started as the first are collected); ``kernel(key)``
    waits for one. Used as a context manager: what was not collected is stopped on
    leaving (a search that stops at a first violation needs no other domain's kernel).
    Where forking is unsafe, ``kernel(key)`` runs the job here."""

    def __init__(self, jobs: Mapping[Key, Callable[[], GeneratedKernel]]) -> None:
        self.jobs = dict(jobs)
        self.waiting = list(jobs)
        self.started: dict[Key, Beside] = {}
        self.forking = True
        self.cores = usable_cores()
        self._fill()

    def __enter__(self) -> Apart[Key]:
        return self

    def __exit__(self, *_exception: object) -> None:
        for beside in self.started.values():
            beside.cancel()
        self.started.clear()
        self.waiting.clear()

    def __contains__(self, key: Key) -> bool:
        return key in self.jobs

    @property
    def generating(self) -> bool:
        """Whether a kernel is still being generated, or waits to be (in processes that
        take the cores a sharded search would)."""
        return bool(self.started or (self.forking and self.waiting))

    def _start(self, key: Key) -> None:
        beside = Beside.start({"generate": _refusal_kept(self.jobs[key])}) if self.forking else None
        if beside is None:
            self.forking = False  # no fork here: each generated in this process, in turn
            return
        self.started[key] = beside

    def _fill(self) -> None:
        while self.forking and self.waiting and len(self.started) < self.cores:
            self._start(self.waiting.pop(0))

    def kernel(self, key: Key) -> GeneratedKernel:
        """The kernel of job ``key``, generated apart (or here, where forking is not)."""
        if key in self.waiting:
            self.waiting.remove(key)
            self._start(key)
        beside = self.started.pop(key, None)
        if beside is None:
            return self.jobs[key]()
        try:
            value, _seconds = beside.collect("generate")
        except BesideError as error:
            raise RuntimeError(f"generating the kernel: {error}") from None
        finally:
            self._fill()
        if isinstance(value, _Refused):
            raise value
        if not isinstance(value, GeneratedKernel):
            raise RuntimeError(f"generating the kernel gave {type(value).__name__}")
        return value
