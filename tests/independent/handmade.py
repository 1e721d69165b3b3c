"""Logs written out by hand, for the tests of voids and actors (issue 37): a test lists each
entry's kind, round and payload; this chains and signs them with a fixed test key, as
docs/audit.md says a log is written, and hands back the bundle ``gnau audit export`` would
write and each round's receipt (docs/receipts.md). It decides nothing about what the entries
mean: that is for the verifiers, and the tests write their verdicts out.

The round voided after its deal is the docs' fairness vector
``fairness-round-v2-1deck-3seats-beacon`` (seats 1 and 2 win 100 and 250, seat 4 loses 75); the
round voided before its deal is ``fairness-round-1deck-2seats`` (fairness v1), committed only.
``VOID_RESULT`` is the ``ROUND_SETTLED`` payload Settle would have logged for the first, as
``gnau settle`` writes it; the tests hold its deltas to the ones written above.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.independent.entries import GENESIS
from tests.independent.forge import sign_checkpoint, vkey_of, write_bundle
from tests.independent.merkle import leaf_hash, node_hash

HERE = Path(__file__).parent
VECTORS = HERE.parents[1] / "docs" / "vectors"
ORIGIN = "gnau-dealer/handmade"
#: A fixed key, so that every run signs the same bytes.
KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
VKEY = vkey_of(ORIGIN, KEY)

Payload = dict[str, Any]
#: (kind, round_id or None, payload), in log order.
Listed = tuple[str, str | None, Payload]


def vector(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((VECTORS / f"{name}.json").read_text("utf-8"))
    revealed_round: dict[str, Any] = loaded["revealed_round"]
    return revealed_round


DEALT_ROUND = vector("fairness-round-v2-1deck-3seats-beacon")
SHUFFLED_ROUND = vector("fairness-round-1deck-2seats")
VOID_RESULT: Payload = json.loads((HERE / "void_result.json").read_text("utf-8"))
SOFTWARE = {"name": "gnau-service", "version": "0.1.0", "sha256": "5e" * 32}


def committed(r: dict[str, Any], table: str) -> Payload:
    payload = {"table_id": table, "house_rules": r["house_rules"], "commitment": r["commitment"]}
    return payload | ({"fairness_version": 2} if r["format"].endswith("/v2") else {})


def dealt(r: dict[str, Any]) -> Payload:
    return {k: r[k] for k in ("seats", "beacon", "transcript_hash", "hands", "dealer_hand")}


def revealed(r: dict[str, Any]) -> Payload:
    return {"server_seed": r["server_seed"], "deck": r["deck"]}


@dataclass
class Log:
    entries: list[bytes]
    bundle: bytes
    checkpoint: str

    def receipt(self, round_id: str, round_document: dict[str, Any] | None) -> str:
        """The round's receipt against the log's one checkpoint: its entries with their
        inclusion proofs, and ``round_document`` as its revealed round."""
        leaves = [leaf_hash(entry) for entry in self.entries]
        items = []
        for index, entry in enumerate(self.entries):
            if json.loads(entry)["round_id"] == round_id:
                proof = [h.hex() for h in inclusion_proof(index, leaves)]
                items.append({"index": index, "entry": entry.decode(), "inclusion_proof": proof})
        receipt = {
            "format": "gnau-dealer/round-receipt/v1",
            "round_id": round_id,
            "round": copy.deepcopy(round_document),
            "entries": items,
            "checkpoint": self.checkpoint,
            "key_rotations": [],
            "consistency": None,
        }
        return json.dumps(receipt, ensure_ascii=False)


def write_log(listed: list[Listed]) -> Log:
    """The entries chained and signed, each a second after the one before, and a checkpoint
    of the whole log."""
    key_id = VKEY.split("+")[1]
    previous, entries = GENESIS, []
    for index, (kind, round_id, payload) in enumerate(listed):
        unsigned: dict[str, Any] = {
            "index": index,
            "key_id": key_id,
            "kind": kind,
            "payload": payload,
            "prev_hash": previous,
            "round_id": round_id,
            "time": f"2026-12-01T10:00:{index:02d}.000000Z",
        }
        signature = KEY.sign(rfc8785.dumps(unsigned)).hex()
        entry = rfc8785.dumps({**unsigned, "signature": signature})
        entries.append(entry)
        previous = leaf_hash(entry).hex()
    leaves = [leaf_hash(entry) for entry in entries]
    checkpoint = sign_checkpoint(ORIGIN, len(entries), tree_hash(leaves), KEY)
    header = {
        "format": "gnau-dealer/audit-bundle/v1",
        "origin": ORIGIN,
        "public_keys": [VKEY],
        "first_index": 0,
        "size": len(entries),
        "left_frontier": [],
    }
    return Log(entries, write_bundle(header, [checkpoint], entries), checkpoint)


def _split(size: int) -> int:
    """The largest power of two below ``size`` (RFC 9162 2.1.1)."""
    return 1 << ((size - 1).bit_length() - 1)


def tree_hash(leaves: list[bytes]) -> bytes:
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return node_hash(tree_hash(leaves[:k]), tree_hash(leaves[k:]))


def inclusion_proof(index: int, leaves: list[bytes]) -> list[bytes]:
    """RFC 9162 2.1.3.1, PATH(m, D[n])."""
    if len(leaves) == 1:
        return []
    k = _split(len(leaves))
    if index < k:
        return [*inclusion_proof(index, leaves[:k]), tree_hash(leaves[k:])]
    return [*inclusion_proof(index - k, leaves[k:]), tree_hash(leaves[:k])]
