"""Start-up against every backend: the schema version decides whether any DDL runs, a database
from before versions is upgraded in place, a newer one is refused untouched, and what goes wrong
is a one-line StoreError naming the database, never its password."""

from __future__ import annotations

import contextlib
import secrets
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from gnau_service.audit.entries import EntryKind
from gnau_service.audit.log import LogAppender, LogHead
from gnau_service.audit.signing import LogSigner
from gnau_service.store import Store, StoreError, Transaction, open_store
from gnau_service.store.backend import Backend
from gnau_service.store.migrations import MIGRATIONS, SCHEMA_VERSION
from gnau_service.store.postgres import PostgresBackend
from gnau_service.store.schema import SchemaTooOld
from gnau_service.store.sequencer import write_log
from gnau_service.store.sqlite import SqliteBackend
from gnau_service.store.transaction import utc_now
from tests.audit.logs import chain_failure, new_signer
from tests.postgres import admin_url, fresh_database, require_postgres
from tests.serving import free_port
from tests.steps import run_steps
from tests.store.test_store import append_many


def execute(url: str, sql: str) -> list[tuple[Any, ...]]:
    """One statement on a plain connection of the database's own driver: no store code."""
    if url.startswith("sqlite:///"):
        path = url.removeprefix("sqlite:///")
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
            return connection.execute(sql).fetchall()
    with psycopg.connect(url, autocommit=True) as connection:
        cursor = connection.execute(sql.encode())
        return cursor.fetchall() if cursor.description else []


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite:///")


def stored_version(url: str) -> int | None:
    """The schema version the database records, or None where it records none."""
    if is_sqlite(url):
        return int(execute(url, "PRAGMA user_version")[0][0]) or None
    if execute(url, "SELECT to_regclass('gnau_schema')") == [(None,)]:
        return None
    return int(execute(url, "SELECT version FROM gnau_schema")[0][0])


def set_version(url: str, version: int | None) -> None:
    """Record ``version``; None makes the database look as gnau left it before versions."""
    if is_sqlite(url):
        execute(url, f"PRAGMA user_version = {version or 0}")
    elif version is None:
        execute(url, "DROP TABLE IF EXISTS gnau_schema")
    else:
        execute(url, f"UPDATE gnau_schema SET version = {version}")


def older_gnau(url: str, version: int) -> Backend:
    """The backend of a gnau that knew the migrations up to ``version`` only."""
    known = MIGRATIONS[:version]
    if is_sqlite(url):
        return SqliteBackend(url.removeprefix("sqlite:///"), migrations=known)
    return PostgresBackend(url, migrations=known)


def append_as_older_gnau(store: Store, count: int) -> list[int]:
    """Append ``count`` entries as a gnau of an older schema did: straight into the log tables
    under the head lock, in one transaction (it had no outbox, which today's steps write)."""
    backend = store.backend
    connection = backend.connect()
    try:
        backend.run(connection, backend.begin_sql)
        head = LogHead.decode(*backend.run(connection, backend.read_head_sql)[0])
        appender = LogAppender(store.signer, head)
        appended = [
            appender.append(EntryKind.CONFIG_CHANGED, {"i": i}, time=utc_now())
            for i in range(count)
        ]
        write_log(backend, connection, appender, appended, {})
        backend.run(connection, "COMMIT")
    finally:
        connection.close()
    return [entry.index for entry in appended]


def database_name(url: str) -> str:
    return url.removeprefix("sqlite:///") if is_sqlite(url) else url.rsplit("/", 1)[1]


def test_a_new_database_records_the_schema_version(database_url: str, signer: LogSigner) -> None:
    with open_store(database_url, signer) as store:
        append_many(store, 1)
    assert stored_version(database_url) == SCHEMA_VERSION == 11  # the files in store/migrations


def test_a_database_from_before_schema_versions_is_upgraded_only_when_asked(
    database_url: str, signer: LogSigner
) -> None:
    with Store(older_gnau(database_url, 1), signer) as store:
        append_as_older_gnau(store, 5)
        entries = store.entries(0, 5)
    set_version(database_url, None)  # the tables as gnau left them before versions
    assert stored_version(database_url) is None

    with pytest.raises(SchemaTooOld, match=r"version 0 is older than this gnau.*gnau db migrate"):
        open_store(database_url, signer)
    assert stored_version(database_url) is None
    with open_store(database_url, signer, migrate=True) as store:
        assert store.entries(0, 5) == entries
        assert append_many(store, 2) == [5, 6]
        assert chain_failure(store.entries(0, 7), signer.verifier) is None
        assert store.public_keys() == [signer.vkey]
    assert stored_version(database_url) == SCHEMA_VERSION
    driver_error = sqlite3.Error if is_sqlite(database_url) else psycopg.Error
    with pytest.raises(driver_error, match="append-only"):
        execute(database_url, "UPDATE log_entries SET kind = 'CHANGED'")


def test_a_newer_schema_is_refused_and_left_alone(database_url: str, signer: LogSigner) -> None:
    with open_store(database_url, signer) as store:
        append_many(store, 1)
    set_version(database_url, SCHEMA_VERSION + 1)

    with pytest.raises(StoreError) as refused:
        open_store(database_url, new_signer())
    message = str(refused.value)
    assert message.endswith(
        f"database schema version {SCHEMA_VERSION + 1} is newer than this gnau"
        f" ({SCHEMA_VERSION}): upgrade gnau"
    )
    assert database_name(database_url) in message
    assert stored_version(database_url) == SCHEMA_VERSION + 1
    assert execute(database_url, "SELECT vkey FROM log_keys") == [(signer.vkey,)]


@pytest.mark.system
def test_processes_starting_together_on_a_new_database_take_turns(
    database_url: str, signer: LogSigner
) -> None:
    starters = 6
    together = threading.Barrier(starters)
    failures: list[BaseException] = []

    def start() -> None:
        together.wait()
        try:
            with open_store(database_url, signer) as store:
                append_many(store, 1)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=start) for _ in range(starters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert stored_version(database_url) == SCHEMA_VERSION
    assert execute(database_url, "SELECT size FROM log_head") == [(starters,)]


@pytest.mark.system
def test_a_current_schema_starts_beside_a_writer_in_mid_batch(signer: LogSigner) -> None:
    # A batch holds the head row and writes every table; start-up must not wait for any of
    # those locks (so it cannot deadlock with the batch). A lock timeout turns a wait into
    # an error at once, instead of a hang.
    with fresh_database() as url:
        with open_store(url, signer) as store:
            append_many(store, 1)
        with psycopg.connect(url) as writer:
            writer.execute("SELECT size FROM log_head WHERE id = 1 FOR UPDATE")
            writer.execute(
                "LOCK TABLE log_entries, log_nodes, log_checkpoints, log_keys, rounds, requests"
                " IN ROW EXCLUSIVE MODE"
            )
            newcomer = new_signer()
            with open_store(f"{url}?options=-c%20lock_timeout%3D1000", newcomer) as store:
                # Start-up got through; a key that never signed for the log is not registered
                # (it signs nothing: see test_key_rotation.py).
                assert store.public_keys() == [signer.vkey]
            writer.rollback()


@pytest.mark.system
def test_upgrades_beside_live_writers_neither_fail_nor_deadlock(signer: LogSigner) -> None:
    # The DDL itself locks tables that writers hold: an upgrade must queue behind a live
    # batch, never lock in the other order. Each round here forgets the version, so every
    # start runs the whole upgrade while another store appends.
    upgrades = 10
    with fresh_database() as url:
        with open_store(url, signer) as writer:
            stop = threading.Event()
            errors: list[BaseException] = []
            appended = 0

            def keep_appending() -> None:
                nonlocal appended
                while not stop.is_set():
                    try:
                        appended += len(append_rounds(writer, 10))
                    except BaseException as error:
                        errors.append(error)

            appender = threading.Thread(target=keep_appending)
            appender.start()
            failures = []
            try:
                while appended == 0 and not errors:  # the writer is live before the first upgrade
                    time.sleep(0.01)
                for _ in range(upgrades):
                    set_version(url, None)
                    try:
                        open_store(url, signer, migrate=True).close()
                    except StoreError as error:
                        failures.append(error)
            finally:
                stop.set()
                appender.join()
            assert writer.size() == appended > 0
        assert (failures, errors) == ([], [])
        assert stored_version(url) == SCHEMA_VERSION
        assert deadlocks_in(url) == 0


def append_rounds(store: Store, count: int) -> list[int]:
    """Units that write as the dealer's do: a round's row first, then its log entry."""

    def unit(tx: Transaction) -> int:
        round_id = secrets.token_hex(8)
        tx.execute(
            "INSERT INTO rounds (round_id, table_id, state, record, server_seed, created_at,"
            " updated_at) VALUES (?, 'table-1', 'SETTLED', '{}', '', ?, ?)",
            (round_id, tx.time, tx.time),
        )
        return tx.append(EntryKind.CONFIG_CHANGED, {"round": round_id}).index

    return run_steps(store, [unit] * count)


def deadlocks_in(url: str) -> int:
    """The deadlocks PostgreSQL has detected in the database: each is one transaction that was
    made to fail, even if it was rerun unseen. Ask once the connections to it are closed: each
    reports its count when idle or closing, so a count can lag (never run ahead)."""
    rows = execute(url, "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
    return int(rows[0][0])


def test_an_unreachable_postgresql_is_named_without_its_password(signer: LogSigner) -> None:
    port = free_port()  # nothing listens there
    url = f"postgresql://gnau:pass-in-user@127.0.0.1:{port}/gnau?password=pass-in-query"
    with pytest.raises(StoreError) as refused:
        open_store(url, signer)
    message = str(refused.value)
    assert "\n" not in message
    assert f"127.0.0.1:{port}/gnau" in message
    assert "pass-in" not in message
    assert "cannot connect" in message


def test_a_missing_postgresql_database_is_named(signer: LogSigner) -> None:
    require_postgres()
    name = f"gnau_missing_{secrets.token_hex(4)}"
    with pytest.raises(StoreError, match=f"{name}.*does not exist") as refused:
        open_store(f"{admin_url().rsplit('/', 1)[0]}/{name}", signer)
    assert "\n" not in str(refused.value)


def test_a_file_that_is_not_a_database_is_named(tmp_path: Path, signer: LogSigner) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database, " * 100)
    with pytest.raises(StoreError, match="not a database") as refused:
        open_store(f"sqlite:///{path}", signer)
    assert str(refused.value).startswith(f"{path}: ")
