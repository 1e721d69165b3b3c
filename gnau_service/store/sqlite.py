"""SQLite: the embedded default. One file, WAL, ``synchronous=FULL``, append-only log tables."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from gnau_service.audit.entries import GENESIS_PREV_HASH
from gnau_service.store.base import Backend, StoreError
from gnau_service.store.schema import (
    APPEND_ONLY_TABLES,
    SCHEMA_VERSION,
    common_tables,
    first_line,
    needs_setup,
)

SCHEMA: Final = (
    common_tables(integer="INTEGER", blob="BLOB", nodes_options=" WITHOUT ROWID")
    + f"""
INSERT OR IGNORE INTO log_head (id, size, prev_hash, frontier)
    VALUES (1, 0, '{GENESIS_PREV_HASH}', x'');
"""
    + "".join(
        f"""
CREATE TRIGGER IF NOT EXISTS {table}_no_update BEFORE UPDATE ON {table}
    BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END;
CREATE TRIGGER IF NOT EXISTS {table}_no_delete BEFORE DELETE ON {table}
    BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END;
"""
        for table in APPEND_ONLY_TABLES
    )
)


def split_statements(script: str) -> list[str]:
    """The statements of a script, each ended where SQLite says it is complete (a trigger's body
    holds semicolons of its own). The schema runs statement by statement because
    ``executescript`` would first commit the transaction that holds the write lock."""
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    if pending.strip():
        raise ValueError(f"an incomplete statement ends the script: {pending.strip()!r}")
    return statements


SCHEMA_STATEMENTS: Final = split_statements(SCHEMA)


class SqliteBackend(Backend):
    """A SQLite database file. Readers get one connection per thread (WAL lets them run beside
    the writer); the writer starts each batch with ``BEGIN IMMEDIATE``, so even a second process
    on the same file appends after, never beside, this one."""

    begin_sql = "BEGIN IMMEDIATE"
    runs_in_process = True

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()

    def __str__(self) -> str:
        return str(self.path)

    def connect(self) -> sqlite3.Connection:
        connection = None
        try:
            connection = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30.0
            )
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = FULL")
            connection.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as error:
            if connection is not None:
                connection.close()
            raise StoreError(f"{self}: cannot open the database: {first_line(error)}") from error
        return connection

    @contextmanager
    def reader(self) -> Iterator[sqlite3.Connection]:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = self.connect()
        yield connection

    def create_schema(self, connection: sqlite3.Connection) -> None:
        try:
            if needs_setup(user_version(connection), str(self)):
                self._set_up_schema(connection)
        except sqlite3.Error as error:
            raise StoreError(f"{self}: cannot set up the schema: {first_line(error)}") from error

    def _set_up_schema(self, connection: sqlite3.Connection) -> None:
        """Bring an older schema up to date in one transaction. ``BEGIN IMMEDIATE`` takes the
        write lock, so starting processes take turns, and a live writer's batch is waited for
        (the busy timeout)."""
        connection.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have set it up while this one waited for the lock.
            if needs_setup(user_version(connection), str(self)):
                for statement in SCHEMA_STATEMENTS:
                    connection.execute(statement)
                connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            connection.execute("COMMIT")
        except BaseException:
            # SQLite ends the transaction itself after some errors: the first error is the news.
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
            raise


def user_version(connection: sqlite3.Connection) -> int:
    """The schema version SQLite keeps in the file's header: 0 in a new or pre-version file."""
    return int(connection.execute("PRAGMA user_version").fetchone()[0])
