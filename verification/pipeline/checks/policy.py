"""Check 1, policy: the file loaded (a bad one is refused before any check runs) and
the loader keeps the contract's defaults (``policy-defaults``)."""

from __future__ import annotations

from replan.verification.core.subject import Subject
from replan.verification.report.records import CheckResult


def check_policy(path: str | None, subject: Subject) -> CheckResult:
    """The file loaded (else exit 2, earlier); the loader's defaults are the contract's."""
    checker = subject.checker
    broken = checker.policy(subject.load)
    name = path or "spec/policy.toml"
    if broken:
        check = CheckResult(
            "policy",
            "failed",
            f"{name} is valid, but the loader breaks {', '.join(broken)}",
            details={"properties": broken},
            properties=broken,
        )
        check.failure_text = "; ".join(
            f"{b}: {checker.errors.get(b) or 'the defaults differ from the contract'}"
            for b in broken
        )
        return check
    return CheckResult(
        "policy", "passed", f"{name} is valid; the loader keeps the contract's defaults"
    )
