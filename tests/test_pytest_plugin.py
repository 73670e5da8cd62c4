"""The pytest plugin as a user meets it: a new project outside this repository, a test
file of five lines, ``pytest`` run there in a fresh process (the plugin is found
through its ``pytest11`` entry point, not through this repository's conftest)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

POLICIES = Path(__file__).parent / "policies"
DEFAULT = Path(__file__).parents[1] / "spec" / "policy.toml"

USER_TEST = """\
import pytest

@pytest.mark.replan(policy="policy.toml", examples=40)
def test_our_policy_keeps_the_contract(replan_campaign):
    replan_campaign()
"""


def _project(root: Path, policy: Path) -> Path:
    root.mkdir()
    shutil.copy(policy, root / "policy.toml")
    (root / "test_policy.py").write_text(USER_TEST, encoding="utf-8")
    assert len(USER_TEST.splitlines()) == 5
    return root


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=project,
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )


def test_plugin_passes_a_users_good_policy(tmp_path: Path) -> None:
    project = _project(tmp_path / "good", DEFAULT)
    done = _pytest(project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    # nothing of replan's in the user's project (.hypothesis is Hypothesis' own cache)
    left = {p.name for p in project.iterdir()} - {".hypothesis"}
    assert left == {"policy.toml", "test_policy.py"}
    assert not (project / ".hypothesis" / "examples").exists()


def test_plugin_fails_a_weakened_gate_with_the_counterexample(tmp_path: Path) -> None:
    project = _project(tmp_path / "weak", POLICIES / "commit-requires-parser-only.toml")
    done = _pytest(project, "--junitxml=junit.xml")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "replan: commit-equivalence" in done.stdout
    assert "evidence parser Passed, access Unknown: step 'commit-import' commits" in done.stdout
    assert "again: replan verify --policy" in done.stdout
    assert "fix: steps[2] 'commit-import' requires ['parser']" in done.stdout
    properties = {
        p.get("name"): p.get("value") for p in ET.parse(project / "junit.xml").iter("property")
    }
    assert properties["replan_property"] == "commit-equivalence"
    assert "parser Passed" in properties["replan_counterexample"]


def test_plugin_fails_a_broken_controller_with_a_replayable_counterexample(
    tmp_path: Path,
) -> None:
    """The campaign half: a controller that does not count an executed step keeps the
    workflow's commit decisions, so only the campaign's properties catch it."""
    from replan.controller import DEFAULT_POLICY
    from replan.verification.core.subject import resolve_implementation
    from replan.verification.pipeline.policy_check import check_policy
    from replan.verification.subjects.mutants import mutant_implementation

    broken = resolve_implementation(mutant_implementation("step-not-counted"))
    failure, result = check_policy(
        DEFAULT_POLICY, implementation=broken, examples=100, out_dir=tmp_path
    )
    assert failure is not None and result is not None
    assert failure.property == "execute-counts-one-step"
    assert failure.command.startswith("replan replay ")
    replayed = subprocess.run(
        [
            sys.executable,
            "-m",
            "replan",
            *failure.command.split()[1:],
            "--mutant",
            "step-not-counted",
        ],
        capture_output=True,
        text=True,
    )
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr


def test_marker_rejects_an_unknown_argument(tmp_path: Path) -> None:
    (tmp_path / "test_typo.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.replan(polcy='policy.toml')\n"
        "def test_typo(replan_policy):\n"
        "    pass\n",
        encoding="utf-8",
    )
    done = _pytest(tmp_path)
    assert done.returncode != 0
    assert "unknown argument(s) ['polcy']" in done.stdout + done.stderr


def test_hypothesis_profiles_are_the_campaign_budgets() -> None:
    from hypothesis import settings

    from replan.pytest_plugin import HYPOTHESIS_PROFILES
    from replan.verification.engines.campaign.machine import PROFILES

    assert {p.name: (p.examples, p.steps) for p in PROFILES.values()} == HYPOTHESIS_PROFILES
    for name, (examples, steps) in HYPOTHESIS_PROFILES.items():
        registered = settings.get_profile(f"replan-{name}")
        assert (registered.max_examples, registered.stateful_step_count) == (examples, steps)


def test_a_markers_policy_is_found_from_the_rootdir_as_pytest_finds_its_options(
    tmp_path: Path,
) -> None:
    """The README's layout: policy.toml at the project's root, the test in tests/."""
    project = tmp_path / "layout"
    (project / "tests").mkdir(parents=True)
    shutil.copy(DEFAULT, project / "policy.toml")
    (project / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (project / "tests" / "test_policy.py").write_text(USER_TEST, encoding="utf-8")
    done = _pytest(project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_a_markers_policy_missing_from_the_rootdir_names_where_it_was_looked_for(
    tmp_path: Path,
) -> None:
    project = tmp_path / "missing"
    (project / "tests").mkdir(parents=True)
    (project / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (project / "tests" / "test_policy.py").write_text(USER_TEST, encoding="utf-8")
    done = _pytest(project)
    assert done.returncode == 1
    assert "policy.toml: no such policy file (relative to the rootdir" in done.stdout
