"""The dealer's pipeline: commit, lock, deal, reveal; and what it keeps out of logs."""

from __future__ import annotations

import dataclasses

import pytest

from gnau_service.fairness import (
    Beacon,
    CommittedRound,
    LockedSeat,
    compute_commitment,
    compute_transcript_hash,
    deal_round_robin,
    shuffle_deck,
    verify_revealed_round,
)
from gnau_service.fairness.encoding import FairnessVersion
from gnau_service.rules.house_rules import HouseRules
from tests.references import ref

SEED = bytes(range(7, 39))


def test_each_step_is_the_documented_function_of_the_one_before() -> None:
    rules = HouseRules(decks=2)
    committed = CommittedRound("t/r", rules, SEED)
    assert committed.version is FairnessVersion.V3  # every new round
    assert committed.commitment == compute_commitment("t/r", rules, SEED, FairnessVersion.V3)

    seats = [LockedSeat(3, ref("c"), 30), LockedSeat(1, ref("a"), 10, client_seed=b"s")]
    beacon = Beacon("nist/pulse/1", b"\x01" * 64)
    locked = committed.lock(seats, beacon)
    assert [seat.seat_number for seat in locked.seats] == [1, 3]
    assert locked.transcript_hash == compute_transcript_hash(
        committed.commitment, seats, beacon, FairnessVersion.V3
    )

    dealt = locked.deal()
    assert dealt.deck == shuffle_deck(SEED, locked.transcript_hash, decks=2)
    assert dealt.deal == deal_round_robin(dealt.deck, [1, 3])
    assert locked.deal() == dealt  # deterministic: no way to deal the same lock differently

    revealed = dealt.reveal()
    assert revealed.server_seed == SEED
    assert revealed.deck == dealt.deck
    assert revealed.seat_hands == dealt.deal.seat_hands
    assert verify_revealed_round(revealed).ok


def test_the_seed_and_the_cards_stay_out_of_repr() -> None:
    dealt = (
        CommittedRound("r", HouseRules(), b"\xab" * 32).lock([LockedSeat(1, ref("a"), 1)]).deal()
    )
    for shown in (repr(dealt.locked.committed), repr(dealt.locked), repr(dealt)):
        assert "ab" * 8 not in shown
        assert "server_seed" not in shown
    first_card = str(dealt.deck[0])
    assert f"'{first_card}'" not in repr(dealt)
    assert "Card(" not in repr(dealt)


def test_a_committed_round_is_frozen() -> None:
    committed = CommittedRound("r", HouseRules(), SEED)
    with pytest.raises(dataclasses.FrozenInstanceError):
        committed.server_seed = bytes(32)  # type: ignore[misc]
