"""Steps planned ahead of the writers' turn (issue 41, gnau_service/rounds/planning.py): where
other processes wait for SQLite's writers' turn, a step is computed before its unit waits for the
turn, and used only if its round is still as the plan read it; a round moved meanwhile is
planned again in the turn, and counted. Where no other process waits (SQLite in one process),
or writers do not take turns (PostgreSQL), nothing is planned ahead.

The expected values are the test's own: how many steps it sends, which of two racing ones can
win, and each seat's reference from its player's stored key by the published formula.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnau_service.audit.entries import EntryKind, decode_entry
from gnau_service.audit.operators import DEFAULT_OPERATOR
from gnau_service.fairness.player_refs import player_ref
from gnau_service.rounds.dealer import Dealer
from gnau_service.rounds.planning import PlanCounts, Planned
from gnau_service.rounds.record import RoundRecord, RoundState
from gnau_service.rounds.refusals import WrongState
from gnau_service.rounds.requests import SeatRequest
from gnau_service.rounds.view import RoundView
from gnau_service.rules.house_rules import HouseRules
from gnau_service.store import Store
from gnau_service.store.players import read_player_key
from gnau_service.store.sqlite import FileTurn, SqliteBackend
from tests.catalogued import catalogued
from tests.dealers import fresh, opened_store
from tests.postgres import SERVICE_BACKENDS

ACTOR = "token:casino-a-platform"
SEATS = [SeatRequest(1, "42", 100), SeatRequest(2, "alice", 50)]


@pytest.fixture(params=SERVICE_BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with opened_store(request.param, tmp_path) as opened:
        catalogued(opened, ["t-1", "t-2"])
        yield opened


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    """A SQLite store whose writers contend: another process has just held the turn."""
    with opened_store("sqlite", tmp_path) as opened:
        catalogued(opened, ["t-1", "t-2"])
        contend(opened)
        yield opened


def contend(store: Store) -> None:
    """Hold the writers' turn, as another process on the file would, while a step is queued."""
    assert isinstance(store.backend, SqliteBackend)
    other = FileTurn(store.backend.turn_path)
    other.take()

    async def step_behind_it() -> None:
        queued = asyncio.ensure_future(store.run_async(lambda tx: None))
        await asyncio.sleep(0.05)
        other.release()
        await queued

    try:
        asyncio.run(step_behind_it())
    finally:
        other.close()


async def revealed(dealer: Dealer, table: str = "t-1") -> RoundView:
    view = await dealer.shuffle(
        table, HouseRules(), fresh(), operator=DEFAULT_OPERATOR, actor=ACTOR
    )
    round_id = view.record.round_id
    await dealer.deal(round_id, SEATS, None, fresh(), operator=DEFAULT_OPERATOR, actor=ACTOR)
    return await dealer.reveal(round_id, fresh(), operator=DEFAULT_OPERATOR, actor=ACTOR)


def play(dealer: Dealer) -> tuple[int, int]:
    """A whole round: how many steps were planned ahead and used, and recomputed."""
    view = asyncio.run(revealed(dealer))
    asyncio.run(
        dealer.settle(view.record.round_id, fresh(), operator=DEFAULT_OPERATOR, actor=ACTOR)
    )
    return dealer.plans.used, dealer.plans.recomputed


def test_nothing_is_planned_ahead_where_no_other_process_waits_for_the_writer(
    store: Store,
) -> None:
    assert not store.writers_contend
    assert play(Dealer(store)) == (0, 0)


def test_each_step_is_planned_ahead_once_another_process_waited_for_the_turn(
    sqlite_store: Store,
) -> None:
    assert sqlite_store.writers_contend
    # Deal, Reveal and Settle, each used as planned (nothing else moved the round); a Shuffle
    # has no round to plan from.
    assert play(Dealer(sqlite_store)) == (3, 0)


def test_a_step_planned_from_a_round_moved_meanwhile_is_planned_again(sqlite_store: Store) -> None:
    """Two Settles of one round, each planned before either unit runs: the first settles as
    planned; the second finds the round moved, plans again, and is refused as it would have
    been without a plan. The round is settled once."""
    dealer = Dealer(sqlite_store)
    round_id = asyncio.run(revealed(dealer)).record.round_id
    before = (dealer.plans.used, dealer.plans.recomputed)

    async def both() -> list[RoundView | BaseException]:
        return await asyncio.gather(
            *(
                dealer.settle(round_id, fresh(), operator=DEFAULT_OPERATOR, actor=ACTOR)
                for _ in range(2)
            ),
            return_exceptions=True,
        )

    first, second = asyncio.run(both())
    assert isinstance(first, RoundView) and first.record.state is RoundState.SETTLED
    assert isinstance(second, WrongState)
    assert (dealer.plans.used - before[0], dealer.plans.recomputed - before[1]) == (1, 1)
    kinds = [
        decode_entry(data, sqlite_store.signer.verifier).kind
        for data in sqlite_store.round_entries(round_id)
    ]
    assert kinds.count(EntryKind.ROUND_SETTLED) == 1


def test_a_deal_names_a_new_player_by_the_key_another_deal_made_meanwhile(
    sqlite_store: Store,
) -> None:
    """Two Deals seating one new player, planned at once: each plan makes the player a key, the
    first deal keeps its own, and the second names the player by that key, not by the one its
    plan made."""
    dealer = Dealer(sqlite_store)

    async def scenario() -> list[RoundView]:
        rounds = [
            await dealer.shuffle(t, HouseRules(), fresh(), operator=DEFAULT_OPERATOR, actor=ACTOR)
            for t in ("t-1", "t-2")
        ]
        seats = [SeatRequest(3, "zoe-new", 70)]
        return await asyncio.gather(
            *(
                dealer.deal(
                    view.record.round_id,
                    seats,
                    None,
                    fresh(),
                    operator=DEFAULT_OPERATOR,
                    actor=ACTOR,
                )
                for view in rounds
            )
        )

    dealt = asyncio.run(scenario())
    key = read_player_key(sqlite_store, DEFAULT_OPERATOR, "zoe-new")
    assert key is not None
    for view in dealt:
        (seat,) = view.record.seats
        assert seat.player == player_ref(key, view.record.round_id, 3)
    assert dealer.plans.recomputed == 1


@settings(max_examples=200, deadline=None)
@given(made_from=st.text(max_size=8), now=st.text(max_size=8), ahead=st.booleans())
def test_a_plan_is_used_only_for_the_version_it_was_made_from(
    made_from: str, now: str, ahead: bool
) -> None:
    counts = PlanCounts()
    record = RoundRecord.__new__(RoundRecord)  # never read: only carried
    planned = Planned(made_from, record, "ahead") if ahead else None
    plan = counts.plan_for(planned, now, lambda: "in the turn")
    used = ahead and made_from == now
    assert plan == ("ahead" if used else "in the turn")
    assert (counts.used, counts.recomputed) == (int(used), int(ahead and not used))
