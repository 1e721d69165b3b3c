"""The disclosed return to player: GetHouseRulesInfo, the figures every new round carries (its
answer, its record, its ROUND_COMMITTED entry and so its receipt), looked up in the shipped table
and never computed while serving, so that a Shuffle's cheap checks are all it costs to refuse."""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from fractions import Fraction

import grpc
import pytest
from gnau.v1 import dealer_pb2, types_pb2
from gnau_client import AsyncGnauClient, GnauClient

from gnau_service.audit.entries import EntryKind, decode_entry
from gnau_service.audit.receipts import Receipt, verify_receipt
from gnau_service.rules import par
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.par import par_sheet
from gnau_service.rules.return_to_player import ReturnToPlayer, fraction_text
from gnau_service.server.grpc.convert import house_rules_to_proto
from tests.rules.test_rtp_table import published_rtp
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


# -- looked up, never computed, and after the cheap checks -----------------------------------------

#: Rule sets no call of this process has used before, each with a sheet published in docs/par/:
#: before the table, a Shuffle under each computed its PAR sheet (seconds) before any check.
UNSEEN = [
    HouseRules.from_assignments(assignments)
    for assignments in (
        ["ten_is_duke=true"],
        ["three_six_pair=true"],
        ["trips_make_ox=false"],
        ["five_small=false"],
        ["tie=high_card"],
        ["payout=multiplier"],
        ["suited_double=true"],
        ["decks=8"],
    )
]
#: The tables these tests deal at, catalogued by the service fixture (tests/catalogued.py), each
#: approving the default rules and every :data:`UNSEEN` rule set (issue 38).
CATALOGUED = ("table-rtp", "table-rtp-2", "t-busy", *(f"t-unseen-{n}" for n in range(len(UNSEEN))))
APPROVED_RULES = (HouseRules(), *UNSEEN)


@pytest.fixture
def sheets_computed(monkeypatch: pytest.MonkeyPatch) -> list[HouseRules]:
    """The rule sets whose PAR sheet anything in this process computes from now on, each also
    refused with an error: serving needs none, only the shipped table."""
    computed: list[HouseRules] = []

    def refuse(rules: HouseRules, seats: int) -> par.ParSheet:
        computed.append(rules)
        raise AssertionError(f"a PAR sheet was computed while serving ({rules})")

    monkeypatch.setattr(par, "_par_sheet", refuse)
    return computed


def shuffle_request(
    table_id: str, rules: HouseRules, request_id: str | None = None
) -> dealer_pb2.ShuffleRequest:
    return dealer_pb2.ShuffleRequest(
        request_id=request_id or str(uuid.uuid4()),
        table_id=table_id,
        house_rules=house_rules_to_proto(rules),
    )


async def test_a_refused_shuffle_under_unseen_rules_computes_nothing(
    service: Service, sheets_computed: list[HouseRules]
) -> None:
    rules = UNSEEN[0]
    bad_table = await refusal(service.call("dealer", "Shuffle", shuffle_request(" t", rules)))
    assert bad_table.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details(bad_table) == (["table_id"], "INVALID_ARGUMENT")
    bad_request_id = await refusal(
        service.call("dealer", "Shuffle", shuffle_request("t-1", rules, request_id="\t"))
    )
    assert details(bad_request_id) == (["request_id"], "INVALID_ARGUMENT")
    public = await refusal(service.call("dealer", "Shuffle", shuffle_request("t-1", rules), None))
    assert public.code() == grpc.StatusCode.PERMISSION_DENIED
    # A busy table: its round is open, under the default rules; the next is refused.
    await shuffle(service, "t-busy")
    busy = await refusal(service.call("dealer", "Shuffle", shuffle_request("t-busy", rules)))
    assert busy.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert details(busy)[1] == "TABLE_BUSY"
    assert sheets_computed == []


async def test_shuffles_under_many_unseen_rule_sets_at_once_disclose_the_published_figures(
    service: Service, sheets_computed: list[HouseRules]
) -> None:
    answers = await asyncio.gather(
        *(
            service.call("dealer", "Shuffle", shuffle_request(f"t-unseen-{n}", rules))
            for n, rules in enumerate(UNSEEN)
        )
    )
    published = published_rtp()
    disclosed = [Fraction(answer.round.return_to_player.rtp) for answer in answers]
    assert disclosed == [published[rules] for rules in UNSEEN]
    info = await asyncio.gather(
        *(
            service.call(
                "dealer",
                "GetHouseRulesInfo",
                dealer_pb2.GetHouseRulesInfoRequest(house_rules=house_rules_to_proto(rules)),
                role=None,
            )
            for rules in UNSEEN
        )
    )
    assert [Fraction(answer.return_to_player.rtp) for answer in info] == disclosed
    assert sheets_computed == []


@pytest.mark.parametrize(
    ("rules", "largest"),
    [({}, 10), ({"suited_double": True}, 20), ({"payout": types_pb2.PAYOUT_TABLE_MULTIPLIER}, 7)],
)
async def test_the_largest_payout_is_what_a_wallet_reserves(
    service: Service, rules: dict[str, object], largest: int
) -> None:
    # docs/rules.md's payout tables: points tops at 10, multiplier at 7; suited_double doubles.
    assert (await rules_info(service, **rules)).largest_payout == largest
