"""A fuzzer of the gRPC edge: every method, every role, random and edge values, random bytes and
mutated messages, sent as raw bytes over a real channel, as a hostile client would.

It is seeded (``random.Random(seed)``: test inputs, not the service's randomness), so a failing
run is repeated exactly by its seed. It keeps what a run needs to check the service's claims:
the count of each status code, every log index an accepted change reported (so that the log can
be checked to hold nothing else), and the round ids it learnt (so that later requests reach real
rounds in every state).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import grpc
from gnau.v1 import audit_pb2, dealer_pb2, round_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2

DEALER: Final = "gnau.v1.DealerService"
AUDIT: Final = "gnau.v1.AuditService"
CHANGES: Final = frozenset({"Shuffle", "Deal", "Reveal", "Settle", "VoidRound"})

#: method path -> (request message class, whether the response streams)
METHODS: Final[dict[str, tuple[type[Message], bool]]] = {
    **{
        f"/{DEALER}/{method.name}": (
            getattr(dealer_pb2, method.input_type.name),
            method.server_streaming,
        )
        for method in dealer_pb2.DESCRIPTOR.services_by_name["DealerService"].methods
    },
    **{
        f"/{AUDIT}/{method.name}": (
            getattr(audit_pb2, method.input_type.name),
            method.server_streaming,
        )
        for method in audit_pb2.DESCRIPTOR.services_by_name["AuditService"].methods
    },
    "/grpc.health.v1.Health/Check": (health_pb2.HealthCheckRequest, False),
    "/grpc.health.v1.Health/Watch": (health_pb2.HealthCheckRequest, True),
}
REFLECTION: Final = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"

EDGE_STRINGS: Final = [
    "", " ", "t", "table-1", "r-", "é" * 64, "é" * 65, "x" * 128, "x" * 129, "x" * 20_000,
    "\x00", "a\nb", "\u202e", "\U0001f0a1", " padded ", "\uff21\uff33", "10C", "AS", "KD", "T",
    "../../etc/passwd", "'; DROP TABLE rounds; --", "%s%s%n", "null", "NaN",
]  # fmt: skip
EDGE_INTEGERS: Final = [
    0, 1, -1, 2, 5, 9, 10, 82, 83, 100, 2**31 - 1, -(2**31), 2**32, 10**12, 10**12 + 1,
    2**52, 2**53 - 1, 2**53, 2**62, 2**63 - 1, -(2**63),
]  # fmt: skip
#: How long a stream's next message is awaited before the fuzzer moves on.
STREAM_READ_SECONDS: Final = 0.05
EDGE_BYTES: Final = [b"", b"\x00", bytes(32), bytes(64), bytes(65), bytes(1024), bytes(1025)]


@dataclass
class FuzzReport:
    """What a run saw."""

    codes: Counter[str] = field(default_factory=Counter)
    by_method: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: Log indices that accepted changes reported (their rounds' log_indices).
    accepted_indices: set[int] = field(default_factory=set)
    round_ids: list[str] = field(default_factory=list)
    requests: int = 0

    def note(self, method: str, code: grpc.StatusCode) -> None:
        self.requests += 1
        self.codes[code.name] += 1
        self.by_method[(method.rsplit("/", 1)[1], code.name)] += 1


class EdgeFuzzer:
    """Builds hostile requests from a seed and sends them over ``channel``."""

    def __init__(self, channel: grpc.aio.Channel, tokens: dict[str, str], seed: int) -> None:
        self.channel = channel
        self.tokens = tokens
        self.random = random.Random(seed)
        self.report = FuzzReport()

    async def run(self, requests: int) -> FuzzReport:
        for _ in range(requests):
            await self.one()
        return self.report

    async def one(self) -> None:
        pick = self.random.random()
        if pick < 0.03:
            await self._reflection()
            return
        if pick < 0.12 and self.report.round_ids:
            await self._next_step()
            return
        method = self.random.choice(list(METHODS))
        message_class, streaming = METHODS[method]
        if pick < 0.15:
            data = self.random.randbytes(self.random.randrange(0, 300))
        elif pick < 0.30:
            data = self._mutated(self._message(message_class).SerializeToString())
        else:
            data = self._message(message_class).SerializeToString()
        metadata = self._credentials()
        if streaming:
            await self._stream(method, data, metadata)
        else:
            await self._unary(method, data, metadata)

    # -- sending -------------------------------------------------------------------------------

    async def _unary(self, method: str, data: bytes, metadata: tuple[tuple[str, str], ...]) -> None:
        call = self.channel.unary_unary(method, request_serializer=_raw, response_deserializer=_raw)
        try:
            answer = await call(data, metadata=metadata, timeout=20)
        except grpc.aio.AioRpcError as error:
            self.report.note(method, error.code())
            return
        self.report.note(method, grpc.StatusCode.OK)
        name = method.rsplit("/", 1)[1]
        response_class = getattr(dealer_pb2, f"{name}Response", None)
        if method.startswith(f"/{DEALER}/") and "round" in response_class.DESCRIPTOR.fields_by_name:
            round_ = response_class.FromString(answer).round
            self.report.round_ids.append(round_.round_id)
            if name in CHANGES:
                self.report.accepted_indices.update(round_.log_indices)

    async def _stream(
        self, method: str, data: bytes, metadata: tuple[tuple[str, str], ...]
    ) -> None:
        call = self.channel.unary_stream(
            method, request_serializer=_raw, response_deserializer=_raw
        )
        stream = call(data, metadata=metadata, timeout=20)
        code = grpc.StatusCode.OK
        try:
            for _ in range(self.random.randrange(1, 4)):
                # A watch with nothing new to send is waiting, as it should: stop reading.
                if await asyncio.wait_for(stream.read(), STREAM_READ_SECONDS) is grpc.aio.EOF:
                    break
        except grpc.aio.AioRpcError as error:
            code = error.code()
        except TimeoutError:
            pass
        finally:
            stream.cancel()
        self.report.note(method, code)

    async def _reflection(self) -> None:
        call = self.channel.stream_stream(
            REFLECTION, request_serializer=_raw, response_deserializer=_raw
        )
        stream = call(timeout=20)
        request = reflection_pb2.ServerReflectionRequest(
            file_containing_symbol=self.random.choice([*EDGE_STRINGS[:20], "gnau.v1.Round"])
        ).SerializeToString()
        code = grpc.StatusCode.OK
        try:
            await stream.write(self._mutated(request) if self.random.random() < 0.5 else request)
            await stream.read()
            await stream.done_writing()
        except grpc.aio.AioRpcError as error:
            code = error.code()
        finally:
            stream.cancel()
        self.report.note(REFLECTION, code)

    async def _next_step(self) -> None:
        """A well-formed next step of a known round (so that rounds reach every state), sent
        once, then maybe again as a retry (same id and body) or a conflict (same id, new body)."""
        round_id = self.random.choice(self.report.round_ids[-10:])
        request_id = str(uuid.uuid4())
        step = self.random.choice(["Deal", "Reveal", "Settle", "VoidRound"])
        message: Message
        if step == "Deal":
            seats = [
                round_pb2.Seat(
                    seat_number=n, player_id=f"p{n}", stake=self.random.randrange(1, 1000)
                )
                for n in range(1, self.random.randrange(2, 6))
            ]
            message = dealer_pb2.DealRequest(request_id=request_id, round_id=round_id, seats=seats)
        elif step == "VoidRound":
            message = dealer_pb2.VoidRoundRequest(
                reason_code=round_pb2.VOID_REASON_PLATFORM_FAILURE,
                request_id=request_id,
                round_id=round_id,
                reason="fuzz",
            )
        else:
            message = getattr(dealer_pb2, f"{step}Request")(
                request_id=request_id, round_id=round_id
            )
        operator = (("authorization", f"Bearer {self.tokens['operator']}"),)
        method = f"/{DEALER}/{step}"
        await self._unary(method, message.SerializeToString(), operator)
        if self.random.random() < 0.3:
            await self._unary(method, message.SerializeToString(), operator)  # a retry
        if self.random.random() < 0.1:
            other = dealer_pb2.RevealRequest(request_id=request_id, round_id=round_id + "x")
            await self._unary(f"/{DEALER}/Reveal", other.SerializeToString(), operator)

    # -- building ------------------------------------------------------------------------------

    def _credentials(self) -> tuple[tuple[str, str], ...]:
        headers: list[tuple[str, str]] = []
        role = self.random.choice(["operator", "operator", "auditor", "public", None, "bad", "odd"])
        if role in self.tokens:
            headers.append(("authorization", f"Bearer {self.tokens[role]}"))
        elif role == "bad":
            headers.append(("authorization", f"Bearer {uuid.uuid4()}"))
        elif role == "odd":
            headers.append(
                ("authorization", self.random.choice(["Basic eA==", "Bearer", "x" * 900]))
            )
        if self.random.random() < 0.2:
            headers.append(("x-request-id", self.random.choice(["", "id", "x" * 300])))
        return tuple(headers)

    def _message(self, message_class: type[Message]) -> Message:
        message = message_class()
        self._fill(message, depth=0)
        return message

    def _fill(self, message: Message, depth: int) -> None:
        descriptor: Descriptor = message.DESCRIPTOR
        for field_ in descriptor.fields:
            if self.random.random() < 0.25:
                continue  # left unset
            if field_.is_repeated:
                count = self.random.choice([0, 1, 2, 3, 5, 9, 10, 83, 200])
                target = getattr(message, field_.name)
                for _ in range(count):
                    if field_.type == FieldDescriptor.TYPE_MESSAGE:
                        self._fill(target.add(), depth + 1)
                    else:
                        target.append(self._scalar(field_))
            elif field_.type == FieldDescriptor.TYPE_MESSAGE:
                if depth < 3:
                    self._fill(getattr(message, field_.name), depth + 1)
            else:
                # A value out of the field's range is refused here; mutations cover raw bytes.
                with contextlib.suppress(ValueError, TypeError):
                    setattr(message, field_.name, self._scalar(field_))

    def _scalar(self, field_: FieldDescriptor) -> Any:
        choose: Callable[[list[Any]], Any] = self.random.choice
        kind = field_.type
        if field_.name == "request_id":
            return choose([str(uuid.uuid4())] * 6 + ["", "x" * 37, "é", "same-id"])
        if field_.name == "round_id":
            known = self.report.round_ids[-20:]
            return choose(known * 3 + EDGE_STRINGS if known else EDGE_STRINGS)
        if field_.name == "cards":
            return choose(["AS", "KD", "TC", "10H", "2c", "ZZ", "", "A♠", "x" * 500])
        if field_.name == "table_id":
            return choose(EDGE_STRINGS + [f"fuzz-{self.random.randrange(8)}"] * 10)
        if kind == FieldDescriptor.TYPE_STRING:
            return choose(EDGE_STRINGS)
        if kind == FieldDescriptor.TYPE_BYTES:
            return choose([*EDGE_BYTES, self.random.randbytes(self.random.randrange(0, 70))])
        if kind == FieldDescriptor.TYPE_BOOL:
            return self.random.random() < 0.5
        if kind == FieldDescriptor.TYPE_ENUM:
            return choose([*(value.number for value in field_.enum_type.values), 7, -1, 2**31 - 1])
        if field_.name in ("seat_number", "stake", "decks"):
            return choose([*EDGE_INTEGERS, *range(1, 10)])
        return choose(EDGE_INTEGERS)

    def _mutated(self, data: bytes) -> bytes:
        data = bytearray(data)
        for _ in range(self.random.randrange(1, 4)):
            action = self.random.randrange(4)
            if action == 0 and data:
                data[self.random.randrange(len(data))] ^= 1 << self.random.randrange(8)
            elif action == 1 and data:
                del data[self.random.randrange(len(data)) :]
            elif action == 2:
                data += self.random.choice([b"\x1b", b"\xff", b"\x0a\x80", b"\x00", b"\x08"])
            else:
                position = self.random.randrange(len(data) + 1)
                data[position:position] = self.random.randbytes(self.random.randrange(1, 8))
        return bytes(data)


def _raw(data: bytes) -> bytes:
    return data
