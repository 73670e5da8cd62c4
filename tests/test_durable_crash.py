"""Kill and restart, for real: the durable import run (a DBOS workflow) is SIGKILLed
at every boundary and at random moments, on SQLite, and ends as the uninterrupted run
does, with no effect run twice (verification/durable_crash.py has the run, the
workers and the checks; tests/test_durable_crash_postgres.py runs it on PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

from verification.durable_crash import Matrix, crash_matrix

#: The default suite's share of random kills (with the 50 boundary kills: >= 200).
RANDOM_KILLS = 150


def held(matrix: Matrix) -> None:
    print(matrix.summary())
    assert matrix.held, matrix.summary()
    assert matrix.boundaries >= 40  # every call, input and effect boundary of the run


def test_every_kill_on_sqlite_ends_as_the_uninterrupted_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    matrix = crash_matrix(url, "sqlite", tmp_path, random_kills=RANDOM_KILLS, seed=1)
    held(matrix)
    assert matrix.kills >= 200


def test_an_effect_outside_its_transaction_is_caught_running_twice(tmp_path: Path) -> None:
    """The harness catches a broken adapter: the effect committed on its own, before
    the receipt, runs again when the worker is killed between the two."""
    url = f"sqlite:///{tmp_path / 'broken.db'}"
    matrix = crash_matrix(
        url, "sqlite", tmp_path, random_kills=0, broken="effect-commits-alone", only="effect"
    )
    failed = [o for o in matrix.outcomes if not o.held]
    assert failed, matrix.summary()
    assert any("effects ran twice" in problem for o in failed for problem in o.problems)
    assert all("after effect" in o.kill_point for o in failed), matrix.summary()
