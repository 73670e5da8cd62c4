"""Every file a command reads is bounded: in size (read at most one byte past the
limit, whatever the file is), in nesting (refused before anything recursive walks it)
and in the parts of a dotted TOML key (``tomllib`` is quadratic in them). Past a limit
the command prints one line naming the file and exits 2, in time linear in the file."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from replan.cli import main
from replan.controller import input_limits
from replan.controller.policy import DEFAULT_POLICY, policy_to_toml

DEEP = 100_000


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


def deep_json(tmp_path: Path, name: str = "deep.json") -> Path:
    path = tmp_path / name
    path.write_text("[" * DEEP + "]" * DEEP, encoding="utf-8")
    return path


# ---- the policy file ---------------------------------------------------------------------


def test_a_deeply_nested_policy_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deep.toml"
    path.write_text(policy_to_toml(DEFAULT_POLICY) + "\nx = " + "[" * DEEP + "]" * DEEP)
    assert main(["policy", str(path)]) == 2
    assert f"{path}: nested more than 64 deep" in one_line(capsys)


def test_a_policy_nested_within_pythons_limit_but_past_ours_is_refused_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deep.toml"
    path.write_text(policy_to_toml(DEFAULT_POLICY) + "\nx = " + "[" * 100 + "]" * 100)
    assert main(["policy", str(path)]) == 2
    assert "nested more than 64 deep" in one_line(capsys)


def test_reading_a_policy_from_dev_zero_stops_at_the_size_limit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["policy", "/dev/zero"]) == 2
    assert one_line(capsys) == (
        "replan policy: error: /dev/zero: more than 8 MiB, the most a policy file may hold"
    )


def test_a_policy_file_past_the_size_limit_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "big.toml"
    path.write_text(policy_to_toml(DEFAULT_POLICY) + "#" * input_limits.POLICY_BYTES)
    assert main(["policy", "--check", str(path)]) == 2
    assert "more than 8 MiB, the most a policy file may hold" in one_line(capsys)


def test_a_long_dotted_key_is_refused_before_the_quadratic_parse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """400 KB of one dotted key: tomllib would take minutes (quadratic); the linear
    scan refuses it at once (a generous bound, so a loaded machine still passes)."""
    path = tmp_path / "dotted.toml"
    path.write_text(policy_to_toml(DEFAULT_POLICY) + "\nx" + ".x" * 200_000 + " = 1\n")
    started = time.perf_counter()
    assert main(["policy", str(path)]) == 2
    assert time.perf_counter() - started < 10
    assert "a dotted key of more than 32 parts" in one_line(capsys)


def test_dots_in_strings_comments_and_floats_are_no_dotted_key() -> None:
    text = (
        policy_to_toml(DEFAULT_POLICY)
        + "\n# " + "a." * 100 + "\n"
        + 'x = "' + "b." * 100 + '"\n'
        + "y = '''" + "c." * 100 + "'''\n"
        + "z = [" + ", ".join(["1.5"] * 100) + "]\n"
        + '"quoted.part".other = 1\n'
    )  # fmt: skip
    input_limits.check_toml_keys(text, "policy.toml")


# ---- the JSON records commands read ---------------------------------------------------------


def test_a_deeply_nested_verify_report_is_one_line_for_review(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep_json(tmp_path, "verify.json")
    code = main(["review", "--evidence", str(tmp_path), "-o", str(tmp_path / "r.html")])
    assert code == 2
    assert "verify.json: nested more than 64 deep" in one_line(capsys)


def test_a_deeply_nested_trace_is_one_line_for_conform(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["conform", str(deep_json(tmp_path))]) == 2
    assert "deep.json: nested more than 64 deep" in one_line(capsys)


@pytest.mark.parametrize(
    "command",
    [
        ["replay", "{file}"],
        ["diagram", "--trace", "{file}"],
        ["diagram", "--coverage", "{file}"],
        ["review", "--evidence", "evidence", "--trace", "{file}", "-o", "{out}"],
    ],
    ids=["replay", "diagram-trace", "diagram-coverage", "review-trace"],
)
def test_a_deeply_nested_recording_is_one_line_for_every_command(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = deep_json(tmp_path)
    arguments = [a.format(file=path, out=tmp_path / "out.html") for a in command]
    assert main(arguments) == 2
    assert "nested more than 64 deep" in one_line(capsys)


def test_a_recording_past_the_size_limit_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(input_limits, "RECORD_BYTES", 1000)
    path = tmp_path / "trace.json"
    path.write_text(json.dumps([{"op": "cancel"}] * 100), encoding="utf-8")
    assert main(["conform", str(path)]) == 2
    assert one_line(capsys).endswith("more than 1,000 bytes, the most a trace may hold")


def test_a_markdown_page_past_the_size_limit_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(input_limits, "PAGE_BYTES", 1000)
    page = tmp_path / "page.md"
    page.write_text("x" * 2000, encoding="utf-8")
    assert main(["diagram", "--check-readme", "--readme", str(page)]) == 2
    assert "more than 1,000 bytes, the most a Markdown page may hold" in one_line(capsys)
