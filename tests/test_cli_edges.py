"""The CLI's rough edges a new user meets in the first hour: each is one line and
exit 2 before any work, never a traceback after it."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from replan.cli import main


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


def test_an_unwritable_junit_path_fails_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", "--junit", "/proc/no-such/junit.xml"]) == 2
    line = one_error_line(capsys)
    assert line.startswith("replan verify: error: --junit /proc/no-such/junit.xml: cannot write")
    assert main(["campaign", "--junit", str(tmp_path)]) == 2
    assert "is a directory, expected a file" in one_error_line(capsys)


def test_an_unknown_output_suffix_is_refused_not_written_as_mermaid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "machine.pdf"
    assert main(["diagram", "-o", str(output)]) == 2
    assert "no format for .pdf" in one_error_line(capsys)
    assert not output.exists()


def test_verify_and_campaign_take_the_same_seeds_and_profile(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for command in ("verify", "campaign"):
        assert main([command, "--seed", "-1"]) == 2  # argparse: its usage, then the error
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert last == f"replan {command}: error: argument --seed: expected an integer >= 0, got -1"
    from replan.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["campaign"]).profile == "ci"
    assert parser.parse_args(["verify"]).profile == "ci"


def test_every_output_is_dash_o_and_the_old_spellings_still_work_for_a_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from replan.cli import main as replan

    assert replan(["prove", "--out", str(tmp_path / "old"), "--json"]) == 0
    notice = "replan prove: --out is deprecated and goes in the next release: use -o/--output"
    assert capsys.readouterr().err.strip().splitlines()[0] == notice
    assert (tmp_path / "old" / "prove.json").is_file()
    assert replan(["prove", "-o", str(tmp_path / "new"), "--json"]) == 0
    assert "deprecated" not in capsys.readouterr().err
    assert (tmp_path / "new" / "prove.json").is_file()
    for command in ("verify", "campaign", "explore", "prove", "diagram", "bench", "trace"):
        with contextlib.suppress(SystemExit):
            replan([command, "--help"])
        shown = capsys.readouterr().out
        assert "-o " in shown and "--output" in shown, command
        assert "--out " not in shown.replace("--output", "") and "--evidence" not in shown, command
