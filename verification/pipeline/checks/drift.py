"""Check 2, drift: the generated controller and the machine page's diagram
(``docs/contract/machine.md``) are what the declaration gives today."""

from __future__ import annotations

from typing import Any

from replan.verification.report.records import CheckResult
from replan.verification.runtime.checkout import checkout_root


def check_drift() -> CheckResult:
    from replan.spec.generator import check_generated
    from replan.verification.report.diagram import readme_mermaid
    from replan.verification.report.diagram.readme import PAGE, is_fresh

    generated = check_generated()
    readme = checkout_root() / PAGE
    # an installed package has no docs: then only the generated code is compared
    has_readme = readme.is_file()
    diagram_fresh = is_fresh(readme, readme_mermaid()) if has_readme else True
    problems = []
    if not generated:
        problems.append("controller/_generated.py is stale (run `replan generate`)")
    if not diagram_fresh:
        problems.append(f"{PAGE}'s diagram is stale (run `replan diagram --update-readme`)")
    details: dict[str, Any] = {
        "generated_fresh": generated,
        "readme_diagram_fresh": diagram_fresh if has_readme else None,
    }
    if not generated:  # where: what a reviewer (or the SARIF log) points at
        from replan.spec.generator import GENERATED_PATH, generate_source
        from replan.verification.report.locations import generated_drift

        details["generated"] = generated_drift(GENERATED_PATH, generate_source())
    if not diagram_fresh:
        details["readme"] = str(readme)
    return CheckResult(
        "drift",
        "passed" if not problems else "failed",
        "; ".join(problems)
        or (
            "generated code and the machine page's diagram match the declaration"
            if has_readme
            else "generated code matches the declaration (no docs here to compare)"
        ),
        details=details,
    )
