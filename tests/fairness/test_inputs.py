"""Commit and lock inputs: each one is validated, and each one moves the deck, except who sits
where in a v2 or v3 round (the player reference, drawn at the deal, must move no card) and, in
a v3 round, the stake (the amount wagered must not influence the outcome)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnau_service.fairness import (
    Beacon,
    CommitError,
    CommittedRound,
    FairnessError,
    FairnessVersion,
    LockedSeat,
    LockError,
    compute_commitment,
    compute_transcript_hash,
    new_server_seed,
)
from gnau_service.fairness.commitment import commitment_preimage
from gnau_service.fairness.encoding import frames
from gnau_service.fairness.transcript import canonical_seats
from gnau_service.rules.cards import Card
from gnau_service.rules.house_rules import HouseRules, PayoutTable, TieRule
from tests.references import ref


@dataclass(frozen=True)
class RoundInputs:
    """Everything a deck depends on, so that a test can change exactly one thing."""

    server_seed: bytes
    round_id: str
    rules: HouseRules
    seats: tuple[LockedSeat, ...]
    beacon: Beacon | None
    version: FairnessVersion = FairnessVersion.V3

    def deck(self) -> tuple[Card, ...]:
        committed = CommittedRound(self.round_id, self.rules, self.server_seed, self.version)
        return committed.lock(self.seats, self.beacon).deal().deck


BASE_BEACON = Beacon("drand/quicknet/round/7", bytes(range(32)))
BASE = RoundInputs(
    server_seed=bytes(range(100, 132)),
    round_id="table-1/round-1",
    rules=HouseRules(),
    seats=(
        LockedSeat(1, ref("alice"), 100, client_seed=b"alice-seed"),
        LockedSeat(2, ref("bob"), 250),
        LockedSeat(5, ref("carol"), 7, client_seed=bytes(64)),
    ),
    beacon=BASE_BEACON,
)

# A mutation takes the inputs, a position and a non-zero byte mask, and changes one thing.
Mutation = Callable[[RoundInputs, int, int], RoundInputs]


def _flip(data: bytes, index: int, mask: int) -> bytes:
    changed = bytearray(data)
    changed[index % len(changed)] ^= mask
    return bytes(changed)


def _flip_text(text: str, index: int, mask: int) -> str:
    # Stay within printable ASCII so the text is still valid; the mask picks the new letter.
    position = index % len(text)
    letters = [chr(code) for code in range(33, 127) if chr(code) != text[position]]
    return text[:position] + letters[mask % len(letters)] + text[position + 1 :]


def _with_seat(inputs: RoundInputs, slot: int, **changes: Any) -> RoundInputs:
    seats = list(inputs.seats)
    seats[slot] = dataclasses.replace(seats[slot], **changes)
    return dataclasses.replace(inputs, seats=tuple(seats))


def _seat_mutations(slot: int) -> dict[str, Mutation]:
    seat = BASE.seats[slot]
    return {
        f"seat[{slot}].seat_number": lambda r, i, m: _with_seat(
            r, slot, seat_number=seat.seat_number + 10 + m
        ),
        f"seat[{slot}].client_seed": lambda r, i, m: _with_seat(
            r,
            slot,
            client_seed=_flip(seat.client_seed, i, m) if seat.client_seed else bytes([m]),
        ),
    }


def _stake_mutation(slot: int) -> Mutation:
    return lambda r, i, m: _with_seat(r, slot, stake=BASE.seats[slot].stake + m)


#: The stakes: in the shuffle's input in v1 and v2, not in v3.
STAKE_MUTATIONS: dict[str, Mutation] = {
    f"seat[{slot}].stake": _stake_mutation(slot) for slot in range(3)
}


def _player_mutation(slot: int) -> Mutation:
    return lambda r, i, m: _with_seat(r, slot, player=ref(f"another player {i} {m}"))


PLAYER_MUTATIONS: dict[str, Mutation] = {
    f"seat[{slot}].player": _player_mutation(slot) for slot in range(3)
}


def _rule_mutation(key: str) -> Mutation:
    value = getattr(BASE.rules, key)
    if isinstance(value, bool):
        changed: Any = not value
    elif isinstance(value, TieRule):
        changed = TieRule.PUSH
    elif isinstance(value, PayoutTable):
        changed = PayoutTable.MULTIPLIER
    else:
        changed = value + 1
    return lambda r, i, m: dataclasses.replace(
        r, rules=dataclasses.replace(r.rules, **{key: changed})
    )


MUTATIONS: dict[str, Mutation] = {
    "server_seed": lambda r, i, m: dataclasses.replace(r, server_seed=_flip(r.server_seed, i, m)),
    "round_id": lambda r, i, m: dataclasses.replace(r, round_id=_flip_text(r.round_id, i, m)),
    **{
        f"house_rules.{key}": _rule_mutation(key)
        for key in (field.name for field in dataclasses.fields(HouseRules))
    },
    **{name: mutation for slot in range(3) for name, mutation in _seat_mutations(slot).items()},
    "beacon.label": lambda r, i, m: dataclasses.replace(
        r, beacon=Beacon(_flip_text(BASE_BEACON.label, i, m), BASE_BEACON.value)
    ),
    "beacon.value": lambda r, i, m: dataclasses.replace(
        r, beacon=Beacon(BASE_BEACON.label, _flip(BASE_BEACON.value, i, m))
    ),
    "beacon.absent": lambda r, i, m: dataclasses.replace(r, beacon=None),
}
BASE_DECK = BASE.deck()


def test_every_input_has_a_mutation() -> None:
    """Guards the test below: a new input (a new house rule, say) must be added here."""
    assert {name for name in MUTATIONS if name.startswith("house_rules.")} == {
        f"house_rules.{key}" for key in HouseRules().as_dict()
    }
    seat_mutations = {*MUTATIONS, *PLAYER_MUTATIONS, *STAKE_MUTATIONS}
    assert len([name for name in seat_mutations if name.startswith("seat[0].")]) == len(
        dataclasses.fields(LockedSeat)
    )


@pytest.mark.parametrize("name", sorted(MUTATIONS))
@settings(max_examples=20, deadline=None)
@given(index=st.integers(0, 255), mask=st.integers(1, 255))
def test_changing_any_single_input_changes_the_deck(name: str, index: int, mask: int) -> None:
    changed = MUTATIONS[name](BASE, index, mask)
    assert changed != BASE
    assert changed.deck() != BASE_DECK


@pytest.mark.parametrize("version", [FairnessVersion.V2, FairnessVersion.V3])
@pytest.mark.parametrize("name", sorted(PLAYER_MUTATIONS))
@settings(max_examples=20, deadline=None)
@given(index=st.integers(0, 255), mask=st.integers(1, 255))
def test_no_player_reference_moves_a_card(
    name: str, version: FairnessVersion, index: int, mask: int
) -> None:
    """The service draws a new player's key at the deal, after the commitment: were the
    reference in the shuffle's input, it could draw keys until it liked the deck."""
    base = dataclasses.replace(BASE, version=version)
    changed = PLAYER_MUTATIONS[name](base, index, mask)
    assert changed.seats != base.seats
    assert changed.deck() == base.deck()


_STAKES = st.lists(st.integers(1, 2**63 - 1), min_size=3, max_size=3)


@settings(max_examples=50, deadline=None)
@given(stakes=_STAKES, other_stakes=_STAKES)
def test_in_v3_no_stake_moves_a_card(stakes: list[int], other_stakes: list[int]) -> None:
    """AGCO 21.1.5: the outcome is not influenced by the amount wagered. Any two sets of
    stakes, the rest of the round alike, deal the same cards."""

    def staked(amounts: list[int]) -> RoundInputs:
        seats = tuple(
            dataclasses.replace(seat, stake=amount)
            for seat, amount in zip(BASE.seats, amounts, strict=True)
        )
        return dataclasses.replace(BASE, seats=seats)

    assert BASE.version is FairnessVersion.V3
    assert staked(stakes).deck() == staked(other_stakes).deck() == BASE_DECK


@pytest.mark.parametrize("version", [FairnessVersion.V1, FairnessVersion.V2])
@pytest.mark.parametrize("name", sorted(STAKE_MUTATIONS))
@settings(max_examples=10, deadline=None)
@given(mask=st.integers(1, 255))
def test_before_v3_the_stake_moved_the_deck(name: str, version: FairnessVersion, mask: int) -> None:
    """v1 and v2 hashed the stakes: the rounds logged before v3 still recompute that way."""
    base = dataclasses.replace(BASE, version=version)  # (v1 takes references as player ids)
    assert STAKE_MUTATIONS[name](base, 0, mask).deck() != base.deck()


@pytest.mark.parametrize("name", sorted(PLAYER_MUTATIONS))
def test_in_v1_the_player_id_moved_the_deck(name: str) -> None:
    v1 = dataclasses.replace(BASE, version=FairnessVersion.V1)
    assert PLAYER_MUTATIONS[name](v1, 0, 1).deck() != v1.deck()


@pytest.mark.parametrize("version", [FairnessVersion.V1, FairnessVersion.V2])
def test_the_version_moves_the_deck(version: FairnessVersion) -> None:
    """The commitment's tag names the version, so a committed round has one version only."""
    assert dataclasses.replace(BASE, version=version).deck() != BASE_DECK


def test_seat_order_as_given_does_not_matter() -> None:
    reordered = dataclasses.replace(BASE, seats=tuple(reversed(BASE.seats)))
    assert reordered.deck() == BASE_DECK


@settings(max_examples=200)
@given(st.lists(st.binary(max_size=6), max_size=4), st.lists(st.binary(max_size=6), max_size=4))
def test_framing_is_injective(left: list[bytes], right: list[bytes]) -> None:
    assert (frames(*left) == frames(*right)) == (left == right)


def test_fields_cannot_slide_into_each_other() -> None:
    """Unframed, 'ab' + 'c' and 'a' + 'bc' would hash alike; framed, they differ."""
    commitment = bytes(32)
    left = [LockedSeat(1, "ab", 1, client_seed=b"c")]
    right = [LockedSeat(1, "a", 1, client_seed=b"bc")]
    v1 = FairnessVersion.V1
    assert compute_transcript_hash(commitment, left, None, v1) != compute_transcript_hash(
        commitment, right, None, v1
    )
    # In v2 the stake and client seed are adjacent frames: 1 ‖ 'ab' against 1 ‖ 'a' ‖ 'b'.
    v2_left = [LockedSeat(1, ref("a"), 1, client_seed=b"ab")]
    v2_right = [LockedSeat(1, ref("a"), 1, client_seed=b"a"), LockedSeat(2, ref("b"), 1)]
    v2 = FairnessVersion.V2
    assert compute_transcript_hash(commitment, v2_left, None, v2) != compute_transcript_hash(
        commitment, v2_right, None, v2
    )
    # In v3 the seat number and client seed are: 1 ‖ 'ab' against 1 ‖ 'a' then seat 2 ‖ 'b'.
    v3_right = [LockedSeat(1, ref("a"), 1, client_seed=b"a"), LockedSeat(2, ref("b"), 1, b"b")]
    v3 = FairnessVersion.V3
    assert compute_transcript_hash(commitment, v2_left, None, v3) != compute_transcript_hash(
        commitment, v3_right, None, v3
    )


def test_new_server_seeds_are_fresh_32_byte_values() -> None:
    seeds = {new_server_seed() for _ in range(64)}
    assert len(seeds) == 64
    assert {len(seed) for seed in seeds} == {32}


def test_fresh_rounds_use_the_os_csprng(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def fake_token_bytes(size: int) -> bytes:
        calls.append(size)
        return b"\x07" * size

    monkeypatch.setattr("secrets.token_bytes", fake_token_bytes)
    committed = CommittedRound.with_fresh_seed("r", HouseRules())
    assert calls == [32]
    assert committed.server_seed == b"\x07" * 32


SEAT_DEFAULTS: dict[str, Any] = {
    "seat_number": 1,
    "player": "alice",
    "stake": 100,
    "client_seed": b"",
}


@pytest.mark.parametrize(
    ("field", "bad_value"),
    [
        ("seat_number", 0),
        ("seat_number", -3),
        ("seat_number", True),
        ("seat_number", 2**31),
        ("seat_number", "1"),
        ("player", ""),
        ("player", "x" * 129),
        ("player", "é" * 65),  # 130 bytes of UTF-8 in 65 characters
        ("player", "\ud800"),
        ("player", 7),
        ("stake", 0),
        ("stake", -100),
        ("stake", True),
        ("stake", 1.5),
        ("stake", 2**63),
        ("client_seed", bytes(65)),
        ("client_seed", "abc"),
        ("client_seed", bytearray(3)),
    ],
)
def test_locked_seat_refuses_bad_values_naming_the_field(field: str, bad_value: object) -> None:
    with pytest.raises(LockError, match=field) as raised:
        LockedSeat(**{**SEAT_DEFAULTS, field: bad_value})
    assert raised.value.field == field
    assert isinstance(raised.value, FairnessError)
    assert isinstance(raised.value, ValueError)


def test_locked_seat_accepts_the_bounds() -> None:
    seat = LockedSeat(2**31 - 1, "x" * 128, 2**63 - 1, client_seed=bytes(64))
    assert seat.stake == 2**63 - 1


@pytest.mark.parametrize(
    ("label", "value", "field"),
    [
        ("", b"x", "label"),
        ("x" * 129, b"x", "label"),
        ("ok", b"", "value"),
        ("ok", bytes(1025), "value"),
    ],
)
def test_beacon_refuses_bad_values(label: str, value: bytes, field: str) -> None:
    with pytest.raises(LockError, match=f"beacon {field}") as raised:
        Beacon(label, value)
    assert raised.value.field == field


def test_seats_must_be_unique_and_present() -> None:
    with pytest.raises(LockError, match="seat 2 is locked twice"):
        canonical_seats(
            [LockedSeat(2, ref("a"), 1), LockedSeat(1, ref("b"), 1), LockedSeat(2, ref("c"), 1)],
            FairnessVersion.V2,
        )
    with pytest.raises(LockError, match="at least one seat"):
        canonical_seats([], FairnessVersion.V2)
    with pytest.raises(LockError, match="LockedSeat"):
        canonical_seats([(1, "a", 1)], FairnessVersion.V2)  # type: ignore[list-item]


@pytest.mark.parametrize(
    "player", ["alice", "p-" + "0" * 31, "p-" + "0" * 33, "p-" + "A" * 32, "P-" + "0" * 32]
)
def test_a_v2_or_v3_seat_names_its_player_by_a_reference_only(player: str) -> None:
    """So that a platform's account id cannot reach the log of a new round by mistake."""
    for version in (FairnessVersion.V2, FairnessVersion.V3):
        with pytest.raises(LockError, match=f"a v{int(version)} round .* reference") as raised:
            canonical_seats([LockedSeat(1, player, 1)], version)
        assert raised.value.field == "player"
    assert canonical_seats([LockedSeat(1, player, 1)], FairnessVersion.V1)[0].player == player


@pytest.mark.parametrize(
    ("round_id", "server_seed", "field"),
    [
        ("", bytes(32), "round_id"),
        ("r" * 129, bytes(32), "round_id"),
        ("é" * 65, bytes(32), "round_id"),  # 65 characters, but 130 bytes of UTF-8
        (None, bytes(32), "round_id"),
        ("r", bytes(31), "server_seed"),
        ("r", "00" * 32, "server_seed"),
    ],
)
def test_commit_refuses_bad_values(round_id: Any, server_seed: Any, field: str) -> None:
    with pytest.raises(CommitError, match=field) as raised:
        compute_commitment(round_id, HouseRules(), server_seed, FairnessVersion.V2)
    assert raised.value.field == field


def test_the_round_id_limit_is_128_bytes_not_characters() -> None:
    """As docs/fairness.md says: 64 two-byte characters fit, and are framed as 128 bytes."""
    round_id = "é" * 64
    assert len(round_id) == 64
    preimage = commitment_preimage(round_id, HouseRules(), bytes(32), FairnessVersion.V2)
    framed_tag = 4 + len(b"gnau-dealer/fairness/v2/commitment")
    assert preimage[framed_tag : framed_tag + 4] == bytes.fromhex("00000080")
    assert preimage[framed_tag + 4 : framed_tag + 4 + 128] == b"\xc3\xa9" * 64


def test_transcript_refuses_a_commitment_of_the_wrong_size() -> None:
    with pytest.raises(CommitError, match="commitment must be exactly 32 bytes"):
        compute_transcript_hash(bytes(31), [LockedSeat(1, ref("a"), 1)], None, FairnessVersion.V2)
