"""Where a campaign keeps Hypothesis' example database: a directory on this machine,
or a Redis server that every worker shares (``redis://HOST:PORT/DB``).

Why a shared database: Hypothesis saves each failing example it shrank under the
test's key, and replays the saved ones first (its ``reuse`` phase). Workers that
share one database therefore replay a counterexample any of them found, as the
HypoFuzz recipe does with Redis for workers that come and go. The key is the
campaign's identity (policy, implementation, prefix: ``campaign.build_machine``), never
the seed, so every worker of a campaign, and every later campaign of the same pair,
reads the same entries.

Owns: telling a location's kind, building the database, and checking a Redis server
answers before any work starts. Redis (``pip install 'replan[scale]'``) is imported
here and nowhere else, and only for a ``redis://`` location.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

#: URL schemes redis-py's ``Redis.from_url`` reads.
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
#: Every key replan writes starts with this, so one Redis server can hold other data.
KEY_PREFIX = b"replan-example:"


class DatabaseError(ValueError):
    """The database cannot be used: the extra is missing or the server is unreachable."""


def is_shared(location: str | Path | None) -> bool:
    """A Redis URL (shared by every worker), not a directory."""
    return isinstance(location, str) and location.startswith(REDIS_SCHEMES)


def example_database(location: str | Path | None) -> ExampleDatabase | None:
    """The database at ``location``: None for none, a Redis URL, else a directory."""
    if location is None:
        return None
    if is_shared(location):
        client = _client(str(location))  # first: a missing extra is a DatabaseError
        from hypothesis.extra.redis import RedisExampleDatabase

        return RedisExampleDatabase(client, key_prefix=KEY_PREFIX)
    return DirectoryBasedExampleDatabase(str(location))


def check_database(location: str | Path | None) -> None:
    """Raise ``DatabaseError`` naming the location when a Redis server does not
    answer (a directory is created on first use: nothing to check)."""
    if not is_shared(location):
        return
    client = _client(str(location))
    import redis

    try:
        client.ping()
    except redis.RedisError as error:
        raise DatabaseError(f"{location}: the Redis server does not answer ({error})") from None


@functools.cache
def _client(url: str) -> Any:
    """One client (a connection pool) per URL and process, however many engines and
    checks use it."""
    try:
        import redis
    except ImportError:
        raise DatabaseError(
            f"{url}: a Redis example database needs the scale extra (pip install 'replan[scale]')"
        ) from None
    try:
        return redis.Redis.from_url(url, socket_connect_timeout=5)
    except ValueError as error:
        raise DatabaseError(f"{url}: not a Redis URL ({error})") from None


__all__ = [
    "KEY_PREFIX",
    "REDIS_SCHEMES",
    "DatabaseError",
    "check_database",
    "example_database",
    "is_shared",
]
