"""A real PostgreSQL server for the durable-run checks: the one ``REPLAN_POSTGRES_URL``
names (``.ci/run`` starts Debian's cluster on 127.0.0.1 and sets it), or a throwaway
cluster started here from Debian's ``postgresql`` package, in a temporary directory,
listening on 127.0.0.1 only, stopped when the process exits.

Never a mock: without a server that can be reached or started, the caller is told
why, and decides (the tests skip with that reason, or fail under ``CI=true``).
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

URL_VARIABLE = "REPLAN_POSTGRES_URL"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _as_postgres_user(command: list[str]) -> list[str]:
    """initdb and pg_ctl refuse to run as root: run them as the package's user."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


def start_throwaway() -> tuple[str | None, str]:
    """Start a cluster of one's own: (its URL, "") or (None, why it could not)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda path: [int(part) for part in Path(path).parts[-3].split(".") if part.isdigit()],
    )
    if not found:
        return None, "no PostgreSQL server binaries (apt-get install postgresql)"
    binaries = Path(found[-1]).parent
    directory = Path(tempfile.mkdtemp(prefix="replan-pg-"))
    data = directory / "data"
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            return None, "running as root without runuser to start PostgreSQL as its own user"
        shutil.chown(directory, "postgres", "postgres")
    port = _free_port()
    steps = [
        [str(binaries / "initdb"), "-D", str(data), "-U", "replan", "-A", "trust", "-E", "UTF8"],
        [
            str(binaries / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(directory / "server.log"),
            "-w",
            "-o",
            f"-c listen_addresses=127.0.0.1 -p {port} -k {directory}",
            "start",
        ],
    ]
    for step in steps:
        done = subprocess.run(_as_postgres_user(step), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return None, f"could not start PostgreSQL ({Path(step[0]).name}: {last[0]})"

    def stop() -> None:
        subprocess.run(
            _as_postgres_user(
                [str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]
            ),
            capture_output=True,
            check=False,
        )
        shutil.rmtree(directory, ignore_errors=True)

    atexit.register(stop)
    return f"postgresql+psycopg://replan@127.0.0.1:{port}/postgres", ""


def server_url() -> tuple[str | None, str]:
    """A server to use: (URL, "") or (None, why there is none)."""
    named = os.environ.get(URL_VARIABLE)
    if named:
        return named, ""
    return start_throwaway()
