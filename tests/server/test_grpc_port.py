"""The gRPC port's budget (issue 39, part 1): its connections come from the same descriptor
limit as the HTTP ports, and its handshake, idle time, age, streams and metadata are bounded.

The numbers are the test's own, as docs/api.md (*Limits*) states them; a flood of idle
connections under a 1024 descriptor limit takes the port's share and nothing else.
"""

from __future__ import annotations

import re
import resource
import socket
import time
from pathlib import Path
from typing import Final

import pytest
from gnau_client import GnauClient, Seat

from gnau_service.server.process.app import _channel_options
from gnau_service.server.process.config import Settings
from tests.serving import REPO, free_port, served

API: Final = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
OPERATIONS: Final = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
#: Each option, as docs/api.md's limits table states it.
OPTIONS: Final = {
    "grpc.server_handshake_timeout_ms": 5_000,
    "grpc.max_connection_idle_ms": 300_000,
    "grpc.max_connection_age_ms": 1_800_000,
    "grpc.max_connection_age_grace_ms": 30_000,
    "grpc.max_concurrent_streams": 100,
    "grpc.max_metadata_size": 8192,
    "grpc.absolute_max_metadata_size": 16384,
}


def test_the_server_is_built_with_each_limit(tmp_path: Path) -> None:
    options = dict(_channel_options(Settings(data_dir=tmp_path), 321, reuse_port=False))
    assert options["grpc.max_allowed_incoming_connections"] == 321
    assert {name: options[name] for name in OPTIONS} == OPTIONS


@pytest.mark.parametrize(
    ("row", "numbers"),
    [
        ("connections to the gRPC port", ["4096"]),
        ("a connection's handshake", ["5 s"]),
        ("a connection with no call in flight", ["300 s"]),
        ("a connection's age", ["1800 s", "30 s"]),
        ("streams at once on one connection", ["100"]),
        ("a call's metadata", ["16384 bytes", "8192"]),
    ],
)
def test_the_limits_table_says_each_once(row: str, numbers: list[str]) -> None:
    [line] = [line for line in API.splitlines() if line.startswith(f"| {row}")]
    for number in numbers:
        assert number in line, (row, number)
    assert "64 gRPC connections" in OPERATIONS and "at most\n4096 connections" in OPERATIONS


def one_round(client: GnauClient) -> None:
    client.play_round("table-1", [Seat(seat_number=1, player_id="p", stake=10)], timeout=30)


def limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


def open_descriptors(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


@pytest.mark.system
def test_an_idle_flood_takes_the_ports_share_and_nothing_else(tmp_path: Path) -> None:
    """Under a 1024 descriptor limit with both HTTP ports, 1,100 idle connections to the gRPC
    port (the outside tester's flood): the port holds its 64, the process keeps descriptors for
    the rest, the SQLite store and a platform's open connection keep working, no ERROR."""
    with served(
        tmp_path / "data",
        "--http-listen", f"127.0.0.1:{free_port()}", "--metrics-listen", f"127.0.0.1:{free_port()}",
        preexec_fn=limit_descriptors,
    ) as service:  # fmt: skip
        serving = [e for e in service.log_events() if e.get("event") == "serving"][-1]
        assert (serving["descriptors"], serving["grpc_connections"]) == (1024, 64)
        host, port = service.target.rsplit(":", 1)
        with GnauClient(service.target, token=service.token) as platform:
            one_round(platform)  # its connection is open before the flood
            idle = []
            try:
                for _ in range(1100):  # more than the process has descriptors
                    idle.append(socket.create_connection((host, int(port)), timeout=5))
                time.sleep(1.0)
                assert open_descriptors(service.process.pid) < 1024
                for _ in range(3):
                    one_round(platform)
            finally:
                for connection in idle:
                    connection.close()
        time.sleep(1.0)
        with GnauClient(service.target, token=service.token) as newcomer:
            one_round(newcomer)  # the port takes new connections again
        output = service.output()
    assert "File descriptor limit reached" not in output
    assert not re.search(r'"level": "error"', output), output[-2000:]
