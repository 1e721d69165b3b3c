"""Each limit is defined once in the code, stated in the same words by the proto and docs/api.md,
and enforced exactly at its boundary over the wire: the limit itself passes, one more fails."""

from __future__ import annotations

import uuid
from pathlib import Path

import grpc
import pytest
from gnau.v1 import dealer_pb2, round_pb2
from gnau_client import _common as client_common

from gnau_service.rounds import limits
from gnau_service.server.process.config import Settings
from tests.server.conftest import Service
from tests.server.test_service import details, shuffle

ROOT = Path(__file__).resolve().parents[2]
DEALER_PROTO = (ROOT / "proto/gnau/v1/dealer.proto").read_text()
ROUND_PROTO = (ROOT / "proto/gnau/v1/round.proto").read_text()
AUDIT_PROTO = (ROOT / "proto/gnau/v1/audit.proto").read_text()
API_DOC = (ROOT / "docs/api.md").read_text()
CONFIG_DOC = (ROOT / "docs/configuration.md").read_text()


def flat(text: str) -> str:
    """Text with its line breaks, runs of spaces and comment markers folded into one space."""
    return " ".join(" ".join(line.strip().removeprefix("//") for line in text.splitlines()).split())


#: (where, the phrase it must hold), each phrase written from the code's constant.
STATED = [
    (DEALER_PROTO, f"1 to {limits.MAX_REQUEST_ID_CHARS} printable ASCII characters"),
    (API_DOC, f"1 to {limits.MAX_REQUEST_ID_CHARS} printable ASCII characters"),
    (DEALER_PROTO, "table_id = 2"),
    (DEALER_PROTO, f"1 to {limits.MAX_TABLE_ID_BYTES} bytes of UTF-8, with no control character"),
    (API_DOC, f"1 to {limits.MAX_TABLE_ID_BYTES} bytes of UTF-8, no control character"),
    (DEALER_PROTO, f"(1 to {limits.MAX_ROUND_ID_BYTES} bytes of UTF-8, no control character)"),
    (AUDIT_PROTO, f"(1 to {limits.MAX_ROUND_ID_BYTES} bytes of UTF-8, no control character)"),
    (ROUND_PROTO, f"(1 to {limits.MAX_ROUND_ID_BYTES} bytes of UTF-8, no control character)"),
    (API_DOC, f"| `round_id` (every call that names one) | 1 to {limits.MAX_ROUND_ID_BYTES} bytes"),
    (ROUND_PROTO, "Seat number, 1 to 2^31-1, unique in the round; numbers may have gaps"),
    (API_DOC, f"1 to {limits.MAX_SEAT_NUMBER} (2^31-1), unique in the round; gaps allowed"),
    (ROUND_PROTO, f"non-empty, at most {limits.MAX_PLAYER_ID_BYTES} bytes of UTF-8"),
    (API_DOC, f"| `player_id` | 1 to {limits.MAX_PLAYER_ID_BYTES} bytes of UTF-8"),
    (ROUND_PROTO, f"0 to {limits.MAX_CLIENT_SEED_BYTES} bytes"),
    (API_DOC, f"| `client_seed` | 0 to {limits.MAX_CLIENT_SEED_BYTES} bytes"),
    (ROUND_PROTO, f"at most {limits.MAX_BEACON_LABEL_BYTES} bytes"),
    (ROUND_PROTO, f"1 to {limits.MAX_BEACON_VALUE_BYTES} bytes"),
    (
        API_DOC,
        f"1 to {limits.MAX_BEACON_LABEL_BYTES} bytes of UTF-8 / 1 to "
        f"{limits.MAX_BEACON_VALUE_BYTES} bytes",
    ),
    (DEALER_PROTO, f"0 to {limits.MAX_VOID_REASON_BYTES} bytes of UTF-8, no control character"),
    (API_DOC, f"0 to {limits.MAX_VOID_REASON_BYTES} bytes of UTF-8, no control character"),
    (DEALER_PROTO, f"At most {limits.MAX_COMPLETED_BY_BYTES} bytes"),
    (API_DOC, f"at most {limits.MAX_COMPLETED_BY_BYTES} bytes of UTF-8"),
    (ROUND_PROTO, f"{limits.LARGEST_MAX_STAKE:,} at most"),
    (ROUND_PROTO, "10^12 by default"),
    (API_DOC, f"default {limits.DEFAULT_MAX_STAKE}, at most {limits.LARGEST_MAX_STAKE}"),
    (API_DOC, f"above {limits.LARGEST_MAX_STAKE} ="),
    (CONFIG_DOC, f"`{limits.DEFAULT_MAX_STAKE}` | largest stake, in minor units; at most "),
    (CONFIG_DOC, f"at most `{limits.LARGEST_MAX_STAKE}`"),
    (DEALER_PROTO, f"at most 9 seats with one deck, {limits.MOST_SEATS} with eight"),
    (API_DOC, f"at most 9 seats with 1 deck, {limits.MOST_SEATS} with 8"),
    (
        DEALER_PROTO,
        f"the server's default ({limits.DEFAULT_PAGE_SIZE}); values above "
        f"{limits.MAX_PAGE_SIZE} are treated as {limits.MAX_PAGE_SIZE}",
    ),
    (
        API_DOC,
        f"0 means {limits.DEFAULT_PAGE_SIZE}; more than {limits.MAX_PAGE_SIZE} means "
        f"{limits.MAX_PAGE_SIZE}",
    ),
    (DEALER_PROTO, f"at most {limits.MAX_PAGE_TOKEN_CHARS} characters"),
    (API_DOC, f"at most {limits.MAX_PAGE_TOKEN_CHARS} characters"),
    (
        AUDIT_PROTO,
        f"{limits.ENTRIES_PER_MESSAGE} a message and at most "
        f"{limits.MAX_ENTRIES_PER_CALL:,} a call",
    ),
    (
        API_DOC,
        f"{limits.ENTRIES_PER_MESSAGE} entries a message, {limits.MAX_ENTRIES_PER_CALL} a call",
    ),
    (AUDIT_PROTO, f"every {limits.WATCH_INTERVAL_SECONDS} s"),
    (API_DOC, f"every {limits.WATCH_INTERVAL_SECONDS} s"),
    (AUDIT_PROTO, f"({limits.DEFAULT_MAX_STREAMS} by default)"),
    (AUDIT_PROTO, f"of a caller without one ({limits.DEFAULT_MAX_STREAMS_PER_CALLER})"),
    (
        API_DOC,
        f"`--max-streams` ({limits.DEFAULT_MAX_STREAMS}) in total, `--max-streams-per-caller` "
        f"({limits.DEFAULT_MAX_STREAMS_PER_CALLER}) from one caller",
    ),
    (
        API_DOC,
        f"`--max-calls-per-caller` ({limits.DEFAULT_MAX_CALLS_PER_CALLER}) from one caller",
    ),
    (DEALER_PROTO, f"naming at most {limits.MAX_FIELD_VIOLATIONS} of them"),
    (API_DOC, f"lists at most {limits.MAX_FIELD_VIOLATIONS} field violations"),
    (API_DOC, f"each field path at most {limits.MAX_FIELD_PATH_BYTES} bytes"),
    (API_DOC, f"description at most {limits.MAX_VIOLATION_BYTES}"),
    (API_DOC, f"the message is at most {limits.MAX_ERROR_MESSAGE_BYTES} bytes of UTF-8"),
    (DEALER_PROTO, f"under {limits.MAX_TRAILER_BYTES // 1024} KiB"),
    (API_DOC, f"stay under {limits.MAX_TRAILER_BYTES // 1024} KiB"),
    (API_DOC, f"echoed if 1 to {limits.MAX_REQUEST_ID_HEADER_CHARS} printable ASCII"),
]


@pytest.mark.parametrize(("text", "phrase"), STATED, ids=[phrase for _, phrase in STATED])
def test_each_limit_is_stated_where_clients_read_it(text: str, phrase: str) -> None:
    assert phrase in flat(text)


def test_the_stated_numbers_are_the_codes() -> None:
    # The few limits stated in words rather than from the constant, checked the other way.
    assert limits.MAX_SEAT_NUMBER == 2**31 - 1
    assert limits.MAX_JSON_INTEGER == 2**53 - 1
    assert limits.DEFAULT_MAX_STAKE == 10**12
    assert limits.MAX_TRAILER_BYTES == 4096
    assert Settings().max_stake == limits.DEFAULT_MAX_STAKE
    assert Settings().max_streams == limits.DEFAULT_MAX_STREAMS
    # The client package checks request ids before sending; it cannot import the server's.
    assert client_common.MAX_REQUEST_ID_LENGTH == limits.MAX_REQUEST_ID_CHARS


def rid() -> str:
    return str(uuid.uuid4())


#: A table id of exactly the most bytes a table id may have (two bytes a character).
LONGEST_TABLE_ID = "é" * (limits.MAX_TABLE_ID_BYTES // 2)
#: The tables the tests below deal at. Each is catalogued (issue 38) with :data:`WIDE_OPEN`
#: limits, so that a stake or seat is held to the service's limits, not a table's.
TABLES = (LONGEST_TABLE_ID, "rq", "void-1", "void-2", "seats", "stakes", "list-a", "list-b")
#: Catalogued by the service fixtures (tests/catalogued.py, catalogue_module_tables).
CATALOGUED = TABLES


async def refused_fields(service: Service, method: str, request: object) -> list[str]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await service.call("dealer", method, request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    return details(caught.value)[0]


async def test_table_id_holds_at_its_boundary(service: Service) -> None:
    at_limit = LONGEST_TABLE_ID
    await service.call(
        "dealer", "Shuffle", dealer_pb2.ShuffleRequest(request_id=rid(), table_id=at_limit)
    )
    over = at_limit + "x"
    assert await refused_fields(
        service, "Shuffle", dealer_pb2.ShuffleRequest(request_id=rid(), table_id=over)
    ) == ["table_id"]


async def test_round_id_holds_at_its_boundary(service: Service) -> None:
    at_limit = "r" * limits.MAX_ROUND_ID_BYTES
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await service.call("dealer", "GetRound", dealer_pb2.GetRoundRequest(round_id=at_limit))
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    assert await refused_fields(
        service, "GetRound", dealer_pb2.GetRoundRequest(round_id=at_limit + "r")
    ) == ["round_id"]


async def test_request_id_holds_at_its_boundary(service: Service) -> None:
    await service.call(
        "dealer",
        "Shuffle",
        dealer_pb2.ShuffleRequest(request_id="x" * limits.MAX_REQUEST_ID_CHARS, table_id="rq"),
    )
    assert await refused_fields(
        service,
        "Shuffle",
        dealer_pb2.ShuffleRequest(request_id="y" * (limits.MAX_REQUEST_ID_CHARS + 1), table_id="t"),
    ) == ["request_id"]


async def test_void_reason_holds_at_its_boundary(service: Service) -> None:
    first = await shuffle(service, "void-1")
    await service.call(
        "dealer",
        "VoidRound",
        dealer_pb2.VoidRoundRequest(
            reason_code=round_pb2.VOID_REASON_PLATFORM_FAILURE,
            request_id=rid(),
            round_id=first.round_id,
            reason="é" * (limits.MAX_VOID_REASON_BYTES // 2),
        ),
    )
    second = await shuffle(service, "void-2")
    assert await refused_fields(
        service,
        "VoidRound",
        dealer_pb2.VoidRoundRequest(
            reason_code=round_pb2.VOID_REASON_PLATFORM_FAILURE,
            request_id=rid(),
            round_id=second.round_id,
            reason="x" * (limits.MAX_VOID_REASON_BYTES + 1),
        ),
    ) == ["reason"]


async def test_seat_numbers_hold_at_their_boundary_and_may_have_gaps(service: Service) -> None:
    round_ = await shuffle(service, "seats")
    seats = [
        round_pb2.Seat(seat_number=limits.MAX_SEAT_NUMBER, player_id="last", stake=5),
        round_pb2.Seat(seat_number=3, player_id="third", stake=5),
    ]
    dealt = await service.call(
        "dealer",
        "Deal",
        dealer_pb2.DealRequest(request_id=rid(), round_id=round_.round_id, seats=seats),
    )
    assert [hand.seat_number for hand in dealt.round.hands] == [3, limits.MAX_SEAT_NUMBER]


async def test_stakes_hold_at_the_max_stake(service: Service) -> None:
    round_ = await shuffle(service, "stakes")
    seat = round_pb2.Seat(seat_number=1, player_id="p", stake=limits.DEFAULT_MAX_STAKE + 1)
    assert await refused_fields(
        service,
        "Deal",
        dealer_pb2.DealRequest(request_id=rid(), round_id=round_.round_id, seats=[seat]),
    ) == ["seats[0].stake"]
    seat.stake = limits.DEFAULT_MAX_STAKE
    await service.call(
        "dealer",
        "Deal",
        dealer_pb2.DealRequest(request_id=rid(), round_id=round_.round_id, seats=[seat]),
    )


async def test_an_empty_table_id_lists_every_table_and_a_token_keeps_its_table(
    service: Service,
) -> None:
    for table in ("list-a", "list-b", "list-a"):
        round_ = await shuffle(service, table)
        await service.call(
            "dealer",
            "VoidRound",
            dealer_pb2.VoidRoundRequest(
                reason_code=round_pb2.VOID_REASON_PLATFORM_FAILURE,
                request_id=rid(),
                round_id=round_.round_id,
                reason="x",
            ),
        )
    everything = await service.call(
        "dealer", "ListRounds", dealer_pb2.ListRoundsRequest(page_size=2), role="auditor"
    )
    assert {round_.table_id for round_ in everything.rounds} <= {"list-a", "list-b"}
    assert len(everything.rounds) == 2 and everything.next_page_token
    with pytest.raises(grpc.aio.AioRpcError) as other_table:
        await service.call(
            "dealer",
            "ListRounds",
            dealer_pb2.ListRoundsRequest(table_id="list-a", page_token=everything.next_page_token),
            role="auditor",
        )
    assert other_table.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details(other_table.value)[0] == ["page_token"]
    rest = await service.call(
        "dealer",
        "ListRounds",
        dealer_pb2.ListRoundsRequest(page_token=everything.next_page_token),
        role="auditor",
    )
    assert len(rest.rounds) == 1 and not rest.next_page_token


@pytest.mark.parametrize(
    "token",
    [
        "!!!",
        "x" * (limits.MAX_PAGE_TOKEN_CHARS + 1),
        "WyJhIl0=",  # ["a"]
        "bnVsbA==",  # null
        "W1tdLDEsMl0=",  # [[],1,2]
        # ["", "2026-11-30T00:00:00Z", "r\u0000"]: a NUL that reached PostgreSQL (fuzz)
        "WyIiLCAiMjAyNi0xMS0zMFQwMDowMDowMFoiLCAiclx1MDAwMCJd",
        "WyIiLCAibm90IGEgdGltZSIsICJyLTEiXQ==",  # ["", "not a time", "r-1"]
    ],
)
async def test_a_page_token_not_of_this_service_is_refused(service: Service, token: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await service.call(
            "dealer", "ListRounds", dealer_pb2.ListRoundsRequest(page_token=token), role="auditor"
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details(caught.value)[0] == ["page_token"]
