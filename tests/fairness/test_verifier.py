"""The verifier accepts an honest reveal and names the link a tampered one breaks."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from gnau_service.fairness import (
    Beacon,
    Check,
    CheckFailure,
    CommitError,
    DealError,
    FairnessError,
    FairnessVersion,
    LockError,
    RevealedRound,
    RevealFormatError,
    RoundVerificationError,
    SeatHand,
    verify_revealed_round,
)
from gnau_service.fairness.round import CommittedRound
from gnau_service.fairness.transcript import LockedSeat
from gnau_service.rules.cards import parse_card, parse_cards
from gnau_service.rules.house_rules import HouseRules
from tests.references import ref

from .conftest import sample_revealed_round

HONEST = sample_revealed_round()
HONEST_JSON: dict[str, Any] = HONEST.to_json()


def _flip_first_byte(data: bytes) -> bytes:
    return bytes([data[0] ^ 1]) + data[1:]


def _swap_cards(cards: tuple[Any, ...], first: int, second: int) -> tuple[Any, ...]:
    swapped = list(cards)
    swapped[first], swapped[second] = swapped[second], swapped[first]
    return tuple(swapped)


def _replace_seat(revealed: RevealedRound, seat_number: int, **changes: Any) -> RevealedRound:
    seats = tuple(
        dataclasses.replace(seat, **changes) if seat.seat_number == seat_number else seat
        for seat in revealed.seats
    )
    return dataclasses.replace(revealed, seats=seats)


def _replace_hand(revealed: RevealedRound, seat_number: int, cards: str) -> RevealedRound:
    hands = tuple(
        SeatHand(seat_number, parse_cards(cards)) if hand.seat_number == seat_number else hand
        for hand in revealed.seat_hands
    )
    return dataclasses.replace(revealed, seat_hands=hands)


def test_an_honest_reveal_verifies() -> None:
    report = verify_revealed_round(HONEST)
    assert report.ok
    assert report.failures == ()
    assert report.first_failure is None
    assert report.summary() == (
        "round table-5/round-9 verifies: commitment, lock, deck and 4 hands match (3 seats, 1 deck)"
    )
    report.raise_if_invalid()


ALL_HANDS = [
    (Check.SEAT_HAND, 1),
    (Check.SEAT_HAND, 2),
    (Check.SEAT_HAND, 4),
    (Check.DEALER_HAND, None),
]

# Each tamper, and every check it must fail, in order: the first is the reason reported.
TAMPERS: dict[
    str, tuple[Callable[[RevealedRound], RevealedRound], list[tuple[Check, int | None]]]
] = {
    "server_seed": (
        lambda r: dataclasses.replace(r, server_seed=_flip_first_byte(r.server_seed)),
        # The deck follows from the seed, so a wrong seed breaks the deck and the hands too.
        [(Check.COMMITMENT, None), (Check.DECK, None), *ALL_HANDS],
    ),
    "commitment": (
        lambda r: dataclasses.replace(r, commitment=_flip_first_byte(r.commitment)),
        [(Check.COMMITMENT, None), (Check.LOCK, None)],
    ),
    "round_id": (
        lambda r: dataclasses.replace(r, round_id="table-5/round-8"),
        [(Check.COMMITMENT, None)],
    ),
    "house_rule": (
        lambda r: dataclasses.replace(r, rules=dataclasses.replace(r.rules, ten_is_duke=True)),
        [(Check.COMMITMENT, None)],
    ),
    "client_seed": (
        lambda r: _replace_seat(r, 1, client_seed=b"alice's seeD"),
        [(Check.LOCK, None)],
    ),
    "beacon": (
        lambda r: dataclasses.replace(r, beacon=Beacon("drand/quicknet/round/99", bytes(32))),
        [(Check.LOCK, None)],
    ),
    "missing_beacon": (lambda r: dataclasses.replace(r, beacon=None), [(Check.LOCK, None)]),
    "transcript_hash": (
        lambda r: dataclasses.replace(r, transcript_hash=_flip_first_byte(r.transcript_hash)),
        [(Check.LOCK, None), (Check.DECK, None), *ALL_HANDS],
    ),
    "deck_order": (
        # Swap two cards that nobody was dealt: only the deck is wrong, every hand is right.
        lambda r: dataclasses.replace(r, deck=_swap_cards(r.deck, 30, 40)),
        [(Check.DECK, None)],
    ),
    "seat_hand": (
        lambda r: _replace_hand(r, 4, "AS KS QS JS TS"),
        [(Check.SEAT_HAND, 4)],
    ),
    "dealer_hand": (
        lambda r: dataclasses.replace(r, dealer_hand=_swap_cards(r.dealer_hand, 0, 1)),
        [(Check.DEALER_HAND, None)],
    ),
}


@pytest.mark.parametrize("name", sorted(TAMPERS))
def test_a_tampered_reveal_fails_at_the_right_check(name: str) -> None:
    tamper, expected = TAMPERS[name]
    report = verify_revealed_round(tamper(HONEST))
    assert not report.ok
    failed = [(failure.check, failure.seat_number) for failure in report.failures]
    first_check, first_seat = expected[0]
    assert failed[0] == (first_check, first_seat)
    assert failed == expected
    assert str(report.first_failure) in report.summary()
    assert "does NOT verify" in report.summary()
    with pytest.raises(RoundVerificationError) as raised:
        report.raise_if_invalid()
    assert raised.value.field == first_check.value
    assert raised.value.report is report


@pytest.mark.parametrize("version", [FairnessVersion.V2, FairnessVersion.V3])
def test_a_reference_is_not_part_of_the_deck_proof(version: FairnessVersion) -> None:
    """Who sits where in a v2 or v3 round is bound by the signed ROUND_DEALT entry, not by the
    transcript (docs/fairness.md): a revealed round alone verifies with any reference, and the
    receipt's entry signature is what catches a changed one (tests/server/test_receipts.py)."""
    honest = sample_revealed_round(version)
    assert verify_revealed_round(_replace_seat(honest, 2, player=ref("mallory"))).ok


def test_a_changed_v2_stake_fails_the_lock() -> None:
    """v2 hashed the stakes: the lock check catches a changed one in the revealed round."""
    honest = sample_revealed_round(FairnessVersion.V2)
    failed = [f.check for f in verify_revealed_round(_replace_seat(honest, 2, stake=251)).failures]
    assert failed == [Check.LOCK]


def test_a_v3_stake_is_not_part_of_the_deck_proof() -> None:
    """A v3 transcript leaves the stakes out, so no stake moves a card, and a revealed round
    alone verifies with any stake: the signed ROUND_DEALT entry binds them (a receipt whose
    round names another stake than its entry fails, tests/server/test_receipts.py)."""
    assert HONEST.version is FairnessVersion.V3
    assert verify_revealed_round(_replace_seat(HONEST, 2, stake=251)).ok


@pytest.mark.parametrize("version", list(FairnessVersion))
@pytest.mark.parametrize("read_as", list(FairnessVersion))
def test_a_round_cannot_be_read_as_another_version(
    version: FairnessVersion, read_as: FairnessVersion
) -> None:
    """Both hashes are tagged with the version, so a round presented as another fails both.
    (The sample's players are references, which a v1 round takes as player ids too.)"""
    if version is read_as:
        return
    honest = sample_revealed_round(version)
    read = dataclasses.replace(honest, version=read_as)
    failed = [failure.check for failure in verify_revealed_round(read).failures]
    assert failed == [Check.COMMITMENT, Check.LOCK]


def test_failures_say_what_was_expected() -> None:
    report = verify_revealed_round(_replace_hand(HONEST, 4, "AS KS QS JS TS"))
    (failure,) = report.failures
    assert failure == CheckFailure(
        Check.SEAT_HAND,
        f"the deal gives {' '.join(map(str, HONEST.seat_hands[2].cards))}, "
        "but the published hand is AS KS QS JS TS",
        seat_number=4,
    )
    assert str(failure).startswith("hand of seat 4: the deal gives")

    report = verify_revealed_round(
        dataclasses.replace(HONEST, deck=_swap_cards(HONEST.deck, 30, 40))
    )
    assert str(report.first_failure) == (
        f"deck: at position 30 (0 is dealt first) the seed and transcript give {HONEST.deck[30]}, "
        f"but the published deck has {HONEST.deck[40]}"
    )
    short = verify_revealed_round(dataclasses.replace(HONEST, deck=HONEST.deck[:-1]))
    assert str(short.first_failure) == (
        "deck: the seed and transcript give 52 cards, but the published deck has 51"
    )


def test_a_missing_or_extra_hand_is_a_seat_hand_failure() -> None:
    without_seat_2 = tuple(hand for hand in HONEST.seat_hands if hand.seat_number != 2)
    report = verify_revealed_round(dataclasses.replace(HONEST, seat_hands=without_seat_2))
    assert [(f.check, f.seat_number) for f in report.failures] == [(Check.SEAT_HAND, 2)]
    assert "no hand is published" in str(report.first_failure)

    extra = (*HONEST.seat_hands, SeatHand(9, parse_cards("2C 3C 4C 5C 6C")))
    report = verify_revealed_round(dataclasses.replace(HONEST, seat_hands=extra))
    assert [(f.check, f.seat_number) for f in report.failures] == [(Check.SEAT_HAND, 9)]
    assert "no such seat is locked" in str(report.first_failure)


def test_json_round_trip_is_exact() -> None:
    text = json.dumps(HONEST_JSON)
    assert RevealedRound.from_json_text(text) == HONEST
    assert RevealedRound.from_json(json.loads(text)).to_json() == HONEST_JSON


def test_json_reading_is_lenient_only_where_documented() -> None:
    shuffled = copy.deepcopy(HONEST_JSON)
    shuffled["seats"].reverse()
    shuffled["hands"].reverse()
    for seat in shuffled["seats"]:
        if seat["client_seed"] == "":
            del seat["client_seed"]  # optional, empty when absent
    shuffled["deck"] = [text.lower() for text in shuffled["deck"]]
    assert RevealedRound.from_json(shuffled) == HONEST


def _json_with(path: tuple[str | int, ...], value: object) -> dict[str, Any]:
    document: dict[str, Any] = copy.deepcopy(HONEST_JSON)
    target: Any = document
    for step in path[:-1]:
        target = target[step]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return document


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "error", "field", "message"),
    [
        (("format",), "v0", RevealFormatError, "format", "format must be"),
        (("server_seed",), _DELETE, RevealFormatError, "server_seed", "server_seed is missing"),
        (("seats", 1, "stake"), _DELETE, RevealFormatError, "seats[1].stake", "is missing"),
        (("seats", 1, "stake"), "250", RevealFormatError, "seats[1].stake", "must be an integer"),
        (("seats", 1, "stake"), True, RevealFormatError, "seats[1].stake", "got a boolean"),
        (("seats", 1, "stake"), 0, LockError, "stake", "seat 2: stake must be"),
        (("seats", 0, "client_seed"), "xyz", RevealFormatError, "seats[0].client_seed", "hex"),
        (("seats", 0, "client_seed"), "ab cd", RevealFormatError, "seats[0].client_seed", "hex"),
        (("seats", 0, "client_seed"), "00" * 65, LockError, "client_seed", "at most 64 bytes"),
        (("seats", 0, "tip"), 5, RevealFormatError, "seats[0].tip", "is not a field"),
        (
            ("seats", 0, "player_ref"),
            "alice",
            RevealFormatError,
            "seats[0].player_ref",
            "reference",
        ),
        # Hex is read in either case; a reference is a name, in lower case only.
        (
            ("seats", 0, "player_ref"),
            "p-" + "AB" * 16,
            RevealFormatError,
            "seats[0].player_ref",
            "p- and 32 lower-case hex digits, got 'p-ABAB",
        ),
        (
            ("seats", 2, "player_ref"),
            HONEST_JSON["seats"][0]["player_ref"],
            RevealFormatError,
            "seats[2].player_ref",
            "seats[2].player_ref is seats[0].player_ref too",
        ),
        (("seats",), {}, RevealFormatError, "seats", "must be a JSON array"),
        (("seats",), [], LockError, "seats", "at least one seat"),
        (("beacon", "value"), "", LockError, "value", "beacon value"),
        (("commitment",), "ab", CommitError, "commitment", "exactly 32 bytes"),
        (("deck", 3), "1X", RevealFormatError, "deck[3]", "not a card"),
        (("deck", 3), 7, RevealFormatError, "deck[3]", "must be a card"),
        (("hands", 0, "cards", 0), "ZZ", RevealFormatError, "hands[0].cards[0]", "not a card"),
        (("hands", 1, "seat_number"), 1, RevealFormatError, "hands", "two hands"),
        (("house_rules", "tie"), "coin", RevealFormatError, "house_rules.tie", "tie"),
        (("house_rules", "jokers"), True, RevealFormatError, "house_rules.jokers", "unknown"),
        (("house_rules", "decks"), "1", RevealFormatError, "house_rules.decks", "decks"),
        (("round_id",), "", CommitError, "round_id", "non-empty"),
        (("extra",), 1, RevealFormatError, "extra", "is not a field of a revealed round"),
    ],
)
def test_malformed_json_is_refused_naming_the_field(
    path: tuple[str | int, ...],
    value: object,
    error: type[FairnessError],
    field: str,
    message: str,
) -> None:
    with pytest.raises(error, match=re.escape(message)) as raised:
        RevealedRound.from_json(_json_with(path, value))
    assert raised.value.field == field


def test_no_two_seats_of_a_v2_round_lock_one_reference_but_a_v1_player_may_sit_twice() -> None:
    """A reference is made for its own round and seat (docs/fairness.md, *Fairness versions*), so
    two seats with one are not a round the service dealt; a v1 seat names the platform's id,
    which one player holding two seats repeats."""
    twice = [LockedSeat(1, ref("ann"), 5), LockedSeat(2, ref("ann"), 5)]
    with pytest.raises(LockError, match="is seat 1's too") as raised:
        CommittedRound("r-1", HouseRules(), bytes(32)).lock(twice)
    assert raised.value.field == "player"
    v1 = CommittedRound("r-1", HouseRules(), bytes(32), FairnessVersion.V1)
    assert verify_revealed_round(
        v1.lock([LockedSeat(1, "ann", 5), LockedSeat(2, "ann", 5)]).deal().reveal()
    ).ok


def test_a_table_too_big_for_its_decks_is_refused() -> None:
    document = _json_with(
        ("seats",),
        [{"seat_number": n, "player_ref": ref(f"p{n}"), "stake": 1} for n in range(1, 11)],
    )
    with pytest.raises(DealError, match="10 seats and the dealer need 55 cards"):
        RevealedRound.from_json(document)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON: Expecting property name"),
        ("[1, 2]", "must be a JSON object, got an array"),
        ('{"format": NaN}', "NaN is not a JSON number"),
        ('{"round_id": "a", "round_id": "b"}', "'round_id' appears twice"),
        ("[" * 100_000 + "]" * 100_000, "maximum recursion depth"),
        ('{"stake": ' + "9" * 5000 + "}", "not JSON this reader accepts"),
    ],
)
def test_bad_json_text_is_a_format_error(text: str, message: str) -> None:
    with pytest.raises(RevealFormatError, match=message):
        RevealedRound.from_json_text(text)


def test_cards_are_written_in_canonical_text() -> None:
    assert HONEST_JSON["dealer_hand"] == [str(card) for card in HONEST.dealer_hand]
    assert parse_card(HONEST_JSON["deck"][0]) == HONEST.deck[0]
