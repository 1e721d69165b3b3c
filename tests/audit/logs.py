"""Logs for tests: an in-memory log that can be exported, and rounds played into any log.

The round player writes exactly what the service writes (the payload helpers of
``gnau_service.audit.round_events``), so a test can log honest rounds, then a dishonest one.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.bundle import BUNDLE_FORMAT, write_bundle
from gnau_service.audit.bundle_report import Failure
from gnau_service.audit.bundle_verification import verify_bundle
from gnau_service.audit.entries import EntryKind, JsonValue
from gnau_service.audit.log import LogAppender, LogHead
from gnau_service.audit.merkle import Frontier, MemoryTree, leaf_hash
from gnau_service.audit.note import Verifier
from gnau_service.audit.round_events import (
    VoidReason,
    committed_payload,
    dealt_payload,
    revealed_payload,
    settle_round,
    settled_payload,
    voided_payload,
)
from gnau_service.audit.signing import LogSigner
from gnau_service.fairness.round import CommittedRound
from gnau_service.fairness.transcript import LockedSeat
from gnau_service.rules.house_rules import HouseRules
from tests.references import ref

ORIGIN = "gnau-dealer/test"
Append = Callable[[EntryKind, dict[str, JsonValue], str | None], Any]


def new_signer(origin: str = ORIGIN) -> LogSigner:
    return LogSigner.from_private_key(origin, Ed25519PrivateKey.generate())


class MemoryLog:
    """A log kept in memory, signed by ``signer``: what a store does, minus the database."""

    def __init__(self, signer: LogSigner) -> None:
        self.signer = signer
        self.appender = LogAppender(signer)
        self.entries: list[bytes] = []
        self.notes: list[str] = []
        self.tree = MemoryTree()
        self.time = "2026-11-29T12:00:00Z"

    def append(
        self, kind: EntryKind, payload: dict[str, JsonValue], round_id: str | None = None
    ) -> bytes:
        entry = self.appender.append(kind, payload, time=self.time, round_id=round_id)
        self.entries.append(entry.data)
        self.tree.append(leaf_hash(entry.data))
        return entry.data

    def append_signed_bytes(self, kind: str, payload_text: str) -> bytes:
        """Append an entry whose payload is exactly ``payload_text``, signed by the log key by
        hand: what an operator holding the key could write past encode_entry's refusals."""
        head = self.appender.head
        members = (
            f'"index":{head.size},"key_id":"{self.signer.key_id.hex()}","kind":"{kind}",'
            f'"payload":{payload_text},"prev_hash":"{head.prev_hash}","round_id":null'
        )
        time = f'"time":"{self.time}"'
        signature = self.signer.signer.sign(("{" + members + "," + time + "}").encode()).hex()
        data = ("{" + members + f',"signature":"{signature}",' + time + "}").encode()
        self.entries.append(data)
        self.tree.append(leaf_hash(data))
        frontier, _ = head.frontier.append(leaf_hash(data))
        self.appender.head = LogHead(head.size + 1, leaf_hash(data).hex(), frontier)
        return data

    def checkpoint(self) -> str:
        note = str(self.appender.checkpoint())
        self.notes.append(note)
        return note

    # -- the LogSource protocol, for write_bundle --
    def iter_entries(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        yield from self.entries[start:end]

    def checkpoints(self) -> list[str]:
        return list(self.notes)

    def public_keys(self) -> list[str]:
        return [self.signer.vkey]

    def frontier(self, size: int) -> Frontier:
        return Frontier.from_reader(self.tree, size)

    def bundle_lines(self, first_index: int = 0) -> list[str]:
        out = io.StringIO()
        write_bundle(self, out, first_index=first_index, end=len(self.entries))
        return out.getvalue().splitlines(keepends=True)


def chain_failure(
    entries: Sequence[bytes], key: Verifier, *, earlier: Sequence[bytes] = ()
) -> Failure | None:
    """The first failure the bundle's verifier finds in ``entries``, the log's from index
    ``len(earlier)``: an entry that does not decode or verify by ``key``, that stands where
    another index belongs, or whose ``prev_hash`` is not the hash of the entry before; or a
    round whose events do not replay. The bundle holds no checkpoint: that it is unanchored is
    no failure."""
    frontier = Frontier()
    for data in earlier:
        frontier, _ = frontier.append(leaf_hash(data))
    header = {
        "format": BUNDLE_FORMAT,
        "origin": key.name,
        "public_keys": [key.vkey],
        "first_index": frontier.size,
        "size": frontier.size + len(entries),
        "left_frontier": [node.hex() for node in frontier.hashes],
    }
    lines = [json.dumps(header), *(json.dumps({"entry": data.decode()}) for data in entries)]
    report = verify_bundle(
        (line.encode() for line in lines), pinned_keys=[key], allow_unanchored=True
    )
    return report.failure


def play_round(
    append: Append,
    round_id: str,
    *,
    table_id: str = "table-1",
    seats: int = 3,
    rules: HouseRules | None = None,
    void_after: EntryKind | None = None,
) -> CommittedRound:
    """Log one honest round through ``append``: committed, dealt, revealed, settled; or voided
    right after ``void_after`` (a void after ROUND_DEALT comes after its ROUND_REVEALED)."""
    committed = CommittedRound.with_fresh_seed(round_id, rules or HouseRules())
    append(EntryKind.ROUND_COMMITTED, committed_payload(committed, table_id), round_id)
    if void_after is EntryKind.ROUND_COMMITTED:
        append(
            EntryKind.ROUND_VOIDED,
            voided_payload(committed, VoidReason.TABLE_CLOSED, "table closed", "SHUFFLED"),
            round_id,
        )
        return committed
    locked = committed.lock(
        [
            LockedSeat(n, ref(f"player-{n}"), 10 * n, client_seed=f"seed {n}".encode())
            for n in range(1, seats + 1)
        ]
    )
    dealt = locked.deal()
    append(EntryKind.ROUND_DEALT, dealt_payload(dealt), round_id)
    append(EntryKind.ROUND_REVEALED, revealed_payload(dealt), round_id)
    if void_after is EntryKind.ROUND_DEALT:
        # A void after the deal reveals the round first, and pays each seat the better of its
        # result and a refund.
        payload = voided_payload(
            committed,
            VoidReason.GAME_MALFUNCTION,
            "dealer error",
            "DEALT",
            settle_round(dealt.reveal()),
        )
        append(EntryKind.ROUND_VOIDED, payload, round_id)
        return committed
    append(EntryKind.ROUND_SETTLED, settled_payload(settle_round(dealt.reveal())), round_id)
    return committed


def honest_log(rounds: int = 4, signer: LogSigner | None = None) -> MemoryLog:
    """A log with a start entry, ``rounds`` settled rounds and one voided, checkpointed often."""
    log = MemoryLog(signer or new_signer())
    log.append(EntryKind.SERVICE_STARTED, {"version": "test"})
    log.checkpoint()
    for number in range(rounds):
        play_round(log.append, f"round-{number}")
        log.checkpoint()
    play_round(log.append, "round-void", void_after=EntryKind.ROUND_DEALT)
    log.checkpoint()
    return log
