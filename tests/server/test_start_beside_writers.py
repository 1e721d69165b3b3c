"""A second service starting, again and again, on a log that a live service is writing (on
PostgreSQL, and on SQLite, as a restarted worker of ``--workers`` does): every start is clean
and the writer never sees an error (on PostgreSQL, schema setup took locks that deadlocked with
live batches, failing about 4 starts in 25)."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from gnau_client import GnauClient, Seat
from gnau_client.aio import AsyncGnauClient

from gnau_service.audit.entries import EntryKind
from gnau_service.server.process.app import running
from gnau_service.server.process.config import Settings
from gnau_service.server.process.structured_logs import configure_logging
from tests.log_checks import verified_log
from tests.postgres import database_of
from tests.serving import Served, served
from tests.store.test_schema_startup import deadlocks_in

# make test-system: `gnau serve` processes started beside live writers.
pytestmark = pytest.mark.system

RESTARTS = 25  # the count, in every run of the system tests
SEATS = [Seat(seat_number=n, player_id=f"player-{n}", stake=10 * n) for n in (1, 2, 3)]


@dataclass
class Load:
    """What the writer's client saw: every round it finished, and every error."""

    rounds: int = 0
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)


def keep_playing(service: Served, load: Load) -> None:
    # No client retries: a failure the server reports must count, not be retried away.
    with GnauClient(service.target, token=service.token, retry=None) as client:
        while not load.stop.is_set():
            try:
                client.play_round("table-under-load", SEATS)
            except Exception as error:  # every failure counts, whatever it is
                load.errors.append(repr(error))
            else:
                load.rounds += 1


async def start_and_stop(settings: Settings, token: str, times: int) -> list[str]:
    """Start a service ``times`` times, each time call it once and stop it; the failures."""
    failures = []
    for attempt in range(times):
        try:
            async with (
                running(settings) as app,
                AsyncGnauClient(f"127.0.0.1:{app.port}", token=token) as client,
            ):
                assert await client.get_checkpoint()
        except Exception as error:
            failures.append(f"start {attempt + 1}: {error!r}")
    return failures


@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
def test_a_second_service_starts_cleanly_beside_a_live_writer(backend: str, tmp_path: Path) -> None:
    configure_logging("json")
    with database_of(backend, tmp_path / "writer" / "gnau.db") as url:
        with served(tmp_path / "writer", "--database", url) as writer:
            writer.put_tables(["table-under-load"])  # a round is dealt at a catalogued table
            load = Load()
            player = threading.Thread(target=keep_playing, args=(writer, load))
            player.start()
            try:
                while load.rounds == 0 and not load.errors and player.is_alive():
                    time.sleep(0.05)  # the writer is mid-load before the first restart
                second = Settings(
                    listen="127.0.0.1:0",
                    data_dir=tmp_path / "second",
                    database=url,
                    key=writer.data_dir / "log-signing-key.pem",  # one log, one key
                    tokens=writer.data_dir / "tokens.json",
                    grace_seconds=1,
                    shutdown_notice_seconds=0,
                )
                began = time.monotonic()
                rounds_before = load.rounds
                failures = asyncio.run(start_and_stop(second, writer.token, RESTARTS))
                seconds = time.monotonic() - began
                rounds_during = load.rounds - rounds_before
            finally:
                load.stop.set()
                player.join(timeout=60)
        writer_output = writer.output()  # all of it: the writer has stopped
        deadlocks = deadlocks_in(url) if backend == "postgresql" else 0
        print(
            f"\n{RESTARTS} starts, {len(failures)} failed, in {seconds:.1f} s; the writer played"
            f" {rounds_during} rounds meanwhile ({load.rounds} in all), {len(load.errors)} errors;"
            f" {deadlocks} deadlocks"
        )
        assert failures == []
        assert load.errors == []
        # A batch that is a deadlock's victim is rerun, unseen by its client: PostgreSQL counts it.
        assert deadlocks == 0
        assert rounds_during > 0, "the writer was not writing while the second service started"
        for sign_of_trouble in ("Traceback", "ERROR", '"level": "error"'):
            assert sign_of_trouble not in writer_output
        assert_the_log_verifies(url, tmp_path, writer.vkey, starts=1 + RESTARTS, rounds=load.rounds)


def assert_the_log_verifies(url: str, work: Path, vkey: str, *, starts: int, rounds: int) -> None:
    """Gap-free indices, and the whole log (entries, checkpoints, rounds) verifies offline."""
    log = verified_log(url, work, vkey)
    assert sum(entry.kind is EntryKind.SERVICE_STARTED for entry in log.entries) == starts
    report = log.report
    assert (report.entries, report.rounds_settled, report.rounds_open) == (
        len(log.entries),
        rounds,
        0,
    )
