"""Every integer a round can produce fits the log's JSON range, ±(2^53-1): the configuration
refuses a max stake that could leave it, Deal refuses a seat or a table that could, and any round
Deal accepts settles (it used to stick in REVEALED when its settlement did not fit).

A round is dealt only at a catalogued table (issue 38), whose max_stake is at most
:data:`LARGEST_MAX_STAKE`: a Dealer whose ``max_stake`` is beyond what the configuration allows
refuses such a seat at its table's limit first. The checks of a seat's and the dealer's win are
reached by a round held to the service's ``max_stake`` alone, as a round from before the
catalogue is: :func:`lock` checks seats so."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnau_service.audit.operators import DEFAULT_OPERATOR
from gnau_service.rounds.dealer import Dealer
from gnau_service.rounds.record import RoundState
from gnau_service.rounds.refusals import InvalidRequest
from gnau_service.rounds.requests import SeatLimits, SeatRequest, locked_seats
from gnau_service.rules.house_rules import HouseRules
from gnau_service.server.process.config import ConfigError, load_settings
from gnau_service.store import Store
from tests.catalogued import catalogue
from tests.dealers import fresh, opened_store
from tests.rules.test_settlement import RULES
from tests.serving import gnau

MAX_SAFE = 2**53 - 1
#: The largest --max-stake the service takes: 82 seats (8 decks) paid 20x (Five Dukes, suited,
#: doubled) must settle within 2^53 - 1. Worked out by hand, not by the code under test.
LARGEST_MAX_STAKE = 5_492_194_667_524


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with opened_store("sqlite", tmp_path) as opened:
        yield opened


def test_the_largest_max_stake_is_worked_out_right() -> None:
    assert 82 * 20 * LARGEST_MAX_STAKE <= MAX_SAFE < 82 * 20 * (LARGEST_MAX_STAKE + 1)
    assert load_settings(None, {}, {"max_stake": str(LARGEST_MAX_STAKE)}).max_stake == (
        LARGEST_MAX_STAKE
    )


@pytest.mark.parametrize("stake", [LARGEST_MAX_STAKE + 1, 2**53, 2**63 - 1])
def test_a_max_stake_that_could_settle_beyond_the_range_is_refused(stake: int) -> None:
    with pytest.raises(ConfigError, match="max_stake"):
        load_settings(None, {}, {"max_stake": str(stake)})
    result = gnau("serve", "--max-stake", str(stake), "--log-format", "console")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert "max_stake" in result.stderr and str(LARGEST_MAX_STAKE) in result.stderr


def deal(dealer: Dealer, rules: HouseRules, stakes: list[int]) -> str:
    """Deal ``stakes`` in a new round under ``rules``, at a table catalogued for it that takes
    any stake up to :data:`LARGEST_MAX_STAKE` and any number of seats."""

    async def go() -> str:
        table = f"t-{uuid.uuid4()}"
        await catalogue(dealer.store, [table], rules)
        shuffled = await dealer.shuffle(
            table, rules, fresh(), operator=DEFAULT_OPERATOR, actor="token:test"
        )
        round_id = shuffled.record.round_id
        seats = [SeatRequest(n, f"p{n}", stake) for n, stake in enumerate(stakes, start=1)]
        await dealer.deal(
            round_id, seats, None, fresh(), operator=DEFAULT_OPERATOR, actor="token:test"
        )
        return round_id

    return asyncio.run(go())


def lock(rules: HouseRules, stakes: list[int]) -> None:
    """Check the seats of a Deal of ``stakes`` under ``rules`` as the Dealer checks those of a
    round from before the catalogue: held to the service's ``max_stake`` alone, here 2^62,
    beyond what the configuration allows."""
    seats = [SeatRequest(n, f"p{n}", stake) for n, stake in enumerate(stakes, start=1)]
    locked_seats(rules, seats, None, SeatLimits(max_stake=2**62))


def test_a_seat_whose_win_could_leave_the_range_is_refused_by_name(store: Store) -> None:
    dealer = Dealer(store, max_stake=2**62)  # beyond what the configuration allows
    with pytest.raises(InvalidRequest) as refused:
        deal(dealer, HouseRules(), [5, 2**53 // 10 + 1])
    assert [path for path, _ in refused.value.violations] == ["seats[1].stake"]
    assert f"{LARGEST_MAX_STAKE:,}" in refused.value.violations[0][1]  # the table's limit
    # Held to the service's max_stake alone, the seat is refused for its win.
    with pytest.raises(InvalidRequest) as refused:
        lock(HouseRules(), [5, 2**53 // 10 + 1])
    assert [path for path, _ in refused.value.violations] == ["seats[1].stake"]
    assert "2^53-1" in refused.value.violations[0][1]


def test_the_testers_stuck_round_is_refused_at_deal(store: Store) -> None:
    dealer = Dealer(store, max_stake=2**62)
    # Nine seats at 2^52 dealt and revealed fine, then a Five Dukes settlement paid 10 x 2^52:
    # the round stuck in REVEALED. Each seat alone could now leave the range.
    with pytest.raises(InvalidRequest) as refused:
        deal(dealer, HouseRules(), [2**52] * 9)
    assert [path for path, _ in refused.value.violations][:5] == [
        f"seats[{n}].stake" for n in range(5)
    ]
    with pytest.raises(InvalidRequest) as refused:
        lock(HouseRules(), [2**52] * 9)
    assert [path for path, _ in refused.value.violations][:5] == [
        f"seats[{n}].stake" for n in range(5)
    ]
    assert all("2^53-1" in problem for _, problem in refused.value.violations)


def test_a_table_whose_dealer_could_leave_the_range_is_refused(store: Store) -> None:
    dealer = Dealer(store, max_stake=2**62)
    each = MAX_SAFE // 10 // 5  # each seat's win fits; the dealer paying nine of them does not
    # No catalogued table takes such a stake (82 seats at its largest max_stake fit the range):
    # at one, each seat is refused at the table's limit.
    assert each > LARGEST_MAX_STAKE
    with pytest.raises(InvalidRequest) as refused:
        deal(dealer, HouseRules(), [each] * 9)
    assert [path for path, _ in refused.value.violations] == [f"seats[{n}].stake" for n in range(9)]
    # Held to the service's max_stake alone, the table is refused as a whole.
    with pytest.raises(InvalidRequest) as refused:
        lock(HouseRules(), [each] * 9)
    assert [path for path, _ in refused.value.violations] == ["seats"]
    assert "2^53-1" in refused.value.violations[0][1]
    lock(HouseRules(), [each] * 5)  # five of them fit
    deal(dealer, HouseRules(), [LARGEST_MAX_STAKE] * 9)  # nine at a table's largest limit fit


# Every house rule, as the settlement tests draw them, with up to eight decks.
rules = st.builds(replace, RULES, decks=st.integers(1, 8))
near_the_limit = st.integers(1, 2**53) | st.sampled_from(
    [1, MAX_SAFE // 20, MAX_SAFE // 10, MAX_SAFE // 7, MAX_SAFE // 82, 2**52, 2**53 - 1]
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rules=rules, stakes=st.lists(near_the_limit, min_size=1, max_size=12))
def test_any_round_deal_accepts_settles(store: Store, rules: HouseRules, stakes: list[int]) -> None:
    dealer = Dealer(store, max_stake=2**62)
    try:
        round_id = deal(dealer, rules, stakes)
    except InvalidRequest:
        return  # refused before anything was written: nothing can get stuck

    async def finish() -> RoundState:
        await dealer.reveal(round_id, fresh(), operator=DEFAULT_OPERATOR, actor="token:test")
        settled = await dealer.settle(
            round_id, fresh(), operator=DEFAULT_OPERATOR, actor="token:test"
        )
        assert settled.settlement is not None
        assert all(abs(seat.delta) <= MAX_SAFE for seat in settled.settlement.seats)
        assert abs(settled.settlement.dealer_delta) <= MAX_SAFE
        return settled.record.state

    assert asyncio.run(finish()) is RoundState.SETTLED
