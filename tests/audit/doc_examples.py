"""The example log of docs/audit.md, rebuilt from today's code: a service start and one round
(committed, dealt, revealed, settled), signed with the page's example key, and its checkpoint.
The round is what the service shuffled before fairness v3 (docs/fairness.md, *Fairness
versions*): a fairness v2 round, which differs from today's v3 rounds only in its tags and in
hashing its stakes (so the page's bytes, and the example receipts built on them, stay as they
were, and show that a v2 round still verifies); its rule set's return to player, its table's
catalogue version and its currency disclosed in its ``ROUND_COMMITTED`` entry, each entry naming
its actor and, for the round's entries, its operator, and the deal the software that dealt it.

Every payload comes from the builders the service itself uses (``gnau_service.audit.round_events``,
``software_identity``), so the page shows what the service writes; only the software hash is a
placeholder, since the real one changes with every commit. ``tests/audit/test_audit_docs.py``
fails when the page and this drift apart; run ``python -m tests.audit.doc_examples`` to print
the blocks to paste.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.actors import SERVICE
from gnau_service.audit.entries import EntryKind, JsonValue
from gnau_service.audit.log import LogAppender
from gnau_service.audit.merkle import MemoryTree, leaf_hash
from gnau_service.audit.operators import OPERATOR_FIELD
from gnau_service.audit.receipts import Receipt, ReceiptEntry
from gnau_service.audit.round_events import (
    SOFTWARE_FIELD,
    committed_payload,
    dealt_payload,
    played_at,
    revealed_payload,
    settle_round,
    settled_payload,
    with_actor,
)
from gnau_service.audit.signing import LogSigner
from gnau_service.audit.software import software_identity
from gnau_service.fairness.encoding import FairnessVersion
from gnau_service.fairness.player_refs import player_ref
from gnau_service.fairness.round import CommittedRound
from gnau_service.fairness.transcript import LockedSeat
from gnau_service.rules.currency import Currency
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.return_to_player import ReturnToPlayer

ORIGIN = "gnau-dealer/example"
#: The page's key: private bytes 00 01 02 ... 1f. Never use it.
PRIVATE_KEY = bytes(range(32))
#: Stands for the SHA-256 of the installed package's source in the example.
SOFTWARE_SHA256 = "ab" * 32
ROUND_ID = "r-5e1f0c9a2b7d4e3f8a6b0c1d"
#: The platform's token, by its name: the actor of the example round's steps.
PLATFORM = "token:table-service"
#: The operator whose table the example round is dealt at.
OPERATOR = "casino-a"
TIMES = [
    "2025-03-01T12:00:00.000000Z",
    "2025-03-01T12:00:01.250000Z",
    "2025-03-01T12:00:09.500000Z",
    "2025-03-01T12:00:15.000000Z",
    "2025-03-01T12:00:15.125000Z",
]


def signer() -> LogSigner:
    return LogSigner.from_private_key(ORIGIN, Ed25519PrivateKey.from_private_bytes(PRIVATE_KEY))


@dataclass(frozen=True)
class ExampleLog:
    entries: list[bytes]
    checkpoint: str
    #: The example round, revealed: the ``round`` of its receipt.
    revealed: dict[str, object]


def by_the_platform(payload: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """A round entry's payload as a step of the example operator's platform writes it."""
    return {**with_actor(payload, PLATFORM), OPERATOR_FIELD: OPERATOR}


def example_log() -> ExampleLog:
    """The example log's entries (their stored bytes), its signed checkpoint, its round."""
    log_signer = signer()
    log = LogAppender(log_signer)
    started: dict[str, JsonValue] = {
        # As gnau_service.server.process.app writes it at start-up.
        "software": {**software_identity(), "sha256": SOFTWARE_SHA256},
        "origin": ORIGIN,
        "key": log_signer.vkey,
        "actor": SERVICE,
    }
    committed = CommittedRound(
        ROUND_ID, HouseRules(), server_seed=bytes(range(32, 64)), version=FairnessVersion.V2
    )
    # The service keeps a random key per player; the page's are fixed so that its bytes are.
    alice, bob = (hashlib.sha256(f"example key of {name}".encode()).digest() for name in "ab")
    seats = [
        LockedSeat(1, player_ref(alice, ROUND_ID, 1), 100, client_seed=b"alice"),
        LockedSeat(2, player_ref(bob, ROUND_ID, 2), 250),
    ]
    dealt = committed.lock(seats).deal()
    # As the Deal writes it: with the software that dealt the round.
    software: dict[str, JsonValue] = {**software_identity(), "sha256": SOFTWARE_SHA256}
    events: list[tuple[EntryKind, dict[str, JsonValue], str | None]] = [
        (EntryKind.SERVICE_STARTED, started, None),
        (
            EntryKind.ROUND_COMMITTED,
            # As the Shuffle writes it: with the rule set's figures (gnau_service.rounds.dealer).
            # and with the catalogue version of its table and the table's currency.
            by_the_platform(
                committed_payload(committed, "table-1", ReturnToPlayer.of_rules(committed.rules))
                | played_at(1, Currency.of("EUR"))
            ),
            ROUND_ID,
        ),
        (
            EntryKind.ROUND_DEALT,
            by_the_platform({**dealt_payload(dealt), SOFTWARE_FIELD: software}),
            ROUND_ID,
        ),
        (EntryKind.ROUND_REVEALED, by_the_platform(revealed_payload(dealt)), ROUND_ID),
        (
            EntryKind.ROUND_SETTLED,
            by_the_platform(settled_payload(settle_round(dealt.reveal()))),
            ROUND_ID,
        ),
    ]
    entries = [
        log.append(kind, payload, time=time, round_id=round_id).data
        for (kind, payload, round_id), time in zip(events, TIMES, strict=True)
    ]
    return ExampleLog(entries, str(log.checkpoint()), dealt.reveal().to_json())


def blocks() -> dict[str, str]:
    """The page's example blocks, by name, as they must read."""
    log = example_log()
    return {
        "vkey": signer().vkey + "\n",
        "entries": "".join(data.decode("utf-8") + "\n" for data in log.entries),
        "checkpoint": log.checkpoint,
    }


def example_receipt() -> str:
    """docs/schemas/examples/receipt.json: the receipt of the example round, against the
    example log's checkpoint, as the service writes one."""
    log = example_log()
    tree = MemoryTree()
    for data in log.entries:
        tree.append(leaf_hash(data))
    size = len(log.entries)
    receipt = Receipt(
        round_id=ROUND_ID,
        round=log.revealed,
        entries=tuple(
            ReceiptEntry(index, data, tuple(tree.inclusion_proof(index, size)))
            for index, data in enumerate(log.entries)
            if index > 0
        ),
        checkpoint=log.checkpoint,
    )
    return receipt.to_text()


if __name__ == "__main__":
    for name, text in blocks().items():
        print(f"<!-- example: {name} -->\n{text}")
    print(example_receipt())
