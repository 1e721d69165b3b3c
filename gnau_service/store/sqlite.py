"""SQLite: the embedded default. One file, WAL, ``synchronous=FULL``, append-only log tables."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from gnau_service.audit.entries import GENESIS_PREV_HASH
from gnau_service.store.base import Backend
from gnau_service.store.schema import APPEND_ONLY_TABLES, common_tables

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

    def connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=30.0
        )
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = FULL")
        connection.execute("PRAGMA foreign_keys = ON")
        return connection

    @contextmanager
    def reader(self) -> Iterator[sqlite3.Connection]:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = self.connect()
        yield connection

    def create_schema(self, connection: sqlite3.Connection) -> None:
        connection.executescript(SCHEMA)

    def is_unavailable(self, error: BaseException) -> bool:
        return (
            isinstance(error, sqlite3.OperationalError)
            and error.sqlite_errorcode & 0xFF in _UNAVAILABLE_CODES
        )


#: SQLite's primary result codes that mean the file cannot be used now: BUSY, LOCKED, NOMEM,
#: READONLY, IOERR, FULL, CANTOPEN, PROTOCOL (https://sqlite.org/rescode.html). Others (a
#: syntax error, a constraint) are a refusal of the statement itself.
_UNAVAILABLE_CODES: Final = frozenset({5, 6, 7, 8, 10, 13, 14, 15})
