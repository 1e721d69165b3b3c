"""What the store tells an observer about each batch it commits: for measuring, never for
deciding.

The store knows nothing of how it is measured (no metrics library is imported below the server):
it calls each :data:`BatchObserver` with a :class:`CommittedBatch` after the batch is durable, on
the thread that committed it (the writer thread, or an event loop), so an observer must be quick
and must not raise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gnau_service.audit.entries import EntryKind


@dataclass(frozen=True)
class CommittedBatch:
    """One durable batch: its units of work, the kinds of the entries it appended, the log's
    size after it, and how long it took.

    ``seconds`` runs from taking the write lock to the end of COMMIT; ``commit_seconds`` is the
    COMMIT alone, which is where the database makes the batch durable (SQLite's fsync of its
    write-ahead log, PostgreSQL's WAL flush). ``careful`` says the batch was run a second time,
    each unit in its own savepoint, because a unit failed after writing.
    """

    units: int
    kinds: tuple[EntryKind, ...]
    size: int
    seconds: float
    commit_seconds: float
    careful: bool


BatchObserver = Callable[[CommittedBatch], None]
