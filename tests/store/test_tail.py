"""The log's tail for an event loop: told of this process's commits at once, of another
process's through PostgreSQL's NOTIFY or SQLite's data version, and of anything else by a slow
poll; newest entries from
memory, older ones from the database, one read for every reader of a range."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from gnau_service.audit.entries import EntryKind
from gnau_service.audit.signing import LogSigner
from gnau_service.store import LogTail, Store, open_store
from tests.postgres import database_of

NEVER = 3600.0  # a poll interval no test waits for: what arrives came another way


@pytest.fixture
def store(database_url: str, signer: LogSigner) -> Iterator[Store]:
    with open_store(database_url, signer) as opened:
        yield opened


async def append(store: Store, count: int) -> None:
    await store.run_async(
        lambda tx: [tx.append(EntryKind.CONFIG_CHANGED, {"n": n}) for n in range(count)]
    )


async def test_this_processs_commits_arrive_with_their_entries(store: Store) -> None:
    tail = LogTail(store, poll_seconds=NEVER)
    await tail.start()
    try:
        size = tail.size
        await append(store, 3)
        assert await asyncio.wait_for(tail.wait_beyond(size + 2), 10) == size + 3
        reads_before = _database_reads(store)
        entries = await tail.read(size, size + 3)
        assert _database_reads(store) == reads_before, "the entries came from memory"
        assert entries == store.entries(size, size + 3)
    finally:
        await tail.stop()


@pytest.mark.system
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_another_processs_commits_arrive_without_waiting_for_the_poll(
    backend: str, tmp_path: Path, signer: LogSigner
) -> None:
    # PostgreSQL says so (NOTIFY); SQLite's data version changes (PRAGMA data_version).
    with (
        database_of(backend, tmp_path / "shared.db") as url,
        open_store(url, signer) as here,
        open_store(url, signer) as there,
    ):
        tail = LogTail(here, poll_seconds=NEVER)
        await tail.start()
        try:
            await asyncio.sleep(0.2)  # LISTEN is in place
            size = tail.size
            moved_at = here.waiters.moved_at
            await append(there, 2)  # another store: another "process"
            assert await asyncio.wait_for(tail.wait_beyond(size + 1), 10) == size + 2
            # ...and the log moved for this process's waiting callers (no false LOG_STALLED
            # while another SQLite worker holds the writers' turn).
            assert here.waiters.moved_at > moved_at
            assert await tail.read(size, size + 2) == there.entries(size, size + 2)
        finally:
            await tail.stop()


async def test_the_poll_finds_what_nobody_announced(tmp_path: Path, signer: LogSigner) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    with open_store(url, signer) as here, open_store(url, signer) as there:
        tail = LogTail(here, poll_seconds=0.05)
        await tail.start()
        try:
            size = tail.size
            await append(there, 1)
            assert await asyncio.wait_for(tail.wait_beyond(size), 10) == size + 1
        finally:
            await tail.stop()


async def test_readers_of_one_range_share_one_read(store: Store) -> None:
    await append(store, 50)
    tail = LogTail(store, poll_seconds=NEVER, cache_bytes=1)  # hardly anything in memory
    await tail.start()
    try:
        before = _database_reads(store)
        pages = await asyncio.gather(*(tail.read(0, 40) for _ in range(30)))
        assert _database_reads(store) - before == 1
        assert all(page == store.entries(0, 40) for page in pages)
    finally:
        await tail.stop()


def test_memory_holds_the_newest_entries_within_its_budget(store: Store) -> None:
    tail = LogTail(store, cache_bytes=1000)
    tail._keep(0, [b"x" * 300] * 5)  # 1,500 bytes: the oldest go
    assert (tail._first, len(tail._entries)) == (2, 3)
    tail._keep(10, [b"y" * 10])  # a gap: the held ones are dropped, these kept
    assert (tail._first, list(tail._entries)) == (10, [b"y" * 10])
    tail._keep(5, [b"z"] * 7)  # ends past what is held: only the part beyond it is added
    assert (tail._first, len(tail._entries)) == (10, 2)


def _database_reads(store: Store) -> int:
    """How many times entries were read from the database, counted by wrapping the reader once.

    The count lives on the store itself: a table keyed by ``id(store)`` would hand a new store
    the count (and the missing wrapper) of a freed one whose id it reuses.
    """
    counter: list[int] | None = getattr(store, "_test_database_reads", None)
    if counter is None:
        counter = [0]
        original = store.entries

        def counted(start: int, end: int) -> list[bytes]:
            counter[0] += 1
            return original(start, end)

        store.entries = counted  # type: ignore[method-assign]
        store._test_database_reads = counter  # type: ignore[attr-defined]
    return counter[0]
