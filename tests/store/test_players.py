"""The private player tables on every backend: a player's key made once and kept, seat links
found by player and by reference, forgetting that leaves nothing, and backups and restores that
carry both tables (while the log's readers never see them)."""

from __future__ import annotations

import contextlib
import io
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from gnau_service.audit.bundle import write_bundle
from gnau_service.audit.signing import LogSigner
from gnau_service.store import Transaction, open_reader, open_store
from gnau_service.store.players import (
    ForgottenPlayer,
    PlayerSeat,
    forget_player,
    link_seats,
    player_key,
    players_of_refs,
    read_player_key,
    seat_of_ref,
    seats_of_player,
)
from tests.conftest import Run
from tests.postgres import fresh_database
from tests.steps import run_step, run_steps
from tests.store.test_schema_startup import execute, is_sqlite
from tests.store.test_store import append_many

ALICE, BOB = "alice@example.com", "bob@example.com"
#: The operator whose players most tests seat.
CASINO = "casino-a"


def seat(
    ref: int, player: str, round_id: str = "r-1", number: int = 1, operator: str = CASINO
) -> PlayerSeat:
    return PlayerSeat(f"p-{ref:032x}", player, round_id, number, operator)


def test_a_player_key_is_made_once_and_kept(database_url: str, signer: LogSigner) -> None:
    with open_store(database_url, signer) as store:
        made = []

        def new_key() -> bytes:
            made.append(bytes(range(32)))
            return made[-1]

        first = run_step(store, lambda tx: player_key(tx, CASINO, ALICE, new_key))
        again = run_step(store, lambda tx: player_key(tx, CASINO, ALICE, new_key))
        other = run_step(store, lambda tx: player_key(tx, CASINO, BOB))
        assert first == again == bytes(range(32)) and len(made) == 1
        assert len(other) == 32 and other != first
        assert (
            read_player_key(store, CASINO, ALICE) == first
            and read_player_key(store, CASINO, "carol") is None
        )
        with pytest.raises(ValueError, match="32 bytes, not 3"):
            run_step(store, lambda tx: player_key(tx, CASINO, "carol", lambda: b"abc"))
        assert read_player_key(store, CASINO, "carol") is None


def test_players_seated_at_once_in_several_steps_keep_one_key(
    database_url: str, signer: LogSigner
) -> None:
    with open_store(database_url, signer) as store:
        keys = run_steps(store, [lambda tx: player_key(tx, CASINO, ALICE) for _ in range(8)])
        assert len(set(keys)) == 1 and read_player_key(store, CASINO, ALICE) == keys[0]


def test_seat_links_are_found_by_player_and_by_reference(
    database_url: str, signer: LogSigner
) -> None:
    with open_store(database_url, signer) as store:
        links = [seat(1, ALICE), seat(2, BOB, number=2), seat(3, ALICE, "r-2", 7)]
        run_step(store, lambda tx: link_seats(tx, links))
        assert seats_of_player(store, ALICE, operator=CASINO) == [links[0], links[2]]
        assert seats_of_player(store, "nobody", operator=CASINO) == []
        assert seat_of_ref(store, links[1].player_ref, operator=CASINO) == links[1]
        assert seat_of_ref(store, "p-" + "f" * 32, operator=CASINO) is None
        refs = [link.player_ref for link in links] + ["p-" + "f" * 32]
        expected = {link.player_ref: link.player_id for link in links}
        assert players_of_refs(store, refs) == expected
        assert run_step(store, lambda tx: players_of_refs(tx, refs)) == expected
        assert players_of_refs(store, []) == {}


def test_forgetting_a_player_deletes_their_key_and_links_and_no_one_else_s(
    database_url: str, signer: LogSigner
) -> None:
    with open_store(database_url, signer) as store:
        links = [seat(1, ALICE), seat(2, BOB, number=2), seat(3, ALICE, "r-2")]

        def deal(tx: Transaction) -> None:
            player_key(tx, CASINO, ALICE)
            player_key(tx, CASINO, BOB)
            link_seats(tx, links)

        run_step(store, deal)
        forgotten = run_step(store, lambda tx: forget_player(tx, CASINO, ALICE))
        assert forgotten == ForgottenPlayer(key_deleted=True, seats_unlinked=2)
        assert (
            read_player_key(store, CASINO, ALICE) is None
            and seats_of_player(store, ALICE, operator=CASINO) == []
        )
        assert seat_of_ref(store, links[0].player_ref, operator=CASINO) is None
        assert players_of_refs(store, [link.player_ref for link in links]) == {
            links[1].player_ref: BOB
        }
        assert read_player_key(store, CASINO, BOB) is not None
        again = run_step(store, lambda tx: forget_player(tx, CASINO, ALICE))
        assert again == ForgottenPlayer(key_deleted=False, seats_unlinked=0)
        # Seated again, a forgotten player gets a new key: nothing links the new to the old.
        assert run_step(store, lambda tx: player_key(tx, CASINO, ALICE)) is not None


def test_the_tables_are_private_to_the_store_and_hold_what_the_spec_says(
    database_url: str, signer: LogSigner
) -> None:
    with open_store(database_url, signer) as store:
        append_many(store, 3)
        run_step(
            store, lambda tx: (player_key(tx, CASINO, ALICE), link_seats(tx, [seat(1, ALICE)]))
        )
        bundle = io.StringIO()
        with open_reader(database_url) as reader:
            write_bundle(reader, bundle, end=reader.size())
    assert ALICE not in bundle.getvalue() and "p-" + f"{1:032x}" not in bundle.getvalue()
    keys = execute(database_url, "SELECT player_id, secret, created_at FROM player_keys")
    assert [(row[0], len(bytes(row[1]))) for row in keys] == [(ALICE, 32)]
    assert execute(database_url, "SELECT * FROM player_seats") == [
        (f"p-{1:032x}", ALICE, "r-1", 1, CASINO)
    ]
    if not is_sqlite(database_url):
        with pytest.raises(psycopg.errors.CheckViolation):
            execute(
                database_url,
                "INSERT INTO player_keys (player_id, secret, created_at)"
                " VALUES ('x', 'abc'::bytea, 't')",
            )


# -- backup and restore -------------------------------------------------------------------------


@contextlib.contextmanager
def new_database(template: str, directory: Path, name: str) -> Iterator[str]:
    if is_sqlite(template):
        yield f"sqlite:///{directory / name}"
    else:
        with fresh_database() as url:
            yield url


def player_rows(url: str) -> list[object]:
    if is_sqlite(url):
        with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as db:
            keys = db.execute("SELECT player_id, secret FROM player_keys ORDER BY 1").fetchall()
            seats = db.execute("SELECT * FROM player_seats ORDER BY 1").fetchall()
    else:
        keys = execute(url, "SELECT player_id, secret FROM player_keys ORDER BY 1")
        seats = execute(url, "SELECT * FROM player_seats ORDER BY 1")
    return [[(player, bytes(secret)) for player, secret in keys], [tuple(s) for s in seats]]


def test_a_backup_and_its_restore_carry_the_player_tables(
    database_url: str, signer: LogSigner, tmp_path: Path, gnau: Callable[..., Run]
) -> None:
    with open_store(database_url, signer) as store:
        append_many(store, 2)

        def deal(tx: Transaction) -> None:
            player_key(tx, CASINO, ALICE)
            player_key(tx, CASINO, BOB)
            link_seats(tx, [seat(1, ALICE), seat(2, BOB, number=2)])

        run_step(store, deal)
        before = player_rows(database_url)
        backup = tmp_path / "before.backup"
        taken = gnau("db", "backup", str(backup), "--database", database_url)
        assert taken.status == 0, taken.err
        run_step(store, lambda tx: forget_player(tx, CASINO, ALICE))
        after = tmp_path / "after.backup"
        assert gnau("db", "backup", str(after), "--database", database_url).status == 0
    with new_database(database_url, tmp_path, "restored.db") as target:
        restored = gnau("db", "restore", str(backup), "--database", target)
        assert restored.status == 0, restored.out + restored.err
        assert player_rows(target) == before and len(before[0]) == 2  # type: ignore[arg-type]
    with new_database(database_url, tmp_path, "restored-after.db") as target:
        restored = gnau("db", "restore", str(after), "--database", target)
        assert restored.status == 0, restored.out + restored.err
        keys, seats = player_rows(target)
        assert [player for player, _ in keys] == [BOB]  # type: ignore[attr-defined]
        assert [row[1] for row in seats] == [BOB]  # type: ignore[attr-defined]
    # The backup made after the erasure holds no trace of the player, nor of their key.
    alice_key = next(secret for player, secret in before[0] if player == ALICE)  # type: ignore[attr-defined]
    data = after.read_bytes()
    assert ALICE.encode() not in data and alice_key not in data


# -- two operators ------------------------------------------------------------------------------

OTHER = "casino-b"


def test_one_player_id_at_two_operators_is_two_players(
    database_url: str, signer: LogSigner
) -> None:
    with open_store(database_url, signer) as store:
        ours, theirs = seat(1, "42"), seat(2, "42", "r-2", operator=OTHER)

        def deal(tx: Transaction) -> tuple[bytes, bytes]:
            keys = (player_key(tx, CASINO, "42"), player_key(tx, OTHER, "42"))
            link_seats(tx, [ours, theirs])
            return keys

        our_key, their_key = run_step(store, deal)
        assert our_key != their_key
        assert read_player_key(store, OTHER, "42") == their_key
        assert seats_of_player(store, "42", operator=CASINO) == [ours]
        assert seats_of_player(store, "42", operator=OTHER) == [theirs]
        assert seats_of_player(store, "42", operator=None) == [ours, theirs]
        assert seat_of_ref(store, theirs.player_ref, operator=CASINO) is None
        assert seat_of_ref(store, theirs.player_ref, operator=None) == theirs

        forgotten = run_step(store, lambda tx: forget_player(tx, CASINO, "42"))
        assert forgotten == ForgottenPlayer(key_deleted=True, seats_unlinked=1)
        assert read_player_key(store, CASINO, "42") is None
        assert read_player_key(store, OTHER, "42") == their_key
        assert seats_of_player(store, "42", operator=None) == [theirs]
