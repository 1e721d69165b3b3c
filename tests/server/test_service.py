"""The dealer service over real gRPC: every RPC, every refusal, every role, retries, parallel
tables, restarts, health, and what the logs may never contain."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import grpc
import pytest
from gnau.v1 import audit_pb2, dealer_pb2, round_pb2, types_pb2
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from gnau_service.audit.checkpoint import open_checkpoint
from gnau_service.audit.merkle import leaf_hash, verify_consistency, verify_inclusion
from gnau_service.audit.note import Verifier
from gnau_service.fairness.verifier import verify_revealed_round
from gnau_service.rules.house_rules import HouseRules, TieRule
from gnau_service.server.grpc.convert import revealed_round_from_proto
from gnau_service.server.process.app import running
from tests.audit.logs import chain_failure
from tests.catalogued import catalogue, table_config
from tests.server.conftest import TOKENS, Service

SEATS = [
    round_pb2.Seat(seat_number=1, player_id="alice", stake=100, client_seed=b"alice's luck"),
    round_pb2.Seat(seat_number=2, player_id="bob", stake=250),
    round_pb2.Seat(seat_number=5, player_id="carol", stake=7),
]
#: The tables this module's tests deal at, each in the default operator's catalogue (issue 38)
#: with any stake and seat count, approving the rule sets the tests shuffle under.
TABLES = (
    "table-1",
    "table-pages",
    "table-busy",
    "table-free",
    "table-race",
    "table-retry",
    "t-a",
    "t-b",
    "table-roles",
    "table-restart",
    *(f"parallel-{n}" for n in range(8)),
)
RULE_SETS = (HouseRules(), HouseRules(ten_is_duke=True, tie=TieRule.PUSH))


#: Catalogued by the service fixtures (tests/catalogued.py, catalogue_module_tables).
CATALOGUED = TABLES
APPROVED_RULES = RULE_SETS


def rid() -> str:
    return str(uuid.uuid4())


async def shuffle(service: Service, table: str = "table-1", **rules: object) -> round_pb2.Round:
    request = dealer_pb2.ShuffleRequest(
        request_id=rid(), table_id=table, house_rules=types_pb2.HouseRules(**rules)
    )
    return (await service.call("dealer", "Shuffle", request)).round


async def deal(service: Service, round_id: str) -> round_pb2.Round:
    request = dealer_pb2.DealRequest(request_id=rid(), round_id=round_id, seats=SEATS)
    return (await service.call("dealer", "Deal", request)).round


async def void(service: Service, round_id: str, reason: str = "voided by a test") -> None:
    request = dealer_pb2.VoidRoundRequest(
        reason_code=round_pb2.VOID_REASON_PLATFORM_FAILURE,
        request_id=rid(),
        round_id=round_id,
        reason=reason,
    )
    await service.call("dealer", "VoidRound", request)


async def play(service: Service, table: str = "table-1") -> round_pb2.Round:
    round_ = await shuffle(service, table)
    await service.call(
        "dealer",
        "Deal",
        dealer_pb2.DealRequest(request_id=rid(), round_id=round_.round_id, seats=SEATS),
    )
    await service.call(
        "dealer", "Reveal", dealer_pb2.RevealRequest(request_id=rid(), round_id=round_.round_id)
    )
    settled = await service.call(
        "dealer", "Settle", dealer_pb2.SettleRequest(request_id=rid(), round_id=round_.round_id)
    )
    return settled.round


async def refusal(call: object) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call  # type: ignore[misc]
    return caught.value


def details(error: grpc.aio.AioRpcError) -> tuple[list[str], str]:
    """The BadRequest field paths and the ErrorInfo reason carried by a refusal."""
    status = rpc_status.from_call(error)
    assert status is not None, "the refusal carries no google.rpc.Status"
    fields, reason = [], ""
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            fields += [violation.field for violation in bad.field_violations]
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reason = info.reason
    return fields, reason


async def log_size(service: Service) -> int:
    return await asyncio.to_thread(service.app.store.size)


# -- the round, end to end --------------------------------------------------------------------


async def test_a_full_round_moves_through_every_state(service: Service) -> None:
    shuffled = await shuffle(service, ten_is_duke=True, tie=types_pb2.TIE_RULE_PUSH)
    assert shuffled.state == round_pb2.ROUND_STATE_SHUFFLED
    assert len(shuffled.commitment) == 64
    assert shuffled.log_key_id == service.app.store.signer.key_id.hex()
    assert shuffled.house_rules.ten_is_duke and shuffled.house_rules.tie == types_pb2.TIE_RULE_PUSH
    assert (shuffled.server_seed, list(shuffled.hands), list(shuffled.deck)) == ("", [], [])

    beacon = round_pb2.Beacon(label="drand/quicknet/123", value=bytes(range(32)))
    deal = dealer_pb2.DealRequest(
        request_id=rid(), round_id=shuffled.round_id, seats=SEATS, beacon=beacon
    )
    dealt = (await service.call("dealer", "Deal", deal)).round
    assert dealt.state == round_pb2.ROUND_STATE_DEALT
    assert [hand.seat_number for hand in dealt.hands] == [1, 2, 5]
    assert all(len(hand.cards) == 5 for hand in dealt.hands) and len(dealt.dealer_hand) == 5
    assert dealt.server_seed == "" and list(dealt.deck) == [], "the seed is secret until Reveal"
    assert dealt.beacon.label == beacon.label

    revealed = (await service.call("dealer", "Reveal", dealer_pb2.RevealRequest(
        request_id=rid(), round_id=shuffled.round_id))).round  # fmt: skip
    assert revealed.state == round_pb2.ROUND_STATE_REVEALED
    assert len(revealed.server_seed) == 64 and len(revealed.deck) == 52
    assert verify_revealed_round(revealed_round_from_proto(revealed)).ok

    settled = (await service.call("dealer", "Settle", dealer_pb2.SettleRequest(
        request_id=rid(), round_id=shuffled.round_id))).round  # fmt: skip
    assert settled.state == round_pb2.ROUND_STATE_SETTLED
    settlement = settled.settlement
    assert [r.seat_number for r in settlement.seat_results] == [1, 2, 5]
    assert sum(r.delta for r in settlement.seat_results) + settlement.dealer_delta == 0
    assert len(settled.log_indices) == 4

    fetched = (
        await service.call(
            "dealer", "GetRound", dealer_pb2.GetRoundRequest(round_id=shuffled.round_id)
        )
    ).round
    assert fetched == settled


async def test_list_rounds_pages_newest_first(service: Service) -> None:
    played = [await play(service, "table-pages") for _ in range(5)]
    seen: list[str] = []
    token = ""
    while True:
        page = await service.call("dealer", "ListRounds", dealer_pb2.ListRoundsRequest(
            table_id="table-pages", page_size=2, page_token=token), role="auditor")  # fmt: skip
        seen += [round_.round_id for round_ in page.rounds]
        token = page.next_page_token
        if not token:
            break
    assert sorted(seen) == sorted(r.round_id for r in played) and len(seen) == 5
    other = await service.call(
        "dealer", "ListRounds", dealer_pb2.ListRoundsRequest(table_id="nobody"), role="auditor"
    )
    assert list(other.rounds) == []


async def test_evaluate_hand_needs_no_round(service: Service) -> None:
    answer = await service.call("dealer", "EvaluateHand", dealer_pb2.EvaluateHandRequest(
        cards=["3C", "6S", "8H", "4H", "8C"]), role=None)  # fmt: skip
    evaluation = answer.evaluation
    assert evaluation.category == types_pb2.HAND_CATEGORY_DOUBLE_OX and evaluation.value == 8
    assert evaluation.description == "Double-Ox 8  ox 3C(3) 6S(3) 4H  power 8H 8C"


# -- refusals -------------------------------------------------------------------------------------


async def test_out_of_order_calls_name_the_current_state(service: Service) -> None:
    round_ = await shuffle(service)
    before = await log_size(service)
    error = await refusal(
        service.call(
            "dealer", "Settle", dealer_pb2.SettleRequest(request_id=rid(), round_id=round_.round_id)
        )
    )
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "is SHUFFLED; Settle is not allowed" in str(error.details())
    assert details(error)[1] == "ROUND_STATE"
    assert await log_size(service) == before, "a refused request logs nothing"


async def test_unknown_rounds_are_not_found(service: Service) -> None:
    for method, request in [
        ("Deal", dealer_pb2.DealRequest(request_id=rid(), round_id="r-nope", seats=SEATS)),
        ("Reveal", dealer_pb2.RevealRequest(request_id=rid(), round_id="r-nope")),
        ("GetRound", dealer_pb2.GetRoundRequest(round_id="r-nope")),
    ]:
        error = await refusal(service.call("dealer", method, request))
        assert error.code() == grpc.StatusCode.NOT_FOUND, method
        assert "r-nope" in str(error.details())


async def test_one_unfinished_round_per_table(service: Service) -> None:
    first = await shuffle(service, "table-busy")
    error = await refusal(shuffle(service, "table-busy"))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert first.round_id in str(error.details()) and details(error)[1] == "TABLE_BUSY"
    await shuffle(service, "table-free")  # other tables are not affected


async def test_a_round_is_dealt_only_as_its_table_s_catalogue_entry_allows(
    service: Service,
) -> None:
    before = await log_size(service)
    error = await refusal(shuffle(service, "table-uncatalogued"))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert details(error)[1] == "TABLE_NOT_FOUND"
    error = await refusal(shuffle(service, "table-1", decks=2))  # not among RULE_SETS
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert details(error)[1] == "RULES_NOT_APPROVED"
    assert await log_size(service) == before, "a refused Shuffle logs nothing"
    limited = table_config(min_stake=10, max_stake=1_000, max_seats=2)
    await catalogue(service.app.store, ["table-limited"], config=limited)
    round_ = await shuffle(service, "table-limited")
    before = await log_size(service)
    for seats, fields in (
        (SEATS, ["seats", "seats[2].stake"]),  # three seats, one staking 7
        ([round_pb2.Seat(seat_number=1, player_id="a", stake=1_001)], ["seats[0].stake"]),
    ):
        request = dealer_pb2.DealRequest(request_id=rid(), round_id=round_.round_id, seats=seats)
        error = await refusal(service.call("dealer", "Deal", request))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (sorted(details(error)[0]), details(error)[1]) == (fields, "INVALID_ARGUMENT")
    assert await log_size(service) == before, "a refused Deal logs nothing"
    at_limits = [
        round_pb2.Seat(seat_number=1, player_id="a", stake=10),
        round_pb2.Seat(seat_number=2, player_id="b", stake=1_000),
    ]
    request = dealer_pb2.DealRequest(request_id=rid(), round_id=round_.round_id, seats=at_limits)
    dealt = (await service.call("dealer", "Deal", request)).round
    assert dealt.state == round_pb2.ROUND_STATE_DEALT


async def test_racing_calls_on_one_round_or_table_have_one_winner(service: Service) -> None:
    # Sent together, they land in one batch or a few: each unit must see what the units before
    # it did, so exactly one wins and the others are refused by name.
    outcomes = await asyncio.gather(
        *(shuffle(service, "table-race") for _ in range(6)), return_exceptions=True
    )
    winners = [o for o in outcomes if isinstance(o, round_pb2.Round)]
    assert len(winners) == 1
    losers = [o for o in outcomes if isinstance(o, grpc.aio.AioRpcError)]
    assert len(losers) == 5
    assert all(details(error)[1] == "TABLE_BUSY" for error in losers)
    seat = round_pb2.Seat(seat_number=1, player_id="alice", stake=10)
    deals = await asyncio.gather(
        *(
            service.call(
                "dealer",
                "Deal",
                dealer_pb2.DealRequest(
                    request_id=rid(), round_id=winners[0].round_id, seats=[seat]
                ),
            )
            for _ in range(6)
        ),
        return_exceptions=True,
    )
    dealt = [d for d in deals if isinstance(d, dealer_pb2.DealResponse)]
    assert len(dealt) == 1
    refused = [d for d in deals if isinstance(d, grpc.aio.AioRpcError)]
    assert [error.code() for error in refused] == [grpc.StatusCode.FAILED_PRECONDITION] * 5
    entries = await service.call(
        "audit", "VerifyRound", audit_pb2.VerifyRoundRequest(round_id=winners[0].round_id)
    )
    assert entries.ok and "2 signed entries" in entries.summary


@pytest.mark.parametrize(
    ("seats", "fields"),
    [
        ([], ["seats"]),
        ([round_pb2.Seat(seat_number=1, player_id="a", stake=5)] * 2, ["seats[1].seat_number"]),
        ([round_pb2.Seat(seat_number=0, player_id="a", stake=5)], ["seats[0].seat_number"]),
        ([round_pb2.Seat(seat_number=-7, player_id="a", stake=5)], ["seats[0].seat_number"]),
        ([round_pb2.Seat(seat_number=1, player_id="a", stake=0)], ["seats[0].stake"]),
        ([round_pb2.Seat(seat_number=1, player_id="a", stake=-3)], ["seats[0].stake"]),
        ([round_pb2.Seat(seat_number=1, player_id="a", stake=10**13)], ["seats[0].stake"]),
        ([round_pb2.Seat(seat_number=1, player_id="a", stake=5, client_seed=bytes(65))],
         ["seats[0].client_seed"]),
        ([round_pb2.Seat(seat_number=1, player_id="", stake=5)], ["seats[0].player_id"]),
        ([round_pb2.Seat(seat_number=n, player_id="p", stake=1) for n in range(1, 11)],
         ["seats"]),
    ],
    ids=["no seats", "repeated seat", "seat zero", "negative seat", "zero stake", "negative stake",
         "stake too large", "client seed too long", "no player id", "too many seats"],
)  # fmt: skip
async def test_bad_seats_are_refused_field_by_field(
    service: Service, seats: Sequence[round_pb2.Seat], fields: list[str]
) -> None:
    round_ = await shuffle(service)
    before = await log_size(service)
    error = await refusal(
        service.call(
            "dealer",
            "Deal",
            dealer_pb2.DealRequest(request_id=rid(), round_id=round_.round_id, seats=seats),
        )
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details(error) == (fields, "INVALID_ARGUMENT")
    assert await log_size(service) == before
    state = (
        await service.call(
            "dealer", "GetRound", dealer_pb2.GetRoundRequest(round_id=round_.round_id)
        )
    ).round.state
    assert state == round_pb2.ROUND_STATE_SHUFFLED


@pytest.mark.parametrize(
    ("rules", "field"),
    [
        (types_pb2.HouseRules(tie=42), "house_rules.tie"),  # type: ignore[arg-type]
        (types_pb2.HouseRules(payout=9), "house_rules.payout"),  # type: ignore[arg-type]
        (types_pb2.HouseRules(decks=0), "house_rules.decks"),
        (types_pb2.HouseRules(decks=9), "house_rules.decks"),
    ],
)
async def test_bad_house_rules_are_refused(
    service: Service, rules: types_pb2.HouseRules, field: str
) -> None:
    error = await refusal(
        service.call(
            "dealer",
            "Shuffle",
            dealer_pb2.ShuffleRequest(request_id=rid(), table_id="t", house_rules=rules),
        )
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details(error)[0] == [field]


async def test_request_ids_and_table_ids_are_checked(service: Service) -> None:
    for request, field in [
        (dealer_pb2.ShuffleRequest(table_id="t"), "request_id"),
        (dealer_pb2.ShuffleRequest(request_id="x" * 37, table_id="t"), "request_id"),
        (dealer_pb2.ShuffleRequest(request_id=rid(), table_id=""), "table_id"),
        (dealer_pb2.ShuffleRequest(request_id=rid(), table_id="t" * 129), "table_id"),
        (dealer_pb2.ShuffleRequest(request_id=rid(), table_id="é" * 65), "table_id"),
        (dealer_pb2.ShuffleRequest(request_id=rid(), table_id="t\n1"), "table_id"),
        (dealer_pb2.ShuffleRequest(request_id=rid(), table_id=" t"), "table_id"),
    ]:
        error = await refusal(service.call("dealer", "Shuffle", request))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert details(error)[0] == [field]


async def test_bad_cards_and_void_reasons_are_refused(service: Service) -> None:
    error = await refusal(
        service.call(
            "dealer",
            "EvaluateHand",
            dealer_pb2.EvaluateHandRequest(cards=["AS", "ZZ", "2C", "3C", "4C"]),
        )
    )
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "'ZZ'" in str(error.details())
    round_ = await shuffle(service)
    error = await refusal(
        service.call(
            "dealer",
            "VoidRound",
            dealer_pb2.VoidRoundRequest(
                reason_code=round_pb2.VOID_REASON_PLATFORM_FAILURE,
                request_id=rid(),
                round_id=round_.round_id,
                reason="line\nbreak",
            ),
        )
    )
    assert details(error)[0] == ["reason"]
    # A void names a reason code of the closed list; free text alone is refused, and so is the
    # service's own code, and a number the list does not hold.
    for code in (0, round_pb2.VOID_REASON_DEAL_DEADLINE_PASSED, 99):
        error = await refusal(
            service.call(
                "dealer",
                "VoidRound",
                dealer_pb2.VoidRoundRequest(
                    reason_code=code,  # type: ignore[arg-type]
                    request_id=rid(),
                    round_id=round_.round_id,
                    reason="free text alone",
                ),
            )
        )
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert details(error)[0] == ["reason_code"]
        assert "PLATFORM_FAILURE, STAKE_REJECTED" in str(error.details())


async def test_oversized_messages_are_refused(service: Service) -> None:
    huge = [round_pb2.Seat(seat_number=1, player_id="p" * 2_000_000, stake=1)]
    error = await refusal(
        service.call(
            "dealer", "Deal", dealer_pb2.DealRequest(request_id=rid(), round_id="r", seats=huge)
        )
    )
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


# -- idempotency ----------------------------------------------------------------------------------


async def test_a_retry_returns_the_original_answer_and_writes_nothing(service: Service) -> None:
    request = dealer_pb2.ShuffleRequest(request_id=rid(), table_id="table-retry")
    first = await service.call("dealer", "Shuffle", request)
    size = await log_size(service)
    again = await service.call("dealer", "Shuffle", request)
    assert again == first
    assert await log_size(service) == size
    deal = dealer_pb2.DealRequest(request_id=rid(), round_id=first.round.round_id, seats=SEATS)
    dealt = await service.call("dealer", "Deal", deal)
    size = await log_size(service)
    assert await service.call("dealer", "Deal", deal) == dealt, "never deals twice"
    assert await log_size(service) == size
    # Even after the round moved on, a late retry of the Shuffle gets the Shuffle's answer.
    assert (
        await service.call("dealer", "Shuffle", request)
    ).round.state == round_pb2.ROUND_STATE_SHUFFLED


async def test_a_request_id_reused_for_another_request_is_refused(service: Service) -> None:
    request_id = rid()
    await service.call(
        "dealer", "Shuffle", dealer_pb2.ShuffleRequest(request_id=request_id, table_id="t-a")
    )
    error = await refusal(
        service.call(
            "dealer", "Shuffle", dealer_pb2.ShuffleRequest(request_id=request_id, table_id="t-b")
        )
    )
    assert error.code() == grpc.StatusCode.ALREADY_EXISTS
    assert details(error)[1] == "REQUEST_ID_REUSED"


# -- roles ----------------------------------------------------------------------------------------


async def test_roles_decide_who_may_call_what(service: Service) -> None:
    for role in ("auditor", "public", None):
        error = await refusal(
            service.call(
                "dealer",
                "Shuffle",
                dealer_pb2.ShuffleRequest(request_id=rid(), table_id="t"),
                role=role,
            )
        )
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED, role
    settled = await play(service, "table-roles")
    open_round = await shuffle(service, "table-roles")
    for role in ("operator", "auditor"):
        await service.call(
            "dealer", "ListRounds", dealer_pb2.ListRoundsRequest(table_id="table-roles"), role=role
        )
        await service.call(
            "dealer",
            "GetRound",
            dealer_pb2.GetRoundRequest(round_id=open_round.round_id),
            role=role,
        )
    # The log's entries hold every operator's rounds: an auditor of every operator reads them,
    # an operator (of one operator) may not.
    entries = service.audit.GetEntries(
        audit_pb2.GetEntriesRequest(start=0),
        metadata=(("authorization", f"Bearer {TOKENS['auditor']}"),),
    )
    assert [message async for message in entries]
    refused = service.audit.GetEntries(
        audit_pb2.GetEntriesRequest(start=0),
        metadata=(("authorization", f"Bearer {TOKENS['operator']}"),),
    )
    error = await refusal(refused.read())
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    # The public lists no rounds unless public_round_listing is on (test_round_listing.py).
    error = await refusal(
        service.call(
            "dealer",
            "ListRounds",
            dealer_pb2.ListRoundsRequest(table_id="table-roles"),
            role="public",
        )
    )
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert details(error)[1] == "LISTING_NOT_PUBLIC"
    # The public sees a round once its seed is public, and not before.
    public = await service.call(
        "dealer", "GetRound", dealer_pb2.GetRoundRequest(round_id=settled.round_id), role=None
    )
    assert public.round.server_seed == settled.server_seed
    error = await refusal(
        service.call(
            "dealer",
            "GetRound",
            dealer_pb2.GetRoundRequest(round_id=open_round.round_id),
            role=None,
        )
    )
    assert error.code() == grpc.StatusCode.NOT_FOUND
    for method, request in [
        ("GetCheckpoint", audit_pb2.GetCheckpointRequest()),
        ("GetPublicKeys", audit_pb2.GetPublicKeysRequest()),
        ("GetInclusionProof", audit_pb2.GetInclusionProofRequest(index=0, tree_size=2)),
    ]:
        await service.call("audit", method, request, role=None)


async def test_an_unknown_token_is_unauthenticated(service: Service) -> None:
    error = await refusal(
        service.dealer.GetRound(
            dealer_pb2.GetRoundRequest(round_id="r"), metadata=(("authorization", "Bearer wrong"),)
        )
    )
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED


# -- the audit service ----------------------------------------------------------------------------


async def test_checkpoint_entries_and_proofs_verify_against_the_public_key(
    service: Service,
) -> None:
    await play(service)
    keys = await service.call("audit", "GetPublicKeys", audit_pb2.GetPublicKeysRequest(), role=None)
    verifier = Verifier.from_vkey(keys.verifier_keys[0])
    assert keys.origin == service.settings.origin
    note = (
        await service.call("audit", "GetCheckpoint", audit_pb2.GetCheckpointRequest(), role=None)
    ).checkpoint
    checkpoint = open_checkpoint(note, keys.origin, [verifier]).checkpoint
    stream = service.audit.GetEntries(
        audit_pb2.GetEntriesRequest(start=0, end=checkpoint.size),
        metadata=(("authorization", "Bearer audit-token"),),
    )
    entries = [entry async for message in stream for entry in message.entries]
    assert [entry.index for entry in entries] == list(range(checkpoint.size))
    assert chain_failure([entry.data for entry in entries], verifier) is None
    index = checkpoint.size - 1
    proof = await service.call(
        "audit",
        "GetInclusionProof",
        audit_pb2.GetInclusionProofRequest(index=index, tree_size=checkpoint.size),
        role=None,
    )
    verify_inclusion(
        leaf_hash(entries[index].data),
        index,
        checkpoint.size,
        list(proof.hashes),
        checkpoint.root_hash,
    )
    await play(service)
    later = open_checkpoint(
        (await service.call("audit", "GetCheckpoint", audit_pb2.GetCheckpointRequest())).checkpoint,
        keys.origin,
        [verifier],
    ).checkpoint
    consistency = await service.call(
        "audit",
        "GetConsistencyProof",
        audit_pb2.GetConsistencyProofRequest(first_size=checkpoint.size, second_size=later.size),
    )
    verify_consistency(
        checkpoint.size, later.size, list(consistency.hashes), checkpoint.root_hash, later.root_hash
    )
    error = await refusal(
        service.call(
            "audit",
            "GetInclusionProof",
            audit_pb2.GetInclusionProofRequest(index=0, tree_size=later.size + 1),
        )
    )
    assert error.code() == grpc.StatusCode.OUT_OF_RANGE


async def test_get_entries_checks_its_request_before_it_reads_the_log(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unread() -> int:
        raise AssertionError("the log was read before the request was checked")

    monkeypatch.setattr(service.app.store, "size", unread)

    async def read() -> None:
        request = audit_pb2.GetEntriesRequest(start=5, end=5)
        async for _ in service.audit.GetEntries(
            request, metadata=(("authorization", "Bearer audit-token"),)
        ):
            pass

    error = await refusal(read())
    assert details(error) == (["end"], "INVALID_ARGUMENT")


async def test_watch_entries_streams_new_entries_from_an_index(service: Service) -> None:
    start = await log_size(service)
    stream = service.audit.WatchEntries(
        audit_pb2.WatchEntriesRequest(start_index=start),
        metadata=(("authorization", "Bearer audit-token"),),
    )
    await play(service)
    received: list[int] = []
    async for message in stream:
        received += [entry.index for entry in message.entries]
        if len(received) >= 4:
            break
    stream.cancel()
    assert received[:4] == list(range(start, start + 4))


async def test_verify_round_replays_a_round(service: Service) -> None:
    settled = await play(service)
    answer = await service.call(
        "audit",
        "VerifyRound",
        audit_pb2.VerifyRoundRequest(round_id=settled.round_id),
        role="auditor",
    )
    assert answer.ok and "verifies" in answer.summary


# -- the service as a whole -----------------------------------------------------------------------


async def test_many_tables_in_parallel_do_not_cross(service: Service) -> None:
    tables = [f"parallel-{n}" for n in range(8)]
    results = await asyncio.gather(*(play(service, table) for table in tables for _ in range(1)))
    assert sorted(r.table_id for r in results) == sorted(tables)
    assert len({r.round_id for r in results}) == len(results)
    for settled in results:
        assert verify_revealed_round(revealed_round_from_proto(settled)).ok
    entries = await asyncio.to_thread(service.app.store.entries, 0, 10_000)
    assert chain_failure(entries, service.app.store.signer.verifier) is None


async def test_health_reports_serving_then_not_serving(service: Service) -> None:
    health = health_pb2_grpc.HealthStub(service.channel)
    for name in ("", "gnau.v1.DealerService", "gnau.v1.AuditService"):
        answer = await health.Check(health_pb2.HealthCheckRequest(service=name))
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
    await service.app.health.enter_graceful_shutdown()
    answer = await health.Check(health_pb2.HealthCheckRequest(service=""))
    assert answer.status == health_pb2.HealthCheckResponse.NOT_SERVING


async def test_every_call_gets_a_request_id_back(service: Service) -> None:
    call = service.dealer.EvaluateHand(
        dealer_pb2.EvaluateHandRequest(cards=["AS", "2C", "3C", "4C", "4D"]),
        metadata=(("x-request-id", "client-chosen-42"),),
    )
    await call
    assert ("x-request-id", "client-chosen-42") in tuple(await call.trailing_metadata())
    second = service.dealer.EvaluateHand(
        dealer_pb2.EvaluateHandRequest(cards=["AS", "2C", "3C", "4C", "4D"])
    )
    await second
    assert dict(await second.trailing_metadata())["x-request-id"]


async def test_a_restarted_service_carries_on(service: Service) -> None:
    first = await play(service, "table-restart")
    settings = service.settings
    await service.app.stop()
    async with (
        running(settings) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        restarted = Service(app, settings, channel)
        again = await restarted.call(
            "dealer", "GetRound", dealer_pb2.GetRoundRequest(round_id=first.round_id)
        )
        assert again.round == first
        second = await play(restarted, "table-restart")
        assert second.round_id != first.round_id
        entries = await asyncio.to_thread(app.store.entries, 0, 10_000)
        assert chain_failure(entries, app.store.signer.verifier) is None


async def test_logs_never_hold_a_seed_or_a_token(
    service: Service, capsys: pytest.CaptureFixture[str]
) -> None:
    settled = await play(service)
    await refusal(
        service.call(
            "dealer",
            "Shuffle",
            dealer_pb2.ShuffleRequest(request_id=rid(), table_id="t"),
            role="public",
        )
    )
    _, err = capsys.readouterr()
    assert '"method": "/gnau.v1.DealerService/Deal"' in err, "the calls were logged"
    assert settled.server_seed not in err
    for token in ("op-token", "audit-token", "public-token"):
        assert token not in err
