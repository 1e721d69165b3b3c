"""The log's tiles (:mod:`gnau_service.audit.tiles`), rendered from the store on request.

Every complete subtree is a ``log_nodes`` row, so a hash tile is one index range scan of one
level, and a bundle one range scan of ``log_entries``. Nothing is stored twice, and any width of
a partial tile can be rendered, so a tile exists for every size the log ever checkpointed.

Two rules decide what may be read:

- **Covered.** A tile is served only if the latest signed checkpoint covers it (its last leaf is
  below that size): nothing is public that no signature commits to.
- **Public bundles.** Hash tiles and checkpoints are public. A bundle is public once every round
  with an entry in it has a public seed (revealed, settled or voided): until then its
  ``ROUND_DEALT`` entries hold hands the round has not shown. A caller that may read every entry
  (an auditor, the operator's own publisher to a private bucket) asks with ``public=False``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Final

from gnau_service.audit.tiles import TILE_HEIGHT, TILE_WIDTH, TileRef, encode_bundle
from gnau_service.store.cosignatures import NO_WITNESSES, cosigned_size
from gnau_service.store.errors import StoreError
from gnau_service.store.reader import LogReader

#: The states of a round whose seed is not public yet (the rest of ``round_rows.OPEN_STATES``
#: is REVEALED, which is public): a bundle with an entry of such a round is not public.
SEED_PRIVATE_STATES: Final = ("SHUFFLED", "DEALT")


class TileNotCovered(LookupError):  # noqa: N818  (a condition, not a fault)
    """No signed checkpoint covers this tile yet (or the log never will: it is beyond it)."""

    def __init__(self, ref: TileRef, signed_size: int) -> None:
        super().__init__(
            f"{ref} needs a tree of {ref.end_leaf} entries; the latest checkpoint is of "
            f"{signed_size}"
        )
        self.signed_size = signed_size


class BundleNotPublic(LookupError):  # noqa: N818
    """A bundle holding an entry of a round whose seed is not public yet."""

    def __init__(self, ref: TileRef) -> None:
        super().__init__(
            f"{ref} holds entries of rounds not yet revealed; it is public once they are"
        )


#: The bytes of full tiles a :class:`FullTiles` cache keeps: hot tiles are answered from memory.
FULL_TILES_CACHE_BYTES: Final = 32 * 1024 * 1024


class FullTiles:
    """Full tiles as served, the least recently used dropped past ``capacity`` bytes.

    A full tile never changes once a checkpoint covers it, and a public bundle stays public (a
    round's seed never becomes private again), so a cached answer is right for ever: only full
    tiles are kept, and a bundle only as the public reads it. Thread-safe: the port reads on
    worker threads.
    """

    def __init__(self, capacity: int = FULL_TILES_CACHE_BYTES) -> None:
        self._capacity = capacity
        self._size = 0
        self._tiles: OrderedDict[TileRef, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def cached(self, ref: TileRef) -> bytes | None:
        """The tile if it is in memory (no I/O: an event loop may ask)."""
        with self._lock:
            found = self._tiles.get(ref)
            if found is not None:
                self._tiles.move_to_end(ref)
            return found

    def read(self, reader: LogReader, ref: TileRef) -> bytes:
        """The tile as the public reads it (:func:`read_tile`), from memory if it was read."""
        found = self.cached(ref)
        if found is not None:
            return found
        data = read_tile(reader, ref, public=True, covered_size=signed_size(reader))
        if ref.full and len(data) <= self._capacity:
            with self._lock:
                if ref not in self._tiles:
                    self._tiles[ref] = data
                    self._size += len(data)
                while self._size > self._capacity:
                    _, dropped = self._tiles.popitem(last=False)
                    self._size -= len(dropped)
        return data


def signed_size(reader: LogReader) -> int:
    """The size of the latest signed checkpoint (0 if there is none)."""
    return cosigned_size(reader, NO_WITNESSES) or 0


def read_tile(reader: LogReader, ref: TileRef, *, public: bool, covered_size: int) -> bytes:
    """The bytes of one tile of a tree the checkpoint of ``covered_size`` covers.

    Raises :class:`TileNotCovered` beyond ``covered_size``, and :class:`BundleNotPublic` for a
    bundle that is not public yet when ``public``.
    """
    if ref.end_leaf > covered_size:
        raise TileNotCovered(ref, covered_size)
    first = ref.index * TILE_WIDTH
    if ref.level is None:
        if public and not bundle_is_public(reader, ref):
            raise BundleNotPublic(ref)
        rows = reader.query(
            "SELECT data FROM log_entries WHERE idx >= ? AND idx < ? ORDER BY idx",
            (first, first + ref.width),
        )
        data = encode_bundle(bytes(row[0]) for row in rows)
    else:
        rows = reader.query(
            "SELECT hash FROM log_nodes WHERE level = ? AND idx >= ? AND idx < ? ORDER BY idx",
            (TILE_HEIGHT * ref.level, first, first + ref.width),
        )
        data = b"".join(bytes(row[0]) for row in rows)
    if len(rows) != ref.width:
        raise StoreError(f"{ref}: the store holds {len(rows)} of its {ref.width} rows")
    return data


def bundle_is_public(reader: LogReader, ref: TileRef) -> bool:
    """Whether every round with an entry in this bundle has a public seed."""
    first = ref.first_leaf
    rows = reader.query(
        "SELECT 1 FROM rounds WHERE state IN (?, ?) AND round_id IN ("
        "SELECT round_id FROM log_entries WHERE idx >= ? AND idx < ? AND round_id IS NOT NULL"
        ") LIMIT 1",
        (*SEED_PRIVATE_STATES, first, first + ref.width),
    )
    return not rows
