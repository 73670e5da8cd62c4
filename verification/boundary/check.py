"""The boundary check: one library call for "is this effect boundary safe?".

``check_boundary(policy, subject=..., seed=..., progress=...)`` runs, under
``boundary_policy(policy)``:

1. the explorer over the boundary model (every world within the profile's bounds,
   every crash point of every operation, a restore and a retry after each), which
   checks the design: the seven rules hold in the model itself;
2. the campaign on the real components in lockstep with the model: every situation
   the explorer found, replayed on disk with its crash, restore, retries and the
   owner's decisions, then seeded random walks.

It returns a ``BoundaryResult``: ``ok``, the violated rules by name, the counterexample
(its steps, saved as JSON when ``out_dir`` is given, replayable with ``replay``), and
the figures a report quotes. Bad input is a ``ValueError`` in one line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replan.controller.policy import DEFAULT_POLICY, Policy, policy_from_dict, policy_to_dict
from replan.verification.boundary.campaign import (
    CampaignResult,
    Finding,
    planned,
    run_campaign,
    run_sequence,
)
from replan.verification.boundary.domains import (
    Domains,
    boundary_policy,
    describe,
    op_from_json,
    op_to_json,
)
from replan.verification.boundary.explore import explore
from replan.verification.boundary.properties import PROPERTIES, Violation
from replan.verification.boundary.subjects import REAL, BoundarySubject, subject_named


@dataclass(frozen=True)
class Profile:
    """How far the check searches."""

    depth: int
    max_states: int
    walks: int
    walk_length: int


PROFILES: dict[str, Profile] = {
    "ci": Profile(depth=3, max_states=200, walks=8, walk_length=14),
    "default": Profile(depth=3, max_states=1500, walks=40, walk_length=20),
    "thorough": Profile(depth=4, max_states=6000, walks=200, walk_length=30),
}


@dataclass
class BoundaryResult:
    """What the boundary check found (see the module docstring)."""

    policy: Policy
    subject: str
    profile: str
    seed: int
    violated: list[str] = field(default_factory=list)
    message: str = ""
    steps: list[dict[str, Any]] = field(default_factory=list)
    counterexample: Path | None = None
    figures: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.violated

    def summary(self) -> str:
        f = self.figures
        found = (
            "every rule holds" if self.ok else f"{', '.join(self.violated)} broken: {self.message}"
        )
        return (
            f"{f.get('rules', len(PROPERTIES))} rules; model: {f.get('states', 0)} worlds"
            f"{' (the profile limit)' if f.get('explorer_truncated') else ''}, "
            f"{f.get('situations', 0)} crash situations; real: {f.get('sequences', 0)} "
            f"sequences, {f.get('operations', 0)} operations, {f.get('crashes', 0)} crashes, "
            f"{f.get('restores', 0)} restores ({f.get('tampered', 0)} from tampered files): "
            f"{found}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": "replan boundary",
            "ok": self.ok,
            "subject": self.subject,
            "profile": self.profile,
            "seed": self.seed,
            "policy": policy_to_dict(self.policy),
            "violated": self.violated,
            "message": self.message,
            "steps": self.steps,
            "counterexample": None if self.counterexample is None else str(self.counterexample),
            "figures": self.figures,
            "seconds": round(self.seconds, 2),
        }


def _subject(subject: BoundarySubject | str | None) -> BoundarySubject:
    if subject is None:
        return REAL
    if isinstance(subject, str):
        try:
            return subject_named(subject)
        except KeyError as error:
            raise ValueError(str(error.args[0])) from None
    return subject


def check_boundary(
    policy: Policy | None = None,
    *,
    subject: BoundarySubject | str | None = None,
    seed: int = 0,
    profile: str = "ci",
    progress: Callable[[str], None] | None = None,
    out_dir: Path | None = None,
) -> BoundaryResult:
    """Check the effect boundary under ``policy`` (the default policy when None); see
    the module docstring. ``subject``: the real boundary (None), a seeded bug by name,
    or a ``BoundarySubject``. The counterexample is written to
    ``out_dir/boundary-counterexample.json`` when a rule breaks."""
    if profile not in PROFILES:
        raise ValueError(f"profile {profile!r}: one of {', '.join(PROFILES)}")
    chosen = _subject(subject)
    bounds = PROFILES[profile]
    checked = boundary_policy(DEFAULT_POLICY if policy is None else policy)
    domains = Domains.of(checked)
    started = time.perf_counter()
    say = progress or (lambda _text: None)
    result = BoundaryResult(checked, chosen.name, profile, seed)
    exploration = explore(domains, bounds.depth, bounds.max_states)
    say(
        f"explorer: {exploration.states} worlds, {exploration.transitions} transitions, "
        f"{len(exploration.situations)} crash situations"
    )
    campaign = CampaignResult()
    if exploration.violations:
        violation, path = exploration.violations[0]
        finding: Finding | None = Finding(violation, path)
        where = "the model"
    else:
        sequences = planned(domains, exploration, seed, bounds.walks, bounds.walk_length)
        campaign = run_campaign(chosen, sequences, say)
        finding, where = campaign.finding, "the real boundary"
    result.figures = _figures(exploration, campaign)
    if finding is not None:
        result.violated = [finding.violation.property]
        result.message = f"{where}: {finding.violation.message}"
        result.steps = [op_to_json(op) for op in finding.steps]
        if out_dir is not None:
            result.counterexample = save_counterexample(result, out_dir)
    result.seconds = time.perf_counter() - started
    say(result.summary())
    return result


def _figures(exploration: Any, campaign: CampaignResult) -> dict[str, Any]:
    """What the check searched and ran, for the report."""
    return {
        "rules": len(PROPERTIES),
        "states": exploration.states,
        "transitions": exploration.transitions,
        "situations": len(exploration.situations),
        "answer_situations": len(exploration.answered),
        "explorer_truncated": exploration.truncated,
        "sequences": campaign.sequences,
        "operations": campaign.operations,
        "crashes": campaign.crashes,
        "restores": campaign.restores,
        "tampered": campaign.tampered,
        "crash_points": dict(sorted(campaign.points.items())),
    }


def save_counterexample(result: BoundaryResult, out_dir: Path) -> Path:
    """Write the counterexample (replayable with ``replay``) into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / "boundary-counterexample.json"
    document = {
        "tool": "replan boundary",
        "policy": policy_to_dict(result.policy),
        "subject": result.subject,
        "property": result.violated[0],
        "message": result.message,
        "steps": result.steps,
        "described": [describe(op_from_json(step)) for step in result.steps],
    }
    target.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return target


def load_counterexample(path: Path) -> Mapping[str, Any]:
    """A saved counterexample; ``ValueError`` in one line when it is not one."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: not a readable counterexample ({error})") from None
    if not isinstance(document, dict) or document.get("tool") != "replan boundary":
        raise ValueError(f'{path}: not a boundary counterexample (no "tool": "replan boundary")')
    return document


def replay(path: Path, subject: BoundarySubject | str | None = None) -> Violation | None:
    """Run a saved counterexample's steps again, on ``subject`` (default: the one it
    names): the violation it shows now, or None when every rule holds."""
    document = load_counterexample(path)
    try:
        policy = policy_from_dict(document["policy"])
        steps = [op_from_json(step) for step in document["steps"]]
    except (KeyError, TypeError) as error:
        raise ValueError(f"{path}: a counterexample without {error}") from None
    chosen = _subject(subject if subject is not None else str(document.get("subject", "real")))
    finding = run_sequence(chosen, Domains.of(policy), steps)
    return None if finding is None else finding.violation


__all__ = [
    "PROFILES",
    "BoundaryResult",
    "Profile",
    "check_boundary",
    "load_counterexample",
    "replay",
    "save_counterexample",
]
