"""Appending to the log: the sequencer's pure half.

A :class:`LogHead` is everything needed to append the next entry: the log size (the next index),
the chain hash of the last entry, and the Merkle :class:`~gnau_service.audit.merkle.Frontier`.
:class:`LogAppender` turns events into signed entry bytes and the tree nodes they complete; a
store persists both in the same transaction as the head, and signs a checkpoint of the new head.

>>> from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
>>> from gnau_service.audit.signing import LogSigner
>>> log = LogAppender(LogSigner.from_private_key("gnau-dealer/doc", Ed25519PrivateKey.generate()))
>>> first = log.append(EntryKind.SERVICE_STARTED, {"version": "0.1.0"}, time="2026-11-29T12:00:00Z")
>>> second = log.append(EntryKind.CONFIG_CHANGED, {}, time="2026-11-29T12:00:01Z")
>>> (first.index, second.index, log.head.size)
(0, 1, 2)
>>> LogHead.decode(*log.head.encode()) == log.head
True
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gnau_service.audit.entries import (
    GENESIS_PREV_HASH,
    MAX_INDEX,
    EntryError,
    EntryKind,
    JsonValue,
    encode_entry,
    is_hash_hex,
    sign_event,
)
from gnau_service.audit.merkle import HASH_SIZE, Frontier, Node, append_leaf, leaf_hash
from gnau_service.audit.note import SignedNote
from gnau_service.audit.signing import LogSigner


@dataclass(frozen=True)
class LogHead:
    """The log after its last entry: ``size`` entries, the last one's chain hash, the frontier."""

    size: int = 0
    prev_hash: str = GENESIS_PREV_HASH
    frontier: Frontier = field(default_factory=Frontier)

    def __post_init__(self) -> None:
        if self.frontier.size != self.size:
            raise ValueError(f"frontier of size {self.frontier.size} for a log of {self.size}")
        # The next entry carries it unchecked (LogAppender.append_event).
        if not is_hash_hex(self.prev_hash):
            raise ValueError(f"prev_hash {self.prev_hash[:80]!r} is not 64 lower-case hex digits")

    @property
    def root(self) -> bytes:
        return self.frontier.root()

    def encode(self) -> tuple[int, str, bytes]:
        """``(size, prev_hash, frontier hashes concatenated)``, as a store keeps the head row."""
        return self.size, self.prev_hash, b"".join(self.frontier.hashes)

    @classmethod
    def decode(cls, size: int, prev_hash: str, frontier: bytes) -> LogHead:
        hashes = tuple(frontier[i : i + HASH_SIZE] for i in range(0, len(frontier), HASH_SIZE))
        return cls(size, prev_hash, Frontier(size, hashes))


@dataclass(frozen=True)
class AppendedEntry:
    """One entry as a store writes it: its index, kind, round, bytes and completed tree nodes."""

    index: int
    kind: EntryKind
    round_id: str | None
    data: bytes
    nodes: tuple[Node, ...]


class LogAppender:
    """Appends signed entries after a given head. Not thread-safe: one per writing transaction."""

    def __init__(self, signer: LogSigner, head: LogHead | None = None) -> None:
        self.signer = signer
        self.head = head if head is not None else LogHead()

    @property
    def head(self) -> LogHead:
        """The log after the last entry appended."""
        return LogHead(self._size, self._prev_hash, Frontier(self._size, tuple(self._frontier)))

    @head.setter
    def head(self, head: LogHead) -> None:
        # Kept as plain values while entries are appended (a LogHead per entry would be a new
        # frontier tuple, checked, each time); the getter builds one when asked.
        self._size = head.size
        self._prev_hash = head.prev_hash
        self._frontier = list(head.frontier.hashes)

    def append(
        self,
        kind: EntryKind,
        payload: dict[str, JsonValue],
        *,
        time: str,
        round_id: str | None = None,
    ) -> AppendedEntry:
        """Append an event, checking every member (:func:`encode_entry`)."""
        data = encode_entry(
            self.signer.signer,
            index=self._size,
            kind=kind,
            time=time,
            payload=payload,
            prev_hash=self._prev_hash,
            round_id=round_id,
        )
        return self._appended(kind, round_id, data)

    def append_event(
        self, kind: EntryKind, payload_json: bytes, *, time: str, round_id: str | None = None
    ) -> AppendedEntry:
        """Append an event that :func:`~gnau_service.audit.entries.event_payload` accepted when
        it was committed (``payload_json`` is what it returned): the sequencer's path, which
        checks nothing per entry. The members the log adds are sound by construction: the index
        is the head's size (refused past :data:`MAX_INDEX`), the chain hash is a SHA-256 in hex,
        the key ID is the signer's."""
        if self._size > MAX_INDEX:
            raise EntryError("the log is full: no index is left", self._size)
        data = sign_event(
            self.signer.signer,
            index=self._size,
            kind=kind,
            time=time,
            payload_json=payload_json,
            prev_hash=self._prev_hash,
            round_id=round_id,
        )
        return self._appended(kind, round_id, data)

    def _appended(self, kind: EntryKind, round_id: str | None, data: bytes) -> AppendedEntry:
        index = self._size
        leaf = leaf_hash(data)
        nodes = append_leaf(self._frontier, index, leaf)
        self._size, self._prev_hash = index + 1, leaf.hex()
        return AppendedEntry(index, kind, round_id, data, nodes)

    def checkpoint(self) -> SignedNote:
        """The signed checkpoint of the current head."""
        return self.signer.sign_checkpoint(self._size, self.head.root)
