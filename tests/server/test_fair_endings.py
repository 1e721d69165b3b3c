"""Rounds always end fairly (issue 37), at the dealer: after the deal a void pays every seat the
better of its result and a refund; a round nobody finishes is finished by the service at its
deadline, exactly once; every entry names its actor.

Expected payouts come from the independent implementation of the rules (tests/independent),
never from the service's own settlement code.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from gnau.v1 import dealer_pb2, round_pb2

from gnau_service.audit.entries import decode_entry
from gnau_service.audit.operators import DEFAULT_OPERATOR
from gnau_service.audit.round_events import VoidReason
from gnau_service.audit.timestamps import format_utc_timestamp
from gnau_service.rounds.completion import SWEEP_BATCH, RoundCompletion
from gnau_service.rounds.deadlines import Deadlines
from gnau_service.rounds.dealer import Dealer
from gnau_service.rounds.record import RoundState
from gnau_service.rounds.refusals import InvalidRequest, WrongState
from gnau_service.rounds.requests import SeatRequest
from gnau_service.rounds.view import RoundView
from gnau_service.rules.house_rules import HouseRules
from gnau_service.server.process.app import running
from gnau_service.server.process.config import Settings
from gnau_service.store import Store
from gnau_service.store.gauges import overdue_rounds
from tests.catalogued import catalogue, catalogued
from tests.dealers import fresh, opened_store
from tests.independent.rules import settle as independent_settle
from tests.postgres import SERVICE_BACKENDS
from tests.server.conftest import TOKENS, Service
from tests.server.test_service import deal, play, shuffle

PLATFORM = "token:casino-a-platform"
SEATS = [SeatRequest(n, f"player-{n}", 100 * n, b"") for n in range(1, 7)]
#: The tables the tests deal at, each in the default operator's catalogue (issue 38).
TABLES = ("t-1", "t-2", "t-shuffled", "t-dealt", "t-revealed", "t-played")


@pytest.fixture(params=SERVICE_BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with opened_store(request.param, tmp_path) as opened:
        catalogued(opened, TABLES)
        yield opened


async def dealt(dealer: Dealer, table: str = "t-1") -> RoundView:
    shuffled = await dealer.shuffle(
        table, HouseRules(), fresh(), operator=DEFAULT_OPERATOR, actor=PLATFORM
    )
    return await dealer.deal(
        shuffled.record.round_id, SEATS, None, fresh(), operator=DEFAULT_OPERATOR, actor=PLATFORM
    )


def result_deltas(view: RoundView) -> dict[int, int]:
    """Each seat's result against the dealer, by the independent rules."""
    rules = dict(view.record.rules.as_dict())
    seats = [{"seat_number": s.seat_number, "stake": s.stake} for s in view.record.seats]
    hands = {hand.seat_number: [str(c) for c in hand.cards] for hand in view.hands}
    settled = independent_settle(rules, seats, hands, [str(c) for c in view.dealer_hand])
    return {player["seat"]: player["delta"] for player in settled["players"]}


def round_entries(store: Store, round_id: str) -> list[dict[str, Any]]:
    """The round's log entries, as JSON objects, in log order."""
    entries = [decode_entry(data, store.signer.verifier) for data in store.round_entries(round_id)]
    return [{"kind": str(entry.kind), "payload": entry.payload} for entry in entries]


@pytest.mark.parametrize("reveal_first", [False, True], ids=["dealt", "revealed"])
def test_a_void_after_the_deal_pays_every_seat_the_better_of_its_result_and_a_refund(
    store: Store, reveal_first: bool
) -> None:
    """Defect 1: a void after Deal settled nothing, so a winning player lost the win."""
    dealer = Dealer(store)

    async def play() -> tuple[RoundView, RoundView]:
        view = await dealt(dealer)
        round_id = view.record.round_id
        if reveal_first:
            await dealer.reveal(round_id, fresh(), operator=DEFAULT_OPERATOR, actor=PLATFORM)
        voided = await dealer.void(
            round_id,
            VoidReason.PLATFORM_FAILURE,
            "wallet down",
            fresh(),
            operator=DEFAULT_OPERATOR,
            actor=PLATFORM,
        )
        return view, voided

    view, voided = asyncio.run(play())
    results = result_deltas(view)
    paid = {seat.seat: seat.delta for seat in voided.void_settlement.seats}  # type: ignore[union-attr]
    assert paid == {seat: max(delta, 0) for seat, delta in results.items()}
    assert voided.void_settlement is not None
    assert voided.void_settlement.dealer_delta == -sum(paid.values())
    assert voided.record.state is RoundState.VOIDED
    assert voided.record.completed_by == PLATFORM
    assert voided.server_seed is not None and voided.deck  # the void published the deck

    entries = round_entries(store, view.record.round_id)
    kinds = [entry["kind"] for entry in entries]
    assert kinds == ["ROUND_COMMITTED", "ROUND_DEALT", "ROUND_REVEALED", "ROUND_VOIDED"]
    assert all(entry["payload"]["actor"] == PLATFORM for entry in entries)
    void = entries[-1]["payload"]
    assert void["reason_code"] == "PLATFORM_FAILURE" and void["reason"] == "wallet down"
    assert void["state"] == ("REVEALED" if reveal_first else "DEALT")
    assert [p["delta"] for p in void["result"]["players"]] == [results[n] for n in range(1, 7)]
    assert void["paid"] == {
        "dealer_delta": -sum(max(results[n], 0) for n in range(1, 7)),
        "players": [
            {"seat": n, "stake": 100 * n, "delta": max(results[n], 0)} for n in range(1, 7)
        ],
    }


def test_a_void_needs_a_reason_code_an_operator_may_give(store: Store) -> None:
    dealer = Dealer(store)

    async def refusals() -> list[str]:
        shuffled = await dealer.shuffle(
            "t-1", HouseRules(), fresh(), operator=DEFAULT_OPERATOR, actor=PLATFORM
        )
        round_id = shuffled.record.round_id
        problems = []
        for code, reason in (
            (None, "no code"),
            (VoidReason.DEAL_DEADLINE_PASSED, ""),
            (VoidReason.TABLE_CLOSED, "bad\x00text"),
            (VoidReason.TABLE_CLOSED, "x" * 1025),
        ):
            with pytest.raises(InvalidRequest) as refused:
                await dealer.void(
                    round_id, code, reason, fresh(), operator=DEFAULT_OPERATOR, actor=PLATFORM
                )
            problems.append(refused.value.violations[0][0])
        voided = await dealer.void(
            round_id,
            VoidReason.TABLE_CLOSED,
            "",
            fresh(),
            operator=DEFAULT_OPERATOR,
            actor=PLATFORM,
        )
        assert voided.record.void_reason_code is VoidReason.TABLE_CLOSED
        assert voided.void_settlement is None  # nothing was staked
        return problems

    assert asyncio.run(refusals()) == ["reason_code", "reason_code", "reason", "reason"]


def test_the_deadlines_complete_every_open_round_exactly_once(store: Store) -> None:
    """Defect 2: nothing completed a round the platform abandoned. One round abandoned in each
    open state; three sweepers race on them; each round is completed once, by `service`."""
    deadlines = Deadlines(deal_seconds=1, settle_seconds=1)
    dealer = Dealer(store, deadlines=deadlines)

    async def abandon() -> dict[str, RoundView]:
        shuffled = await dealer.shuffle(
            "t-shuffled", HouseRules(), fresh(), operator=DEFAULT_OPERATOR, actor=PLATFORM
        )
        in_deal = await dealt(dealer, "t-dealt")
        revealed = await dealt(dealer, "t-revealed")
        await dealer.reveal(
            revealed.record.round_id, fresh(), operator=DEFAULT_OPERATOR, actor=PLATFORM
        )
        return {"SHUFFLED": shuffled, "DEALT": in_deal, "REVEALED": revealed}

    abandoned = asyncio.run(abandon())
    for view in abandoned.values():
        due = datetime.fromisoformat(view.record.due_at or "")
        assert due - datetime.fromisoformat(view.record.updated_at) == timedelta(seconds=1)

    async def sweep_together() -> list[int]:
        await asyncio.sleep(1.1)
        sweepers = [RoundCompletion(dealer) for _ in range(3)]
        return list(await asyncio.gather(*(sweeper.sweep() for sweeper in sweepers)))

    assert sum(asyncio.run(sweep_together())) == 3
    assert asyncio.run(RoundCompletion(dealer).sweep()) == 0

    shuffled = dealer.get(abandoned["SHUFFLED"].record.round_id, operator=DEFAULT_OPERATOR)
    assert shuffled.record.state is RoundState.VOIDED
    assert shuffled.record.void_reason_code is VoidReason.DEAL_DEADLINE_PASSED
    for state in ("DEALT", "REVEALED"):
        view = dealer.get(abandoned[state].record.round_id, operator=DEFAULT_OPERATOR)
        assert view.record.state is RoundState.SETTLED
        assert view.settlement is not None
        paid = {seat.seat: seat.delta for seat in view.settlement.seats}
        assert paid == result_deltas(abandoned[state])
    for view in abandoned.values():
        record = dealer.get(view.record.round_id, operator=DEFAULT_OPERATOR).record
        assert record.completed_by == "service" and record.due_at is None
        entries = round_entries(store, view.record.round_id)
        kinds = [entry["kind"] for entry in entries]
        assert kinds.count("ROUND_SETTLED") + kinds.count("ROUND_VOIDED") == 1
        assert [entry["payload"]["actor"] for entry in entries][-1] == "service"

    listed, _ = dealer.list("", 50, "", operator=DEFAULT_OPERATOR, completed_by="service")
    assert {view.record.round_id for view in listed} == {
        view.record.round_id for view in abandoned.values()
    }
    since = datetime.fromisoformat(shuffled.record.completed_at or "") + timedelta(hours=1)
    assert (
        dealer.list(
            "",
            50,
            "",
            operator=DEFAULT_OPERATOR,
            completed_by="service",
            completed_since=since.isoformat(),
        )[0]
        == []
    )


@pytest.mark.parametrize("service_first", [False, True], ids=["platform-first", "service-first"])
def test_settle_racing_the_service_gets_the_same_settlement(
    store: Store, service_first: bool
) -> None:
    """A platform's Settle and the service's completion of a revealed round at its deadline:
    one of them settles it, once; the platform's Settle answers that settlement either way,
    and a retry of it the same; its other steps are refused."""
    dealer = Dealer(store, deadlines=Deadlines(deal_seconds=60, settle_seconds=1))

    async def race() -> tuple[RoundView, RoundView, RoundView, RoundState | None]:
        view = await dealt(dealer)
        round_id = view.record.round_id
        await dealer.reveal(round_id, fresh(), operator=DEFAULT_OPERATOR, actor=PLATFORM)
        await asyncio.sleep(1.1)
        request = fresh()
        platform = dealer.settle(round_id, request, operator=DEFAULT_OPERATOR, actor=PLATFORM)
        service = dealer.complete_due(round_id)
        if service_first:
            completed = await service
            answer = await platform
        else:
            answer, completed = await asyncio.gather(platform, service)
        again = await dealer.settle(round_id, request, operator=DEFAULT_OPERATOR, actor=PLATFORM)
        with pytest.raises(WrongState):
            await dealer.reveal(round_id, fresh(), operator=DEFAULT_OPERATOR, actor=PLATFORM)
        with pytest.raises(WrongState):
            await dealer.void(
                round_id,
                VoidReason.PLATFORM_FAILURE,
                "",
                fresh(),
                operator=DEFAULT_OPERATOR,
                actor=PLATFORM,
            )
        return view, answer, again, completed

    view, answer, again, completed = asyncio.run(race())
    assert answer.settlement is not None and again.settlement == answer.settlement
    assert {s.seat: s.delta for s in answer.settlement.seats} == result_deltas(view)
    settled_by = dealer.get(view.record.round_id, operator=DEFAULT_OPERATOR).record.completed_by
    if service_first:
        assert completed is RoundState.SETTLED and settled_by == "service"
    else:
        assert (completed is None) == (settled_by == PLATFORM)
    kinds = [entry["kind"] for entry in round_entries(store, view.record.round_id)]
    assert kinds == ["ROUND_COMMITTED", "ROUND_DEALT", "ROUND_REVEALED", "ROUND_SETTLED"]


def test_a_round_settled_by_the_platform_refuses_a_second_settle(store: Store) -> None:
    dealer = Dealer(store)

    async def twice() -> None:
        view = await dealt(dealer)
        round_id = view.record.round_id
        await dealer.reveal(round_id, fresh(), operator=DEFAULT_OPERATOR, actor=PLATFORM)
        await dealer.settle(round_id, fresh(), operator=DEFAULT_OPERATOR, actor=PLATFORM)
        with pytest.raises(WrongState):
            await dealer.settle(round_id, fresh(), operator=DEFAULT_OPERATOR, actor=PLATFORM)

    asyncio.run(twice())


def test_every_round_entry_names_its_actor_and_the_deal_its_software(store: Store) -> None:
    """Defect 3: no entry said who dealt, settled or voided; the software was only in
    SERVICE_STARTED."""
    dealer = Dealer(store)

    async def play() -> str:
        view = await dealt(dealer)
        round_id = view.record.round_id
        await dealer.reveal(
            round_id, fresh(), operator=DEFAULT_OPERATOR, actor="cert:platform.casino-b.example"
        )
        await dealer.settle(round_id, fresh(), operator=DEFAULT_OPERATOR, actor="token:settler")
        return round_id

    round_id = asyncio.run(play())
    entries = round_entries(store, round_id)
    assert [entry["payload"]["actor"] for entry in entries] == [
        PLATFORM,
        PLATFORM,
        "cert:platform.casino-b.example",
        "token:settler",
    ]
    software = entries[1]["payload"]["software"]
    assert sorted(software) == ["name", "sha256", "version"]
    assert software["name"] == "gnau-service" and len(software["sha256"]) == 64
    assert json.dumps(entries[0]["payload"]).count("software") == 0


def test_the_overdue_gauge_counts_open_rounds_past_their_deadline(store: Store) -> None:
    dealer = Dealer(store, deadlines=Deadlines(deal_seconds=60, settle_seconds=120))

    async def open_two() -> None:
        await dealer.shuffle(
            "t-1", HouseRules(), fresh(), operator=DEFAULT_OPERATOR, actor=PLATFORM
        )
        await dealt(dealer, "t-2")

    asyncio.run(open_two())
    now = datetime.now(UTC)
    assert overdue_rounds(store, format_utc_timestamp(now)) == 0
    assert overdue_rounds(store, format_utc_timestamp(now + timedelta(seconds=61))) == 1
    assert overdue_rounds(store, format_utc_timestamp(now + timedelta(seconds=121))) == 2


@pytest.fixture
async def quick(settings: Settings) -> AsyncIterator[Service]:
    """The server fixture's service with deadlines of a second."""
    hurried = dataclasses.replace(settings, deal_deadline_seconds=1, settle_deadline_seconds=1)
    async with (
        running(hurried) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        await catalogue(app.store, TABLES)
        yield Service(app, hurried, channel)


async def test_the_platform_reconciles_what_the_service_completed(quick: Service) -> None:
    """Over gRPC: rounds left shuffled and dealt are completed by the service at their
    deadlines; the platform finds exactly those with ListRounds(completed_by="service")."""
    started = datetime.now(UTC)
    abandoned_shuffle = await shuffle(quick, "t-shuffled")
    abandoned_deal = await deal(quick, (await shuffle(quick, "t-dealt")).round_id)
    assert abandoned_deal.due_time.ToDatetime(tzinfo=UTC) > started
    played = await play(quick, "t-played")
    operator = "token:legacy-" + hashlib.sha256(TOKENS["operator"].encode()).hexdigest()[:8]
    assert played.completed_by == operator

    async def completed_by_service() -> set[str]:
        request = dealer_pb2.ListRoundsRequest(completed_by="service")
        request.completed_since.FromDatetime(started)
        answer = await quick.call("dealer", "ListRounds", request)
        return {round_.round_id for round_ in answer.rounds}

    for _ in range(100):
        if len(await completed_by_service()) == 2:
            break
        await asyncio.sleep(0.1)
    assert await completed_by_service() == {abandoned_shuffle.round_id, abandoned_deal.round_id}

    later = dealer_pb2.ListRoundsRequest(completed_by="service")
    later.completed_since.FromDatetime(datetime.now(UTC) + timedelta(hours=1))
    assert list((await quick.call("dealer", "ListRounds", later)).rounds) == []
    by_operator = dealer_pb2.ListRoundsRequest(completed_by=operator)
    listed = (await quick.call("dealer", "ListRounds", by_operator)).rounds
    assert [round_.round_id for round_ in listed] == [played.round_id]

    got = dealer_pb2.GetRoundRequest(round_id=abandoned_deal.round_id)
    settled = (await quick.call("dealer", "GetRound", got)).round
    assert settled.state == round_pb2.ROUND_STATE_SETTLED
    assert settled.completed_by == "service" and not settled.HasField("due_time")
    assert settled.complete_time.ToDatetime(tzinfo=UTC) >= abandoned_deal.due_time.ToDatetime(
        tzinfo=UTC
    )
    got = dealer_pb2.GetRoundRequest(round_id=abandoned_shuffle.round_id)
    voided = (await quick.call("dealer", "GetRound", got)).round
    assert voided.void_reason_code == round_pb2.VOID_REASON_DEAL_DEADLINE_PASSED


def test_one_sweep_works_through_a_crowd_of_due_rounds(store: Store) -> None:
    """More rounds due at once than one read takes are all completed by the same sweep, not
    one batch a sweep interval."""
    dealer = Dealer(store, deadlines=Deadlines(deal_seconds=1, settle_seconds=60))
    crowd = SWEEP_BATCH + 6
    catalogued(store, [f"t-{table}" for table in range(crowd)])

    async def abandon_and_sweep() -> int:
        for table in range(crowd):
            await dealer.shuffle(
                f"t-{table}", HouseRules(), fresh(), operator=DEFAULT_OPERATOR, actor=PLATFORM
            )
        await asyncio.sleep(1.1)
        return await RoundCompletion(dealer).sweep()

    assert asyncio.run(abandon_and_sweep()) == crowd
    listed, _ = dealer.list("", 1000, "", operator=DEFAULT_OPERATOR, completed_by="service")
    assert len(listed) == crowd
