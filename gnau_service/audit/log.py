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

from gnau_service.audit.entries import GENESIS_PREV_HASH, EntryKind, JsonValue, encode_entry
from gnau_service.audit.merkle import HASH_SIZE, Frontier, Node, leaf_hash
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

    def append(
        self,
        kind: EntryKind,
        payload: dict[str, JsonValue],
        *,
        time: str,
        round_id: str | None = None,
    ) -> AppendedEntry:
        head = self.head
        data = encode_entry(
            self.signer.signer,
            index=head.size,
            kind=kind,
            time=time,
            payload=payload,
            prev_hash=head.prev_hash,
            round_id=round_id,
        )
        leaf = leaf_hash(data)
        frontier, nodes = head.frontier.append(leaf)
        self.head = LogHead(head.size + 1, leaf.hex(), frontier)
        return AppendedEntry(head.size, kind, round_id, data, nodes)

    def checkpoint(self) -> SignedNote:
        """The signed checkpoint of the current head."""
        return self.signer.sign_checkpoint(self.head.size, self.head.root)
