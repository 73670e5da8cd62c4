"""Beyond one process: the campaign as shares on local processes or Ray tasks, one
example database shared through a real Redis server, and the sharded explorer's
shards as Ray actors. Ray starts a local cluster here (``ray.init(num_cpus=2)``,
offline); Redis is the server ``.ci/run`` starts (``REPLAN_REDIS_URL``), or one these
tests start from Debian's ``redis-server``. Without the scale extra or a server the
tests say why and skip; with ``CI=true`` that is a failure."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from replan.cli import main
from replan.controller.policy import DEFAULT_POLICY
from replan.verification.engines.campaign.database import DatabaseError, check_database
from replan.verification.engines.campaign.run import run_campaign
from replan.verification.engines.campaign.workers import run_workers, share_seed, split
from replan.verification.engines.explore.engine import explore
from replan.verification.subjects.mutants import mutant_implementation

MUTANT = "stale-plan-check-removed"
ROOT = Path(__file__).resolve().parent.parent


def _missing(what: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} (CI=true: the scale tests must run)")
    pytest.skip(what)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    """A real Redis server on 127.0.0.1: ``REPLAN_REDIS_URL``'s, or one started here."""
    pytest.importorskip("redis", reason="the scale extra (redis) is not installed")
    given = os.environ.get("REPLAN_REDIS_URL")
    if given:
        yield given
        return
    binary = shutil.which("redis-server")
    if binary is None:
        _missing("no Redis server: set REPLAN_REDIS_URL or apt-get install redis-server")
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="replan-redis-") as directory:
        server = subprocess.Popen(
            [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--dir", directory],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"redis://127.0.0.1:{port}/0"
        try:
            for _ in range(100):
                try:
                    check_database(url)
                    break
                except DatabaseError:
                    time.sleep(0.05)
            yield url
        finally:
            server.terminate()
            server.wait()


@pytest.fixture
def fresh_redis(redis_url: str) -> str:
    """The server emptied of replan's examples (each test starts with none)."""
    import redis

    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(match="replan-example:*"):
        client.delete(key)
    return redis_url


@pytest.fixture(scope="module")
def ray_local() -> Iterator[str]:
    """A local Ray cluster of 2 CPUs for this module."""
    pytest.importorskip("ray", reason="the scale extra (ray) is not installed")
    from replan.verification.runtime import ray_cluster

    ray_cluster.connect(ray_cluster.LOCAL, cpus=2)
    try:
        yield ray_cluster.LOCAL
    finally:
        ray_cluster.shutdown()


# ---- shares, seeds, merging ---------------------------------------------------------------


def test_a_budget_splits_into_shares_with_their_own_seeds() -> None:
    assert split(200, 3) == [67, 67, 66] and split(2, 4) == [1, 1]
    assert share_seed(7, 0) == 7
    assert len({share_seed(7, number) for number in range(8)}) == 8


def test_local_shares_merge_into_one_campaign() -> None:
    """Two processes, each its share on its own seed: the merged counts are the sum of
    the same shares run one by one, and so is the coverage."""
    merged = run_workers(DEFAULT_POLICY, workers=2, seed=5, examples=40, steps=20)
    assert merged.passed and merged.budget == (40, 20)
    alone = [
        run_campaign(
            DEFAULT_POLICY,
            "ci",
            seed=share_seed(5, n),
            examples=20,
            steps=20,
            out_dir=None,
            database=None,
        )
        for n in range(2)
    ]
    assert merged.operations == sum(r.operations for r in alone)
    assert merged.examples == sum(r.examples for r in alone)
    for label, count in merged.coverage.transitions.items():
        assert count == sum(r.coverage.transitions[label] for r in alone), label


def test_the_first_failure_stops_the_others_and_is_saved(tmp_path: Path) -> None:
    result = run_workers(
        DEFAULT_POLICY,
        workers=2,
        seed=3,
        examples=150,
        steps=12,
        implementation=mutant_implementation(MUTANT),
        mutant=MUTANT,
        out_dir=tmp_path,
    )
    assert result.finding is not None
    assert result.finding.property == "propose-evidence-must-be-current"
    [saved] = [path for path in result.saved if path.suffix == ".json"]
    assert main(["replay", str(saved)]) == 1  # still fails on the broken controller


def test_a_dead_local_process_has_its_share_run_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A share whose process is killed runs again: the merged campaign is the one
    nobody killed."""
    from replan.verification.engines.campaign import workers as campaign_workers

    expected = run_workers(DEFAULT_POLICY, workers=2, seed=9, examples=20, steps=10)
    real = campaign_workers.run_share

    def dies_once(share: campaign_workers.Share) -> object:
        marker = Path(tempfile.gettempdir()) / f"replan-test-share-{os.getppid()}-{share.number}"
        if share.number == 1 and not marker.exists():
            marker.write_text("killed")
            os.kill(os.getpid(), signal.SIGKILL)
        marker.unlink(missing_ok=True)
        return real(share)

    monkeypatch.setattr(campaign_workers, "run_share", dies_once)
    said: list[str] = []
    again = run_workers(
        DEFAULT_POLICY, workers=2, seed=9, examples=20, steps=10, report=said.append
    )
    assert any("its process died; running it again" in line for line in said)
    assert (again.examples, again.operations) == (expected.examples, expected.operations)
    assert again.coverage.transitions == expected.coverage.transitions


# ---- the shared Redis database ------------------------------------------------------------


def test_a_counterexample_is_replayed_from_redis_alone(fresh_redis: str) -> None:
    """One worker process finds and shrinks a failure; a fresh worker process, on
    another seed and given no file, replays it first from the shared database."""
    arguments = {
        "workers": 1,
        "examples": 150,
        "steps": 12,
        "implementation": mutant_implementation(MUTANT),
        "mutant": MUTANT,
        "database": fresh_redis,
    }
    first = run_workers(DEFAULT_POLICY, seed=1, **arguments)  # type: ignore[arg-type]
    assert first.finding is not None and first.found_at_example is not None
    assert first.found_at_example > 1
    import redis

    keys = list(redis.Redis.from_url(fresh_redis).scan_iter(match="replan-example:*"))
    assert keys, "the shrunk failure is in Redis"
    again = run_workers(DEFAULT_POLICY, seed=987, **arguments)  # type: ignore[arg-type]
    assert again.finding is not None and again.found_at_example == 1
    assert again.finding.operations == first.finding.operations


def test_an_unreachable_redis_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("redis", reason="the scale extra (redis) is not installed")
    url = f"redis://127.0.0.1:{_free_port()}/0"
    code = main(["campaign", "--database", url, "--examples", "2", "-o", str(tmp_path)])
    error = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "the Redis server does not answer" in error[-1] and url in error[-1]


# ---- Ray ---------------------------------------------------------------------------------


def _kill_a_running_share(after: float, killed: list[int]) -> None:
    """SIGKILL one process running a campaign share (Ray titles it after the task)."""
    deadline = time.monotonic() + 120
    time.sleep(after)
    while time.monotonic() < deadline and not killed:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if b"ray::run_share" in command:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
                return
        time.sleep(0.05)


def test_local_shares_are_not_forked_from_a_ray_driver(
    ray_local: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process running a Ray driver starts its local workers from a fresh fork
    server (a fork of the driver itself can die of SIGSEGV finalizing the inherited
    gRPC client); any other process forks them directly."""
    import sys

    from replan.verification.runtime.forking import worker_context

    assert worker_context().get_start_method() == "forkserver"
    monkeypatch.delitem(sys.modules, "ray")
    assert worker_context().get_start_method() == "fork"


def test_a_local_clusters_workers_run_at_the_drivers_priority(ray_local: str) -> None:
    """Ray lowers its workers' priority by default; a cluster started for this run
    keeps its shares at the driver's, or any other busy process starves them."""
    from replan.verification.runtime import ray_cluster

    def niceness() -> int:  # local, so Ray sends it by value, not by this module's name
        return os.nice(0)

    task = ray_cluster.remote_function(niceness, retries=0)
    assert ray_cluster.get([task.remote()]) == [os.nice(0)]


def test_a_ray_campaign_survives_a_killed_worker(ray_local: str, fresh_redis: str) -> None:
    """A Ray worker running a share is killed mid-campaign: Ray runs the share again,
    the campaign finishes, and the merged result is the one nobody killed."""
    budget = {"workers": 2, "seed": 11, "examples": 80, "steps": 30}
    expected = run_workers(DEFAULT_POLICY, **budget)  # type: ignore[arg-type]
    killed: list[int] = []
    killer = threading.Thread(target=_kill_a_running_share, args=(1.0, killed))
    killer.start()
    result = run_workers(
        DEFAULT_POLICY,
        ray_address=ray_local,
        database=fresh_redis,
        **budget,  # type: ignore[arg-type]
    )
    killer.join()
    assert killed, "no share was running to be killed"
    assert result.passed
    assert (result.examples, result.operations) == (expected.examples, expected.operations)
    assert result.coverage.transitions == expected.coverage.transitions
    assert result.coverage.stop_reasons == expected.coverage.stop_reasons


def test_a_ray_campaign_stops_at_the_first_failure(ray_local: str, tmp_path: Path) -> None:
    code = main(
        [
            *("campaign", "--workers", "2", "--ray", ray_local, "--mutant", MUTANT),
            *("--no-database", "--examples", "150", "--steps", "12", "--seed", "3"),
            *("-o", str(tmp_path)),
        ]
    )
    assert code == 1
    assert list(tmp_path.glob("campaign_*.json"))


def test_ray_shards_find_the_same_states_as_one_process(ray_local: str) -> None:
    """The explorer's shards as Ray actors: counts and verdicts equal the single
    process's: on the default policy those ``replan evidence`` recorded (by the
    kernel, which gives the Python explorer's counts; ``tests/test_verify.py`` checks
    the record is current), and the counterexample is the same."""
    recorded = json.loads((ROOT / "evidence" / "verify.json").read_text(encoding="utf-8"))
    [explorer] = [c["details"] for c in recorded["checks"] if c["name"] == "explorer"]
    shards = explore(DEFAULT_POLICY, None, workers=2, ray=True)
    assert (shards.states, shards.transitions, shards.depth) == (
        explorer["states"],
        explorer["transitions"],
        explorer["depth"],
    )
    # the kernel counts each transition once per state expanded, the explorer once per
    # distinct edge: the same transitions, counted in other units
    assert shards.fired.keys() == explorer["fired_on_expanded_states"].keys()
    assert shards.traps == explorer["traps"] == 0
    from replan.verification.core.search import SearchOptions
    from replan.verification.engines import engine
    from replan.verification.subjects.mutants import MUTANTS

    # a broken controller travels by the name its subject gives it, never copied by value
    broken = MUTANTS["older-overwrites-newer"]
    explorer = engine("python")
    [one] = explorer.search(broken, DEFAULT_POLICY, None, SearchOptions()).findings
    sharded = SearchOptions(workers=2, ray=True)
    [two] = explorer.search(broken, DEFAULT_POLICY, None, sharded).findings
    assert (one.property, one.operations) == (two.property, two.operations)


def test_the_kernels_shards_as_ray_actors_keep_the_serial_searchs_states(ray_local: str) -> None:
    """The kernel's shards as Ray actors, each compiling the kernel from its generated
    text: the serial search's states, parents and successors, state for state."""
    from conftest import session_kernel_cache

    from replan.verification.core.domains import default_report_domains
    from replan.verification.core.subject import PROJECT
    from replan.verification.engines.kernel import explore_kernel

    domains = default_report_domains(DEFAULT_POLICY)[1]
    cache = session_kernel_cache()
    serial = explore_kernel(DEFAULT_POLICY, domains, PROJECT, cache=cache)
    actors = explore_kernel(DEFAULT_POLICY, domains, PROJECT, cache=cache, workers=2, ray=True)
    assert actors.details["search_shards"] == 2 and actors.details["search_on_ray"] is True
    assert (actors.states, actors.transitions, actors.depth, actors.fired) == (
        serial.states,
        serial.transitions,
        serial.depth,
        serial.fired,
    )
    one, two = serial.witness.seen, actors.witness.seen  # type: ignore[union-attr]
    assert (one.states, one.parent, one.targets, one.ends) == (
        two.states,
        two.parent,
        two.targets,
        two.ends,
    )
