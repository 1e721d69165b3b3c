"""The gRPC port under a seeded fuzz of raw HTTP/2 frames (tests/rawh2.py): each case is one
connection that sends what no gRPC client would, drawn from ``random.Random``: good and bad
request HEADERS, DATA with whole, cut-off, lying and oversized gRPC messages, rapid resets,
WINDOW_UPDATEs of zero and past the maximum, odd SETTINGS, self-dependent PRIORITY, PING and
GOAWAY from the client, CONTINUATION floods, broken HPACK, headers over 16 KiB, frames on closed,
idle and even streams, frames of unknown types, and garbage.

Every so often a probe, a well-formed Health Check on a connection of its own, must be answered
SERVING while the fuzz goes on. Afterwards the service must still be well: listening, health
SERVING on a fresh channel, a whole round played, no ERROR (or traceback, or gRPC core error)
logged, the log verifying.

Each case has its own ``random.Random(f"{seed}:{case}")``: a failure names its seed and the
cases in flight, what each sent, and ``GNAU_FUZZ_SEED`` repeats the run. The default run is
short; the ones marked ``slow`` send many more cases, in process and to a ``gnau serve``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import re
import socket
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import grpc
import hpack
import pytest
from gnau.v1 import audit_pb2, dealer_pb2, round_pb2
from gnau_client import AsyncGnauClient, Seat
from grpc_health.v1 import health_pb2, health_pb2_grpc
from h2.errors import ErrorCodes
from h2.settings import SettingCodes
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    PriorityFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

from tests.log_checks import verified_log
from tests.rawh2 import (
    Connection,
    Received,
    error_name,
    grpc_headers,
    grpc_message,
    grpc_messages,
    raw_frame,
)
from tests.server.conftest import TOKENS, Service
from tests.serving import served

SEED: Final = int(os.environ.get("GNAU_FUZZ_SEED", "20261206"))
#: Connections in the default run, and in each slow one.
CASES: Final = 128
SLOW_CASES: Final = 2000
#: The most frames (or streams) in one flood, in the default run and in a slow one.
FLOOD: Final = 300
SLOW_FLOOD: Final = 3000
#: Connections in flight at once.
CONCURRENCY: Final = 8
#: Seconds a case waits for what it is owed (its answers, its PING's ACK) before it gives up.
READ_SECONDS: Final = 2.0
#: One case in so many is a probe.
PROBE_EVERY: Final = 16
#: The fuzz's source addresses; the probes and the checks afterwards come from 127.0.0.1, so
#: that no share the fuzz holds (one per address, for calls without credentials) is theirs.
SOURCES: Final = tuple(f"127.0.0.{n}" for n in range(2, 10))
#: Where the fuzz shuffles (its Shuffles are real changes to the log), and where the round
#: afterwards is played.
FUZZ_TABLES: Final = tuple(f"h2-fuzz-{n}" for n in range(4))
AFTER_TABLE: Final = "h2-after-fuzz"
#: Catalogued by the service fixtures (tests/catalogued.py, catalogue_module_tables).
CATALOGUED = (*FUZZ_TABLES, AFTER_TABLE)
SEATS: Final = [
    Seat(seat_number=1, player_id="alice", stake=10),
    Seat(seat_number=2, player_id="bob", stake=25),
]
MAX_FRAME: Final = 16384  # SETTINGS_MAX_FRAME_SIZE's default, which the server keeps

DEALER: Final = "/gnau.v1.DealerService/"
AUDIT: Final = "/gnau.v1.AuditService/"
HEALTH_CHECK: Final = "/grpc.health.v1.Health/Check"
#: Streaming methods: a case does not wait for their end (a WatchEntries or a Watch has none).
STREAMING: Final = frozenset(
    {"/grpc.health.v1.Health/Watch", AUDIT + "WatchEntries", AUDIT + "GetEntries"}
)
ROLES: Final = (None, "public", "auditor", "operator", "operator", "nobody")


def requests(rng: random.Random) -> dict[str, bytes]:
    """A well-formed request of some methods, and of a few that do not exist."""
    return {
        HEALTH_CHECK: health_pb2.HealthCheckRequest().SerializeToString(),
        "/grpc.health.v1.Health/Watch": health_pb2.HealthCheckRequest().SerializeToString(),
        AUDIT + "GetPublicKeys": audit_pb2.GetPublicKeysRequest().SerializeToString(),
        AUDIT + "GetCheckpoint": audit_pb2.GetCheckpointRequest().SerializeToString(),
        AUDIT + "WatchEntries": audit_pb2.WatchEntriesRequest(start_index=0).SerializeToString(),
        AUDIT + "GetEntries": audit_pb2.GetEntriesRequest(start=0, end=2).SerializeToString(),
        DEALER + "GetRound": dealer_pb2.GetRoundRequest(round_id="r-1").SerializeToString(),
        DEALER + "ListRounds": dealer_pb2.ListRoundsRequest().SerializeToString(),
        DEALER + "Shuffle": dealer_pb2.ShuffleRequest(
            request_id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            table_id=rng.choice(FUZZ_TABLES),
        ).SerializeToString(),
        DEALER + "Deal": dealer_pb2.DealRequest(
            request_id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            round_id="r-1",
            seats=[round_pb2.Seat(seat_number=1, player_id="p", stake=1)],
        ).SerializeToString(),
        "/gnau.v1.DealerService/Nope": b"",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": b"\x3a\x00",
    }


# --- one connection --------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one case sent, in words, and what it got back."""

    index: int
    source: str
    sent: list[str]
    received: Received
    awaited: list[int]
    probe: bool = False
    failures: list[str] = field(default_factory=list)
    #: When it ran (UTC, as the log's timestamps are).
    started: datetime | None = None
    ended: datetime | None = None

    def describe(self) -> str:
        when = ""
        if self.started is not None and self.ended is not None:
            when = f" {self.started:%H:%M:%S.%f} to {self.ended:%H:%M:%S.%f}"
        return (
            f"case {self.index} from {self.source}{when}: sent {self.sent}\n"
            f"  got {self.received.summary()}"
        )


class Case:
    """One connection's fuzz: each method sends one kind of frame (or of trouble)."""

    def __init__(
        self, connection: Connection, rng: random.Random, tokens: dict[str, str], flood: int
    ) -> None:
        self.connection = connection
        self.rng = rng
        self.tokens = tokens
        self.flood = flood  # the most frames (or streams) in one flood
        self.sent: list[str] = []
        self.awaited: list[int] = []  # ended streams of answering methods, not reset by us
        self.gone_away = False  # the client has sent GOAWAY
        self.ended: list[int] = []  # streams the client has ended (half-closed, or closed)
        self.open: list[int] = []  # streams opened and not ended
        self.next_id = 1
        self.alive = True
        self.requests = requests(rng)

    # -- sending ------------------------------------------------------------------------------

    def emit(self, what: str, *frames: Frame) -> None:
        if self.alive:
            self.sent.append(what)
            self.alive = self.connection.send(*frames)

    def emit_bytes(self, what: str, data: bytes) -> None:
        if self.alive:
            self.sent.append(what)
            self.alive = self.connection.send_bytes(data)

    def expect(self, stream_id: int, path: str) -> None:
        """Wait for an answer on ``stream_id``, an ended call: unless its method streams, or
        the client has sent GOAWAY (after which a server may ignore new streams)."""
        if path not in STREAMING and not self.gone_away:
            self.awaited.append(stream_id)

    def stream(self) -> int:
        """The next stream id (past 2**31 - 1, the wire's 31 bits wrap it to a low one)."""
        stream_id = self.next_id & 0x7FFFFFFF
        self.next_id += 2
        return stream_id

    def headers_frames(self, stream_id: int, block: bytes, *, end_stream: bool) -> list[Frame]:
        """``block`` as HEADERS and as many CONTINUATIONs as it needs (or the fuzz splits it
        into)."""
        size = MAX_FRAME
        if len(block) <= MAX_FRAME and self.rng.random() < 0.2:
            size = self.rng.randint(1, max(1, len(block)))
        pieces = [block[at : at + size] for at in range(0, len(block), size)] or [b""]
        first = HeadersFrame(stream_id, pieces[0])
        if end_stream:
            first.flags.add("END_STREAM")
        frames: list[Frame] = [first, *(ContinuationFrame(stream_id, p) for p in pieces[1:])]
        frames[-1].flags.add("END_HEADERS")
        return frames

    def pick_path(self) -> str:
        return self.rng.choice(list(self.requests))

    def good_headers(self, path: str) -> list[tuple[str, str]]:
        role = self.rng.choice(ROLES)
        token = None if role is None else self.tokens.get(role, "no-such-token-" + "x" * 20)
        extra = [("grpc-timeout", "5S")] if self.rng.random() < 0.5 else []
        return grpc_headers(path, token=token, extra=extra)

    def request(self, what: str, headers: list[tuple[str, str]], data: list[bytes]) -> int:
        """A stream with ``headers`` and ``data`` as DATA frames, the last ending it (or the
        HEADERS, if no data)."""
        stream_id = self.stream()
        block = self.connection.header_block(headers)
        frames = self.headers_frames(stream_id, block, end_stream=not data)
        for n, chunk in enumerate(data):
            frame = DataFrame(stream_id, chunk)
            if n == len(data) - 1:
                frame.flags.add("END_STREAM")
            frames.append(frame)
        self.emit(f"{what} on {stream_id}", *frames)
        path = dict(headers).get(":path", "")
        self.ended.append(stream_id)
        self.expect(stream_id, path)
        return stream_id

    # -- the fuzz's moves ---------------------------------------------------------------------

    def good_request(self) -> None:
        path = self.pick_path()
        message = grpc_message(self.requests[path])
        how = self.rng.choice(["whole", "bytewise", "padded", "empty end"])
        if how == "bytewise":
            data = [message[n : n + 1] for n in range(len(message))] or [b""]
        elif how == "empty end":
            data = [message, b""]
        else:
            data = [message]
        self.request(f"a good request {path} ({how})", self.good_headers(path), data)
        if how == "padded":  # the same request again, with padding on its DATA
            stream_id = self.stream()
            padded = DataFrame(stream_id, message, flags=["END_STREAM", "PADDED"])
            padded.pad_length = self.rng.randint(0, 255)
            block = self.connection.header_block(self.good_headers(path))
            self.emit(
                f"a request with padded DATA on {stream_id}",
                *self.headers_frames(stream_id, block, end_stream=False),
                padded,
            )
            self.ended.append(stream_id)
            self.expect(stream_id, path)

    def bad_headers(self) -> None:
        path = self.pick_path()
        headers = self.good_headers(path)
        mutation, headers = self.mutated(headers)
        message = [grpc_message(self.requests[path])] if self.rng.random() < 0.7 else []
        self.request(f"bad headers ({mutation}) for {path}", headers, message)

    def mutated(self, headers: list[tuple[str, str]]) -> tuple[str, list[tuple[str, str]]]:
        rng = self.rng
        choice = rng.randrange(16)
        if choice == 0:
            gone = rng.choice([name for name, _ in headers])
            return f"no {gone}", [(n, v) for n, v in headers if n != gone]
        replacements = {
            1: (":method", ["GET", "PUT", "", "CONNECT", "post"]),
            2: ("content-type", ["text/html", "application/grpc+json", "application/grpcx", ""]),
            3: (
                ":path",
                ["", "*", "/", "noslash", "/a/b/c", "/" + "x" * 5000, "/a\x00b", "/%2e%2e/"],
            ),
            4: (":scheme", ["https", "ftp", ""]),
            5: ("te", ["gzip", "", "trailers, deflate"]),
        }
        if choice in replacements:
            name, values = replacements[choice]
            value = rng.choice(values)
            return f"{name} {value[:20]!r}", [(n, value if n == name else v) for n, v in headers]
        additions = {
            6: [("Content-Type", "application/grpc"), ("X-Upper", "1")],
            7: [("connection", "keep-alive"), ("transfer-encoding", "chunked"), ("upgrade", "h2c")],
            8: [(":path", "/x/y")],
            9: [(":foo", "bar"), (":status", "200")],
            10: [(name, v) for name in ["grpc-timeout"] for v in ["1n", "0S", "99999999H", "abc"]],
            11: [("grpc-encoding", v) for v in ["gzip", "br", "x" * 100, "identity"]],
            12: [("authorization", v) for v in ["Bearer", "Basic eA==", "Bearer " + "y" * 9000]],
            13: [("x-bin", "@@@"), ("x-bin", "=="), ("x-trace-bin", "AAAA")],
            14: [
                ("x-nasty", "a\r\nb"),
                ("x-nul", "a\x00b"),
                ("", "empty"),
                ("a b", "c"),
                ("é", "1"),
            ],
            15: [("content-length", "5"), ("host", "elsewhere"), ("grpc-status", "0")],
        }
        added = rng.sample(additions[choice], rng.randint(1, len(additions[choice])))
        if choice == 9 or rng.random() < 0.3:
            headers = headers + added  # after the regular headers: a pseudo-header out of place
        else:
            headers = headers[:4] + added + headers[4:]
        return f"added {[(n, v[:20]) for n, v in added]}", headers

    def bad_data(self) -> None:
        rng = self.rng
        path = self.pick_path()
        payload = self.requests[path]
        how = rng.choice(
            [
                "cut off", "prefix cut off", "lying length", "oversized", "compressed",
                "compressed gzip", "garbage", "two messages", "no message", "odd flag",
                "left open", "data after the end", "trailers from the client",
                "empty DATA flood",
            ]
        )  # fmt: skip
        headers = self.good_headers(path)
        if how == "compressed gzip":
            headers.append(("grpc-encoding", "gzip"))
        stream_id = self.stream()
        block = self.connection.header_block(headers)
        frames = self.headers_frames(stream_id, block, end_stream=False)
        message = grpc_message(payload)
        end = DataFrame(stream_id, b"", flags=["END_STREAM"])
        if how == "cut off":
            body = [message[: rng.randint(5, max(5, len(message) - 1))]]
        elif how == "prefix cut off":
            body = [message[: rng.randint(1, 4)]]
        elif how == "lying length":
            body = [grpc_message(payload, length=len(payload) + rng.randint(1, 1000))]
        elif how == "oversized":
            length = rng.choice([65_537, 1 << 20, (1 << 32) - 1, rng.randint(65_537, 200_000)])
            size = rng.choice([0, 100, min(length, 60_000)])
            body = [grpc_message(rng.randbytes(size), length=length)]
        elif how in ("compressed", "compressed gzip"):
            body = [grpc_message(payload or b"\x00", compressed=True)]
        elif how == "garbage":
            body = [grpc_message(rng.randbytes(rng.randint(1, 300)))]
        elif how == "two messages":
            body = [message + message]
        elif how == "no message":
            body = []
        elif how == "odd flag":
            body = [bytes([rng.randint(2, 255)]) + message[1:]]
        else:
            body = [message]
        for chunk in body:  # one DATA frame each, or as many as its size needs
            pieces = range(0, len(chunk), MAX_FRAME)
            frames += [DataFrame(stream_id, chunk[n : n + MAX_FRAME]) for n in pieces]
        if how == "empty DATA flood":
            frames += [DataFrame(stream_id, b"") for _ in range(rng.randint(100, self.flood))]
        if how == "left open":
            self.open.append(stream_id)
        elif how == "trailers from the client":
            block = self.connection.header_block([("x-trailer", "1")])
            frames += self.headers_frames(stream_id, block, end_stream=True)
        else:
            frames.append(end)
        if how == "data after the end":
            frames.append(DataFrame(stream_id, message, flags=["END_STREAM"]))
        self.emit(f"DATA: {how} ({path}) on {stream_id}", *frames)
        if how != "left open":
            self.ended.append(stream_id)
            self.expect(stream_id, path)

    def resets(self) -> None:
        rng = self.rng
        how = rng.choice(["open", "ended", "idle", "zero", "short", "rapid", "rapid", "twice"])
        code = rng.choice([ErrorCodes.CANCEL, ErrorCodes.NO_ERROR, rng.randint(0, 0xFFFFFFFF)])
        if how == "rapid":
            count = rng.randint(50, self.flood)
            frames: list[Frame] = []
            path = self.pick_path()
            for _ in range(count):
                stream_id = self.stream()
                block = self.connection.header_block(self.good_headers(path))
                frames += self.headers_frames(stream_id, block, end_stream=rng.random() < 0.5)
                frames.append(RstStreamFrame(stream_id, ErrorCodes.CANCEL))
            self.emit(f"a rapid reset of {count} streams ({path})", *frames)
        elif how in ("open", "twice") and self.open:
            stream_id = self.open.pop()
            times = 2 if how == "twice" else 1
            self.emit(
                f"RST_STREAM {error_name(code)} x{times} on open {stream_id}",
                *[RstStreamFrame(stream_id, code)] * times,
            )
        elif how == "ended" and self.ended:
            stream_id = rng.choice(self.ended)
            if stream_id in self.awaited:
                self.awaited.remove(stream_id)
            self.emit(f"RST_STREAM on ended {stream_id}", RstStreamFrame(stream_id, code))
        elif how == "zero":
            self.emit("RST_STREAM on stream 0", raw_frame(0x3, 0, body=b"\x00\x00\x00\x08"))
        elif how == "short":
            self.emit(
                "RST_STREAM of 3 bytes", raw_frame(0x3, max(1, self.next_id - 2), body=b"\0\0\0")
            )
        else:
            stream_id = self.next_id + 2 * rng.randint(0, 10)
            self.emit(f"RST_STREAM on idle {stream_id}", RstStreamFrame(stream_id, code))

    def window_updates(self) -> None:
        rng = self.rng
        stream_id = rng.choice([0, 0, *self.open, *self.ended, self.next_id + 2])
        how = rng.choice(["zero", "huge", "overflow", "many", "short", "reserved bit"])
        if how == "zero":
            frames: list[Frame] = [WindowUpdateFrame(stream_id, 0)]
        elif how == "huge":
            frames = [WindowUpdateFrame(stream_id, (1 << 31) - 1)]
        elif how == "overflow":
            frames = [WindowUpdateFrame(stream_id, (1 << 31) - 1)] * 2
        elif how == "many":
            frames = [WindowUpdateFrame(stream_id, 1)] * rng.randint(100, self.flood)
        elif how == "short":
            frames = [raw_frame(0x8, stream_id, body=b"\x00\x01")]
        else:
            frames = [raw_frame(0x8, stream_id, body=b"\x80\x00\x00\x01")]
        self.emit(f"WINDOW_UPDATE {how} on {stream_id}", *frames)

    def settings(self) -> None:
        rng = self.rng
        how = rng.choice(["odd", "odd", "ack", "ack with body", "short", "on a stream", "flood"])
        if how == "odd":
            values = {
                SettingCodes.INITIAL_WINDOW_SIZE: [0, 1, (1 << 31) - 1, 1 << 31, (1 << 32) - 1],
                SettingCodes.MAX_FRAME_SIZE: [0, 16_383, 16_384, (1 << 24) - 1, 1 << 24],
                SettingCodes.ENABLE_PUSH: [0, 1, 2, 0xFFFFFFFF],
                SettingCodes.HEADER_TABLE_SIZE: [0, 1, 4096, 1 << 20, 0xFFFFFFFF],
                SettingCodes.MAX_CONCURRENT_STREAMS: [0, 1, 0xFFFFFFFF],
                SettingCodes.MAX_HEADER_LIST_SIZE: [0, 1, 0xFFFFFFFF],
                SettingCodes.ENABLE_CONNECT_PROTOCOL: [0, 1, 7],
                0x0: [0, 5], 0x7: [1], 0xFF: [rng.getrandbits(32)], 0xFFFF: [1],
            }  # fmt: skip
            chosen = rng.sample(list(values), rng.randint(1, 4))
            settings = {int(code): rng.choice(values[code]) for code in chosen}
            self.emit(f"SETTINGS {settings}", SettingsFrame(settings=settings))
        elif how == "ack":
            self.emit("an unasked SETTINGS ACK", SettingsFrame(flags=["ACK"]))
        elif how == "ack with body":
            self.emit(
                "SETTINGS ACK with a body", raw_frame(0x4, 0, 0x1, b"\x00\x04\x00\x00\x00\x01")
            )
        elif how == "short":
            self.emit("SETTINGS of 5 bytes", raw_frame(0x4, 0, 0, b"\x00\x04\x00\x00\x00"))
        elif how == "on a stream":
            frame = SettingsFrame(settings={SettingCodes.MAX_CONCURRENT_STREAMS: 10})
            frame.stream_id = self.next_id
            self.emit(f"SETTINGS on stream {frame.stream_id}", frame)
        else:
            count = rng.randint(100, self.flood)
            frame = SettingsFrame(settings={SettingCodes.INITIAL_WINDOW_SIZE: 65_535})
            self.emit(f"a flood of {count} SETTINGS", *[frame] * count)

    def priority(self) -> None:
        rng = self.rng
        stream_id = rng.choice([*self.open, *self.ended, self.next_id]) & 0x7FFFFFFF
        how = rng.choice(["self", "self in HEADERS", "stream 0", "short", "chain"])
        if how == "self":
            frames: list[Frame] = [PriorityFrame(stream_id, depends_on=stream_id)]
        elif how == "self in HEADERS":
            stream_id = self.stream()
            path = self.pick_path()
            block = self.connection.header_block(self.good_headers(path))
            first = HeadersFrame(
                stream_id, block, depends_on=stream_id, stream_weight=255, exclusive=True
            )
            first.flags |= {"PRIORITY", "END_HEADERS", "END_STREAM"}
            frames = [first]
            self.ended.append(stream_id)
        elif how == "stream 0":
            frames = [raw_frame(0x2, 0, body=b"\x00\x00\x00\x01\x10")]
        elif how == "short":
            frames = [raw_frame(0x2, stream_id, body=b"\x00\x00\x00\x01")]
        else:  # each on the next, then the first on the last
            ids = [(self.next_id + 2 * n) & 0x7FFFFFFF for n in range(rng.randint(2, 200))]
            frames = [
                PriorityFrame(a, depends_on=b) for a, b in zip(ids, ids[1:] + ids[:1], strict=True)
            ]
        self.emit(f"PRIORITY {how} on {stream_id}", *frames)

    def pings(self) -> None:
        rng = self.rng
        how = rng.choice(["one", "ack", "short", "on a stream", "flood"])
        if how == "one":
            frames: list[Frame] = [PingFrame(0, rng.randbytes(8))]
        elif how == "ack":
            frames = [PingFrame(0, rng.randbytes(8), flags=["ACK"])]
        elif how == "short":
            frames = [raw_frame(0x6, 0, 0, rng.randbytes(rng.choice([0, 7, 9])))]
        elif how == "on a stream":
            frames = [raw_frame(0x6, self.next_id, 0, rng.randbytes(8))]
        else:
            frames = [PingFrame(0, rng.randbytes(8)) for _ in range(rng.randint(100, self.flood))]
        self.emit(f"PING {how}", *frames)

    def goaway(self) -> None:
        rng = self.rng
        how = rng.choice(["graceful", "an error", "on a stream", "short"])
        if how in ("graceful", "an error"):
            frame: Frame = GoAwayFrame(
                last_stream_id=rng.choice([0, self.next_id, (1 << 31) - 1]),
                error_code=0 if how == "graceful" else rng.randint(1, 0xFFFFFFFF),
                additional_data=rng.randbytes(rng.randint(0, 200)),
            )
        elif how == "on a stream":
            frame = GoAwayFrame(last_stream_id=1)
            frame.stream_id = self.next_id
        else:
            frame = raw_frame(0x7, 0, 0, b"\x00\x00\x00")
        self.gone_away = True
        self.emit(f"GOAWAY {how}", frame)

    def continuations(self) -> None:
        """A header block that never ends, or CONTINUATIONs where none may be."""
        rng = self.rng
        how = rng.choice(["flood", "empty flood", "orphan", "interleaved", "other stream"])
        stream_id = self.stream()
        path = self.pick_path()
        block = self.connection.header_block(self.good_headers(path))
        if how in ("flood", "empty flood"):
            count = rng.randint(100, self.flood)
            self.emit(f"HEADERS ({path}) on {stream_id}", HeadersFrame(stream_id, block))
            for n in range(0, count, 500):  # in pieces, so that a closed connection stops it
                pieces = []
                for _ in range(min(500, count - n)):
                    piece = b"" if how == "empty flood" else self.literal(rng.randint(10, 2000))
                    pieces.append(ContinuationFrame(stream_id, piece))
                self.emit(f"CONTINUATION {how} {n}..", *pieces)
            return
        if how == "orphan":
            self.emit(f"a CONTINUATION alone on {stream_id}", ContinuationFrame(stream_id, block))
            return
        first = HeadersFrame(stream_id, block[:1])
        if how == "interleaved":
            between: Frame = PingFrame(0, b"\x00" * 8)
        else:
            between = ContinuationFrame(stream_id + 2, block[1:])
        last = ContinuationFrame(stream_id, block[1:], flags=["END_HEADERS"])
        self.emit(f"HEADERS, {how}, CONTINUATION on {stream_id}", first, between, last)

    def literal(self, size: int) -> bytes:
        """Header block bytes: a literal field without indexing, a new name and a ``size``-byte
        value (HPACK integers, written by hpack's own encoder of a single field)."""
        name = "x-" + self.rng.choice("abcdef") * self.rng.randint(1, 20)
        return bytes(hpack_literal(name, "v" * size))

    def bad_hpack(self) -> None:
        rng = self.rng
        blocks = {
            "random bytes": rng.randbytes(rng.randint(1, 200)),
            "an index past the tables": b"\xfe",
            "an integer that never ends": b"\xff" + b"\xff" * rng.randint(10, 100),
            "a table size over the limit": b"\x3f\xe1\xff\xff\x0f",
            "a size update after a field": b"\x82\x20",
            "a literal cut off": b"\x40\x7fabcde",
            "a bad Huffman string": b"\x00\x85\xff\xff\xff\xff\xff\x01a",
            "index 0": b"\x80",
            "a field then junk": self.connection.header_block([("x-ok", "1")]) + b"\xff",
        }
        what = rng.choice(list(blocks))
        stream_id = self.stream()
        self.emit(
            f"HPACK: {what} on {stream_id}",
            HeadersFrame(stream_id, blocks[what], flags=["END_HEADERS", "END_STREAM"]),
        )

    def huge_headers(self) -> None:
        rng = self.rng
        path = self.pick_path()
        headers = self.good_headers(path)
        how = rng.choice(["one value", "many fields", "authorization", "in one frame"])
        if how in ("one value", "in one frame"):
            headers.append(("x-big", "b" * rng.randint(16 * 1024 + 1, 100 * 1024)))
        elif how == "many fields":
            headers += [(f"x-field-{n}", "v" * 100) for n in range(rng.randint(170, 600))]
        else:
            headers.append(("authorization", "Bearer " + "t" * rng.randint(16 * 1024, 40 * 1024)))
        stream_id = self.stream()
        block = self.connection.header_block(headers, huffman=False)
        if how == "in one frame":  # over SETTINGS_MAX_FRAME_SIZE
            frames: list[Frame] = [
                HeadersFrame(stream_id, block, flags=["END_HEADERS", "END_STREAM"])
            ]
        else:
            frames = self.headers_frames(stream_id, block, end_stream=True)
        self.emit(f"{len(block)} bytes of headers ({how}, {path}) on {stream_id}", *frames)
        self.ended.append(stream_id)
        if how != "in one frame":
            self.expect(stream_id, path)

    def wrong_streams(self) -> None:
        rng = self.rng
        path = self.pick_path()
        message = grpc_message(self.requests[path])
        how = rng.choice(
            ["even", "zero", "reused", "lower", "DATA on idle", "DATA on ended", "the last id"]
        )
        if how == "even":
            stream_id = self.next_id + 1
        elif how == "zero":
            stream_id = 0
        elif how in ("reused", "DATA on ended") and self.ended:
            stream_id = rng.choice(self.ended)
        elif how == "lower" and self.next_id > 3:
            stream_id = self.next_id - 4
        elif how == "the last id":
            stream_id = (1 << 31) - 1
            self.next_id = stream_id + 2  # any stream after it is past the last id
        else:
            stream_id = self.next_id + 2 * rng.randint(1, 5)
        if how.startswith("DATA"):
            frames: list[Frame] = [DataFrame(stream_id, message, flags=["END_STREAM"])]
        else:
            block = self.connection.header_block(self.good_headers(path))
            frames = self.headers_frames(max(stream_id, 1), block, end_stream=False)
            frames.append(DataFrame(max(stream_id, 1), message, flags=["END_STREAM"]))
            for frame in frames:
                frame.stream_id = stream_id
        self.emit(f"a request ({path}) on {how} stream {stream_id}", *frames)

    def unknown_frames(self) -> None:
        rng = self.rng
        frames = [
            raw_frame(
                rng.choice([0xA, 0xB, 0xC, 0x10, 0x20, 0xFF, rng.randint(0xA, 0xFF)]),
                rng.choice([0, self.next_id, self.next_id + 1, *self.ended[-2:]]),
                rng.getrandbits(8),
                rng.randbytes(rng.randint(0, 100)),
            )
            for _ in range(rng.randint(1, 20))
        ]
        kinds = sorted({f"0x{frame.type:x}" for frame in frames})
        self.emit(f"{len(frames)} frames of unknown types {kinds}", *frames)

    def odd_known_frames(self) -> None:
        """PUSH_PROMISE from a client, DATA padded past its length, flags nobody defined."""
        rng = self.rng
        stream_id = self.open[-1] if self.open else self.next_id
        how = rng.choice(["push promise", "over-padded DATA", "odd flags", "DATA on stream 0"])
        if how == "push promise":
            block = self.connection.header_block([(":method", "GET"), (":path", "/")])
            frame = raw_frame(0x5, stream_id, 0x4, b"\x00\x00\x00\x02" + block)
        elif how == "over-padded DATA":
            frame = raw_frame(0x0, stream_id, 0x8, b"\xff" + b"x" * 10)
        elif how == "odd flags":
            frame = raw_frame(rng.randint(0, 9), stream_id, 0xFF, rng.randbytes(rng.randint(0, 20)))
        else:
            frame = raw_frame(0x0, 0, 0x1, b"\x00\x00\x00\x00\x00")
        self.emit(f"{how} on {stream_id}", frame)

    def garbage(self) -> None:
        rng = self.rng
        how = rng.choice(["random", "a giant length", "a cut header", "ones"])
        if how == "random":
            data = rng.randbytes(rng.randint(1, 500))
        elif how == "a giant length":
            data = b"\xff\xff\xff\x00\x00\x00\x00\x00\x01" + rng.randbytes(100)
        elif how == "a cut header":
            data = b"\x00\x00"
        else:
            data = b"\xff" * rng.randint(9, 100)
        self.emit_bytes(f"garbage: {how}", data)

    def pause(self) -> None:
        self.sent.append("a pause")
        self.connection.read(self.rng.uniform(0, 0.05))

    MOVES = (
        (good_request, 6), (bad_headers, 6), (bad_data, 6), (resets, 4), (window_updates, 3),
        (settings, 3), (priority, 2), (pings, 2), (goaway, 1), (continuations, 2),
        (bad_hpack, 2), (huge_headers, 2), (wrong_streams, 3), (unknown_frames, 2),
        (odd_known_frames, 2), (garbage, 1), (pause, 2),
    )  # fmt: skip

    def opening(self) -> None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.04:
            self.emit_bytes("half a preface", rng.choice([b"PRI * HTTP/2.0\r\n", b"PRI"]))
        elif roll < 0.07:
            self.emit_bytes("HTTP/1.1", b"POST /x HTTP/1.1\r\nHost: a\r\nUpgrade: h2c\r\n\r\n")
        elif roll < 0.09:
            self.emit_bytes(
                "a TLS hello", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(32)
            )
        elif roll < 0.12:
            self.emit_bytes("a preface without SETTINGS", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            self.emit("a PING first", PingFrame(0, b"\x01" * 8))
        else:
            self.sent.append("the preface and SETTINGS")
            self.alive = self.connection.start()

    def play(self, moves: int) -> None:
        self.opening()
        functions = [move for move, _ in self.MOVES]
        weights = [weight for _, weight in self.MOVES]
        for move in self.rng.choices(functions, weights, k=moves):
            if not self.alive:
                break
            move(self)


def hpack_literal(name: str, value: str) -> bytes:
    # A fresh encoder (no table of this connection's) writes the field as a literal: flag 0x00
    # (without indexing), then the name and value, neither Huffman-coded.
    encoder = hpack.Encoder()
    return bytes(encoder.encode([hpack.NeverIndexedHeaderTuple(name, value)], huffman=False))


def awaited_all(case: Case, marker: bytes) -> Callable[[Received], bool]:
    """Whether a case has what it is owed: every answering call it ended answered (or refused
    by a GOAWAY), and its last PING's ACK, or the connection's end."""

    def done(got: Received) -> bool:
        if got.goaway is not None and got.goaway.error_code != 0:
            return True
        last = got.goaway.last_stream_id if got.goaway else (1 << 31)
        if any(not got.finished(s) for s in case.awaited if s <= last):
            return False
        return marker in got.ping_acks or got.goaway is not None

    return done


@dataclass(frozen=True)
class Target:
    """A service to fuzz: its gRPC port, its tokens by role, and its log's new lines."""

    port: int
    tokens: dict[str, str]
    log: Callable[[], list[str]]


def play_case(target: Target, seed: int, index: int, flood: int) -> Outcome:
    started = datetime.now(UTC)
    outcome = played(target, seed, index, flood)
    outcome.started, outcome.ended = started, datetime.now(UTC)
    return outcome


def played(target: Target, seed: int, index: int, flood: int) -> Outcome:
    rng = random.Random(f"{seed}:{index}")
    if index % PROBE_EVERY == PROBE_EVERY - 1:
        return probe(target.port, index)
    source = rng.choice(SOURCES)
    with Connection(target.port, source=source) as connection:
        case = Case(connection, rng, target.tokens, flood)
        case.play(rng.randint(1, 10))
        ending = rng.random()
        if ending < 0.1:
            case.sent.append("closed at once")
        elif ending < 0.15:
            case.sent.append("half-closed")
            connection.half_close()
            connection.read(READ_SECONDS)
        else:
            marker = rng.randbytes(8)
            case.emit("the last PING", PingFrame(0, marker))
            connection.read(READ_SECONDS, awaited_all(case, marker))
        outcome = Outcome(index, source, case.sent, connection.received, case.awaited)
    got = connection.received
    outcome.failures += [f"case {index}: {fault}" for fault in got.faults]
    # UNKNOWN is gRPC's answer when a handler raises: the service answers every call itself.
    outcome.failures += [
        f"case {index}: stream {stream} answered UNKNOWN ({got.header(stream, 'grpc-message')})"
        f"\n{outcome.describe()}"
        for stream in got.headers
        if got.grpc_status(stream) == grpc.StatusCode.UNKNOWN.value[0]
    ]
    return outcome


def probe(port: int, index: int) -> Outcome:
    """A Health Check as a conforming client makes it: it must be answered SERVING."""
    with Connection(port, source="127.0.0.1") as connection:
        connection.start()
        connection.request(
            1,
            grpc_headers(HEALTH_CHECK),
            grpc_message(health_pb2.HealthCheckRequest().SerializeToString()),
        )
        got = connection.read(READ_SECONDS * 2, lambda got: got.finished(1))
    outcome = Outcome(index, "127.0.0.1", ["a probe: Health Check"], got, [1], probe=True)
    messages = grpc_messages(got.data.get(1, b""))
    answer = health_pb2.HealthCheckResponse.FromString(messages[0]) if messages else None
    if got.grpc_status(1) != 0 or answer is None or answer.status != answer.SERVING:
        outcome.failures.append(
            f"probe {index} not answered SERVING: status {got.grpc_status(1)}, "
            f"answer {answer}, {got.summary()}"
        )
    return outcome


# --- many connections, and what the service logged meanwhile ---------------------------------


@dataclass
class Fuzz:
    seed: int
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    #: Error lines from the service's log, each with the cases in flight when it came.
    errors: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[str]:
        return [failure for outcome in self.outcomes for failure in outcome.failures]

    def tally(self) -> dict[str, Counter[str]]:
        tally: dict[str, Counter[str]] = {
            "grpc-status": Counter(), "GOAWAY": Counter(), "RST_STREAM": Counter(),
            "connection": Counter(),
        }  # fmt: skip
        for outcome in self.outcomes:
            got = outcome.received
            for stream in got.headers:
                tally["grpc-status"][str(got.grpc_status(stream))] += 1
            if got.goaway is not None:
                tally["GOAWAY"][error_name(got.goaway.error_code)] += 1
            for code in got.resets.values():
                tally["RST_STREAM"][error_name(code)] += 1
            unanswered = [s for s in outcome.awaited if not got.finished(s)]
            tally["connection"]["closed" if got.closed else "open"] += 1
            tally["connection"]["with unanswered calls"] += bool(unanswered and not got.goaway)
        return tally

    def report(self) -> str:
        return f"seed {self.seed} (GNAU_FUZZ_SEED={self.seed} repeats it): " + "; ".join(
            f"{name} {dict(counts)}" for name, counts in self.tally().items()
        )


def bad_lines(lines: list[str]) -> list[str]:
    """The lines of the service's log (and of gRPC's core) that report an error."""
    bad = []
    for line in lines:
        if line.startswith("{"):
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                bad.append(f"not JSON: {line[:500]}")
                continue
            if event.get("level") in ("error", "critical") or "exception" in event:
                bad.append(line[:3000])
        elif "Traceback" in line or re.match(r"[EF]\d{4} ", line) or "Fatal Python" in line:
            bad.append(line[:3000])
    return bad


def fuzz(target: Target, seed: int, cases: int, flood: int) -> Fuzz:
    """``cases`` cases, :data:`CONCURRENCY` at a time, floods of up to ``flood`` frames (or
    streams); after each batch, the log's new lines."""
    result = Fuzz(seed)
    started = time.monotonic()
    target.log()  # what came before is not the fuzz's
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        for first in range(0, cases, CONCURRENCY):
            batch = range(first, min(cases, first + CONCURRENCY))
            outcomes = list(pool.map(lambda n: play_case(target, seed, n, flood), batch))
            result.outcomes += outcomes
            if errors := bad_lines(target.log()):
                in_flight = "\n".join(outcome.describe() for outcome in outcomes)
                result.errors.append(
                    f"seed {seed}, cases {batch.start}..{batch.stop - 1}: {errors}\n"
                    f"in flight (or just before):\n{in_flight}"
                )
    result.seconds = time.monotonic() - started
    return result


def assert_fuzz(result: Fuzz, cases: int) -> None:
    print(f"\nHTTP/2 fuzz, {cases} cases in {result.seconds:.1f} s: {result.report()}")
    assert not result.failures, f"seed {result.seed}: " + "\n".join(result.failures[:10])
    assert not result.errors, "\n\n".join(result.errors[:3])
    # The fuzz reached what it means to: answers, refusals, and connections the server ended.
    tally = result.tally()
    probes = sum(outcome.probe for outcome in result.outcomes)
    assert tally["grpc-status"]["0"] > probes, result.report()
    assert len(tally["grpc-status"]) >= 4, result.report()
    assert tally["connection"]["closed"] >= cases // 4, result.report()
    assert tally["RST_STREAM"], result.report()


# --- the service afterwards ------------------------------------------------------------------


async def still_well(target: str, token: str, seed: int) -> None:
    """Listening, SERVING on a fresh channel, and a whole round played."""
    host, port = target.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5):
        pass
    async with grpc.aio.insecure_channel(target) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "gnau.v1.DealerService"):
            answer = await health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING, f"seed {seed}"
    async with AsyncGnauClient(target, token=token) as client:
        played = await client.play_round(AFTER_TABLE, SEATS, timeout=30)
    assert played.state == round_pb2.ROUND_STATE_SETTLED, f"seed {seed}: {played}"


async def fuzz_and_check(target: Target, seed: int, cases: int, flood: int) -> Fuzz:
    """The fuzz, then the service's health and a round (the log is the caller's to check)."""
    result = await asyncio.to_thread(fuzz, target, seed, cases, flood)
    try:
        await still_well(f"127.0.0.1:{target.port}", target.tokens["operator"], seed)
    except (AssertionError, grpc.RpcError) as error:
        failures = "\n".join(result.failures[:10] + result.errors[:3])
        raise AssertionError(
            f"seed {seed}: the service is not well after the fuzz: {error!r}\n{failures}\n"
            f"{result.report()}"
        ) from error
    await asyncio.sleep(0.2)  # a call's last line comes after its answer
    if errors := bad_lines(target.log()):
        result.errors.append(f"seed {seed}, after the fuzz: {errors}")
    return result


def captured(capfd: pytest.CaptureFixture[str]) -> Callable[[], list[str]]:
    """The in-process service's new log lines (and gRPC core's), as the test's stderr got them."""

    def new_lines() -> list[str]:
        return capfd.readouterr().err.splitlines()

    return new_lines


async def fuzz_in_process(
    service: Service,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    *,
    seed: int,
    cases: int,
    flood: int,
) -> None:
    caplog.set_level(logging.WARNING)
    target = Target(service.app.port, TOKENS, captured(capfd))
    result = await fuzz_and_check(target, seed, cases, flood)
    records = [r for r in caplog.records if r.levelno >= logging.ERROR]
    result.errors += [f"seed {seed}: logged {r.getMessage()[:1000]}" for r in records]
    with capfd.disabled():
        assert_fuzz(result, cases)
    vkey = service.app.store.signer.vkey
    await asyncio.to_thread(verified_log, service.settings.database_url, tmp_path, vkey)


async def test_the_grpc_port_holds_under_an_http2_frame_fuzz(
    service: Service,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    await fuzz_in_process(service, capfd, caplog, tmp_path, seed=SEED, cases=CASES, flood=FLOOD)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [SEED + 1, SEED + 2])
async def test_the_grpc_port_holds_under_a_long_http2_frame_fuzz(
    service: Service,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    seed: int,
) -> None:
    await fuzz_in_process(
        service, capfd, caplog, tmp_path, seed=seed, cases=SLOW_CASES, flood=SLOW_FLOOD
    )


@pytest.mark.system
@pytest.mark.slow
async def test_gnau_serve_holds_under_a_long_http2_frame_fuzz(tmp_path: Path) -> None:
    """The same against ``gnau serve`` with two workers: a process of its own, as deployed
    (gRPC's core silenced, its log a file, the port shared by the workers)."""
    seed = SEED + 10
    with served(tmp_path / "data", "--workers", "2") as server:
        await asyncio.to_thread(server.put_tables, CATALOGUED)
        seen = 0

        def log() -> list[str]:
            nonlocal seen
            lines = server.stderr_path.read_text(encoding="utf-8", errors="replace").splitlines()
            new, seen = lines[seen:], len(lines)
            return new

        port = int(server.target.rsplit(":", 1)[1])
        target = Target(port, {"operator": server.token}, log)
        result = await fuzz_and_check(target, seed, SLOW_CASES, SLOW_FLOOD)
        assert server.process.poll() is None, f"seed {seed}: gnau serve exited\n{result.report()}"
        assert_fuzz(result, SLOW_CASES)
        await asyncio.to_thread(verified_log, server.database, tmp_path, server.vkey)
