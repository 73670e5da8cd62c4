"""The documentation is true of the code: the site builds strictly, every example marked
runnable runs (and prints what the page shows), every `replan` command line parses, and
every repository path a page names exists.

The conventions are docs/development/docs.md's: a fenced block is runnable when the line
directly above its opening fence is ``<!-- runnable -->`` (``<!-- runnable: slow -->``
for one that takes more than a few seconds, ``<!-- runnable: pytest -->`` for a test
file of the reader's own project); a fenced block marked ``<!-- output -->`` after it
holds what it must print. A ``bash`` block runs one command per line, each exiting 0
unless a trailing comment says ``# exit N``; a ``python`` block runs as a script. They
run in a fresh copy of the checkout, which must stay clean: a command writes under
``out/`` or a temporary directory, never into the checkout. Every ``python`` block of
every page is runnable: none is a fragment.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from replan.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))

RUNNABLE = "<!-- runnable -->"
RUNNABLE_SLOW = "<!-- runnable: slow -->"
RUNNABLE_PYTEST = "<!-- runnable: pytest -->"
RUNNABLE_MARKERS = (RUNNABLE, RUNNABLE_SLOW, RUNNABLE_PYTEST)
OUTPUT = "<!-- output -->"
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,})(?P<info>[^`\s]*)")
#: A command's trailing comment that starts with the exit code it must give.
EXIT = re.compile(r"#\s*exit (\d+)\b")


@dataclass
class Block:
    """One fenced block of a page."""

    page: Path
    line: int
    language: str
    marker: str
    body: str
    output: Block | None = None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def fenced_blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, in order. A block's content is never parsed for
    fences of its own, so a page may show the convention inside a longer fence."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        closing = re.compile(rf"^ *{fence}`*\s*$")
        end = index + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        body = "".join(f"{line[indent:]}\n" for line in lines[index + 1 : end])
        marker = lines[index - 1].strip() if index else ""
        found.append(Block(page, index + 1, opening["info"], marker, body))
        index = end + 1
    return found


def runnable_blocks() -> list[Block]:
    """The runnable blocks of every page, each with its output block, if any."""
    runnable: list[Block] = []
    for page in PAGES:
        last: Block | None = None
        for block in fenced_blocks(page):
            if block.marker in RUNNABLE_MARKERS:
                if block.language not in ("bash", "python"):
                    raise AssertionError(f"{block.where}: runnable blocks are bash or python")
                if block.marker == RUNNABLE_PYTEST and block.language != "python":
                    raise AssertionError(f"{block.where}: a test file is a python block")
                runnable.append(block)
                last = block
            elif block.marker == OUTPUT:
                if last is None or last.output is not None:
                    raise AssertionError(f"{block.where}: an output block needs a runnable one")
                last.output = block
    return runnable


def _params() -> list[object]:
    return [
        pytest.param(
            block,
            id=block.where,
            marks=[pytest.mark.slow] if block.marker == RUNNABLE_SLOW else [],
        )
        for block in runnable_blocks()
    ]


# ---- the site ---------------------------------------------------------------------------


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict` as .ci/run runs it, into a directory outside the
    checkout: broken links, pages missing from the nav and unknown markers fail."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        if os.environ.get("CI"):
            pytest.fail("mkdocs or mkdocs-material is not installed (the dev extra has them)")
        pytest.skip("mkdocs or mkdocs-material is not installed (the dev extra has them)")
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    performance = (site / "operations" / "performance" / "index.html").read_text()
    assert "evidence: " not in performance  # every marker rendered
    assert "benchmark-results.json" in performance
    assert "max_wall_ms" in (site / "reference" / "policy" / "index.html").read_text()
    assert 'class="mermaid"' in (site / "contract" / "machine" / "index.html").read_text()


# ---- the runnable examples ----------------------------------------------------------------


def _git(*arguments: str, cwd: Path = ROOT) -> str:
    return subprocess.run(
        ["git", *arguments], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh copy of this checkout as it is now (its tracked files with their edits,
    new files not ignored), committed, so that `git status` shows what a block wrote."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the examples run in a clone of it")
    copy = tmp_path_factory.mktemp("docs") / "checkout"
    _git("clone", "--quiet", "--shared", str(ROOT), str(copy))
    listed = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in filter(None, listed.split("\0")):
        source, target = ROOT / name, copy / name
        if source.is_file() and not source.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        elif not source.exists() and target.is_file():
            target.unlink()
    _git("add", "--all", cwd=copy)
    _git(
        "-c", "user.name=replan tests", "-c", "user.email=tests@replan.invalid",
        "commit", "--quiet", "--allow-empty", "-m", "the working tree", cwd=copy,
    )  # fmt: skip
    return copy


def _environment(copy: Path) -> dict[str, str]:
    environment = {
        **os.environ,
        "PYTHONPATH": str(copy),  # the copy's code, also for the `replan` console script
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    environment.pop("HYPOTHESIS_STORAGE_DIRECTORY", None)
    return environment


def _commands(body: str) -> list[tuple[str, int]]:
    """A bash block's commands, each with the exit code it must give."""
    commands = []
    for line in body.splitlines():
        command = line.strip()
        if not command or command.startswith("#"):
            continue
        expected = EXIT.search(command)
        commands.append((command, int(expected.group(1)) if expected else 0))
    return commands


def _shown(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


@pytest.mark.parametrize("block", _params())
def test_a_runnable_example_runs_as_written(block: Block, checkout: Path) -> None:
    environment = _environment(checkout)
    printed = []
    if block.marker == RUNNABLE_PYTEST:
        printed.append(_run_as_a_users_test_file(block, checkout, environment))
    elif block.language == "bash":
        for command, expected in _commands(block.body):
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=checkout,
                env=environment,
                capture_output=True,
                text=True,
                timeout=900 if block.marker == RUNNABLE_SLOW else 180,
            )
            assert done.returncode == expected, (
                f"{block.where}: `{command}` exited {done.returncode}, not {expected}\n"
                + done.stdout[-2000:]
                + done.stderr[-2000:]
            )
            printed.append(done.stdout)
    else:
        done = subprocess.run(
            [sys.executable, "-c", block.body],
            cwd=checkout,
            env=environment,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, f"{block.where}\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
        printed.append(done.stdout)
    if block.output is not None:
        assert _shown("".join(printed)) == _shown(block.output.body), block.where
    written = _git("status", "--porcelain", "--untracked-files=all", cwd=checkout)
    assert written == "", f"{block.where} wrote into the checkout:\n{written}"


def _run_as_a_users_test_file(block: Block, checkout: Path, environment: dict[str, str]) -> str:
    """A test file of the reader's project: pytest runs it in a new project outside the
    checkout (an empty ``pytest.ini``, the default policy as ``policy.toml``), where the
    plugin comes from replan's ``pytest11`` entry point; every test it holds passes."""
    project = Path(tempfile.mkdtemp(prefix="project-", dir=checkout.parent))
    (project / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    shutil.copy(checkout / "spec" / "policy.toml", project / "policy.toml")
    (project / "test_example.py").write_text(block.body, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q"],
        cwd=project,
        env={k: v for k, v in environment.items() if not k.startswith("PYTEST_")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{block.where}\n{done.stdout[-3000:]}{done.stderr[-2000:]}"
    summary = done.stdout.strip().splitlines()[-1]
    assert re.match(r"[1-9]\d* passed\b", summary), done.stdout[-2000:]
    assert not re.search(r"\b(failed|skipped|errors?|xfailed|deselected)\b", summary), summary
    return ""


def test_every_python_block_of_the_docs_runs() -> None:
    """No page shows Python a reader cannot run as it is: every ``python`` block is
    runnable (a script, or a test file of the reader's project), so it is complete,
    imports included, and a test runs it."""
    fragments = [
        block.where
        for page in PAGES
        for block in fenced_blocks(page)
        if block.language in ("python", "py", "python3", "pycon")
        and block.marker not in RUNNABLE_MARKERS
    ]
    assert not fragments, "python blocks no test runs:\n" + "\n".join(fragments)


def test_the_runnable_examples_are_found() -> None:
    """The convention is in use where the guides promise it: the three user jobs, the
    embedding example and the guarded agent (whose output is checked)."""
    found = {block.where.split(":")[0]: block for block in runnable_blocks()}
    for page in (
        "README.md",
        "docs/guide/verify.md",
        "docs/guide/policy-change.md",
        "docs/guide/diagrams.md",
        "docs/guide/embed.md",
        "docs/agents/middleware.md",
        "docs/guide/ci.md",
    ):
        assert page in found, page
    guarded = [b for b in runnable_blocks() if b.page.name == "middleware.md"]
    assert [b.language for b in guarded] == ["python"] and guarded[0].output is not None
    assert "FunctionInvokingChatClient" in guarded[0].body


def test_fenced_blocks_inside_a_longer_fence_are_not_examples(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "````markdown\n<!-- runnable -->\n```bash\nfalse\n```\n````\n\n"
        "<!-- runnable -->\n```bash\ntrue   # exit 0\n```\n\n<!-- output -->\n```text\n\n```\n",
        encoding="utf-8",
    )
    blocks = fenced_blocks(page)
    assert [(b.language, b.marker) for b in blocks] == [
        ("markdown", ""),
        ("bash", RUNNABLE),
        ("text", OUTPUT),
    ]
    assert _commands(blocks[1].body) == [("true   # exit 0", 0)]
    assert _commands("replan verify --mutant x   # exit 1\n# a comment\n") == [
        ("replan verify --mutant x   # exit 1", 1)
    ]


# ---- every command line, every path --------------------------------------------------------


def _replan_command_lines() -> Iterator[tuple[str, list[str]]]:
    """Each `replan ...` command of every bash block, runnable or not, as arguments."""
    for page in PAGES:
        for block in fenced_blocks(page):
            if block.language != "bash":
                continue
            for line in block.body.splitlines():
                lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
                lexer.whitespace_split = True
                lexer.commenters = "#"
                command: list[str] = []
                for token in [*lexer, ";"]:
                    if token in ("&&", "||", "|", ";", ">", "2>", ">>"):
                        if command[:1] == ["replan"]:
                            yield f"{block.where}: {line.strip()}", command[1:]
                        command = [] if token in ("&&", "||", "|", ";") else ["redirected"]
                    else:
                        command.append(token)


def test_every_replan_command_line_in_the_docs_parses() -> None:
    parser = build_parser()
    checked = 0
    for where, arguments in _replan_command_lines():
        try:
            parser.parse_args(arguments)
        except SystemExit as exit:
            pytest.fail(f"{where}: the command line does not parse (exit {exit.code})")
        checked += 1
    assert checked > 50


#: A code span that names a file or folder of the repository.
PATH_SPAN = re.compile(
    r"`((?:spec|controller|verification|replan|tests|docs|examples|evidence|\.ci)/[^`\s]*"
    r"|CONTRACT\.md|README\.md|mkdocs\.yml|pyproject\.toml|action\.yml"
    r"|\.pre-commit-hooks\.yaml|uv\.lock|requirements\.lock)`"
)
#: A relative Markdown link of the README (the site checks its own links).
LINK = re.compile(r"\]\(((?!https?:|#)[^)#\s]+)")


def test_every_repository_path_a_page_names_exists() -> None:
    missing = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        prose = "".join(
            part for number, part in enumerate(re.split(r"^ *`{3,}.*$", text, flags=re.M))
            if number % 2 == 0
        )  # fmt: skip
        for path in PATH_SPAN.findall(prose):
            if not any(ROOT.glob(path.rstrip("/"))):
                missing.append(f"{page.relative_to(ROOT)}: {path}")
        if page.name == "README.md":
            missing += [
                f"README.md: link {target}"
                for target in LINK.findall(text)
                if not (ROOT / target).exists()
            ]
    assert not missing, "\n".join(missing)
