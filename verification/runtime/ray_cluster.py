"""Ray, behind one module: joining a cluster and handing it work.

We do not build a cluster of our own. Ray runs the campaign's shares as tasks
(``verification/engines/campaign/workers.py``) and the explorer's shards as actors
(``verification/engines/explore/sharded.py``) on whatever cluster ``ADDRESS`` names: ``local``
starts one on this machine (offline, as the tests do), anything else is passed to
``ray.init(address=...)`` (``auto`` joins the cluster this machine belongs to,
``ray://HOST:10001`` a remote one). Every node needs replan installed (the same
version), as Ray imports our modules by name on its workers.

Owns: importing Ray (``pip install 'replan[scale]'``), connecting once per process,
and the few Ray calls the two engines make. Leaves what runs to its callers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

#: ``--ray local``: a cluster on this machine, started for this process.
LOCAL = "local"
#: The priority of a local cluster's workers. Ray lowers its workers' by default
#: (niceness 15), fit for a shared cluster but not for one started for this run: beside
#: any other busy process its shares, which are the run's own work, get almost no CPU
#: (a campaign share ten times slower on a loaded machine). Workers on a cluster someone
#: else started keep that cluster's setting.
LOCAL_WORKER_NICENESS = 0


class RayError(ValueError):
    """Ray cannot be used: the extra is missing or the cluster cannot be joined."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayError(
            "--ray needs the scale extra (pip install 'replan[scale]'): Ray is not installed"
        ) from None
    return ray


def available() -> bool:
    try:
        _ray()
    except RayError:
        return False
    return True


def connect(address: str, cpus: int | None = None) -> None:
    """Join the cluster at ``address`` (``local``: start one here with ``cpus`` CPUs,
    default all of this machine's), unless this process already joined one (the one
    it joined first stays: Ray has one cluster per process)."""
    ray = _ray()
    if ray.is_initialized():
        return
    options: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "configure_logging": False,
    }
    try:
        if address == LOCAL:
            ray.init(
                num_cpus=cpus or os.cpu_count() or 1,
                _system_config={"worker_niceness": LOCAL_WORKER_NICENESS},
                **options,
            )
        else:
            ray.init(address=address, **options)
    except Exception as error:  # Ray raises ConnectionError, RuntimeError, ValueError ...
        raise RayError(f"--ray {address}: cannot join the cluster ({error})") from None


def shutdown() -> None:
    ray = _ray()
    if ray.is_initialized():
        ray.shutdown()


def remote_function(function: Callable[..., Any], retries: int) -> Any:
    """``function`` as a Ray task, re-run up to ``retries`` times when the process
    running it dies (its share is then done again from the start)."""
    return _ray().remote(max_retries=retries)(function)


def remote_class(cls: type) -> Any:
    """``cls`` as a Ray actor class (one process per instance)."""
    return _ray().remote(cls)


def get(references: Sequence[Any]) -> list[Any]:
    """The results; a task or actor that raised or whose process died past its retries
    is a ``RayError`` in one line (Ray's own error carries the remote traceback)."""
    ray = _ray()
    try:
        return list(ray.get(list(references)))
    except ray.exceptions.RayError as error:
        cause = getattr(error, "cause", None)
        shown = f"{type(cause).__name__}: {cause}" if cause is not None else type(error).__name__
        raise RayError(f"a Ray worker failed ({shown.splitlines()[0]})") from None


def wait_one(references: Sequence[Any], timeout: float) -> tuple[list[Any], list[Any]]:
    """(finished, pending): at most one finished, within ``timeout`` seconds."""
    done, pending = _ray().wait(list(references), num_returns=1, timeout=timeout)
    return list(done), list(pending)


def cancel(references: Sequence[Any]) -> None:
    """Stop these tasks (their processes are killed)."""
    ray = _ray()
    for reference in references:
        ray.cancel(reference, force=True)


def kill(actors: Sequence[Any]) -> None:
    ray = _ray()
    for actor in actors:
        ray.kill(actor)


__all__ = [
    "LOCAL",
    "RayError",
    "available",
    "cancel",
    "connect",
    "get",
    "kill",
    "remote_class",
    "remote_function",
    "shutdown",
    "wait_one",
]
