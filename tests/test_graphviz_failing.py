"""A diagram tool that fails is a warning about the diagram, never a failed check: a
half-installed Graphviz (a ``dot`` that exits 1, or that cannot run at all) leaves
verify's diagram check passed with a finding that says so, and Mermaid drawn."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from replan.controller.policy import DEFAULT_POLICY
from replan.verification.pipeline.checks.diagram import check_diagram
from replan.verification.pipeline.session import VerifySession
from replan.verification.report.records import write_markdown

BROKEN = {
    "exits-1": "#!/bin/sh\necho 'Format: \"svg\" not recognized. Use one of:' >&2\nexit 1\n",
    "cannot-run": "not a program\n",
}


@pytest.fixture(params=list(BROKEN))
def broken_dot(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    dot = bin_dir / "dot"
    dot.write_text(BROKEN[request.param], encoding="utf-8")
    dot.chmod(dot.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return str(request.param)


def test_a_failing_graphviz_is_a_warning_about_the_diagram_not_a_failed_check(
    broken_dot: str, tmp_path: Path
) -> None:
    session = VerifySession(DEFAULT_POLICY, tmp_path / "out")
    result = check_diagram(session)
    assert result.status == "passed"
    assert result.warnings and "Graphviz" in result.warnings[0]
    assert "Mermaid only" in result.summary
    assert session.report.mermaid.startswith("%%{init")
    session.report.checks.append(result)
    page = write_markdown(session.report, tmp_path / "verify-report.md").read_text()
    assert "## Counterexamples" not in page and "## Findings" in page


def test_a_failing_graphviz_counts_as_none_for_every_drawing_caller(broken_dot: str) -> None:
    """The review page and verify's --against diff draw SVG only where Graphviz draws:
    with a broken one they show Mermaid, as without Graphviz."""
    from replan.verification.report.diagram.dot import dot_available, graphviz_problem

    assert not dot_available()
    problem = graphviz_problem()
    assert problem is not None and "-Tsvg" in problem and "\n" not in problem
