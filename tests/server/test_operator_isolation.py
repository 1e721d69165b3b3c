"""Operators over real gRPC (issue 38): two operators' tokens, an auditor of each and an auditor
of every operator. A credential of one operator never reads, changes, lists, receipts, verifies,
looks up or forgets another operator's rounds or players: another operator's round is NOT_FOUND
exactly as a round that does not exist; request ids and table ids are each operator's own; the
log's entries are for the auditor of every operator alone."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from gnau.v1 import audit_pb2, audit_pb2_grpc, dealer_pb2, dealer_pb2_grpc, round_pb2

from gnau_service.server.grpc.auth import Role
from gnau_service.server.process.app import running
from gnau_service.server.process.config import Settings
from gnau_service.server.process.tokens import add_token
from tests.catalogued import catalogue
from tests.server.test_service import SEATS, details, refusal, rid

A, B = "casino-a", "casino-b"
#: Each credential of the test: its role and the operator it belongs to ("*": every operator).
CREDENTIALS = {
    "operator-a": (Role.OPERATOR, A),
    "operator-b": (Role.OPERATOR, B),
    "auditor-a": (Role.AUDITOR, A),
    "auditor-b": (Role.AUDITOR, B),
    "regulator": (Role.AUDITOR, "*"),
}
#: The tables each operator deals at in the tests, in its own catalogue (issue 38): the same
#: table ids, each operator's own table.
TABLES = {A: ("t1", "t2", "t3", "t4"), B: ("t1", "t2")}


@dataclass
class Operators:
    """A running service and a token of each credential, by its name."""

    channel: grpc.aio.Channel
    tokens: dict[str, str]

    async def call(self, method: str, request: Any, caller: str | None) -> Any:
        service = "audit" if type(request).__module__.endswith("audit_pb2") else "dealer"
        stub: Any = (
            audit_pb2_grpc.AuditServiceStub(self.channel)
            if service == "audit"
            else dealer_pb2_grpc.DealerServiceStub(self.channel)
        )
        metadata = () if caller is None else (("authorization", f"Bearer {self.tokens[caller]}"),)
        return await getattr(stub, method)(request, metadata=metadata)

    async def entries(self, caller: str) -> list[audit_pb2.GetEntriesResponse]:
        stub = audit_pb2_grpc.AuditServiceStub(self.channel)
        metadata = (("authorization", f"Bearer {self.tokens[caller]}"),)
        return [
            response
            async for response in stub.GetEntries(
                audit_pb2.GetEntriesRequest(start=0), metadata=metadata
            )
        ]

    async def shuffle(self, caller: str, table: str, request_id: str = "") -> round_pb2.Round:
        request = dealer_pb2.ShuffleRequest(request_id=request_id or rid(), table_id=table)
        return (await self.call("Shuffle", request, caller)).round

    async def deal(self, caller: str, round_id: str) -> round_pb2.Round:
        request = dealer_pb2.DealRequest(request_id=rid(), round_id=round_id, seats=SEATS)
        return (await self.call("Deal", request, caller)).round

    async def reveal(self, caller: str, round_id: str) -> round_pb2.Round:
        request = dealer_pb2.RevealRequest(request_id=rid(), round_id=round_id)
        return (await self.call("Reveal", request, caller)).round

    async def settle(self, caller: str, round_id: str) -> round_pb2.Round:
        request = dealer_pb2.SettleRequest(request_id=rid(), round_id=round_id)
        return (await self.call("Settle", request, caller)).round

    async def void(self, caller: str, round_id: str) -> round_pb2.Round:
        request = dealer_pb2.VoidRoundRequest(
            request_id=rid(),
            round_id=round_id,
            reason_code=round_pb2.VOID_REASON_TABLE_CLOSED,
        )
        return (await self.call("VoidRound", request, caller)).round

    async def listed(self, caller: str, table: str = "", operator: str = "") -> set[str]:
        request = dealer_pb2.ListRoundsRequest(table_id=table, page_size=1000, operator=operator)
        return {
            round_.round_id for round_ in (await self.call("ListRounds", request, caller)).rounds
        }


@pytest.fixture
async def operators(settings: Settings, tmp_path: Path) -> AsyncIterator[Operators]:
    path = tmp_path / "operators-tokens.json"
    tokens = {
        name: add_token(path, role, name, operator=operator)[1]
        for name, (role, operator) in CREDENTIALS.items()
    }
    async with (
        running(dataclasses.replace(settings, tokens=path)) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        for operator, tables in TABLES.items():
            await catalogue(app.store, tables, operator=operator)
        yield Operators(channel, tokens)


def _shape(error: grpc.aio.AioRpcError, round_id: str) -> tuple[grpc.StatusCode, str, str]:
    """A refusal with the round id taken out: what it tells of the round beyond its id."""
    return error.code(), details(error)[1], (error.details() or "").replace(round_id, "ROUND")


async def test_another_operators_round_is_a_round_that_does_not_exist(
    operators: Operators,
) -> None:
    # Casino A's rounds in every state a call needs, and one of B's at the same table id.
    shuffled = await operators.shuffle("operator-a", "t1")
    dealt = await operators.deal(
        "operator-a", (await operators.shuffle("operator-a", "t2")).round_id
    )
    revealed_at = await operators.deal(
        "operator-a", (await operators.shuffle("operator-a", "t3")).round_id
    )
    revealed = await operators.reveal("operator-a", revealed_at.round_id)
    settled = await operators.settle(
        "operator-a",
        (await operators.reveal("operator-a", (await operators.deal(
            "operator-a", (await operators.shuffle("operator-a", "t4")).round_id
        )).round_id)).round_id,
    )  # fmt: skip
    assert {shuffled.operator, dealt.operator, revealed.operator, settled.operator} == {A}
    missing = f"r-{uuid.uuid4().hex[:24]}"

    calls = {
        "GetRound": lambda caller, round_id: operators.call(
            "GetRound", dealer_pb2.GetRoundRequest(round_id=round_id), caller
        ),
        "GetRoundReceipt": lambda caller, round_id: operators.call(
            "GetRoundReceipt", dealer_pb2.GetRoundReceiptRequest(round_id=round_id), caller
        ),
        "VerifyRound": lambda caller, round_id: operators.call(
            "VerifyRound", audit_pb2.VerifyRoundRequest(round_id=round_id), caller
        ),
    }
    for name, call in calls.items():
        for caller in ("operator-b", "auditor-b"):
            for round_ in (shuffled, settled):
                if name != "GetRound" and round_ is shuffled:
                    continue  # a receipt or a verdict of an open round: settled is the case
                error = await refusal(call(caller, round_.round_id))
                absent = await refusal(call(caller, missing))
                assert _shape(error, round_.round_id) == _shape(absent, missing), (name, caller)
                assert error.code() == grpc.StatusCode.NOT_FOUND, (name, caller)
        # Casino A's own credentials and the regulator find it.
        for caller in ("operator-a", "auditor-a", "regulator"):
            await call(caller, settled.round_id)

    changes = {
        "Deal": (operators.deal, shuffled),
        "VoidRound": (operators.void, shuffled),
        "Reveal": (operators.reveal, dealt),
        "Settle": (operators.settle, revealed),
    }
    for name, (change, round_) in changes.items():
        error = await refusal(change("operator-b", round_.round_id))
        absent = await refusal(change("operator-b", missing))
        assert _shape(error, round_.round_id) == _shape(absent, missing), name
        assert error.code() == grpc.StatusCode.NOT_FOUND, name
    # Nothing B tried changed A's rounds.
    for round_ in (shuffled, dealt, revealed):
        now = await operators.call(
            "GetRound", dealer_pb2.GetRoundRequest(round_id=round_.round_id), "operator-a"
        )
        assert now.round.state == round_.state and now.round.operator == A


async def test_each_operator_lists_its_own_rounds_and_the_regulator_every_one(
    operators: Operators,
) -> None:
    a_t1 = (await operators.shuffle("operator-a", "t1")).round_id
    a_t2 = (await operators.shuffle("operator-a", "t2")).round_id
    b_t1 = (await operators.shuffle("operator-b", "t1")).round_id
    for caller, own, other in (
        ("operator-a", {a_t1, a_t2}, B),
        ("auditor-a", {a_t1, a_t2}, B),
        ("operator-b", {b_t1}, A),
        ("auditor-b", {b_t1}, A),
    ):
        assert await operators.listed(caller) == own, caller
        own_operator = A if other == B else B
        assert await operators.listed(caller, operator=own_operator) == own, caller
        error = await refusal(operators.listed(caller, operator=other))
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED, caller
        assert details(error)[1] == "OPERATOR_SCOPE", caller
    # Table t1 at A is not table t1 at B.
    assert await operators.listed("operator-a", table="t1") == {a_t1}
    assert await operators.listed("operator-b", table="t1") == {b_t1}
    # The regulator sees every operator's, and picks one.
    assert await operators.listed("regulator") == {a_t1, a_t2, b_t1}
    assert await operators.listed("regulator", table="t1") == {a_t1, b_t1}
    assert await operators.listed("regulator", operator=A) == {a_t1, a_t2}
    assert await operators.listed("regulator", table="t1", operator=B) == {b_t1}


async def test_a_request_id_and_a_table_id_are_each_operators_own(operators: Operators) -> None:
    request_id = rid()
    of_a = await operators.shuffle("operator-a", "t1", request_id)
    # B reuses A's request id at the same table id: a fresh round of B's, both open at once.
    of_b = await operators.shuffle("operator-b", "t1", request_id)
    assert of_b.round_id != of_a.round_id
    assert (of_a.operator, of_b.operator) == (A, B)
    assert of_a.state == of_b.state == round_pb2.ROUND_STATE_SHUFFLED
    # Each one's retry answers its own round.
    assert (await operators.shuffle("operator-a", "t1", request_id)).round_id == of_a.round_id
    assert (await operators.shuffle("operator-b", "t1", request_id)).round_id == of_b.round_id
    # Another body under B's id is B's conflict, whatever A did with it.
    error = await refusal(operators.shuffle("operator-b", "t2", request_id))
    assert error.code() == grpc.StatusCode.ALREADY_EXISTS
    # Each table still has its one unfinished round: a second shuffle at A's t1 is refused.
    error = await refusal(operators.shuffle("operator-a", "t1"))
    assert details(error)[1] == "TABLE_BUSY"
    # A's catalogue is not B's: B has no table t3, whatever A has.
    error = await refusal(operators.shuffle("operator-b", "t3"))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert details(error)[1] == "TABLE_NOT_FOUND"


async def test_players_are_each_operators_own(operators: Operators) -> None:
    """alice at casino A is not alice at casino B: B can neither look her up nor forget her."""
    round_a = await operators.deal(
        "operator-a", (await operators.shuffle("operator-a", "t1")).round_id
    )
    alice_ref = next(seat.player_ref for seat in round_a.seats if seat.player_id == "alice")

    async def lookup(caller: str, **player: str) -> audit_pb2.LookupPlayerResponse:
        request = audit_pb2.LookupPlayerRequest(**player)
        response: audit_pb2.LookupPlayerResponse = await operators.call(
            "LookupPlayer", request, caller
        )
        return response

    for caller in ("operator-b", "auditor-b"):
        for player in ({"player_id": "alice"}, {"player_ref": alice_ref}):
            found = await lookup(caller, **player)
            assert (found.player_id, list(found.seats)) == ("", []), (caller, player)
    for caller in ("operator-a", "auditor-a", "regulator"):
        found = await lookup(caller, player_id="alice")
        assert [seat.round_id for seat in found.seats] == [round_a.round_id], caller
    forgot = await operators.call(
        "ForgetPlayer", dealer_pb2.ForgetPlayerRequest(player_id="alice", request_id=rid()),
        "operator-b",
    )  # fmt: skip
    assert (forgot.forgotten, forgot.seats_unlinked) == (False, 0)
    found = await lookup("operator-a", player_ref=alice_ref)
    assert found.player_id == "alice"
    # A forgets its own alice.
    forgot = await operators.call(
        "ForgetPlayer", dealer_pb2.ForgetPlayerRequest(player_id="alice", request_id=rid()),
        "operator-a",
    )  # fmt: skip
    assert (forgot.forgotten, forgot.seats_unlinked) == (True, 1)


async def test_the_log_s_entries_are_for_the_auditor_of_every_operator(
    operators: Operators,
) -> None:
    await operators.shuffle("operator-a", "t1")
    await operators.shuffle("operator-b", "t1")
    for caller, reason in (
        ("auditor-a", "OPERATOR_SCOPE"),
        ("auditor-b", "OPERATOR_SCOPE"),
        ("operator-a", "PERMISSION_DENIED"),
    ):
        error = await refusal(operators.entries(caller))
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED, caller
        assert details(error)[1] == reason, caller
        stub = audit_pb2_grpc.AuditServiceStub(operators.channel)
        watch = stub.WatchEntries(
            audit_pb2.WatchEntriesRequest(start_index=0),
            metadata=(("authorization", f"Bearer {operators.tokens[caller]}"),),
        )
        error = await refusal(watch.read())
        assert details(error)[1] == reason, caller
        watch.cancel()
    entries = b"".join(
        entry.data
        for response in await operators.entries("regulator")
        for entry in response.entries
    )
    assert b'"operator":"casino-a"' in entries and b'"operator":"casino-b"' in entries


async def test_the_public_reads_a_revealed_round_of_any_operator_by_its_id(
    operators: Operators,
) -> None:
    round_id = (await operators.shuffle("operator-b", "t1")).round_id
    await operators.deal("operator-b", round_id)
    error = await refusal(
        operators.call("GetRound", dealer_pb2.GetRoundRequest(round_id=round_id), None)
    )
    assert error.code() == grpc.StatusCode.NOT_FOUND
    await operators.reveal("operator-b", round_id)
    public = await operators.call("GetRound", dealer_pb2.GetRoundRequest(round_id=round_id), None)
    assert public.round.operator == B
