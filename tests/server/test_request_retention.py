"""Request ids are remembered for the retention (gnau_service/server/process/request_retention.py):
within it a retry gets the original answer; after it the record is gone and the same id is a
new request, which the round's state machine answers; the log keeps everything."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from gnau.v1 import dealer_pb2

from gnau_service.audit.timestamps import format_utc_timestamp
from gnau_service.server.process.request_retention import prune_expired
from gnau_service.store import Store, Transaction
from tests.catalogued import catalogue
from tests.dealers import opened_store
from tests.postgres import SERVICE_BACKENDS
from tests.server.conftest import Service
from tests.server.test_interceptors import error_info
from tests.server.test_service import SEATS, rid, shuffle


async def test_a_request_is_remembered_for_the_retention_and_then_forgotten(
    service: Service,
) -> None:
    store = service.app.store
    await catalogue(store, ["retention"])
    round_id = (await shuffle(service, "retention")).round_id
    reveal_id = rid()
    deal = dealer_pb2.DealRequest(
        request_id=rid(),
        round_id=round_id,
        seats=SEATS,
    )
    await service.call("dealer", "Deal", deal)
    reveal = dealer_pb2.RevealRequest(request_id=reveal_id, round_id=round_id)
    first = await service.call("dealer", "Reveal", reveal)
    size = await asyncio.to_thread(store.size)
    # Within the retention, nothing is pruned, and a retry gets the original answer.
    assert await prune_expired(store, 90) == 0
    again = await service.call("dealer", "Reveal", reveal)
    assert again.round == first.round
    # 91 days later, the three records of this round's steps are gone (and only they were).
    later = datetime.now(UTC) + timedelta(days=91)
    assert await prune_expired(store, 90, now=later) == 3
    assert await prune_expired(store, 90, now=later) == 0
    # The same id is a new request now: the round is revealed already, and says so.
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await service.call("dealer", "Reveal", reveal)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_info(refused.value).reason == "ROUND_STATE"
    # The log lost nothing.
    assert await asyncio.to_thread(store.size) == size


@pytest.fixture(params=SERVICE_BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    # A store without a service: the service's own retention prunes at its start, and would race
    # the pruning under test for the expired record.
    with opened_store(request.param, tmp_path) as opened:
        yield opened


async def test_pruning_one_operator_s_request_keeps_another_s_of_the_same_id(store: Store) -> None:
    """A request id is an operator's own (issue 38): the expired record of one operator goes,
    the younger one of another operator with the same id stays."""
    now = datetime.now(UTC)
    old, young = (format_utc_timestamp(now - timedelta(days=days)) for days in (100, 1))

    def two_records(tx: Transaction) -> None:
        for operator, created_at in (("casino-a", old), ("casino-b", young)):
            tx.execute(
                "INSERT INTO requests (operator, request_id, operation, fingerprint, response,"
                " created_at) VALUES (?, 'shared-id', 'Shuffle', '', '{}', ?)",
                (operator, created_at),
            )

    await store.run_async(two_records)
    assert await prune_expired(store, 90, now=now) == 1
    kept = await asyncio.to_thread(
        store.query, "SELECT operator FROM requests WHERE request_id = 'shared-id'"
    )
    assert kept == [("casino-b",)]
