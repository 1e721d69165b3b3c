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

APPEND_ONLY_TABLES: Final = ("log_entries", "log_nodes", "log_checkpoints", "log_keys")

SCHEMA: Final = f"""
CREATE TABLE IF NOT EXISTS log_head (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    size INTEGER NOT NULL,
    prev_hash TEXT NOT NULL,
    frontier BLOB NOT NULL
);
INSERT OR IGNORE INTO log_head (id, size, prev_hash, frontier)
    VALUES (1, 0, '{GENESIS_PREV_HASH}', x'');
CREATE TABLE IF NOT EXISTS log_entries (
    idx INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    round_id TEXT,
    data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS log_entries_by_round ON log_entries (round_id, idx)
    WHERE round_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS log_nodes (
    level INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    hash BLOB NOT NULL,
    PRIMARY KEY (level, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS log_checkpoints (size INTEGER PRIMARY KEY, note TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS log_keys (
    key_id TEXT PRIMARY KEY,
    vkey TEXT NOT NULL UNIQUE,
    since_size INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS rounds (
    round_id TEXT PRIMARY KEY,
    table_id TEXT NOT NULL,
    state TEXT NOT NULL,
    record TEXT NOT NULL,
    server_seed TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS rounds_one_open_per_table ON rounds (table_id)
    WHERE state IN ('SHUFFLED', 'DEALT', 'REVEALED');
CREATE INDEX IF NOT EXISTS rounds_by_table ON rounds (table_id, created_at, round_id);
CREATE TABLE IF NOT EXISTS requests (
    request_id TEXT PRIMARY KEY,
    operation TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    response TEXT NOT NULL,
    created_at TEXT NOT NULL
);
""" + "".join(
    f"""
CREATE TRIGGER IF NOT EXISTS {table}_no_update BEFORE UPDATE ON {table}
    BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END;
CREATE TRIGGER IF NOT EXISTS {table}_no_delete BEFORE DELETE ON {table}
    BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END;
"""
    for table in APPEND_ONLY_TABLES
)


class SqliteBackend(Backend):
    """A SQLite database file. Readers get one connection per thread (WAL lets them run beside
    the writer); the writer starts each batch with ``BEGIN IMMEDIATE``, so even a second process
    on the same file appends after, never beside, this one."""

    begin_sql = "BEGIN IMMEDIATE"

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
