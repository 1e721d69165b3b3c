"""What a witness quorum costs a verifier: opening a checkpoint alone, beside opening it and
counting the cosignatures of a quorum of 2 of 3 pinned witnesses, in the same run.

Run: ``.venv/bin/python bench/bench_quorum.py [--checks N] [--rounds R]`` (a few seconds).
The checkpoint carries the log's signature and two witnesses' cosignatures (the third witness is
pinned but silent). Opening it verifies the log's Ed25519 signature; the quorum adds one Ed25519
verification per cosignature from a pinned key. Both are timed in CPU seconds per check, rounds
alternating so that the machine's noise hits both alike: compare the ratio, not the rates.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gnau_service.audit.checkpoint import Checkpoint, open_checkpoint, sign_checkpoint
from gnau_service.audit.cosignature import WitnessSigner, cosign, require_quorum
from gnau_service.audit.note import SignedNote, Signer

ORIGIN = "gnau-dealer/bench"


def cpu_per_check(check: Callable[[], object], count: int) -> float:
    began = time.process_time()
    for _ in range(count):
        check()
    return (time.process_time() - began) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=2000, help="checks per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    log = Signer(ORIGIN, Ed25519PrivateKey.generate())
    witnesses = [WitnessSigner.generate(f"witness.bench/w{n}") for n in (1, 2, 3)]
    signed = sign_checkpoint(Checkpoint(ORIGIN, 48_211, bytes(range(32))), log)
    lines = tuple(cosign(w, signed.text, 1_764_547_200) for w in witnesses[:2])
    text = str(SignedNote(signed.text, signed.signatures + lines))
    keys = [w.key for w in witnesses]

    def opened() -> object:
        return open_checkpoint(text, ORIGIN, [log.verifier])

    def opened_with_quorum() -> object:
        return require_quorum(open_checkpoint(text, ORIGIN, [log.verifier]).note, keys, 2)

    opened(), opened_with_quorum()  # warm up the key caches
    alone, quorum = [], []
    for _ in range(args.rounds):
        alone.append(cpu_per_check(opened, args.checks))
        quorum.append(cpu_per_check(opened_with_quorum, args.checks))
    base, with_quorum = statistics.median(alone), statistics.median(quorum)
    print(f"open a checkpoint:                  {base * 1e6:8.1f} µs CPU per check (baseline)")
    print(f"open it and count a quorum of 2/3:  {with_quorum * 1e6:8.1f} µs CPU per check")
    print(f"ratio: {with_quorum / base:.2f}x the baseline ({args.rounds} rounds of {args.checks})")


if __name__ == "__main__":
    main()
