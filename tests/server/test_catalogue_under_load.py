"""Disabling and enabling tables under load (issue 38), across real processes: ``gnau serve
--workers 2`` on SQLite, and two ``gnau serve`` replicas on one PostgreSQL database.

Players play whole rounds at their tables through every process while the operator disables the
tables from one process, then gaming from the host (``gnau gaming disable``), and enables them
again. Every process follows at once: once a switch is answered, a Shuffle anywhere is refused
(``TABLE_DISABLED``), while the rounds already open complete. The log shows it: no round of a
table is committed after the entry that disabled it, until the entry that enabled it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import grpc
import pytest
from gnau.v1 import dealer_pb2, types_pb2
from gnau_client import GnauClient, Seat
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from gnau_service.audit.entries import EntryKind, LogEntry
from tests.log_checks import verified_log
from tests.server.test_fair_endings_system import BACKENDS, Deployment, deployment
from tests.serving import gnau

pytestmark = pytest.mark.system

TABLES: Final = [f"switched-{n}" for n in range(4)]
CONFIG: Final = dealer_pb2.TableConfig(
    currency="EUR",
    rule_sets=[types_pb2.HouseRules()],
    min_stake=1,
    max_stake=10_000,
    max_seats=6,
    enabled=True,
)
SEATS: Final = [Seat(seat_number=n, player_id=f"p-{n}", stake=10 * n) for n in range(1, 4)]
#: How long the load runs in each phase: enough for every player to finish a few rounds.
PHASE_SECONDS: Final = 1.5


def reason(error: grpc.RpcError) -> str:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    for detail in status.details if status is not None else ():
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info.reason
    return ""


@dataclass
class Player:
    """Plays whole rounds at one table through one process until told to stop: a Shuffle
    refused as TABLE_DISABLED is counted; any other failure is kept, to fail the test."""

    deployed: Deployment
    table: str
    process: int
    stop: threading.Event = field(default_factory=threading.Event)
    settled: int = 0
    refused: int = 0
    failures: list[str] = field(default_factory=list)

    def run(self) -> None:
        while not self.stop.is_set():
            with GnauClient(self.deployed.target(self.process), token=self.deployed.token) as c:
                try:
                    round_ = c.shuffle(self.table)
                except grpc.RpcError as error:
                    if reason(error) != "TABLE_DISABLED":
                        self.failures.append(f"Shuffle: {error.code()} {error.details()}")
                    self.refused += 1
                    time.sleep(0.05)
                    continue
                # A round shuffled completes, whatever is switched off meanwhile.
                try:
                    c.deal(round_.round_id, SEATS)
                    c.reveal(round_.round_id)
                    c.settle(round_.round_id)
                    self.settled += 1
                except grpc.RpcError as error:
                    self.failures.append(f"after Shuffle: {error.code()} {error.details()}")


@contextmanager
def playing(deployed: Deployment) -> Iterator[list[Player]]:
    players = [Player(deployed, table, n) for n, table in enumerate(TABLES)]
    threads = [threading.Thread(target=player.run) for player in players]
    for thread in threads:
        thread.start()
    try:
        yield players
    finally:
        for player in players:
            player.stop.set()
        for thread in threads:
            thread.join(timeout=60)


def refused_everywhere(deployed: Deployment, disabled: str) -> None:
    """A Shuffle through each process is refused at once, naming what is disabled."""
    for process in range(len(deployed.processes)):
        with GnauClient(deployed.target(process), token=deployed.token) as client:
            for table in TABLES:
                with pytest.raises(grpc.RpcError) as refused:
                    client.shuffle(table)
                assert reason(refused.value) == "TABLE_DISABLED", refused.value
                assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
                assert disabled in (refused.value.details() or ""), refused.value


def switch_tables(deployed: Deployment, enabled: bool) -> None:
    with GnauClient(deployed.target(1), token=deployed.token) as client:  # another process
        for table in TABLES:
            assert client.set_table_enabled(table, enabled).config.enabled is enabled


def switch_gaming(deployed: Deployment, enabled: bool) -> None:
    """``gnau gaming enable|disable`` on the host: the deployment's database and log key (the
    first replica's, which the others share)."""
    first = "data" if deployed.backend == "sqlite-workers" else "replica-b"
    ran = gnau(
        "gaming", "enable" if enabled else "disable",
        "--database", deployed.url,
        "--key", str(deployed.work / first / "log-signing-key.pem"),
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr


def switches(entries: list[LogEntry]) -> list[tuple[int, str, bool]]:
    """Each switch of the test's tables or of gaming: (index, what, enabled)."""
    found = []
    for entry in entries:
        if entry.kind is EntryKind.TABLE_CHANGED and entry.payload["table_id"] in TABLES:
            found.append(
                (entry.index, str(entry.payload["table_id"]), entry.payload["config"]["enabled"])
            )
        elif entry.kind is EntryKind.GAMING_CHANGED:
            found.append((entry.index, "gaming", entry.payload["enabled"]))
    return found


@pytest.mark.parametrize("backend", BACKENDS)
def test_switches_under_load_stop_new_rounds_everywhere_and_open_ones_complete(
    backend: str, tmp_path: Path
) -> None:
    with deployment(backend, tmp_path) as deployed:
        with GnauClient(deployed.target(0), token=deployed.token) as client:
            for table in TABLES:
                client.put_table(table, CONFIG)
        with playing(deployed) as players:
            time.sleep(PHASE_SECONDS)
            switch_tables(deployed, False)
            refused_everywhere(deployed, "table")
            time.sleep(PHASE_SECONDS)
            switch_tables(deployed, True)
            time.sleep(PHASE_SECONDS)
            switch_gaming(deployed, False)
            refused_everywhere(deployed, "gaming")
            time.sleep(PHASE_SECONDS)
            switch_gaming(deployed, True)
            time.sleep(PHASE_SECONDS)
        for player in players:
            assert player.failures == [], player.failures
            assert player.settled > 0 and player.refused > 0, (player.table, player.settled)
        log = verified_log(deployed.url, tmp_path, deployed.vkey).entries
        deployed.stop()

    # The log: between the entry that disabled a table (or gaming) and the one that enabled
    # it again, no round of it is committed.
    off: dict[str, int] = {}
    closed: list[tuple[int, int, str]] = []
    for index, what, enabled in switches(log):
        if not enabled:
            off[what] = index
        elif what in off:
            closed.append((off.pop(what), index, what))
    assert len(closed) == len(TABLES) + 1 and not off, switches(log)
    for start, end, what in closed:
        committed = [
            entry.payload["table_id"]
            for entry in log[start:end]
            if entry.kind is EntryKind.ROUND_COMMITTED
        ]
        if what == "gaming":
            assert committed == [], (start, end, committed)
        else:
            assert what not in committed, (start, end, what)
