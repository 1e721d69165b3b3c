"""The table catalogue over real gRPC (issue 38): PutTable, SetTableEnabled and ListTables. An
operator manages its own tables only; another operator's table of the same id is not found and
is never listed; a round names the version and currency its table had at the shuffle.

The expected values are the test's own (what it put), never read back from the code under test.
"""

# The tests take the imported ``operators`` fixture as their argument (F811).
# ruff: noqa: F811

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from gnau.v1 import dealer_pb2, types_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

# The running service with two operators' tokens, an auditor of each and a regulator's.
from tests.server.test_operator_isolation import A, B, Operators, operators  # noqa: F401
from tests.server.test_service import rid


@dataclass
class Why:
    """What a refusal says: its code, its ErrorInfo's reason and metadata, its bad fields."""

    code: grpc.StatusCode
    reason: str
    metadata: dict[str, str]
    fields: list[str]


def why(error: grpc.aio.AioRpcError) -> Why:
    status = rpc_status.from_call(error)
    assert status is not None, "the refusal carries no google.rpc.Status"
    found = Why(error.code(), "", {}, [])
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            found.fields += [violation.field for violation in bad.field_violations]
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            found.reason, found.metadata = info.reason, dict(info.metadata)
    return found


EUR_TABLE = dealer_pb2.TableConfig(
    currency="EUR",
    rule_sets=[types_pb2.HouseRules()],
    min_stake=100,
    max_stake=50_000,
    max_seats=4,
    enabled=True,
)


async def put(ops: Operators, caller: str, table: str, config: dealer_pb2.TableConfig) -> Any:
    request = dealer_pb2.PutTableRequest(table_id=table, config=config)
    return (await ops.call("PutTable", request, caller)).table


async def listed(ops: Operators, caller: str, operator: str = "") -> list[tuple[str, str, int]]:
    request = dealer_pb2.ListTablesRequest(operator=operator)
    tables = (await ops.call("ListTables", request, caller)).tables
    return [(t.operator, t.table_id, t.version) for t in tables]


async def test_an_operator_puts_lists_and_disables_its_own_tables(operators: Operators) -> None:
    table = await put(operators, "operator-a", "baccarat-9", EUR_TABLE)
    assert (table.operator, table.table_id, table.version) == (A, "baccarat-9", 1)
    assert (table.currency.code, table.currency.exponent) == ("EUR", 2)
    assert (table.config.currency, table.config.min_stake, table.config.max_stake) == (
        "EUR",
        100,
        50_000,
    )
    assert (table.config.max_seats, table.config.enabled) == (4, True)
    [rules] = table.config.rule_sets
    assert (rules.decks, rules.payout, rules.tie) == (
        1,
        types_pb2.PAYOUT_TABLE_POINTS,
        types_pb2.TIE_RULE_DEALER,
    )
    again = await put(operators, "operator-a", "baccarat-9", EUR_TABLE)
    assert again.version == 1  # the same configuration: nothing changes
    round_ = (
        await operators.call(
            "Shuffle",
            dealer_pb2.ShuffleRequest(request_id=rid(), table_id="baccarat-9"),
            "operator-a",
        )
    ).round
    assert (round_.table_version, round_.currency.code, round_.currency.exponent) == (1, "EUR", 2)

    disabled = (
        await operators.call(
            "SetTableEnabled",
            dealer_pb2.SetTableEnabledRequest(table_id="baccarat-9", enabled=False),
            "operator-a",
        )
    ).table
    assert (disabled.version, disabled.config.enabled) == (2, False)
    # The open round completes; a new one is refused.
    await operators.void("operator-a", round_.round_id)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await operators.shuffle("operator-a", "baccarat-9")
    refused_because = why(refused.value)
    assert (refused_because.code, refused_because.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "TABLE_DISABLED",
    )
    assert refused_because.metadata["disabled"] == "table"

    mine = await listed(operators, "operator-a")
    assert (A, "baccarat-9", 2) in mine
    assert all(operator == A for operator, _, _ in mine)
    assert await listed(operators, "auditor-a") == mine
    assert await listed(operators, "regulator", A) == mine


async def test_another_operators_table_is_not_reached(operators: Operators) -> None:
    await put(operators, "operator-a", "only-a", EUR_TABLE)
    # B cannot disable A's table (not found, as one that does not exist), nor list A's.
    with pytest.raises(grpc.aio.AioRpcError) as not_found:
        await operators.call(
            "SetTableEnabled",
            dealer_pb2.SetTableEnabledRequest(table_id="only-a", enabled=False),
            "operator-b",
        )
    assert (why(not_found.value).code, why(not_found.value).reason) == (
        grpc.StatusCode.NOT_FOUND,
        "TABLE_NOT_FOUND",
    )
    for caller in ("operator-b", "auditor-b"):
        with pytest.raises(grpc.aio.AioRpcError) as scoped:
            await listed(operators, caller, A)
        assert why(scoped.value).reason == "OPERATOR_SCOPE"
        assert why(scoped.value).code == grpc.StatusCode.PERMISSION_DENIED
        assert all(t != "only-a" for _, t, _ in await listed(operators, caller))
    # B's own table of the same id is another table, of B's own version 1.
    theirs = await put(operators, "operator-b", "only-a", EUR_TABLE)
    assert (theirs.operator, theirs.version) == (B, 1)
    # An auditor cannot change the catalogue; the regulator must name an operator to list.
    with pytest.raises(grpc.aio.AioRpcError) as denied:
        await put(operators, "auditor-a", "x", EUR_TABLE)
    assert why(denied.value).code == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.aio.AioRpcError) as unnamed:
        await listed(operators, "regulator")
    assert (why(unnamed.value).code, why(unnamed.value).fields) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        ["operator"],
    )
    with pytest.raises(grpc.aio.AioRpcError) as public:
        await listed(operators, None)  # type: ignore[arg-type]
    assert why(public.value).code == grpc.StatusCode.PERMISSION_DENIED


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"currency": "EURO"}, "config.currency"),
        ({"currency": ""}, "config.currency"),
        ({"min_stake": 0}, "config"),
        ({"min_stake": 60_000}, "config"),
        ({"max_stake": 5_492_194_667_525}, "config"),
        ({"max_seats": 83}, "config"),
        ({"deal_deadline_seconds": -1}, "config.deal_deadline_seconds"),
        ({"settle_deadline_seconds": 604_801}, "config"),
        ({"rule_sets": []}, "config"),
        ({"rule_sets": [types_pb2.HouseRules(decks=1)] * 65}, "config.rule_sets"),
    ],
)  # fmt: skip
async def test_a_bad_configuration_is_refused_and_changes_nothing(
    operators: Operators, change: dict[str, object], field: str
) -> None:
    config = dealer_pb2.TableConfig()
    config.CopyFrom(EUR_TABLE)
    for name, value in change.items():
        if name == "rule_sets":
            del config.rule_sets[:]
            config.rule_sets.extend(value)  # type: ignore[arg-type]
        else:
            setattr(config, name, value)
    before = await listed(operators, "operator-a")
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await put(operators, "operator-a", "bad", config)
    refused_because = why(refused.value)
    assert (refused_because.code, refused_because.reason) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_ARGUMENT",
    )
    assert field in refused_because.fields, refused_because.fields
    assert await listed(operators, "operator-a") == before
