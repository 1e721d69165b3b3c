"""Signed checkpoints by size range: what an auditor without the database needs to carry every
checkpoint of a range into a bundle, as the database export does.

The store signs one checkpoint for each batch it commits, so sizes are sparse and increasing;
``log_checkpoints.size`` is the primary key, so a range is an index scan.
"""

from __future__ import annotations

from gnau_service.store.base import LogReader


def checkpoints_in(
    reader: LogReader, first_size: int, last_size: int | None, limit: int
) -> list[tuple[int, str]]:
    """``(size, note)`` of the signed checkpoints with ``first_size <= size <= last_size``
    (no upper bound if ``last_size`` is None), in increasing size, at most ``limit`` of them."""
    if last_size is None:
        rows = reader.query(
            "SELECT size, note FROM log_checkpoints WHERE size >= ? ORDER BY size LIMIT ?",
            (first_size, limit),
        )
    else:
        rows = reader.query(
            "SELECT size, note FROM log_checkpoints WHERE size >= ? AND size <= ?"
            " ORDER BY size LIMIT ?",
            (first_size, last_size, limit),
        )
    return [(int(row[0]), str(row[1])) for row in rows]
