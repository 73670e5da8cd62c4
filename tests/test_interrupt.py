"""Ctrl-C: every long command stops within 2 s with exit 130 and one line on
stderr, terminates its worker processes, and leaves nothing half-written: files are
written atomically, and an interrupted command writes none (no counterexample
without its report). Each command runs as a real process that gets a real SIGINT."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path

import pytest

from replan.verification.runtime import files
from replan.verification.runtime.forking import usable_cores

ROOT = Path(__file__).resolve().parent.parent
WEAK_GATE = ROOT / "tests" / "policies" / "commit-requires-parser-only.toml"
#: The acceptance's bound, from the signal to the process's exit.
WITHIN = 2.0

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


class Running:
    """A ``python -m replan`` process whose stderr lines are collected as they come."""

    def __init__(self, cwd: Path, *arguments: str) -> None:
        environment = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "replan", *arguments],
            cwd=cwd,
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[tuple[float, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def wait_for(self, pattern: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(re.search(pattern, line) for _, line in self.lines):
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        self.process.kill()
        pytest.fail(f"never printed {pattern!r}: {[line for _, line in self.lines]}")

    def children(self) -> list[int]:
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        try:
            return [int(pid) for pid in path.read_text().split()]
        except OSError:
            return []

    def interrupt(self) -> tuple[int, float, list[str]]:
        """Send SIGINT: (exit code, seconds to exit, the stderr lines after it)."""
        sent = time.monotonic()
        self.process.send_signal(signal.SIGINT)
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        took = time.monotonic() - sent
        self._reader.join(timeout=5)
        return code, took, [line for at, line in self.lines if at >= sent]

    def everything(self) -> str:
        return "\n".join(line for _, line in self.lines)


def assert_interrupted(running: Running, command: str) -> None:
    """Ctrl-C ends the command with 130 and one line, soon. Lines read after the signal
    was sent may still be ones printed before it arrived: a step starting (``...``, a
    process started beside the explorer), never a step's result."""
    code, took, after = running.interrupt()
    assert code == 130, running.everything()
    assert took < WITHIN, f"{took:.2f} s: {running.everything()}"
    assert after[-1:] == [f"replan {command}: interrupted"], running.everything()
    assert all(_starting(line) for line in after[:-1]), running.everything()
    assert "Traceback" not in running.everything()
    assert "Exception ignored" not in running.everything()


def written_files(directory: Path) -> list[str]:
    """Every file under ``directory`` but Hypothesis' own directory."""
    if not directory.exists():
        return []
    return sorted(
        str(path.relative_to(directory))
        for path in directory.rglob("*")
        if path.is_file() and ".hypothesis" not in path.parts
    )


def no_temporary_files(directory: Path) -> None:
    left = [p for p in directory.rglob("*") if p.name.endswith(".partial") or "-probe-" in p.name]
    assert left == []


def three_hundred_keys(path: Path) -> Path:
    keys = ", ".join(f'"key{i:03}"' for i in range(300))
    path.write_text(
        "[evidence]\n"
        f"keys = [{keys}]\n\n"
        '[resources]\nallowed = ["r"]\n\n'
        '[[steps]]\nname = "inspect"\nrequires = []\ncompletes_run = false\n\n'
        f'[[steps]]\nname = "ship"\nrequires = [{keys}]\ncompletes_run = true\n\n'
        f"[workflow]\nready_when_passed = [{keys}]\n",
        encoding="utf-8",
    )
    return path


def test_ctrl_c_stops_the_campaign(tmp_path: Path) -> None:
    out = tmp_path / "out"
    running = Running(
        tmp_path, "campaign", "--profile", "thorough", "--seed", "1", "--output", str(out)
    )
    running.wait_for(r"^replan campaign: \d+ examples")
    time.sleep(1.0)  # well inside Hypothesis' examples
    assert_interrupted(running, "campaign")
    assert written_files(out) == []  # no counterexample, no pytest file
    assert not (tmp_path / ".hypothesis").exists()  # Hypothesis' directory is with --out
    no_temporary_files(tmp_path)


def test_ctrl_c_stops_the_explorer_and_its_workers(tmp_path: Path) -> None:
    out = tmp_path / "out"
    running = Running(
        tmp_path, "explore", "--engine", "python", "--workers", "2", "--output", str(out)
    )
    running.wait_for(r"^explore \(")  # its first progress line: the search is under way
    workers = running.children()
    assert_interrupted(running, "explore")
    time.sleep(0.2)
    alive = [pid for pid in workers if _alive(pid)]
    assert alive == []
    assert written_files(out) == []
    no_temporary_files(tmp_path)


def test_ctrl_c_stops_the_kernels_shards(tmp_path: Path) -> None:
    """SPIN's (1, 2) domains, 280,380 states: the search is well under way when its
    two shards are up."""
    out = tmp_path / "out"
    running = Running(
        tmp_path, "explore", "--spin-domains", "--ids", "2", "--workers", "2", "--output", str(out)
    )
    running.wait_for(r"sharded over 2 processes\)")
    deadline = time.monotonic() + 10
    while len(workers := running.children()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(workers) == 2
    assert_interrupted(running, "explore")
    time.sleep(0.2)
    assert [pid for pid in workers if _alive(pid)] == []
    assert written_files(out) == []
    no_temporary_files(tmp_path)


def test_ctrl_c_stops_the_kernels_generating_apart(tmp_path: Path) -> None:
    """The default report's two kernels are generated in forked processes, which leave
    Ctrl-C to their parent: it stops them on its way out."""
    out = tmp_path / "out"
    running = Running(tmp_path, "explore", "--engine", "kernel", "--no-cache", "--output", str(out))
    running.wait_for(r": generating ")
    generating = running.children()
    assert generating  # a process per domain
    assert_interrupted(running, "explore")
    time.sleep(0.2)
    assert [pid for pid in generating if _alive(pid)] == []
    assert written_files(out) == []
    no_temporary_files(tmp_path)


@pytest.mark.skipif(
    usable_cores() < 2, reason="--workers auto runs checks beside the explorer on two cores only"
)
def test_ctrl_c_stops_verify_and_the_checks_beside_its_explorer(tmp_path: Path) -> None:
    out = tmp_path / "out"
    running = Running(tmp_path, "verify", "--output", str(out))
    running.wait_for(r"started beside the explorer")
    beside = running.children()
    assert beside  # the campaign, then the boundary check, in a process of their own
    assert_interrupted(running, "verify")
    time.sleep(0.2)
    assert [pid for pid in beside if _alive(pid)] == []
    assert written_files(out) == []
    no_temporary_files(tmp_path)


def test_ctrl_c_stops_the_proofs_inside_z3(tmp_path: Path) -> None:
    """A 300-key policy: each obligation is a long z3 check (z3 used to swallow the
    interrupt and answer "unknown")."""
    out = tmp_path / "out"
    policy = three_hundred_keys(tmp_path / "many.toml")
    running = Running(tmp_path, "prove", "--policy", str(policy), "--output", str(out))
    running.wait_for(r"^replan prove: proving")
    time.sleep(2.0)
    assert_interrupted(running, "prove")
    assert written_files(out) == []
    no_temporary_files(tmp_path)


def test_ctrl_c_right_after_the_proofs_leaves_no_counterexample_without_its_report(
    tmp_path: Path,
) -> None:
    """The proofs fail (a weakened commit gate) and their counterexample is due; the
    interrupt comes as the next check starts: neither it nor a report is written."""
    out = tmp_path / "out"
    running = Running(tmp_path, "verify", "--policy", str(WEAK_GATE), "--output", str(out))
    running.wait_for(r"proofs: failed")
    assert_interrupted(running, "verify")
    assert written_files(out) == []
    no_temporary_files(tmp_path)


def _starting(line: str) -> bool:
    return line.endswith(" ...") or "started beside the explorer" in line


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except (OSError, IndexError):
        return False
    return state != "Z"


# ---- the files themselves --------------------------------------------------------------


def test_a_file_is_written_atomically_with_the_usual_permissions(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "report.json"
    files.write_atomically(target, '{"a": 1}\n')
    files.write_atomically(target, b'{"a": 2}\n')
    assert target.read_text() == '{"a": 2}\n'
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]  # no temporary left
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask


def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.json"
    target.write_text("old\n")

    def refuse(source: str, destination: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError):
        files.write_atomically(target, "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_held_writes_land_on_commit_in_order_or_not_at_all(tmp_path: Path) -> None:
    with files.held() as pending:
        files.write_atomically(tmp_path / "counterexample.json", "{}\n")
        files.write_atomically(tmp_path / "report.json", "{}\n")
        assert not any(tmp_path.iterdir())
        assert [p.name for p in pending.paths] == ["counterexample.json", "report.json"]
        pending.commit()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counterexample.json", "report.json"]

    with pytest.raises(KeyboardInterrupt), files.held():
        files.write_atomically(tmp_path / "half.json", "{}\n")
        raise KeyboardInterrupt
    assert not (tmp_path / "half.json").exists()


def test_a_progress_line_is_written_with_its_newline_in_one_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C between a line's text and its newline ran the interrupt's own line on
    after it; one write per line leaves no such gap."""
    import io

    from replan.verification.runtime.interrupt import say

    class Recording(io.StringIO):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[str] = []

        def write(self, text: str) -> int:
            self.calls.append(text)
            return super().write(text)

    recording = Recording()
    monkeypatch.setattr(sys, "stderr", recording)
    say("replan verify: [4/8] explorer ...")
    assert recording.calls == ["replan verify: [4/8] explorer ...\n"]


def test_after_an_interrupt_an_object_it_cut_short_dies_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An interrupt inside z3's ``AstRef.__init__`` leaves an object without ``ctx``;
    its ``__del__`` fails when the interpreter collects it, after the command has
    printed its one line: that failure is dropped. Any other finalizer's error is
    still reported, and nothing is dropped without an interrupt."""
    import gc

    from replan.verification.runtime import interrupt

    reported: list[BaseException] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))

    class CutShort:
        def __init__(self, fail: bool) -> None:
            if fail:
                raise KeyboardInterrupt
            self.ctx = None

        def __del__(self) -> None:
            self.ctx  # noqa: B018  (as z3's __del__ reads it)

    class Broken:
        def __del__(self) -> None:
            raise ValueError("a real error")

    def cut_short() -> None:
        with suppress(KeyboardInterrupt):
            CutShort(fail=True)
        gc.collect()

    monkeypatch.setattr(interrupt, "_watch", lambda *args: None)  # no watcher thread
    with interrupt.installed("x: interrupted"):
        cut_short()
    assert [type(e) for e in reported] == [AttributeError]  # no interrupt: reported
    reported.clear()
    pytests_handler = signal.getsignal(signal.SIGINT)
    with interrupt.installed("x: interrupted"):
        interrupt._requested.set()
    signal.signal(signal.SIGINT, pytests_handler)
    try:
        cut_short()  # after the command, as the interpreter's clean-up finds it
        Broken()
        gc.collect()
    finally:
        interrupt._requested.clear()
    assert [type(e) for e in reported] == [ValueError]


LATE_SIGINT = """
import os, signal
from replan.verification.runtime import interrupt

with interrupt.installed("x: interrupted"):
    try:
        os.kill(os.getpid(), signal.SIGINT)
        interrupt.check()
    except KeyboardInterrupt:
        interrupt.finished()
os.kill(os.getpid(), signal.SIGINT)  # redelivered by the watcher, handled only now
raise SystemExit(130)
"""


INTERRUPT_LEAVES_STRING_EXEC = """
from replan.verification.runtime import interrupt

with interrupt.installed("x: interrupted"):
    try:
        exec("import os, signal\\nos.kill(os.getpid(), signal.SIGINT)\\nwhile True: pass")
    except KeyboardInterrupt:
        interrupt.finished()
raise SystemExit(130)
"""


def test_an_interrupt_that_left_a_string_exec_still_exits_130_under_python_m(
    tmp_path: Path,
) -> None:
    """Ctrl-C landing while a dataclass builds its methods (by string ``exec``): under
    ``python -m``, as users run replan, CPython would end the process by SIGINT at exit
    although the interrupt was caught."""
    (tmp_path / "lands_in_exec.py").write_text(INTERRUPT_LEAVES_STRING_EXEC, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "lands_in_exec"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 130, done.stderr


def test_a_sigint_arriving_after_the_interrupted_command_finished_keeps_exit_130() -> None:
    """The watcher redelivers an interrupt a finalizer swallowed; one sent just before
    the command finished is handled after it: the process still exits 130, not killed
    by the signal (Python re-raises an uncaught KeyboardInterrupt as death by SIGINT)."""
    done = subprocess.run(
        [sys.executable, "-c", LATE_SIGINT],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr
