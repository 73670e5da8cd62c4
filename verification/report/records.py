"""The verify report: one record per check, rendered for reviewers and machines.

Owns the shapes ``replan verify`` writes (``verify.json``, ``verify-report.md``,
JUnit XML) and nothing else: it reads check results, it runs no check. Timings,
dates and package versions are kept apart (``seconds`` fields and the ``run``
section) so that a report is reproducible apart from them.
"""

from __future__ import annotations

import json
import platform
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from replan.controller.policy import Policy, policy_from_dict, policy_to_dict
from replan.verification.report import text
from replan.verification.runtime.files import write_atomically

#: Keys whose values change from run to run without the result changing.
VOLATILE_KEYS = frozenset(
    {
        "seconds",
        "generated_at",
        "versions",
        "run",
        "operations_per_second",
        "states_per_second",
        "transitions_per_second",
        "milliseconds",
        # a generated kernel's: how long generating took, whether the cache had it, and
        # what follows from its text (the same kernel's text may order a disjunction's
        # operands differently in another process, z3 numbering its terms as they are
        # made, and so group its calls into other functions)
        "translate_seconds",
        "kernel_cache",
        "kernel_digest",
        "kernel_functions",
        "transitions_evaluated",
        # how the kernel's search was split (the same states and verdicts either way)
        "search_shards",
        "search_on_ray",
    }
)


@dataclass
class CheckResult:
    name: str
    status: str  # passed | failed | error
    summary: str
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    counterexamples: list[str] = field(default_factory=list)
    replay: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    failure_text: str = ""
    #: the properties (``spec/properties.py`` names) this check found broken
    properties: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "passed"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "summary": self.summary,
            "seconds": round(self.seconds, 2),
            "counterexamples": self.counterexamples,
            "replay": self.replay,
            "warnings": self.warnings,
            "properties": self.properties,
            "failure": self.failure_text,
            "details": self.details,
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> CheckResult:
        """The record ``to_json`` wrote (``replan review`` reads verify.json back, so
        the page and verify's own lines come from the same records)."""
        return cls(
            name=str(document["name"]),
            status=str(document["status"]),
            summary=str(document["summary"]),
            details=dict(document.get("details") or {}),
            seconds=float(document.get("seconds", 0.0)),
            counterexamples=list(document.get("counterexamples", [])),
            replay=list(document.get("replay", [])),
            warnings=list(document.get("warnings", [])),
            failure_text=str(document.get("failure", "")),
            properties=list(document.get("properties", [])),
        )


@dataclass
class VerifyReport:
    policy: Policy
    profile: str
    evidence: str
    checks: list[CheckResult] = field(default_factory=list)
    seconds: float = 0.0
    mermaid: str = ""
    diff_mermaid: str = ""
    against_lines: list[str] = field(default_factory=list)
    #: what no engine exercised (``replan verify --strict`` fails on them)
    gaps: list[str] = field(default_factory=list)
    #: declared transitions z3 shows cannot fire under the policy: not gaps
    not_live: dict[str, str] = field(default_factory=dict)
    #: checks ``--fail-fast`` left unrun after the first one that did not pass
    not_run: list[str] = field(default_factory=list)
    #: The ``run`` section of a report read back (``from_json``): when and with what
    #: it was written, kept rather than restamped with the reader's time.
    recorded_run: dict[str, Any] | None = None
    #: False for a report read back from the committed evidence (``replan evidence``
    #: writes no timings, dates or versions): it is shown, and written, without them.
    timed: bool = True

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def to_json(self) -> dict[str, Any]:
        run = self.recorded_run or {
            "seconds": round(self.seconds, 1),
            "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "versions": _versions(),
        }
        document = {
            "ok": self.ok,
            "profile": self.profile,
            "policy": policy_to_dict(self.policy),
            "checks": [check.to_json() for check in self.checks],
            "failed": [check.name for check in self.checks if not check.ok],
            "broken_properties": self.broken_properties,
            "gaps": self.gaps,
            "not_live": self.not_live,
            "not_run": self.not_run,
            "against": self.against_lines,
            "run": run,
        }
        return document if self.timed else stable(document)

    @classmethod
    def from_json(cls, document: dict[str, Any], evidence: str) -> VerifyReport:
        """A report read back from its ``verify.json`` (``evidence``: the directory it
        is in). ``ValueError`` (``PolicyError`` included) when it is not one."""
        if not isinstance(document, dict) or not isinstance(document.get("checks"), list):
            raise ValueError("not a verify report: expected an object with a 'checks' list")
        try:
            report = cls(
                policy=policy_from_dict(document["policy"]),
                profile=str(document.get("profile", "")),
                evidence=evidence,
                checks=[CheckResult.from_json(check) for check in document["checks"]],
                seconds=float((document.get("run") or {}).get("seconds", 0.0)),
                against_lines=[str(line) for line in document.get("against", [])],
                gaps=[str(gap) for gap in document.get("gaps", [])],
                not_live={str(k): str(v) for k, v in (document.get("not_live") or {}).items()},
                not_run=[str(name) for name in document.get("not_run", [])],
                recorded_run=dict(document["run"])
                if isinstance(document.get("run"), dict)
                else None,
                timed="run" in document,
            )
        except (KeyError, TypeError) as error:
            raise ValueError(f"not a verify report ({type(error).__name__}: {error})") from None
        return report

    @property
    def broken_properties(self) -> dict[str, list[str]]:
        """Each broken property and the checks that found it, in the order found."""
        found: dict[str, list[str]] = {}
        for check in self.checks:
            for name in check.properties:
                found.setdefault(name, []).append(check.name)
        return found

    def verdict(self) -> str:
        if self.ok and self.gaps:
            return f"passed with gaps ({len(self.gaps)})"
        if self.ok:
            return "all checks hold"
        failed = []
        for check in self.checks:
            if not check.ok:
                named = f" ({', '.join(check.properties[:4])})" if check.properties else ""
                failed.append(check.name + named)
        return "FAILED: " + ", ".join(failed)

    def summary_lines(self) -> list[str]:
        lines = []
        for check in self.checks:
            mark = {"passed": "ok  ", "failed": "FAIL", "error": "ERR "}.get(check.status, "?   ")
            took = f"  ({check.seconds:.1f} s)" if self.timed else ""
            lines.append(f"{mark} {check.name:<9} {check.summary}{took}")
            if not check.ok and check.failure_text:
                lines += [f"       {line}" for line in check.failure_text.splitlines()[:12]]
            for command in check.replay:
                lines.append(f"       replay: {command}")
        if self.not_run:
            lines.append(f"--   not run (--fail-fast): {', '.join(self.not_run)}")
        lines += [f"     change: {line}" for line in self.against_lines]
        took = f" ({self.seconds:.0f} s)" if self.timed else ""
        lines.append(
            f"replan verify: {self.verdict()}{took}; report in "
            f"{Path(self.evidence) / 'verify-report.md'}"
        )
        return lines


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for package in ("python-statemachine", "hypothesis", "z3-solver", "agent-framework-core"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "absent"
    return versions


def stable(document: Any) -> Any:
    """``document`` without the values that vary between identical runs (timings,
    dates, versions): what a reproducibility check compares."""
    if isinstance(document, dict):
        return {k: stable(v) for k, v in document.items() if k not in VOLATILE_KEYS}
    if isinstance(document, list):
        return [stable(item) for item in document]
    if isinstance(document, str):
        return _TIMING.sub("<t>", document)
    return document


#: A timing or a rate inside a sentence ("29.6 s", "338 ops/s", "1,760 states/s").
_TIMING = re.compile(r"[\d.,]+ ?(?:s|ms|µs|ops/s|operations/s|states/s|transitions/s)(?![\w/])")


def write_markdown(report: VerifyReport, path: Path, timings: bool | None = None) -> Path:
    """The reviewer's page; ``timings=False`` (default: whether the report has them):
    without the time column and the run's duration (the committed evidence: the same
    run writes the same page). Every string this function did not write (a name of
    the policy, a summary that quotes one, a path) goes through ``report.text``'s
    Markdown escaping: GitHub's job summary renders the page, and a name must show as
    text there, never as a heading, a table row, a link or HTML."""
    timings = report.timed if timings is None else timings
    lines = _summary_table(report, timings)
    lines += _sections(report)
    written = f" in {report.seconds:.0f} s" if timings else " (`replan evidence`: no timings)"
    lines += ["", f"Written by `replan verify`{written}.", ""]
    return write_atomically(path, "\n".join(lines))


def _summary_table(report: VerifyReport, timings: bool) -> list[str]:
    """The verdict, the profile and policy in one line, and one row per check."""
    policy = report.policy
    md = text.markdown
    keys = md(", ".join(policy.keys)) or "none"
    lines = [
        "# replan verify",
        "",
        f"**{'All checks hold.' if report.ok and not report.gaps else md(report.verdict()) + '.'}**"
        f" Profile {text.markdown_code(report.profile)}; policy: keys {keys}; "
        f"limits max_steps={policy.max_steps}, max_proposals={policy.max_proposals}, "
        f"no_progress_limit={policy.no_progress_limit}.",
        "",
        "| check | status | figures | time |" if timings else "| check | status | figures |",
        "|---|---|---|---|" if timings else "|---|---|---|",
    ]
    for check in report.checks:
        status = {"passed": "✅ passed", "failed": "❌ failed", "error": "⚠️ error"}[check.status]
        if check.warnings:
            status += f", {len(check.warnings)} finding{'s' if len(check.warnings) > 1 else ''}"
        row = f"| {md(check.name)} | {status} | {md(check.summary)} |"
        lines.append(row + (f" {check.seconds:.1f} s |" if timings else ""))
    for name in report.not_run:
        lines.append(f"| {md(name)} | not run (`--fail-fast`) | |" + (" |" if timings else ""))
    return lines


def _sections(report: VerifyReport) -> list[str]:
    """The sections that follow the table, each present only when it has content:
    broken properties, gaps, dead transitions, findings, counterexamples, what
    changed, coverage, and the machine."""
    md = text.markdown
    lines: list[str] = []
    broken = report.broken_properties
    if broken:
        lines += ["", "## Broken properties", "", "| property | found by |", "|---|---|"]
        lines += [
            f"| {text.markdown_code(name, in_table=True)} | {md(', '.join(checks))} |"
            for name, checks in broken.items()
        ]
    if report.gaps:
        lines += ["", "## Gaps (`--strict` fails on them)", ""] + [
            f"- {md(g)}" for g in report.gaps
        ]
    if report.not_live:
        lines += ["", "## Declared transitions that cannot fire under this policy", ""]
        lines += [f"- {md(label)}: {md(why)}" for label, why in report.not_live.items()]
    warnings = [(c.name, w) for c in report.checks for w in c.warnings]
    if warnings:
        lines += ["", "## Findings", ""] + [f"- {md(name)}: {md(w)}" for name, w in warnings]
    failures = [c for c in report.checks if not c.ok]
    if failures:
        lines += ["", "## Counterexamples", ""]
        for check in failures:
            lines += [f"### {md(check.name)}", ""]
            lines += text.markdown_fence(check.failure_text.strip() or check.summary)
            lines.append("")
            for saved in check.counterexamples:
                lines.append(f"- saved: {text.markdown_code(saved)}")
            for command in check.replay:
                lines.append(f"- replay: {text.markdown_code(command)}")
            lines.append("")
    if report.against_lines:
        lines += ["", "## What changed", ""]
        lines += [f"- {md(line)}" for line in report.against_lines]
        if report.diff_mermaid:
            lines += ["", "Green: added, red: removed, orange: changed, grey: unchanged.", ""]
            lines += text.markdown_fence(report.diff_mermaid, "mermaid")
    campaign = next((c for c in report.checks if c.name == "campaign"), None)
    if campaign is not None and campaign.details.get("coverage"):
        lines += ["", "## Coverage", "", *text.markdown_fence(campaign.summary)]
    if report.mermaid:
        lines += ["", "## The machine", "", *text.markdown_fence(report.mermaid, "mermaid")]
    return lines


def write_junit(report: VerifyReport, path: Path) -> Path:
    """JUnit XML, one test case per check (CI systems show it natively)."""
    failures = sum(1 for c in report.checks if c.status == "failed")
    errors = sum(1 for c in report.checks if c.status == "error")
    xml = text.xml  # names and summaries quote the policy: XML holds no control character

    def attribute(value: str) -> str:
        return text.xml(value, lines=False)

    suite = ET.Element(
        "testsuite",
        name="replan verify",
        tests=str(len(report.checks)),
        failures=str(failures),
        errors=str(errors),
        time=f"{report.seconds:.2f}",
    )
    for check in report.checks:
        case = ET.SubElement(
            suite,
            "testcase",
            classname="replan.verify",
            name=attribute(check.name),
            time=f"{check.seconds:.2f}",
        )
        if check.status == "failed":
            failure = ET.SubElement(case, "failure", message=attribute(check.summary))
            failure.text = xml("\n".join([check.failure_text, *check.replay]))
        elif check.status == "error":
            error = ET.SubElement(case, "error", message=attribute(check.summary))
            error.text = json.dumps(check.details.get("traceback", ""))
        ET.SubElement(case, "system-out").text = xml(check.summary)
    root = ET.Element("testsuites")
    root.append(suite)
    return write_atomically(path, ET.tostring(root, encoding="utf-8", xml_declaration=True))
