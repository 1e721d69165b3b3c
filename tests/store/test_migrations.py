"""Schema migrations on every backend: released migrations never change; a migrated database has
exactly a new one's schema; rounds played through the real Dealer on schema version 1 survive
the migration, readable, verifiable, and consistent with a checkpoint taken before it."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import secrets
import sqlite3
import uuid
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from gnau_service.audit.bundle import write_bundle
from gnau_service.audit.bundle_verification import verify_bundle
from gnau_service.audit.checkpoint import Checkpoint
from gnau_service.audit.entries import EntryKind, decode_entry
from gnau_service.audit.merkle import verify_consistency
from gnau_service.audit.note import SignedNote
from gnau_service.audit.operators import DEFAULT_OPERATOR
from gnau_service.audit.round_events import with_actor
from gnau_service.audit.signing import LogSigner
from gnau_service.cli.main import main
from gnau_service.rounds import dealer as dealer_module
from gnau_service.rounds.catalogue import Catalogue
from gnau_service.rounds.dealer import Dealer, Idempotency
from gnau_service.rounds.identities import forget_player, lookup_player
from gnau_service.rounds.record import RoundState
from gnau_service.rounds.refusals import RoundNotFound
from gnau_service.rounds.requests import SeatRequest
from gnau_service.rounds.view import RoundView
from gnau_service.rules.currency import Currency
from gnau_service.rules.house_rules import HouseRules
from gnau_service.store import Store, Transaction, open_store
from gnau_service.store.migrations import MIGRATIONS, SCHEMA_VERSION, parse_migrations
from gnau_service.store.schema import APPEND_ONLY_TABLES, SchemaTooOld
from tests.catalogued import catalogued
from tests.postgres import fresh_database
from tests.steps import run_step
from tests.store.test_schema_startup import (
    execute,
    is_sqlite,
    older_gnau,
    set_version,
    stored_version,
)

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "gnau_service" / "store" / "migrations"

#: Every released migration file and its SHA-256. A released migration never changes: a change
#: to the schema is a new migration. Version 1 is the DDL gnau kept in sqlite.py and postgres.py
#: before migrations, copied out unchanged (only the two comment lines above it are new).
RELEASED = {
    "0001_tables.postgresql.sql": (
        "ea7854fed0b1ab2f1845810072fe2e66dfa09bb060905159ca5977e61b9889a2"
    ),
    "0001_tables.sqlite.sql": "45f4aa70de8061de3e6d84537960485316fe48e3e2e33c09434176e86116ee5e",
    "0002_history.postgresql.sql": (
        "7920e1d8bbe38d5ada71ad34abd33de7a29e054320a0a15933a03f66a850be1c"
    ),
    "0002_history.sqlite.sql": "7920e1d8bbe38d5ada71ad34abd33de7a29e054320a0a15933a03f66a850be1c",
    "0003_requests_by_time.postgresql.sql": (
        "1b3254cca673880bed6510a3e97436404897fe1684572d523dd5ecbde8c178b1"
    ),
    "0003_requests_by_time.sqlite.sql": (
        "1b3254cca673880bed6510a3e97436404897fe1684572d523dd5ecbde8c178b1"
    ),
    "0004_checkpoint_cosignatures.postgresql.sql": (
        "0e94b514a62d6cb9f6b9ccdb2c76f3f5094e32b5fe0e7b20e08a33d4747351b9"
    ),
    "0004_checkpoint_cosignatures.sqlite.sql": (
        "59a917ad5688c422e1d7f35e709d095102f8f07dc9f565e5e91995ef8883e10d"
    ),
    "0005_outbox.postgresql.sql": (
        "9037e77ac9c9e4fa93ecaf2e01c812c6d995632dfb69a3d59c7885c354027c9d"
    ),
    "0005_outbox.sqlite.sql": "712a44a51c05225219041d7c1c40adfb67fb11af039170c0839a4e1bc8af7290",
    "0006_players.postgresql.sql": (
        "ad32fe00ce0e962659a81f2197338b1ede8d58d82de788d088dc17dfb2a4fe87"
    ),
    "0006_players.sqlite.sql": ("692080f0051a96b02662e38c0ba6a2194e10090b86559c96961b2af68882a681"),
    "0007_sequencer_lease.postgresql.sql": (
        "8c97356e29595789841315b76bfd215fc77248645419af9a15d1773f27d9f00f"
    ),
    "0007_sequencer_lease.sqlite.sql": (
        "f15eebe6597989ac027bff7a500a473b859684d1a451ce7e263e88c5d7a358af"
    ),
    "0008_private_columns_unanalyzed.postgresql.sql": (
        "734139d7dc19f3bfc912be10e1ec18212e23abcd66271c54c76caf982ad8ac83"
    ),
    "0008_private_columns_unanalyzed.sqlite.sql": (
        "8a776992003b460bbb40aa150915991cbbd39d9878312011a37181d5fcf7400b"
    ),
    "0009_round_deadlines.postgresql.sql": (
        "78c651dd335ad4c174c394df3a02817bd823ed369b15ed0b8fdd8950933d91ee"
    ),
    "0009_round_deadlines.sqlite.sql": (
        "e19d83f9c2c7957b2b0851fab5a5cd2a36d2362934a25ee143e3e37eb554b8b7"
    ),
    "0010_operators.postgresql.sql": (
        "e93c813624fb6eb2fb23491bb03cfa294caad69063fe25b16dfa80aeeef5a171"
    ),
    "0010_operators.sqlite.sql": (
        "274a6808dc0f0ae37ed4e4c0d938da50d3179081be8cbb731410da2441e96715"
    ),
    "0011_catalogue.postgresql.sql": (
        "a9cb7fc395c5f1ce6dd2050cd0b602f21702fa4cefffc873dd700acb957f1994"
    ),
    "0011_catalogue.sqlite.sql": (
        "2001a7fa78b370c8961c4ac0e8711c3a5643429c64d27e6effbdb0d14f55b400"
    ),
}


def test_released_migrations_never_change() -> None:
    for name, digest in RELEASED.items():
        assert hashlib.sha256((MIGRATIONS_DIR / name).read_bytes()).hexdigest() == digest, name
    assert [m.version for m in MIGRATIONS] == list(range(1, 12)) and SCHEMA_VERSION == 11


@pytest.mark.parametrize(
    ("files", "problem"),
    [
        ([("0001_a.sqlite.sql", "-- A\n")], r"scripts for \['sqlite'\] only"),
        ([("0001_a.sqlite.sql", ""), ("0001_a.postgresql.sql", ""), ("0003_c.sqlite.sql", "")],
         r"numbered 1 to 2 without a gap, not \[1, 3\]"),
        ([("1_a.sqlite.sql", "")], "is not named NNNN_<name>.<dialect>.sql"),
    ],
)  # fmt: skip
def test_a_broken_set_of_migrations_is_refused(files: list[tuple[str, str]], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_migrations(files)


def schema_of(url: str) -> list[tuple[object, ...]]:
    """Every table, column, index and trigger of the database, as its catalog describes them."""
    if is_sqlite(url):
        return execute(url, "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name")
    return execute(
        url,
        "SELECT 'column', table_name, column_name || ' ' || data_type || ' ' || is_nullable"
        " FROM information_schema.columns WHERE table_schema = 'public'"
        " UNION ALL SELECT 'index', tablename, indexdef FROM pg_indexes"
        " WHERE schemaname = 'public'"
        " UNION ALL SELECT 'trigger', tgrelid::regclass::text, pg_get_triggerdef(oid)"
        " FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1, 2, 3",
    )


@pytest.mark.parametrize("start", [0, 1, 2, 3, 5])
def test_a_migrated_database_has_the_schema_of_a_new_one(
    database_url: str, signer: LogSigner, tmp_path: Path, start: int
) -> None:
    with Store(older_gnau(database_url, max(start, 1)), signer):
        pass
    if start == 0:
        set_version(database_url, None)  # made before versions were kept
    with open_store(database_url, signer, migrate=True) as store:
        assert [m.version for m in store.migrated] == list(range(start + 1, SCHEMA_VERSION + 1))
    assert stored_version(database_url) == SCHEMA_VERSION

    if is_sqlite(database_url):
        new_url = f"sqlite:///{tmp_path / 'new.db'}"
        open_store(new_url, signer).close()
        assert schema_of(database_url) == schema_of(new_url)
    else:
        new_url = database_url.rsplit("/", 1)[0] + "/" + database_url.rsplit("/", 1)[1] + "_new"
        execute(database_url, f'CREATE DATABASE "{new_url.rsplit("/", 1)[1]}"')
        try:
            open_store(new_url, signer).close()
            assert schema_of(database_url) == schema_of(new_url)
        finally:
            execute(database_url, f'DROP DATABASE "{new_url.rsplit("/", 1)[1]}" WITH (FORCE)')


# -- rounds played on version 1, then migrated --------------------------------------------------

SEATS = [SeatRequest(n, f"player-{n}", 10 * n, client_seed=f"seed {n}".encode()) for n in (1, 2)]


def idempotency() -> Idempotency:
    return Idempotency(str(uuid.uuid4()), "fingerprint")


async def play_rounds(dealer: Dealer, count: int, table: str) -> list[RoundView]:
    """``count`` rounds on ``table`` through the Dealer, each shuffled, dealt, revealed and
    settled, then one more left open (dealt): what a live table leaves in the database."""
    played = []
    for number in range(count + 1):
        shuffled = await dealer.shuffle(
            table, HouseRules(), idempotency(), operator=DEFAULT_OPERATOR, actor="token:test"
        )
        round_id = shuffled.record.round_id
        view = await dealer.deal(
            round_id, SEATS, None, idempotency(), operator=DEFAULT_OPERATOR, actor="token:test"
        )
        if number < count:
            await dealer.reveal(
                round_id, idempotency(), operator=DEFAULT_OPERATOR, actor="token:test"
            )
            view = await dealer.settle(
                round_id, idempotency(), operator=DEFAULT_OPERATOR, actor="token:test"
            )
        played.append(view)
    return played


def bundle_of(store: Store) -> bytes:
    out = io.StringIO()
    write_bundle(store, out, end=store.size())
    return out.getvalue().encode()


@pytest.fixture
def before_operators(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Dealer logs its entries as a gnau from before operators (and the table catalogue)
    did: naming no operator, no table version and no currency."""
    monkeypatch.setattr(
        dealer_module,
        "with_actor_and_operator",
        lambda payload, actor, operator: with_actor(payload, actor),
    )
    # Nor, before the catalogue, the table's version and currency.
    monkeypatch.setattr(dealer_module, "played_at", lambda version, currency: {})


def as_before_operators(text: str) -> str:
    """A round record (or a request's answer) as a gnau from before operators and the table
    catalogue wrote it."""
    document = json.loads(text)
    del document["operator"]
    for member in ("table_version", "currency"):
        document.pop(member, None)
    return json.dumps(document, sort_keys=True)


#: The columns of the tables an older gnau of schema version 1 wrote as it played, in an order
#: their rows can be copied.
VERSION_1_COLUMNS = {
    "log_entries": "idx, kind, round_id, data",
    "log_nodes": "level, idx, hash",
    "log_checkpoints": "size, note",
    "rounds": "round_id, table_id, state, record, server_seed, created_at, updated_at",
}
#: And of schema version 9, the last before operators.
VERSION_9_COLUMNS = {
    **VERSION_1_COLUMNS,
    "log_pending": "id, kind, round_id, payload, time, idx",
    "requests": "request_id, operation, fingerprint, response, created_at",
    "player_keys": "player_id, secret, created_at",
    "player_seats": "player_ref, player_id, round_id, seat_number",
    "round_deadlines": "round_id, due_at",
    "round_completions": "round_id, completed_by, completed_at",
}


def write_as_older_gnau(played_on: Store, database_url: str, columns: dict[str, str]) -> None:
    """Copy what an older gnau leaves after playing into ``database_url`` (made at its schema
    version with the same key): the ``columns`` of each table, the log's head, and the rounds,
    whose records name their entries by log index (an older gnau had no outbox, or had
    integrated it: a request's answer may name its entries by pending id, so the outbox is
    copied where it exists) and, as the requests' answers, no operator. Today's gnau cannot write an
    older schema itself, so the rounds are played on a current store (with
    ``before_operators``) and copied over."""
    dealer = Dealer(played_on)
    rows: dict[str, list[tuple[object, ...]]] = {}
    for table, names in columns.items():
        rows[table] = played_on.query(f"SELECT {names} FROM {table}")
    rows["rounds"] = [
        (
            *row[:3],
            as_before_operators(
                dealer.get(str(row[0]), operator=DEFAULT_OPERATOR).record.to_json()
            ),
            *row[4:],
        )
        for row in rows["rounds"]
    ]
    if "requests" in rows:
        rows["requests"] = [
            (*row[:3], as_before_operators(str(row[3])), *row[4:]) for row in rows["requests"]
        ]
    head = played_on.query("SELECT size, prev_hash, frontier FROM log_head")[0]
    if is_sqlite(database_url):
        path = database_url.removeprefix("sqlite:///")
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
            for table, values in rows.items():
                marks = ", ".join("?" for _ in columns[table].split(","))
                connection.executemany(
                    f"INSERT INTO {table} ({columns[table]}) VALUES ({marks})", values
                )
            connection.execute("UPDATE log_head SET size = ?, prev_hash = ?, frontier = ?", head)
        return
    with psycopg.connect(database_url, autocommit=True) as connection:
        for table, values in rows.items():
            marks = ", ".join("%s" for _ in columns[table].split(","))
            connection.cursor().executemany(
                f"INSERT INTO {table} ({columns[table]}) VALUES ({marks})", values
            )
        connection.execute("UPDATE log_head SET size = %s, prev_hash = %s, frontier = %s", head)
        if "log_pending" in rows:  # the outbox's ids go on from the copied ones
            connection.execute("SELECT setval('log_pending_id_seq', max(id)) FROM log_pending")


@pytest.mark.usefixtures("before_operators")
def test_rounds_played_on_version_1_survive_the_migration(
    database_url: str,
    signer: LogSigner,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with Store(older_gnau(database_url, 1), signer):
        pass  # the version-1 schema, with the log's key
    with open_store(f"sqlite:///{tmp_path / 'played.db'}", signer) as played_on:
        catalogued(played_on, ["table-1"])
        played = asyncio.run(play_rounds(Dealer(played_on), 4, "table-1"))
        write_as_older_gnau(played_on, database_url, VERSION_1_COLUMNS)
        # As they read back after the migration: the default operator's, their entries naming
        # no operator.
        played = [
            replace(
                view,
                record=replace(
                    Dealer(played_on).get(view.record.round_id, operator=DEFAULT_OPERATOR).record,
                    operator_logged=False,
                    table_version=None,
                    currency=None,
                ),
            )
            for view in played
        ]
        before = played_on.checkpoint()
        size_before = played_on.size()
    monkeypatch.undo()  # today's gnau from here on
    assert before is not None
    assert stored_version(database_url) == 1

    # Without being told to, this gnau refuses the older schema and changes nothing.
    with pytest.raises(SchemaTooOld, match="gnau db migrate"):
        open_store(database_url, signer)
    assert stored_version(database_url) == 1

    assert main(["db", "migrate", "--database", database_url]) == 0
    out = capsys.readouterr().out
    assert "migrated from version 1 to version 11" in out
    assert stored_version(database_url) == SCHEMA_VERSION

    with open_store(database_url, signer) as store:
        assert store.migrated == ()
        dealer, shelf = Dealer(store), Catalogue(store)
        for view in played:  # every round reads back as it was played
            again = dealer.get(view.record.round_id, operator=DEFAULT_OPERATOR)
            assert again.record == view.record
            assert again.settlement == view.settlement
        assert [v.record.state for v in played] == [RoundState.SETTLED] * 4 + [RoundState.DEALT]
        # The open round carries on where it stopped, and new ones are played. Migration 9
        # gave it a deadline an hour after its last change (the service completes it then).
        open_round = played[-1].record.round_id
        due = store.query("SELECT round_id, due_at FROM round_deadlines", ())
        last_change = datetime.fromisoformat(played[-1].record.updated_at)
        assert [(row[0], datetime.fromisoformat(str(row[1]))) for row in due] == [
            (open_round, last_change + timedelta(hours=1))
        ]
        asyncio.run(
            dealer.reveal(open_round, idempotency(), operator=DEFAULT_OPERATOR, actor="token:test")
        )
        asyncio.run(
            dealer.settle(open_round, idempotency(), operator=DEFAULT_OPERATOR, actor="token:test")
        )
        # Migration 11 catalogued the table the rounds were played at, under the rule set
        # they were played under; a new table is added as any is.
        assert [(e.operator, e.table_id, e.version) for e in asyncio.run(shelf.tables(None))] == [
            (DEFAULT_OPERATOR, "table-1", 1)
        ]
        catalogued(store, ["table-2"])
        asyncio.run(play_rounds(dealer, 2, "table-2"))

        size = store.size()
        latest = store.checkpoint()
        assert latest is not None
        proof = store.consistency_proof(size_before, size)
        bundle = bundle_of(store)

    old_tree = Checkpoint.parse(SignedNote.parse(before).text)
    new_tree = Checkpoint.parse(SignedNote.parse(latest).text)
    assert (old_tree.size, new_tree.size) == (size_before, size)
    verify_consistency(size_before, size, proof, old_tree.root_hash, new_tree.root_hash)

    report = verify_bundle(
        io.BytesIO(bundle), pinned_keys=[signer.verifier], pinned_checkpoint=before
    )
    assert report.ok, report.summary()
    # 4 settled on version 1, the open one settled after, and 2 more (the third is left open).
    assert (report.rounds_settled, report.rounds_open) == (7, 1)

    history = execute(database_url, "SELECT version FROM gnau_migrations ORDER BY version")
    assert history == [(version,) for version in range(2, 12)]
    index = (
        "SELECT name FROM sqlite_master WHERE name = 'requests_by_time'"
        if is_sqlite(database_url)
        else "SELECT indexname FROM pg_indexes WHERE indexname = 'requests_by_time'"
    )
    assert execute(database_url, index) == [("requests_by_time",)]
    for table in APPEND_ONLY_TABLES:  # the log is as append-only as before
        with pytest.raises(Exception, match="append-only"):
            execute(database_url, f"DELETE FROM {table}")


# -- migration 8: no statistics of the private player columns -----------------------------------


def seat_fifty(tx: Transaction) -> None:
    """Fifty new players, each with a key and a seat, as every gnau since migration 6 seats
    them (the columns of migration 6)."""
    for number in range(50):
        player_id = f"{secrets.token_hex(8)}@players.example"
        tx.execute(
            "INSERT INTO player_keys (player_id, secret, created_at) VALUES (?, ?, ?)",
            (player_id, secrets.token_bytes(32), tx.time),
        )
        tx.execute(
            "INSERT INTO player_seats (player_ref, player_id, round_id, seat_number)"
            " VALUES (?, ?, ?, ?)",
            (f"p-{secrets.token_hex(16)}", player_id, "r-1", number),
        )


#: What ANALYZE keeps of the private player columns, as (column, sample values).
PRIVATE_STATISTICS = """
    SELECT attname, coalesce(histogram_bounds::text, '') || coalesce(most_common_vals::text, '')
    FROM pg_stats WHERE tablename IN ('player_keys', 'player_seats')
    AND attname IN ('player_id', 'secret') ORDER BY 1"""


def test_after_migration_8_analyze_keeps_no_player_id_or_key(signer: LogSigner) -> None:
    """pg_statistic is outside the tables a forget deletes from and an operator's VACUUM (FULL)
    rewrites: what ANALYZE (autovacuum's too) samples into it stays. Before migration 8 it held
    player ids and keys; the migration deletes them, and ANALYZE samples them no more."""
    with fresh_database() as url:
        with Store(older_gnau(url, 7), signer) as store:
            run_step(store, seat_fifty)
        execute(url, "ANALYZE")
        sampled = execute(url, PRIVATE_STATISTICS)
        assert [column for column, _ in sampled] == ["player_id", "player_id", "secret"]
        assert all("@players.example" in values or "\\x" in values for _, values in sampled)
        with open_store(url, signer, migrate=True) as store:
            assert [m.version for m in store.migrated] == [8, 9, 10, 11]
            run_step(store, seat_fifty)
        execute(url, "ANALYZE")
        assert execute(url, PRIVATE_STATISTICS) == []


# -- migration 10: operators --------------------------------------------------------------------

OTHER_OPERATOR = "casino-b"


@pytest.mark.usefixtures("before_operators")
def test_a_version_9_database_becomes_the_default_operator_s(
    database_url: str, signer: LogSigner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rounds, requests and players of schema version 9 (written as a gnau from before operators
    wrote them) are the default operator's after migration 10: they read back, a retry gets its
    first answer, the open round carries on with entries that still name no operator, another
    operator sees none of it, and the log verifies against a checkpoint taken before."""
    with Store(older_gnau(database_url, 9), signer):
        pass  # the version-9 schema, with the log's key
    (tmp_path / "played").mkdir()
    with open_store(f"sqlite:///{tmp_path / 'played' / 'played.db'}", signer) as played_on:
        dealer = Dealer(played_on)
        catalogued(played_on, ["table-1", "table-2"])
        played = asyncio.run(play_rounds(dealer, 2, "table-1"))
        kept = idempotency()
        waiting = asyncio.run(
            dealer.shuffle(
                "table-2", HouseRules(), kept, operator=DEFAULT_OPERATOR, actor="token:test"
            )
        )
        write_as_older_gnau(played_on, database_url, VERSION_9_COLUMNS)
        played = [dealer.get(view.record.round_id, operator=DEFAULT_OPERATOR) for view in played]
        played = [
            replace(view, record=replace(view.record, table_version=None, currency=None))
            for view in played
        ]
        old_key = bytes(
            played_on.query("SELECT secret FROM player_keys WHERE player_id = 'player-1'")[0][0]
        )
        before = played_on.checkpoint()
        size_before = played_on.size()
    monkeypatch.undo()  # today's gnau from here on
    assert before is not None

    with open_store(database_url, signer, migrate=True) as store:
        assert [m.version for m in store.migrated] == [10, 11]
        # Migration 11: each table of the rounds already played is catalogued, in no currency,
        # approving the rule sets it was played under; its TABLE_CHANGED comes at the next start.
        shelf = Catalogue(store)
        tables = asyncio.run(shelf.tables(None))
        assert [(e.operator, e.table_id, e.version) for e in tables] == [
            (DEFAULT_OPERATOR, "table-1", 1),
            (DEFAULT_OPERATOR, "table-2", 1),
        ]
        for entry in tables:
            assert entry.config.currency == Currency("XXX", 0)
            assert entry.config.rule_sets == (HouseRules(),)
            assert (entry.config.min_stake, entry.config.max_stake) == (1, 10**12)
            assert (entry.config.max_seats, entry.config.enabled) == (82, True)
        changed = len(store.entries_of_kind(EntryKind.TABLE_CHANGED))
        assert asyncio.run(shelf.log_migrated(actor="service")) == 2
        assert asyncio.run(shelf.log_migrated(actor="service")) == 0  # once only
        assert len(store.entries_of_kind(EntryKind.TABLE_CHANGED)) == changed + 2
        catalogued(store, ["table-2"], operator=OTHER_OPERATOR)
        for table in ("rounds", "requests", "player_keys", "player_seats"):
            assert store.query(f"SELECT DISTINCT operator FROM {table}") == [("default",)], table
        dealer = Dealer(store)
        for view in played:
            again = dealer.get(view.record.round_id, operator=DEFAULT_OPERATOR)
            assert (again.record.operator, again.record.operator_logged) == ("default", False)
            assert again.record == replace(view.record, operator_logged=False)
            assert again.settlement == view.settlement and again.players == view.players
            with pytest.raises(RoundNotFound):
                dealer.get(view.record.round_id, operator=OTHER_OPERATOR)
        assert dealer.list("", 50, "", operator=OTHER_OPERATOR) == ([], "")

        async def carry_on() -> tuple[RoundView, RoundView]:
            size = store.size()
            retried = await dealer.shuffle(
                "table-2", HouseRules(), kept, operator=DEFAULT_OPERATOR, actor="token:test"
            )
            assert store.size() == size  # a retry logs nothing
            theirs = await dealer.shuffle(
                "table-2", HouseRules(), kept, operator=OTHER_OPERATOR, actor="token:other"
            )
            open_round = played[-1].record.round_id
            for step in (dealer.reveal, dealer.settle):
                await step(open_round, idempotency(), operator=DEFAULT_OPERATOR, actor="token:test")
            return retried, theirs

        retried, theirs = asyncio.run(carry_on())
        assert retried.record.round_id == waiting.record.round_id
        assert theirs.record.round_id != waiting.record.round_id
        assert theirs.record.operator == OTHER_OPERATOR
        # The round from before operators names none in any entry, its last two included.
        open_round = played[-1].record.round_id
        entries = [decode_entry(data, signer.verifier) for data in store.round_entries(open_round)]
        assert [str(entry.kind) for entry in entries][-2:] == ["ROUND_REVEALED", "ROUND_SETTLED"]
        assert not any("operator" in entry.payload for entry in entries)

        # The players are the default operator's: another's forget of the same id forgets none.
        assert not asyncio.run(
            forget_player(store, "player-1", None, operator=OTHER_OPERATOR, actor="token:other")
        ).forgotten
        player_id, seats = lookup_player(store, operator=DEFAULT_OPERATOR, player_id="player-1")
        assert player_id == "player-1" and len(seats) == len(played)
        files = sorted(tmp_path.glob("gnau.db*"))
        if is_sqlite(database_url):  # the key is on disk until its player is forgotten
            assert any(old_key in path.read_bytes() for path in files)
        assert asyncio.run(
            forget_player(store, "player-1", None, operator=DEFAULT_OPERATOR, actor="token:test")
        ).forgotten
        latest = store.checkpoint()
        assert latest is not None
        size = store.size()
        proof = store.consistency_proof(size_before, size)
        bundle = bundle_of(store)

    old_tree = Checkpoint.parse(SignedNote.parse(before).text)
    new_tree = Checkpoint.parse(SignedNote.parse(latest).text)
    verify_consistency(size_before, size, proof, old_tree.root_hash, new_tree.root_hash)
    report = verify_bundle(
        io.BytesIO(bundle), pinned_keys=[signer.verifier], pinned_checkpoint=before
    )
    assert report.ok, report.summary()
    if is_sqlite(database_url):
        # The rebuilt player_keys left no copy of the forgotten player's key in any file.
        assert files and not any(old_key in path.read_bytes() for path in files)
