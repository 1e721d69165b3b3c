"""A store that cannot write (a full disk, a read-only database) is UNAVAILABLE to clients,
which retry; the cause is logged once per outage; health says NOT_SERVING until a probe
writes again. Real failures: a full tmpfs, a PostgreSQL database turned read-only."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import psycopg
import pytest
from gnau.v1 import dealer_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gnau_service.server.process.app import running
from gnau_service.server.process.config import Settings
from gnau_service.server.process.structured_logs import configure_logging
from tests.catalogued import catalogue
from tests.mounts import fill, tmpfs
from tests.postgres import admin_url, fresh_database
from tests.server.conftest import Service, write_tokens
from tests.server.test_interceptors import error_info, log_lines
from tests.server.test_service import play

# make test-system: tmpfs mounts filled to the last byte.
pytestmark = pytest.mark.system

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
#: The tables this module's tests shuffle at, in the default operator's catalogue (issue 38).
TABLES = ("before", "after", "full")


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, database: str) -> AsyncIterator[Service]:
    """The service on ``database``, its catalogue holding :data:`TABLES`."""
    settings = Settings(
        listen="127.0.0.1:0",
        data_dir=tmp_path / "data",
        database=database,
        tokens=write_tokens(tmp_path / "tokens.json"),
        grace_seconds=1,
        shutdown_notice_seconds=0,
    )
    async with (
        running(settings) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        await catalogue(app.store, TABLES)
        yield Service(app, settings, channel)


async def health_of(channel: grpc.aio.Channel, name: str = "") -> int:
    answer = await health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(service=name)
    )
    return int(answer.status)


async def until_health(channel: grpc.aio.Channel, status: int, name: str = "") -> None:
    """Wait (a liveness bound, not a timing claim) until health reports ``status``."""
    for _ in range(200):
        if await health_of(channel, name) == status:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"health never reported {status}")


async def shuffle_refused(service: Service) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await service.call(
            "dealer",
            "Shuffle",
            dealer_pb2.ShuffleRequest(request_id=str(uuid.uuid4()), table_id="full"),
        )
    return caught.value


async def test_a_full_disk_is_unavailable_logged_once_and_recovers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("json")
    with tmpfs(tmp_path / "disk", size="2m") as disk:
        async with serving(tmp_path, f"sqlite:///{disk / 'gnau.db'}") as service:
            channel = service.channel
            await play(service, "before")
            filler = fill(disk)
            errors = [await shuffle_refused(service) for _ in range(3)]
            assert {error.code() for error in errors} == {grpc.StatusCode.UNAVAILABLE}
            assert {error_info(error).reason for error in errors} == {"STORAGE_UNAVAILABLE"}
            assert "disk" not in str(errors[0].details()), (
                "the cause is the operator's, not the client's"
            )
            await until_health(channel, NOT_SERVING)
            assert await health_of(channel, "gnau.v1.AuditService") == SERVING  # reads still work
            filler.unlink()
            await until_health(channel, SERVING)
            settled = await play(service, "after")  # the same client carries on
            assert len(settled.log_indices) == 4
    lines = log_lines(capsys.readouterr().err)
    outages = [line for line in lines if line["event"].startswith("storage unavailable")]
    assert len(outages) == 1 and "full" in str(outages[0]["cause"])
    recoveries = [line for line in lines if line["event"] == "storage available again"]
    assert len(recoveries) == 1 and recoveries[0]["refused_calls"] >= 3
    assert not any("exception" in line for line in lines), "no traceback for an outage"


async def test_a_read_only_postgresql_database_is_unavailable_and_recovers(
    tmp_path: Path,
) -> None:
    with fresh_database() as url:
        name = url.rsplit("/", 1)[1]
        async with serving(tmp_path, url) as service:
            channel = service.channel
            await play(service, "before")
            with psycopg.connect(admin_url(), autocommit=True) as admin:
                admin.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
                # Every connection of the service starts again, read-only now.
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                    (name,),
                )
                error = await shuffle_refused(service)
                assert error.code() == grpc.StatusCode.UNAVAILABLE
                await until_health(channel, NOT_SERVING)
                admin.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                    (name,),
                )
            await until_health(channel, SERVING)
            for _ in range(50):  # the reader pool drops its dead connections as it meets them
                try:
                    await play(service, "after")
                    break
                except grpc.aio.AioRpcError as retry:
                    assert retry.code() == grpc.StatusCode.UNAVAILABLE
            else:
                raise AssertionError("never played again")


def test_a_database_in_a_read_only_directory_is_a_one_line_error(tmp_path: Path) -> None:
    from tests.serving import gnau

    with tmpfs(tmp_path / "ro", read_only=True) as read_only:
        result = gnau(
            "serve",
            "--listen", "127.0.0.1:0",
            "--data-dir", str(tmp_path / "data"),
            "--database", f"sqlite:///{read_only / 'gnau.db'}",
        )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    lines = [json.loads(line) for line in result.stderr.splitlines()]
    assert lines[-1]["event"] == "cannot start" and lines[-1]["level"] == "error"
    assert "exception" not in lines[-1]


def test_the_storage_probe_writes_without_holding_the_log_head() -> None:
    """Only the log's own work and migrations may hold the head's row, each for at most the lease
    (gnau_service/store/lease.py): the probe's write, its transaction still open, leaves it
    free, while it does hold the row it writes."""
    from gnau_service.server.process.store_health import probe_write
    from gnau_service.store.postgres import PostgresBackend
    from gnau_service.store.schema import create_schema
    from gnau_service.store.transaction import Transaction, utc_now

    with fresh_database() as url:
        backend = PostgresBackend(url)
        connection = backend.connect()
        try:
            create_schema(backend, connection)
            connection.execute("BEGIN")
            probe_write(Transaction(backend, connection, utc_now()))
            with psycopg.connect(url, autocommit=True) as other:
                other.execute("SELECT 1 FROM log_head WHERE id = 1 FOR UPDATE NOWAIT")
                with pytest.raises(psycopg.errors.LockNotAvailable):
                    other.execute("SELECT 1 FROM gnau_migrations FOR UPDATE NOWAIT")
        finally:
            connection.close()
            backend.close()
