"""Versioned schema migrations: numbered SQL files, one for each dialect, applied in order.

Migration ``N`` is the pair ``NNNN_<name>.sqlite.sql`` and ``NNNN_<name>.postgresql.sql`` in this
directory; its first comment line says what it does. Applying it takes the schema from version
``N - 1`` to ``N``, in the same transaction as every other migration applied with it, and the
database's version (SQLite: ``PRAGMA user_version``; PostgreSQL: the one-row ``gnau_schema``) then
reads ``N``. Migration 1 is the schema as gnau made it before there were migrations, frozen: its
``IF NOT EXISTS`` statements also complete a database made before versions were kept (version 0).

A released migration never changes (``tests/store/test_migrations.py`` holds each file's digest):
a change to the schema is a new migration, with the next number, for both dialects. Each is
written to be safe to apply again (``IF NOT EXISTS``), so a database whose recorded version was
lost can still be brought up to date; SQLite's migration 10 cannot be (SQLite adds a column
without ``IF NOT EXISTS``): run again, it fails on the column it finds and changes nothing.

>>> [migration.name for migration in MIGRATIONS][-3:]
['round_deadlines', 'operators', 'catalogue']
>>> SCHEMA_VERSION
11
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from typing import Final


class Dialect(StrEnum):
    SQLITE = "sqlite"
    POSTGRESQL = "postgresql"


@dataclass(frozen=True)
class Migration:
    """One step of the schema, from ``version - 1`` to ``version``."""

    version: int
    name: str
    summary: str
    sqlite: str
    postgresql: str

    def script(self, dialect: Dialect) -> str:
        return self.sqlite if dialect is Dialect.SQLITE else self.postgresql

    def __str__(self) -> str:
        return f"{self.version} {self.name}: {self.summary}"


_FILE_NAME: Final = re.compile(r"(?P<version>\d{4})_(?P<name>[a-z0-9_]+)\.(?P<dialect>[a-z]+)\.sql")


def parse_migrations(files: Iterable[tuple[str, str]]) -> tuple[Migration, ...]:
    """The migrations in ``(file name, text)`` pairs, checked: numbered 1, 2, ... without a gap,
    each with a script for every dialect, and a summary.

    >>> parse_migrations([("0001_a.sqlite.sql", "-- A.\\nX;"), ("0001_a.postgresql.sql", "Y;")])
    (Migration(version=1, name='a', summary='A.', sqlite='-- A.\\nX;', postgresql='Y;'),)
    >>> parse_migrations([("0002_b.sqlite.sql", "-- B.\\n"), ("0002_b.postgresql.sql", "")])
    Traceback (most recent call last):
    ...
    ValueError: migrations must be numbered 1 to 1 without a gap, not [2]
    """
    scripts: dict[tuple[int, str], dict[str, str]] = {}
    for file_name, text in files:
        match = _FILE_NAME.fullmatch(file_name)
        if match is None:
            raise ValueError(f"{file_name!r} is not named NNNN_<name>.<dialect>.sql")
        key = (int(match["version"]), match["name"])
        scripts.setdefault(key, {})[match["dialect"]] = text
    versions = sorted(version for version, _ in scripts)
    if versions != list(range(1, len(versions) + 1)):
        raise ValueError(
            f"migrations must be numbered 1 to {len(versions)} without a gap, not {versions}"
        )
    migrations = []
    for (version, name), by_dialect in sorted(scripts.items()):
        if set(by_dialect) != set(Dialect):
            raise ValueError(f"migration {version} has scripts for {sorted(by_dialect)} only")
        sqlite = by_dialect[Dialect.SQLITE]
        summary = sqlite.partition("\n")[0].removeprefix("--").strip()
        migrations.append(Migration(version, name, summary, sqlite, by_dialect[Dialect.POSTGRESQL]))
    return tuple(migrations)


def _packaged_files() -> list[tuple[str, str]]:
    return [
        (item.name, item.read_text(encoding="utf-8"))
        for item in resources.files(__name__).iterdir()
        if item.name.endswith(".sql")
    ]


#: Every migration this gnau knows, in order.
MIGRATIONS: Final = parse_migrations(_packaged_files())
#: The schema version this gnau reads and writes: its last migration's.
SCHEMA_VERSION: Final = MIGRATIONS[-1].version

#: The table where each migration from version 2 on records when it ran (migration 2 makes it;
#: see :func:`gnau_service.store.schema.record_applied`).
HISTORY_TABLE: Final = "gnau_migrations"


@dataclass(frozen=True)
class AppliedMigration:
    """A row of the migration history."""

    version: int
    summary: str
    applied_at: str
    gnau_version: str
