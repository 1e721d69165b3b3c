"""What the per-batch key check costs: one-entry batches with it, beside the same store without it.

Run: ``.venv/bin/python bench/bench_key_check.py [--appends N] [--rounds R]`` (about a minute).
Each batch now reads the log's current key after taking the head's lock (``CURRENT_KEY_SQL``;
on PostgreSQL in the same round trip as the head). The baseline is a store whose batches read
only the head, as before the check, measured in the same run, alternating with the real one
round by round, so the machine's noise hits both alike: compare the ratio, not the rates.
One entry per batch is the worst case: a batch of many entries pays the check once.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gnau_service.audit.entries import EntryKind
from gnau_service.audit.log import LogHead
from gnau_service.audit.signing import LogSigner
from gnau_service.store import Store, open_backend
from tests.postgres import fresh_database, unavailable_reason


class UncheckedStore(Store):
    """The baseline: a batch reads the head only, as before the key check."""

    def _begin(self, connection: Any) -> tuple[LogHead, str | None]:
        self.backend.run(connection, self.backend.begin_sql)
        head = LogHead.decode(*self.backend.run(connection, self.backend.read_head_sql)[0])
        return head, None  # None: "no key yet", which the check lets through


def appends_per_second(store: Store, count: int) -> float:
    async def one_at_a_time() -> None:
        for number in range(count):
            payload = {"n": number}
            await store.run_async(
                lambda tx, payload=payload: tx.append(EntryKind.CONFIG_CHANGED, payload)
            )

    began = time.perf_counter()
    asyncio.run(one_at_a_time())
    return count / (time.perf_counter() - began)


def compare(url: str, label: str, appends: int, rounds: int) -> None:
    signer = LogSigner.from_private_key("gnau-dealer/bench", Ed25519PrivateKey.generate())
    checked_rates, unchecked_rates = [], []
    with (
        Store(open_backend(url), signer) as checked,
        UncheckedStore(open_backend(url), signer) as bare,
    ):
        appends_per_second(checked, 20)  # warm both up
        appends_per_second(bare, 20)
        for _ in range(rounds):
            checked_rates.append(appends_per_second(checked, appends))
            unchecked_rates.append(appends_per_second(bare, appends))
    with_check, without = statistics.median(checked_rates), statistics.median(unchecked_rates)
    print(
        f"| {label} | {with_check:,.0f} | {without:,.0f} | {with_check / without:.3f} |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=300, help="appends per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each, alternating")
    args = parser.parse_args()
    print("| database | one-entry batches/s, with the key check | without (baseline) | ratio |")
    print("| --- | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as directory:
        compare(f"sqlite:///{directory}/bench.db", "SQLite", args.appends, args.rounds)
    reason = unavailable_reason()
    if reason is not None:
        print(f"PostgreSQL skipped: {reason}")
        return
    with fresh_database() as url:
        compare(url, "PostgreSQL", args.appends, args.rounds)


if __name__ == "__main__":
    main()
