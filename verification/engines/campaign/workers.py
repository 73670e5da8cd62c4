"""One campaign on several workers: local processes, or Ray tasks on a cluster.

A user whose policy outgrows one process runs the campaign as N shares of its budget,
each the whole lockstep campaign (every property after every operation, the reference
model beside it) on a seed of its own, all sharing one example database: a directory,
or a Redis server (``verification/engines/campaign/database.py``) when the workers are on
several machines. The shares' coverage, visited states and counts are merged into one
``CampaignResult``, judged exactly as a one-process campaign's (``replan campaign``,
``replan verify``).

- **The first failure stops the others.** The worker that finds one shrinks it (in
  its own Hypothesis engine, as always); the other shares are stopped, and the
  parent saves the counterexample (JSON and pytest, replayable with ``replan
  replay``). It is in the shared database too, so any later worker replays it first.
- **A dead worker's share is done again.** A process that dies (killed, out of
  memory, its machine gone) loses what it did; its share runs again from the start,
  up to ``RETRIES`` times (Ray's own task retry on a cluster, the same rule for local
  processes), so the merged budget and coverage are the whole campaign's.

Owns: splitting the budget into shares, running them, stopping them, merging them.
Leaves the campaign itself to ``verification/engines/campaign/machine.py`` and Ray to
``verification/runtime/ray_cluster.py``.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from replan.controller.policy import Policy, policy_from_dict, policy_to_dict
from replan.verification.core.subject import DEFAULT_IMPLEMENTATION, resolve_attribute
from replan.verification.engines.campaign.database import is_shared
from replan.verification.engines.campaign.machine import PROFILES
from replan.verification.engines.campaign.run import (
    CampaignResult,
    hypothesis_home,
    run_campaign,
    save_finding,
)
from replan.verification.runtime import interrupt, ray_cluster
from replan.verification.runtime.forking import worker_context

#: How many times a share whose process died runs again.
RETRIES = 3

Report = Callable[[str], None]


class WorkerError(RuntimeError):
    """A share could not be run: it raised (a bad implementation, a database gone), or
    its process died more often than ``RETRIES``. One line, naming the share."""


@dataclass(frozen=True)
class Share:
    """One worker's part of a campaign, as plain values (a forked process or a Ray
    task on another machine receives it)."""

    number: int
    policy: dict[str, Any]
    profile: str
    seed: int
    examples: int
    steps: int
    implementation: str  # module:Class
    #: the reference model: a deliberately broken controller's own (``mutant``, looked
    #: up in the mapping of subjects ``subjects`` names as "module:attribute"), the
    #: declaration's (``ReferenceController``), or none (the properties alone)
    mutant: str | None
    subjects: str | None
    with_reference: bool
    database: str | None


def share_seed(seed: int, number: int) -> int:
    """The seed of share ``number`` (0: the campaign's own), apart from the seeds its
    engines derive from it (``engine_memory.engine_seed``)."""
    return seed if number == 0 else (seed * 2_654_435_761 + number * 97_531 + 1) % 2**32


def split(examples: int, workers: int) -> list[int]:
    """``examples`` in ``workers`` shares as equal as can be (none empty)."""
    workers = max(1, min(workers, examples))
    whole, rest = divmod(examples, workers)
    return [whole + (1 if number < rest else 0) for number in range(workers)]


def run_share(share: Share) -> CampaignResult:
    """Run one share (in a worker): its campaign, no files written (the parent saves
    a finding), Hypothesis' own directory a temporary one."""
    from replan.spec.reference import ReferenceController

    reference: Any
    if share.mutant is not None and share.subjects is not None:
        reference = resolve_attribute(share.subjects)[share.mutant].reference
    else:
        reference = ReferenceController if share.with_reference else None
    with tempfile.TemporaryDirectory(prefix="replan-share-") as home, hypothesis_home(home):
        return run_campaign(
            policy_from_dict(share.policy),
            share.profile,
            seed=share.seed,
            examples=share.examples,
            steps=share.steps,
            implementation=share.implementation,
            reference=reference,
            out_dir=None,
            database=share.database,
        )


def run_workers(
    policy: Policy,
    profile: str = "ci",
    *,
    workers: int,
    seed: int | None = None,
    examples: int | None = None,
    steps: int | None = None,
    implementation: str = DEFAULT_IMPLEMENTATION,
    mutant: str | None = None,
    subjects: str | None = None,
    with_reference: bool = True,
    database: str | Path | None = None,
    out_dir: str | Path | None = None,
    ray_address: str | None = None,
    report: Report | None = None,
) -> CampaignResult:
    """The campaign as ``workers`` shares, in local processes or (``ray_address``)
    as Ray tasks: one merged result, its seconds the wall time; a finding saved in
    ``out_dir``. A ``mutant`` is named in ``subjects``, a "module:attribute" mapping of
    subjects (``verification.subjects.mutants:MUTANTS``), whose reference model the
    shares run beside it."""
    budget = PROFILES[profile]
    examples = budget.examples if examples is None else examples
    steps = budget.steps if steps is None else steps
    if seed is None:
        seed = random.SystemRandom().randrange(1_000_000)
    shares = [
        Share(
            number,
            policy_to_dict(policy),
            profile,
            share_seed(seed, number),
            count,
            steps,
            implementation,
            mutant,
            subjects,
            with_reference,
            _location(database),
        )
        for number, count in enumerate(split(examples, workers))
    ]
    started = time.perf_counter()
    if ray_address is not None:
        ray_cluster.connect(ray_address)
        results = _on_ray(shares, report)
    else:
        results = _in_processes(shares, report)
    merged = merge(results, seed, (examples, steps))
    merged.seconds = time.perf_counter() - started
    if merged.finding is not None and out_dir is not None:
        save_finding(merged, out_dir)
    return merged


def _location(database: str | Path | None) -> str | None:
    """The database as every worker names it: a Redis URL as given, a directory as an
    absolute path (a worker's working directory is its own)."""
    if database is None or is_shared(database):
        return None if database is None else str(database)
    return str(Path(database).resolve())


def merge(results: Sequence[CampaignResult], seed: int, budget: tuple[int, int]) -> CampaignResult:
    """The shares' results as one campaign's: counts, coverage and visited states
    added up; a failing share's finding first (the others stopped when it failed)."""
    ordered = sorted(results, key=lambda r: r.finding is None)
    merged = ordered[0]
    for other in ordered[1:]:
        merged.absorb(other)
    merged.seed = seed
    merged.budget = budget
    return merged


def _say(report: Report | None, text: str) -> None:
    if report is not None:
        report(text)


def _done(
    report: Report | None, share: Share, result: CampaignResult, results: list[CampaignResult]
) -> bool:
    """Keeps a finished share's result and says so; True when it failed (the first
    failure stops the other shares)."""
    results.append(result)
    verdict = "FAILED: " + result.finding.property if result.finding else "held"
    _say(
        report,
        f"share {share.number}: {result.examples} examples, {result.operations:,} operations "
        f"(seed {share.seed}): {verdict}",
    )
    return result.finding is not None


# ---- local processes ------------------------------------------------------------------------


def _child(connection: Connection, share: Share) -> None:
    """Run one share and send back its result, or the error it raised (an error is
    not a death: running the share again would raise it again)."""
    interrupt.ignore_in_worker()  # Ctrl-C is the parent's: it terminates the workers
    try:
        answer: CampaignResult | str = run_share(share)
    except Exception as error:
        answer = f"{type(error).__name__}: {error}"
    connection.send(answer)
    connection.close()


def _in_processes(shares: list[Share], report: Report | None) -> list[CampaignResult]:
    """Each share in a forked process (``forking.worker_context``); a share whose
    process dies runs again."""
    context = worker_context()
    running: dict[Connection, tuple[Any, Share, int]] = {}

    def start(share: Share, attempt: int) -> None:
        mine, theirs = context.Pipe(duplex=False)
        process = context.Process(target=_child, args=(theirs, share), daemon=True)
        process.start()
        theirs.close()
        running[mine] = (process, share, attempt)

    for share in shares:
        start(share, 1)
    results: list[CampaignResult] = []
    try:
        while running:
            interrupt.check()
            for connection in wait(list(running), timeout=0.2):
                process, share, attempt = running.pop(connection)  # type: ignore[index]
                try:
                    answer = connection.recv()  # type: ignore[union-attr]
                except EOFError:  # the process died before it answered
                    process.join()
                    if attempt > RETRIES:
                        raise WorkerError(
                            f"campaign share {share.number}: its process died {attempt} times "
                            f"(exit code {process.exitcode})"
                        ) from None
                    _say(report, f"share {share.number}: its process died; running it again")
                    start(share, attempt + 1)
                    continue
                finally:
                    connection.close()  # type: ignore[union-attr]
                process.join()
                if isinstance(answer, str):
                    raise WorkerError(f"campaign share {share.number}: {answer}")
                result: CampaignResult = answer
                if _done(report, share, result, results):
                    return results
        return results
    finally:
        for connection, (process, _, _) in running.items():
            process.terminate()
            process.join()
            connection.close()


# ---- Ray ---------------------------------------------------------------------------------------


def _on_ray(shares: list[Share], report: Report | None) -> list[CampaignResult]:
    """Each share a Ray task (Ray runs it again if its worker dies)."""
    task = ray_cluster.remote_function(run_share, retries=RETRIES)
    pending = {task.remote(share): share for share in shares}
    results: list[CampaignResult] = []
    try:
        while pending:
            interrupt.check()
            done, _ = ray_cluster.wait_one(list(pending), timeout=0.2)
            for reference in done:
                share = pending.pop(reference)
                try:
                    [result] = ray_cluster.get([reference])
                except ray_cluster.RayError as error:
                    raise WorkerError(f"campaign share {share.number}: {error}") from None
                if _done(report, share, result, results):
                    return results
        return results
    finally:
        ray_cluster.cancel(list(pending))


__all__ = [
    "RETRIES",
    "Share",
    "WorkerError",
    "merge",
    "run_share",
    "run_workers",
    "share_seed",
    "split",
]
