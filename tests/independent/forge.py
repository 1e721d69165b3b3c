"""A dishonest log's writer, for the tests: it edits a bundle's entries and signs the result
again with the log's real keys (chain, signatures and a checkpoint of its size), so that only
what an entry means can betray the edit. Written from docs/audit.md like the verifiers."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from tests.independent.entries import GENESIS
from tests.independent.merkle import Frontier, leaf_hash
from tests.independent.notes import ED25519, key_id

Entry = dict[str, Any]


def vkey_of(name: str, key: Ed25519PrivateKey) -> str:
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    blob = base64.b64encode(bytes([ED25519]) + public).decode()
    return f"{name}+{key_id(name, ED25519, public).hex()}+{blob}"


def _id(name: str, key: Ed25519PrivateKey) -> bytes:
    return key_id(name, ED25519, key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))


def sign_checkpoint(origin: str, size: int, root: bytes, key: Ed25519PrivateKey) -> str:
    text = f"{origin}\n{size}\n{base64.b64encode(root).decode()}\n"
    signature = _id(origin, key) + key.sign(text.encode())
    return f"{text}\n\u2014 {origin} {base64.b64encode(signature).decode()}\n"


def read_bundle(data: bytes) -> tuple[dict[str, Any], list[str], list[Entry]]:
    """The header, the checkpoint notes, the entries as JSON objects."""
    lines = [json.loads(line) for line in data.decode().splitlines()]
    notes = [line["checkpoint"] for line in lines[1:] if "checkpoint" in line]
    entries = [json.loads(line["entry"]) for line in lines[1:] if "entry" in line]
    return lines[0], notes, entries


def write_bundle(header: dict[str, Any], notes: list[str], entries: list[bytes]) -> bytes:
    lines = [json.dumps(header)]
    lines += [json.dumps({"checkpoint": note}, ensure_ascii=False) for note in notes]
    lines += [json.dumps({"entry": entry.decode()}, ensure_ascii=False) for entry in entries]
    return ("\n".join(lines) + "\n").encode()


def resign(
    data: bytes, keys: list[Ed25519PrivateKey], edit: Callable[[list[Entry]], object]
) -> bytes:
    """The whole-log bundle ``data`` with ``edit`` applied to its entries, then every entry
    chained and signed again by the key its ``key_id`` names, and one checkpoint of the
    bundle's size signed by the last entry's key."""
    header, _, entries = read_bundle(data)
    origin = header["origin"]
    by_id = {_id(origin, key).hex(): key for key in keys}
    edit(entries)
    frontier, previous, written = Frontier(0, []), GENESIS, []
    for entry in entries:
        entry["prev_hash"] = previous
        unsigned = {k: v for k, v in entry.items() if k != "signature"}
        entry["signature"] = by_id[entry["key_id"]].sign(rfc8785.dumps(unsigned)).hex()
        stored = rfc8785.dumps(entry)
        written.append(stored)
        frontier.append(leaf_hash(stored))
        previous = leaf_hash(stored).hex()
    last_key = by_id[entries[-1]["key_id"]]
    note = sign_checkpoint(origin, len(entries), frontier.root(), last_key)
    return write_bundle({**header, "size": len(entries)}, [note], written)
