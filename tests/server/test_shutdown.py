"""A graceful stop, in order: health NOT_SERVING (and still answering) first, new calls refused,
streams ended with UNAVAILABLE, calls in flight finished; then a process exits 0, quietly."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from gnau.v1 import audit_pb2, audit_pb2_grpc, dealer_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gnau_service.edge.shutdown import EXIT_SECONDS
from gnau_service.rounds.dealer import Dealer
from gnau_service.rounds.view import RoundView
from gnau_service.server.process.app import running
from gnau_service.server.process.config import Settings
from tests.catalogued import catalogue
from tests.server.conftest import TOKENS, Service, write_tokens
from tests.server.test_interceptors import error_info
from tests.serving import served

# make test-system: SIGTERM to `gnau serve` processes and the grace timer.
pytestmark = pytest.mark.system

AUDITOR = (("authorization", f"Bearer {TOKENS['auditor']}"),)


async def test_shutdown_goes_in_order(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = dataclasses.replace(settings, shutdown_notice_seconds=0.5, grace_seconds=5)
    slow_call_started = asyncio.Event()
    real_get = Dealer.get

    def slow_get(self: Dealer, round_id: str, **options: bool) -> RoundView:
        slow_call_started.set()
        time.sleep(0.8)  # still running when the stop begins, done within the grace
        return real_get(self, round_id, **options)

    async with (
        running(settings) as app,
        grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel,
    ):
        service = Service(app, settings, channel)
        await catalogue(app.store, ["t"])  # the table the round is shuffled at
        health = health_pb2_grpc.HealthStub(channel)
        watch_health = health.Watch(health_pb2.HealthCheckRequest())
        assert (await watch_health.read()).status == health_pb2.HealthCheckResponse.SERVING
        watch_entries = service.audit.WatchEntries(
            audit_pb2.WatchEntriesRequest(start_index=0), metadata=AUDITOR
        )
        assert (await watch_entries.read()).entries[0].index == 0
        settled = await service.call(
            "dealer",
            "Shuffle",
            dealer_pb2.ShuffleRequest(request_id="shutdown-1", table_id="t"),
        )
        monkeypatch.setattr(Dealer, "get", slow_get)
        in_flight = asyncio.ensure_future(
            service.call(
                "dealer", "GetRound", dealer_pb2.GetRoundRequest(round_id=settled.round.round_id)
            )
        )
        await slow_call_started.wait()

        began = time.monotonic()
        stopping = asyncio.ensure_future(app.stop())
        await asyncio.sleep(0.1)
        # 1. Health says NOT_SERVING, to Watch and to Check, and still answers.
        assert (await watch_health.read()).status == health_pb2.HealthCheckResponse.NOT_SERVING
        checked = await health.Check(health_pb2.HealthCheckRequest())
        assert checked.status == health_pb2.HealthCheckResponse.NOT_SERVING
        # 2. New calls are refused, retryably.
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await service.call("dealer", "GetRound", dealer_pb2.GetRoundRequest(round_id="r"))
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert error_info(refused.value).reason == "SHUTTING_DOWN"
        # 3. Streams end with UNAVAILABLE, once the notice period is over.
        for stream in (watch_entries, watch_health):
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                while True:
                    await stream.read()
            assert ended.value.code() == grpc.StatusCode.UNAVAILABLE
        streams_ended = time.monotonic() - began
        # 4. The call in flight finishes.
        assert (await in_flight).round.round_id == settled.round.round_id
        await stopping
        stopped = time.monotonic() - began
    # Streams ended at the notice (0.5 s), the stop as soon as the slow call was done: neither
    # waited for the 5 s grace.
    assert streams_ended < settings.grace_seconds and stopped < settings.grace_seconds
    err = capsys.readouterr().err
    assert "Traceback" not in err and '"level": "error"' not in err


async def test_a_stream_opened_during_shutdown_is_refused(service: Service) -> None:
    service.app.shutdown.begin()
    service.app.streams.end_all()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        stream = service.audit.WatchEntries(
            audit_pb2.WatchEntriesRequest(start_index=0), metadata=AUDITOR
        )
        await stream.read()
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


def test_sigterm_with_open_streams_exits_zero_quickly_and_quietly(tmp_path: Path) -> None:
    # The test's tokens, written before the start (which then makes none): an auditor of every
    # operator, who may watch the log.
    (tmp_path / "data").mkdir(mode=0o700)
    write_tokens(tmp_path / "data" / "tokens.json")
    with served(tmp_path / "data") as server:

        async def watch_then_terminate() -> tuple[set[grpc.StatusCode], float]:
            async with grpc.aio.insecure_channel(server.target) as channel:
                stub = audit_pb2_grpc.AuditServiceStub(channel)
                token = (("authorization", f"Bearer {TOKENS['auditor']}"),)
                calls = [
                    stub.WatchEntries(audit_pb2.WatchEntriesRequest(start_index=0), metadata=token)
                    for _ in range(6)
                ]
                for call in calls:
                    await call.read()
                began = time.monotonic()
                server.process.terminate()
                codes = set()
                for call in calls:
                    with pytest.raises(grpc.aio.AioRpcError) as ended:
                        while True:
                            await call.read()
                    codes.add(ended.value.code())
                return codes, time.monotonic() - began

        codes, streams_ended_after = asyncio.run(watch_then_terminate())
        began = time.monotonic()
        status = server.process.wait(timeout=15)
        exited_after = time.monotonic() - began
    assert status == 0
    assert codes == {grpc.StatusCode.UNAVAILABLE}
    # The grace period is 10 s; open streams must not hold the stop for it.
    assert streams_ended_after < 3 and exited_after < 5
    output = server.output()
    assert "Traceback" not in output and "CancelledError" not in output
    for line in output.splitlines():
        json.loads(line)  # every line of a JSON-mode service is JSON


def test_sigterm_as_soon_as_serving_is_logged_exits_zero(tmp_path: Path) -> None:
    """The "serving" line is written inside the start; the signal handlers must already be in
    place then, or a prompt SIGTERM (a supervisor's, a test's) kills the process (-15)."""
    for attempt in range(3):
        with served(tmp_path / f"data-{attempt}") as server:
            pass  # served() returns as the "serving" line appears; leaving stops at once
        assert server.process.returncode == 0
        assert "Traceback" not in server.output()


def test_a_stopped_process_exits_despite_a_blocked_worker_thread() -> None:
    """Step 6: a worker thread blocked without end (a read on a database whose network is gone)
    does not keep the process alive past EXIT_SECONDS; it exits 0 with one WARNING."""
    program = (
        "import threading, time\n"
        "from gnau_service.server.process.structured_logs import configure_logging\n"
        "from gnau_service.edge.shutdown import exit_within\n"
        "configure_logging('json')\n"
        "threading.Thread(target=threading.Event().wait, name='blocked-read').start()\n"
        "exit_within(0.5)\n"
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=30, check=False
    )
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    (warning,) = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert warning["event"] == "exiting with threads still blocked", warning
    assert warning["level"] == "warning" and "blocked-read" in warning["threads"]
    assert took < 10, f"exited after {took:.1f} s"


def test_the_exit_bound_is_what_the_docs_say() -> None:
    api = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    assert f"within {EXIT_SECONDS:g} s of the store closing" in " ".join(api.split())
