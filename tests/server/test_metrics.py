"""The metrics, scraped from a real server's ``/metrics`` during real rounds: every counter moves
by exactly what the calls did, refusals are counted under their real codes and reasons, and the
gauges read the database."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from pathlib import Path

import aiohttp
import grpc
import pytest
from gnau.v1 import audit_pb2, dealer_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from gnau_service.server.process.app import running
from gnau_service.server.process.config import ConfigError, Settings, load_settings
from tests.catalogued import catalogue
from tests.mounts import fill, tmpfs
from tests.server.conftest import TOKENS, Service, write_tokens
from tests.server.test_interceptors import raw_method
from tests.server.test_service import play, refusal, shuffle

DEALER = "gnau.v1.DealerService"
Labels = frozenset[tuple[str, str]]
Samples = dict[tuple[str, Labels], float]

#: The tables these tests deal at, catalogued for the default operator (issue 38).
TABLES = ("t1", "t2", "t3", "t4", "busy", "before", "full")


#: Catalogued by the service fixtures (tests/catalogued.py, catalogue_module_tables).
CATALOGUED = TABLES


async def scrape(port: int | None) -> Samples:
    """Every sample of ``/metrics``, by name and labels, parsed by prometheus_client."""
    assert port is not None, "no port serves the metrics"
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = await response.text()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def scrape_settled(port: int | None) -> Samples:
    """:func:`scrape`, once the service's counters have settled (for at most 5 s): every call
    started is counted as ended, and two scrapes 0.1 s apart agree. A call is counted as it ends
    and a step's entries as the store reports its batch, either of which may come just after the
    answer reached the client."""
    samples = await scrape(port)
    for _ in range(50):
        await asyncio.sleep(0.1)
        again = await scrape(port)
        calls_ended = total(again, "grpc_server_started_total") == total(
            again, "grpc_server_handled_total"
        )
        if calls_ended and counted(again) == counted(samples):
            return again
        samples = again
    return samples


def counted(samples: Samples) -> Samples:
    """The service's own samples that only events move (not the ages, which time moves)."""
    return {
        key: count
        for key, count in samples.items()
        if key[0].startswith(("gnau_", "grpc_"))
        and not key[0].endswith(("age_seconds", "idle_seconds"))
    }


def total(samples: Samples, name: str) -> float:
    return sum(count for (sample, _), count in samples.items() if sample == name)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def total_moved(before: Samples, after: Samples, name: str, state: str) -> float:
    """How far ``name`` moved for ``state``, summed over its other labels."""

    def summed(samples: Samples) -> float:
        return sum(
            count
            for (sample, labels), count in samples.items()
            if sample == name and ("state", state) in labels
        )

    return summed(after) - summed(before)


def rpc(method: str, **more: str) -> dict[str, str]:
    return {"grpc_type": "unary", "grpc_service": DEALER, "grpc_method": method, **more}


async def test_rounds_move_the_counters_by_exactly_what_was_done(metered: Service) -> None:
    port = metered.app.http_port
    before = await scrape_settled(port)
    for table in ("t1", "t2", "t3", "t4"):
        await play(metered, table)
    after = await scrape_settled(port)

    for method in ("Shuffle", "Deal", "Reveal", "Settle"):
        assert moved(before, after, "grpc_server_started_total", **rpc(method)) == 4
        assert moved(before, after, "grpc_server_handled_total", **rpc(method, grpc_code="OK")) == 4
        assert moved(before, after, "grpc_server_handling_seconds_count", **rpc(method)) == 4
    for state in ("SHUFFLED", "DEALT", "REVEALED", "SETTLED"):
        assert moved(before, after, "gnau_round_transitions_total", state=state) == 4
    assert moved(before, after, "gnau_round_transitions_total", state="VOIDED") == 0
    assert value(after, "gnau_round_transitions_total", state="VOIDED") == 0  # present, at 0
    # The same moves by the caller's operator: the test token's record names none, so its
    # operator is default (tests/server/test_operator_metrics.py: which calls, and the bound).
    for state in ("SHUFFLED", "DEALT", "REVEALED", "SETTLED"):
        by_default = moved(
            before, after, "gnau_operator_round_transitions_total", operator="default", state=state
        )
        assert by_default == 4
        assert total_moved(before, after, "gnau_operator_round_transitions_total", state) == 4
    # Four entries a round, sixteen in all; and the log's size is the store's.
    assert moved(before, after, "gnau_log_size") == 16
    assert value(after, "gnau_log_size") == metered.app.store.size()
    assert moved(before, after, "gnau_log_entries_appended_total", kind="ROUND_SETTLED") == 4
    # Each entry was committed in a batch; COMMIT took some time in each.
    batches = moved(before, after, "gnau_store_batch_units_count")
    assert 1 <= batches <= 16
    assert moved(before, after, "gnau_store_batch_units_sum") >= 16
    assert moved(before, after, "gnau_store_commit_seconds_count") == batches
    assert moved(before, after, "gnau_store_commit_seconds_sum") > 0
    assert moved(before, after, "gnau_store_batch_seconds_count") == batches
    assert 0 <= value(after, "gnau_log_checkpoint_age_seconds") < 3600
    assert value(after, "gnau_store_readable") == 1
    assert value(after, "gnau_serving") == 1
    assert value(after, "gnau_rounds_open", state="SHUFFLED") == 0


async def test_refusals_are_counted_under_their_code_and_reason(metered: Service) -> None:
    port = metered.app.http_port
    await shuffle(metered, "busy")
    before = await scrape_settled(port)
    request = dealer_pb2.ShuffleRequest(request_id=str(uuid.uuid4()), table_id="busy")
    unknown_token = metered.dealer.Shuffle(
        request, metadata=(("authorization", "Bearer not-a-token"),)
    )
    assert (await refusal(unknown_token)).code() == grpc.StatusCode.UNAUTHENTICATED
    assert (await refusal(shuffle(metered, "busy"))).code() == grpc.StatusCode.FAILED_PRECONDITION
    undecodable = raw_method(metered.channel, f"/{DEALER}/Shuffle")(
        b"\xff\xff\xff", metadata=(("authorization", f"Bearer {TOKENS['operator']}"),)
    )
    assert (await refusal(undecodable)).code() == grpc.StatusCode.INVALID_ARGUMENT
    after = await scrape_settled(port)

    expected = {
        ("UNAUTHENTICATED", "UNAUTHENTICATED"): 1,
        ("FAILED_PRECONDITION", "TABLE_BUSY"): 1,
        ("INVALID_ARGUMENT", "UNDECODABLE_REQUEST"): 1,
    }
    for (code, reason), count in expected.items():
        handled = rpc("Shuffle", grpc_code=code)
        assert moved(before, after, "grpc_server_handled_total", **handled) == count
        refused = {"grpc_service": DEALER, "grpc_method": "Shuffle", "grpc_code": code}
        assert moved(before, after, "gnau_refusals_total", **refused, reason=reason) == count
    assert moved(before, after, "grpc_server_started_total", **rpc("Shuffle")) == 3
    assert moved(before, after, "grpc_server_handled_total", **rpc("Shuffle", grpc_code="OK")) == 0
    assert moved(before, after, "gnau_round_transitions_total", state="SHUFFLED") == 0
    assert moved(before, after, "gnau_log_size") == 0
    # The round left open on "busy" shows on the open-round gauges, by table.
    assert value(after, "gnau_rounds_open", state="SHUFFLED") == 1
    assert value(after, "gnau_table_rounds_open", table_id="busy", state="SHUFFLED") == 1
    assert ("gnau_table_round_idle_seconds", frozenset({("table_id", "busy")})) in after


async def test_open_streams_are_a_gauge(metered: Service) -> None:
    port = metered.app.http_port
    assert value(await scrape(port), "gnau_streams_open") == 0
    stream = metered.audit.WatchEntries(
        audit_pb2.WatchEntriesRequest(start_index=0),
        metadata=(("authorization", "Bearer audit-token"),),
    )
    await stream.read()  # the stream is open once its first message arrived
    samples = await scrape(port)
    assert value(samples, "gnau_streams_open") == 1
    assert value(samples, "gnau_streams_limit") == metered.settings.max_streams
    assert value(samples, "grpc_server_started_total", grpc_type="server_stream",
                 grpc_service="gnau.v1.AuditService", grpc_method="WatchEntries") == 1  # fmt: skip
    stream.cancel()


async def test_a_metrics_port_serves_only_metrics(tmp_path: Path, settings: Settings) -> None:
    alone = dataclasses.replace(settings, metrics_listen="127.0.0.1:0")
    async with running(alone) as app:
        assert app.http_port is None and app.metrics_port is not None
        samples = await scrape(app.metrics_port)
        # SERVICE_STARTED, CONFIG_CHANGED, and a TABLE_CHANGED for each of the 8 starter tables
        assert value(samples, "gnau_log_size") == 10
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{app.metrics_port}/") as response,
        ):
            assert response.status == 404
    async with running(settings) as app:
        assert app.metrics is None and app.interceptor.observers == ()  # no port, no metrics


async def test_storage_errors_are_counted_and_serving_drops(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", size="2m") as disk:
        settings = Settings(
            listen="127.0.0.1:0",
            http_listen="127.0.0.1:0",
            data_dir=tmp_path / "data",
            database=f"sqlite:///{disk / 'gnau.db'}",
            tokens=write_tokens(tmp_path / "tokens.json"),
            grace_seconds=1,
            shutdown_notice_seconds=0,
        )
        async with (
            running(settings) as app,
            grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
        ):
            service = Service(app, settings, channel)
            await catalogue(app.store, TABLES)  # while the disk has room
            await play(service, "before")
            before = await scrape_settled(app.http_port)
            filler = fill(disk)
            for _ in range(3):
                error = await refusal(shuffle(service, "full"))
                assert error.code() == grpc.StatusCode.UNAVAILABLE
            during = await scrape_settled(app.http_port)
            filler.unlink()
    assert moved(before, during, "gnau_storage_errors_total") == 3
    refused = {"grpc_service": DEALER, "grpc_method": "Shuffle", "grpc_code": "UNAVAILABLE"}
    storage = {**refused, "reason": "STORAGE_UNAVAILABLE"}
    assert moved(before, during, "gnau_refusals_total", **storage) == 3
    assert value(during, "gnau_storage_failing") == 1
    assert value(during, "gnau_serving") == 0


def test_the_metrics_and_tracing_settings_are_checked() -> None:
    assert load_settings(None, {}, {}).metrics_listen == ""  # off unless set
    assert load_settings(None, {}, {}).tracing == "off"
    environment = {"GNAU_METRICS_LISTEN": "[::1]:9464", "GNAU_TRACING": "otlp"}
    settings = load_settings(None, environment, {})
    assert (settings.metrics_listen, settings.tracing) == ("[::1]:9464", "otlp")
    with pytest.raises(ConfigError, match="metrics_listen"):
        load_settings(None, {}, {"metrics_listen": "9464"})
    with pytest.raises(ConfigError, match="tracing"):
        load_settings(None, {}, {"tracing": "jaeger"})


async def test_a_servicers_own_abort_is_counted_under_its_code(metered: Service) -> None:
    before = await scrape_settled(metered.app.http_port)
    unknown = health_pb2_grpc.HealthStub(metered.channel).Check(
        health_pb2.HealthCheckRequest(service="no.such.Service")
    )
    assert (await refusal(unknown)).code() == grpc.StatusCode.NOT_FOUND
    after = await scrape_settled(metered.app.http_port)
    health = {"grpc_type": "unary", "grpc_service": "grpc.health.v1.Health", "grpc_method": "Check"}
    assert moved(before, after, "grpc_server_handled_total", **health, grpc_code="NOT_FOUND") == 1
    assert moved(before, after, "grpc_server_handled_total", **health, grpc_code="OK") == 0
