"""The log's sequencing alone, on one core: events waiting first, then indexed, signed, committed.

Run: ``.venv/bin/python bench/bench_sequencer.py [--entries 20000]`` (about a minute). The
process is pinned to one core (``--core``); PostgreSQL's server runs where the kernel puts it,
and its CPU is reported apart.

Every figure is beside baselines measured in the same run, on the same entries (real round
entries: COMMITTED, DEALT, REVEALED, SETTLED, about 1 kB each):

1. Raw Ed25519: signing as many messages, of the entries' mean size, as there are entries, with
   OpenSSL (``cryptography``) and with libsodium (PyNaCl), which the log signs with (the same
   signatures, see ``gnau_service/audit/ed25519_signing.py``). The ceiling of any sequencer that
   signs every entry.
2. ``LogAppender`` alone: what sequencing costs in CPU without a database (the payloads'
   canonical bytes, as steps leave them in the outbox, spliced into entries; signature, chain
   hash, Merkle frontier), one checkpoint per batch of ``--batch`` entries.
3. The store's sequencing on SQLite (a fresh file: WAL, ``synchronous=FULL``) and on PostgreSQL
   (a scratch database), every event waiting before it starts, timed until all are durable in
   the log under a signed checkpoint. With the sequencer (issue 12): the events written to the
   outbox first, as committed steps leave them, then ``store.sequencer.sequence`` transactions
   (up to ``SEQUENCE_BATCH`` events each) on this thread; on PostgreSQL this process holds the
   sequencer's advisory lock so the store's own sequencer stays idle. Before it: one unit per
   event queued behind a gate, the writer's unit batches being the sequencing batches.
   Entries/s, this process's CPU per entry, and PostgreSQL's backends' CPU per entry (from
   ``/proc``, the server being local).

Each rate is printed twice: entries per second of wall time, and per CPU-second of this process
(the count over its CPU time), which is what one core would carry if nothing else ran on it; on
a shared machine the second is the steadier. The ratios to raw signing use the second.

Target (issue 12): at least 10,000 entries/s on one core, on both backends.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import psycopg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_audit_log import (  # sibling scripts, found through sys.path above
    ORIGIN,
    Payload,
    append_unit,
    entry_time,
    flatten,
    rounds_in_parallel,
)
from bench_service import drop_postgres, scratch_postgres

from gnau_service.audit import ed25519_signing
from gnau_service.audit.entries import EntryKind, event_payload
from gnau_service.audit.log import LogAppender
from gnau_service.audit.signing import LogSigner
from gnau_service.store import open_store
from tests.postgres import OutsideLeader

TARGET: Final = 10_000
DEFAULT_POSTGRES_URL: Final = "postgresql://postgres@127.0.0.1:5432/postgres"
CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK")

Item = tuple[EntryKind, Payload, str]


@dataclass
class Rate:
    """``count`` operations in ``wall`` seconds, using ``cpu`` seconds of this process and
    ``database_cpu`` of the database server's processes (``None``: not measured)."""

    count: int
    wall: float
    cpu: float
    database_cpu: float | None = None

    @property
    def per_second(self) -> float:
        return self.count / self.wall

    @property
    def cpu_us(self) -> float:
        return 1e6 * self.cpu / self.count

    @property
    def per_cpu_second(self) -> float:
        """The rate if this process had its core to itself: what one core carries, whatever
        else the shared machine runs on it (the database's CPU is not in it)."""
        return self.count / self.cpu if self.cpu else float("inf")

    def text(self) -> str:
        database = (
            f", database {1e6 * self.database_cpu / self.count:.0f} µs"
            if self.database_cpu is not None
            else ""
        )
        return f"{self.per_second:>9,.0f} /s  CPU {self.cpu_us:.0f} µs each{database}"


def timed(operation: Callable[[], int], database_cpu: Callable[[], float] | None = None) -> Rate:
    database_before = database_cpu() if database_cpu else 0.0
    cpu, wall = time.process_time(), time.perf_counter()
    count = operation()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    database = database_cpu() - database_before if database_cpu else None
    return Rate(count, wall, cpu, database)


def raw_signing(count: int, size: int, *, sodium: bool) -> Rate:
    """Signing ``count`` messages of ``size`` bytes: with libsodium (what the log signs with,
    :mod:`gnau_service.audit.ed25519_signing`) or with OpenSSL (``cryptography``'s ``sign``)."""
    key = Ed25519PrivateKey.generate()
    secret = ed25519_signing.secret_key(key)
    messages = [os.urandom(size) for _ in range(min(count, 1024))]

    def sign_all() -> int:
        for n in range(count):
            if sodium:
                ed25519_signing.sign(secret, messages[n % len(messages)])
            else:
                key.sign(messages[n % len(messages)])
        return count

    return timed(sign_all)


def appender_alone(signer: LogSigner, items: Sequence[Item], batch: int) -> Rate:
    stamp = entry_time(0)
    events = [
        (kind, pending_payload(kind, payload, round_id).encode(), round_id)
        for kind, payload, round_id in items
    ]

    def append_all() -> int:
        appender = LogAppender(signer)
        for n, (kind, payload_json, round_id) in enumerate(events, start=1):
            appender.append_event(kind, payload_json, time=stamp, round_id=round_id)
            if n % batch == 0:
                appender.checkpoint()
        appender.checkpoint()
        return len(events)

    return timed(append_all)


def mean_entry_size(signer: LogSigner, items: Sequence[Item]) -> int:
    appender = LogAppender(signer)
    sizes = [
        len(appender.append(kind, payload, time=entry_time(0), round_id=round_id).data)
        for kind, payload, round_id in items[:200]
    ]
    return sum(sizes) // len(sizes)


def pending_payload(kind: EntryKind, payload: Payload, round_id: str | None) -> str:
    """The payload as a committed step leaves it in the outbox (``Transaction.append``)."""
    return event_payload(kind, payload, time=entry_time(0), round_id=round_id).decode("utf-8")


def postgres_cpu(url: str) -> Callable[[], float]:
    """CPU seconds so far of the PostgreSQL backends serving ``url``'s database (local server)."""
    database = url.rsplit("/", 1)[1]

    def read() -> float:
        with psycopg.connect(url, autocommit=True) as connection:
            pids = [
                row[0]
                for row in connection.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = %s"
                    " AND pid <> pg_backend_pid()",
                    (database,),
                )
            ]
        return sum(_process_cpu(pid) for pid in pids)

    return read


def _process_cpu(pid: int) -> float:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def store_sequencing(url: str, signer: LogSigner, items: Sequence[Item], *, postgres: bool) -> Rate:
    """The store's sequencing of ``items``, all waiting before it starts: the sequencer where
    the store has one, else today's unit batches."""
    try:
        from gnau_service.store import sequencer  # noqa: PLC0415  (only since issue 12)
    except ImportError:
        return _unit_batches(url, signer, items, postgres=postgres)
    return _sequencer(sequencer, url, signer, items, postgres=postgres)


def _sequencer(
    sequencer: Any, url: str, signer: LogSigner, items: Sequence[Item], *, postgres: bool
) -> Rate:
    """Events written to the outbox (``log_pending``) first, as committed steps leave them; then
    the sequencer's transactions (``sequencer.sequence``) on this thread until all are in the
    log. On PostgreSQL this process holds the sequencer's lease from before the store
    opens, so that the store's own sequencer thread never leads: the one timed here is alone."""
    election = OutsideLeader(url) if postgres else None
    try:
        with open_store(url, signer) as store:
            backend = store.backend
            connection = backend.connect()
            backend.run(connection, backend.begin_sql)
            backend.insert_rows(
                connection,
                "log_pending",
                {"kind": "text", "round_id": "text", "payload": "text", "time": "text"},
                [
                    (str(kind), round_id, pending_payload(kind, payload, round_id), entry_time(0))
                    for kind, payload, round_id in items
                ],
            )
            backend.run(connection, "COMMIT")

            def integrate_all() -> int:
                integrated = 0
                while integrated < len(items):
                    done = sequence_once(sequencer, store, connection)
                    if not done.indices:
                        raise AssertionError(f"{len(items) - integrated} events not integrated")
                    integrated += len(done.indices)
                return integrated

            rate = timed(integrate_all, postgres_cpu(url) if postgres else None)
            backend.close_quietly(connection)
            if store.size() != len(items):
                raise AssertionError(f"{store.size()} entries in the log, {len(items)} expected")
    finally:
        if election is not None:
            election.release()
    return rate


def sequence_once(sequencer: Any, store: Any, connection: Any) -> Any:
    """One sequencer transaction (``sequence`` took the store itself before issue 20)."""
    if next(iter(inspect.signature(sequencer.sequence).parameters)) == "store":
        return sequencer.sequence(store, connection)
    return sequencer.sequence(store.backend, connection, store.signer_for)


def _unit_batches(url: str, signer: LogSigner, items: Sequence[Item], *, postgres: bool) -> Rate:
    """Before the sequencer (issue 12): the store sequenced inside its unit batches, so one unit
    per event, all queued at once on one event loop, then the writer runs its batches."""
    with open_store(url, signer) as store:

        async def run_all() -> int:
            warm_up = store.run_async(  # connect, warm up
                lambda tx: tx.append(EntryKind.SERVICE_STARTED, {"version": "bench"})
            )
            await warm_up
            await asyncio.gather(*(store.run_async(append_unit(*item)) for item in items))
            return len(items)

        rate = timed(lambda: asyncio.run(run_all()), postgres_cpu(url) if postgres else None)
        if store.size() != 1 + len(items):
            raise AssertionError(f"{store.size()} entries in the log, {1 + len(items)} expected")
    return rate


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--entries", type=int, default=20_000, help="events to sequence")
    parser.add_argument("--batch", type=int, default=256, help="entries per checkpoint (alone)")
    parser.add_argument("--core", type=int, default=0, help="the core to pin this process to")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--no-postgres", action="store_true")
    arguments = parser.parse_args(argv)
    os.sched_setaffinity(0, {arguments.core})
    rounds = (arguments.entries + 3) // 4
    print(
        f"Sequencing {arguments.entries:,} real round entries on core {arguments.core} "
        f"(load average {os.getloadavg()[0]:.1f}); generating {rounds:,} rounds...",
        flush=True,
    )
    items = flatten(list(rounds_in_parallel(0, rounds, jobs=1)))[: arguments.entries]
    signer = LogSigner.from_private_key(ORIGIN, Ed25519PrivateKey.generate())
    size = mean_entry_size(signer, items)
    rows: list[tuple[str, Rate]] = []

    def show(label: str, rate: Rate) -> None:
        rows.append((label, rate))
        print(f"  {label:<44} {rate.text()}", flush=True)

    print(f"\nmean entry {size} bytes\n")
    show(
        f"raw Ed25519 signing, OpenSSL, {len(items):,} messages",
        raw_signing(len(items), size, sodium=False),
    )
    signing = raw_signing(len(items), size, sodium=True)
    show(f"raw Ed25519 signing, libsodium, {len(items):,} messages", signing)
    show(
        f"LogAppender alone, checkpoint every {arguments.batch}",
        appender_alone(signer, items, arguments.batch),
    )
    with tempfile.TemporaryDirectory(prefix="gnau-bench-sequencer-") as temp:
        show(
            "store, SQLite, all waiting first",
            store_sequencing(f"sqlite:///{Path(temp) / 'log.db'}", signer, items, postgres=False),
        )
    if not arguments.no_postgres:
        scratch = scratch_postgres(arguments.postgres_url, "gnau_bench_sequencer")
        if isinstance(scratch, str):
            print(f"  PostgreSQL skipped: {scratch}")
        else:
            name, url = scratch
            try:
                show(
                    "store, PostgreSQL, all waiting first",
                    store_sequencing(url, signer, items, postgres=True),
                )
            finally:
                drop_postgres(arguments.postgres_url, name)
    print(
        "\n| what (one core) | entries/s | per CPU-second | CPU per entry | vs raw libsodium "
        "signing (per CPU-second) | target |"
    )
    print("|---|---:|---:|---:|---:|---|")
    for label, rate in rows:
        database = (
            f" (+ database {1e6 * rate.database_cpu / rate.count:.0f} µs)"
            if rate.database_cpu is not None
            else ""
        )
        target = (
            ""
            if label.startswith(("raw", "LogAppender"))
            else (f"{'meets' if rate.per_second >= TARGET else 'misses'} {TARGET:,}/s")
        )
        print(
            f"| {label} | {rate.per_second:,.0f} | {rate.per_cpu_second:,.0f} | "
            f"{rate.cpu_us:.0f} µs{database} | "
            f"{rate.per_cpu_second / signing.per_cpu_second:.2f} | {target} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
