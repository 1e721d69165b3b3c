"""A database connection as the store's shared code uses it, whichever driver opened it.

They are Protocols because there are two drivers behind one interface: SQLite's
``sqlite3.Connection`` and psycopg's ``psycopg.Connection`` share no base class, yet the store's
statements, step transactions, sequencer protocol and schema call the same little of both (run a
statement, read its rows, close). Either driver's connection is a :class:`Connection` as it is,
with no wrapper. What only one driver has (psycopg's COPY and LISTEN, SQLite's ``executemany``)
stays in that backend's module, on its driver's own class.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

#: A row as the drivers return it: each value in the Python type its column reads as.
Row = tuple[Any, ...]


class Cursor(Protocol):
    """The rows of a statement just run."""

    def fetchone(self) -> Row | None: ...

    def fetchall(self) -> list[Row]: ...


class Connection(Protocol):
    """A connection to the store's database (autocommit: transactions are begun by statement)."""

    def execute(self, query: str, params: Sequence[object] = ..., /) -> Cursor:
        """Run one statement, its placeholders in the driver's style."""
        ...

    def close(self) -> None: ...


class ListeningConnection(Connection, Protocol):
    """A connection whose notices can be waited for with ``select()``: PostgreSQL's, on which
    the sequencer LISTENs."""

    def fileno(self) -> int: ...
