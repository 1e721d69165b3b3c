"""A stalled log, as a replica reports it (PostgreSQL): while no process can sequence the log
(here the lease is held from outside and nothing integrates), a step is committed but waits;
past the stall bound its caller gets UNAVAILABLE with the reason LOG_STALLED, DealerService's
health says NOT_SERVING (AuditService's still SERVING), the metrics show the wait and the stall,
and the start and end are logged once each. Once a sequencer runs again, health is SERVING and
a retry of the same request gets the original answer."""

from __future__ import annotations

import uuid
from pathlib import Path

import grpc
import pytest
from gnau.v1 import dealer_pb2

from gnau_service.server.app import running
from gnau_service.server.config import Settings
from gnau_service.server.structured_logs import configure_logging
from gnau_service.store.lease import stall_bound
from tests.postgres import OutsideLeader, fresh_database
from tests.server.conftest import Service, write_tokens
from tests.server.test_interceptors import error_info, log_lines
from tests.server.test_metrics import scrape, value
from tests.server.test_storage_failures import NOT_SERVING, SERVING, health_of, until_health

LEASE = 2.0


async def test_a_stalled_log_is_unavailable_with_its_reason_and_not_serving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("json")
    with fresh_database() as url:
        settings = Settings(
            listen="127.0.0.1:0",
            metrics_listen="127.0.0.1:0",
            data_dir=tmp_path / "data",
            database=url,
            tokens=write_tokens(tmp_path / "tokens.json"),
            sequencer_lease_seconds=LEASE,
            grace_seconds=1,
            shutdown_notice_seconds=0,
        )
        async with (
            running(settings) as app,
            grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
        ):
            service = Service(app, settings, channel)
            before = await scrape(app.metrics_port)
            assert value(before, "gnau_log_stalled") == 0
            assert value(before, "gnau_sequencer_leading") == 1
            outside = OutsideLeader(url)  # deposes the service's sequencer, integrates nothing
            request = dealer_pb2.ShuffleRequest(request_id=str(uuid.uuid4()), table_id="t1")
            try:
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await service.call("dealer", "Shuffle", request)
                assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
                assert error_info(refused.value).reason == "LOG_STALLED"
                assert "retry with the same request_id" in str(refused.value.details())
                await until_health(channel, NOT_SERVING)
                await until_health(channel, NOT_SERVING, "gnau.v1.DealerService")
                assert await health_of(channel, "gnau.v1.AuditService") == SERVING
                stalled = await scrape(app.metrics_port)
                assert value(stalled, "gnau_log_stalled") == 1
                assert value(stalled, "gnau_serving") == 0
                assert value(stalled, "gnau_sequencer_leading") == 0
                assert value(stalled, "gnau_log_integration_wait_seconds") > stall_bound(LEASE)
                assert value(stalled, "gnau_sequencer_lease_age_seconds") > stall_bound(LEASE)
            finally:
                outside.release()
            await until_health(channel, SERVING)
            retried = await service.call("dealer", "Shuffle", request)
            assert retried.round.table_id == "t1" and len(retried.round.log_indices) == 1
            after = await scrape(app.metrics_port)
            assert value(after, "gnau_log_stalled") == 0
            assert value(after, "gnau_sequencer_epoch") == value(before, "gnau_sequencer_epoch") + 2
    lines = log_lines(capsys.readouterr().err)
    began = [line for line in lines if str(line["event"]).startswith("log stalled")]
    ended = [line for line in lines if line["event"] == "log integrating again"]
    assert len(began) == 1 and len(ended) == 1, [line["event"] for line in lines]
    assert began[0]["lease_holder"] == "outside"
    assert float(str(began[0]["waited_seconds"])) > stall_bound(LEASE)
    # No storage outage was declared: the database worked throughout.
    assert not any(str(line["event"]).startswith("storage unavailable") for line in lines)
