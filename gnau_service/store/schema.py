"""What start-up and ``gnau db migrate`` do about the schema version a database records.

The schema is versioned by :mod:`gnau_service.store.migrations`; the version is kept in the
database (PostgreSQL: the one-row ``gnau_schema`` table; SQLite: ``PRAGMA user_version``).
Start-up reads it, and whether the database is empty, with plain SELECTs, and changes the schema
only if told to, so a process starting beside live writers takes no lock that conflicts with
them. The rules (:func:`migrations_to_run`):

- a brand-new, empty database gets the whole schema: ``gnau serve`` works on a fresh machine;
- a schema as new as this gnau's is left alone;
- an older schema is migrated only when asked (``gnau db migrate``, or ``gnau serve --migrate
  true``); otherwise start-up refuses, naming the command;
- a newer schema is refused, never touched: this gnau does not know what it holds.

:func:`create_schema` applies them, the same way on every backend: each backend gives only its
schema-change transaction and how it runs a migration's script
(:meth:`~gnau_service.store.backend.Backend.schema_change`,
:meth:`~gnau_service.store.backend.Backend.apply_migration`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from gnau_service import __version__
from gnau_service.store.backend import Backend
from gnau_service.store.connections import Connection
from gnau_service.store.errors import StoreError
from gnau_service.store.migrations import HISTORY_TABLE, MIGRATIONS, AppliedMigration, Migration
from gnau_service.store.transaction import utc_now

APPEND_ONLY_TABLES: Final = ("log_entries", "log_nodes", "log_checkpoints", "log_keys")


@dataclass(frozen=True)
class SchemaState:
    """What a database says of its schema: the version it records (0 if none), and whether it
    holds no gnau table at all."""

    version: int
    empty: bool


class SchemaTooNew(StoreError):  # noqa: N818  (reads as the condition)
    """The database's schema is newer than this gnau: upgrade gnau."""


class SchemaTooOld(StoreError):  # noqa: N818
    """The database's schema is older than this gnau, and migrating was not asked for."""


def migrations_to_run(
    state: SchemaState,
    database: str,
    *,
    migrate: bool,
    known: Sequence[Migration] = MIGRATIONS,
) -> tuple[Migration, ...]:
    """The migrations to apply to a database in ``state``, or a refusal naming ``database``.

    >>> new, v1 = SchemaState(0, empty=True), SchemaState(1, empty=False)
    >>> [m.version for m in migrations_to_run(new, "gnau.db", migrate=False)]
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    >>> [m.version for m in migrations_to_run(v1, "gnau.db", migrate=True)]
    [2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    >>> migrations_to_run(SchemaState(11, empty=False), "gnau.db", migrate=False)
    ()
    >>> migrations_to_run(v1, "gnau.db", migrate=False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    gnau_service.store.schema.SchemaTooOld: gnau.db: database schema version 1 is older than ...
    >>> migrations_to_run(SchemaState(12, empty=False), "gnau.db", migrate=True)
    Traceback (most recent call last):
    ...
    gnau_service.store.schema.SchemaTooNew: gnau.db: database schema version 12 is newer than this gnau (11): upgrade gnau
    """  # noqa: E501  (a doctest's expected line)
    latest = known[-1].version
    if state.version > latest:
        raise SchemaTooNew(
            f"{database}: database schema version {state.version} is newer than this gnau"
            f" ({latest}): upgrade gnau"
        )
    pending = tuple(migration for migration in known if migration.version > state.version)
    if pending and not state.empty and not migrate:
        raise SchemaTooOld(
            f"{database}: database schema version {state.version} is older than this gnau"
            f" ({latest}): back it up, then run 'gnau db migrate' (or start with --migrate true)"
        )
    return pending


def first_line(error: BaseException) -> str:
    """An error's message on one line (libpq's run to several), for a one-line StoreError."""
    lines = str(error).strip().splitlines()
    return lines[0].strip() if lines else type(error).__name__


def schema_state(backend: Backend, connection: Connection) -> SchemaState:
    """The schema version ``backend``'s database records, and whether it is empty (plain
    reads)."""
    # Emptiness first: a migration that makes the tables records the version in the same
    # transaction, so once the tables are seen, so is the version (never "0, not empty").
    empty = not backend.has_table(connection, "log_head")
    return SchemaState(backend.schema_version(connection), empty)


def create_schema(
    backend: Backend, connection: Connection, *, migrate: bool = False
) -> Sequence[Migration]:
    """Bring the schema up to date as :func:`migrations_to_run` says (an empty database gets it
    all; an older one only if ``migrate``), or raise its refusal; the migrations applied, all in
    one schema change."""
    known = backend.migrations
    try:
        if not migrations_to_run(
            schema_state(backend, connection), str(backend), migrate=migrate, known=known
        ):
            return ()
        with backend.schema_change(connection):
            # Another process may have migrated while this one waited for the lock.
            pending = migrations_to_run(
                schema_state(backend, connection), str(backend), migrate=migrate, known=known
            )
            for migration in pending:
                backend.apply_migration(connection, migration)
                record_applied(backend, connection, migration)
        return pending
    except backend.driver_error as error:
        raise StoreError(f"{backend}: cannot set up the schema: {first_line(error)}") from error


def record_applied(backend: Backend, connection: Connection, migration: Migration) -> None:
    """Add ``migration`` to the history, once the table for it exists (from migration 2 on)."""
    if backend.has_table(connection, HISTORY_TABLE):
        backend.run(
            connection,
            "INSERT INTO gnau_migrations (version, summary, applied_at, gnau_version)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (version) DO NOTHING",
            (migration.version, migration.summary, utc_now(), __version__),
        )


def read_history(backend: Backend, connection: Connection) -> list[AppliedMigration]:
    """The migration history, oldest first; empty where there is none yet."""
    if not backend.has_table(connection, HISTORY_TABLE):
        return []
    rows = backend.run(
        connection,
        "SELECT version, summary, applied_at, gnau_version FROM gnau_migrations ORDER BY version",
    )
    return [AppliedMigration(int(v), str(s), str(a), str(g)) for v, s, a, g in rows]
