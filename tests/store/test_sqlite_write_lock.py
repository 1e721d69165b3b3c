"""Steps from an event loop on SQLite take the write lock on the loop when it is free, and wait
for it on a thread, without stalling the loop, while another connection holds it; processes
sharing the file take turns (the writers' turn)."""

from __future__ import annotations

import asyncio
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path

from gnau_service.audit.entries import EntryKind
from gnau_service.audit.signing import LogSigner
from gnau_service.store import open_store
from gnau_service.store.sqlite import BUSY_SECONDS, FileTurn, SqliteBackend


def busy_timeout(connection: sqlite3.Connection) -> int:
    return int(connection.execute("PRAGMA busy_timeout").fetchone()[0])


def test_a_free_write_lock_is_taken_at_once_and_the_busy_handler_kept(tmp_path: Path) -> None:
    backend = SqliteBackend(tmp_path / "gnau.db")
    mine, other = backend.connect(), backend.connect()
    try:
        assert backend.begin_at_once(mine)
        assert mine.in_transaction
        assert busy_timeout(mine) == round(BUSY_SECONDS * 1000)
        # Held now: another connection is told so at once, not after the busy timeout.
        assert not backend.begin_at_once(other)
        assert not other.in_transaction
        assert busy_timeout(other) == round(BUSY_SECONDS * 1000)
        mine.execute("COMMIT")
        assert backend.begin_at_once(other)
        other.execute("ROLLBACK")
    finally:
        mine.close()
        other.close()


def test_a_step_waits_for_a_held_write_lock_off_the_loop(tmp_path: Path, signer: LogSigner) -> None:
    database = tmp_path / "gnau.db"
    with open_store(f"sqlite:///{database}", signer) as store:
        holder = sqlite3.connect(database, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")

        async def step_while_held() -> tuple[int, int]:
            step = asyncio.ensure_future(
                store.run_async(lambda tx: tx.append(EntryKind.CONFIG_CHANGED, {"n": 0}))
            )
            ticks = 0
            while ticks < 20:  # the loop keeps turning while the step waits for the lock
                await asyncio.sleep(0.01)
                ticks += 1
            assert not step.done()
            holder.execute("COMMIT")
            entry = await asyncio.wait_for(step, 10)
            return ticks, entry.index

        ticks, index = asyncio.run(step_while_held())
        holder.close()
        assert (ticks, index) == (20, 0)
        assert store.size() == 1


def test_processes_take_turns_to_write_and_a_waiting_one_is_woken_at_once(
    tmp_path: Path, signer: LogSigner
) -> None:
    """The writers' turn (a flock beside the file): a store whose turn another holds waits for
    it off the loop, and writes as soon as it is let go, or as soon as its holder's file is
    closed (the kernel lets a dead process's lock go)."""
    database = tmp_path / "gnau.db"
    with open_store(f"sqlite:///{database}", signer) as store:
        other = FileTurn(SqliteBackend(database).turn_path)  # another process's turn, in effect
        assert other.take_at_once()

        async def step_while_turn_held(let_go: Callable[[], None]) -> int:
            step = asyncio.ensure_future(
                store.run_async(lambda tx: tx.append(EntryKind.CONFIG_CHANGED, {"n": 0}))
            )
            for _ in range(20):  # the loop keeps turning while the step waits for its turn
                await asyncio.sleep(0.01)
            assert not step.done()
            let_go()
            return (await asyncio.wait_for(step, 10)).index

        assert asyncio.run(step_while_turn_held(other.release)) == 0
        assert other.take_at_once()
        assert asyncio.run(step_while_turn_held(other.close)) == 1
        # Between batches the store holds no turn: another takes it at once.
        again = FileTurn(SqliteBackend(database).turn_path)
        assert again.take_at_once()
        again.close()
    assert stat.S_IMODE((tmp_path / "gnau.db-turn").stat().st_mode) == 0o600
