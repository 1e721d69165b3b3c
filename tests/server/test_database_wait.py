"""A dealer started before its database waits for it, with a bounded, logged backoff, then
serves (a fresh Compose stack: podman-compose starts the dealer before PostgreSQL is ready)."""

from __future__ import annotations

import asyncio
import itertools
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from gnau_client import GnauClient, Seat

from gnau_service.server.process.database_wait import PAUSE_SECONDS, when_reachable
from gnau_service.store import DatabaseUnreachable, StoreError
from tests.replication import unstarted_cluster
from tests.serving import REPO, free_port, served

# make test-system: `gnau serve` processes waiting out a database on real timers.
pytestmark = pytest.mark.system

PASSWORD = "wait-test-password"  # trust auth ignores it; it must never be logged
SEATS = [Seat(seat_number=n, player_id=f"p{n}", stake=10 * n) for n in (1, 2)]


def log_has(path: Path, text: str) -> bool:
    return path.exists() and text in path.read_text(encoding="utf-8", errors="replace")


def test_a_dealer_started_before_postgresql_waits_then_serves(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    log_path = tmp_path / "data-0.log"
    with unstarted_cluster() as cluster:
        url = cluster.url("postgres").replace("postgres@", f"postgres:{PASSWORD}@", 1)

        def start_the_database_late() -> None:
            # Only once the dealer has failed twice: it really started first, and waited.
            deadline = time.monotonic() + 30
            while not log_has(log_path, '"attempt": 2') and time.monotonic() < deadline:
                time.sleep(0.05)
            cluster.start()

        late = threading.Thread(target=start_the_database_late)
        late.start()
        try:
            with served(data_dir, "--database", url, "--database-wait-seconds", "30") as dealer:
                late.join()
                dealer.put_tables(["waited"])  # a round is dealt at a catalogued table
                with GnauClient(dealer.target, token=dealer.token) as client:
                    played = client.play_round("waited", SEATS)
                settled = played.settlement
                assert sum(s.delta for s in settled.seat_results) + settled.dealer_delta == 0
                events = dealer.log_events()
                output = dealer.output()
        finally:
            late.join()
    waits = [e for e in events if e["event"] == "waiting for the database"]
    assert len(waits) >= 2, output
    assert [e["level"] for e in waits[:2]] == ["warning", "info"], "one WARNING, then INFO"
    assert waits[0]["retry_in_seconds"] == PAUSE_SECONDS[0]
    assert waits[1]["retry_in_seconds"] == 2 * PAUSE_SECONDS[0]
    assert "refused" in waits[0]["error"].lower() or "connect" in waits[0]["error"].lower()
    reached = [e for e in events if e["event"] == "database reachable"]
    assert len(reached) == 1 and reached[0]["attempts"] == len(waits) + 1, output
    assert PASSWORD not in output


def gnau_serve(tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable, "-m", "gnau_service.cli.main", "serve", "--log-format", "json",
            "--listen", f"127.0.0.1:{free_port()}", "--data-dir", str(tmp_path / "data"),
            "--database", f"postgresql://postgres:{PASSWORD}@127.0.0.1:{free_port()}/nowhere",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )  # fmt: skip


def test_a_database_that_never_comes_fails_the_start_after_the_wait(tmp_path: Path) -> None:
    started = time.monotonic()
    process = gnau_serve(tmp_path, "--database-wait-seconds", "1")
    _, stderr = process.communicate(timeout=30)
    took = time.monotonic() - started
    assert process.returncode == 2, stderr
    last = stderr.strip().splitlines()[-1]
    assert '"cannot start"' in last and "--database-wait-seconds" in last, stderr
    assert "Traceback" not in stderr and PASSWORD not in stderr
    assert took < 20, f"a 1 s wait took {took:.1f} s"


def test_zero_gives_up_at_once(tmp_path: Path) -> None:
    process = gnau_serve(tmp_path, "--database-wait-seconds", "0")
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 2, stderr
    assert "waiting for the database" not in stderr
    assert '"cannot start"' in stderr and "cannot connect" in stderr, stderr


def test_sigterm_while_waiting_stops_cleanly(tmp_path: Path) -> None:
    process = gnau_serve(tmp_path, "--database-wait-seconds", "60")
    assert process.stderr is not None
    for line in process.stderr:
        if "waiting for the database" in line:
            break
    else:
        pytest.fail(f"no wait was logged; exit {process.wait()}")
    process.send_signal(signal.SIGTERM)
    _, rest = process.communicate(timeout=15)
    assert process.returncode == 0, rest
    assert "stopped before serving" in rest and "Traceback" not in rest


def test_only_an_unreachable_database_is_waited_out() -> None:
    attempts: list[int] = []

    def wrong_database() -> None:
        attempts.append(1)
        raise StoreError("the schema is newer than this gnau")

    with pytest.raises(StoreError, match="newer"):
        asyncio.run(when_reachable(wrong_database, 60))
    assert len(attempts) == 1


def test_the_wait_ends_with_the_last_error_and_its_count() -> None:
    attempts: list[float] = []

    def unreachable() -> None:
        attempts.append(time.monotonic())
        raise DatabaseUnreachable(f"cannot connect: attempt {len(attempts)}")

    with pytest.raises(DatabaseUnreachable) as raised:
        asyncio.run(when_reachable(unreachable, 1.0))
    assert f"attempt {len(attempts)}" in str(raised.value)
    assert f"tried {len(attempts)} times" in str(raised.value)
    # 0.25, 0.5, then what is left of the second: three or four attempts, never a busy loop.
    assert 3 <= len(attempts) <= 4
    pauses = [later - earlier for earlier, later in itertools.pairwise(attempts)]
    assert pauses[0] >= PAUSE_SECONDS[0] and pauses[1] >= 2 * PAUSE_SECONDS[0]
