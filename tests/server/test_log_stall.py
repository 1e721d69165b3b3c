"""A stalled log, as a replica reports it (PostgreSQL): while no process can sequence the log
(here the lease is held from outside and nothing integrates), a step is committed but waits;
past the stall bound its caller gets UNAVAILABLE with the reason LOG_STALLED, DealerService's
health says NOT_SERVING (AuditService's still SERVING), the metrics show the wait and the stall,
and the start and end are logged once each. Once a sequencer runs again, health is SERVING and
a retry of the same request gets the original answer."""

from __future__ import annotations

import dataclasses
import fcntl
import os
import time
import uuid
from pathlib import Path

import grpc
import pytest
from gnau.v1 import dealer_pb2

from gnau_service.server.process.app import running
from gnau_service.server.process.config import Settings
from gnau_service.server.process.structured_logs import configure_logging
from gnau_service.store import SqliteBackend
from gnau_service.store.lease import DEFAULT_LEASE_SECONDS, stall_bound
from gnau_service.store.waiting import ANSWER_MARGIN_SECONDS, STALL_EVIDENCE_SECONDS
from tests.catalogued import catalogue
from tests.postgres import OutsideLeader, fresh_database
from tests.server.conftest import Service, write_tokens
from tests.server.test_interceptors import error_info, log_lines
from tests.server.test_limits import API_DOC, flat
from tests.server.test_metrics import moved, scrape, value
from tests.server.test_storage_failures import NOT_SERVING, SERVING, health_of, until_health

# make test-system: the stall bound, waited out on real timers.
pytestmark = pytest.mark.system

LEASE = 2.0
#: The tables this module's tests shuffle at, in the default operator's catalogue (issue 38).
TABLES = ("t1", "warm", "after")


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
            await catalogue(app.store, TABLES)
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


# -- a client whose deadline comes before the stall bound ------------------------------------------

#: A common client deadline, shorter than the default lease's stall bound, long enough for the
#: evidence the early answer needs.
CLIENT_DEADLINE = 4.0


def stall_settings(tmp_path: Path, database: str | None) -> Settings:
    base = Settings(
        listen="127.0.0.1:0",
        metrics_listen="127.0.0.1:0",
        data_dir=tmp_path / "data",
        tokens=write_tokens(tmp_path / "tokens.json"),
        grace_seconds=1,
        shutdown_notice_seconds=0,
    )
    return base if database is None else dataclasses.replace(base, database=database)


#: The labels of a Shuffle's LOG_STALLED refusals in ``gnau_refusals_total``.
STALLED_SHUFFLES = {
    "grpc_service": "gnau.v1.DealerService",
    "grpc_method": "Shuffle",
    "grpc_code": "UNAVAILABLE",
    "reason": "LOG_STALLED",
}


async def shuffle_before_deadline(
    service: Service, request: dealer_pb2.ShuffleRequest, says: str
) -> float:
    """Shuffle with :data:`CLIENT_DEADLINE`, expecting LOG_STALLED (not the deadline's expiry)
    with a message that ``says`` whether the change ran; how long the client waited for it."""
    began = time.monotonic()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await service.dealer.Shuffle(
            request, timeout=CLIENT_DEADLINE, metadata=(("authorization", "Bearer op-token"),)
        )
    waited = time.monotonic() - began
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, refused.value
    assert error_info(refused.value).reason == "LOG_STALLED"
    assert "retry with the same request_id" in str(refused.value.details())
    assert says in str(refused.value.details())
    # Only once the log had stood still for the evidence's length, and before the deadline.
    assert STALL_EVIDENCE_SECONDS <= waited < CLIENT_DEADLINE, waited
    return waited


async def warm(service: Service, table: str = "warm") -> None:
    """A Shuffle on ``table``: first, so that the default rules' figures are ready and the
    stalled call's time goes to the log alone."""
    request = dealer_pb2.ShuffleRequest(request_id=str(uuid.uuid4()), table_id=table)
    await service.call("dealer", "Shuffle", request)


async def test_a_call_with_a_deadline_is_answered_log_stalled_before_it_on_postgresql(
    tmp_path: Path,
) -> None:
    """A takeover of the default lease stalls the log for longer than a 4 s deadline but less
    than the stall bound: the call is answered LOG_STALLED in time, and its retry gets the
    original answer once the log moves."""
    configure_logging("json")
    assert stall_bound(DEFAULT_LEASE_SECONDS) > CLIENT_DEADLINE
    with fresh_database() as url:
        settings = stall_settings(tmp_path, url)
        async with (
            running(settings) as app,
            grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
        ):
            service = Service(app, settings, channel)
            await catalogue(app.store, TABLES)
            await warm(service)
            before = await scrape(app.metrics_port)
            outside = OutsideLeader(url)  # deposes the service's sequencer, integrates nothing
            request = dealer_pb2.ShuffleRequest(request_id=str(uuid.uuid4()), table_id="t1")
            try:
                waited = await shuffle_before_deadline(service, request, "is committed")
                # Before the stall bound: health has not given up on the log.
                assert value(await scrape(app.metrics_port), "gnau_log_stalled") == 0
            finally:
                outside.release()
            retried = await service.call("dealer", "Shuffle", request)
            # The original answer: the step committed before the refusal (a new Shuffle would
            # have found the table busy with it), and it is the table's one round.
            listed = await service.call("dealer", "ListRounds", dealer_pb2.ListRoundsRequest())
            assert [r.round_id for r in listed.rounds if r.table_id == "t1"] == [
                retried.round.round_id
            ]
            assert len(retried.round.log_indices) == 1
            after = await scrape(app.metrics_port)
    assert moved(before, after, "gnau_refusals_total", **STALLED_SHUFFLES) == 1
    print(f"\nLOG_STALLED after {waited:.2f} s of a {CLIENT_DEADLINE} s deadline")


async def test_a_call_waiting_for_the_writers_turn_is_withdrawn_before_its_deadline_on_sqlite(
    tmp_path: Path,
) -> None:
    """SQLite, the turn held by another process (as a frozen worker holds it until the watchdog
    kills it): the queued call is withdrawn, answered LOG_STALLED before its deadline, and never
    runs; its retry once the turn is free runs it."""
    configure_logging("json")
    settings = stall_settings(tmp_path, None)
    async with (
        running(settings) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        service = Service(app, settings, channel)
        await catalogue(app.store, TABLES)
        await warm(service)
        backend = app.store.backend
        assert isinstance(backend, SqliteBackend)
        size = app.store.size()
        request = dealer_pb2.ShuffleRequest(request_id=str(uuid.uuid4()), table_id="t1")
        turn = os.open(backend.turn_path, os.O_RDWR)
        try:
            fcntl.flock(turn, fcntl.LOCK_EX)  # a frozen worker's turn
            await shuffle_before_deadline(service, request, "was not run")
        finally:
            os.close(turn)  # which lets the turn go
        # A step queued behind the withdrawn one: once it is answered, the withdrawn one has had
        # its turn, and it did not run.
        await warm(service, "after")
        listed = await service.call("dealer", "ListRounds", dealer_pb2.ListRoundsRequest())
        assert [r.table_id for r in listed.rounds if r.table_id == "t1"] == []
        assert app.store.size() == size + 1
        retried = await service.call("dealer", "Shuffle", request)  # runs it now
        listed = await service.call("dealer", "ListRounds", dealer_pb2.ListRoundsRequest())
        assert [r.round_id for r in listed.rounds if r.table_id == "t1"] == [retried.round.round_id]
        assert app.store.size() == size + 2


def test_the_rule_is_stated_in_the_api_doc_as_the_code_has_it() -> None:
    stated = flat(API_DOC)
    margin, evidence = ANSWER_MARGIN_SECONDS, STALL_EVIDENCE_SECONDS
    lease = DEFAULT_LEASE_SECONDS
    for phrase in (
        f"{margin:g} s before the deadline the client set, if the log has not moved for "
        f"{evidence:g} s while the call waited",
        f"one whose deadline comes less than {margin + evidence:g} s after it started waiting",
        f"after the lease plus {stall_bound(lease) - lease:g} s ({stall_bound(lease):g} s by "
        "default)",
    ):
        assert phrase in stated, phrase
