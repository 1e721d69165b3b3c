"""Finding the test PostgreSQL server, and databases of its own for each test.

PostgreSQL tests run when ``GNAU_TEST_DATABASE_URL`` is set (an admin URL on a server where
databases may be created) or a server answers on 127.0.0.1:5432. Elsewhere they are skipped
with the reason; in CI (``CI`` set) an unreachable server fails the run instead.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import psycopg
import pytest

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"

#: The backends of the tests above the store. The store's own tests (tests/store) run on both in
#: `make test`, since there the backend is what they test; above it the service does the same on
#: either, so its PostgreSQL twin runs in `make test-system`.
SERVICE_BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.system)]


def admin_url() -> str:
    return os.environ.get("GNAU_TEST_DATABASE_URL", DEFAULT_ADMIN_URL)


@cache
def unavailable_reason() -> str | None:
    """Why PostgreSQL tests cannot run here, or None if they can."""
    try:
        with psycopg.connect(admin_url(), connect_timeout=3) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as error:
        return f"PostgreSQL at {admin_url()} is unreachable: {str(error).strip()}"
    return None


def require_postgres() -> None:
    reason = unavailable_reason()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the PostgreSQL tests, but {reason}", pytrace=False)
    pytest.skip(reason)


@contextmanager
def fresh_database() -> Iterator[str]:
    """A new, empty database for one test; dropped afterwards. Yields its URL."""
    require_postgres()
    name = f"gnau_test_{secrets.token_hex(6)}"
    with psycopg.connect(admin_url(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    base = admin_url().rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin_url(), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class OutsideLeader:
    """Holds the log's sequencer lease from outside, without end, so that no store of the log
    leads until :meth:`release` (its session's end lets the next election take it). Makes the
    schema first if the database has none."""

    def __init__(self, url: str) -> None:
        from gnau_service.store.postgres import PostgresBackend
        from gnau_service.store.schema import create_schema

        backend = PostgresBackend(url)
        try:
            connection = backend.connect()
            create_schema(backend, connection)
            connection.close()
        finally:
            backend.close()
        self._session = psycopg.connect(url, autocommit=True)
        self._session.execute(
            "UPDATE log_lease SET epoch = epoch + 1, holder = 'outside',"
            " holder_pid = pg_backend_pid(), expires_at = 'infinity' WHERE id = 1"
        )

    def release(self) -> None:
        self._session.close()


@contextmanager
def database_of(backend: str, sqlite_file: Path) -> Iterator[str]:
    """A database URL for ``backend``: a fresh PostgreSQL database (dropped afterwards), or the
    SQLite file ``sqlite_file``."""
    if backend == "postgresql":
        with fresh_database() as url:
            yield url
    else:
        yield f"sqlite:///{sqlite_file}"
