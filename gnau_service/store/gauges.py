"""Reads for the service's gauges, made when the gauges are read (a metrics scrape): the log's
size and the time of its newest checkpoint, the rounds still open, and those past their deadline.

They are read from the database, not counted in memory, so they are the same on every replica
that shares it and right from the first scrape after a restart. Each is an index lookup.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gnau_service.store.reader import LogReader
from gnau_service.store.round_rows import IS_OPEN, OPEN_STATES


@dataclass(frozen=True)
class LogGauges:
    """The log's size and the time of the batch that signed its newest checkpoint (the newest
    entry's time: a batch's entries and checkpoint share its time). ``last_time`` is None for
    an empty log."""

    size: int
    last_time: str | None


@dataclass(frozen=True)
class OpenRound:
    """A table's unfinished round: its state and when it last moved."""

    table_id: str
    state: str
    updated_at: str


def log_gauges(reader: LogReader) -> LogGauges:
    size = reader.size()
    if size == 0:
        return LogGauges(0, None)
    rows = reader.query("SELECT data FROM log_entries WHERE idx = ?", (size - 1,))
    time = json.loads(bytes(rows[0][0]))["time"] if rows else None
    return LogGauges(size, None if time is None else str(time))


def open_rounds_by_state(reader: LogReader) -> dict[str, int]:
    """How many rounds are open in each open state (every open state is a key)."""
    counts = dict.fromkeys(OPEN_STATES, 0)
    for state, count in reader.query(
        f"SELECT state, COUNT(*) FROM rounds WHERE {IS_OPEN} GROUP BY state"
    ):
        counts[str(state)] = int(count)
    return counts


def overdue_rounds(reader: LogReader, before: str) -> int:
    """How many open rounds have a deadline earlier than ``before`` (the log's time form): the
    rounds the service should have completed by then (:mod:`gnau_service.rounds.completion`)."""
    rows = reader.query("SELECT COUNT(*) FROM round_deadlines WHERE due_at < ?", (before,))
    return int(rows[0][0])


def longest_open_rounds(reader: LogReader, limit: int) -> list[OpenRound]:
    """The ``limit`` open rounds that have waited longest since they last moved, longest first
    (a table has at most one open round)."""
    rows = reader.query(
        f"SELECT table_id, state, updated_at FROM rounds WHERE {IS_OPEN}"
        " ORDER BY updated_at, table_id LIMIT ?",
        (limit,),
    )
    return [OpenRound(str(table), str(state), str(updated)) for table, state, updated in rows]
