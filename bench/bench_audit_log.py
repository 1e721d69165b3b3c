"""The audit log end to end: durable appends, bundle verification and proofs, beside baselines.

Run: ``.venv/bin/python bench/bench_audit_log.py``. About 7 minutes once the bundle is cached, 5.5
of them in ``verify_bundle`` at today's ~3,000 entries/s (at the issue's target it would be about
1.5 minutes); the first run, and any run after the code that shapes entries changed, also
generates the 1,000,000-entry bundle, about 3.5 more minutes on two cores. ``--quick`` runs
everything at a tenth of the size (about 1.5 minutes). Every figure is printed beside a baseline
measured in the same run: the machine is shared and noisy, so compare ratios, not absolute
numbers across runs. The last thing printed is a markdown table for the README.

1. Durable appends on SQLite (a fresh file: WAL, ``synchronous=FULL``, as the store sets them):
   real round entries submitted all at once (group commit), then one append per call; beside the
   raw Ed25519 signing rate, ``LogAppender`` without a database, and bare SQLite commits.
2. The same on PostgreSQL, in a scratch database (skipped, with the reason, if unreachable).
3. ``verify_bundle`` on a bundle of real rounds (COMMITTED, DEALT, REVEALED, SETTLED; 2-6 seats),
   beside the raw Ed25519 verification rate. The bundle is generated once (rounds in two worker
   processes, entries signed in order through a ``LogAppender``, the file written by
   ``write_bundle``) and cached under the temp directory, keyed by its size and a digest of the
   code that shapes its bytes; it is verified afresh on every run.
4. Inclusion and consistency proofs read from a SQLite store holding the bundle's tree, at three
   sizes up to the bundle's, beside the same proofs from an in-memory ``MemoryTree``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import multiprocessing
import os
import random
import resource
import secrets
import sqlite3
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from multiprocessing.pool import AsyncResult
from pathlib import Path
from typing import Final

import psycopg
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.bundle import BUNDLE_FORMAT, write_bundle
from gnau_service.audit.bundle_verification import verify_bundle
from gnau_service.audit.bundle_workers import CHECK_BATCH
from gnau_service.audit.checkpoint import open_checkpoint
from gnau_service.audit.entries import EntryKind, JsonValue, canonical_json, decode_entry
from gnau_service.audit.log import LogAppender
from gnau_service.audit.merkle import (
    Frontier,
    MemoryTree,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    verify_consistency,
    verify_inclusion,
)
from gnau_service.audit.note import Verifier
from gnau_service.audit.replay import RoundReplay
from gnau_service.audit.round_events import (
    committed_payload,
    dealt_payload,
    revealed_payload,
    settle_round,
    settled_payload,
)
from gnau_service.audit.signing import LogSigner
from gnau_service.audit.timestamps import format_utc_timestamp
from gnau_service.fairness import Beacon, CommittedRound, LockedSeat
from gnau_service.rules.house_rules import HouseRules, PayoutTable, TieRule
from gnau_service.store import LogReader, Store, Transaction, open_store
from gnau_service.store.schema import create_schema
from gnau_service.store.sqlite import SqliteBackend

# Bump when the generated bundle's layout changes; the cache key also digests the code below.
CACHE_FORMAT_VERSION: Final = 1
CACHE_DIGESTED_SOURCES: Final = ("audit", "fairness", "rules")
ORIGIN: Final = "gnau-dealer/bench"
CHECKPOINT_EVERY: Final = 1_000
CONFIG_EVERY_ROUNDS: Final = 250  # one CONFIG_CHANGED between every 250 rounds
ROUNDS_PER_TASK: Final = 200
TABLES: Final = 40
SIGNATURE_MEMBER_BYTES: Final = len('"signature":"",') + 128  # in an entry, not in what is signed
SECONDS_PER_RATE: Final = 1.5
DEFAULT_POSTGRES_URL: Final = "postgresql://postgres@127.0.0.1:5432/postgres"
BASE_TIME: Final = datetime(2026, 1, 1, tzinfo=UTC)

HOUSE_RULES: Final = (
    HouseRules(),
    HouseRules(tie=TieRule.PUSH, ten_is_duke=True),
    HouseRules(payout=PayoutTable.MULTIPLIER, decks=2),
    HouseRules(tie=TieRule.HIGH_CARD, three_six_pair=True, suited_double=True),
)

Payload = dict[str, JsonValue]
RoundEvents = tuple[str, list[tuple[EntryKind, Payload]]]


# --- Reporting ------------------------------------------------------------------------------------


@dataclass
class SummaryRow:
    measure: str
    result: str
    baseline: str
    ratio: str
    target: str = ""


@dataclass
class Summary:
    rows: list[SummaryRow] = field(default_factory=list)

    def add(self, measure: str, result: str, baseline: str, ratio: str, target: str = "") -> None:
        self.rows.append(SummaryRow(measure, result, baseline, ratio, target))

    def markdown(self) -> str:
        lines = [
            "| Measure | Result | Baseline (same run) | Ratio | Target / anchor |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {r.measure} | {r.result} | {r.baseline} | {r.ratio} | {r.target} |"
            for r in self.rows
        ]
        return "\n".join(lines)


def heading(text: str) -> None:
    print(f"\n{text}", flush=True)


def report(label: str, value: str, note: str = "") -> None:
    print(f"  {label:<50} {value:>18}  {note}".rstrip(), flush=True)


def status(text: str) -> None:
    """Progress on stderr, so that stdout holds only the figures."""
    print(f"    ... {text}", file=sys.stderr, flush=True)


def per_second(operation: Callable[[], object], seconds: float = SECONDS_PER_RATE) -> float:
    """Calls per second of ``operation``, timed in batches for at least ``seconds``."""
    calls, batch = 0, 32
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(batch):
            operation()
        calls += batch
    return calls / elapsed


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))]


def raw_sign_rate(message_size: int) -> float:
    key = Ed25519PrivateKey.generate()
    message = os.urandom(message_size)
    return per_second(lambda: key.sign(message))


def raw_verify_rate(message_size: int) -> float:
    key = Ed25519PrivateKey.generate()
    message = os.urandom(message_size)
    signature = key.sign(message)
    public_key = key.public_key()
    return per_second(lambda: public_key.verify(signature, message))


# --- Real rounds ----------------------------------------------------------------------------------


def round_events(number: int, rng: random.Random) -> RoundEvents:
    """One real round: commit, lock 2-6 seats, deal, reveal, settle; its four log payloads."""
    table = f"table-{number % TABLES:02d}"
    round_id = f"{table}/round-{number:07d}"
    committed = CommittedRound.with_fresh_seed(round_id, HOUSE_RULES[number % len(HOUSE_RULES)])
    numbers = rng.sample(range(1, 9), rng.randint(2, 6))
    # Distinct players: a reference names one seat of a round (drawn with replacement, a
    # 1,000,000-entry bundle would hold a round seating one player twice, which lock refuses).
    players = rng.sample(range(1_000_000), len(numbers))
    seats = [
        LockedSeat(
            seat,
            f"p-{player:032x}",
            rng.randrange(1, 500) * 10,
            client_seed=rng.randbytes(16) if rng.random() < 0.5 else b"",
        )
        for seat, player in zip(numbers, players, strict=True)
    ]
    beacon = None
    if number % 4 == 0:
        beacon = Beacon(f"drand/quicknet/round/{10_000_000 + number}", rng.randbytes(32))
    dealt = committed.lock(seats, beacon).deal()
    settlement = settle_round(dealt.reveal())
    return round_id, [
        (EntryKind.ROUND_COMMITTED, committed_payload(committed, table)),
        (EntryKind.ROUND_DEALT, dealt_payload(dealt)),
        (EntryKind.ROUND_REVEALED, revealed_payload(dealt)),
        (EntryKind.ROUND_SETTLED, settled_payload(settlement)),
    ]


def generate_rounds(task: tuple[int, int]) -> list[RoundEvents]:
    """Rounds ``first`` to ``first + count - 1`` (run in worker processes)."""
    first, count = task
    rng = random.Random(first)  # seats repeat between runs; server seeds come from the OS
    return [round_events(number, rng) for number in range(first, first + count)]


def rounds_in_parallel(first: int, count: int, jobs: int) -> Iterator[RoundEvents]:
    """Rounds ``first`` .. ``first + count - 1`` in order, generated by ``jobs`` processes."""
    tasks = [
        (start, min(ROUNDS_PER_TASK, first + count - start))
        for start in range(first, first + count, ROUNDS_PER_TASK)
    ]
    if jobs <= 1:
        for task in tasks:
            yield from generate_rounds(task)
        return
    context = multiprocessing.get_context("spawn")
    with context.Pool(jobs) as pool:
        window: deque[AsyncResult[list[RoundEvents]]] = deque()
        for task in tasks:
            window.append(pool.apply_async(generate_rounds, (task,)))
            if len(window) >= 4 * jobs:
                yield from window.popleft().get()
        while window:
            yield from window.popleft().get()


def config_payload(number: int) -> Payload:
    """A CONFIG_CHANGED payload of about 600 bytes, as an operator's change would log."""
    return {
        "changed_by": "ops/alice@example.com",
        "reason": f"scheduled table rotation #{number}",
        "table_id": f"table-{number % TABLES:02d}",
        "previous": {"min_stake": 10, "max_stake": 5_000, "seats": 6, "house_rules": "default"},
        "current": {"min_stake": 20, "max_stake": 10_000, "seats": 6, "house_rules": "push"},
        "ticket": f"CHG-{100_000 + number}",
        "approved_by": ["ops/bob@example.com", "compliance/carol@example.com"],
        "note": "x" * 240,
    }


def entry_time(index: int) -> str:
    return format_utc_timestamp(BASE_TIME + timedelta(milliseconds=2 * index))


# --- 1 and 2: durable appends ---------------------------------------------------------------------


def append_unit(
    kind: EntryKind, payload: Payload, round_id: str | None
) -> Callable[[Transaction], object]:
    return lambda tx: tx.append(kind, payload, round_id=round_id)


def flatten(rounds: Sequence[RoundEvents]) -> list[tuple[EntryKind, Payload, str]]:
    return [(kind, payload, round_id) for round_id, events in rounds for kind, payload in events]


@dataclass
class AppendFigures:
    group_rate: float
    submit_seconds: float
    batches: int
    prequeued_rate: float
    sequential_rate: float
    p50_ms: float
    p99_ms: float


def bench_store_appends(
    store: Store,
    grouped: Sequence[tuple[EntryKind, Payload, str]],
    sequential: Sequence[tuple[EntryKind, Payload, str]],
) -> AppendFigures:
    """Group commit (everything queued at once, timed from the first submission, then timed
    from once all are queued), then one append per call; all on one event loop."""
    return asyncio.run(_store_appends(store, grouped, sequential))


async def _store_appends(
    store: Store,
    grouped: Sequence[tuple[EntryKind, Payload, str]],
    sequential: Sequence[tuple[EntryKind, Payload, str]],
) -> AppendFigures:
    # Warm the writer connection.
    await store.run_async(lambda tx: tx.append(EntryKind.SERVICE_STARTED, {"version": "bench"}))
    checkpoints_before = int(store.query("SELECT COUNT(*) FROM log_checkpoints")[0][0])
    start = time.perf_counter()
    calls = [asyncio.ensure_future(store.run_async(append_unit(*item))) for item in grouped]
    await asyncio.sleep(0)  # every unit is queued
    submit_seconds = time.perf_counter() - start
    await asyncio.gather(*calls)
    group_rate = len(grouped) / (time.perf_counter() - start)
    batches = int(store.query("SELECT COUNT(*) FROM log_checkpoints")[0][0]) - checkpoints_before

    # The same again timed from once all are queued: the writer's own rate, without the
    # submissions.
    calls = [asyncio.ensure_future(store.run_async(append_unit(*item))) for item in grouped]
    await asyncio.sleep(0)
    start = time.perf_counter()
    await asyncio.gather(*calls)
    prequeued_rate = len(grouped) / (time.perf_counter() - start)

    latencies = []
    start = time.perf_counter()
    for item in sequential:
        began = time.perf_counter()
        await store.run_async(append_unit(*item))
        latencies.append(time.perf_counter() - began)
    sequential_rate = len(sequential) / (time.perf_counter() - start)
    latencies.sort()
    expected = 1 + 2 * len(grouped) + len(sequential)
    if store.size() != expected:
        raise AssertionError(f"the store holds {store.size()} entries, expected {expected}")
    return AppendFigures(
        group_rate,
        submit_seconds,
        batches,
        prequeued_rate,
        sequential_rate,
        1e3 * percentile(latencies, 0.50),
        1e3 * percentile(latencies, 0.99),
    )


def appender_rate(signer: LogSigner, items: Sequence[tuple[EntryKind, Payload, str]]) -> float:
    """LogAppender alone (canonical JSON, sign, leaf hash, frontier): the writer's CPU work."""
    appender = LogAppender(signer)
    stamp = entry_time(0)
    start = time.perf_counter()
    for kind, payload, round_id in items:
        appender.append(kind, payload, time=stamp, round_id=round_id)
    return len(items) / (time.perf_counter() - start)


def mean_signed_size(signer: LogSigner, items: Sequence[tuple[EntryKind, Payload, str]]) -> int:
    appender = LogAppender(signer)
    sizes = [
        len(appender.append(kind, payload, time=entry_time(0), round_id=round_id).data)
        for kind, payload, round_id in items
    ]
    return round(sum(sizes) / len(sizes)) - SIGNATURE_MEMBER_BYTES


def bare_sqlite_commit_rate(directory: Path) -> float:
    """One INSERT per transaction on a bare connection with the store's pragmas."""
    connection = sqlite3.connect(directory / "bare.db", isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = FULL")
    connection.execute("CREATE TABLE t (data BLOB NOT NULL)")
    row = os.urandom(1_000)
    try:
        return per_second(lambda: connection.execute("INSERT INTO t VALUES (?)", (row,)))
    finally:
        connection.close()


def bare_postgres_commit_rate(url: str) -> float:
    """One INSERT per transaction (autocommit) on a bare psycopg connection."""
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("CREATE TABLE bare_commit (data BYTEA NOT NULL)")
        row = os.urandom(1_000)
        return per_second(lambda: connection.execute("INSERT INTO bare_commit VALUES (%s)", (row,)))


@dataclass
class Baselines:
    """Rates measured beside a store's, in the same run: before and after it, averaged."""

    signed_size: int
    sign: float
    appender: float
    commit: float
    canonical_us: float
    c_json_us: float


def measure_baselines(
    signer: LogSigner,
    items: Sequence[tuple[EntryKind, Payload, str]],
    commit_rate: Callable[[], float],
    store_run: Callable[[], AppendFigures],
) -> tuple[AppendFigures, Baselines]:
    signed_size = mean_signed_size(signer, items[:2_000])
    sample = items[:5_000]
    sign, appender = raw_sign_rate(signed_size), appender_rate(signer, sample)
    commit = commit_rate()
    figures = store_run()
    sign = (sign + raw_sign_rate(signed_size)) / 2
    appender = (appender + appender_rate(signer, sample)) / 2
    payloads = [payload for _, payload, _ in items[:2_000]]
    began = time.perf_counter()
    for payload in payloads:
        rfc8785.dumps(payload)
    canonical_us = (time.perf_counter() - began) / len(payloads) * 1e6
    began = time.perf_counter()
    for payload in payloads:
        compact_sorted_json(payload)
    c_json_us = (time.perf_counter() - began) / len(payloads) * 1e6
    return figures, Baselines(signed_size, sign, appender, commit, canonical_us, c_json_us)


def print_append_figures(
    summary: Summary,
    database: str,
    *,
    figures: AppendFigures,
    counts: tuple[int, int],
    base: Baselines,
) -> None:
    grouped, sequential = counts
    sign, appender, commit = base.sign, base.appender, base.commit
    report(
        f"Ed25519 sign, raw ({base.signed_size}-byte message)",
        f"{sign:,.0f}/s",
        "baseline, one core (mean of before and after)",
    )
    report(
        "LogAppender.append, no database",
        f"{appender:,.0f}/s",
        f"{appender / sign:.2f} x sign (same payloads; mean of before and after)",
    )
    report(
        "  of which, per entry",
        f"{1e6 / appender:.0f} us",
        f"RFC 8785 of the payload {base.canonical_us:.0f} us (C json.dumps of it: "
        f"{base.c_json_us:.0f} us); Ed25519 sign {1e6 / sign:.0f} us",
    )
    report(f"bare {database} commit, one 1 kB row per transaction", f"{commit:,.0f}/s", "baseline")
    report(
        f"store, group commit ({grouped:,} submitted at once)",
        f"{figures.group_rate:,.0f} entries/s",
        f"{figures.group_rate / sign:.2f} x sign, {figures.group_rate / appender:.2f} x "
        f"LogAppender; {figures.batches} commits, {grouped / figures.batches:.0f} entries each",
    )
    report(
        "store, group commit, all queued before the writer starts",
        f"{figures.prequeued_rate:,.0f} entries/s",
        f"{figures.prequeued_rate / appender:.2f} x LogAppender (the {grouped:,} submits above took"
        f" {figures.submit_seconds:.2f} s, beside the writer)",
    )
    report(
        f"store, one append per call ({sequential:,}, sequential)",
        f"{figures.sequential_rate:,.0f} entries/s",
        f"p50 {figures.p50_ms:.2f} ms, p99 {figures.p99_ms:.2f} ms; "
        f"{figures.sequential_rate / commit:.2f} x bare commit",
    )
    summary.add(
        f"{database}: durable appends, group commit ({grouped:,} round entries)",
        f"{figures.group_rate:,.0f} entries/s ({figures.prequeued_rate:,.0f}/s with the queue "
        "filled first)",
        f"raw Ed25519 sign {sign:,.0f}/s; LogAppender alone {appender:,.0f}/s",
        f"{figures.group_rate / sign:.2f} x sign; {figures.group_rate / appender:.2f} x appender",
        ">= 5,000/s (issue); Trillian on MySQL 400-500/s (published)"
        if database == "SQLite"
        else "Trillian on MySQL 400-500/s (published)",
    )
    summary.add(
        f"{database}: one append per call ({sequential:,})",
        f"{figures.sequential_rate:,.0f} entries/s; p50 {figures.p50_ms:.2f} ms, "
        f"p99 {figures.p99_ms:.2f} ms",
        f"bare commit {commit:,.0f}/s",
        f"{figures.sequential_rate / commit:.2f} x bare commit",
    )


def bench_database(
    summary: Summary,
    database: str,
    url: str,
    *,
    commit_rate: Callable[[], float],
    rounds: Sequence[RoundEvents],
    counts: tuple[int, int],
) -> None:
    items = flatten(rounds)
    grouped, sequential = items[: counts[0]], items[counts[0] : counts[0] + counts[1]]
    signer = LogSigner.from_private_key(ORIGIN, Ed25519PrivateKey.generate())

    def store_run() -> AppendFigures:
        with open_store(url, signer) as store:
            return bench_store_appends(store, grouped, sequential)

    figures, base = measure_baselines(signer, grouped, commit_rate, store_run)
    print_append_figures(summary, database, figures=figures, counts=counts, base=base)


def bench_sqlite(
    summary: Summary, directory: Path, rounds: Sequence[RoundEvents], counts: tuple[int, int]
) -> None:
    heading("1. Durable appends, SQLite (fresh file; WAL, synchronous=FULL)")
    url = f"sqlite:///{directory / 'appends.db'}"
    bench_database(
        summary,
        "SQLite",
        url,
        commit_rate=lambda: bare_sqlite_commit_rate(directory),
        rounds=rounds,
        counts=counts,
    )


def bench_postgres(
    summary: Summary, admin_url: str, rounds: Sequence[RoundEvents], counts: tuple[int, int]
) -> None:
    heading("2. Durable appends, PostgreSQL (scratch database)")
    try:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=3) as admin:
            version = admin.execute("SHOW server_version").fetchone()
    except psycopg.Error as error:
        reason = str(error).strip().splitlines()[0]
        report("skipped", "", f"PostgreSQL at {admin_url} is unreachable: {reason}")
        summary.add("PostgreSQL", "skipped", f"unreachable: {reason}", "")
        return
    name = f"gnau_bench_{secrets.token_hex(4)}"
    url = f"{admin_url.rsplit('/', 1)[0]}/{name}"
    print(f"  server {version[0] if version else '?'}, scratch database {name}")
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        bench_database(
            summary,
            "PostgreSQL",
            url,
            commit_rate=lambda: bare_postgres_commit_rate(url),
            rounds=rounds,
            counts=counts,
        )
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- 3: the bundle --------------------------------------------------------------------------------


def layout(entries: int) -> list[str]:
    """What each entry is: S(ervice started), C(onfig changed), or R (the start of a round)."""
    plan = ["S"]
    size, rounds = 1, 0
    while size < entries:
        if entries - size < 4 or (rounds and rounds % CONFIG_EVERY_ROUNDS == 0 and plan[-1] != "C"):
            plan.append("C")
            size += 1
        else:
            plan.append("R")
            size += 4
            rounds += 1
    return plan


def source_digest() -> str:
    """A digest of the code that shapes the bundle's bytes, so a change regenerates it."""
    package = Path(__file__).resolve().parent.parent / "gnau_service"
    digest = hashlib.sha256(f"{CACHE_FORMAT_VERSION} {BUNDLE_FORMAT}".encode())
    for directory in CACHE_DIGESTED_SOURCES:
        for path in sorted((package / directory).glob("*.py")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


@dataclass
class BundleInfo:
    path: Path
    entries: int
    rounds: int
    checkpoints: int
    mean_entry_bytes: int
    vkey: str
    generated_seconds: float
    last_checkpoint: str


class _SpooledLog:
    """The generated log as ``write_bundle`` reads a store: entries from a spool file."""

    def __init__(self, spool: Path, notes: list[str], vkey: str) -> None:
        self._spool = spool
        self._notes = notes
        self._vkey = vkey

    def iter_entries(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        with self._spool.open("rb") as file:
            for index, line in enumerate(file):
                if end is not None and index >= end:
                    return
                if index >= start:
                    yield line.removesuffix(b"\n")

    def checkpoints(self) -> list[str]:
        return list(self._notes)

    def public_keys(self) -> list[str]:
        return [self._vkey]

    def frontier(self, size: int) -> Frontier:
        if size != 0:
            raise ValueError("only whole-log bundles are generated")
        return Frontier()


def generate_bundle(path: Path, entries: int, jobs: int) -> BundleInfo:
    """A log of ``entries`` real entries, written as ``write_bundle`` writes a store's log."""
    start = time.perf_counter()
    signer = LogSigner.from_private_key(ORIGIN, Ed25519PrivateKey.generate())
    appender = LogAppender(signer)
    plan = layout(entries)
    rounds = iter(rounds_in_parallel(0, plan.count("R"), jobs))
    spool = path.with_suffix(".spool")
    notes: list[str] = []
    total_bytes = 0
    configs = 0
    with spool.open("wb") as out:

        def append(kind: EntryKind, payload: Payload, round_id: str | None = None) -> None:
            nonlocal total_bytes
            entry = appender.append(
                kind, payload, time=entry_time(appender.head.size), round_id=round_id
            )
            if b"\n" in entry.data:
                raise AssertionError("an entry with a raw newline cannot be spooled by line")
            out.write(entry.data + b"\n")
            total_bytes += len(entry.data)
            size = appender.head.size
            if size % CHECKPOINT_EVERY == 0 or size == entries:
                notes.append(str(appender.checkpoint()))
            if size % 100_000 == 0:
                status(
                    f"generated {size:,} of {entries:,} entries "
                    f"({size / (time.perf_counter() - start):,.0f}/s)"
                )

        for slot in plan:
            if slot == "S":
                append(EntryKind.SERVICE_STARTED, {"version": "0.1.0", "build": "bench"})
            elif slot == "C":
                configs += 1
                append(EntryKind.CONFIG_CHANGED, config_payload(configs))
            else:
                round_id, events = next(rounds)
                for kind, payload in events:
                    append(kind, payload, round_id)
    if appender.head.size != entries:
        raise AssertionError(f"generated {appender.head.size} entries, expected {entries}")
    temporary = path.with_suffix(".partial")
    with temporary.open("w", encoding="utf-8") as bundle:
        write_bundle(_SpooledLog(spool, notes, signer.vkey), bundle, first_index=0, end=entries)
    spool.unlink()
    temporary.replace(path)
    info = BundleInfo(
        path=path,
        entries=entries,
        rounds=plan.count("R"),
        checkpoints=len(notes),
        mean_entry_bytes=round(total_bytes / entries),
        vkey=signer.vkey,
        generated_seconds=time.perf_counter() - start,
        last_checkpoint=notes[-1],
    )
    meta = {**info.__dict__, "path": str(path), "bytes": path.stat().st_size}
    path.with_suffix(".json").write_text(json.dumps(meta, indent=1))
    return info


def cached_bundle(cache_dir: Path, entries: int, jobs: int, regenerate: bool) -> BundleInfo:
    cache_dir.mkdir(parents=True, exist_ok=True)
    stem = f"audit-bundle-v{CACHE_FORMAT_VERSION}-{entries}"
    path = cache_dir / f"{stem}-{source_digest()}.jsonl"
    meta_path = path.with_suffix(".json")
    if not regenerate and path.is_file() and meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        if meta.get("bytes") == path.stat().st_size:
            del meta["bytes"]
            meta["path"] = path
            return BundleInfo(**meta)
    for stale in cache_dir.glob(f"{stem}-*"):  # other code versions' bundles of this size
        stale.unlink()
    status(f"generating {path} ({jobs} round-generating processes; cached for later runs)")
    return generate_bundle(path, entries, jobs)


def bundle_entries(path: Path, limit: int | None = None) -> Iterator[bytes]:
    """The stored bytes of the bundle's entries, in order."""
    with path.open(encoding="utf-8") as lines:
        for count, line in enumerate(line for line in lines if line.startswith('{"entry"')):
            if limit is not None and count >= limit:
                return
            yield json.loads(line)["entry"].encode("utf-8")


def verification_breakdown(info: BundleInfo, verifier: Verifier) -> dict[str, float]:
    """Per-entry CPU costs on one core, measured (warm) on the bundle's first entries."""
    sample = list(bundle_entries(info.path, 8_000))
    lines = [json.dumps({"entry": data.decode("utf-8")}, ensure_ascii=False) for data in sample]
    decoded = [decode_entry(data, verifier) for data in sample]
    parsed = [json.loads(data) for data in sample]
    costs: dict[str, float] = {}

    def timed(name: str, work: Callable[[], object]) -> None:
        work()  # warm caches (key objects, the rules' reading tables)
        began = time.perf_counter()
        work()
        costs[name] = (time.perf_counter() - began) / len(sample) * 1e6

    def replay_all() -> None:
        replay = RoundReplay()
        for entry in decoded:
            if entry.kind.is_round_event and entry.round_id is not None:
                replay.feed(entry.kind, entry.round_id, entry.payload)

    def tree_all() -> None:
        frontier = Frontier()
        for data in sample:
            frontier, _ = frontier.append(leaf_hash(data))

    timed("line", lambda: [json.loads(line)["entry"].encode() for line in lines])
    timed("decode", lambda: [decode_entry(data, verifier) for data in sample])
    timed("json", lambda: [json.loads(data) for data in sample])
    timed("canonical", lambda: [canonical_json(obj, index=None) for obj in parsed])
    timed("rfc8785", lambda: [rfc8785.dumps(obj) for obj in parsed])
    timed("c_json", lambda: [compact_sorted_json(obj) for obj in parsed])
    timed("replay", replay_all)
    timed("tree", tree_all)
    same = sum(compact_sorted_json(obj) == data for obj, data in zip(parsed, sample, strict=True))
    costs["c_json_same"] = same / len(sample)
    return costs


def compact_sorted_json(obj: object) -> bytes:
    """The standard library's C encoder with sorted keys and no whitespace: equal to RFC 8785
    for ASCII documents without floats, which is what a fast path could rely on."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def reset_peak_memory() -> None:
    """Reset this process's peak RSS (VmHWM), where Linux allows it."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def peak_memory_gb() -> float:
    """This process's peak RSS since :func:`reset_peak_memory` (else since it started)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1e6
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def bench_verification(summary: Summary, info: BundleInfo) -> None:
    size_mb = info.path.stat().st_size / 1e6
    heading(
        f"3. verify_bundle on {info.entries:,} entries ({info.rounds:,} rounds of 2-6 seats; "
        f"{info.checkpoints:,} checkpoints; {size_mb:,.0f} MB; mean entry {info.mean_entry_bytes}"
        " bytes)"
    )
    print(f"  bundle {info.path} (generated in {info.generated_seconds:,.0f} s; verified afresh)")
    verifier = Verifier.from_vkey(info.vkey)
    signed_size = info.mean_entry_bytes - SIGNATURE_MEMBER_BYTES
    verify_before = raw_verify_rate(signed_size)
    costs = verification_breakdown(info, verifier)

    def progress(done: int, total: int) -> None:
        if done % 100_000 == 0:
            status(
                f"verified {done:,} of {total:,} ({done / (time.perf_counter() - began):,.0f}/s)"
            )

    reset_peak_memory()
    began = time.perf_counter()
    with info.path.open("rb") as lines:
        result = verify_bundle(lines, pinned_keys=[verifier], progress=progress, jobs=None)
    elapsed = time.perf_counter() - began
    peak_gb = peak_memory_gb()
    verify_after = raw_verify_rate(signed_size)
    raw = (verify_before + verify_after) / 2
    rate = info.entries / elapsed
    print("  " + result.summary().replace("\n", "\n  "))
    complete = (
        result.ok
        and result.entries == info.entries
        and result.rounds_settled == info.rounds
        and result.rounds_open == result.rounds_voided == 0
    )
    report(
        f"Ed25519 verify, raw ({signed_size}-byte message)",
        f"{raw:,.0f}/s",
        f"one core (before {verify_before:,.0f}, after {verify_after:,.0f}); "
        f"two cores {2 * raw:,.0f}/s",
    )
    report(
        f"verify_bundle, jobs=None ({os.cpu_count()} worker processes)",
        f"{rate:,.0f} entries/s",
        f"{elapsed:,.1f} s; {rate / raw:.2f} x raw verify (one core), "
        f"{rate / (2 * raw):.2f} x two cores; peak RSS of the main process {peak_gb:.1f} GB",
    )
    print("  where the time goes: CPU per entry on one core, warm, first 8,000 entries")
    report(
        "    decode_entry (in the worker processes)",
        f"{costs['decode']:.1f} us",
        f"json.loads {costs['json']:.1f} + canonical check {costs['canonical']:.1f} + "
        f"raw verify {1e6 / raw:.1f} + field checks",
    )
    report(
        "      canonical check: C json.dumps(sort_keys) of the objects",
        f"{costs['c_json']:.1f} us",
        f"byte-identical to the entry for {costs['c_json_same']:.0%} of them; the "
        f"rfc8785 package, for values outside that fast path: {costs['rfc8785']:.1f} us",
    )
    report(
        "    round replay: fairness verifier + settlement",
        f"{costs['replay']:.1f} us",
        f"in the worker processes, {CHECK_BATCH} checks a task "
        f"({4 * costs['replay'] / 1e3:.2f} ms per round)",
    )
    report(
        "    bundle line + leaf hash + frontier",
        f"{costs['line'] + costs['tree']:.1f} us",
        "main process, serial (plus unpickling each decoded entry, and the chain checks)",
    )
    cpu = costs["decode"] + costs["replay"] + costs["line"] + costs["tree"]
    report(
        "    all parts",
        f"{cpu:.1f} us",
        f"two cores cap the rate at {2e6 / cpu:,.0f}/s ({2e6 / cpu / (2 * raw):.2f} x two-core "
        "raw); the rest of the gap is the main process's share (unpickling the decoded "
        "entries, the chain and event-order checks) and the queues",
    )
    verdict = "VALID" if result.ok else f"INVALID: {result.failure}"
    report("result", verdict, "all rounds settled and replayed" if complete else "INCOMPLETE")
    summary.add(
        f"verify_bundle, {info.entries:,} entries ({info.rounds:,} rounds), 2 cores",
        f"{rate:,.0f} entries/s ({elapsed:,.0f} s), {verdict}",
        f"raw Ed25519 verify {raw:,.0f}/s one core, {2 * raw:,.0f}/s two cores",
        f"{rate / raw:.2f} x one core; {rate / (2 * raw):.2f} x two cores",
        ">= 0.8 x raw verify on both cores (issue)",
    )
    if not complete:
        raise SystemExit(f"the bundle did not verify completely: {result.summary()}")


# --- 4: proofs ------------------------------------------------------------------------------------


class CountingReader:
    """A NodeReader that counts the reads it passes on."""

    def __init__(self, tree: MemoryTree) -> None:
        self.tree = tree
        self.reads = 0

    def node(self, level: int, index: int) -> bytes:
        self.reads += 1
        return self.tree.node(level, index)


def load_tree(info: BundleInfo, directory: Path) -> tuple[MemoryTree, list[bytes], LogReader]:
    """The bundle's tree in memory and in a SQLite store (its log_nodes and head, bulk-loaded)."""
    tree = MemoryTree()
    leaves: list[bytes] = []
    backend = SqliteBackend(directory / "proofs.db")
    connection = backend.connect()
    create_schema(backend, connection)
    connection.execute("PRAGMA synchronous = OFF")  # the bulk load only; reads are unaffected
    connection.execute("BEGIN")
    rows: list[tuple[int, int, bytes]] = []
    for data in bundle_entries(info.path):
        leaf = leaf_hash(data)
        leaves.append(leaf)
        rows.extend((node.level, node.index, node.hash) for node in tree.append(leaf))
        if len(rows) >= 100_000:
            connection.executemany(
                "INSERT INTO log_nodes (level, idx, hash) VALUES (?, ?, ?)", rows
            )
            rows.clear()
    connection.executemany("INSERT INTO log_nodes (level, idx, hash) VALUES (?, ?, ?)", rows)
    size = tree.size
    connection.execute(
        "UPDATE log_head SET size = ?, prev_hash = ?, frontier = ? WHERE id = 1",
        (size, leaves[-1].hex(), b"".join(tree.frontier.hashes)),
    )
    connection.execute(
        "INSERT INTO log_checkpoints (size, note) VALUES (?, ?)", (size, info.last_checkpoint)
    )
    connection.execute("COMMIT")
    connection.close()
    return tree, leaves, LogReader(backend)


def time_each(calls: Sequence[Callable[[], list[bytes]]]) -> tuple[float, list[list[bytes]]]:
    """Mean microseconds per call, and the results."""
    began = time.perf_counter()
    results = [call() for call in calls]
    return (time.perf_counter() - began) / len(calls) * 1e6, results


def sqlite_reads(reader: LogReader, calls: Sequence[Callable[[], list[bytes]]]) -> float:
    """Mean log_nodes reads per call, counted on the reader's connection."""
    count = 0

    def trace(statement: str) -> None:
        nonlocal count
        if "FROM log_nodes" in statement:
            count += 1

    with reader.backend.reader() as connection:
        connection.set_trace_callback(trace)
        try:
            for call in calls:
                call()
        finally:
            connection.set_trace_callback(None)
    return count / len(calls)


def bench_proofs(summary: Summary, info: BundleInfo, directory: Path, samples: int) -> None:
    began = time.perf_counter()
    tree, leaves, reader = load_tree(info, directory)
    n = tree.size
    heading(
        f"4. Proofs from a SQLite store holding the bundle's tree ({n:,} leaves; log_nodes, head "
        f"and checkpoint bulk-loaded in {time.perf_counter() - began:,.0f} s), {samples:,} random"
        " proofs per row"
    )
    signed = open_checkpoint(info.last_checkpoint, ORIGIN, [Verifier.from_vkey(info.vkey)])
    if signed.checkpoint.size != n or signed.checkpoint.root_hash != tree.root():
        raise AssertionError("the bundle's last checkpoint does not match its tree")
    rng = random.Random(6962)
    print(
        f"  {'proof':<12} {'size n':>10} {'log2 n':>7} {'SQLite store':>14} {'MemoryTree':>12}"
        f" {'ratio':>7} {'node reads (mean, SQLite = memory)':>36}"
    )
    sizes = sorted({min(n, 1_000), min(n, 31_623), n})
    for kind in ("inclusion", "consistency"):
        for size in sizes:
            if kind == "inclusion":
                args = [(rng.randrange(size), size) for _ in range(samples)]
                stored = [(lambda a=a: reader.inclusion_proof(*a)) for a in args]
                memory = [(lambda a=a: tree.inclusion_proof(*a)) for a in args]
            else:
                args = [(rng.randrange(1, size), size) for _ in range(samples)]
                stored = [(lambda a=a: reader.consistency_proof(*a)) for a in args]
                memory = [(lambda a=a: tree.consistency_proof(*a)) for a in args]
            stored_us, stored_proofs = time_each(stored)
            memory_us, memory_proofs = time_each(memory)
            if stored_proofs != memory_proofs:
                raise AssertionError(f"{kind} proofs from SQLite differ from MemoryTree's")
            root = tree.root(size)
            for (first, second), proof in zip(args, stored_proofs, strict=True):
                if kind == "inclusion":
                    verify_inclusion(leaves[first], first, second, proof, root)
                else:
                    verify_consistency(first, second, proof, tree.root(first), root)
            counter = CountingReader(tree)
            make = inclusion_proof if kind == "inclusion" else consistency_proof
            for first, second in args:
                make(counter, first, second)
            memory_reads = counter.reads / samples
            stored_reads = sqlite_reads(reader, stored)
            log2 = math.log2(size)
            print(
                f"  {kind:<12} {size:>10,} {log2:>7.1f} {stored_us:>11.1f} us {memory_us:>9.1f} us"
                f" {stored_us / memory_us:>6.1f}x {stored_reads:>14.1f} = {memory_reads:.1f}"
                f" ({stored_reads / log2:.2f} x log2 n)",
                flush=True,
            )
            if size == n:
                summary.add(
                    f"{kind.capitalize()} proof, SQLite store, n = {n:,}",
                    f"{stored_us:,.0f} us, {stored_reads:.1f} node reads (log2 n = {log2:.1f})",
                    f"MemoryTree {memory_us:,.1f} us, same reads",
                    f"{stored_us / memory_us:.1f} x slower",
                    "O(log n) reads",
                )
    print("  (every proof equals MemoryTree's and verifies against the bundle's signed root)")
    reader.close()


# --- Main -----------------------------------------------------------------------------------------


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a tenth of the default sizes")
    parser.add_argument("--entries", type=int, help="bundle size (default 1,000,000)")
    parser.add_argument("--appends", type=int, help="group-commit appends (default 20,000)")
    parser.add_argument("--sequential", type=int, help="one-per-call appends (default 2,000)")
    parser.add_argument("--proof-samples", type=int, help="proofs per row (default 2,000)")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("GNAU_TEST_DATABASE_URL", DEFAULT_POSTGRES_URL),
        help="admin URL of a PostgreSQL server where a scratch database may be created",
    )
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "gnau-bench-cache",
        help="where the generated bundle is cached",
    )
    parser.add_argument("--regenerate", action="store_true", help="ignore a cached bundle")
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="round-generating processes"
    )
    arguments = parser.parse_args(argv)
    scale = 10 if arguments.quick else 1
    defaults = {
        "entries": 1_000_000,
        "appends": 20_000,
        "sequential": 2_000,
        "proof_samples": 2_000,
    }
    for name, value in defaults.items():
        if getattr(arguments, name) is None:
            setattr(arguments, name, value // scale)
    return arguments


def main(argv: Sequence[str] | None = None) -> None:
    arguments = parse_arguments(argv)
    started = time.perf_counter()
    summary = Summary()
    print(
        f"Gnau Dealer audit log benchmark: {os.cpu_count()} cores, Python "
        f"{sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}"
    )
    counts = (arguments.appends, arguments.sequential)
    round_count = math.ceil(sum(counts) / 4)
    status(f"generating {round_count:,} rounds for the append tests")
    rounds = list(rounds_in_parallel(10_000_000, round_count, arguments.jobs))
    with tempfile.TemporaryDirectory(prefix="gnau-bench-") as scratch:
        directory = Path(scratch)
        bench_sqlite(summary, directory, rounds, counts)
        if arguments.no_postgres:
            heading("2. Durable appends, PostgreSQL: skipped (--no-postgres)")
            summary.add("PostgreSQL", "skipped (--no-postgres)", "", "")
        else:
            bench_postgres(summary, arguments.postgres_url, rounds, counts)
        info = cached_bundle(
            arguments.cache_dir, arguments.entries, arguments.jobs, arguments.regenerate
        )
        bench_verification(summary, info)
        bench_proofs(summary, info, directory, arguments.proof_samples)
    heading(f"Summary ({time.perf_counter() - started:,.0f} s in all)")
    print(summary.markdown())


if __name__ == "__main__":
    main()
