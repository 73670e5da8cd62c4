"""The pre-commit hooks (.pre-commit-hooks.yaml) run by pre-commit itself, offline:
``pre-commit try-repo`` on this checkout, in a user's project (the policy hook) and in
a copy of this repository (the drift hooks), each shown failing on a broken input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRE_COMMIT = [sys.executable, "-m", "pre_commit"]


def _environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    environment = dict(os.environ)
    environment.update(
        PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"),
        GIT_AUTHOR_NAME="replan tests",
        GIT_AUTHOR_EMAIL="tests@replan.invalid",
        GIT_COMMITTER_NAME="replan tests",
        GIT_COMMITTER_EMAIL="tests@replan.invalid",
        # pre-commit's own `git` calls must not pick up a hook runner's settings
        GIT_CONFIG_NOSYSTEM="1",
        # the console script `replan` of this environment, first on PATH
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        **extra,
    )
    return environment


def _try_repo(
    project: Path, hook: str, environment: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PRE_COMMIT, "try-repo", str(ROOT), hook, "--all-files"],
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _git_project(path: Path, files: dict[str, str], environment: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text, encoding="utf-8")
    for command in (["git", "init", "-q"], ["git", "add", "-A"]):
        subprocess.run(command, cwd=path, env=environment, check=True)
    return path


def test_manifest_is_valid_for_pre_commit() -> None:
    done = subprocess.run(
        [*PRE_COMMIT, "validate-manifest", str(ROOT / ".pre-commit-hooks.yaml")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_policy_hook_passes_good_policies_and_names_a_broken_one(tmp_path: Path) -> None:
    environment = _environment(tmp_path)
    good = (ROOT / "spec" / "policy.toml").read_text(encoding="utf-8")
    project = _git_project(
        tmp_path / "project",
        {"policy.toml": good, "agents/review-policy.toml": good, "pyproject.toml": ""},
        environment,
    )
    done = _try_repo(project, "replan-policy", environment)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Passed" in done.stdout

    broken = good.replace('requires = ["parser", "access"]', 'requires = ["parser", "acess"]')
    (project / "agents" / "review-policy.toml").write_text(broken, encoding="utf-8")
    subprocess.run(["git", "add", "-A"], cwd=project, env=environment, check=True)
    done = _try_repo(project, "replan-policy", environment)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "agents/review-policy.toml: steps[2].requires[1]: 'acess' is not a declared evidence key"
        in done.stdout
    )


#: The docs page whose embedded diagram replan-diagram-check keeps fresh.
DIAGRAM_PAGE = Path("docs") / "contract" / "machine.md"


def _clone(target: Path, environment: dict[str, str]) -> Path:
    """A clone of this repository: a drift hook checks the project it runs in, so the
    broken copy is a project of its own (its sources first on the path as well)."""
    subprocess.run(["git", "clone", "-q", str(ROOT), str(target)], env=environment, check=True)
    return target


@pytest.mark.parametrize(
    ("hook", "break_it", "named"),
    [
        (
            "replan-generate-check",
            lambda root: (root / "controller" / "_generated.py").open("a").write("# edited\n"),
            "_generated.py",
        ),
        (
            "replan-diagram-check",
            lambda root: (root / DIAGRAM_PAGE).write_text(
                (root / DIAGRAM_PAGE)
                .read_text()
                .replace("stateDiagram-v2", "stateDiagram-v2\n%% x"),
            ),
            "machine.md",
        ),
        (
            "replan-imports",
            lambda root: (
                (root / "controller" / "records.py")
                .open("a")
                .write("\nimport replan.verification.runtime.files  # an import up the layers\n")
            ),
            "replan.controller.records -> replan.verification.runtime.files",
        ),
    ],
)
def test_drift_hooks_pass_this_repository_and_fail_a_stale_copy(
    tmp_path: Path, hook: str, break_it: object, named: str
) -> None:
    environment = _environment(tmp_path)
    project = _clone(tmp_path / "clone", environment)
    done = _try_repo(project, hook, environment)
    assert done.returncode == 0, done.stdout + done.stderr

    stale = _clone(tmp_path / "stale", environment)
    assert callable(break_it)
    break_it(stale)
    subprocess.run(["git", "add", "-A"], cwd=stale, env=environment, check=True)
    # the hook runs `replan` of the environment: point it at the broken copy
    done = _try_repo(stale, hook, _environment(tmp_path, PYTHONPATH=str(stale)))
    assert done.returncode == 1, done.stdout + done.stderr
    assert named in done.stdout
