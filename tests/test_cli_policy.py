"""``replan policy FILE``: validate and print the normal form; bad files are one line on
stderr and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from replan.cli import main
from replan.controller import DEFAULT_POLICY, load_policy
from replan.controller.policy import policy_from_dict, policy_to_dict

REPOSITORY = Path(__file__).resolve().parent.parent
DEFAULT_FILE = REPOSITORY / "spec" / "policy.toml"


def _typo_file(tmp_path: Path) -> Path:
    text = DEFAULT_FILE.read_text(encoding="utf-8").replace(
        'requires = ["parser", "access"]', 'requires = ["acess", "parser"]'
    )
    assert "acess" in text
    path = tmp_path / "typo.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_policy_prints_normalised_toml(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    sparse = tmp_path / "sparse.toml"
    sparse.write_text(
        '[limits]\nmax_steps = 2\n[evidence]\nkeys = ["a"]\n[resources]\nallowed = ["r"]\n'
        '[[steps]]\nname = "go"\nrequires = ["a"]\ncompletes_run = true\n',
        encoding="utf-8",
    )
    assert main(["policy", str(sparse)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    printed = tomllib.loads(out)
    assert printed["limits"] == {
        "max_steps": 2,
        "max_proposals": 4,
        "no_progress_limit": 3,
        "count_duplicate_deliveries": True,
    }
    assert printed["workflow"] == {"ready_when_passed": ["a"]}
    assert policy_from_dict(printed) == load_policy(sparse)


def test_policy_of_the_default_file_prints_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", str(DEFAULT_FILE)]) == 0
    out, _ = capsys.readouterr()
    assert policy_from_dict(tomllib.loads(out)) == DEFAULT_POLICY


def test_policy_json_prints_the_normal_form(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", str(DEFAULT_FILE), "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert json.loads(out) == policy_to_dict(DEFAULT_POLICY)


def test_policy_typo_is_one_line_naming_the_path_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _typo_file(tmp_path)
    assert main(["policy", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert str(path) in err
    assert "steps[2].requires[0]: 'acess' is not a declared evidence key" in err


def test_policy_missing_file_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["policy", str(tmp_path / "absent.toml")]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert "absent.toml: no such policy file" in err


def test_policy_typo_in_a_real_process_has_no_traceback(tmp_path: Path) -> None:
    path = _typo_file(tmp_path)
    finished = subprocess.run(
        [sys.executable, "-m", "replan", "policy", str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert finished.returncode == 2
    assert finished.stdout == ""
    lines = finished.stderr.splitlines()
    assert len(lines) == 1, finished.stderr
    assert "Traceback" not in finished.stderr
    assert str(path) in lines[0]
    assert "steps[2].requires[0]" in lines[0]


def test_version_names_the_package_and_the_declaration(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from replan.cli import main
    from replan.controller._generated import DECLARATION_DIGEST

    assert main(["--version"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("replan 0.") and DECLARATION_DIGEST[:19] in line


def test_policy_check_names_every_invalid_file_and_prints_nothing_for_good_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = Path(__file__).parents[1] / "spec" / "policy.toml"
    typo = tmp_path / "typo.toml"
    typo.write_text(
        good.read_text().replace('"parser", "access"]\ncompletes_run', '"acess"]\ncompletes_run')
    )
    missing = tmp_path / "missing.toml"
    assert main(["policy", "--check", str(good)]) == 0
    assert capsys.readouterr() == ("", "")
    assert main(["policy", "--check", str(typo), str(good), str(missing)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"replan policy: {typo}: steps[2].requires[0]: 'acess'")
    assert lines[1].startswith(f"replan policy: {missing}")
