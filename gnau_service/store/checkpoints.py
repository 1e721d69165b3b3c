"""Signed checkpoints by size range: what an auditor without the database needs to carry every
checkpoint of a range into a bundle, as the database export does.

The store signs one checkpoint for each batch it commits, so sizes are sparse and increasing;
``log_checkpoints.size`` is the primary key, so a range is an index scan. Each note comes with
the witness cosignatures the log holds for it (:mod:`.cosignatures`).
"""

from __future__ import annotations

from gnau_service.store.cosignatures import CheckpointNote, with_cosignatures_in
from gnau_service.store.reader import LogReader


def checkpoints_in(
    reader: LogReader, first_size: int, last_size: int | None, limit: int
) -> list[CheckpointNote]:
    """The signed checkpoints with ``first_size <= size <= last_size`` (no
    upper bound if ``last_size`` is None), in increasing size, at most ``limit`` of them; each
    note with its cosignatures."""
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
    notes = [CheckpointNote(int(row[0]), str(row[1])) for row in rows]
    cosigned = with_cosignatures_in(reader, notes)
    return [CheckpointNote(size, note) for (size, _), note in zip(notes, cosigned, strict=True)]
