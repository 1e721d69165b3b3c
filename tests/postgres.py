"""Finding the test PostgreSQL server, and databases of its own for each test.

PostgreSQL tests run when ``GNAU_TEST_DATABASE_URL`` is set (an admin URL on a server where
databases may be created) or a server answers on 127.0.0.1:5432. Elsewhere they are skipped
with the reason; in CI (``CI`` set) an unreachable server fails the run instead.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import psycopg
import pytest

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


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


def server_programs() -> Path | None:
    """The directory of this machine's PostgreSQL server programs (initdb, pg_ctl), if any."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class PrivateServer:
    """A PostgreSQL server of the test's own, on ``port``: made (initdb) at once, started only
    when :meth:`start` is called, so that a client can be started before the server is. Run as
    the ``postgres`` user when the tests run as root (the server refuses root)."""

    def __init__(self, port: int) -> None:
        programs = server_programs()
        if programs is None:
            if os.environ.get("CI"):
                pytest.fail("CI must run this test, but no initdb is installed", pytrace=False)
            pytest.skip("no PostgreSQL server programs (initdb, pg_ctl) on this machine")
        self.programs = programs
        self.port = port
        self.directory = Path(tempfile.mkdtemp(prefix="gnau-pg-"))
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_user:
            shutil.chown(self.directory, "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    @property
    def data(self) -> Path:
        return self.directory / "data"

    def start(self) -> None:
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.directory} -c fsync=off"
        log = self.directory / "server.log"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(log), "-o", options, "-w", "start")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.directory, ignore_errors=True)

    def _run(self, program: str, *args: str) -> None:
        subprocess.run(
            [*self.as_user, str(self.programs / program), *args],
            check=True,
            capture_output=True,
            cwd=self.directory,
            timeout=60,
        )
