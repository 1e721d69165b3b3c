"""Storage: one interface (:class:`Store`) over SQLite (embedded default) or PostgreSQL.

A round step travels down these modules, and its answer back up:

- :mod:`~gnau_service.store.store`: the :class:`Store`; ``run_async`` takes a unit of work;
- :mod:`~gnau_service.store.coordination`: how each backend gets steps' events into the log;
- :mod:`~gnau_service.store.steps`: the step transaction (units in savepoints, group commit);
- :mod:`~gnau_service.store.transaction`: what a unit may do (SQL, appending events);
- :mod:`~gnau_service.store.in_step` (SQLite) or :mod:`~gnau_service.store.step_writers` and
  :mod:`~gnau_service.store.sequencer` (PostgreSQL): the two coordinations;
- :mod:`~gnau_service.store.waiting`: the callers waiting for integration, and their replies;
- :mod:`~gnau_service.store.backend`, :mod:`~gnau_service.store.sqlite`,
  :mod:`~gnau_service.store.postgres`: the databases (connections, dialect, errors);
- :mod:`~gnau_service.store.connections`: a connection as the shared code uses it, either driver's;
- :mod:`~gnau_service.store.reader`: reads of the log (:class:`LogReader`);
- :mod:`~gnau_service.store.schema`, :mod:`~gnau_service.store.migrations`: the schema.
"""

from __future__ import annotations

from pathlib import Path

from gnau_service.audit.signing import LogSigner
from gnau_service.store.backend import Backend
from gnau_service.store.errors import (
    DatabaseUnreachable,
    KeyNotCurrent,
    LogStalled,
    StoreError,
    StoreUnavailable,
)
from gnau_service.store.lease import DEFAULT_LEASE_SECONDS
from gnau_service.store.postgres import PostgresBackend
from gnau_service.store.reader import LogReader
from gnau_service.store.sqlite import SqliteBackend
from gnau_service.store.store import KeySource, Store
from gnau_service.store.tail import LogTail
from gnau_service.store.transaction import PreparedEvent, Transaction, prepare_event
from gnau_service.store.urls import redacted_url
from gnau_service.store.waiting import PendingEntry


class DatabaseUrlError(ValueError):
    """A database URL this service cannot use."""


SQLITE_PREFIX = "sqlite:///"


def sqlite_path(url: str) -> Path | None:
    """The database file a ``sqlite:///`` URL names (relative after three slashes, absolute
    after four); None for any other URL.

    >>> sqlite_path("sqlite:///gnau-data/gnau.db"), sqlite_path("sqlite:////var/lib/gnau.db")
    (PosixPath('gnau-data/gnau.db'), PosixPath('/var/lib/gnau.db'))
    >>> sqlite_path("postgresql://db/gnau") is None
    True
    """
    return Path(url.removeprefix(SQLITE_PREFIX)) if url.startswith(SQLITE_PREFIX) else None


def open_backend(url: str, *, lease_seconds: float = DEFAULT_LEASE_SECONDS) -> Backend:
    """The backend for ``sqlite:///relative/path``, ``sqlite:////absolute/path`` or
    ``postgresql://user@host:port/database``."""
    path = sqlite_path(url)
    if path is not None:
        if url == SQLITE_PREFIX:
            raise DatabaseUrlError(
                f"{redacted_url(url)!r} names no file: use sqlite:///path/to/gnau.db"
            )
        return SqliteBackend(path)
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresBackend(url, lease_seconds=lease_seconds)
    raise DatabaseUrlError(
        f"unsupported database URL {redacted_url(url)!r}: use sqlite:///path or postgresql://..."
    )


def open_store(
    url: str,
    signer: LogSigner,
    key_source: KeySource | None = None,
    *,
    migrate: bool = False,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
) -> Store:
    """Open the store at ``url``, signing with ``signer`` (and with what ``key_source`` finds
    when the log's key has been rotated elsewhere): a new, empty database gets the schema; an
    older one is migrated only if ``migrate`` (see :mod:`.schema`)."""
    backend = open_backend(url, lease_seconds=lease_seconds)
    return Store(backend, signer, key_source=key_source, migrate=migrate)


def open_reader(url: str) -> LogReader:
    """Open an existing store at ``url`` for reading only."""
    path = sqlite_path(url)
    if path is not None and not path.is_file():
        raise DatabaseUrlError(f"there is no database at {redacted_url(url)!r}")
    return LogReader(open_backend(url))


DEFAULT_DATABASE_URL = "sqlite:///gnau-data/gnau.db"

__all__ = [
    "DEFAULT_DATABASE_URL",
    "Backend",
    "DatabaseUnreachable",
    "DatabaseUrlError",
    "KeyNotCurrent",
    "KeySource",
    "LogReader",
    "LogStalled",
    "LogTail",
    "PendingEntry",
    "PreparedEvent",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "Transaction",
    "open_reader",
    "open_store",
    "prepare_event",
    "redacted_url",
    "sqlite_path",
]
