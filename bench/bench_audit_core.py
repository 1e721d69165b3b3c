"""Throughput of the pure audit-log core, next to the raw primitives it is built on.

Run: ``.venv/bin/python bench/bench_audit_core.py`` (about 30 s). Figures on a shared machine are
noisy: compare the ratios printed in one run, not absolute numbers across runs.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.entries import (
    GENESIS_PREV_HASH,
    EntryKind,
    chain_hash,
    decode_entry,
    encode_entry,
)
from gnau_service.audit.merkle import MemoryTree, leaf_hash, verify_consistency, verify_inclusion
from gnau_service.audit.note import Signer

SECONDS_PER_MEASURE = 1.5
TREE_SIZE = 1_000_000
PROOF_SAMPLES = 2_000


def per_second(operation: Callable[[], object], seconds: float = SECONDS_PER_MEASURE) -> float:
    """Calls per second of ``operation``, timed in batches for at least ``seconds``."""
    calls, batch = 0, 64
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(batch):
            operation()
        calls += batch
    return calls / elapsed


def report(label: str, value: str, note: str = "") -> None:
    print(f"  {label:<44} {value:>14}  {note}")


def bench_primitives_and_entries() -> None:
    signer = Signer("gnau-dealer/bench", Ed25519PrivateKey.generate())
    message = bytes(200)
    signature = signer.private_key.sign(message)
    public_key = signer.private_key.public_key()

    raw_sign = per_second(lambda: signer.private_key.sign(message))
    raw_verify = per_second(lambda: public_key.verify(signature, message))
    leaf_hashes = per_second(lambda: leaf_hash(message))
    sha256 = per_second(lambda: hashlib.sha256(message).digest())

    payload = {
        "round_id": "r-000123",
        "seats": [
            {"seat": n, "stake": 100 * n, "cards": ["AS", "KD", "7H", "2C", "9S"]} for n in range(4)
        ],
        "server_seed_hash": "ab" * 32,
    }

    def encode() -> bytes:
        return encode_entry(
            signer,
            index=123,
            kind=EntryKind.ROUND_DEALT,
            time="2025-03-01T12:00:00.000000Z",
            round_id="r-000123",
            payload=payload,
            prev_hash=GENESIS_PREV_HASH,
        )

    entry = encode()
    encoded = per_second(encode)
    decoded = per_second(lambda: decode_entry(entry, signer.verifier))

    print("Primitives (one core)")
    report("Ed25519 sign, raw cryptography", f"{raw_sign:,.0f}/s")
    report("Ed25519 verify, raw cryptography", f"{raw_verify:,.0f}/s")
    report("SHA-256 of 200 bytes, raw hashlib", f"{sha256:,.0f}/s")
    report("leaf_hash of 200 bytes (0x00 prefix)", f"{leaf_hashes:,.0f}/s")
    print(f"Entries ({len(entry)} bytes each: a ROUND_DEALT with four seats)")
    report(
        "encode_entry (canonical JSON + sign)",
        f"{encoded:,.0f}/s",
        f"{encoded / raw_sign:.2f} x raw sign",
    )
    report(
        "decode_entry (parse, canonical check, verify)",
        f"{decoded:,.0f}/s",
        f"{decoded / raw_verify:.2f} x raw verify",
    )
    report("chain_hash of that entry", f"{per_second(lambda: chain_hash(entry)):,.0f}/s")


def bench_proofs() -> None:
    print(f"Merkle proofs at n = {TREE_SIZE:,} (MemoryTree)")
    tree = MemoryTree()
    start = time.perf_counter()
    for index in range(TREE_SIZE):
        tree.append(leaf_hash(index.to_bytes(8, "big")))
    build = time.perf_counter() - start
    report("append (leaf hash + new nodes + frontier)", f"{TREE_SIZE / build:,.0f}/s")
    root = tree.root()

    rng = random.Random(6962)
    indices = [rng.randrange(TREE_SIZE) for _ in range(PROOF_SAMPLES)]
    leaves = [leaf_hash(index.to_bytes(8, "big")) for index in indices]
    start = time.perf_counter()
    proofs = [tree.inclusion_proof(index) for index in indices]
    generate = time.perf_counter() - start
    start = time.perf_counter()
    for leaf, index, proof in zip(leaves, indices, proofs, strict=True):
        verify_inclusion(leaf, index, TREE_SIZE, proof, root)
    verify = time.perf_counter() - start
    report(
        "inclusion proof: generate / verify",
        f"{generate / PROOF_SAMPLES * 1e6:.1f} / {verify / PROOF_SAMPLES * 1e6:.1f} us",
        f"({len(proofs[0])} hashes)",
    )

    old_sizes = [rng.randrange(1, TREE_SIZE) for _ in range(PROOF_SAMPLES)]
    old_roots = [tree.root(size) for size in old_sizes]
    start = time.perf_counter()
    proofs = [tree.consistency_proof(size) for size in old_sizes]
    generate = time.perf_counter() - start
    start = time.perf_counter()
    for size, old_root, proof in zip(old_sizes, old_roots, proofs, strict=True):
        verify_consistency(size, TREE_SIZE, proof, old_root, root)
    verify = time.perf_counter() - start
    report(
        "consistency proof: generate / verify",
        f"{generate / PROOF_SAMPLES * 1e6:.1f} / {verify / PROOF_SAMPLES * 1e6:.1f} us",
        f"(about {sum(map(len, proofs)) // PROOF_SAMPLES} hashes)",
    )
    report(
        "root at an arbitrary size (from nodes)", f"{per_second(lambda: tree.root(777_777)):,.0f}/s"
    )


def main() -> None:
    start = time.perf_counter()
    bench_primitives_and_entries()
    bench_proofs()
    print(f"(total {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
