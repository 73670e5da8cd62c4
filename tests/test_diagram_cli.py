"""`replan diagram` as a command: formats without Graphviz, one-line errors with exit
2, the block the docs' machine page embeds, the committed evidence, and the real Mermaid
parser."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from replan.cli import main
from replan.spec.declaration import Replanning
from replan.spec.model import extract
from replan.verification.report.diagram import machine_diagram, readme_mermaid, render
from replan.verification.report.diagram.dot import to_dot
from replan.verification.report.diagram.mermaid import parse
from replan.verification.report.diagram.readme import PAGE as PAGE_PATH

ROOT = Path(__file__).resolve().parent.parent
MODEL = extract(Replanning)
MERMAID_CHECK = ROOT / "verification" / "report" / "diagram" / "mermaid_check"


def replan_without_dot(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """Run ``replan`` in a process whose PATH has no ``dot`` (nor anything else)."""
    empty = tmp_path / "empty-path"
    empty.mkdir(exist_ok=True)
    environment = {k: v for k, v in os.environ.items() if k != "PATH"} | {"PATH": str(empty)}
    return subprocess.run(
        [sys.executable, "-m", "replan", *arguments],
        capture_output=True,
        text=True,
        env=environment,
        cwd=tmp_path,
        check=False,
        timeout=120,
    )


def test_without_graphviz_svg_exits_2_with_one_line_and_mermaid_still_works(
    tmp_path: Path,
) -> None:
    svg = replan_without_dot(tmp_path, "diagram", "--format", "svg", "-o", "m.svg")
    assert svg.returncode == 2
    assert len(svg.stderr.splitlines()) == 1
    assert "apt-get install graphviz" in svg.stderr and "brew install graphviz" in svg.stderr
    assert not (tmp_path / "m.svg").exists()
    png = replan_without_dot(tmp_path, "diagram", "-o", "m.png")
    assert png.returncode == 2 and len(png.stderr.splitlines()) == 1
    mermaid = replan_without_dot(tmp_path, "diagram", "--format", "mermaid")
    assert mermaid.returncode == 0, mermaid.stderr
    assert len(parse(mermaid.stdout).transitions) == len(MODEL.transitions)
    dot = replan_without_dot(tmp_path, "diagram", "--format", "dot", "-o", "m.dot")
    assert dot.returncode == 0 and (tmp_path / "m.dot").read_text().startswith("digraph")


@pytest.mark.graphviz
def test_png_is_rendered_by_graphviz(tmp_path: Path) -> None:
    output = tmp_path / "m.png"
    assert main(["diagram", "-o", str(output)]) == 0
    data = output.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width = int.from_bytes(data[16:20], "big")
    assert width > 2000  # room for every row's guard text at its natural size


def test_dot_source_is_deterministic_and_names_every_transition() -> None:
    source = to_dot(machine_diagram())
    assert source == to_dot(machine_diagram())
    for t in MODEL.transitions:
        assert f'ID="t{t.index}-row"' in source


def bad_inputs(tmp_path: Path) -> dict[str, list[str]]:
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json", encoding="utf-8")
    wrong_shape = tmp_path / "shape.json"
    wrong_shape.write_text(json.dumps({"examples": 3}), encoding="utf-8")
    stranger = tmp_path / "stranger.json"
    stranger.write_text(json.dumps({"transitions_fired": {"idle --fly--> moon": 1}}))
    negative = tmp_path / "negative.json"
    negative.write_text(json.dumps({"transitions_fired": {MODEL.transitions[0].label: -1}}))
    not_a_trace = tmp_path / "trace.json"
    not_a_trace.write_text(json.dumps({"steps": "none"}), encoding="utf-8")
    readme = tmp_path / "machine.md"
    readme.write_text("# no markers here\n", encoding="utf-8")
    return {
        "missing coverage file": ["--coverage", str(tmp_path / "nope.json")],
        "coverage not JSON": ["--coverage", str(bad_json)],
        "coverage without counts": ["--coverage", str(wrong_shape)],
        "coverage of another machine": ["--coverage", str(stranger)],
        "negative count": ["--coverage", str(negative)],
        "missing trace file": ["--trace", str(tmp_path / "nope.json")],
        "trace not a counterexample": ["--trace", str(not_a_trace)],
        "unknown git revision": ["--diff", "no-such-revision-anywhere"],
        "missing policy file": ["--diff", str(tmp_path / "old.toml")],
        "missing --policy file": ["--policy", str(tmp_path / "p.toml")],
        "page without markers": ["--check-readme", "--readme", str(readme)],
        "page overlay": ["--check-readme", "--trace", str(not_a_trace)],
    }


def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, arguments in bad_inputs(tmp_path).items():
        output = tmp_path / "out.mmd"
        code = main(["diagram", *arguments, "-o", str(output)])
        captured = capsys.readouterr()
        assert code == 2, name
        assert len(captured.err.strip().splitlines()) == 1, (name, captured.err)
        assert "Traceback" not in captured.err, name
        assert not output.exists(), name


PAGE = """# The machine

Some text.

<!-- diagram:start -->
```mermaid
stateDiagram-v2
    [*] --> idle
```
<!-- diagram:end -->

More text after.
"""


def test_check_readme_fails_on_a_stale_block_and_update_fixes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = tmp_path / "machine.md"
    readme.write_text(PAGE, encoding="utf-8")
    assert main(["diagram", "--check-readme", "--readme", str(readme)]) == 1
    assert "stale" in capsys.readouterr().err
    assert main(["diagram", "--update-readme", "--readme", str(readme)]) == 0
    text = readme.read_text(encoding="utf-8")
    assert text.startswith("# The machine\n\nSome text.\n\n<!-- diagram:start -->\n```mermaid\n")
    assert text.endswith("```\n<!-- diagram:end -->\n\nMore text after.\n")
    assert readme_mermaid() in text
    assert main(["diagram", "--check-readme", "--readme", str(readme)]) == 0
    assert main(["diagram", "--update-readme", "--readme", str(readme)]) == 0
    assert readme.read_text(encoding="utf-8") == text  # nothing to change the second time
    readme.write_text(text.replace("observe #2", "observe #3", 1), encoding="utf-8")
    assert main(["diagram", "--check-readme", "--readme", str(readme)]) == 1


def test_the_docs_machine_page_is_checked_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --readme, the flags check this checkout's docs/contract/machine.md: the
    page the docs site shows, kept fresh like the generated controller."""
    assert main(["diagram", "--check-readme"]) == 0
    assert str(ROOT / PAGE_PATH) in capsys.readouterr().out
    assert readme_mermaid() in (ROOT / PAGE_PATH).read_text(encoding="utf-8")


@pytest.mark.graphviz
def test_committed_evidence_is_the_machine_that_runs() -> None:
    evidence = ROOT / "evidence"
    assert (evidence / "machine.mmd").read_text(encoding="utf-8") == readme_mermaid()
    svg = (evidence / "machine.svg").read_text(encoding="utf-8")
    fresh = render(machine_diagram(), "svg").decode()
    for t in MODEL.transitions:
        assert f'xlink:title="{_svg_escape(t.label)}"' in svg, t.label
        assert svg.count(_svg_escape(t.label)) == fresh.count(_svg_escape(t.label)), t.label
    png = (evidence / "machine.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def _svg_escape(text: str) -> str:
    return text.replace("-", "&#45;").replace(">", "&gt;")


def _real_mermaid() -> bool:
    return (
        shutil.which("node") is not None and (MERMAID_CHECK / "node_modules" / "mermaid").is_dir()
    )


@pytest.mark.skipif(
    # .ci/run installs the parser, so in CI (CI=true) this test always runs.
    not _real_mermaid() and not os.environ.get("CI"),
    reason="the real Mermaid parser is not installed "
    "(npm ci --prefix verification/report/diagram/mermaid_check)",
)
def test_the_real_mermaid_parser_reads_every_transition() -> None:
    text = readme_mermaid()
    broken = text.replace("idle --> ", "idle -> ", 1)
    completed = subprocess.run(
        ["node", str(MERMAID_CHECK / "parse.mjs"), "--many"],
        input=json.dumps([text, broken]),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    parsed, rejected = json.loads(completed.stdout)
    assert "error" in rejected  # the real parser does reject what is not Mermaid
    assert parsed["diagramType"] == "stateDiagram"
    arrows = [
        (source, target, line)
        for source, target, label in parsed["transitions"]
        if not source.startswith("root_") and not target.startswith("root_")
        for line in label.replace("<br/>", "<br>").split("<br>")
    ]
    internal = [
        (state, state, line.removesuffix(" ↺"))
        for state, lines in parsed["descriptions"].items()
        for line in lines
        if line.endswith(" ↺")
    ]
    assert sorted(arrows + internal) == sorted(parse(text).transitions)
    assert len(arrows + internal) == len(MODEL.transitions)


# ---- "wrote" only once the file exists -----------------------------------------------------


@pytest.mark.parametrize(
    "where", ["/proc/machine.mmd", "{tmp}/a-file/machine.mmd"], ids=["proc", "under-a-file"]
)
def test_an_unwritable_output_is_one_line_naming_it_and_never_said_written(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    target = where.format(tmp=tmp_path)
    assert main(["diagram", "-o", target]) == 2
    captured = capsys.readouterr()
    assert "wrote" not in captured.out
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and target in err[0] and ".partial" not in err[0], err


def test_a_write_that_fails_at_the_end_is_never_said_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe passes, then the disk fills: the command names the file it meant, not
    a temporary one, and its "wrote" line is not printed."""
    from replan.verification.runtime import files

    def full(target: Path, payload: bytes) -> None:
        raise OSError(28, "No space left on device", f"{target.parent}/.x.partial")

    monkeypatch.setattr(files, "_write_now", full)
    target = tmp_path / "machine.mmd"
    assert main(["diagram", "-o", str(target)]) == 2
    captured = capsys.readouterr()
    assert "wrote" not in captured.out
    assert captured.err.strip() == (
        f"replan diagram: error: cannot write {target} (No space left on device)"
    )


def test_wrote_is_said_once_the_file_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "machine.mmd"
    assert main(["diagram", "-o", str(target)]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {target} (mermaid: ")
    assert target.read_text(encoding="utf-8").startswith("%%{init")
