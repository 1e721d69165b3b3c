"""Refusals stay small whatever the request held: every echoed value cut with a marker, a fixed
number of field violations, trailers under 4 KiB, so a default client sees the real status."""

from __future__ import annotations

import base64
import uuid

import grpc
import pytest
from gnau.v1 import audit_pb2, dealer_pb2, round_pb2
from google.rpc import error_details_pb2, status_pb2
from hypothesis import given
from hypothesis import strategies as st

from gnau_service.rounds.limits import (
    MAX_ERROR_MESSAGE_BYTES,
    MAX_FIELD_VIOLATIONS,
    MAX_TRAILER_BYTES,
)
from gnau_service.rounds.refusals import RoundNotFound, TableBusy, WrongState
from gnau_service.rules.errors import CardError
from gnau_service.server.grpc.statuses import bad_request, status_of
from tests.server.conftest import Service
from tests.server.test_service import details, shuffle


def percent_encoded_length(message: str) -> int:
    """The length of grpc-message on the wire: bytes outside printable ASCII, and '%', take 3."""
    return sum(3 if byte < 0x20 or byte > 0x7E or byte == 0x25 else 1 for byte in message.encode())


def trailer_bytes(status: grpc.Status) -> int:
    """What a status's trailers take on the wire (names, values, base64 for -bin values)."""
    size = len("grpc-status") + 2 + len("grpc-message") + percent_encoded_length(status.details)
    for key, value in status.trailing_metadata:
        size += len(key) + (len(base64.b64encode(value)) if key.endswith("-bin") else len(value))
    return size


def wire_trailer_bytes(error: grpc.aio.AioRpcError) -> int:
    size = len("grpc-status") + 2 + len("grpc-message") + percent_encoded_length(error.details())
    for key, value in error.trailing_metadata() or ():
        encoded = base64.b64encode(value) if isinstance(value, bytes) else value.encode()
        size += len(key) + len(encoded)
    return size


#: The table the Deal tests shuffle at: catalogued to take any stake and seat count the service
#: allows (issue 38; a starter table seats at most 6), so a Deal's refusals are the test's own.
TABLE = "errors"
#: Catalogued by the service fixtures (tests/catalogued.py, catalogue_module_tables).
CATALOGUED = (TABLE,)


hostile_text = st.text(min_size=0, max_size=3000) | st.builds(
    lambda char, count: char * count, st.characters(), st.integers(0, 50_000)
)


@given(
    st.lists(st.tuples(hostile_text, hostile_text), min_size=1, max_size=300),
)
def test_a_bad_request_of_any_size_stays_under_the_trailer_budget(
    violations: list[tuple[str, str]],
) -> None:
    status = bad_request(violations)
    assert trailer_bytes(status) + 100 < MAX_TRAILER_BYTES  # 100: the request id trailer
    assert len(status.details.encode()) <= MAX_ERROR_MESSAGE_BYTES
    decoded = status_pb2.Status.FromString(
        dict(status.trailing_metadata)["grpc-status-details-bin"]
    )
    bad = error_details_pb2.BadRequest()
    assert decoded.details[0].Unpack(bad)
    assert len(bad.field_violations) == min(len(violations), MAX_FIELD_VIOLATIONS)
    if len(violations) > 1:
        assert status.details.endswith(f" (and {len(violations) - 1} more)")


@given(hostile_text)
def test_refusals_that_echo_a_value_stay_under_the_budget(value: str) -> None:
    for error in (
        RoundNotFound(value),
        TableBusy(value, value, value),
        WrongState(value, value, value),  # type: ignore[arg-type]
        CardError(f"not a card: {value}", token=value),
    ):
        status = status_of(error)
        assert trailer_bytes(status) + 100 < MAX_TRAILER_BYTES, type(error).__name__


def test_a_cut_value_says_how_much_was_left_out() -> None:
    status = status_of(RoundNotFound("r" * 20_000))
    assert "…(+" in status.details and "chars)" in status.details
    assert len(status.details.encode()) < 200


async def deal_refused(
    service: Service, round_id: str, seats: list[round_pb2.Seat]
) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await service.call(
            "dealer",
            "Deal",
            dealer_pb2.DealRequest(request_id=str(uuid.uuid4()), round_id=round_id, seats=seats),
        )
    return caught.value


async def test_eighty_three_seats_on_one_deck_get_their_real_status(service: Service) -> None:
    round_ = await shuffle(service, TABLE)
    # 1,500 seats are about 60 KB: near the request limit (64 KiB), which refuses more unread.
    for count in (83, 1_500):
        seats = [
            round_pb2.Seat(seat_number=n, player_id=f"player-{n}" * 3, stake=1)
            for n in range(1, count + 1)
        ]
        error = await deal_refused(service, round_.round_id, seats)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
        assert details(error)[0] == ["seats"]
        assert wire_trailer_bytes(error) < MAX_TRAILER_BYTES


async def test_a_long_list_of_bad_seats_lists_five_and_counts_the_rest(service: Service) -> None:
    round_ = await shuffle(service, TABLE)
    seats = [round_pb2.Seat(seat_number=n, player_id="p", stake=0) for n in range(1, 8)]
    error = await deal_refused(service, round_.round_id, seats)
    fields, _ = details(error)
    assert fields == [f"seats[{i}].stake" for i in range(5)]
    assert str(error.details()).endswith(" (and 6 more)")


@pytest.mark.parametrize(
    ("method", "message"),
    [
        ("GetRound", dealer_pb2.GetRoundRequest(round_id="r" * 20_000)),
        ("Reveal", dealer_pb2.RevealRequest(request_id="x", round_id="r" * 20_000)),
        ("GetRound", dealer_pb2.GetRoundRequest(round_id="")),
        ("Settle", dealer_pb2.SettleRequest(request_id="x", round_id="é" * 65)),
        # A NUL no PostgreSQL text can hold: it was INTERNAL (found by the fuzz test).
        ("GetRound", dealer_pb2.GetRoundRequest(round_id="r-\x00")),
        (
            "VoidRound",
            dealer_pb2.VoidRoundRequest(
                reason_code=round_pb2.VOID_REASON_PLATFORM_FAILURE,
                request_id="x",
                round_id="r\n",
                reason="x",
            ),
        ),
    ],
)
async def test_an_oversized_or_empty_round_id_is_invalid_not_unknown(
    service: Service, method: str, message: object
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await service.call("dealer", method, message)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details(caught.value)[0] == ["round_id"]
    assert wire_trailer_bytes(caught.value) < MAX_TRAILER_BYTES


async def test_verify_round_checks_the_round_id_too(service: Service) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await service.call("audit", "VerifyRound", audit_pb2.VerifyRoundRequest(round_id="r" * 200))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_long_bad_card_is_cut_in_the_message(service: Service) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await service.call(
            "dealer",
            "EvaluateHand",
            dealer_pb2.EvaluateHandRequest(cards=["Z" * 60_000, "2C", "3C", "4C", "5C"]),
            role=None,
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "…(+" in str(caught.value.details())
    assert wire_trailer_bytes(caught.value) < MAX_TRAILER_BYTES
