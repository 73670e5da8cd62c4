"""Worker processes: how many cores this process may use, and which multiprocessing context
starts a worker.

Owns ``usable_cores`` (the affinity, not the machine's count: a container or ``taskset``
may give us fewer) and ``worker_context``: fork (fast: the child inherits everything),
unless this process is a Ray driver. Forking a Ray driver copies the state of its
background threads; the child then deletes those threads' frames, and a gRPC client held
in one is finalized against the parent's completion queue: the child dies of SIGSEGV in
``grpc_completion_queue_shutdown`` (seen when a campaign forked its shares from a test
process that had started a local Ray cluster). There a fresh ``forkserver`` process,
started without Ray, forks the workers instead.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from multiprocessing.context import BaseContext


def worker_context() -> BaseContext:
    """``fork``, or ``forkserver`` when Ray is initialized in this process."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        return multiprocessing.get_context("forkserver")
    return multiprocessing.get_context("fork")


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform has
    one, as on Linux; else the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
