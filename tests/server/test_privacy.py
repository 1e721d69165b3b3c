"""docs/privacy.md's table, held to the code: every surface called by every role on a real
server, each answer checked against its cell; and no player id in anything published.

A cell says *refused*, *no round data*, or which rounds and which of their seats' fields an
answer holds (``player references``, ``player ids``). The checks read the answers as text, so a
player id that slipped into any field, however nested, is found.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import aiohttp
import grpc
import pytest
from gnau.v1 import audit_pb2, dealer_pb2, round_pb2, types_pb2
from google.protobuf import json_format

from gnau_service.audit.tiles import TILE_WIDTH, TileRef
from gnau_service.server.grpc.auth import POLICY, Role
from gnau_service.server.process.app import running
from gnau_service.server.process.config import Settings
from gnau_service.store.cosignatures import NO_WITNESSES, served_checkpoint
from gnau_service.store.tiles import BundleNotPublic, read_tile, signed_size
from tests.catalogued import catalogue
from tests.server.conftest import TOKENS, Service

DOC: Final = Path(__file__).resolve().parents[2] / "docs" / "privacy.md"
ROLES: Final = ("public", "auditor", "operator")
#: Player ids as a platform might send them: personal data.
ALICE: Final = "alice.smith@example.com"
BOB: Final = "bob+casino@example.org"
CAROL: Final = "carol-account-0042"
#: The tables the live checks deal at, catalogued for the default operator (issue 38).
TABLES: Final = ("privacy-table", "another-table", "m")


def privacy_table() -> dict[str, dict[str, str]]:
    """The table between the privacy-table markers: ``{surface: {role: cell}}``."""
    text = DOC.read_text(encoding="utf-8")
    match = re.search(
        r"<!-- privacy-table:begin -->\n(.*?)<!-- privacy-table:end -->", text, re.DOTALL
    )
    assert match, "docs/privacy.md lost its privacy table"
    header, _, *rows = match[1].strip().splitlines()
    columns = [cell.strip() for cell in header.strip("|").split("|")]
    assert columns == ["surface", *ROLES]
    table = {}
    for row in rows:
        surface, *cells = (cell.strip() for cell in row.strip("|").split("|"))
        table[surface.strip("`")] = dict(zip(ROLES, cells, strict=True))
    return table


TABLE: Final = privacy_table()


def grpc_surfaces() -> set[str]:
    return {surface for surface in TABLE if not surface.startswith(("HTTP ", "bucket "))}


def test_the_table_lists_every_rpc_and_nothing_else() -> None:
    assert {f"/gnau.v1.{surface}" for surface in grpc_surfaces()} == set(POLICY)


@pytest.mark.parametrize("surface", sorted(grpc_surfaces()))
def test_refused_means_the_policy_refuses_the_role(surface: str) -> None:
    allowed = POLICY[f"/gnau.v1.{surface}"]
    for role in ROLES:
        refused_by_policy = Role(role) not in allowed
        assert (TABLE[surface][role] == "refused") == refused_by_policy, (surface, role)


# -- the live half: a real server, a played round, every surface by every role ---------------


@dataclasses.dataclass
class Played:
    """The rounds on the server: ``settled`` by two players, ``dealt`` still in play."""

    settled: str
    dealt: str
    references: dict[str, str]  # player id → their reference in the settled round
    table_id: str


SQLITE_ONLY: Final = pytest.mark.parametrize("settings", ["sqlite"], indirect=True)


@pytest.fixture
async def live(settings: Settings) -> AsyncIterator[tuple[Service, str]]:
    """The service with its HTTP port, public listing off (the default), and :data:`TABLES`
    catalogued."""
    with_http = dataclasses.replace(settings, http_listen="127.0.0.1:0")
    async with (
        running(with_http) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        assert app.web is not None
        await catalogue(app.store, TABLES)
        yield Service(app, with_http, channel), f"http://127.0.0.1:{app.web.port}"


async def play(service: Service) -> Played:
    shuffled = await service.call(
        "dealer",
        "Shuffle",
        dealer_pb2.ShuffleRequest(request_id="privacy-1", table_id="privacy-table"),
    )
    round_id = shuffled.round.round_id
    seats = [
        round_pb2.Seat(seat_number=1, player_id=ALICE, stake=100, client_seed=b"alice"),
        round_pb2.Seat(seat_number=2, player_id=BOB, stake=250),
    ]
    dealt = await service.call(
        "dealer",
        "Deal",
        dealer_pb2.DealRequest(request_id="privacy-2", round_id=round_id, seats=seats),
    )
    references = {seat.player_id: seat.player_ref for seat in dealt.round.seats}
    await service.call(
        "dealer", "Reveal", dealer_pb2.RevealRequest(request_id="privacy-3", round_id=round_id)
    )
    await service.call(
        "dealer", "Settle", dealer_pb2.SettleRequest(request_id="privacy-4", round_id=round_id)
    )
    other = await service.call(
        "dealer",
        "Shuffle",
        dealer_pb2.ShuffleRequest(request_id="privacy-5", table_id="another-table"),
    )
    await service.call(
        "dealer",
        "Deal",
        dealer_pb2.DealRequest(
            request_id="privacy-6",
            round_id=other.round.round_id,
            seats=[round_pb2.Seat(seat_number=1, player_id=CAROL, stake=5)],
        ),
    )
    return Played(round_id, other.round.round_id, references, "privacy-table")


def text_of(answer: Any) -> str:
    if isinstance(answer, str):
        return answer
    if isinstance(answer, list):
        return "\n".join(text_of(item) for item in answer)
    # An entry's bytes are its JSON: read them as text, not as the base64 MessageToJson gives.
    entries = getattr(answer, "entries", ())
    return json_format.MessageToJson(answer) + "".join(
        entry.data.decode("utf-8") for entry in entries
    )


Call = Callable[[Service, str | None, Played], Awaitable[Any]]


async def _stream(call: Any) -> list[Any]:
    """The first answers of a stream: a watch never ends, so read what is there and stop."""
    answers = []
    try:
        async with asyncio.timeout(2):
            async for answer in call:
                answers.append(answer)
    except TimeoutError:
        call.cancel()
    return answers


def _metadata(role: str | None) -> tuple[tuple[str, str], ...]:
    return () if role is None else (("authorization", f"Bearer {TOKENS[role]}"),)


def _unary(service_name: str, method: str, request: Callable[[Played], Any]) -> Call:
    async def call(service: Service, role: str | None, played: Played) -> Any:
        stub = service.dealer if service_name == "dealer" else service.audit
        return await getattr(stub, method)(request(played), metadata=_metadata(role))

    return call


def _streaming(method: str, request: Any) -> Call:
    async def call(service: Service, role: str | None, played: Played) -> Any:
        return await _stream(getattr(service.audit, method)(request, metadata=_metadata(role)))

    return call


#: Each read surface's call about the settled round (the mutations are checked on their own).
CALLS: Final[dict[str, Call]] = {
    "DealerService/GetRound": _unary(
        "dealer", "GetRound", lambda p: dealer_pb2.GetRoundRequest(round_id=p.settled)
    ),
    "DealerService/ListRounds": _unary(
        "dealer", "ListRounds", lambda p: dealer_pb2.ListRoundsRequest(table_id=p.table_id)
    ),
    "DealerService/GetRoundReceipt": _unary(
        "dealer",
        "GetRoundReceipt",
        lambda p: dealer_pb2.GetRoundReceiptRequest(round_id=p.settled),
    ),
    "DealerService/EvaluateHand": _unary(
        "dealer",
        "EvaluateHand",
        lambda p: dealer_pb2.EvaluateHandRequest(cards=["AS", "KS", "QS", "JS", "9S"]),
    ),
    "DealerService/GetHouseRulesInfo": _unary(
        "dealer",
        "GetHouseRulesInfo",
        lambda p: dealer_pb2.GetHouseRulesInfoRequest(house_rules=types_pb2.HouseRules()),
    ),
    "AuditService/GetCheckpoint": _unary(
        "audit", "GetCheckpoint", lambda p: audit_pb2.GetCheckpointRequest()
    ),
    "AuditService/GetCheckpoints": _streaming(
        "GetCheckpoints", audit_pb2.GetCheckpointsRequest(first_size=1)
    ),
    "AuditService/GetInclusionProof": _unary(
        "audit",
        "GetInclusionProof",
        lambda p: audit_pb2.GetInclusionProofRequest(index=1, tree_size=2),
    ),
    "AuditService/GetConsistencyProof": _unary(
        "audit",
        "GetConsistencyProof",
        lambda p: audit_pb2.GetConsistencyProofRequest(first_size=1, second_size=2),
    ),
    "AuditService/GetPublicKeys": _unary(
        "audit", "GetPublicKeys", lambda p: audit_pb2.GetPublicKeysRequest()
    ),
    "AuditService/GetEntries": _streaming("GetEntries", audit_pb2.GetEntriesRequest(start=0)),
    "AuditService/WatchEntries": _streaming(
        "WatchEntries", audit_pb2.WatchEntriesRequest(start_index=0)
    ),
    "AuditService/VerifyRound": _unary(
        "audit", "VerifyRound", lambda p: audit_pb2.VerifyRoundRequest(round_id=p.settled)
    ),
    "DealerService/ListTables": _unary(
        "dealer", "ListTables", lambda p: dealer_pb2.ListTablesRequest(operator="default")
    ),
    "AuditService/GetReport": _unary("audit", "GetReport", lambda p: audit_pb2.GetReportRequest()),
    "AuditService/LookupPlayer": _unary(
        "audit", "LookupPlayer", lambda p: audit_pb2.LookupPlayerRequest(player_id=ALICE)
    ),
}
MUTATIONS: Final = {
    "DealerService/Shuffle",
    "DealerService/Deal",
    "DealerService/Reveal",
    "DealerService/Settle",
    "DealerService/VoidRound",
    "DealerService/ForgetPlayer",
    "DealerService/PutTable",
    "DealerService/SetTableEnabled",
    # Writes a SOFTWARE_VERIFIED entry, and needs a manifest (tests/server/test_software_checks.py).
    "AuditService/VerifySoftware",
}


def test_every_rpc_is_called_by_the_live_check() -> None:
    assert set(CALLS) | MUTATIONS == grpc_surfaces()


def check_answer(cell: str, text: str, played: Played, where: str) -> None:
    """What the cell says the answer holds, and that it holds nothing more."""
    alice_ref = played.references[ALICE]
    shows_ids = "player ids" in cell
    shows_refs = "player references" in cell
    assert (ALICE in text) == shows_ids, f"{where}: player id shown? the doc says {cell!r}"
    assert (alice_ref in text) == shows_refs, f"{where}: reference shown? the doc says {cell!r}"
    if cell.startswith("no round data"):
        assert played.settled not in text, where


@SQLITE_ONLY
async def test_each_cell_is_what_the_role_gets(live: tuple[Service, str]) -> None:
    service, _ = live
    played = await play(service)
    for surface, call in CALLS.items():
        for role in ROLES:
            cell = TABLE[surface][role]
            where = f"{surface} as {role}"
            caller = None if role == "public" else role
            if cell == "refused" or cell.startswith("refused unless"):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await call(service, caller, played)
                assert refused.value.code() in {
                    grpc.StatusCode.PERMISSION_DENIED,
                    grpc.StatusCode.UNAUTHENTICATED,
                }, where
                continue
            check_answer(cell, text_of(await call(service, caller, played)), played, where)
            if "by id" in cell:
                await check_rounds_by_id(service, caller, surface, cell, played)


async def check_rounds_by_id(
    service: Service, role: str | None, surface: str, cell: str, played: Played
) -> None:
    """``revealed rounds by id``: a round in play does not exist for the role;
    ``every round by id``: it does."""
    method = surface.split("/")[1]
    request = (
        dealer_pb2.GetRoundRequest(round_id=played.dealt)
        if method == "GetRound"
        else dealer_pb2.GetRoundReceiptRequest(round_id=played.dealt)
    )
    try:
        answer = await getattr(service.dealer, method)(request, metadata=_metadata(role))
    except grpc.aio.AioRpcError as error:
        found = False
        assert error.code() in {
            grpc.StatusCode.NOT_FOUND,
            grpc.StatusCode.FAILED_PRECONDITION,
        }, surface
        if role is None:
            assert played.dealt not in (error.details() or ""), "a public refusal echoes the id"
    else:
        found = True
        assert CAROL not in text_of(answer) or "player ids" in cell
    assert found == cell.startswith("every round"), (surface, role, cell)


@SQLITE_ONLY
async def test_the_mutations_answer_as_the_table_says(live: tuple[Service, str]) -> None:
    service, _ = live
    shuffled = await service.call(
        "dealer", "Shuffle", dealer_pb2.ShuffleRequest(request_id="m-1", table_id="m")
    )
    assert "playerId" not in text_of(shuffled) and "playerRef" not in text_of(shuffled)
    assert TABLE["DealerService/Shuffle"]["operator"] == "the new round: no seats yet"
    dealt = await service.call(
        "dealer",
        "Deal",
        dealer_pb2.DealRequest(
            request_id="m-2",
            round_id=shuffled.round.round_id,
            seats=[round_pb2.Seat(seat_number=1, player_id=ALICE, stake=1)],
        ),
    )
    (seat,) = dealt.round.seats
    assert seat.player_id == ALICE
    assert re.fullmatch(r"p-[0-9a-f]{32}", seat.player_ref)
    played = Played(shuffled.round.round_id, "", {ALICE: seat.player_ref}, "m")
    answers = {"DealerService/Deal": dealt}
    for surface, request in [
        ("DealerService/Reveal", dealer_pb2.RevealRequest(request_id="m-3")),
        ("DealerService/Settle", dealer_pb2.SettleRequest(request_id="m-4")),
    ]:
        request.round_id = played.settled
        answers[surface] = await service.call("dealer", surface.split("/")[1], request)
    second = await service.call(
        "dealer", "Shuffle", dealer_pb2.ShuffleRequest(request_id="m-5", table_id="m")
    )
    await service.call(
        "dealer",
        "Deal",
        dealer_pb2.DealRequest(
            request_id="m-6",
            round_id=second.round.round_id,
            seats=[round_pb2.Seat(seat_number=1, player_id=ALICE, stake=1)],
        ),
    )
    voided = await service.call(
        "dealer",
        "VoidRound",
        dealer_pb2.VoidRoundRequest(
            reason_code=round_pb2.VOID_REASON_PLATFORM_FAILURE,
            request_id="m-7",
            round_id=second.round.round_id,
            reason="test",
        ),
    )
    second_ref = voided.round.seats[0].player_ref
    assert second_ref != seat.player_ref, "two rounds of one player share a reference"
    for surface, answer in answers.items():
        check_answer(TABLE[surface]["operator"], text_of(answer), played, surface)
    forgot = await service.call(
        "dealer", "ForgetPlayer", dealer_pb2.ForgetPlayerRequest(player_id=ALICE)
    )
    assert forgot.forgotten and forgot.seats_unlinked == 2
    check_answer(TABLE["DealerService/ForgetPlayer"]["operator"], text_of(forgot), played, "F")
    after = await service.call(
        "dealer", "GetRound", dealer_pb2.GetRoundRequest(round_id=played.settled)
    )
    assert after.round.seats[0].player_ref == seat.player_ref
    assert after.round.seats[0].player_id == "", "a forgotten player is still linked"


@SQLITE_ONLY
async def test_the_http_port_is_what_the_table_says(live: tuple[Service, str]) -> None:
    service, base = live
    played = await play(service)
    size, before_dealt = await asyncio.to_thread(tile_sizes, service, played)
    paths = {
        "HTTP GET /rounds": f"/rounds?table_id={played.table_id}",
        "HTTP GET /rounds/{id}/receipt": f"/rounds/{played.settled}/receipt",
        "HTTP GET /keys": "/keys",
        "HTTP GET /metrics": "/metrics",
        "HTTP GET /log/checkpoint": "/log/checkpoint",
        "HTTP GET /log/tile/{L}/{N}": f"/log/tile/0/000.p/{size}",
        # Every entry up to the dealt round's first: the settled round's, public.
        "HTTP GET /log/tile/entries/{N}": f"/log/tile/entries/000.p/{before_dealt}",
    }
    assert {surface for surface in TABLE if surface.startswith("HTTP ")} == set(paths)
    async with aiohttp.ClientSession() as session:
        for surface, path in paths.items():
            cell = TABLE[surface]["public"]
            async with session.get(base + path) as response:
                text = (await response.read()).decode("utf-8", "replace")
            if cell.startswith("refused"):
                assert response.status == 403, (surface, response.status)
                assert json.loads(text)["error"]
                continue
            assert response.status == 200, (surface, response.status, text[:200])
            check_answer(cell, text, played, surface)
        async with session.get(f"{base}/rounds/{played.dealt}/receipt") as response:
            assert response.status == 404
            assert played.dealt not in await response.text()
        # "refused while a round in one is not": the bundle with the dealt round's entries.
        assert "refused while" in TABLE["HTTP GET /log/tile/entries/{N}"]["public"]
        async with session.get(f"{base}/log/tile/entries/000.p/{size}") as response:
            assert response.status == 403
            text = await response.text()
            assert json.loads(text)["error"] == "PERMISSION_DENIED"
            assert played.dealt not in text and CAROL not in text


def tile_sizes(service: Service, played: Played) -> tuple[int, int]:
    """The latest checkpoint's size, and the index of the dealt round's first entry."""
    size = signed_size(service.app.store)
    rows = service.app.store.query(
        "SELECT MIN(idx) FROM log_entries WHERE round_id = ?", (played.dealt,)
    )
    first = int(rows[0][0])
    assert 0 < first < size <= TILE_WIDTH, "the tests' log fits one partial tile"
    return size, first


@SQLITE_ONLY
async def test_a_published_bucket_is_what_the_table_says(live: tuple[Service, str]) -> None:
    """A bucket's files are what the store renders for the publisher: public ones (a public
    bucket) unless ``--all-bundles`` (a private bucket, the auditor's column)."""
    service, _ = live
    played = await play(service)
    store = service.app.store
    size, before_dealt = await asyncio.to_thread(tile_sizes, service, played)
    served = await asyncio.to_thread(served_checkpoint, store, NO_WITNESSES, cosigned=True)
    assert served is not None

    def bundle(width: int, *, public: bool) -> str | None:
        ref = TileRef(None, 0, width)
        try:
            data = read_tile(store, ref, public=public, covered_size=size)
        except BundleNotPublic:
            return None
        return data.decode("utf-8", "replace")

    def hashes() -> str:
        data = read_tile(store, TileRef(0, 0, size), public=True, covered_size=size)
        return data.decode("utf-8", "replace")

    files = {
        "bucket checkpoint": lambda public: served.note,
        "bucket tile/{L}/{N}": lambda public: hashes(),
        "bucket tile/entries/{N}": lambda public: bundle(before_dealt, public=public),
    }
    assert {surface for surface in TABLE if surface.startswith("bucket ")} == set(files)
    for surface, read in files.items():
        for role in ("public", "auditor"):
            cell = TABLE[surface][role]
            text = await asyncio.to_thread(read, role == "public")
            assert text is not None, (surface, role)
            check_answer(cell, text, played, f"{surface} ({role})")
    # The bundle holding the dealt round: not written to a public bucket, written with
    # --all-bundles, and then it holds that round's seats.
    entries = TABLE["bucket tile/entries/{N}"]
    assert "others are not written" in entries["public"] and "every bundle" in entries["auditor"]
    assert await asyncio.to_thread(bundle, size, public=True) is None
    private = await asyncio.to_thread(bundle, size, public=False)
    assert private is not None and played.dealt in private and CAROL not in private
