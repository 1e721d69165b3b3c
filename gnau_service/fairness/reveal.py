"""Reveal: the published record of a round, from which anyone can recompute it.

A revealed round holds the inputs (round id, house rules, locked seats, beacon), the published
commitment and transcript hash, the server seed, and the deck and hands as dealt. Its JSON form
(``to_json``/``from_json``) is the one ``gnau round verify`` reads; ``docs/fairness.md``
describes it field by field. Binary values are lowercase hex, cards are in text notation.

Reading is strict: a missing or unknown field, a duplicated key, a malformed hex string or card
raises :class:`RevealFormatError` naming the field by its path (``seats[1].stake``). Whether
the values *agree* with each other is not checked here but by the verifier, which says which
link of the chain breaks.

>>> from gnau_service.fairness.round import CommittedRound
>>> from gnau_service.rules.house_rules import HouseRules
>>> ann = "p-" + "a0" * 16
>>> round_ = CommittedRound("r-1", HouseRules(), bytes(32)).lock([LockedSeat(1, ann, 5)])
>>> document = round_.deal().reveal().to_json()
>>> document["format"]
'gnau-dealer/revealed-round/v3'
>>> document["seats"] == [{"seat_number": 1, "player_ref": ann, "stake": 5, "client_seed": ""}]
True
>>> document["dealer_hand"]
['JH', '7S', '8D', '2S', '2C']
>>> RevealedRound.from_json(document) == round_.deal().reveal()
True
>>> del document["seats"][0]["stake"]
>>> RevealedRound.from_json(document)
Traceback (most recent call last):
...
gnau_service.fairness.errors.RevealFormatError: seats[0].stake is missing
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Final, NoReturn

from gnau_service.common.quoting import quoted
from gnau_service.common.strict_json import (
    DuplicateMemberError,
    JsonTextError,
    MembersError,
    NotAnObjectError,
    json_type,
    read_json,
    read_object,
)
from gnau_service.fairness.commitment import require_hash, require_round_id, require_server_seed
from gnau_service.fairness.deal import SeatHand, require_hands_fit
from gnau_service.fairness.encoding import FairnessVersion
from gnau_service.fairness.errors import RevealFormatError
from gnau_service.fairness.player_refs import is_player_ref
from gnau_service.fairness.transcript import Beacon, LockedSeat, canonical_seats
from gnau_service.rules.cards import Card, parse_card
from gnau_service.rules.errors import RulesError
from gnau_service.rules.house_rules import HouseRules

#: The ``format`` of a revealed round's JSON, by fairness version.
REVEALED_ROUND_FORMATS: Final = {
    FairnessVersion.V1: "gnau-dealer/revealed-round/v1",
    FairnessVersion.V2: "gnau-dealer/revealed-round/v2",
    FairnessVersion.V3: "gnau-dealer/revealed-round/v3",
}
#: The seat member naming who sits there: the player id in v1, the player reference from v2 on.
SEAT_PLAYER_FIELDS: Final = {
    version: "player_ref" if version.names_players_by_reference else "player_id"
    for version in FairnessVersion
}
VERSION_OF_FORMAT: Final = {name: version for version, name in REVEALED_ROUND_FORMATS.items()}

_TOP_LEVEL_FIELDS: Final = (
    "format",
    "round_id",
    "house_rules",
    "seats",
    "beacon",
    "commitment",
    "transcript_hash",
    "server_seed",
    "deck",
    "hands",
    "dealer_hand",
)
_SEAT_FIELDS: Final = {
    version: ("seat_number", player, "stake", "client_seed")
    for version, player in SEAT_PLAYER_FIELDS.items()
}
_BEACON_FIELDS: Final = ("label", "value")
_HAND_FIELDS: Final = ("seat_number", "cards")
_HEX: Final = re.compile(r"(?:[0-9a-fA-F]{2})*")


@dataclass(frozen=True, slots=True)
class RevealedRound:
    """A finished round as published: its inputs, its hashes, its seed, its deck and hands.

    ``seats`` and ``seat_hands`` are kept in ascending seat-number order whatever order they
    were given in. ``deck[0]`` is the first card dealt. ``version`` is the round's fairness
    format, which says how its commitment and transcript are computed.
    """

    round_id: str
    rules: HouseRules
    seats: tuple[LockedSeat, ...]
    beacon: Beacon | None
    commitment: bytes
    transcript_hash: bytes
    server_seed: bytes
    deck: tuple[Card, ...]
    seat_hands: tuple[SeatHand, ...]
    dealer_hand: tuple[Card, ...]
    version: FairnessVersion

    def __post_init__(self) -> None:
        if self.version not in REVEALED_ROUND_FORMATS:
            raise RevealFormatError(f"no such fairness version: {self.version!r}", field="format")
        require_round_id(self.round_id)
        if not isinstance(self.rules, HouseRules):
            raise RevealFormatError(
                f"rules must be HouseRules, got {type(self.rules).__name__}", field="house_rules"
            )
        if self.beacon is not None and not isinstance(self.beacon, Beacon):
            raise RevealFormatError(
                f"beacon must be a Beacon or None, got {self.beacon!r}", field="beacon"
            )
        require_hash(self.commitment, "commitment")
        require_hash(self.transcript_hash, "transcript_hash")
        require_server_seed(self.server_seed)
        seats = canonical_seats(self.seats, self.version)
        # A round that cannot be dealt was never a round: refuse it like the lock does.
        require_hands_fit(len(seats), self.rules.decks)
        hands = tuple(sorted(self.seat_hands, key=lambda hand: hand.seat_number))
        for before, after in itertools.pairwise(hands):
            if before.seat_number == after.seat_number:
                raise RevealFormatError(
                    f"two hands are given for seat {after.seat_number}", field="hands"
                )
        object.__setattr__(self, "seats", seats)
        object.__setattr__(self, "seat_hands", hands)
        object.__setattr__(self, "deck", tuple(self.deck))
        object.__setattr__(self, "dealer_hand", tuple(self.dealer_hand))

    @classmethod
    def from_json_text(cls, text: str) -> RevealedRound:
        """Parse JSON text strictly (:func:`~gnau_service.common.strict_json.read_json`: no
        member twice, no NaN) and read it as a revealed round."""
        try:
            parsed = read_json(text)
        except DuplicateMemberError as error:
            raise RevealFormatError(str(error), field=error.member) from None
        except JsonTextError as error:
            raise RevealFormatError(str(error), field="json") from None
        return cls.from_json(parsed)

    @classmethod
    def from_json(cls, obj: object) -> RevealedRound:
        """Read the JSON form (as parsed by :mod:`json`) of a revealed round."""
        top = _JsonObject(obj, "", _TOP_LEVEL_FIELDS)
        version = VERSION_OF_FORMAT.get(found := top.text("format"))
        if version is None:
            known = " or ".join(repr(name) for name in REVEALED_ROUND_FORMATS.values())
            top.fail("format", f"must be {known}, got {quoted(found)}")
        beacon = top.get("beacon", default=None)
        round_id, rules = top.text("round_id"), _read_house_rules(top.get("house_rules"))
        seats = tuple(
            read_seat(item, f"seats[{index}]", version)
            for index, item in enumerate(top.array("seats"))
        )
        if version.names_players_by_reference:
            _require_distinct_refs(seats)
        return cls(
            round_id=round_id,
            rules=rules,
            seats=seats,
            beacon=None if beacon is None else read_beacon(beacon),
            commitment=top.hex_bytes("commitment"),
            transcript_hash=top.hex_bytes("transcript_hash"),
            server_seed=top.hex_bytes("server_seed"),
            deck=top.cards("deck"),
            seat_hands=tuple(
                _read_hand(item, f"hands[{index}]") for index, item in enumerate(top.array("hands"))
            ),
            dealer_hand=top.cards("dealer_hand"),
            version=version,
        )

    def to_json(self) -> dict[str, object]:
        """The JSON form: plain dicts, lists, strings and integers, ready for ``json.dumps``."""
        return {
            "format": REVEALED_ROUND_FORMATS[self.version],
            "round_id": self.round_id,
            "house_rules": self.rules.as_dict(),
            "seats": [seat_to_json(seat, self.version) for seat in self.seats],
            "beacon": None if self.beacon is None else beacon_to_json(self.beacon),
            "commitment": self.commitment.hex(),
            "transcript_hash": self.transcript_hash.hex(),
            "server_seed": self.server_seed.hex(),
            "deck": _card_texts(self.deck),
            "hands": [
                {"seat_number": hand.seat_number, "cards": _card_texts(hand.cards)}
                for hand in self.seat_hands
            ],
            "dealer_hand": _card_texts(self.dealer_hand),
        }


class _JsonObject:
    """One JSON object being read; every error names the offending field by its path."""

    _MISSING: Final = object()

    def __init__(self, value: object, path: str, fields: Collection[str]) -> None:
        self._path = path
        try:
            # Each field is looked for as it is read, so that the first missing one in reading
            # order is the one named.
            self._value = read_object(value, fields, optional=fields)
        except NotAnObjectError as error:
            raise RevealFormatError(
                f"{path or 'a revealed round'} must be a JSON object, got {error.found}",
                field=path or "json",
            ) from None
        except MembersError as error:
            self.fail(
                error.unknown[0],
                f"is not a field of {path or 'a revealed round'} (known: {', '.join(fields)})",
            )

    def path(self, key: str) -> str:
        return f"{self._path}.{key}" if self._path else key

    def fail(self, key: str, problem: str) -> NoReturn:
        raise RevealFormatError(f"{self.path(key)} {problem}", field=self.path(key))

    def get(self, key: str, *, default: object = _MISSING) -> object:
        if key in self._value:
            return self._value[key]
        if default is self._MISSING:
            self.fail(key, "is missing")
        return default

    def text(self, key: str) -> str:
        value = self.get(key)
        if not isinstance(value, str):
            self.fail(key, f"must be a string, got {json_type(value)}")
        return value

    def integer(self, key: str) -> int:
        value = self.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            self.fail(key, f"must be an integer, got {json_type(value)}")
        return value

    def hex_bytes(self, key: str, *, optional: bool = False) -> bytes:
        """Bytes written as hex; an ``optional`` field that is absent reads as no bytes."""
        value = self.get(key, default="") if optional else self.get(key)
        if not isinstance(value, str) or not _HEX.fullmatch(value):
            self.fail(key, f"must be a string of hex digit pairs, got {quoted(value)}")
        return bytes.fromhex(value)

    def array(self, key: str) -> list[object]:
        value = self.get(key)
        if not isinstance(value, list):
            self.fail(key, f"must be a JSON array, got {json_type(value)}")
        return value

    def cards(self, key: str) -> tuple[Card, ...]:
        cards = []
        for index, token in enumerate(self.array(key)):
            where = f"{key}[{index}]"
            if not isinstance(token, str):
                self.fail(where, f"must be a card such as 'TH', got {json_type(token)}")
            try:
                cards.append(parse_card(token))
            except RulesError as error:
                self.fail(where, f"is {error}")
        return tuple(cards)


def _read_house_rules(value: object) -> HouseRules:
    if not isinstance(value, Mapping):
        raise RevealFormatError(
            f"house_rules must be a JSON object, got {json_type(value)}", field="house_rules"
        )
    try:
        return HouseRules.from_mapping(value)
    except RulesError as error:
        key = getattr(error, "key", "")
        raise RevealFormatError(f"house_rules: {error}", field=f"house_rules.{key}") from None


def seat_to_json(seat: LockedSeat, version: FairnessVersion) -> dict[str, object]:
    """A locked seat's JSON form in a ``version`` round (the one revealed rounds and the audit
    log use)."""
    return {
        "seat_number": seat.seat_number,
        SEAT_PLAYER_FIELDS[version]: seat.player,
        "stake": seat.stake,
        "client_seed": seat.client_seed.hex(),
    }


def beacon_to_json(beacon: Beacon) -> dict[str, object]:
    return {"label": beacon.label, "value": beacon.value.hex()}


def read_seat(value: object, path: str, version: FairnessVersion) -> LockedSeat:
    """Read a seat's JSON form in a ``version`` round strictly; errors name the field by
    ``path``."""
    seat = _JsonObject(value, path, _SEAT_FIELDS[version])
    player = seat.text(SEAT_PLAYER_FIELDS[version])
    if version.names_players_by_reference and not is_player_ref(player):
        seat.fail(
            SEAT_PLAYER_FIELDS[version],
            f"must be a player reference, p- and 32 lower-case hex digits, got {quoted(player)}",
        )
    return LockedSeat(
        seat_number=seat.integer("seat_number"),
        player=player,
        stake=seat.integer("stake"),
        client_seed=seat.hex_bytes("client_seed", optional=True),
    )


def _require_distinct_refs(seats: tuple[LockedSeat, ...]) -> None:
    """No two seats of a round after v1 share a reference: each is made for its own seat."""
    first: dict[str, int] = {}
    for index, seat in enumerate(seats):
        earlier = first.setdefault(seat.player, index)
        if earlier != index:
            raise RevealFormatError(
                f"seats[{index}].player_ref is seats[{earlier}].player_ref too: a reference "
                "names one seat of one round",
                field=f"seats[{index}].player_ref",
            )


def read_beacon(value: object) -> Beacon:
    """Read a beacon's JSON form strictly."""
    beacon = _JsonObject(value, "beacon", _BEACON_FIELDS)
    return Beacon(label=beacon.text("label"), value=beacon.hex_bytes("value"))


def _read_hand(value: object, path: str) -> SeatHand:
    hand = _JsonObject(value, path, _HAND_FIELDS)
    return SeatHand(seat_number=hand.integer("seat_number"), cards=hand.cards("cards"))


def _card_texts(cards: tuple[Card, ...]) -> list[str]:
    return [str(card) for card in cards]
