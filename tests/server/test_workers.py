"""``gnau serve --workers N``: a supervisor and N real worker processes on one port and one
database (SQLite and PostgreSQL), checked from the outside: clients, signals, SIGKILL, the
metrics port, and the log afterwards."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Final

import psycopg
import pytest
from gnau_client import GnauClient

from gnau_service.server.process.supervisor import WATCHDOG_SECONDS
from gnau_service.server.process.workers import HEARTBEAT_SECONDS
from gnau_service.store.lease import DEFAULT_LEASE_SECONDS, takeover_bound
from tests.failover_drill import SEATS, Player, start_players
from tests.log_checks import verified_log
from tests.postgres import fresh_database
from tests.serving import (
    Served,
    free_port,
    gnau,
    served,
    served_with_http,
    worker_pids,
)

# make test-system: worker processes, killed and restarted.
pytestmark = pytest.mark.system

#: The metrics only a worker of --workers has (the alert rules use them).
WORKER_METRICS: Final = frozenset({"gnau_worker_up", "gnau_worker_restarts_total"})
#: How long a test waits for a condition that takes a fraction of a second when all is well.
PATIENCE_SECONDS: Final = 30.0


def until(condition: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + PATIENCE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return str(response.read().decode())


def samples(text: str, name: str) -> dict[str, float]:
    """``name``'s samples by their ``worker`` label (one sample per worker expected)."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, _, value = line.rpartition(" ")
            worker = labels.split('worker="', 1)[1].split('"', 1)[0]
            found[worker] = found.get(worker, 0.0) + float(value)
    return found


def test_workers_share_one_port_and_one_log_and_each_answers(tmp_path: Path) -> None:
    with served_with_http(tmp_path / "data", "--workers", "2") as http:
        server = http.served
        assert len(worker_pids(server.process.pid)) == 2
        serving = [e for e in server.log_events() if e["event"] == "serving"]
        assert sorted(str(e.get("worker")) for e in serving) == ["0", "1", "None"]
        supervisor_line = next(e for e in serving if "worker" not in e)
        assert supervisor_line["workers"] == 2
        tables = [f"table-{table}" for table in range(16)]
        server.put_tables(tables)  # a round is dealt only at a catalogued table
        # Each client its own connection: the kernel spreads connections, not calls.
        rounds = []
        for table in tables:
            with GnauClient(server.target, token=server.token) as client:
                rounds.append(client.play_round(table, SEATS))
        assert len({round_.round_id for round_ in rounds}) == 16
        text = scrape(http.metrics)
        started = samples(text, "grpc_server_started_total")
        assert set(started) == {"0", "1"} and all(count > 0 for count in started.values()), started
        assert samples(text, "gnau_worker_up") == {"0": 1.0, "1": 1.0}
        assert all(samples(text, name) for name in WORKER_METRICS)
        # Every sample says which worker it is from.
        unlabelled = [
            line
            for line in text.splitlines()
            if line and not line.startswith("#") and 'worker="' not in line
        ]
        assert not unlabelled, unlabelled[:5]
        # The page port answers /metrics for every worker too.
        assert samples(scrape(http.page), "gnau_worker_up") == {"0": 1.0, "1": 1.0}
    checked = verified_log(server.database, tmp_path, server.vkey).report
    assert checked.rounds_settled == 16


def test_a_killed_worker_is_started_again_and_sigterm_drains_every_worker(
    tmp_path: Path,
) -> None:
    with served_with_http(tmp_path / "data", "--workers", "2") as http:
        server = http.served
        first, second = worker_pids(server.process.pid)
        os.kill(second, signal.SIGKILL)
        until(
            lambda: len(set(worker_pids(server.process.pid)) - {first, second}) == 1,
            "a new worker in the killed one's place",
        )
        until(lambda: len(serving_workers(server)) == 4, "the new worker serving")
        restarted = [e for e in server.log_events() if e["event"].startswith("worker exited")]
        assert restarted[0]["status"] == "killed by SIGKILL"
        assert restarted[0]["restarts"] == 1
        restarts = samples(scrape(http.metrics), "gnau_worker_restarts_total")
        assert sorted(restarts.values()) == [0.0, 1.0]
        server.put_tables(["after-the-kill"])
        with GnauClient(server.target, token=server.token) as client:
            assert client.play_round("after-the-kill", SEATS).round_id
        # SIGHUP reaches every worker: each rereads the token file.
        server.process.send_signal(signal.SIGHUP)
        until(
            lambda: (
                {
                    e["worker"]
                    for e in server.log_events()
                    if e["event"] == "tokens reloaded" and e["trigger"] == "SIGHUP"
                }
                == {0, 1}
            ),
            "both workers rereading the tokens",
        )
        workers = worker_pids(server.process.pid)
    # served() sent SIGTERM and required exit 0 within the grace period; every worker is gone.
    assert all(not Path(f"/proc/{pid}").exists() for pid in workers)
    stopped = [e for e in server.log_events() if e["event"] == "stopped"]
    assert sorted(str(e.get("worker")) for e in stopped) == ["0", "1", "None"]


def serving_workers(server: Served) -> list[dict[str, object]]:
    return [e for e in server.log_events() if e["event"] == "serving"]


def test_a_killed_supervisor_takes_its_workers_with_it(tmp_path: Path) -> None:
    with served(tmp_path / "data", "--workers", "2") as server:
        workers = worker_pids(server.process.pid)
        server.process.kill()
        server.expected_status = server.process.wait()
        assert server.expected_status == -signal.SIGKILL
        # Each worker gets SIGTERM from the kernel and drains as on a graceful stop.
        until(
            lambda: not any(Path(f"/proc/{pid}").exists() for pid in workers),
            "the workers exiting after their supervisor",
        )
    assert sum(e["event"] == "stopped" for e in server.log_events()) == 2


def test_a_busy_port_and_a_worker_that_cannot_start_fail_the_start(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        busy = gnau("serve", "--workers", "2", "--listen", f"127.0.0.1:{port}",
                    "--data-dir", str(tmp_path / "busy"))  # fmt: skip
    assert busy.returncode == 2
    assert "another process holds it" in busy.stderr and "GNAU_LISTEN" in busy.stderr
    # Said as one process says it (tests/cli/test_serve_commands.py).
    refused = next(json.loads(line) for line in busy.stderr.splitlines() if "cannot start" in line)
    assert refused["error"] == (
        f"[Errno 98] --listen 127.0.0.1:{port} (GNAU_LISTEN): Address already in use; "
        "another process holds it"
    )
    # Each worker reads the TLS files itself: a missing one fails every worker's start.
    broken = gnau(
        "serve", "--workers", "2", "--listen", f"127.0.0.1:{free_port()}",
        "--data-dir", str(tmp_path / "broken"), "--tls-cert", str(tmp_path / "missing.pem"),
        "--tls-key", str(tmp_path / "missing.key"), timeout=60,
    )  # fmt: skip
    assert broken.returncode == 2, broken.stderr
    last = json.loads(broken.stderr.strip().splitlines()[-1])
    assert last["event"] == "stopped" and "worker" not in last
    refusal = next(
        json.loads(line)
        for line in broken.stderr.splitlines()
        if '"cannot start"' in line and '"worker"' not in line
    )
    assert "before serving" in refusal["error"]


# -- crash safety: SIGKILL at random under retried load -------------------------------------------

#: Workers killed in each crash test, one at a time, at random moments.
KILLS: Final = 4
#: The most time between two kills (seconds); each pause is drawn up to it.
KILL_PAUSE_SECONDS: Final = 1.5


def each_acknowledged_after(players: list[Player], moment: float) -> None:
    """Wait until every player has had a step acknowledged after ``moment``: a player whose
    step hung on a dead or frozen worker's connection too."""
    until(
        lambda: all(any(ack.acknowledged > moment for ack in p.acks) for p in players),
        "every player acknowledged again",
    )


def stop_players(stop: threading.Event, threads: list[threading.Thread]) -> None:
    stop.set()
    for thread in threads:
        thread.join(timeout=120)


def kill_workers_under_load(server: Served, kills: int = KILLS) -> list[Player]:
    """Three players play rounds (retrying refused steps with the same request id) while
    ``kills`` workers are killed with SIGKILL, one at a time; then the players stop."""
    stop = threading.Event()
    # The workers, and on PostgreSQL the sequencer's own process: any of them may be killed.
    children = len(worker_pids(server.process.pid))
    players, threads = start_players([server] * 3, ["a", "b", "c"], stop)
    chooser = random.Random(os.environ.get("GNAU_KILL_SEED", "26"))
    try:
        for _ in range(kills):
            time.sleep(chooser.uniform(0.2, KILL_PAUSE_SECONDS))
            until(lambda: len(worker_pids(server.process.pid)) == children, "every child running")
            os.kill(chooser.choice(worker_pids(server.process.pid)), signal.SIGKILL)
        # After the last kill: every player's rounds flow again.
        each_acknowledged_after(players, time.monotonic())
    finally:
        stop_players(stop, threads)
    for player in players:
        assert not player.failures, player.failures
    # The kills cut calls in flight or connections in use: the players had to retry.
    assert sum(player.retries for player in players) > 0
    assert sum(player.rounds_settled() for player in players) > 0
    return players


def test_sigkill_of_sqlite_workers_under_load_loses_no_acknowledged_step(tmp_path: Path) -> None:
    with served(tmp_path / "data", "--workers", "2") as server:
        players = kill_workers_under_load(server)
    checked = verified_log(server.database, tmp_path, server.vkey, players).report
    assert checked.rounds_settled >= sum(player.rounds_settled() for player in players)


def test_sigkill_of_postgresql_workers_under_load_loses_no_acknowledged_step(
    tmp_path: Path,
) -> None:
    with fresh_database() as url:
        with served(tmp_path / "data", "--workers", "2", "--database", url) as server:
            players = kill_workers_under_load(server)
        checked = verified_log(url, tmp_path, server.vkey, players).report
    assert checked.rounds_settled >= sum(player.rounds_settled() for player in players)


def lease_holder(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute("SELECT holder FROM log_lease").fetchone()
    return "" if row is None else str(row[0])


def test_postgresql_workers_have_a_sequencer_process_of_their_own(tmp_path: Path) -> None:
    """On PostgreSQL the supervisor runs the log's sequencer in a process that serves no port,
    started before the workers: it holds the lease. Killed under load, a worker takes the lease
    within the takeover bound, the supervisor starts the sequencer's process again, and no
    acknowledged step is lost."""
    with fresh_database() as url:
        with served(tmp_path / "data", "--workers", "2", "--database", url) as server:
            (serving,) = [
                e for e in server.log_events() if e["event"] == "serving" and "workers" in e
            ]
            sequencer = serving["sequencer"]
            assert sequencer in worker_pids(server.process.pid)
            assert sequencer not in serving["pids"] and len(serving["pids"]) == 2
            assert lease_holder(url) == f"gnau-sequencer-{sequencer}"
            stop = threading.Event()
            players, threads = start_players([server] * 2, ["a", "b"], stop)
            try:
                until(lambda: all(player.acks for player in players), "rounds flowing")
                os.kill(sequencer, signal.SIGKILL)
                killed = time.monotonic()
                until(
                    lambda: (
                        lease_holder(url).removeprefix("gnau-sequencer-")
                        in {str(pid) for pid in serving["pids"]}
                    ),
                    "a worker leads",
                )
                assert time.monotonic() - killed <= takeover_bound(DEFAULT_LEASE_SECONDS) + 2
                each_acknowledged_after(players, time.monotonic())
                until(
                    lambda: len(worker_pids(server.process.pid)) == 3,
                    "the sequencer's process started again",
                )
            finally:
                stop_players(stop, threads)
        for player in players:
            assert not player.failures, player.failures
        verified_log(url, tmp_path, server.vkey, players)


def test_a_frozen_sqlite_worker_holding_the_write_lock_is_replaced_within_the_watchdog_bound(
    tmp_path: Path,
) -> None:
    with served(tmp_path / "data", "--workers", "2") as server:
        stop = threading.Event()
        players, threads = start_players([server] * 2, ["a", "b"], stop)
        try:
            until(lambda: all(player.acks for player in players), "rounds flowing")
            frozen = worker_pids(server.process.pid)[0]
            # Frozen at a random moment under load: often inside its write transaction.
            os.kill(frozen, signal.SIGSTOP)
            stopped = time.monotonic()
            until(
                lambda: frozen not in worker_pids(server.process.pid),
                "the frozen worker killed by the supervisor",
            )
            ended = time.monotonic()
            replaced = ended - stopped
            # Every player's rounds flow again, those stuck on the frozen worker's connection too.
            each_acknowledged_after(players, ended)
        finally:
            stop_players(stop, threads)
        killed = [
            e for e in server.log_events() if e["event"] == "worker stopped answering; killing it"
        ]
        assert killed and killed[0]["silent_seconds"] >= WATCHDOG_SECONDS
    # Silent for the watchdog's bound since its last beat, which came up to a beat before the
    # freeze (the log line's silent_seconds, above, holds the bound itself).
    assert WATCHDOG_SECONDS - HEARTBEAT_SECONDS <= replaced <= WATCHDOG_SECONDS + 5, replaced
    for player in players:
        assert not player.failures, player.failures
    verified_log(server.database, tmp_path, server.vkey, players)
