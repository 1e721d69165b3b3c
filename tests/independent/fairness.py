"""A revealed round, read and recomputed (docs/fairness.md, sections 1 and 2): the commitment,
the lock transcript, HMAC_DRBG, Fisher-Yates with rejection sampling, the deal."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterator
from typing import Any

from tests.independent.common import VerificationError, check, is_int, read_hex, utf8

FORMATS = {f"gnau-dealer/revealed-round/v{version}": version for version in (1, 2, 3)}
FORMAT_OF = {version: name for name, version in FORMATS.items()}
#: Who a seat names, by fairness version.
PLAYER = {1: "player_id", 2: "player_ref", 3: "player_ref"}
PLAYER_REF = re.compile(r"p-[0-9a-f]{32}")
#: The house rules: each one's allowed values and default (docs/fairness.md, Step 1).
RULES: dict[str, tuple[object, ...]] = {
    "decks": tuple(range(1, 9)),
    "five_small": (True, False),
    "payout": ("points", "multiplier"),
    "suited_double": (False, True),
    "ten_is_duke": (False, True),
    "three_six_pair": (False, True),
    "tie": ("dealer", "push", "high_card"),
    "trips_make_ox": (True, False),
}
DEFAULTS = {"decks": 1, "five_small": True, "payout": "points", "suited_double": False}
DEFAULTS |= {"ten_is_duke": False, "three_six_pair": False, "tie": "dealer", "trips_make_ox": True}
RANKS, SUITS = "A23456789TJQK", "CDHS"
ROUND_MEMBERS = {
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
}
OPTIONAL_MEMBERS = {"beacon"}

Round = dict[str, Any]
Json = dict[str, Any]


def tag(name: str, version: int) -> bytes:
    return f"gnau-dealer/fairness/v{version}/{name}".encode()


def frame(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def frames(*fields: bytes) -> bytes:
    return b"".join(map(frame, fields))


def uint64(n: int) -> bytes:
    return n.to_bytes(8, "big")


# -- reading ---------------------------------------------------------------------------------


def read_rules(value: object, path: str = "house_rules", *, every_rule: bool = False) -> Json:
    """House rules by name, typed; a missing rule takes its default unless ``every_rule``."""
    check(isinstance(value, dict), f"{path} is not an object")
    assert isinstance(value, dict)
    for name, given in value.items():
        check(name in RULES, f"{path}.{name} is not a house rule")
        allowed = RULES[name]
        check(
            type(given) is type(allowed[0]) and given in allowed,
            f"{path}.{name} is not one of {allowed}",
        )
    check(not every_rule or set(value) == set(RULES), f"{path} does not name every rule")
    return {**DEFAULTS, **value}


def read_card(value: object, path: str) -> str:
    """Rank then suit, either case, ``10`` for ``T``."""
    check(isinstance(value, str), f"{path} is not a card")
    assert isinstance(value, str)
    card = value.upper()
    if len(card) == 3 and card.startswith("10"):
        card = "T" + card[2]
    check(len(card) == 2 and card[0] in RANKS and card[1] in SUITS, f"{path} is not a card")
    return card


def read_cards(value: object, path: str, count: int | None = None) -> list[str]:
    check(isinstance(value, list), f"{path} is not an array")
    assert isinstance(value, list)
    check(count is None or len(value) == count, f"{path} is not {count} cards")
    return [read_card(card, f"{path}[{i}]") for i, card in enumerate(value)]


def _text(value: object, path: str, limit: int) -> str:
    check(isinstance(value, str) and value, f"{path} is not a non-empty string")
    assert isinstance(value, str)
    check(len(utf8(value, path)) <= limit, f"{path} is more than {limit} bytes")
    return value


def _members(value: object, path: str, required: set[str], optional: set[str]) -> Json:
    check(isinstance(value, dict), f"{path} is not an object")
    assert isinstance(value, dict)
    unknown = set(value) - required - optional
    check(not unknown, f"{path}.{min(unknown, default='')} is not a member")
    missing = required - set(value)
    check(not missing, f"{path}.{min(missing, default='')} is missing")
    return value


def read_seat(value: object, path: str, version: int) -> Json:
    seat = _members(value, path, {"seat_number", PLAYER[version], "stake"}, {"client_seed"})
    number, stake = seat["seat_number"], seat["stake"]
    check(is_int(number) and 1 <= number < 2**31, f"{path}.seat_number is not a seat number")
    check(is_int(stake) and 1 <= stake < 2**63, f"{path}.stake is not a stake")
    client_seed = read_hex(seat.get("client_seed", ""), f"{path}.client_seed", limit=64)
    player = seat[PLAYER[version]]
    if version == 1:
        _text(player, f"{path}.player_id", 128)
    else:
        check(
            isinstance(player, str) and PLAYER_REF.fullmatch(player),
            f"{path}.player_ref must be a player reference, p- and 32 lower-case hex digits",
        )
    return {"seat_number": number, PLAYER[version]: player, "stake": stake, "seed": client_seed}


def read_round(value: object) -> Round:
    """A revealed round in the JSON form of docs/fairness.md, Step 4, strictly; returned in one
    spelling: every rule, seats and hands by seat number, bytes as bytes, cards upper case."""
    r = _members(value, "round", ROUND_MEMBERS - OPTIONAL_MEMBERS, OPTIONAL_MEMBERS)
    check(r["format"] in FORMATS, "format is not a revealed-round format")
    version = FORMATS[r["format"]]
    round_id = _text(r["round_id"], "round_id", 128)
    rules = read_rules(r["house_rules"])
    check(isinstance(r["seats"], list) and r["seats"], "seats is not a non-empty array")
    seats = sorted(
        (read_seat(s, f"seats[{i}]", version) for i, s in enumerate(r["seats"])),
        key=lambda s: s["seat_number"],
    )
    numbers = [s["seat_number"] for s in seats]
    check(len(set(numbers)) == len(numbers), "two seats have one seat number")
    if version >= 2:
        refs = [s["player_ref"] for s in seats]
        check(len(set(refs)) == len(refs), "two seats share one player_ref")
    check(5 * (len(seats) + 1) <= 52 * rules["decks"], "the seats and dealer do not fit the decks")
    beacon = r.get("beacon")
    if beacon is not None:
        b = _members(beacon, "beacon", {"label", "value"}, set())
        label = _text(b["label"], "beacon.label", 128)
        beacon_value = read_hex(b["value"], "beacon.value", limit=1024)
        check(beacon_value, "beacon.value is empty")
        beacon = {"label": label, "value": beacon_value}
    check(isinstance(r["hands"], list), "hands is not an array")
    hands: dict[int, list[str]] = {}
    for i, h in enumerate(r["hands"]):
        hand = _members(h, f"hands[{i}]", {"seat_number", "cards"}, set())
        number = hand["seat_number"]
        check(is_int(number) and number not in hands, f"hands[{i}].seat_number is not one seat")
        hands[number] = read_cards(hand["cards"], f"hands[{i}].cards", 5)
    return {
        "version": version,
        "round_id": round_id,
        "house_rules": rules,
        "seats": seats,
        "beacon": beacon,
        "commitment": read_hex(r["commitment"], "commitment", size=32),
        "transcript_hash": read_hex(r["transcript_hash"], "transcript_hash", size=32),
        "server_seed": read_hex(r["server_seed"], "server_seed", size=32),
        "deck": read_cards(r["deck"], "deck"),
        "hands": dict(sorted(hands.items())),
        "dealer_hand": read_cards(r["dealer_hand"], "dealer_hand", 5),
    }


# -- recomputing -----------------------------------------------------------------------------


def value_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def commitment(round_id: str, rules: Json, seed: bytes, version: int) -> bytes:
    encoded = b"".join(
        frame(name.encode()) + frame(value_text(rules[name]).encode()) for name in sorted(rules)
    )
    preimage = frames(
        tag("commitment", version), round_id.encode(), encoded, uint64(rules["decks"]), seed
    )
    return hashlib.sha256(preimage).digest()


def transcript_hash(
    committed: bytes, seats: list[Json], beacon: Json | None, version: int
) -> bytes:
    def seat(s: Json) -> bytes:
        # v1 locks the player id, v2 and v3 a reference they do not hash; v3 hashes no stake.
        player = (s["player_id"].encode(),) if version == 1 else ()
        stake = (uint64(s["stake"]),) if version < 3 else ()
        return frames(uint64(s["seat_number"]), *player, *stake, s["seed"])

    locked = b"".join(frame(seat(s)) for s in sorted(seats, key=lambda s: s["seat_number"]))
    beaconed = (
        b"\x00" if beacon is None else b"\x01" + frames(beacon["label"].encode(), beacon["value"])
    )
    return hashlib.sha256(frames(tag("lock", version), committed, locked, beaconed)).digest()


class HmacDrbg:
    """NIST SP 800-90A HMAC_DRBG with SHA-256: no reseed, no additional input."""

    def __init__(self, entropy: bytes, nonce: bytes, personalization: bytes) -> None:
        self.key, self.v = b"\x00" * 32, b"\x01" * 32
        self._update(entropy + nonce + personalization)

    def _mac(self, data: bytes) -> bytes:
        return hmac.digest(self.key, data, "sha256")

    def _update(self, data: bytes = b"") -> None:
        self.key = self._mac(self.v + b"\x00" + data)
        self.v = self._mac(self.v)
        if data:
            self.key = self._mac(self.v + b"\x01" + data)
            self.v = self._mac(self.v)

    def generate(self, size: int) -> bytes:
        out = b""
        while len(out) < size:
            self.v = self._mac(self.v)
            out += self.v
        self._update()
        return out[:size]


def words(drbg: HmacDrbg) -> Iterator[int]:
    """32-bit big-endian words from successive Generate(64 bytes) calls."""
    while True:
        block = drbg.generate(64)
        for i in range(0, 64, 4):
            yield int.from_bytes(block[i : i + 4], "big")


def shuffle(seed: bytes, transcript: bytes, decks: int) -> list[str]:
    stream = words(HmacDrbg(seed, transcript, tag("shuffle", 1)))
    deck = [rank + suit for suit in SUITS for rank in RANKS] * decks
    for i in range(len(deck) - 1, 0, -1):
        n = i + 1
        limit = 2**32 - 2**32 % n
        word = next(stream)
        while word >= limit:
            word = next(stream)
        j = word % n
        deck[i], deck[j] = deck[j], deck[i]
    return deck


def check_round(r: Round) -> None:
    """The chain, link by link: the first that does not hold is named."""
    rules, version = r["house_rules"], r["version"]
    expected = commitment(r["round_id"], rules, r["server_seed"], version)
    check(expected == r["commitment"], "commitment: the seed and rules do not give it")
    transcript = transcript_hash(r["commitment"], r["seats"], r["beacon"], version)
    check(transcript == r["transcript_hash"], "lock: the seats and beacon do not give it")
    deck = shuffle(r["server_seed"], transcript, rules["decks"])
    check(deck == r["deck"], "deck: not the shuffle of the seed and transcript")
    hands = len(r["seats"]) + 1
    for k, seat in enumerate(r["seats"]):
        number = seat["seat_number"]
        check(r["hands"].get(number) == deck[k : 5 * hands : hands], f"hand of seat {number}")
    check(set(r["hands"]) == {s["seat_number"] for s in r["seats"]}, "hands: not one per seat")
    check(r["dealer_hand"] == deck[hands - 1 : 5 * hands : hands], "dealer hand")


def verify_revealed(value: object) -> Round:
    """Read, then recompute; raises :class:`VerificationError` naming what fails."""
    r = read_round(value)
    check_round(r)
    return r


__all__ = ["VerificationError", "check_round", "read_round", "verify_revealed"]
