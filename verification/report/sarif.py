"""A verify report as a SARIF 2.1.0 log, for code scanning (``replan verify --sarif``).

Owns the shape of the log and nothing else: it reads a ``VerifyReport`` (and the
sources, for lines, through ``verification/report/locations.py``), it runs no check. One
run, its tool ``replan`` with one rule per named property (``spec/properties.py``
and the proofs' own: commit equivalence, the generated code, the bodies), per kind of
drift and of gap, and one for a check that failed without naming a property. One
result per broken property (naming the engines that found it, the counterexample and
the ``replan replay`` command the report gives), per drift and per gap (a warning,
an error under ``--strict``). Each result sits on the line to change:

- the commit equivalence (the proofs, the fixed-workflow table): the completing
  step's ``requires =`` in the policy file, ``[workflow] ready_when_passed`` beside it
- a property broken by a transition: that transition's line in the declaration,
  its guard and action definitions beside it; an initial-state failure: the initial
  state's line
- the loader's defaults (``policy-defaults``): ``DEFAULTS`` in ``controller/policy_schema.py``
- drift: the declared transitions the generated file lacks, else the file's first
  stale line; a stale diagram page: its block
- a gap: the transition's line, or for a stop reason the ``[limits]`` key that
  bounds it (the transition that stops the run when the file leaves it out)
- anything else: the policy file's first line.

Paths are relative to ``%SRCROOT%``, the directory verify ran in (a CI checkout's
root), when they are inside it.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import quote

from replan.verification.boundary.properties import PROPERTIES as BOUNDARY_RULES
from replan.verification.report.diagram.readme import PAGE
from replan.verification.report.locations import (
    Location,
    assignment_location,
    declaration,
    function_location,
    machine_class,
    policy_location,
    text_location,
)
from replan.verification.report.records import CheckResult, VerifyReport
from replan.verification.report.text import sarif as sarif_text
from replan.verification.runtime.checkout import checkout_root

SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SRCROOT = "%SRCROOT%"

#: Proof obligations that are not ``spec/properties.py`` properties.
PROOF_RULES: dict[str, str] = {
    "commit-equivalence": "The controller commits (executes a completing step) exactly when "
    "the fixed workflow's decide() says ReadyToCommit, for every evidence assignment.",
    "generated-matches-declaration": "Each generated event method leaves the same state, "
    "gives the same answer and fires the same transition as the declaration.",
    "bodies-well-defined": "The conditions the guard and action bodies take for granted (no "
    "None dereference, no missing key, a transition for every case) hold when reached.",
}

#: Findings that are not a broken property: rule id -> (level, description).
OTHER_RULES: dict[str, tuple[str, str]] = {
    "drift/generated-code": (
        "error",
        "controller/_generated.py is what `replan generate` makes of the declaration.",
    ),
    "drift/readme-diagram": (
        "error",
        "The docs' machine page embeds what `replan diagram --update-readme` draws.",
    ),
    "gap/transition": (
        "warning",
        "Every declared transition the policy leaves live is exercised by the engines.",
    ),
    "gap/stop-reason": ("warning", "Every stop reason is reached by the engines."),
    "check-failed": (
        "error",
        "A verify check (the episode, the mutation score, an engine that crashed or did "
        "not finish) failed without naming a property.",
    ),
}

#: A check that breaks a property without naming it: what its failure means.
CHECK_PROPERTY = {"workflow": "commit-equivalence"}

#: Stop reason -> the ``[limits]`` key that bounds it.
LIMIT_OF_STOP = {
    "StepLimit": "max_steps",
    "PlanLimit": "max_proposals",
    "NoNewEvidence": "no_progress_limit",
}

#: Stop reason -> the declaration's final state.
STATE_OF_STOP = {
    "Completed": "completed",
    "NoNewEvidence": "no_new_evidence",
    "StepLimit": "step_limit",
    "PlanLimit": "plan_limit",
    "Canceled": "canceled",
}


@dataclass
class Sources:
    """What the results point into: the policy file, the declaration (its model, for
    the labels), the run class whose guard and action bodies the controller runs."""

    policy: Path
    model: Any = None
    model_class: Any = None
    root: Path = field(default_factory=Path.cwd)

    def __post_init__(self) -> None:
        if self.model is None:
            from replan.spec.declaration import Replanning
            from replan.spec.model import extract

            self.model = extract(Replanning)
        if self.model_class is None:
            from replan.controller.run import Run

            self.model_class = Run
        found = machine_class(self.model)
        self.declaration = None if found is None else declaration(found)

    @property
    def transitions(self) -> tuple[Any, ...]:
        return tuple(getattr(self.model, "transitions", ()))

    def first_line(self) -> Location:
        return Location(self.policy, 1, "the policy")

    def transition(self, label: str) -> Location | None:
        if self.declaration is None:
            return None
        return self.declaration.transition(label, self.transitions)

    def bodies(self, label: str) -> list[Location]:
        """The guard and action definitions a transition runs."""
        info = next((t for t in self.transitions if t.label == label), None)
        if info is None:
            return []
        names = [*getattr(info, "guard_names", ()), info.action]
        found = [function_location(self.model_class, name, f"`{name}`") for name in names]
        return [location for location in found if location is not None]


def default_policy_path() -> Path:
    import replan.spec

    return Path(inspect.getfile(replan.spec)).parent / "policy.toml"


# ---- the log -----------------------------------------------------------------------


def sarif_log(
    report: VerifyReport,
    policy_path: str | Path | None = None,
    *,
    model: Any = None,
    model_class: Any = None,
    strict: bool = False,
    root: str | Path | None = None,
) -> dict[str, Any]:
    """The SARIF 2.1.0 log of ``report``: its policy file ``policy_path`` (default
    spec/policy.toml), the declaration ``model`` and run class ``model_class`` it
    verified (default: the project's), ``strict`` as ``--strict`` (gaps are errors),
    paths relative to ``root`` (default: the current directory)."""
    sources = Sources(
        Path(policy_path) if policy_path is not None else default_policy_path(),
        model,
        model_class,
        Path(root) if root is not None else Path.cwd(),
    )
    rules = _rules(report)
    index = {rule["id"]: number for number, rule in enumerate(rules)}
    results = [
        *_property_results(report, sources),
        *_check_results(report, sources),
        *_gap_results(report, sources, strict),
    ]
    for result in results:
        result["ruleIndex"] = index[result["ruleId"]]
        if not result["_places"]:  # somewhere to show it: the policy's first line
            result["_places"] = [sources.first_line()]
    driver: dict[str, Any] = {"name": "replan", "version": _version(), "rules": rules}
    homepage = _homepage()
    if homepage:
        driver["informationUri"] = homepage
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": driver},
                "originalUriBaseIds": {SRCROOT: {"uri": _directory_uri(sources.root)}},
                "invocations": [
                    {
                        "executionSuccessful": all(c.status != "error" for c in report.checks),
                        "exitCode": 0 if report.ok and not (strict and report.gaps) else 1,
                    }
                ],
                "results": [_place(result, sources.root) for result in results],
                "properties": {"profile": report.profile, "evidence": report.evidence},
            }
        ],
    }


def sarif_log_or_notice(
    report: VerifyReport, policy_path: str | Path | None = None, **options: Any
) -> dict[str, Any]:
    """``sarif_log``, or when building it fails (a bug here, not in the policy) a
    valid log with no results that says so in a tool notification: the file verify
    promised is always written, and never with a traceback on the terminal."""
    try:
        return sarif_log(report, policy_path, **options)
    except Exception as error:
        return {
            "$schema": SCHEMA_URI,
            "version": "2.1.0",
            "runs": [
                {
                    "tool": {"driver": {"name": "replan", "version": _version()}},
                    "invocations": [
                        {
                            "executionSuccessful": False,
                            "toolExecutionNotifications": [
                                {
                                    "level": "error",
                                    "message": {
                                        "text": "replan could not write its findings as "
                                        f"SARIF ({type(error).__name__}: {error}); "
                                        "verify-report.md has them"
                                    },
                                }
                            ],
                        }
                    ],
                    "results": [],
                }
            ],
        }


def write_sarif(log: Mapping[str, Any], path: str | Path) -> Path:
    from replan.verification.runtime.files import write_atomically

    return write_atomically(path, json.dumps(log, indent=2, ensure_ascii=False) + "\n")


def _version() -> str:
    try:
        return metadata.version("replan")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def _homepage() -> str | None:
    try:
        urls = metadata.metadata("replan").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        return None
    for entry in urls:
        url = str(entry).partition(",")[2].strip()
        if url.startswith(("https://", "http://")):
            return url
    return None


# ---- rules -------------------------------------------------------------------------


def _rules(report: VerifyReport) -> list[dict[str, Any]]:
    from replan.spec.properties import CONTRACT

    rules = []
    for prop in CONTRACT:
        text = inspect.getdoc(prop.function) or prop.name
        rules.append(
            {
                "id": prop.name,
                "shortDescription": {"text": prop.meaning or prop.name},
                "fullDescription": {"text": " ".join(text.split())},
                "defaultConfiguration": {"level": "error"},
                "properties": {"kind": prop.kind, "contract": prop.rule},
            }
        )
    for name, text in PROOF_RULES.items():
        rules.append(_rule(name, text, "error", "proof"))
    for name, text in BOUNDARY_RULES.items():
        rules.append(_rule(name, text, "error", "boundary"))
    known = {rule["id"] for rule in rules}
    for name in _broken(report):
        if name not in known:  # a property this version does not name: still a rule
            rules.append(_rule(name, name, "error", "property"))
            known.add(name)
    for name, (level, text) in OTHER_RULES.items():
        rules.append(_rule(name, text, level, name.split("/")[0]))
    return rules


def _rule(name: str, text: str, level: str, kind: str) -> dict[str, Any]:
    return {
        "id": name,
        "shortDescription": {"text": text},
        "defaultConfiguration": {"level": level},
        "properties": {"kind": kind},
    }


# ---- broken properties -------------------------------------------------------------


def _broken(report: VerifyReport) -> dict[str, list[CheckResult]]:
    """Each broken property and the checks that found it, in the order found (the
    fixed-workflow table's failure is the commit equivalence's)."""
    found: dict[str, list[CheckResult]] = {}
    for check in report.checks:
        names = list(check.properties)
        if not names and check.status == "failed" and check.name in CHECK_PROPERTY:
            names = [CHECK_PROPERTY[check.name]]
        for name in names:
            found.setdefault(name, []).append(check)
    return found


def _property_results(report: VerifyReport, sources: Sources) -> list[dict[str, Any]]:
    results = []
    for name, checks in _broken(report).items():
        lines: list[str] = []
        replays: list[str] = []
        transitions: list[str] = []
        for check in checks:
            summary, transition = _evidence(check, name)
            if summary:
                lines.append(f"{check.name}: {summary}")
            if transition:
                transitions.append(transition)
            replays += _replays(check, name)
        engines = ", ".join(check.name for check in checks)
        text = [f"{name} is broken (found by {engines})."]
        meaning = _meaning(name)
        if meaning:
            text.append(f"The rule: {meaning}")
        text += lines
        text += [f"Replay: {command}" for command in dict.fromkeys(replays)]
        places = _property_places(name, checks, transitions, report, sources)
        results.append(
            _result(
                name,
                "error",
                "\n".join(text),
                places,
                {
                    "engines": [check.name for check in checks],
                    "transitions": list(dict.fromkeys(transitions)),
                    "replay": list(dict.fromkeys(replays)),
                },
            )
        )
    return results


def _meaning(name: str) -> str:
    from replan.spec.properties import CONTRACT

    prop = CONTRACT.get(name)
    if prop is not None:
        return prop.meaning
    return PROOF_RULES.get(name) or BOUNDARY_RULES.get(name, "")


def _proof_entry(check: CheckResult, name: str) -> dict[str, Any]:
    for entry in check.details.get("properties", []) or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            return entry
    return {}


def _evidence(check: CheckResult, name: str) -> tuple[str, str | None]:
    """What ``check`` says about ``name``: a few lines of its counterexample, and the
    declared transition it breaks on (when it says)."""
    if check.name == "proofs":
        entry = _proof_entry(check, name)
        counterexample = entry.get("counterexample") or {}
        transition = counterexample.get("transition")
        if transition is None and isinstance(counterexample.get("declared"), dict):
            transition = counterexample["declared"].get("transition")
        text = _first_lines(str(entry.get("message", "")), 6)
        if entry.get("reachable"):
            text += f"\n({entry['reachable']})"
        return text, transition if isinstance(transition, str) else None
    if check.name == "workflow":
        rows = check.details.get("disagreements") or []
        shown = "; ".join(_workflow_row(row) for row in rows[:3] if isinstance(row, dict))
        return check.summary + (f" (e.g. {shown})" if shown else ""), None
    broken_by = check.details.get("broken_by") or {}
    transition = broken_by.get(name) if isinstance(broken_by, dict) else None
    first = check.properties[0] if check.properties else None
    text = check.failure_text if first == name else ""
    return _first_lines(text or check.summary, 8), (
        transition if isinstance(transition, str) else None
    )


def _workflow_row(row: Mapping[str, Any]) -> str:
    states = ", ".join(f"{k}={v}" for k, v in (row.get("states") or {}).items())
    commits = (row.get("controller") or {}).get("commits")
    return (
        f"{row.get('step')} with {states}: controller "
        f"{'commits' if commits else 'refuses'}, decide() says {row.get('decide')}"
    )


def _first_lines(text: str, count: int) -> str:
    lines = [line.rstrip() for line in text.strip().splitlines()]
    return "\n".join(lines[:count] + (["..."] if len(lines) > count else []))


def _replays(check: CheckResult, name: str) -> list[str]:
    """The replay commands of ``check`` that concern ``name`` (the proofs save the
    first failure's; the explorer one per property, named after it)."""
    if check.name == "proofs":
        return list(check.replay) if check.properties[:1] == [name] else []
    if len(check.properties) <= 1:
        return list(check.replay)
    return [command for command in check.replay if name in Path(command.split()[-1]).stem]


def _property_places(
    name: str,
    checks: list[CheckResult],
    transitions: list[str],
    report: VerifyReport,
    sources: Sources,
) -> list[Location]:
    """Where ``name`` breaks, the line to change first."""
    if name == "commit-equivalence":
        steps = [(_proof_entry(c, name).get("counterexample") or {}).get("step") for c in checks]
        return _commit_places(report, sources, [s for s in steps if isinstance(s, str)])
    if name == "policy-defaults":
        import replan.controller.policy_schema as _policy_schema_module

        found = assignment_location(_policy_schema_module, "DEFAULTS", "the loader's defaults")
        return [found] if found is not None else []
    if name in BOUNDARY_RULES:  # the rule as CONTRACT.md states it
        found = text_location(checkout_root() / "CONTRACT.md", f"- `{name}`:", "the rule")
        return [found] if found is not None else []
    places: list[Location] = []
    for label in dict.fromkeys(transitions):
        found = sources.transition(label)
        if found is not None:
            places.append(found)
    for label in dict.fromkeys(transitions):
        places += sources.bodies(label)
    if not places and sources.declaration is not None:
        for check in checks:
            entry = _proof_entry(check, name)
            counterexample = entry.get("counterexample") or {}
            event = counterexample.get("event")
            found = None
            if isinstance(event, str):
                found = sources.declaration.event(event)
            elif str(counterexample.get("obligation", "")).startswith("Init"):
                initial = next((s.id for s in sources.model.states if s.initial), None)
                found = sources.declaration.state(initial) if initial else None
            if found is not None:
                places.append(found)
    return places


def _commit_places(report: VerifyReport, sources: Sources, named: list[str]) -> list[Location]:
    """The completing steps' ``requires`` lines (those whose requirements are not the
    workflow's first: the one the counterexample names), then the workflow's."""
    policy = report.policy
    workflow = sorted(policy.workflow_keys)
    terminal = [(i, s) for i, s in enumerate(policy.steps) if s.completes_run]
    order = sorted(
        terminal,
        key=lambda pair: (pair[1].name not in named, sorted(pair[1].requires) == workflow),
    )
    places = []
    for index, step in order:
        found = policy_location(
            sources.policy, ("steps", index, "requires"), ("steps", index, "name")
        )
        if found is not None:
            places.append(Location(found.path, found.line, f"what {step.name} requires"))
    found = policy_location(sources.policy, ("workflow", "ready_when_passed"), ("workflow",))
    if found is not None:
        places.append(Location(found.path, found.line, "what the fixed workflow requires"))
    return places


# ---- other failed checks -------------------------------------------------------------


def _check_results(report: VerifyReport, sources: Sources) -> list[dict[str, Any]]:
    results = []
    for check in report.checks:
        if check.ok or check.properties:
            continue
        if check.name in CHECK_PROPERTY and check.status == "failed":
            continue  # reported as its property
        if check.name == "drift" and check.status == "failed":
            results += _drift_results(check, sources)
            continue
        text = f"verify's {check.name} check {check.status}: {check.summary}"
        if check.failure_text:
            text += "\n" + _first_lines(check.failure_text, 8)
        if check.status == "error":
            text += "\n(the check crashed: the other checks still ran; see verify-report.md)"
        results.append(
            _result(
                "check-failed",
                "error",
                text,
                [],
                {"check": check.name, "replay": list(check.replay)},
            )
        )
    return results


def _drift_results(check: CheckResult, sources: Sources) -> list[dict[str, Any]]:
    results = []
    generated = check.details.get("generated")
    if check.details.get("generated_fresh") is False:
        places: list[Location] = []
        detail = generated if isinstance(generated, dict) else {}
        for label in detail.get("declared_only", []):
            found = sources.transition(str(label))
            if found is not None:
                places.append(found)
        path = Path(str(detail.get("path", "controller/_generated.py")))
        if detail.get("first_difference"):
            places.append(Location(path, int(detail["first_difference"]), "the first stale line"))
        changed = ", ".join(detail.get("declared_only", [])[:3])
        text = (
            "controller/_generated.py is stale: it is not what the declaration generates. "
            "Run `replan generate`."
            + (f" Declared transitions it lacks: {changed}." if changed else "")
        )
        results.append(_result("drift/generated-code", "error", text, places, {}))
    if check.details.get("readme_diagram_fresh") is False:
        readme = Path(str(check.details.get("readme", PAGE)))
        found = text_location(readme, "<!-- diagram:start -->", "the diagram block")
        results.append(
            _result(
                "drift/readme-diagram",
                "error",
                f"{readme.name}'s diagram is stale: run `replan diagram --update-readme`.",
                [found] if found is not None else [],
                {},
            )
        )
    return results


# ---- gaps ----------------------------------------------------------------------------


def _gap_results(report: VerifyReport, sources: Sources, strict: bool) -> list[dict[str, Any]]:
    level = "error" if strict else "warning"
    labels = sorted((t.label for t in sources.transitions), key=len, reverse=True)
    results = []
    for gap in report.gaps:
        label = next((label for label in labels if label in gap), None)
        if label is not None:
            found = sources.transition(label)
            places = [found] if found is not None else []
            results.append(_result("gap/transition", level, _gap_text(gap, strict), places, {}))
            continue
        reason = next((r for r in STATE_OF_STOP if f"stopped a run {r}" in gap), None)
        places = []
        if reason in LIMIT_OF_STOP:
            found = policy_location(sources.policy, ("limits", LIMIT_OF_STOP[reason]))
            if found is not None and found.what != "limits":
                places.append(found)
        if reason is not None and sources.declaration is not None:
            found = sources.declaration.entering(STATE_OF_STOP[reason])
            if found is not None:
                places.append(found)
        results.append(_result("gap/stop-reason", level, _gap_text(gap, strict), places, {}))
    return results


def _gap_text(gap: str, strict: bool) -> str:
    return f"Gap: {gap}." + (
        " `--strict` makes it a failure."
        if strict
        else " Not a broken property (`replan verify --strict` fails on it)."
    )


# ---- results and locations -------------------------------------------------------------


def _result(
    rule: str,
    level: str,
    text: str,
    places: Iterable[Location],
    properties: dict[str, Any],
) -> dict[str, Any]:
    """A result before its paths are placed: the first of ``places`` is its
    location, the rest related ones (none: the policy file's first line)."""
    return {
        "ruleId": rule,
        "level": level,
        "message": {"text": sarif_text(text)},  # it quotes names: "[x](1)" would be a link
        "_places": list(dict.fromkeys(places)),
        "properties": properties,
    }


def _place(result: dict[str, Any], root: Path) -> dict[str, Any]:
    places: list[Location] = result.pop("_places")
    primary, related = places[0], places[1:]
    result["locations"] = [_location(primary, root)]
    if related:
        result["relatedLocations"] = [
            {"id": number, **_location(place, root)}
            for number, place in enumerate(related, start=1)
        ]
    if not result["properties"]:
        del result["properties"]
    return result


def _location(place: Location, root: Path) -> dict[str, Any]:
    location: dict[str, Any] = {
        "physicalLocation": {
            "artifactLocation": _artifact(place.path, root),
            "region": {"startLine": max(1, place.line)},
        }
    }
    if place.what:
        location["message"] = {"text": sarif_text(place.what)}
    return location


def _artifact(path: Path, root: Path) -> dict[str, str]:
    absolute = (path if path.is_absolute() else Path.cwd() / path).resolve()
    try:
        relative = absolute.relative_to(root.resolve())
    except ValueError:
        return {"uri": absolute.as_uri()}
    return {"uri": quote(relative.as_posix()), "uriBaseId": SRCROOT}


def _directory_uri(root: Path) -> str:
    uri = root.resolve().as_uri()
    return uri if uri.endswith("/") else uri + "/"
