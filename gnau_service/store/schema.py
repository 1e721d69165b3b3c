"""The tables every backend keeps, written once; each backend names its own types.

The log tables are append-only (each backend adds triggers for that); ``log_head`` is the one-row
sequencer; ``rounds`` and ``requests`` are the service's state and idempotency records.

The schema has a version, :data:`SCHEMA_VERSION`, kept in the database (PostgreSQL: the one-row
``gnau_schema`` table; SQLite: ``PRAGMA user_version``). Start-up reads it with a plain SELECT
and runs DDL only if it is older, so a process starting beside live writers takes no lock that
conflicts with them. A database that never recorded a version (made before there was one) reads
as version 0 and is brought up to date by the same DDL, which only adds what is missing.
"""

from __future__ import annotations

from typing import Final

from gnau_service.store.base import StoreError

APPEND_ONLY_TABLES: Final = ("log_entries", "log_nodes", "log_checkpoints", "log_keys")

#: The version of the tables below; raise it with every change to them (and make the change
#: in the DDL so that it applies to a database of any older version).
SCHEMA_VERSION: Final = 1


def needs_setup(found: int, database: str) -> bool:
    """Whether a database whose schema is at version ``found`` needs the DDL run.

    A newer schema is refused, never touched: this code does not know what it holds.

    >>> needs_setup(0, "gnau.db"), needs_setup(SCHEMA_VERSION, "gnau.db")
    (True, False)
    >>> needs_setup(SCHEMA_VERSION + 1, "gnau.db")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    gnau_service.store.base.StoreError: gnau.db: database schema version 2 is newer ... upgrade gnau
    """
    if found > SCHEMA_VERSION:
        raise StoreError(
            f"{database}: database schema version {found} is newer than this gnau"
            f" ({SCHEMA_VERSION}): upgrade gnau"
        )
    return found < SCHEMA_VERSION


def first_line(error: BaseException) -> str:
    """An error's message on one line (libpq's run to several), for a one-line StoreError."""
    lines = str(error).strip().splitlines()
    return lines[0].strip() if lines else type(error).__name__


def common_tables(*, integer: str, blob: str, nodes_options: str = "") -> str:
    """The DDL of every table and index, with ``integer``/``blob`` as the dialect spells them."""
    return f"""
CREATE TABLE IF NOT EXISTS log_head (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    size {integer} NOT NULL,
    prev_hash TEXT NOT NULL,
    frontier {blob} NOT NULL
);
CREATE TABLE IF NOT EXISTS log_entries (
    idx {integer} PRIMARY KEY,
    kind TEXT NOT NULL,
    round_id TEXT,
    data {blob} NOT NULL
);
CREATE INDEX IF NOT EXISTS log_entries_by_round ON log_entries (round_id, idx)
    WHERE round_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS log_nodes (
    level INTEGER NOT NULL,
    idx {integer} NOT NULL,
    hash {blob} NOT NULL,
    PRIMARY KEY (level, idx)
){nodes_options};
CREATE TABLE IF NOT EXISTS log_checkpoints (size {integer} PRIMARY KEY, note TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS log_keys (
    key_id TEXT PRIMARY KEY,
    vkey TEXT NOT NULL UNIQUE,
    since_size {integer} NOT NULL
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
CREATE INDEX IF NOT EXISTS rounds_by_time ON rounds (created_at, round_id);
CREATE TABLE IF NOT EXISTS requests (
    request_id TEXT PRIMARY KEY,
    operation TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    response TEXT NOT NULL,
    created_at TEXT NOT NULL
);
"""
