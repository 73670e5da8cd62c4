"""replan as a user installs it: the built wheel in a fresh virtualenv, run outside this
repository through the steps of the GitHub Action (action.yml) as a shell would run
them. The bundled policy and declaration are found, the reports land where the user
says, and nothing is written into site-packages."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ACTION = ROOT / "action.yml"
EXPRESSION = re.compile(r"\$\{\{\s*([\w.-]+)\s*\}\}")


def _check_jsonschema(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "check_jsonschema",
            "--builtin-schema",
            "vendor.github-actions",
            str(path),
        ],
        capture_output=True,
        text=True,
    )


def test_action_validates_against_the_github_action_schema(tmp_path: Path) -> None:
    done = _check_jsonschema(ACTION)
    assert done.returncode == 0, done.stdout + done.stderr
    # ... and the schema does judge: an action without `runs.using` is refused
    action = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    del action["runs"]["using"]
    broken = tmp_path / "action.yml"
    broken.write_text(yaml.safe_dump(action), encoding="utf-8")
    assert _check_jsonschema(broken).returncode == 1


def test_action_inputs_and_outputs_are_the_documented_ones() -> None:
    action = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    assert {"policy", "against", "profile", "strict"} <= set(action["inputs"])
    assert {"report", "json", "junit", "sarif", "exit-code"} <= set(action["outputs"])
    steps = {step.get("id") for step in action["runs"]["steps"]}
    for output in action["outputs"].values():
        step = EXPRESSION.search(output["value"]).group(1).split(".")[1]  # type: ignore[union-attr]
        assert step in steps


def _expand(text: str, context: dict[str, str]) -> str:
    return EXPRESSION.sub(lambda match: context[match.group(1)], text)


def _condition_holds(condition: str | None, context: dict[str, str]) -> bool:
    """The one form of ``if:`` action.yml uses: ``inputs.NAME == 'value'``."""
    if condition is None:
        return True
    match = re.fullmatch(r"\s*(inputs\.[\w-]+)\s*==\s*'([^']*)'\s*", condition)
    assert match, f"unsupported condition {condition!r}"
    return context[match.group(1)] == match.group(2)


def run_action(inputs: dict[str, str], cwd: Path, bin_dir: Path) -> tuple[int, dict[str, str]]:
    """Run action.yml's steps in order with bash, as the runner would: inputs and
    ``github.action_path`` substituted into ``env``, outputs read from GITHUB_OUTPUT."""
    action: dict[str, Any] = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    context = {
        f"inputs.{name}": inputs.get(name, spec.get("default", ""))
        for name, spec in action["inputs"].items()
    }
    context["github.action_path"] = str(ROOT)
    output_file = cwd / "github-output"
    output_file.write_text("")
    code = 0
    for step in action["runs"]["steps"]:
        if not _condition_holds(step.get("if"), context):
            continue
        assert step["shell"] == "bash"
        environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        environment.pop("PYTHONPATH", None)
        environment.update({k: _expand(str(v), context) for k, v in step.get("env", {}).items()})
        environment.update(
            GITHUB_OUTPUT=str(output_file), PATH=f"{bin_dir}{os.pathsep}{environment['PATH']}"
        )
        assert "${{" not in step["run"], "inputs must reach the script through env"
        code = subprocess.run(["bash", "-c", step["run"]], cwd=cwd, env=environment).returncode
        if code != 0:
            break
    outputs = dict(
        line.split("=", 1) for line in output_file.read_text().splitlines() if "=" in line
    )
    return code, outputs


def _source_copy(target: Path) -> Path:
    """The files git would ship (tracked and new, not ignored), so building the wheel
    writes its build/ and egg-info into the copy, never into the checkout."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    for name in listed:
        source = ROOT / name
        if source.is_symlink():  # replan/controller -> ../controller: kept a link
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).symlink_to(source.readlink())
        elif source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def _files(directory: Path) -> set[str]:
    return {
        str(path.relative_to(directory))
        for path in directory.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the built wheel installed; its bin/ directory."""
    work = tmp_path_factory.mktemp("wheel")
    source = _source_copy(work / "source")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(work / "dist"), str(source)],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = (work / "dist").glob("replan-*.whl")
    venv.EnvBuilder(with_pip=True).create(work / "venv")
    python = work / "venv" / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        check=True,
        capture_output=True,
        text=True,
    )
    return python.parent


def test_installed_wheel_verifies_outside_the_repository(
    installed_wheel: Path, tmp_path: Path
) -> None:
    site = next((installed_wheel.parent / "lib").glob("python3*/site-packages"))
    assert (site / "replan" / "spec" / "policy.toml").is_file()
    assert (site / "replan" / "spec" / "declaration.py").is_file()
    assert (site / "replan" / "controller" / "py.typed").is_file()
    # one installed name: nothing that collides with a user's own `controller` module
    for top_level in ("controller", "spec", "verification"):
        assert not (site / top_level).exists(), top_level
    before = _files(site)

    user = tmp_path / "user-project"
    user.mkdir()
    code, outputs = run_action({"install": "false", "evidence": "out"}, user, installed_wheel)
    assert code == 0
    assert outputs["exit-code"] == "0"
    for name in ("report", "json", "junit", "sarif"):
        assert (user / outputs[name]).is_file(), name
    assert outputs["report"] == "out/verify-report.md"
    assert _files(site) == before, "replan verify wrote into site-packages"
    assert not (user / "evidence").exists()
