"""The table catalogue (issue 38): an operator with catalogued tables deals only at them, under
their approved rule sets and limits; disabling a table, an operator or all gaming stops new
rounds and lets open ones complete; every change is a signed entry naming its actor, and a round
names the table version and the currency it was played under.

The expected values are the test's own (the limits it set, the rule sets it approved, ISO 4217's
exponents as published), never read back from the code under test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnau_service.audit.entries import EntryKind, decode_entry
from gnau_service.rounds.catalogue import (
    Catalogue,
    CatalogueError,
    OperatorConfig,
    RtpBand,
    TableConfig,
    with_changes,
)
from gnau_service.rounds.dealer import Dealer
from gnau_service.rounds.refusals import (
    InvalidRequest,
    RtpOutsideBand,
    RulesNotApproved,
    TableDisabled,
    TableNotFound,
)
from gnau_service.rounds.requests import SeatRequest
from gnau_service.rounds.view import RoundView
from gnau_service.rules.currency import Currency
from gnau_service.rules.house_rules import HouseRules, PayoutTable, every_rule_set
from gnau_service.rules.return_to_player import ReturnToPlayer
from gnau_service.store import Store
from tests.dealers import fresh, opened_store
from tests.postgres import SERVICE_BACKENDS

A, B = "casino-a", "casino-b"
ACTOR = "token:casino-a-platform"
EUR = Currency("EUR", 2)  # ISO 4217: the euro has two decimal places
APPROVED = HouseRules()
OTHER = HouseRules(decks=2)
CONFIG = TableConfig(EUR, (APPROVED,), min_stake=100, max_stake=5_000, max_seats=3)


@pytest.fixture(params=SERVICE_BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with opened_store(request.param, tmp_path) as opened:
        yield opened


async def shuffle(
    dealer: Dealer, table: str = "t-1", rules: HouseRules = APPROVED, operator: str = A
) -> RoundView:
    return await dealer.shuffle(table, rules, fresh(), operator=operator, actor=ACTOR)


async def deal(dealer: Dealer, view: RoundView, seats: list[SeatRequest]) -> RoundView:
    return await dealer.deal(view.record.round_id, seats, None, fresh(), operator=A, actor=ACTOR)


def payload_of(store: Store, index: int) -> dict[str, Any]:
    entry = decode_entry(store.entries(index, index + 1)[0], store.signer.verifier)
    return {"kind": entry.kind, **entry.payload}


def kinds_of(store: Store, kind: EntryKind) -> list[dict[str, Any]]:
    return [
        decode_entry(data, store.signer.verifier).payload for data in store.entries_of_kind(kind)
    ]


def test_rounds_are_dealt_only_at_the_operators_catalogued_tables(store: Store) -> None:
    dealer, catalogue = Dealer(store), Catalogue(store)

    async def scenario() -> None:
        with pytest.raises(TableNotFound):
            await shuffle(dealer, "t-1")  # an empty catalogue deals nowhere
        await catalogue.add_table(A, "t-1", CONFIG, actor="console")
        with pytest.raises(TableNotFound):
            await shuffle(dealer, "elsewhere")
        with pytest.raises(TableNotFound):
            await shuffle(dealer, "t-1", operator=B)  # A's table is not B's
        view = await shuffle(dealer, "t-1")
        assert view.record.table_version == 1
        assert view.record.currency == EUR

    asyncio.run(scenario())


def test_a_rule_set_not_approved_is_refused(store: Store) -> None:
    dealer, catalogue = Dealer(store), Catalogue(store)
    asyncio.run(catalogue.add_table(A, "t-1", CONFIG, actor="console"))
    with pytest.raises(RulesNotApproved):
        asyncio.run(shuffle(dealer, "t-1", OTHER))


def test_stakes_and_seats_are_held_to_the_tables_limits(store: Store) -> None:
    dealer, catalogue = Dealer(store), Catalogue(store)
    asyncio.run(catalogue.add_table(A, "t-1", CONFIG, actor="console"))
    view = asyncio.run(shuffle(dealer))
    bad = {
        "below the least": [SeatRequest(1, "p", 99)],
        "above the most": [SeatRequest(1, "p", 5_001)],
        "too many seats": [SeatRequest(n, f"p{n}", 100) for n in range(1, 5)],
    }
    for seats in bad.values():
        with pytest.raises(InvalidRequest):
            asyncio.run(deal(dealer, view, seats))
    dealt = asyncio.run(deal(dealer, view, [SeatRequest(1, "p", 100), SeatRequest(2, "q", 5_000)]))
    assert [seat.stake for seat in dealt.record.seats] == [100, 5_000]


def test_an_open_round_keeps_the_version_it_was_shuffled_under(store: Store) -> None:
    dealer, catalogue = Dealer(store), Catalogue(store)

    async def scenario() -> RoundView:
        await catalogue.add_table(A, "t-1", CONFIG, actor="console")
        view = await shuffle(dealer)
        # Raised after the shuffle: the open round is still held to version 1's 5,000.
        changed = await catalogue.change_table(
            A, "t-1", lambda c: with_changes(c, max_stake=9_000), actor="console"
        )
        assert changed.version == 2
        with pytest.raises(InvalidRequest):
            await deal(dealer, view, [SeatRequest(1, "p", 9_000)])
        return await deal(dealer, view, [SeatRequest(1, "p", 5_000)])

    assert asyncio.run(scenario()).record.table_version == 1


@pytest.mark.parametrize("what", ["table", "operator", "gaming"])
def test_disabling_stops_new_rounds_and_open_ones_complete(store: Store, what: str) -> None:
    dealer, catalogue = Dealer(store), Catalogue(store)

    async def switch(enabled: bool) -> None:
        if what == "table":
            await catalogue.change_table(
                A, "t-1", lambda c: with_changes(c, enabled=enabled), actor="console"
            )
        elif what == "operator":
            await catalogue.set_operator(
                A, lambda c: OperatorConfig(enabled, c.rtp_band), actor="console"
            )
        else:
            await catalogue.set_gaming(enabled, actor="console")

    async def scenario() -> None:
        await catalogue.add_table(A, "t-1", CONFIG, actor="console")
        await catalogue.add_table(A, "t-2", CONFIG, actor="console")
        open_round = await shuffle(dealer, "t-2")
        await switch(False)
        with pytest.raises(TableDisabled) as refused:
            await shuffle(dealer, "t-1")
        assert refused.value.what == what
        dealt = await deal(dealer, open_round, [SeatRequest(1, "p", 100)])
        round_id = dealt.record.round_id
        await dealer.reveal(round_id, fresh(), operator=A, actor=ACTOR)
        settled = await dealer.settle(round_id, fresh(), operator=A, actor=ACTOR)
        assert str(settled.record.state) == "SETTLED"
        await switch(True)
        await shuffle(dealer, "t-1")

    asyncio.run(scenario())


def test_every_change_is_a_signed_entry_naming_its_actor_and_the_round_names_its_table(
    store: Store,
) -> None:
    dealer, catalogue = Dealer(store), Catalogue(store)

    async def scenario() -> RoundView:
        await catalogue.add_table(A, "t-1", CONFIG, actor="console")
        await catalogue.change_table(
            A, "t-1", lambda c: with_changes(c, enabled=False), actor="token:admin"
        )
        await catalogue.change_table(
            A, "t-1", lambda c: with_changes(c, enabled=True), actor="console"
        )
        await catalogue.set_operator(
            A, lambda c: OperatorConfig(True, RtpBand(Fraction(1, 2), Fraction(1))), actor="console"
        )
        await catalogue.set_gaming(False, actor="service")
        await catalogue.set_gaming(True, actor="service")
        return await shuffle(dealer)

    view = asyncio.run(scenario())
    tables = kinds_of(store, EntryKind.TABLE_CHANGED)
    assert [(t["actor"], t["operator"], t["table_id"], t["version"]) for t in tables] == [
        ("console", A, "t-1", 1),
        ("token:admin", A, "t-1", 2),
        ("console", A, "t-1", 3),
    ]
    assert [t["config"]["enabled"] for t in tables] == [True, False, True]
    assert tables[0]["config"]["currency"] == {"code": "EUR", "exponent": 2}
    assert tables[0]["config"]["min_stake"] == 100
    operators = kinds_of(store, EntryKind.OPERATOR_CHANGED)
    assert operators == [
        {
            "actor": "console",
            "operator": A,
            "config": {"enabled": True, "rtp_band": {"low": "1/2", "high": "1/1"}},
        }
    ]
    assert kinds_of(store, EntryKind.GAMING_CHANGED) == [
        {"actor": "service", "enabled": False},
        {"actor": "service", "enabled": True},
    ]
    committed = payload_of(store, view.record.log_indices[0])
    assert committed["kind"] is EntryKind.ROUND_COMMITTED
    assert committed["table_version"] == 3
    assert committed["currency"] == {"code": "EUR", "exponent": 2}


def test_a_rule_set_outside_the_operators_rtp_band_cannot_be_approved(store: Store) -> None:
    catalogue = Catalogue(store)
    rtp = ReturnToPlayer.of_rules(APPROVED).rtp
    just_above = RtpBand(rtp + Fraction(1, 10**9), Fraction(2))
    asyncio.run(
        catalogue.set_operator(A, lambda c: OperatorConfig(True, just_above), actor="console")
    )
    with pytest.raises(RtpOutsideBand, match="outside its operator's RTP band"):
        asyncio.run(catalogue.add_table(A, "t-1", CONFIG, actor="console"))
    # Its exact figure is inside a band that starts at it: approved.
    at_it = RtpBand(rtp, Fraction(2))
    asyncio.run(catalogue.set_operator(A, lambda c: OperatorConfig(True, at_it), actor="console"))
    asyncio.run(catalogue.add_table(A, "t-1", CONFIG, actor="console"))
    # A band that the approved rule set falls outside is refused, and nothing changes.
    with pytest.raises(RtpOutsideBand):
        asyncio.run(
            catalogue.set_operator(A, lambda c: OperatorConfig(True, just_above), actor="console")
        )
    bands = [p["config"]["rtp_band"]["low"] for p in kinds_of(store, EntryKind.OPERATOR_CHANGED)]
    assert bands == [
        f"{(rtp + Fraction(1, 10**9)).numerator}/{(rtp + Fraction(1, 10**9)).denominator}",
        f"{rtp.numerator}/{rtp.denominator}",
    ]


def test_a_table_is_its_operators_own(store: Store) -> None:
    catalogue = Catalogue(store)
    asyncio.run(catalogue.add_table(A, "t-1", CONFIG, actor="console"))
    with pytest.raises(CatalogueError, match="already has"):
        asyncio.run(catalogue.add_table(A, "t-1", CONFIG, actor="console"))
    asyncio.run(catalogue.add_table(B, "t-1", CONFIG, actor="console"))
    assert [(e.operator, e.table_id) for e in asyncio.run(catalogue.tables(None))] == [
        (A, "t-1"),
        (B, "t-1"),
    ]
    assert [e.operator for e in asyncio.run(catalogue.tables(B))] == [B]
    with pytest.raises(TableNotFound):
        asyncio.run(
            catalogue.change_table(B, "t-2", lambda c: with_changes(c, enabled=False), actor="x")
        )


@pytest.mark.parametrize(
    ("code", "exponent"), [("EUR", 2), ("JPY", 0), ("BHD", 3), ("CLF", 4), ("XXX", 0)]
)
def test_currencies_carry_iso_4217s_exponent(code: str, exponent: int) -> None:
    assert Currency.of(code) == Currency(code, exponent)


@pytest.mark.parametrize("code", ["eur", "EURO", "ZZZ", ""])
def test_a_code_that_is_not_iso_4217_is_refused(code: str) -> None:
    with pytest.raises(ValueError, match="not an ISO 4217 code"):
        Currency.of(code)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(
    rule_sets=st.lists(st.sampled_from(every_rule_set()), min_size=1, max_size=8),
    stakes=st.tuples(st.integers(1, 10**12), st.integers(0, 10**6)),
    seats=st.integers(1, 82),
    deal_seconds=st.none() | st.integers(1, 7 * 24 * 3600),
    enabled=st.booleans(),
)
def test_a_configuration_reads_back_as_written(
    rule_sets: list[HouseRules],
    stakes: tuple[int, int],
    seats: int,
    deal_seconds: int | None,
    enabled: bool,
) -> None:
    low, spread = stakes
    config = TableConfig(
        EUR,
        tuple(rule_sets),
        min_stake=low,
        max_stake=min(low + spread, 5_492_194_667_524),
        max_seats=seats,
        deal_seconds=deal_seconds,
        enabled=enabled,
    )
    assert TableConfig.from_json(config.to_json()) == config
    assert set(config.rule_sets) == set(rule_sets)
    assert all(config.approves(rules) for rules in rule_sets)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"rule_sets": ()}, "a table approves 1 to 64 rule sets, not 0"),
        ({"rule_sets": every_rule_set()[:65]}, "a table approves 1 to 64 rule sets, not 65"),
        ({"min_stake": 6_000}, "min_stake must be 1 to max_stake"),
        ({"max_stake": 5_492_194_667_525}, "max_stake must be 1 to 5,492,194,667,524"),
        ({"max_seats": 83}, "max_seats must be 1 to 82"),
        ({"settle_seconds": 0}, "settle_seconds must be 1 to 604800"),
    ],
)
def test_a_configuration_out_of_bounds_is_refused(changes: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {
        "currency": EUR,
        "rule_sets": (APPROVED, HouseRules(payout=PayoutTable.MULTIPLIER)),
        "min_stake": 100,
        "max_stake": 5_000,
    }
    with pytest.raises(CatalogueError, match=message):
        TableConfig(**(fields | changes))
