"""What the store tells an observer about each batch of entries it integrates: for measuring,
never for deciding.

The store knows nothing of how it is measured (no metrics library is imported below the server):
it calls each :data:`BatchObserver` with a :class:`CommittedBatch` after a transaction of this
process that grows the log is durable (a SQLite step batch, or a PostgreSQL sequencer batch), on
the thread that committed it, so an observer must be quick and must not raise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gnau_service.audit.entries import EntryKind


@dataclass(frozen=True)
class CommittedBatch:
    """One durable batch: the entries it appended (``units``) and their kinds, the log's size
    after it, and how long it took.

    ``seconds`` runs from the start of the transaction to the end of COMMIT; ``commit_seconds``
    is the COMMIT alone, which is where the database makes the batch durable (SQLite's fsync of
    its write-ahead log, PostgreSQL's WAL flush).
    """

    units: int
    kinds: tuple[EntryKind, ...]
    size: int
    seconds: float
    commit_seconds: float


BatchObserver = Callable[[CommittedBatch], None]
