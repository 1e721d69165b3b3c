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

import grpc
import pytest
from gnau.v1 import audit_pb2, dealer_pb2, dealer_pb2_grpc, round_pb2, types_pb2
from gnau_client import GnauClient, Seat

from gnau_service.server.process.app import _channel_options
from gnau_service.server.process.config import Settings
from tests.server.conftest import Service
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


# -- the largest request (issue 39, part 2: no work for strangers) ---------------------------------

#: The limit as docs/api.md states it.
REQUEST_LIMIT: Final = 65536


def test_the_largest_legitimate_requests_fit_with_room_to_spare() -> None:
    """A Deal of 82 seats, a PutTable of 64 rule sets and a GetReport of 100 tables, every field
    at its limit (docs/api.md, *Limits*), each take under half of the request limit."""
    seats = [
        round_pb2.Seat(
            seat_number=2**31 - 1 - n,
            player_id="é" * 64,  # 128 bytes of UTF-8
            stake=5_492_194_667_524,
            client_seed=bytes(64),
        )
        for n in range(82)
    ]
    deal = dealer_pb2.DealRequest(
        request_id="r" * 36,
        round_id="é" * 64,
        seats=seats,
        beacon=round_pb2.Beacon(label="é" * 64, value=bytes(1024)),
    )
    rules = types_pb2.HouseRules(
        ten_is_duke=True, three_six_pair=True, trips_make_ox=True, five_small=True,
        tie=types_pb2.TIE_RULE_HIGH_CARD, payout=types_pb2.PAYOUT_TABLE_MULTIPLIER,
        suited_double=True, decks=8,
    )  # fmt: skip
    table = dealer_pb2.PutTableRequest(
        table_id="é" * 64,
        config=dealer_pb2.TableConfig(
            currency="EUR", rule_sets=[rules] * 64, min_stake=2**40, max_stake=2**42,
            max_seats=82, deal_deadline_seconds=604_800, settle_deadline_seconds=604_800,
            enabled=True,
        ),
    )  # fmt: skip
    report = audit_pb2.GetReportRequest(
        period="month", since="2026-01-01", until="2026-12-31", operator="o" * 64,
        table_ids=["é" * 64] * 100, format="json",
    )  # fmt: skip
    for request in (deal, table, report):
        assert request.ByteSize() < REQUEST_LIMIT // 2, (type(request).__name__, request.ByteSize())
    assert (
        dict(_channel_options(Settings(), 64, reuse_port=False))["grpc.max_receive_message_length"]
        == REQUEST_LIMIT
    )


@pytest.mark.parametrize(
    ("size", "code"), [(REQUEST_LIMIT // 2, "PERMISSION_DENIED"), (2**20, "RESOURCE_EXHAUSTED")]
)
async def test_a_stranger_is_refused_from_the_size_of_its_request(
    service: Service, size: int, code: str
) -> None:
    """Without credentials, a request over the limit is refused from its length prefix (gRPC's
    RESOURCE_EXHAUSTED); one under it reaches the role check (the public may not shuffle)."""
    stub = dealer_pb2_grpc.DealerServiceStub(service.channel)
    request = dealer_pb2.ShuffleRequest(request_id="x", table_id="t" * size)
    calls = [stub.Shuffle(request) for _ in range(20)]
    for call in calls:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call
        assert refused.value.code().name == code
