"""Operators at the dealer (issue 38): one operator never reads, changes, voids, lists or forgets
another's rounds or players. A table id, a request id and a player id are each operator's own;
a round of another operator is not found, exactly as a round that does not exist; every entry
names the round's operator, the service's completions included.

The expected values are the test's own: which operator made what, never read back from the code
under test.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnau_service.audit.entries import EntryKind, decode_entry
from gnau_service.audit.operators import OPERATOR_PATTERN
from gnau_service.audit.round_events import VoidReason
from gnau_service.rounds.deadlines import Deadlines
from gnau_service.rounds.dealer import Dealer
from gnau_service.rounds.identities import forget_player, lookup_player
from gnau_service.rounds.record import RoundState
from gnau_service.rounds.refusals import InvalidRequest, RoundNotFound, TableBusy
from gnau_service.rounds.requests import SeatRequest
from gnau_service.rounds.view import RoundView
from gnau_service.rules.house_rules import HouseRules
from gnau_service.store import Store
from gnau_service.store.players import read_player_key
from tests.catalogued import catalogue, catalogued
from tests.dealers import fresh, opened_store
from tests.postgres import SERVICE_BACKENDS

A, B = "casino-a", "casino-b"
ACTOR = {A: "token:casino-a-platform", B: "token:casino-b-platform"}
SEATS = [SeatRequest(1, "42", 100), SeatRequest(2, "alice", 50)]


@pytest.fixture(params=SERVICE_BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with opened_store(request.param, tmp_path) as opened:
        for operator in (A, B):
            catalogued(opened, ["t-1", "t-2"], operator=operator)
        yield opened


async def shuffled(dealer: Dealer, operator: str, table: str = "t-1") -> RoundView:
    return await dealer.shuffle(
        table, HouseRules(), fresh(), operator=operator, actor=ACTOR[operator]
    )


async def dealt(dealer: Dealer, operator: str, table: str = "t-1") -> RoundView:
    view = await shuffled(dealer, operator, table)
    return await dealer.deal(
        view.record.round_id, SEATS, None, fresh(), operator=operator, actor=ACTOR[operator]
    )


def payloads(store: Store, round_id: str) -> list[dict[str, Any]]:
    return [
        decode_entry(data, store.signer.verifier).payload for data in store.round_entries(round_id)
    ]


def test_one_table_id_is_open_at_both_operators(store: Store) -> None:
    dealer = Dealer(store)

    async def scenario() -> tuple[RoundView, RoundView]:
        ours, theirs = await shuffled(dealer, A), await shuffled(dealer, B)
        with pytest.raises(TableBusy):
            await shuffled(dealer, A)  # one open round per table of an operator
        return ours, theirs

    ours, theirs = asyncio.run(scenario())
    assert ours.record.round_id != theirs.record.round_id
    assert (ours.record.operator, theirs.record.operator) == (A, B)
    assert ours.record.table_id == theirs.record.table_id == "t-1"


def test_a_round_of_another_operator_is_not_found_as_one_that_does_not_exist(
    store: Store,
) -> None:
    dealer = Dealer(store)
    ours = asyncio.run(shuffled(dealer, A))
    round_id = ours.record.round_id
    entries = store.round_entries(round_id)

    async def as_b() -> list[str]:
        steps = [
            dealer.deal(round_id, SEATS, None, fresh(), operator=B, actor=ACTOR[B]),
            dealer.reveal(round_id, fresh(), operator=B, actor=ACTOR[B]),
            dealer.settle(round_id, fresh(), operator=B, actor=ACTOR[B]),
            dealer.void(round_id, VoidReason.TABLE_CLOSED, "", fresh(), operator=B, actor=ACTOR[B]),
        ]
        refusals = []
        for step in steps:
            with pytest.raises(RoundNotFound) as refused:
                await step
            refusals.append(str(refused.value))
        return refusals

    missing = "r-" + "0" * 24
    with pytest.raises(RoundNotFound) as not_there:
        dealer.get(missing, operator=A)
    with pytest.raises(RoundNotFound) as not_b_s:
        dealer.get(round_id, operator=B)
    # The same words as for a round that does not exist (each names the id asked for).
    assert str(not_b_s.value) == str(not_there.value).replace(missing, round_id)
    assert asyncio.run(as_b()) == [str(not_b_s.value)] * 4
    # Nothing changed, nothing was logged; A and every operator's auditor still see it.
    assert store.round_entries(round_id) == entries
    assert dealer.get(round_id, operator=A).record.state is RoundState.SHUFFLED
    assert dealer.get(round_id, operator=None).record.operator == A


def test_a_request_id_of_another_operator_makes_a_request_of_its_own(store: Store) -> None:
    dealer = Dealer(store)
    request = fresh()

    async def scenario() -> tuple[RoundView, RoundView, RoundView, RoundView]:
        ours = await dealer.shuffle("t-1", HouseRules(), request, operator=A, actor=ACTOR[A])
        theirs = await dealer.shuffle("t-1", HouseRules(), request, operator=B, actor=ACTOR[B])
        # Each operator's retry gets its own first answer.
        our_retry = await dealer.shuffle("t-1", HouseRules(), request, operator=A, actor=ACTOR[A])
        their_retry = await dealer.shuffle("t-1", HouseRules(), request, operator=B, actor=ACTOR[B])
        return ours, theirs, our_retry, their_retry

    ours, theirs, our_retry, their_retry = asyncio.run(scenario())
    assert theirs.record.operator == B and theirs.record.round_id != ours.record.round_id
    assert our_retry.record.round_id == ours.record.round_id
    assert their_retry.record.round_id == theirs.record.round_id
    assert len(store.round_entries(theirs.record.round_id)) == 1

    # The same for a step: B's reveal with A's request id reveals B's round.
    reveal = fresh()

    async def steps() -> tuple[RoundView, RoundView]:
        for view, operator in ((ours, A), (theirs, B)):
            await dealer.deal(
                view.record.round_id, SEATS, None, fresh(), operator=operator, actor=ACTOR[operator]
            )
        first = await dealer.reveal(ours.record.round_id, reveal, operator=A, actor=ACTOR[A])
        second = await dealer.reveal(theirs.record.round_id, reveal, operator=B, actor=ACTOR[B])
        return first, second

    first, second = asyncio.run(steps())
    assert (first.record.round_id, second.record.round_id) == (
        ours.record.round_id,
        theirs.record.round_id,
    )
    assert second.record.state is RoundState.REVEALED


def test_listing_is_of_the_operator_s_rounds_and_its_token_is_bound_to_the_operator(
    store: Store,
) -> None:
    dealer = Dealer(store)

    async def scenario() -> dict[str, set[str]]:
        made: dict[str, set[str]] = {A: set(), B: set()}
        for operator, table in ((A, "t-1"), (A, "t-2"), (B, "t-1")):
            made[operator].add((await shuffled(dealer, operator, table)).record.round_id)
        return made

    made = asyncio.run(scenario())

    def listed(table: str, operator: str | None) -> set[str]:
        views, token = dealer.list(table, 50, "", operator=operator)
        assert token == ""
        return {view.record.round_id for view in views}

    assert listed("", A) == made[A] and listed("", B) == made[B]
    assert listed("", None) == made[A] | made[B]
    b_at_t1 = made[B]
    assert listed("t-1", B) == b_at_t1
    a_at_t1 = {r for r in made[A] if dealer.get(r, operator=A).record.table_id == "t-1"}
    assert listed("t-1", A) == a_at_t1 and listed("t-1", None) == a_at_t1 | b_at_t1

    first, token = dealer.list("", 1, "", operator=A)
    assert len(first) == 1 and token
    rest, _ = dealer.list("", 50, token, operator=A)
    assert {view.record.round_id for view in [*first, *rest]} == made[A]
    for other in (B, None):
        with pytest.raises(InvalidRequest) as refused:
            dealer.list("", 50, token, operator=other)
        assert refused.value.violations[0][0] == "page_token"


def test_forgetting_b_s_player_leaves_a_s_player_of_the_same_id(store: Store) -> None:
    dealer = Dealer(store)

    async def scenario() -> tuple[RoundView, RoundView]:
        return await dealt(dealer, A), await dealt(dealer, B)

    ours, theirs = asyncio.run(scenario())
    our_ref = next(seat.player for seat in ours.record.seats if seat.seat_number == 1)
    their_ref = next(seat.player for seat in theirs.record.seats if seat.seat_number == 1)
    our_key = read_player_key(store, A, "42")
    assert our_key is not None and read_player_key(store, B, "42") not in (None, our_key)

    # Lookups are scoped: B does not find A's reference, nor A's seats of its player "42".
    assert lookup_player(store, operator=B, reference=our_ref) == ("", [])
    found_id, found = lookup_player(store, operator=A, reference=our_ref)
    assert found_id == "42" and [seat.round_id for seat in found] == [ours.record.round_id]
    _, of_b = lookup_player(store, operator=B, player_id="42")
    assert [(seat.round_id, seat.player_ref) for seat in of_b] == [
        (theirs.record.round_id, their_ref)
    ]
    _, of_all = lookup_player(store, operator=None, player_id="42")
    assert {(seat.operator, seat.player_ref) for seat in of_all} == {(A, our_ref), (B, their_ref)}

    forgotten = asyncio.run(
        forget_player(store, "42", "forget-1", operator=B, actor=ACTOR[B], deadline=None)
    )
    assert forgotten.forgotten and forgotten.seats_unlinked == 1
    assert read_player_key(store, B, "42") is None
    assert read_player_key(store, A, "42") == our_key
    assert lookup_player(store, operator=A, player_id="42")[1] == found
    assert dealer.get(ours.record.round_id, operator=A).players[our_ref] == "42"
    assert their_ref not in dealer.get(theirs.record.round_id, operator=B).players
    forgotten_entry = decode_entry(
        store.entries(forgotten.log_index, forgotten.log_index + 1)[0], store.signer.verifier
    )
    assert forgotten_entry.kind is EntryKind.PLAYER_FORGOTTEN
    assert forgotten_entry.payload == {"actor": ACTOR[B], "operator": B}

    # A's retry of B's request id is a forget of A's own, not B's answer replayed.
    again = asyncio.run(
        forget_player(store, "42", "forget-1", operator=A, actor=ACTOR[A], deadline=None)
    )
    assert again.forgotten and again.log_index != forgotten.log_index
    assert read_player_key(store, A, "42") is None


def test_every_entry_names_the_round_s_operator_the_service_s_included(store: Store) -> None:
    dealer = Dealer(store, deadlines=Deadlines(deal_seconds=1, settle_seconds=1))

    async def scenario() -> tuple[str, str]:
        settled = await dealt(dealer, A)
        round_id = settled.record.round_id
        await dealer.reveal(round_id, fresh(), operator=A, actor=ACTOR[A])
        await dealer.settle(round_id, fresh(), operator=A, actor=ACTOR[A])
        abandoned = (await dealt(dealer, B)).record.round_id
        # The service completes B's round at its deadline, as B's.
        while await dealer.complete_due(abandoned) is None:
            await asyncio.sleep(0.2)
        return round_id, abandoned

    settled, abandoned = asyncio.run(scenario())
    assert [payload["operator"] for payload in payloads(store, settled)] == [A] * 4
    completed = payloads(store, abandoned)
    assert [payload["operator"] for payload in completed] == [B] * 4
    assert [payload["actor"] for payload in completed[-2:]] == ["service", "service"]
    assert dealer.get(abandoned, operator=B).record.completed_by == "service"


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    operators=st.lists(
        st.from_regex(OPERATOR_PATTERN, fullmatch=True), min_size=2, max_size=4, unique=True
    ),
    table=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=20),
)
def test_each_operator_sees_its_own_round_of_a_shared_table_id_and_no_other(
    store: Store, operators: list[str], table: str
) -> None:
    dealer = Dealer(store)
    table = f"{table}-{uuid.uuid4().hex[:8]}"  # a table no earlier example opened

    async def open_at_each() -> dict[str, str]:
        for operator in operators:
            await catalogue(store, [table], operator=operator)
        return {
            operator: (
                await dealer.shuffle(
                    table, HouseRules(), fresh(), operator=operator, actor="token:platform"
                )
            ).record.round_id
            for operator in operators
        }

    opened = asyncio.run(open_at_each())
    for operator in operators:
        views, _ = dealer.list(table, 50, "", operator=operator)
        assert [view.record.round_id for view in views] == [opened[operator]]
        for other in operators:
            if other != operator:
                with pytest.raises(RoundNotFound):
                    dealer.get(opened[other], operator=operator)
    everyone, _ = dealer.list(table, 50, "", operator=None)
    assert sorted(view.record.round_id for view in everyone) == sorted(opened.values())
