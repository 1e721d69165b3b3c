"""The store, against every backend: appends, group commit, proofs, append-only, durability."""

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.checkpoint import Checkpoint
from gnau_service.audit.entries import EntryKind, decode_entry
from gnau_service.audit.merkle import (
    MemoryTree,
    leaf_hash,
    verify_consistency,
    verify_inclusion,
)
from gnau_service.audit.note import SignedNote
from gnau_service.audit.signing import LogSigner
from gnau_service.store import DatabaseUrlError, Store, StoreError, Transaction, open_store
from gnau_service.store.transaction import utc_now
from tests.audit.logs import chain_failure
from tests.steps import run_step, run_steps


def append_many(store: Store, count: int, **payload: object) -> list[int]:
    """Queue ``count`` appends at once; the indices they got, in increasing order (units
    queued together run side by side on PostgreSQL, so their events may enter the log in any
    order: only a step that waits for another is ordered after it)."""
    units = [
        lambda tx, i=i: tx.append(EntryKind.CONFIG_CHANGED, {"i": i, **payload})
        for i in range(count)
    ]
    return sorted(entry.index for entry in run_steps(store, units))


def test_appends_get_gap_free_indices_and_read_back(database_url: str, signer: LogSigner) -> None:
    with open_store(database_url, signer) as store:
        assert append_many(store, 300) == list(range(300))
        entries = store.entries(0, 1000)
        assert len(entries) == store.size() == 300
        assert chain_failure(entries, signer.verifier) is None
        decoded = [decode_entry(data, signer.verifier) for data in entries]
        assert sorted(entry.payload["i"] for entry in decoded) == list(range(300))
        assert store.entries(290, 295) == entries[290:295]
        assert list(store.iter_entries(0)) == entries


def test_every_batch_ends_with_a_signed_checkpoint_of_its_root(
    database_url: str, signer: LogSigner
) -> None:
    with open_store(database_url, signer) as store:
        append_many(store, 50)
        tree = MemoryTree()
        for data in store.entries(0, 50):
            tree.append(leaf_hash(data))
        notes = store.checkpoints()
        assert notes, "no checkpoint was written"
        for text in notes:
            note = SignedNote.parse(text)
            note.verify([signer.verifier])
            checkpoint = Checkpoint.parse(note.text)
            assert checkpoint.origin == signer.origin
            assert checkpoint.root_hash == tree.root(checkpoint.size)
        assert Checkpoint.parse(SignedNote.parse(store.checkpoint() or "").text).size == 50


def test_proofs_verify_against_the_stored_tree(database_url: str, signer: LogSigner) -> None:
    with open_store(database_url, signer) as store:
        append_many(store, 37)
        entries = store.entries(0, 37)
        tree = MemoryTree()
        for data in entries:
            tree.append(leaf_hash(data))
        for size in (1, 2, 7, 16, 37):
            root = tree.root(size)
            for index in {0, size // 2, size - 1}:
                proof = store.inclusion_proof(index, size)
                assert proof == tree.inclusion_proof(index, size)
                verify_inclusion(leaf_hash(entries[index]), index, size, proof, root)
            for size1 in {1, size // 2 or 1, size}:
                proof = store.consistency_proof(size1, size)
                verify_consistency(size1, size, proof, tree.root(size1), root)
        with pytest.raises(ValueError, match="fewer than the 38"):
            store.inclusion_proof(0, 38)


def _raises_after_writing(tx: Transaction) -> None:
    tx.append(EntryKind.CONFIG_CHANGED, {"doomed": True})
    tx.execute("INSERT INTO log_checkpoints (size, note) VALUES (?, ?)", (999, "x"))
    raise RuntimeError("the unit changed its mind")


def _raises_before_writing(tx: Transaction) -> None:
    tx.append(EntryKind.CONFIG_CHANGED, {"doomed": True})
    tx.execute("SELECT size FROM log_head")
    raise RuntimeError("the unit changed its mind")


def _refused_by_the_database(tx: Transaction) -> None:
    tx.append(EntryKind.CONFIG_CHANGED, {"doomed": True})
    tx.execute("INSERT INTO log_checkpoints (size, note) VALUES (?, ?)", (999, "x"))
    tx.execute("UPDATE log_checkpoints SET note = 'y'")  # append-only: refused


def _appends_what_no_entry_may_hold(tx: Transaction) -> None:
    # Refused by Transaction.append (EntryError), not by the sequencer once committed: then it
    # took its batch down with it (SQLite), or stopped the log (PostgreSQL: the sequencer
    # failed on it at every attempt).
    tx.append(EntryKind.CONFIG_CHANGED, {"doomed": 1.5})


FAILING_UNITS = [
    _raises_after_writing,
    _raises_before_writing,
    _refused_by_the_database,
    _appends_what_no_entry_may_hold,
]
FAILURES = r"changed its mind|append-only|every number"


@pytest.mark.parametrize("failing", FAILING_UNITS)
def test_a_failing_unit_changes_nothing_and_spares_its_batch(
    database_url: str, signer: LogSigner, failing: Callable[[Transaction], None]
) -> None:
    with open_store(database_url, signer) as store:
        # Queued in one turn of the loop behind a first unit that writes nothing: one batch.
        first, before, doomed, after = run_steps(
            store,
            [
                lambda tx: True,
                lambda tx: tx.append(EntryKind.CONFIG_CHANGED, {"n": 1}),
                failing,
                lambda tx: tx.append(EntryKind.CONFIG_CHANGED, {"n": 2}),
            ],
            return_exceptions=True,
        )
        assert first is True
        assert isinstance(doomed, Exception)
        assert re.search(FAILURES, str(doomed))
        assert sorted((before.index, after.index)) == [0, 1]
        assert_only_the_neighbours_were_logged(store, signer)


@pytest.mark.parametrize("failing", FAILING_UNITS)
def test_a_failing_unit_spares_its_batch_from_an_event_loop(
    database_url: str, signer: LogSigner, failing: Callable[[Transaction], None]
) -> None:
    with open_store(database_url, signer) as store:

        async def three_at_once() -> list[Any]:
            # Queued in the same turn of the loop, they make one batch on an in-process store.
            return await asyncio.gather(
                store.run_async(lambda tx: tx.append(EntryKind.CONFIG_CHANGED, {"n": 1})),
                store.run_async(failing),
                store.run_async(lambda tx: tx.append(EntryKind.CONFIG_CHANGED, {"n": 2})),
                return_exceptions=True,
            )

        before, doomed, after = asyncio.run(three_at_once())
        assert isinstance(doomed, Exception)
        assert re.search(FAILURES, str(doomed))
        assert sorted((before.index, after.index)) == [0, 1]
        assert_only_the_neighbours_were_logged(store, signer)
        # A second event loop (the first is closed) gets a writer of its own.
        entry = asyncio.run(
            store.run_async(lambda tx: tx.append(EntryKind.CONFIG_CHANGED, {"n": 3}))
        )
        assert entry.index == 2


def test_the_outbox_holds_each_payload_as_rfc8785_text_which_the_entry_carries(
    database_url: str, signer: LogSigner
) -> None:
    # Keys that sort differently by code point and by UTF-16 unit, escapes, non-ASCII text.
    payload: dict[str, Any] = {"\U0001f0a1": 1, "\ue000": [True, None], "b": 'q"\n\x01é', "a": {}}

    def unit(tx: Transaction) -> Any:
        entry = tx.append(EntryKind.CONFIG_CHANGED, payload)
        (row,) = tx.execute("SELECT payload FROM log_pending WHERE id = ?", (entry.id,))
        return row[0]

    with open_store(database_url, signer) as store:
        stored = run_step(store, unit)
        assert stored == rfc8785.dumps(payload).decode("utf-8")
        (data,) = store.entries(0, 1)
        assert rfc8785.dumps(payload) in data
        assert decode_entry(data, signer.verifier).payload == payload


def assert_only_the_neighbours_were_logged(store: Store, signer: LogSigner) -> None:
    assert store.checkpoint(999) is None
    assert chain_failure(store.entries(0, 10), signer.verifier) is None
    payloads = [decode_entry(d, signer.verifier).payload for d in store.entries(0, 10)]
    assert sorted(payloads, key=str) == [{"n": 1}, {"n": 2}]


def test_a_unit_cancelled_before_its_batch_is_not_run(database_url: str, signer: LogSigner) -> None:
    with open_store(database_url, signer) as store:

        async def cancel_one() -> Any:
            cancelled = asyncio.ensure_future(
                store.run_async(lambda tx: tx.append(EntryKind.CONFIG_CHANGED, {"n": 0}))
            )
            kept = asyncio.ensure_future(
                store.run_async(lambda tx: tx.append(EntryKind.CONFIG_CHANGED, {"n": 1}))
            )
            await asyncio.sleep(0)  # both are queued; their batch has not started
            assert cancelled.cancel()
            with pytest.raises(asyncio.CancelledError):
                await cancelled
            return await kept

        assert asyncio.run(cancel_one()).index == 0
        assert [decode_entry(d, signer.verifier).payload for d in store.entries(0, 10)] == [
            {"n": 1}
        ]


def test_a_caller_that_gives_up_while_its_unit_runs_leaves_the_writer_working(
    database_url: str, signer: LogSigner
) -> None:
    with open_store(database_url, signer) as store:

        async def give_up() -> None:
            loop = asyncio.get_running_loop()
            caller: asyncio.Future[Any] | None = None

            def unit(tx: Transaction) -> object:
                assert caller is not None
                loop.call_soon_threadsafe(caller.cancel)  # the caller gives up meanwhile
                return tx.append(EntryKind.CONFIG_CHANGED, {"n": 0})

            caller = asyncio.ensure_future(store.run_async(unit))
            with pytest.raises(asyncio.CancelledError):
                await caller
            # The unit committed all the same; the writer answers the next caller.
            entry = await asyncio.wait_for(
                store.run_async(lambda tx: tx.append(EntryKind.CONFIG_CHANGED, {"n": 1})), 10
            )
            assert entry.index == 1

        asyncio.run(give_up())
        assert store.size() == 2


def test_log_tables_are_append_only(database_url: str, signer: LogSigner) -> None:
    with open_store(database_url, signer) as store:
        append_many(store, 3)
        for statement in (
            "UPDATE log_entries SET kind = 'X'",
            "DELETE FROM log_entries",
            "DELETE FROM log_nodes",
            "UPDATE log_checkpoints SET note = ''",
            "DELETE FROM log_keys",
        ):
            with pytest.raises(Exception, match="append-only"):
                run_step(store, lambda tx, statement=statement: tx.execute(statement))
        assert store.size() == 3
        assert len(store.entries(0, 10)) == 3


def test_many_threads_append_without_gaps_or_duplicates(
    database_url: str, signer: LogSigner
) -> None:
    with open_store(database_url, signer) as store:
        results: list[list[int]] = []

        def worker() -> None:
            results.append(append_many(store, 100))

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        indices = sorted(index for result in results for index in result)
        assert indices == list(range(800))
        assert chain_failure(store.entries(0, 800), signer.verifier) is None


def test_a_reopened_store_carries_on_the_same_chain(database_url: str, signer: LogSigner) -> None:
    with open_store(database_url, signer) as store:
        append_many(store, 5)
        head = store.head()
    with open_store(database_url, signer) as store:
        assert store.head() == head
        assert append_many(store, 5) == list(range(5, 10))
        assert chain_failure(store.entries(0, 10), signer.verifier) is None
        assert store.public_keys() == [signer.vkey]


def test_a_closed_store_refuses_work(database_url: str, signer: LogSigner) -> None:
    store = open_store(database_url, signer)
    asyncio.run(store.run_async(lambda tx: tx.append(EntryKind.CONFIG_CHANGED, {"n": 0})))
    store.close()
    with pytest.raises(StoreError, match="closed"):
        asyncio.run(store.run_async(lambda tx: None))


@pytest.mark.parametrize(
    "url", ["mysql://localhost/gnau", "sqlite://relative.db", "sqlite:///", "gnau.db"]
)
def test_unusable_database_urls_are_refused_by_name(url: str, signer: LogSigner) -> None:
    with pytest.raises(DatabaseUrlError, match="sqlite:///"):
        open_store(url, signer)


def test_timestamps_come_from_the_clock_in_utc() -> None:
    assert utc_now().endswith("Z")


APPENDER = """
import asyncio
import sys
from gnau_service.audit.entries import EntryKind
from gnau_service.audit.signing import LogSigner
from gnau_service.store import open_store

url, key_file, count, name = sys.argv[1:]
store = open_store(url, LogSigner.from_key_file("gnau-dealer/test", key_file))


async def append_all():
    for i in range(int(count)):
        payload = {"worker": name, "i": i}
        entry = await store.run_async(lambda tx: tx.append(EntryKind.CONFIG_CHANGED, payload))
        print(entry.index, flush=True)  # acknowledged: it must survive anything from here on


asyncio.run(append_all())
store.close()
"""


@pytest.fixture
def key_file(signer: LogSigner, tmp_path: Path) -> Path:
    path = tmp_path / "log-key.pem"
    pem = signer.signer.private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(pem)
    return path


def spawn_appender(url: str, key_file: Path, count: int, name: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", APPENDER, url, str(key_file), str(count), name],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )


def test_writers_sharing_a_database_never_lose_an_update(
    database_url: str, signer: LogSigner
) -> None:
    # Two stores are two writers, as two processes would be. Steps run side by side, so a unit
    # that changes a row it read locks it (Transaction.row_lock), as the round steps do: then
    # each sees every change committed before it, and the counter and the log agree.
    with open_store(database_url, signer) as first, open_store(database_url, signer) as second:
        run_step(
            first,
            lambda tx: (
                tx.execute("CREATE TABLE counter (id INTEGER PRIMARY KEY, value INTEGER)"),
                tx.execute("INSERT INTO counter (id, value) VALUES (1, 0)"),
            ),
        )

        def advance(tx: Transaction) -> None:
            value = tx.execute(f"SELECT value FROM counter WHERE id = 1{tx.row_lock}")[0][0]
            tx.execute("UPDATE counter SET value = ? WHERE id = 1", (value + 1,))
            tx.append(EntryKind.CONFIG_CHANGED, {"from": value})

        async def both() -> None:
            await asyncio.gather(
                *(store.run_async(advance) for _ in range(100) for store in (first, second))
            )

        asyncio.run(both())
        entries = first.entries(0, 1000)
        assert sorted(decode_entry(d, signer.verifier).payload["from"] for d in entries) == list(
            range(200)
        )
        assert first.query("SELECT value FROM counter WHERE id = 1") == [(200,)]
        assert chain_failure(entries, signer.verifier) is None


@pytest.mark.system
def test_several_processes_share_one_log(
    database_url: str, signer: LogSigner, key_file: Path
) -> None:
    processes = [spawn_appender(database_url, key_file, 60, f"p{n}") for n in range(3)]
    acknowledged = []
    for process in processes:
        out, _ = process.communicate(timeout=120)
        assert process.returncode == 0
        acknowledged += [int(line) for line in out.split()]
    assert sorted(acknowledged) == list(range(180))
    with open_store(database_url, signer) as store:
        entries = store.entries(0, 1000)
        assert len(entries) == 180
        assert chain_failure(entries, signer.verifier) is None
        workers = {decode_entry(d, signer.verifier).payload["worker"] for d in entries}
        assert workers == {"p0", "p1", "p2"}


@pytest.mark.system
def test_acknowledged_entries_survive_a_killed_process(
    database_url: str, signer: LogSigner, key_file: Path
) -> None:
    process = spawn_appender(database_url, key_file, 100_000, "victim")
    assert process.stdout is not None
    acknowledged = [int(process.stdout.readline()) for _ in range(40)]
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    with open_store(database_url, signer) as store:
        entries = store.entries(0, store.size())
        assert len(entries) >= max(acknowledged) + 1
        assert chain_failure(entries, signer.verifier) is None
        assert store.checkpoint() is not None


def test_a_key_rotation_hands_the_log_to_the_new_key(database_url: str, signer: LogSigner) -> None:
    new = LogSigner.from_private_key(signer.origin, Ed25519PrivateKey.generate())
    with open_store(database_url, signer) as store:
        append_many(store, 3)
        rotation = store.rotate_key(new)
        append_many(store, 3)
        entries = store.entries(0, 100)
        assert [decode_entry(e, signer.verifier, new.verifier).key_id for e in entries] == (
            [signer.key_id.hex()] * 4 + [new.key_id.hex()] * 3
        )
        assert decode_entry(entries[rotation.index], signer.verifier).kind is EntryKind.KEY_ROTATED
        assert store.public_keys() == [signer.vkey, new.vkey]
        latest = SignedNote.parse(store.checkpoint() or "")
        assert latest.verify([new.verifier])
