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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from gnau_service.store.base import StoreError
from gnau_service.store.migrations import MIGRATIONS, Migration

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
    [1, 2, 3, 4]
    >>> [m.version for m in migrations_to_run(v1, "gnau.db", migrate=True)]
    [2, 3, 4]
    >>> migrations_to_run(SchemaState(4, empty=False), "gnau.db", migrate=False)
    ()
    >>> migrations_to_run(v1, "gnau.db", migrate=False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    gnau_service.store.schema.SchemaTooOld: gnau.db: database schema version 1 is older than ...
    >>> migrations_to_run(SchemaState(5, empty=False), "gnau.db", migrate=True)
    Traceback (most recent call last):
    ...
    gnau_service.store.schema.SchemaTooNew: gnau.db: database schema version 5 is newer than this gnau (4): upgrade gnau
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
