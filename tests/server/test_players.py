"""Pseudonymous seats and erasure, end to end, on a real in-process server on each backend.

Rounds are played for players whose ids are e-mail addresses. No id may appear in any log
entry, receipt (gRPC and HTTP), export, public answer or log line; the operator's and auditor's
answers show each seat's id beside its reference. Then one player is forgotten: the whole log
still exports and verifies, their old receipts still verify, the store (every row of every
table) and a new backup hold no link from their references to them and no key of theirs, the
erasure is a ``PLAYER_FORGOTTEN`` entry naming no one, and the auditor's lookup finds them
before and nothing after. The public can neither look a player up nor forget one.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import sqlite3
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import psycopg
import pytest
from gnau.v1 import audit_pb2, dealer_pb2, round_pb2

from gnau_service.audit.entries import EntryKind, decode_entry
from gnau_service.audit.note import Verifier
from gnau_service.audit.operators import DEFAULT_OPERATOR
from gnau_service.fairness.player_refs import is_player_ref, player_ref
from gnau_service.store.players import read_player_key
from tests.conftest import Run
from tests.postgres import fresh_database
from tests.server.conftest import TOKENS, Service
from tests.server.test_service import details, refusal, rid

Gnau = Callable[..., Run]
ALICE, BOB, CAROL = "alice@example.com", "bob.smith@example.org", "carol+vip@example.net"
PLAYERS = (ALICE, BOB, CAROL)
#: Who sits where in each round played: (seat number, player, stake).
TABLES = [
    [(1, ALICE, 100), (2, BOB, 250)],
    [(1, CAROL, 40), (3, ALICE, 60)],
    [(2, ALICE, 10), (4, ALICE, 20), (6, BOB, 30)],  # one player at two seats of a round
]
#: The tables the rounds are dealt at, each catalogued (issue 38).
TABLE_IDS = ("t-1", "t", "t-client")


#: Catalogued by the service fixtures (tests/catalogued.py, catalogue_module_tables).
CATALOGUED = TABLE_IDS


def seats(table: list[tuple[int, str, int]]) -> list[round_pb2.Seat]:
    return [
        round_pb2.Seat(seat_number=n, player_id=p, stake=s, client_seed=f"seed {n}".encode())
        for n, p, s in table
    ]


async def play(service: Service, table: list[tuple[int, str, int]]) -> tuple[round_pb2.Round, ...]:
    """One round: the answers to Shuffle, Deal (and its retry), Reveal and Settle."""
    shuffled = (
        await service.call(
            "dealer", "Shuffle", dealer_pb2.ShuffleRequest(request_id=rid(), table_id="t-1")
        )
    ).round
    deal = dealer_pb2.DealRequest(request_id=rid(), round_id=shuffled.round_id, seats=seats(table))
    dealt = (await service.call("dealer", "Deal", deal)).round
    retried = (await service.call("dealer", "Deal", deal)).round
    assert retried == dealt, "a retried Deal answers the same"
    revealed = (
        await service.call(
            "dealer", "Reveal", dealer_pb2.RevealRequest(request_id=rid(), round_id=dealt.round_id)
        )
    ).round
    settled = (
        await service.call(
            "dealer", "Settle", dealer_pb2.SettleRequest(request_id=rid(), round_id=dealt.round_id)
        )
    ).round
    return shuffled, dealt, revealed, settled


def named(round_: round_pb2.Round) -> list[tuple[int, str, str]]:
    return [(seat.seat_number, seat.player_id, seat.player_ref) for seat in round_.seats]


def assert_no_player_in(text: str | bytes, where: str) -> None:
    for player in PLAYERS:
        found = player.encode() in text if isinstance(text, bytes) else player in text
        assert not found, f"{player} is in {where}"


async def run(gnau: Gnau, *args: str) -> Run:
    """A ``gnau`` command in a thread (its client blocks, and the service runs on this loop)."""
    return await asyncio.to_thread(gnau, *args)


def http_get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as answer:
        body: bytes = answer.read()
    return body


# -- the store, every row --------------------------------------------------------------------


def every_row(url: str) -> Iterator[tuple[str, tuple[object, ...]]]:
    """(table, row) for every row of every table of the database at ``url``."""
    if url.startswith("sqlite:///"):
        with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as db:
            tables = [
                name
                for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            ]
            for table in tables:
                for row in db.execute(f'SELECT * FROM "{table}"'):
                    yield table, tuple(row)
        return
    with psycopg.connect(url, autocommit=True) as db:
        tables = [
            str(name)
            for (name,) in db.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            ).fetchall()
        ]
        for table in tables:
            for row in db.execute(f'SELECT * FROM "{table}"'.encode()).fetchall():
                yield table, tuple(row)


def traces(url: str, needles: list[bytes]) -> list[str]:
    """Where any of ``needles`` (as text or bytes) is in a row of the database at ``url``."""
    found = []
    for table, row in every_row(url):
        for value in row:
            data = (
                bytes(value)
                if isinstance(value, bytes | memoryview)
                else str(value).encode("utf-8")
            )
            found += [f"{table}: {needle!r}" for needle in needles if needle in data]
    return found


@contextlib.contextmanager
def restored(gnau: Gnau, backup: Path, tmp_path: Path, url: str) -> Iterator[str]:
    """The backup restored into a new database (a new file, or a fresh PostgreSQL database)."""
    if url.startswith("sqlite:///"):
        target = f"sqlite:///{tmp_path / 'restored.db'}"
        result = gnau("db", "restore", str(backup), "--database", target)
        assert result.status == 0, result.out + result.err
        yield target
        return
    with fresh_database() as target:
        result = gnau("db", "restore", str(backup), "--database", target)
        assert result.status == 0, result.out + result.err
        yield target


# -- the story -------------------------------------------------------------------------------


async def test_players_are_pseudonymous_everywhere_and_forgetting_one_leaves_every_proof(
    metered: Service, gnau: Gnau, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = metered
    store = service.app.store
    target = ["--target", f"127.0.0.1:{service.app.port}"]
    vkey = store.signer.vkey
    output: list[str] = []  # every line the service and the commands wrote to stderr

    played = [await play(service, table) for table in TABLES]
    for table, (shuffled, dealt, revealed, settled) in zip(TABLES, played, strict=True):
        assert not shuffled.seats
        # The operator's answers give each seat's reference beside the platform's id.
        for answer in (dealt, revealed, settled):
            assert [(n, p) for n, p, _ in named(answer)] == [(n, p) for n, p, _ in table]
            assert all(is_player_ref(ref) for _, _, ref in named(answer))
            assert named(answer) == named(dealt)
    refs = {
        (round_id, number): ref
        for (_, dealt, _, _) in played
        for number, _, ref in named(dealt)
        for round_id in [dealt.round_id]
    }
    assert len(set(refs.values())) == len(refs) == 7, "a reference is unique to its seat"
    alice_refs = {ref for (_, dealt, _, _) in played for _, p, ref in named(dealt) if p == ALICE}
    assert len(alice_refs) == 4
    alice_key = read_player_key(store, DEFAULT_OPERATOR, ALICE)
    assert alice_key is not None
    for (round_id, number), ref in refs.items():
        owner = next(
            p
            for (_, d, _, _) in played
            if d.round_id == round_id
            for n, p, _ in named(d)
            if n == number
        )
        key = read_player_key(store, DEFAULT_OPERATOR, owner)
        assert key is not None and player_ref(key, round_id, number) == ref

    round_ids = [dealt.round_id for (_, dealt, _, _) in played]
    first = round_ids[0]

    # The public sees references only; the auditor and the operator see the ids beside them.
    public = (
        await service.call(
            "dealer", "GetRound", dealer_pb2.GetRoundRequest(round_id=first), "public"
        )
    ).round
    assert [s.player_id for s in public.seats] == ["", ""]
    assert [s.player_ref for s in public.seats] == [refs[first, 1], refs[first, 2]]
    for role in ("auditor", "operator"):
        seen = (
            await service.call(
                "dealer", "GetRound", dealer_pb2.GetRoundRequest(round_id=first), role
            )
        ).round
        assert [s.player_id for s in seen.seats] == [ALICE, BOB], role
    listed = await service.call("dealer", "ListRounds", dealer_pb2.ListRoundsRequest(), "auditor")
    assert {s.player_id for r in listed.rounds for s in r.seats} == set(PLAYERS)

    # Receipts, over gRPC and HTTP, name seats by reference; they verify with the key alone.
    receipts = {}
    for round_id in round_ids:
        text = (
            await service.call(
                "dealer",
                "GetRoundReceipt",
                dealer_pb2.GetRoundReceiptRequest(round_id=round_id),
                "public",
            )
        ).receipt
        assert_no_player_in(text, f"the receipt of {round_id}")
        http = await asyncio.to_thread(
            http_get, f"http://127.0.0.1:{service.app.http_port}/rounds/{round_id}/receipt"
        )
        assert_no_player_in(http, f"the HTTP receipt of {round_id}")
        receipts[round_id] = tmp_path / f"{round_id}.json"
        receipts[round_id].write_text(text)
        assert all(ref in text for (r, _), ref in refs.items() if r == round_id)

    # The auditor maps a player to their seats, and a reference to its player.
    by_id = await service.call(
        "audit", "LookupPlayer", audit_pb2.LookupPlayerRequest(player_id=ALICE), "auditor"
    )
    assert by_id.player_id == ALICE
    assert {(s.round_id, s.seat_number, s.player_ref) for s in by_id.seats} == {
        (r, n, ref) for (r, n), ref in refs.items() if ref in alice_refs
    }
    by_ref = await service.call(
        "audit",
        "LookupPlayer",
        audit_pb2.LookupPlayerRequest(player_ref=refs[first, 2]),
        "operator",
    )
    assert by_ref.player_id == BOB
    assert [(s.round_id, s.seat_number) for s in by_ref.seats] == [(first, 2)]
    looked_up = await run(
        gnau,
        "audit",
        "players",
        *target,
        "--token",
        TOKENS["auditor"],
        "--player-id",
        ALICE,
        "--json",
    )
    output.append(looked_up.err)
    assert looked_up.status == 0, looked_up.err
    assert json.loads(looked_up.out)["player_id"] == ALICE
    assert len(json.loads(looked_up.out)["seats"]) == 4

    # The public may neither look up nor forget; the auditor may not forget.
    for role in ("public", None):
        error = await refusal(
            service.call(
                "audit", "LookupPlayer", audit_pb2.LookupPlayerRequest(player_id=ALICE), role
            )
        )
        assert error.code() in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)
    for role in ("public", "auditor"):
        error = await refusal(
            service.call(
                "dealer", "ForgetPlayer", dealer_pb2.ForgetPlayerRequest(player_id=ALICE), role
            )
        )
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED, role
        assert details(error)[1] == "PERMISSION_DENIED"
    assert read_player_key(store, DEFAULT_OPERATOR, ALICE) == alice_key, (
        "a refused forget changes nothing"
    )

    # Forget Alice, with the command line.
    before = store.size()
    forgot = await run(
        gnau, "player", "forget", ALICE, *target, "--token", TOKENS["operator"], "--json"
    )
    output.append(forgot.err)
    assert forgot.status == 0, forgot.err
    answer = json.loads(forgot.out)
    assert answer["forgotten"] is True and answer["seats_unlinked"] == 4
    index = answer["log_index"]
    assert index >= before
    entry = decode_entry(store.entries(index, index + 1)[0], Verifier.from_vkey(vkey))
    # It names who forgot (the operator's token, by the name a token file of the older format
    # gives it: "legacy-" and its hash's first 8 hex digits) and whose player it was (a token of
    # that format is the default operator's), and nothing of the player.
    operator = "token:legacy-" + hashlib.sha256(TOKENS["operator"].encode()).hexdigest()[:8]
    assert (entry.kind, entry.round_id, entry.payload) == (
        EntryKind.PLAYER_FORGOTTEN,
        None,
        {"actor": operator, "operator": "default"},
    )
    again = await service.call(
        "dealer", "ForgetPlayer", dealer_pb2.ForgetPlayerRequest(player_id=ALICE, request_id=rid())
    )
    assert (again.forgotten, again.seats_unlinked, again.log_index) == (False, 0, 0)

    # Nobody can link the references to Alice any more, and Bob is still known.
    gone = await service.call(
        "audit", "LookupPlayer", audit_pb2.LookupPlayerRequest(player_id=ALICE), "auditor"
    )
    assert (gone.player_id, list(gone.seats)) == ("", [])
    for ref in alice_refs:
        gone = await service.call(
            "audit", "LookupPlayer", audit_pb2.LookupPlayerRequest(player_ref=ref), "operator"
        )
        assert (gone.player_id, list(gone.seats)) == ("", [])
    missing = await run(
        gnau,
        "audit",
        "players",
        *target,
        "--token",
        TOKENS["auditor"],
        "--player-ref",
        refs[first, 1],
    )
    output.append(missing.err)
    assert missing.status == 1 and "no known player" in missing.out
    seen = (
        await service.call(
            "dealer", "GetRound", dealer_pb2.GetRoundRequest(round_id=first), "operator"
        )
    ).round
    assert named(seen) == [(1, "", refs[first, 1]), (2, BOB, refs[first, 2])]

    # The whole log exports and verifies, and names no player.
    bundle = tmp_path / "log.jsonl"
    exported = await run(
        gnau, "audit", "export", *target, "--token", TOKENS["auditor"], "--out", str(bundle)
    )
    output.append(exported.err)
    assert exported.status == 0, exported.err
    assert_no_player_in(bundle.read_bytes(), "the exported log")
    verified = await run(gnau, "audit", "verify", str(bundle), "--key", vkey, "--jobs", "1")
    output.append(verified.err)
    assert verified.status == 0, verified.out + verified.err
    assert "result: VALID" in verified.out
    entries = store.entries(0, store.size())
    assert_no_player_in(b"\n".join(entries), "the log's entries")
    assert sum(b'"kind":"PLAYER_FORGOTTEN"' in data for data in entries) == 1

    # Alice's old receipts still verify, and so do the ones fetched now.
    for round_id, path in receipts.items():
        old = await run(gnau, "receipt", "verify", str(path), "--key", vkey)
        assert old.status == 0, old.out + old.err
        fresh = await service.call(
            "dealer",
            "GetRoundReceipt",
            dealer_pb2.GetRoundReceiptRequest(round_id=round_id),
            "public",
        )
        path.write_text(fresh.receipt)
        new = await run(gnau, "receipt", "verify", str(path), "--key", vkey)
        assert new.status == 0, new.out + new.err

    # The store holds no trace of Alice: no key, no link, no id in any row of any table.
    url = service.settings.database_url
    needles = [ALICE.encode(), alice_key]
    assert traces(url, needles) == []
    assert traces(url, [BOB.encode()]), "Bob, not forgotten, is still in the private tables"
    for table, row in every_row(url):
        if table not in ("player_keys", "player_seats"):
            assert not any(isinstance(v, str) and any(p in v for p in PLAYERS) for v in row), (
                f"a player id in {table}"
            )
    # Nor does a backup made now, restored.
    backup = tmp_path / "after.backup"
    taken = await run(gnau, "db", "backup", str(backup), "--database", url)
    assert taken.status == 0, taken.err
    if url.startswith("sqlite:///"):
        data = backup.read_bytes()
        assert ALICE.encode() not in data and alice_key not in data
    with restored(gnau, backup, tmp_path, url) as copy:
        assert traces(copy, needles) == []
        assert traces(copy, [BOB.encode()])

    # No log line of the service, nor of the commands but their own answers, names a player.
    output.append(capsys.readouterr().err)
    assert '"method": "/gnau.v1.DealerService/Deal"' in "".join(output), "the calls were logged"
    assert_no_player_in("".join(output), "the log lines")


async def test_a_lookup_or_forget_is_refused_for_a_malformed_id_or_reference(
    service: Service,
) -> None:
    for request in (
        audit_pb2.LookupPlayerRequest(),
        audit_pb2.LookupPlayerRequest(player_id=""),
        audit_pb2.LookupPlayerRequest(player_ref="alice@example.com"),
        audit_pb2.LookupPlayerRequest(player_ref="p-" + "A" * 32),
        audit_pb2.LookupPlayerRequest(player_id="x" * 129),
    ):
        error = await refusal(service.call("audit", "LookupPlayer", request, "auditor"))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, request
        assert "alice@example.com" not in (error.details() or "")
    for player_id in ("", "x" * 129, "a\x00b"):
        error = await refusal(
            service.call(
                "dealer", "ForgetPlayer", dealer_pb2.ForgetPlayerRequest(player_id=player_id)
            )
        )
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert details(error)[0] == ["player_id"]
    nobody = await service.call(
        "dealer", "ForgetPlayer", dealer_pb2.ForgetPlayerRequest(player_id="nobody")
    )
    assert (nobody.forgotten, nobody.seats_unlinked, nobody.log_index) == (False, 0, 0)


async def test_a_forget_retried_with_its_request_id_gets_the_first_answer(
    service: Service,
) -> None:
    shuffled = (
        await service.call(
            "dealer", "Shuffle", dealer_pb2.ShuffleRequest(request_id=rid(), table_id="t")
        )
    ).round
    await service.call(
        "dealer",
        "Deal",
        dealer_pb2.DealRequest(
            request_id=rid(), round_id=shuffled.round_id, seats=seats([(1, ALICE, 5)])
        ),
    )
    request = dealer_pb2.ForgetPlayerRequest(player_id=ALICE, request_id=rid())
    first = await service.call("dealer", "ForgetPlayer", request)
    retry = await service.call("dealer", "ForgetPlayer", request)
    assert first == retry and first.forgotten and first.seats_unlinked == 1
    assert first.log_index > 0
    size = service.app.store.size()
    assert (await service.call("dealer", "ForgetPlayer", request)).log_index == first.log_index
    assert service.app.store.size() == size, "a retry logs nothing"
    reused = await refusal(
        service.call(
            "dealer",
            "VoidRound",
            dealer_pb2.VoidRoundRequest(
                reason_code=round_pb2.VOID_REASON_PLATFORM_FAILURE,
                request_id=request.request_id,
                round_id=shuffled.round_id,
                reason="r",
            ),
        )
    )
    assert details(reused)[1] == "REQUEST_ID_REUSED"
    # The request record keeps the id and the answer only: nothing of the player.
    rows = service.app.store.query(
        "SELECT fingerprint, response FROM requests WHERE request_id = ?", (request.request_id,)
    )
    assert rows and ALICE not in str(rows) and rows[0][0] == ""


async def test_a_deal_retried_after_its_player_is_forgotten_is_a_conflict(
    service: Service,
) -> None:
    shuffled = (
        await service.call(
            "dealer", "Shuffle", dealer_pb2.ShuffleRequest(request_id=rid(), table_id="t")
        )
    ).round
    deal = dealer_pb2.DealRequest(
        request_id=rid(), round_id=shuffled.round_id, seats=seats([(1, ALICE, 5), (2, BOB, 6)])
    )
    dealt = (await service.call("dealer", "Deal", deal)).round
    # Another body under the same request id is refused, even one differing only by a player.
    other = dealer_pb2.DealRequest()
    other.CopyFrom(deal)
    other.seats[1].player_id = CAROL
    error = await refusal(service.call("dealer", "Deal", other))
    assert details(error)[1] == "REQUEST_ID_REUSED"
    await service.call("dealer", "ForgetPlayer", dealer_pb2.ForgetPlayerRequest(player_id=ALICE))
    error = await refusal(service.call("dealer", "Deal", deal))
    assert details(error)[1] == "REQUEST_ID_REUSED"
    # The request record's fingerprint is of public data only: no hash of a player id.
    rows = service.app.store.query(
        "SELECT fingerprint, response FROM requests WHERE request_id = ?", (deal.request_id,)
    )
    assert re.fullmatch("[0-9a-f]{64}", str(rows[0][0]))
    assert ALICE not in str(rows) and BOB not in str(rows)
    assert dealt.seats[0].player_ref in str(rows[0][1])


async def test_the_python_clients_forget_and_look_up_players(service: Service) -> None:
    from gnau_client import GnauClient, Seat
    from gnau_client.aio import AsyncGnauClient

    target = f"127.0.0.1:{service.app.port}"
    async with AsyncGnauClient(target, token=TOKENS["operator"]) as client:
        shuffled = await client.shuffle("t-client")
        dealt = await client.deal(
            shuffled.round_id, [Seat(seat_number=1, player_id=ALICE, stake=5)]
        )
        (seat,) = dealt.seats
        found = await client.lookup_player(player_ref=seat.player_ref)
        assert found.player_id == ALICE
        assert [(s.round_id, s.seat_number) for s in found.seats] == [(dealt.round_id, 1)]

    def forget() -> tuple[object, ...]:
        with GnauClient(target, token=TOKENS["auditor"]) as auditor:
            by_id = auditor.lookup_player(player_id=ALICE)
            with pytest.raises(ValueError, match="exactly one"):
                auditor.lookup_player()
        with GnauClient(target, token=TOKENS["operator"]) as operator:
            forgotten = operator.forget_player(ALICE, request_id="forget-1")
            retried = operator.forget_player(ALICE, request_id="forget-1")
            after = operator.lookup_player(player_id=ALICE)
        return by_id, forgotten, retried, after

    by_id, forgotten, retried, after = await asyncio.to_thread(forget)
    assert by_id.player_id == ALICE  # type: ignore[attr-defined]
    assert forgotten == retried
    assert forgotten.forgotten and forgotten.seats_unlinked == 1  # type: ignore[attr-defined]
    assert after.player_id == "" and not after.seats  # type: ignore[attr-defined]
    async with AsyncGnauClient(target, token=TOKENS["operator"]) as client:
        again = await client.forget_player(ALICE)
        assert (again.forgotten, again.log_index) == (False, 0)
