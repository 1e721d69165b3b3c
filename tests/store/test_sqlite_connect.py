"""Opening a SQLite database: several connections opening one new file at once all get it in
WAL mode, none is refused (SQLite refuses a concurrent switch to WAL at once, without waiting)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from gnau_service.store.errors import StoreError
from gnau_service.store.sqlite import BUSY_SECONDS, SqliteBackend

#: New files opened by racing connections: on a backend that does not wait for the switch,
#: about 1 in 30 races fails here, so 100 of them fail almost surely.
RACES = 100
CONNECTIONS = 6


def race_to_open(path: Path) -> tuple[list[str], list[BaseException]]:
    backend = SqliteBackend(path)
    together = threading.Barrier(CONNECTIONS)
    modes: list[str] = []
    failures: list[BaseException] = []

    def open_one() -> None:
        together.wait()
        try:
            connection = backend.connect()
            try:
                modes.append(connection.execute("PRAGMA journal_mode").fetchone()[0])
            finally:
                connection.close()
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=open_one) for _ in range(CONNECTIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return modes, failures


def test_connections_opening_a_new_file_together_all_get_it_in_wal_mode(tmp_path: Path) -> None:
    for race in range(RACES):
        modes, failures = race_to_open(tmp_path / f"race-{race}.db")
        assert failures == []
        assert modes == ["wal"] * CONNECTIONS


def test_a_file_that_is_not_a_database_is_refused_at_once(tmp_path: Path) -> None:
    # Only a busy file is waited for: any other error is the caller's news at once.
    path = tmp_path / "not-a-database.db"
    path.write_bytes(b"this is not a SQLite file" * 100)
    started = time.monotonic()
    with pytest.raises(StoreError, match="cannot open the database: file is not a database"):
        SqliteBackend(path).connect()
    assert time.monotonic() - started < BUSY_SECONDS
