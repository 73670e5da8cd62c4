"""What one ``verify`` run is asked to do: everything a caller chooses beyond the policy.

The command line, ``replan evidence``, ``replan review`` and the pytest plugin build
one of these; the checks read it and nothing else from their caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from replan.verification.runtime.files import OUT

#: The campaign's budgets (``engines.campaign.machine.PROFILES`` holds their sizes).
PROFILES = ("ci", "default", "thorough")


@dataclass(frozen=True)
class VerifyOptions:
    """The choices of one verify run (the policy and the subject are its arguments)."""

    #: the campaign's budget, one of ``PROFILES``
    profile: str = "ci"
    #: the campaign's seed: a run is reproducible apart from timings
    seed: int = 0
    #: the explorer's shards; None: decided from the policy and the machine
    workers: int | None = 1
    #: the explorer's engine: "python", "kernel", or "auto" (``estimate.explorer_engine``)
    engine: str = "auto"
    #: the committed form (``replan evidence``): no timings, dates or versions, and
    #: prove.json beside the report
    deterministic: bool = False
    #: also run mutation adequacy (``replan mutate``)
    mutate: bool = False
    #: an older policy file or a git revision: also report what changed
    against: str | None = None
    #: the file the policy was read from (None: the default policy)
    policy_file: str | None = None
    #: stop at the first check that does not pass; the rest are listed as not run
    fail_fast: bool = False
    #: run the boundary check (``replan bench --tool boundary`` turns it off to measure
    #: what it adds; the command line always runs it)
    boundary: bool = True


def default_report_dir(policy: str | None, mutant: str | None = None) -> Path:
    """Where verify writes when no -o is given: out/verify/<name>/."""
    if mutant is not None:
        name = f"mutant-{mutant}"
    elif policy is None:
        name = "default"
    else:
        name = Path(policy).stem
    return OUT / "verify" / name
