"""PostgreSQL (psycopg 3): the backend for several service processes sharing one log.

Writers serialise on the one-row ``log_head`` (``SELECT ... FOR UPDATE`` inside each batch's
transaction), which makes indices gap-free across processes without session-level advisory
locks (those break under transaction-pooling proxies).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import psycopg
from psycopg_pool import ConnectionPool

from gnau_service.audit.entries import GENESIS_PREV_HASH
from gnau_service.store.base import Backend

APPEND_ONLY_TABLES: Final = ("log_entries", "log_nodes", "log_checkpoints", "log_keys")

# Schema changes from several processes at once would race on the catalog: a transaction-level
# advisory lock (released at commit, so safe behind a pooler) makes them take turns.
SCHEMA_LOCK: Final = 0x676E6175  # "gnau"

SCHEMA: Final = f"""
SELECT pg_advisory_xact_lock({SCHEMA_LOCK});
CREATE TABLE IF NOT EXISTS log_head (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    size BIGINT NOT NULL,
    prev_hash TEXT NOT NULL,
    frontier BYTEA NOT NULL
);
INSERT INTO log_head (id, size, prev_hash, frontier)
    VALUES (1, 0, '{GENESIS_PREV_HASH}', ''::bytea) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS log_entries (
    idx BIGINT PRIMARY KEY,
    kind TEXT NOT NULL,
    round_id TEXT,
    data BYTEA NOT NULL
);
CREATE INDEX IF NOT EXISTS log_entries_by_round ON log_entries (round_id, idx)
    WHERE round_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS log_nodes (
    level INTEGER NOT NULL,
    idx BIGINT NOT NULL,
    hash BYTEA NOT NULL,
    PRIMARY KEY (level, idx)
);
CREATE TABLE IF NOT EXISTS log_checkpoints (size BIGINT PRIMARY KEY, note TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS log_keys (
    key_id TEXT PRIMARY KEY,
    vkey TEXT NOT NULL UNIQUE,
    since_size BIGINT NOT NULL
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
CREATE OR REPLACE FUNCTION gnau_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END $$;
""" + "".join(
    f"""
CREATE OR REPLACE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table}
    FOR EACH ROW EXECUTE FUNCTION gnau_refuse_change();
CREATE OR REPLACE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
    FOR EACH STATEMENT EXECUTE FUNCTION gnau_refuse_change();
"""
    for table in APPEND_ONLY_TABLES
)


class PostgresBackend(Backend):
    """A PostgreSQL database at ``url``; reads use a small connection pool."""

    read_head_sql = "SELECT size, prev_hash, frontier FROM log_head WHERE id = 1 FOR UPDATE"
    lock_rows_sql = " FOR UPDATE"

    def __init__(self, url: str, *, pool_size: int = 4) -> None:
        self.url = url
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            open=True,
            name="gnau-readers",
        )

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.url, autocommit=True)

    @contextmanager
    def reader(self) -> Iterator[psycopg.Connection[Any]]:
        with self._pool.connection() as connection:
            yield connection

    def create_schema(self, connection: psycopg.Connection[Any]) -> None:
        with connection.transaction():
            connection.execute(SCHEMA.encode())

    def sql(self, text: str) -> str:
        return text.replace("?", "%s")

    def close(self) -> None:
        self._pool.close()
