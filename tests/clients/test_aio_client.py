"""AsyncGnauClient (grpc.aio) against the same real in-process server as the sync client."""

from __future__ import annotations

import asyncio
import uuid

import grpc
import pytest
from gnau.v1 import dealer_pb2, round_pb2
from gnau_client import AsyncGnauClient, EntryOrderError, HouseRules, Seat

from tests.clients.conftest import FAST_RETRY
from tests.clients.fakes import FakeServer, make_round

SEATS = [Seat(seat_number=1, player_id="alice", stake=100)]


def test_play_round_with_retries_token_and_deadlines(fake: FakeServer) -> None:
    async def play() -> round_pb2.Round:
        async with AsyncGnauClient(fake.target, token="tok", retry=FAST_RETRY) as client:
            return await client.play_round("table-1", SEATS, HouseRules(decks=2))

    fake.recorder.fail("Deal", grpc.StatusCode.UNAVAILABLE, times=2)
    settled = asyncio.run(play())
    assert settled.state == round_pb2.ROUND_STATE_SETTLED
    assert fake.recorder.methods() == ["Shuffle", "Deal", "Deal", "Deal", "Reveal", "Settle"]
    ids = [call.request.request_id for call in fake.recorder.calls]  # type: ignore[attr-defined]
    assert all(uuid.UUID(request_id).version == 4 for request_id in ids)
    assert ids[1] == ids[2] == ids[3]
    assert len(set(ids)) == 4
    for call in fake.recorder.calls:
        assert call.metadata["authorization"] == "Bearer tok"
        assert call.time_remaining is not None and call.time_remaining <= 5.1


def test_play_round_failure_note(fake: FakeServer) -> None:
    async def play() -> None:
        async with AsyncGnauClient(fake.target, retry=FAST_RETRY) as client:
            await client.play_round("table-1", SEATS)

    fake.recorder.fail("Settle", grpc.StatusCode.FAILED_PRECONDITION)
    with pytest.raises(grpc.RpcError) as caught:
        asyncio.run(play())
    assert caught.value.__notes__ == ["play_round: round 'r-1' stopped at Settle"]


def test_reads_and_streams(fake: FakeServer) -> None:
    async def read() -> None:
        async with AsyncGnauClient(fake.target, retry=FAST_RETRY) as client:
            assert (await client.get_round("r-1")).round_id == "r-1"
            voided = await client.void_round("r-1", round_pb2.VOID_REASON_TABLE_CLOSED, "why")
            assert voided.void_reason == "why"
            assert (await client.evaluate_hand("3C 6S 8H 4H 8C")).value == 8
            assert (await client.get_checkpoint()).startswith("gnau-dealer/test\n")
            assert await client.get_inclusion_proof(1, 2) == [b"\x01" * 32, b"\x02" * 32]
            assert await client.get_consistency_proof(1, 2) == [b"\x03" * 32]
            assert (await client.get_public_keys()).origin == "gnau-dealer/test"
            assert (await client.verify_round("r-1")).ok
            assert [e.index async for e in client.get_entries(0, 5)] == [0, 1, 2, 3, 4]
            fake.audit.watch_breaks.extend([4])
            assert [e.index async for e in client.watch_entries(3)] == list(range(3, 10))
            fake.audit.skip_index = 2
            with pytest.raises(EntryOrderError):
                [e.index async for e in client.get_entries(0, 5)]

    asyncio.run(read())
    starts = [call.request.start_index for call in fake.recorder.of("WatchEntries")]  # type: ignore[attr-defined]
    assert starts == [3, 7]


def test_rounds_of_one_operator(fake: FakeServer) -> None:
    settled = round_pb2.ROUND_STATE_SETTLED
    fake.dealer.pages = {
        "": dealer_pb2.ListRoundsResponse(rounds=[make_round("r-2", settled)], next_page_token="p"),
        "p": dealer_pb2.ListRoundsResponse(rounds=[make_round("r-1", settled)]),
    }

    async def read() -> list[str]:
        async with AsyncGnauClient(fake.target, retry=FAST_RETRY) as client:
            await client.list_rounds(operator="casino-a")
            return [round_.round_id async for round_ in client.iter_rounds(operator="casino-b")]

    assert asyncio.run(read()) == ["r-2", "r-1"]
    requests = [call.request for call in fake.recorder.of("ListRounds")]
    assert [(r.operator, r.page_token) for r in requests] == [  # type: ignore[attr-defined]
        ("casino-a", ""),
        ("casino-b", ""),
        ("casino-b", "p"),
    ]


def test_a_token_never_crosses_the_network_in_clear_text() -> None:
    with pytest.raises(ValueError, match="clear text"):
        AsyncGnauClient("dealer.example:443", token="t")
