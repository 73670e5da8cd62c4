"""Judging the boundary's mutants: does the boundary check fail on every broken boundary?

Owns the verdict on one boundary mutant (``verification.boundary.mutation``) and the
matrix of all of them, counted per file (``replan mutate``'s boundary part). A mutant
is built from its file (``subjects.build``) and driven through the boundary check's
sequences (the explorer's situations and the seeded walks: the model is the same for
every mutant, so it is searched once): **killed** when a rule breaks, or the mutant
does not load; **equivalent** when ``mutation.EQUIVALENT_RULES`` gives the reason it cannot
change what the rules observe; **survived** otherwise, reported with its diff.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replan.verification.boundary.mutation import BoundaryMutant, boundary_mutants, equivalence
from replan.verification.boundary.subjects import SubjectError, build


@dataclass
class BoundaryVerdict:
    mutant: BoundaryMutant
    status: str  # killed | survived | equivalent
    property: str | None = None
    reason: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "id": self.mutant.id,
            "operator": self.mutant.operator,
            "file": self.mutant.file,
            "function": self.mutant.function,
            "description": self.mutant.description,
            "status": self.status,
            "property": self.property,
            "reason": self.reason,
            "seconds": round(self.seconds, 3),
        }
        if self.status == "survived":
            document["diff"] = self.mutant.diff
        return document


@dataclass
class BoundaryMatrix:
    verdicts: list[BoundaryVerdict] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, status: str, file: str | None = None) -> int:
        return sum(
            v.status == status and (file is None or v.mutant.file == file) for v in self.verdicts
        )

    @property
    def ok(self) -> bool:
        return self.count("survived") == 0

    @property
    def score(self) -> float:
        relevant = len(self.verdicts) - self.count("equivalent")
        return 1.0 if relevant == 0 else self.count("killed") / relevant

    def per_file(self) -> dict[str, dict[str, float]]:
        rows: dict[str, dict[str, float]] = {}
        for verdict in self.verdicts:
            row = rows.setdefault(
                verdict.mutant.file,
                {"generated": 0, "killed": 0, "equivalent": 0, "survived": 0, "seconds": 0.0},
            )
            row["generated"] += 1
            row[verdict.status] += 1
            row["seconds"] = round(row["seconds"] + verdict.seconds, 1)
        return rows

    def to_json(self) -> dict[str, Any]:
        return {
            "generated": len(self.verdicts),
            "killed": self.count("killed"),
            "equivalent": self.count("equivalent"),
            "survived": self.count("survived"),
            "score": round(self.score, 4),
            "seconds": round(self.seconds, 1),
            "by_file": self.per_file(),
            "by_operator": {
                op: dict(Counter(v.status for v in self.verdicts if v.mutant.operator == op))
                for op in sorted({v.mutant.operator for v in self.verdicts})
            },
            "killed_by": dict(Counter(v.property for v in self.verdicts if v.property)),
            "mutants": [v.to_json() for v in self.verdicts],
        }

    def lines(self) -> list[str]:
        lines = [
            f"replan mutate (boundary): {len(self.verdicts)} mutants, {self.count('killed')} "
            f"killed, {self.count('equivalent')} equivalent, {self.count('survived')} survived "
            f"(score {self.score:.1%} of the non-equivalent) in {self.seconds:.0f} s"
        ]
        for path, row in self.per_file().items():
            lines.append(
                f"  {path}: {row['generated']:.0f} mutants, {row['killed']:.0f} killed, "
                f"{row['equivalent']:.0f} equivalent, {row['survived']:.0f} survived "
                f"({row['seconds']:.0f} s)"
            )
        for verdict in self.verdicts:
            if verdict.status == "survived":
                lines.append(f"  SURVIVED    {verdict.mutant.id}: {verdict.mutant.description}")
                lines.extend(f"              {line}" for line in verdict.mutant.diff.splitlines())
        return lines


class BoundaryJudge:
    """Judges boundary mutants under one policy: the model searched once, its
    sequences replayed on each mutant until a rule breaks. Only the sequences whose
    run of the real boundary calls the mutated function are replayed: a mutant of a
    function a sequence never calls behaves as the real boundary there (``covers``,
    recorded once by running every sequence on the real boundary)."""

    def __init__(self, policy: Any, profile: str = "ci") -> None:
        from replan.verification.boundary.campaign import planned
        from replan.verification.boundary.check import PROFILES
        from replan.verification.boundary.domains import Domains, boundary_policy
        from replan.verification.boundary.explore import explore

        bounds = PROFILES[profile]
        self.domains = Domains.of(boundary_policy(policy))
        exploration = explore(self.domains, bounds.depth, bounds.max_states)
        self.sequences = planned(self.domains, exploration, 0, bounds.walks, bounds.walk_length)
        self.covers = [_coverage(domains, steps) for domains, steps in self.sequences]

    def sequences_for(self, mutant: BoundaryMutant) -> list[Any]:
        """The sequences that call ``mutant``'s function on the real boundary."""
        key = (mutant.file, mutant.function)
        return [s for s, calls in zip(self.sequences, self.covers, strict=True) if key in calls]

    def judge(self, mutant: BoundaryMutant) -> BoundaryVerdict:
        """Killed (the rule it breaks), equivalent (it survived, and an equivalence
        rule says why it cannot break one) or survived."""
        from replan.verification.boundary.campaign import run_campaign

        started = time.perf_counter()
        try:
            subject = build(mutant.id, {mutant.file: mutant.source}, mutant.description)
        except SubjectError as error:
            verdict = BoundaryVerdict(mutant, "killed", "load", str(error))
        else:
            chosen = self.sequences_for(mutant)
            result = run_campaign(subject, chosen, shrink_finding=False)
            reason = equivalence(mutant)
            if result.finding is not None:
                found = result.finding.violation
                verdict = BoundaryVerdict(mutant, "killed", found.property, found.message)
            elif reason is not None:
                verdict = BoundaryVerdict(mutant, "equivalent", reason=reason)
            else:
                reason = f"every rule holds in the {len(chosen)} sequences that call it"
                verdict = BoundaryVerdict(mutant, "survived", reason=reason)
        verdict.seconds = time.perf_counter() - started
        return verdict


def _coverage(domains: Any, steps: list[Any]) -> frozenset[tuple[str, str]]:
    """The (file, function) of ``SCOPE`` that running ``steps`` on the real boundary
    calls (a nested function counts as the function it is defined in)."""
    import sys

    from replan.verification.boundary.campaign import run_sequence
    from replan.verification.boundary.subjects import FILES, REAL

    files: dict[str, str] = {}
    for path, name in FILES.items():
        where = REAL.modules[name].__file__
        if where is not None:  # as the code objects name it, and as the file is
            files[where] = files[str(Path(where).resolve())] = path
    called: set[tuple[str, str]] = set()

    def profile(frame: Any, event: str, _arg: object) -> None:
        if event == "call":
            path = files.get(frame.f_code.co_filename)
            if path is not None:
                called.add((path, frame.f_code.co_qualname.split(".<locals>")[0]))

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        run_sequence(REAL, domains, steps)
    finally:
        sys.setprofile(previous)
    return frozenset(called)


def run_boundary_matrix(
    policy: Any,
    mutants: Sequence[BoundaryMutant] | None = None,
    *,
    progress: Callable[[int, int, BoundaryVerdict], None] | None = None,
    workers: int = 1,
) -> BoundaryMatrix:
    """Judge ``mutants`` (default: every one), in ``workers`` processes."""
    chosen = list(boundary_mutants() if mutants is None else mutants)
    started = time.perf_counter()
    matrix = BoundaryMatrix()
    if workers > 1 and len(chosen) > 1:
        matrix.verdicts = _in_processes(policy, chosen, progress, workers)
    else:
        judge = BoundaryJudge(policy)
        for number, mutant in enumerate(chosen, start=1):
            verdict = judge.judge(mutant)
            matrix.verdicts.append(verdict)
            if progress is not None:
                progress(number, len(chosen), verdict)
    matrix.seconds = time.perf_counter() - started
    return matrix


_WORKER: dict[str, Any] = {}


def _start_worker(document: dict[str, Any]) -> None:
    import logging

    from replan.controller.policy import policy_from_dict
    from replan.verification.runtime.interrupt import ignore_in_worker

    ignore_in_worker()
    logging.getLogger("agent_framework").setLevel(logging.CRITICAL)
    _WORKER["judge"] = BoundaryJudge(policy_from_dict(document))
    _WORKER["mutants"] = {m.id: m for m in boundary_mutants()}


def _judge_in_worker(mutant_id: str) -> dict[str, Any]:
    verdict = _WORKER["judge"].judge(_WORKER["mutants"][mutant_id])
    return {
        "status": verdict.status,
        "property": verdict.property,
        "reason": verdict.reason,
        "seconds": verdict.seconds,
    }


def _in_processes(
    policy: Any,
    chosen: Sequence[BoundaryMutant],
    progress: Callable[[int, int, BoundaryVerdict], None] | None,
    workers: int,
) -> list[BoundaryVerdict]:
    from replan.controller.policy import policy_to_dict
    from replan.verification.runtime.pool import judged_in_processes

    return judged_in_processes(
        chosen,
        [mutant.id for mutant in chosen],
        workers,
        (_start_worker, (policy_to_dict(policy),)),
        _judge_in_worker,
        lambda mutant, found: BoundaryVerdict(mutant, **found),
        progress,
    )


__all__ = [
    "BoundaryJudge",
    "BoundaryMatrix",
    "BoundaryVerdict",
    "run_boundary_matrix",
]
