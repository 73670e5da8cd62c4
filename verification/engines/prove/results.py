"""What a proof run answers: one result per property, and the report of them all.

``PropertyResult`` is one obligation, proved or refuted with a counterexample;
``ProofReport`` is everything ``replan prove`` (and verify's ``proofs`` check)
established for one policy, and ``counterexample_document`` turns its first failure
into the shared counterexample format ``replan replay`` reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replan.controller.policy import Policy, policy_to_dict


@dataclass
class PropertyResult:
    """One proof obligation: proved, or failed with a counterexample."""

    name: str
    kind: str  # equivalence | invariant | auxiliary | well-defined
    proved: bool
    seconds: float
    statement: str
    message: str = ""  # the readable counterexample when not proved
    counterexample: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "status": "proved" if self.proved else "failed",
            "milliseconds": round(self.seconds * 1000, 2),
            "statement": self.statement,
        }
        if not self.proved:
            document["message"] = self.message
            document["counterexample"] = self.counterexample
        return document


@dataclass
class ProofReport:
    """Everything ``replan prove`` proved (or refuted) for one policy."""

    policy: Policy
    digest: str
    results: list[PropertyResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(r.proved for r in self.results)

    @property
    def failures(self) -> list[PropertyResult]:
        return [r for r in self.results if not r.proved]

    @property
    def termination(self) -> dict[str, Any] | None:
        """The bound ``calls-lower-the-rank`` and ``rank-bounded`` give, when both were
        proved: between two pieces of new evidence, at most this many calls change a
        run (``replan.spec.termination.termination_bound``)."""
        from replan.spec.termination import termination_bound

        needed = {"calls-lower-the-rank", "rank-bounded"}
        proved = {r.name for r in self.results if r.proved}
        if not needed <= proved:
            return None
        policy = self.policy
        return {
            "bound": termination_bound(policy),
            "formula": "3 * max_proposals + max_steps + no_progress_limit + 1",
            "values": {
                "max_proposals": policy.max_proposals,
                "max_steps": policy.max_steps,
                "no_progress_limit": policy.no_progress_limit,
            },
            "counts": "proposals, executions and observations that are not progress, "
            "which change the run, between two pieces of new evidence",
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": "replan prove",
            "proved": self.ok,
            "declaration": self.digest,
            "policy": policy_to_dict(self.policy),
            "seconds": round(self.seconds, 4),
            "properties": [r.to_json() for r in self.results],
            "termination": self.termination,
        }

    def text(self) -> str:
        lines = []
        for result in self.results:
            status = "proved" if result.proved else "FAILED"
            milliseconds = f"{result.seconds * 1000:8.1f} ms"
            lines.append(f"  {status:6}  {result.name:30} {milliseconds}   {result.statement}")
            if not result.proved:
                lines.extend(f"          {line}" for line in result.message.splitlines())
        proved = sum(r.proved for r in self.results)
        lines.append(
            f"{proved} of {len(self.results)} properties proved in {self.seconds:.2f} s"
            + ("" if self.ok else f"; {len(self.failures)} failed")
        )
        bound = self.termination
        if bound is not None:
            values = bound["values"]
            lines.append(
                f"termination: between two pieces of new evidence a run makes at most "
                f"{bound['bound']} calls that change it (3 * {values['max_proposals']} "
                f"+ {values['max_steps']} + {values['no_progress_limit']} + 1: proposals, "
                "executions and observations that are not progress), the last one stopping it"
            )
        return "\n".join(lines)


def counterexample_document(report: ProofReport) -> dict[str, Any]:
    """The first failure in the shared counterexample format (DESIGN.md)."""
    failure = report.failures[0]
    detail = failure.counterexample or {}
    if "replay" in detail:  # a state and a step that ``replan replay`` runs
        document: dict[str, Any] = dict(detail["replay"])
        document["message"] = failure.message
        document.update({k: v for k, v in detail.items() if k != "replay"})
        if failure.kind != "equivalence":
            document["induction"] = {k: v for k, v in detail.items() if k != "replay"}
        return document
    return {
        "policy": policy_to_dict(report.policy),
        "property": failure.name,
        "message": failure.message,
        "source": "prove",
        "steps": [],  # a counterexample to induction is one step, not an episode
        "induction": detail,
    }
