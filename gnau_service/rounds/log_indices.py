"""How a round record names its events in the log: by log index, or by pending id before that.

A step commits before its event has a log index, so a round record written by a step names
that event by its pending id, as the negative number ``-id`` in ``log_indices``
(:func:`pending_ids`). Every answer, and every read of a round, shows log indices only: an
answer once the step's events are integrated (:func:`with_indices`), a read with the events
the sequencer has not integrated yet left out (:func:`published_indices`; their step's caller
has not been answered either). A later step writes the indices it found integrated meanwhile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from gnau_service.rounds.record import RoundRecord
from gnau_service.store import PendingEntry


def pending_ids(record: RoundRecord) -> list[int]:
    """The pending ids of the record's events that had no log index when it was written."""
    return [-index for index in record.log_indices if index < 0]


def named_indices(log_indices: tuple[int, ...], entries: Sequence[PendingEntry]) -> tuple[int, ...]:
    """``log_indices`` with each pending event among ``entries`` that has an index named by it.

    >>> named_indices((4, -17, -18), [PendingEntry(17, index=9), PendingEntry(18)])
    (4, 9, -18)
    """
    known = {entry.id: entry.index for entry in entries if entry.index >= 0}
    return tuple(known.get(-index, index) if index < 0 else index for index in log_indices)


def with_indices(record: RoundRecord, entries: Sequence[PendingEntry]) -> RoundRecord:
    """``record`` with each event among ``entries`` that has an index named by it."""
    if not entries or not pending_ids(record):
        return record
    return replace(record, log_indices=named_indices(record.log_indices, entries))


def published_indices(log_indices: tuple[int, ...], known: Mapping[int, int]) -> tuple[int, ...]:
    """``log_indices`` as a read shows them, given the log indices ``known`` by pending id:
    each pending event named by its index, or left out if it has none yet.

    >>> published_indices((4, -17, -18), {17: 9})
    (4, 9)
    """
    return tuple(
        known[-index] if index < 0 else index
        for index in log_indices
        if index >= 0 or -index in known
    )
