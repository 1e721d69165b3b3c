"""SQLite's step coordination lets its connection go only when nothing runs on it: a drain
cancelled with its event loop leaves a statement in flight on the commit thread, and closing the
connection under it would crash the process."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import cast

import pytest

from gnau_service.store.coordination import WritingStore
from gnau_service.store.in_step import LoopSteps
from gnau_service.store.sqlite import SqliteBackend


def test_the_connection_is_closed_after_the_statement_in_flight(tmp_path: Path) -> None:
    backend = SqliteBackend(tmp_path / "gnau.db")
    loop = asyncio.new_event_loop()
    try:
        steps = LoopSteps(backend, cast(WritingStore, None), lambda connection: True, loop)
        connection = backend.connect()
        steps._connection = connection
        running, go_on = threading.Event(), threading.Event()

        def statement_in_flight() -> int:
            running.set()
            go_on.wait(10)
            return int(connection.execute("SELECT 1").fetchone()[0])

        in_flight = steps._thread.submit(statement_in_flight)
        assert running.wait(10)
        steps.close()  # as the store's close does while the loop's drain is gone
        assert connection.execute("SELECT 2").fetchone() == (2,)  # still open under the statement
        go_on.set()
        assert in_flight.result(10) == 1
        steps._thread.shutdown(wait=True)
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            connection.execute("SELECT 3")
    finally:
        loop.close()
