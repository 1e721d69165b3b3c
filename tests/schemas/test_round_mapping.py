"""The mapping docs/fairness.md (§6) gives from the API's Round message to the revealed round,
checked against ``revealed_round_from_proto`` (what ``gnau round get --json`` writes), with the
expected documents written out by hand from that table."""

from __future__ import annotations

import json

import pytest
from gnau.v1 import round_pb2, types_pb2

from gnau_service.fairness.errors import FairnessError
from gnau_service.server.grpc.convert import revealed_round_from_proto
from tests.schemas.served import Served
from tests.schemas.validation import errors

DECK = [rank + suit for suit in "CDHS" for rank in "A23456789TJQK"]


def _message(**fields: object) -> round_pb2.Round:
    # A v2 or v3 round's seats carry references (and, to the operator, the player ids beside
    # them).
    referenced = fields.get("fairness_version") in {2, 3}
    refs = ("p-" + "1a" * 16, "p-" + "2b" * 16) if referenced else ()
    message = round_pb2.Round(
        round_id="r-0123456789abcdef01234567",
        table_id="table-9",
        state=round_pb2.ROUND_STATE_SETTLED,
        log_key_id="0c787b25",
        commitment="0a" * 32,
        transcript_hash="0b" * 32,
        server_seed="0c" * 32,
        seats=[
            round_pb2.Seat(
                seat_number=1, player_id="ann", player_ref=refs[0] if refs else "", stake=5
            ),
            round_pb2.Seat(
                seat_number=3,
                player_id="zoë",
                player_ref=refs[1] if refs else "",
                stake=10**12,
                client_seed=b"\x01\xab",
            ),
        ],
        # Given out of seat order: the revealed round lists them by seat number.
        hands=[
            round_pb2.SeatHand(seat_number=3, cards=["2C", "5C", "8C", "JC", "AD"]),
            round_pb2.SeatHand(seat_number=1, cards=["AC", "4C", "7C", "TC", "KC"]),
        ],
        dealer_hand=["3C", "6C", "9C", "QC", "2D"],
        deck=DECK,
        void_reason="",
        log_indices=[4, 5, 6, 7],
        **fields,  # type: ignore[arg-type]
    )
    return message


EXPECTED_SEATS = [
    {"seat_number": 1, "player_id": "ann", "stake": 5, "client_seed": ""},
    {"seat_number": 3, "player_id": "zoë", "stake": 1000000000000, "client_seed": "01ab"},
]
EXPECTED_HANDS = [
    {"seat_number": 1, "cards": ["AC", "4C", "7C", "TC", "KC"]},
    {"seat_number": 3, "cards": ["2C", "5C", "8C", "JC", "AD"]},
]


def test_every_field_maps_as_the_table_says() -> None:
    rules = types_pb2.HouseRules(
        ten_is_duke=True,
        trips_make_ox=False,
        tie=types_pb2.TIE_RULE_HIGH_CARD,
        payout=types_pb2.PAYOUT_TABLE_MULTIPLIER,
        suited_double=True,
    )  # three_six_pair, five_small and decks left unset: their defaults
    beacon = round_pb2.Beacon(label="drand/quicknet/round/7", value=b"\xff\x00\x10")
    document = revealed_round_from_proto(_message(house_rules=rules, beacon=beacon)).to_json()
    assert document == {
        "format": "gnau-dealer/revealed-round/v1",
        "round_id": "r-0123456789abcdef01234567",
        "house_rules": {
            "ten_is_duke": True,
            "three_six_pair": False,
            "trips_make_ox": False,
            "five_small": True,
            "tie": "high_card",
            "payout": "multiplier",
            "suited_double": True,
            "decks": 1,
        },
        "seats": EXPECTED_SEATS,
        "beacon": {"label": "drand/quicknet/round/7", "value": "ff0010"},
        "commitment": "0a" * 32,
        "transcript_hash": "0b" * 32,
        "server_seed": "0c" * 32,
        "deck": DECK,
        "hands": EXPECTED_HANDS,
        "dealer_hand": ["3C", "6C", "9C", "QC", "2D"],
    }
    assert errors("revealed-round.schema.json", document) == []


def test_unset_fields_take_the_documented_defaults() -> None:
    document = revealed_round_from_proto(_message()).to_json()
    assert document["beacon"] is None
    assert document["house_rules"] == {
        "ten_is_duke": False,
        "three_six_pair": False,
        "trips_make_ox": True,
        "five_small": True,
        "tie": "dealer",
        "payout": "points",
        "suited_double": False,
        "decks": 1,
    }
    assert errors("revealed-round.schema.json", document) == []


def test_a_round_voided_before_its_deal_has_no_revealed_round() -> None:
    message = _message()
    del message.seats[:]
    del message.hands[:]
    del message.dealer_hand[:]
    del message.deck[:]
    with pytest.raises(FairnessError):
        revealed_round_from_proto(message)


def test_the_mapping_of_a_served_round_is_the_round_of_its_receipt(served: Served) -> None:
    assert set(served.rounds) == set(served.receipts) - {
        "voided_shuffled",
        "v1_voided_shuffled",
        "v2_voided_shuffled",
    }
    for story, document in served.rounds.items():
        assert document == json.loads(served.receipts[story])["round"], story


def test_the_fairness_version_of_the_message_gives_the_format() -> None:
    """docs/fairness.md, §6: 1, 2 and 3 name the format; 0 (a service older than the field,
    which never made a v3 round) is read from the seats: v2 if every one has a reference; any
    other number is refused."""
    referenced = [
        round_pb2.Seat(seat_number=1, player_ref="p-" + "1a" * 16, stake=5),
        round_pb2.Seat(
            seat_number=3, player_ref="p-" + "2b" * 16, stake=10**12, client_seed=b"\x01"
        ),
    ]
    as_v2 = revealed_round_from_proto(_message(fairness_version=2))
    assert as_v2.to_json()["format"] == "gnau-dealer/revealed-round/v2"
    assert as_v2.to_json()["seats"][0] == {
        "seat_number": 1, "player_ref": "p-" + "1a" * 16, "stake": 5, "client_seed": ""
    }  # fmt: skip
    as_v3 = revealed_round_from_proto(_message(fairness_version=3))
    assert as_v3.to_json()["format"] == "gnau-dealer/revealed-round/v3"
    assert as_v3.to_json()["seats"] == as_v2.to_json()["seats"]
    as_v1 = revealed_round_from_proto(_message(fairness_version=1))
    assert as_v1.to_json()["seats"] == EXPECTED_SEATS
    older = _message()
    assert revealed_round_from_proto(older).to_json()["format"] == "gnau-dealer/revealed-round/v1"
    del older.seats[:]
    older.seats.extend(referenced)
    assert revealed_round_from_proto(older).to_json()["format"] == "gnau-dealer/revealed-round/v2"
    with pytest.raises(FairnessError, match="fairness_version must be 1, 2 or 3, got 4"):
        revealed_round_from_proto(_message(fairness_version=4))
