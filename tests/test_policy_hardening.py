"""Hostile policy files: every path or literal the loader cannot use
is one line and exit 2, the normal form round-trips whatever the names, and
validation is linear in the number of keys."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from replan.cli import main
from replan.controller.policy import policy_from_dict, policy_to_toml

MINIMAL = """
[evidence]
keys = ["k"]
[resources]
allowed = ["r"]
[[steps]]
name = "s"
completes_run = true
"""


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


def unusable_paths(tmp_path: Path) -> dict[str, str]:
    regular = tmp_path / "policy.toml"
    regular.write_text(MINIMAL, encoding="utf-8")
    loop = tmp_path / "loop.toml"
    loop.symlink_to(loop)
    return {
        "not a directory": str(regular / "inside.toml"),
        "a symlink loop": str(loop),
        "a name too long": str(tmp_path / ("x" * 5000 + ".toml")),
        "a NUL byte": str(tmp_path / "a\0b.toml"),
    }


@pytest.mark.parametrize(
    "kind", ["not a directory", "a symlink loop", "a name too long", "a NUL byte"]
)
def test_a_path_that_cannot_be_read_is_one_line_and_exit_2(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = unusable_paths(tmp_path)[kind]
    assert main(["policy", path]) == 2
    line = one_line(capsys)
    assert line.startswith("replan policy: error: ") and "policy" in line


def test_an_integer_past_pythons_digit_limit_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "huge.toml"
    path.write_text(MINIMAL + "[limits]\nmax_steps = " + "9" * 5000 + "\n", encoding="utf-8")
    assert main(["policy", str(path)]) == 2
    assert "invalid TOML" in one_line(capsys)


def test_the_normal_form_round_trips_non_ascii_and_markup_characters() -> None:
    name = "déploy 😀 <!-- [x](y) | `z` # \\ \" '"
    policy = policy_from_dict(
        {
            "evidence": {"keys": [name]},
            "resources": {"allowed": ["🚀"]},
            "steps": [{"name": name, "requires": [name], "completes_run": True}],
        }
    )
    assert policy_from_dict(tomllib.loads(policy_to_toml(policy))) == policy


def test_validation_is_linear_in_the_number_of_keys() -> None:
    """100,000 keys, half of them required by the completing step: a quadratic check
    (a list membership test per key) took minutes here; linear, it is a fraction of a
    second (no time is asserted: the test would simply not finish)."""
    keys = [f"key-{index}" for index in range(100_000)]
    policy = policy_from_dict(
        {
            "evidence": {"keys": keys},
            "resources": {"allowed": ["r"]},
            "steps": [{"name": "s", "requires": keys[::2], "completes_run": True}],
        }
    )
    assert len(policy.keys) == 100_000 and policy.workflow_keys == tuple(keys[::2])
