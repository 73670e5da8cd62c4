"""The kill-and-restart matrix of tests/test_durable_crash.py on a real PostgreSQL
server: the one REPLAN_POSTGRES_URL names (.ci/run starts Debian's cluster on
127.0.0.1), else a throwaway cluster started from Debian's postgresql package
(verification/boundary/durable/postgres.py). Skipped, with the reason, only when no server can be
started; under CI=true that is a failure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from replan.verification.boundary.durable.crash import crash_matrix
from replan.verification.boundary.durable.postgres import server_url


@pytest.fixture(scope="module")
def postgres_url() -> str:
    url, why = server_url()
    if url is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and no PostgreSQL server: {why}")
        pytest.skip(f"no PostgreSQL server: {why}")
    return url


def test_every_kill_on_postgres_ends_as_the_uninterrupted_run(
    postgres_url: str, tmp_path: Path
) -> None:
    matrix = crash_matrix(postgres_url, "postgres", tmp_path, random_kills=20, seed=2)
    print(matrix.summary())
    assert matrix.held, matrix.summary()
    assert matrix.boundaries >= 40


def test_every_kill_of_a_guarded_agent_on_postgres_ends_as_the_uninterrupted_run(
    postgres_url: str, tmp_path: Path
) -> None:
    matrix = crash_matrix(
        postgres_url, "postgres", tmp_path, random_kills=10, seed=4, workload="agent"
    )
    print(matrix.summary())
    assert matrix.held, matrix.summary()
    assert matrix.boundaries >= 40
