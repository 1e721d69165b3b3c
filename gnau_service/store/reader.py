"""Reads of the log in a store: entries, checkpoints, keys and proofs, on reader connections.

A :class:`LogReader` needs no key and writes nothing; the :class:`~gnau_service.store.store.Store`
is a reader that also writes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Final, NamedTuple

from gnau_service.audit.entries import EntryKind
from gnau_service.audit.log import LogHead
from gnau_service.audit.merkle import Frontier, consistency_proof, inclusion_proof
from gnau_service.store.backend import CURRENT_KEY_SQL, Backend
from gnau_service.store.connections import Connection, Row
from gnau_service.store.errors import StoreError
from gnau_service.store.transaction import Transaction, pending_indices_sql

MAX_READ_ENTRIES: Final = 10_000


class RoundSpan(NamedTuple):
    """The log indices of a round's first and last entries."""

    first: int
    last: int


class LogReader:
    """Reads of the log in a store: entries, checkpoints, keys and proofs. Needs no key."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> LogReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def query(self, text: str, params: Sequence[object] = ()) -> list[Row]:
        """Run a read-only statement (``?`` placeholders) on a reader connection."""
        with self.backend.unavailable_as_store_error(), self.backend.reader() as connection:
            return self.backend.run(connection, text, params)

    def head(self) -> LogHead:
        """The committed head of the log."""
        return LogHead.decode(*self.query("SELECT size, prev_hash, frontier FROM log_head")[0])

    def size(self) -> int:
        return int(self.query("SELECT size FROM log_head")[0][0])

    def entries(self, start: int, end: int) -> list[bytes]:
        """The stored bytes of entries ``start <= index < end`` (at most MAX_READ_ENTRIES)."""
        end = min(end, start + MAX_READ_ENTRIES)
        rows = self.query(
            "SELECT data FROM log_entries WHERE idx >= ? AND idx < ? ORDER BY idx", (start, end)
        )
        return [bytes(row[0]) for row in rows]

    def iter_entries(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """Every entry from ``start`` to ``end`` (default: the current size), page by page."""
        end = self.size() if end is None else end
        while start < end:
            page = self.entries(start, min(end, start + MAX_READ_ENTRIES))
            if not page:
                return
            yield from page
            start += len(page)

    def round_entries(self, round_id: str) -> list[bytes]:
        """Every entry of one round, in log order."""
        rows = self.query(
            "SELECT data FROM log_entries WHERE round_id = ? ORDER BY idx", (round_id,)
        )
        return [bytes(row[0]) for row in rows]

    def checkpoint(self, size: int | None = None) -> str | None:
        """The signed checkpoint text at ``size``, or the latest one; None if there is none."""
        if size is None:
            rows = self.query("SELECT note FROM log_checkpoints ORDER BY size DESC LIMIT 1")
        else:
            rows = self.query("SELECT note FROM log_checkpoints WHERE size = ?", (size,))
        return str(rows[0][0]) if rows else None

    def checkpoints(self) -> list[str]:
        return [str(row[0]) for row in self.query("SELECT note FROM log_checkpoints ORDER BY size")]

    def current_key(self) -> str | None:
        """The verifier key of the key that signs the log's next entries (None: no key yet)."""
        rows = self.query(CURRENT_KEY_SQL)
        return str(rows[0][0]) if rows else None

    def public_keys(self) -> list[str]:
        """Every key that has signed for this log, as C2SP verifier keys, oldest first."""
        rows = self.query("SELECT vkey FROM log_keys ORDER BY since_size, key_id")
        return [str(row[0]) for row in rows]

    def frontier(self, size: int) -> Frontier:
        """The Merkle frontier of the first ``size`` entries (O(log n) reads)."""
        self._check_size(size)
        with self.backend.unavailable_as_store_error(), self.backend.reader() as connection:
            return Frontier.from_reader(NodeReader(self.backend, connection), size)

    def entries_of_kind(self, kind: EntryKind) -> list[bytes]:
        """Every entry of one kind, in log order (for the rare kinds: key rotations, starts)."""
        rows = self.query("SELECT data FROM log_entries WHERE kind = ? ORDER BY idx", (str(kind),))
        return [bytes(row[0]) for row in rows]

    def recent_rounds(self, limit: int) -> list[str]:
        """The ids of the ``limit`` rounds with the latest entries, latest first."""
        rows = self.query(
            "SELECT round_id FROM log_entries WHERE round_id IS NOT NULL"
            " GROUP BY round_id ORDER BY MAX(idx) DESC LIMIT ?",
            (limit,),
        )
        return [str(row[0]) for row in rows]

    def round_span(self, round_id: str) -> RoundSpan | None:
        """The indices of a round's first and last entries, or None if it has none."""
        rows = self.query(
            "SELECT MIN(idx), MAX(idx) FROM log_entries WHERE round_id = ?", (round_id,)
        )
        if not rows or rows[0][0] is None:
            return None
        return RoundSpan(int(rows[0][0]), int(rows[0][1]))

    def checkpoint_size_from(self, size: int) -> int | None:
        """The smallest checkpointed size of at least ``size``."""
        rows = self.query("SELECT MIN(size) FROM log_checkpoints WHERE size >= ?", (size,))
        return None if rows[0][0] is None else int(rows[0][0])

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        """The RFC 6962 inclusion proof of entry ``index`` in the tree of ``size`` entries."""
        self._check_size(size)
        with self.backend.unavailable_as_store_error(), self.backend.reader() as connection:
            return inclusion_proof(NodeReader(self.backend, connection), index, size)

    def consistency_proof(self, size1: int, size2: int) -> list[bytes]:
        """The RFC 6962 consistency proof from the tree of ``size1`` to that of ``size2``."""
        self._check_size(size2)
        with self.backend.unavailable_as_store_error(), self.backend.reader() as connection:
            return consistency_proof(NodeReader(self.backend, connection), size1, size2)

    def pending_indices(self, pending_ids: Sequence[int]) -> dict[int, int]:
        """The log index of each of these pending events that has been integrated."""
        found: dict[int, int] = {}
        for start in range(0, len(pending_ids), 500):
            chunk = tuple(pending_ids[start : start + 500])
            rows = self.query(pending_indices_sql(len(chunk)), chunk)
            found.update((int(row[0]), int(row[1])) for row in rows if row[1] is not None)
        return found

    def _check_size(self, size: int) -> None:
        current = self.size()
        if size > current:
            raise ValueError(f"the log has {current} entries, fewer than the {size} asked for")


class NodeReader:
    """Complete-subtree hashes, read from the log_nodes table."""

    def __init__(self, backend: Backend, connection: Connection) -> None:
        self._backend = backend
        self._connection = connection

    def node(self, level: int, index: int) -> bytes:
        rows = self._backend.run(
            self._connection,
            "SELECT hash FROM log_nodes WHERE level = ? AND idx = ?",
            (level, index),
        )
        if not rows:
            raise StoreError(f"tree node ({level}, {index}) is missing from the store")
        return bytes(rows[0][0])


#: Where rows may be read: on a reader connection (what is committed now), or inside a unit of
#: work (what its transaction sees).
ReadSource = LogReader | Transaction


def read_rows(source: ReadSource, text: str, params: Sequence[object] = ()) -> list[Row]:
    """The rows of a read-only statement (``?`` placeholders), read by ``source``."""
    if isinstance(source, LogReader):
        return source.query(text, params)
    return source.execute(text, params)
