"""The disclosed return to player: GetHouseRulesInfo, the figures every new round carries (its
answer, its record, its ROUND_COMMITTED entry and so its receipt), and the cache and bound
behind them."""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from fractions import Fraction

import grpc
import pytest
from gnau.v1 import dealer_pb2, types_pb2
from gnau_client import AsyncGnauClient, GnauClient
from google.rpc import error_details_pb2, status_pb2

from gnau_service.audit.entries import EntryKind, decode_entry
from gnau_service.audit.receipts import Receipt, verify_receipt
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.par import par_sheet
from gnau_service.rules.return_to_player import ReturnToPlayer, fraction_text
from gnau_service.server.disclosure import Disclosures
from gnau_service.server.errors import TooManyRuleSets, reason_of, status_of
from tests.server.conftest import Service
from tests.server.test_service import details, play, refusal, shuffle


async def rules_info(service: Service, **rules: object) -> dealer_pb2.GetHouseRulesInfoResponse:
    request = dealer_pb2.GetHouseRulesInfoRequest(house_rules=types_pb2.HouseRules(**rules))
    return await service.call("dealer", "GetHouseRulesInfo", request, role=None)  # public


async def test_the_figures_of_a_rule_set_are_its_par_sheets(service: Service) -> None:
    answer = await rules_info(service)
    sheet = par_sheet(HouseRules())
    figures = answer.return_to_player
    assert figures.rtp == fraction_text(sheet.rtp)
    assert figures.house_edge == fraction_text(sheet.house_edge)
    # The default rules' figures, as docs/par/ publishes them.
    assert (figures.rtp_decimal, figures.house_edge_decimal) == ("0.948173", "0.051827")
    assert Fraction(figures.rtp) + Fraction(figures.house_edge) == 1
    assert answer.house_rules.decks == 1 and answer.house_rules.tie == types_pb2.TIE_RULE_DEALER

    push = await rules_info(service, tie=types_pb2.TIE_RULE_PUSH, decks=2)
    assert push.return_to_player.rtp == fraction_text(
        par_sheet(HouseRules.from_mapping({"tie": "push", "decks": 2})).rtp
    )
    assert push.house_rules.tie == types_pb2.TIE_RULE_PUSH and push.house_rules.decks == 2


async def test_the_python_clients_ask_for_the_figures(service: Service) -> None:
    expected = fraction_text(par_sheet(HouseRules(five_small=False)).rtp)
    async with AsyncGnauClient.from_channel(service.channel) as client:
        answer = await client.house_rules_info(types_pb2.HouseRules(five_small=False))
    assert answer.return_to_player.rtp == expected
    assert not answer.house_rules.five_small
    target = f"127.0.0.1:{service.app.port}"

    def blocking() -> dealer_pb2.GetHouseRulesInfoResponse:
        with GnauClient(target) as client:
            return client.house_rules_info(types_pb2.HouseRules(five_small=False))

    assert (await asyncio.to_thread(blocking)).return_to_player.rtp == expected


async def test_invalid_rules_are_refused_by_field(service: Service) -> None:
    error = await refusal(rules_info(service, decks=9))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details(error) == (["house_rules.decks"], "INVALID_ARGUMENT")
    error = await refusal(rules_info(service, tie=7))
    assert details(error) == (["house_rules.tie"], "INVALID_ARGUMENT")


async def test_a_round_carries_the_figures_into_its_log_and_receipt(service: Service) -> None:
    disclosed = (await rules_info(service)).return_to_player
    shuffled = await shuffle(service, "table-rtp")
    assert shuffled.return_to_player == disclosed
    settled = await play(service, "table-rtp-2")
    assert settled.return_to_player == disclosed

    first = settled.log_indices[0]
    data = await asyncio.to_thread(service.app.store.entries, first, first + 1)
    entry = decode_entry(data[0], service.app.store.signer.verifier)
    assert entry.kind is EntryKind.ROUND_COMMITTED
    assert entry.payload["return_to_player"] == {
        "rtp": disclosed.rtp,
        "house_edge": disclosed.house_edge,
        "rtp_decimal": disclosed.rtp_decimal,
        "house_edge_decimal": disclosed.house_edge_decimal,
    }

    answer = await service.call(
        "dealer",
        "GetRoundReceipt",
        dealer_pb2.GetRoundReceiptRequest(round_id=settled.round_id),
        role=None,
    )
    document = json.loads(answer.receipt)
    report = verify_receipt(
        Receipt.from_json(copy.deepcopy(document)), [service.app.store.signer.verifier]
    )
    assert report.ok, report.summary()
    assert report.return_to_player == ReturnToPlayer(Fraction(disclosed.rtp))
    assert "disclosed return to player 0.948173" in report.summary()

    fetched = await service.call(
        "dealer", "GetRound", dealer_pb2.GetRoundRequest(round_id=settled.round_id)
    )
    assert fetched.round.return_to_player == disclosed


# -- the cache and its bound, on their own ------------------------------------------------------


class SlowFigures:
    """A stand-in computation that waits until released and counts its calls, so the test
    controls when a rule set is done."""

    def __init__(self) -> None:
        self.calls: list[HouseRules] = []
        self.release = threading.Event()

    def __call__(self, rules: HouseRules) -> ReturnToPlayer:
        self.calls.append(rules)
        assert self.release.wait(10)
        return ReturnToPlayer(Fraction(rules.decks, 10))


async def test_each_rule_set_is_computed_once_off_the_event_loop() -> None:
    compute = SlowFigures()
    disclosures = Disclosures(compute=compute, max_pending=2)
    rules = HouseRules(decks=3)
    waiting = [asyncio.create_task(disclosures.figures(rules)) for _ in range(5)]
    # The loop runs on while the computation waits in its thread.
    await asyncio.sleep(0.05)
    assert not any(task.done() for task in waiting)
    compute.release.set()
    assert {await task for task in waiting} == {ReturnToPlayer(Fraction(3, 10))}
    assert await disclosures.figures(rules) == ReturnToPlayer(Fraction(3, 10))
    assert compute.calls == [rules]


async def test_too_many_rule_sets_at_once_are_refused_but_a_shuffle_waits() -> None:
    compute = SlowFigures()
    disclosures = Disclosures(compute=compute, max_pending=2)
    first = asyncio.create_task(disclosures.figures(HouseRules(decks=1)))
    second = asyncio.create_task(disclosures.figures(HouseRules(decks=2)))
    await asyncio.sleep(0)
    with pytest.raises(TooManyRuleSets):
        await disclosures.figures(HouseRules(decks=3))
    # A rule set already under way is waited for, not refused.
    again = asyncio.create_task(disclosures.figures(HouseRules(decks=2)))
    shuffle_waits = asyncio.create_task(disclosures.figures(HouseRules(decks=4), refuse=False))
    await asyncio.sleep(0)
    compute.release.set()
    answers = await asyncio.gather(first, second, again, shuffle_waits)
    assert [figures.rtp for figures in answers] == [Fraction(n, 10) for n in (1, 2, 2, 4)]
    # With the queue drained, the refused rule set is computed on asking again.
    assert (await disclosures.figures(HouseRules(decks=3))).rtp == Fraction(3, 10)


async def test_warming_computes_a_rule_set_before_anyone_asks_and_only_once() -> None:
    compute = SlowFigures()
    disclosures = Disclosures(compute=compute, max_pending=1)
    rules = HouseRules(decks=2)
    disclosures.warm(rules)
    disclosures.warm(rules)  # already under way: not started twice
    await asyncio.sleep(0.05)
    assert compute.calls == [rules]  # started with no caller waiting
    # The warming counts against the bound like any other computation.
    with pytest.raises(TooManyRuleSets):
        await disclosures.figures(HouseRules(decks=5))
    asked = asyncio.create_task(disclosures.figures(rules))  # joins the warming
    compute.release.set()
    assert (await asked).rtp == Fraction(2, 10)
    disclosures.warm(rules)  # known: nothing to do
    assert compute.calls == [rules]


def test_the_refusal_is_resource_exhausted_with_a_quota_failure() -> None:
    status = status_of(TooManyRuleSets(4))
    assert status.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert reason_of(status) == "TOO_MANY_RULE_SETS"
    (details_bin,) = [v for k, v in status.trailing_metadata if k == "grpc-status-details-bin"]
    kinds = [detail.TypeName() for detail in status_pb2.Status.FromString(details_bin).details]
    assert error_details_pb2.QuotaFailure.DESCRIPTOR.full_name in kinds


@pytest.mark.parametrize(
    ("rules", "largest"),
    [({}, 10), ({"suited_double": True}, 20), ({"payout": types_pb2.PAYOUT_TABLE_MULTIPLIER}, 7)],
)
async def test_the_largest_payout_is_what_a_wallet_reserves(
    service: Service, rules: dict[str, object], largest: int
) -> None:
    # docs/rules.md's payout tables: points tops at 10, multiplier at 7; suited_double doubles.
    assert (await rules_info(service, **rules)).largest_payout == largest
