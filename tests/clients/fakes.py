"""A real in-process gRPC server with fake Gnau servicers that record what reaches them.

The servicers implement the generated ``DealerServiceServicer`` and ``AuditServiceServicer``:
every call is recorded with its request, metadata and remaining deadline, and answered with a
canned response. ``fail`` makes the next N calls of a method fail with a given status, so gRPC's
retries (configured by the client's service config) can be observed from the server side.
"""

# The servicer methods carry the RPC names the generated base class declares.

from __future__ import annotations

import threading
import time
from collections import defaultdict, deque
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field

import grpc
from gnau.v1 import audit_pb2, audit_pb2_grpc, dealer_pb2, dealer_pb2_grpc, round_pb2, types_pb2

NO_DEADLINE = 1e9


@dataclass(frozen=True)
class Call:
    """One call as the server saw it."""

    method: str
    request: object
    metadata: dict[str, str]
    time_remaining: float | None


@dataclass
class Recorder:
    """What reached the server, and the failures it is told to inject."""

    calls: list[Call] = field(default_factory=list)
    failures: dict[str, deque[grpc.StatusCode]] = field(default_factory=lambda: defaultdict(deque))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, method: str, code: grpc.StatusCode, times: int = 1) -> None:
        """Make the next ``times`` calls of ``method`` fail with ``code``."""
        with self.lock:
            self.failures[method].extend([code] * times)

    def record(self, method: str, request: object, context: grpc.ServicerContext) -> None:
        """Record the call; abort it if a failure is due."""
        metadata = {
            key: value if isinstance(value, str) else value.decode()
            for key, value in context.invocation_metadata()
        }
        remaining: float | None = context.time_remaining()
        if remaining is not None and remaining > NO_DEADLINE:
            remaining = None  # grpc reports "no deadline" as a huge number of seconds
        with self.lock:
            self.calls.append(Call(method, request, metadata, remaining))
            code = self.failures[method].popleft() if self.failures[method] else None
        if code is not None:
            context.abort(code, f"injected {code.name}")

    def of(self, method: str) -> list[Call]:
        """The calls of one method, in arrival order."""
        with self.lock:
            return [call for call in self.calls if call.method == method]

    def methods(self) -> list[str]:
        with self.lock:
            return [call.method for call in self.calls]


def make_round(
    round_id: str, state: round_pb2.RoundState.ValueType, **fields: object
) -> round_pb2.Round:
    """A canned round."""
    return round_pb2.Round(round_id=round_id, table_id="table-1", state=state, **fields)  # type: ignore[arg-type]


class FakeDealer(dealer_pb2_grpc.DealerServiceServicer):
    """Answers every DealerService call with a canned round, after recording it."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.pages: dict[str, dealer_pb2.ListRoundsResponse] = {}

    def Shuffle(
        self, request: dealer_pb2.ShuffleRequest, context: grpc.ServicerContext
    ) -> dealer_pb2.ShuffleResponse:
        self.recorder.record("Shuffle", request, context)
        round_ = make_round(
            "r-1",
            round_pb2.ROUND_STATE_SHUFFLED,
            house_rules=request.house_rules,
            commitment="ab" * 32,
        )
        return dealer_pb2.ShuffleResponse(round=round_)

    def Deal(
        self, request: dealer_pb2.DealRequest, context: grpc.ServicerContext
    ) -> dealer_pb2.DealResponse:
        self.recorder.record("Deal", request, context)
        round_ = make_round(request.round_id, round_pb2.ROUND_STATE_DEALT, seats=request.seats)
        return dealer_pb2.DealResponse(round=round_)

    def Reveal(
        self, request: dealer_pb2.RevealRequest, context: grpc.ServicerContext
    ) -> dealer_pb2.RevealResponse:
        self.recorder.record("Reveal", request, context)
        round_ = make_round(request.round_id, round_pb2.ROUND_STATE_REVEALED, server_seed="cd" * 32)
        return dealer_pb2.RevealResponse(round=round_)

    def Settle(
        self, request: dealer_pb2.SettleRequest, context: grpc.ServicerContext
    ) -> dealer_pb2.SettleResponse:
        self.recorder.record("Settle", request, context)
        settlement = round_pb2.Settlement(
            seat_results=[
                round_pb2.SeatResult(
                    seat_number=1, stake=100, outcome=round_pb2.OUTCOME_WIN, delta=200
                )
            ],
            dealer_delta=-200,
        )
        round_ = make_round(request.round_id, round_pb2.ROUND_STATE_SETTLED, settlement=settlement)
        return dealer_pb2.SettleResponse(round=round_)

    def VoidRound(
        self, request: dealer_pb2.VoidRoundRequest, context: grpc.ServicerContext
    ) -> dealer_pb2.VoidRoundResponse:
        self.recorder.record("VoidRound", request, context)
        round_ = make_round(
            request.round_id, round_pb2.ROUND_STATE_VOIDED, void_reason=request.reason
        )
        return dealer_pb2.VoidRoundResponse(round=round_)

    def GetRound(
        self, request: dealer_pb2.GetRoundRequest, context: grpc.ServicerContext
    ) -> dealer_pb2.GetRoundResponse:
        self.recorder.record("GetRound", request, context)
        if request.round_id != "r-1":
            context.abort(grpc.StatusCode.NOT_FOUND, f"no round {request.round_id!r}")
        return dealer_pb2.GetRoundResponse(round=make_round("r-1", round_pb2.ROUND_STATE_DEALT))

    def ListRounds(
        self, request: dealer_pb2.ListRoundsRequest, context: grpc.ServicerContext
    ) -> dealer_pb2.ListRoundsResponse:
        self.recorder.record("ListRounds", request, context)
        return self.pages[request.page_token]

    def EvaluateHand(
        self, request: dealer_pb2.EvaluateHandRequest, context: grpc.ServicerContext
    ) -> dealer_pb2.EvaluateHandResponse:
        self.recorder.record("EvaluateHand", request, context)
        evaluation = types_pb2.HandEvaluation(
            cards=request.cards, category=types_pb2.HAND_CATEGORY_DOUBLE_OX, value=8
        )
        return dealer_pb2.EvaluateHandResponse(evaluation=evaluation)


def entry(index: int) -> audit_pb2.Entry:
    return audit_pb2.Entry(index=index, data=b'{"index":%d}' % index)


class FakeAudit(audit_pb2_grpc.AuditServiceServicer):
    """Serves a log of ``size`` canned entries. ``watch_breaks`` lists, per WatchEntries call,
    after how many entries the stream breaks with UNAVAILABLE (then the call ends normally)."""

    def __init__(self, recorder: Recorder, size: int = 10) -> None:
        self.recorder = recorder
        self.size = size
        self.watch_breaks: deque[int] = deque()
        self.skip_index: int | None = None
        # With `follow`, WatchEntries waits for new entries (that never come) after the last
        # one, like a real watch, until the client goes away; `watch_ended` is then set.
        self.follow = False
        self.watch_ended = threading.Event()

    def GetCheckpoint(
        self, request: audit_pb2.GetCheckpointRequest, context: grpc.ServicerContext
    ) -> audit_pb2.GetCheckpointResponse:
        self.recorder.record("GetCheckpoint", request, context)
        return audit_pb2.GetCheckpointResponse(checkpoint="gnau-dealer/test\n10\nAAAA\n\n")

    def GetEntries(
        self, request: audit_pb2.GetEntriesRequest, context: grpc.ServicerContext
    ) -> Iterator[audit_pb2.GetEntriesResponse]:
        self.recorder.record("GetEntries", request, context)
        indices = [
            i for i in range(request.start, min(request.end, self.size)) if i != self.skip_index
        ]
        for batch_start in range(0, len(indices), 3):
            batch = indices[batch_start : batch_start + 3]
            yield audit_pb2.GetEntriesResponse(entries=[entry(i) for i in batch])

    def GetInclusionProof(
        self, request: audit_pb2.GetInclusionProofRequest, context: grpc.ServicerContext
    ) -> audit_pb2.GetInclusionProofResponse:
        self.recorder.record("GetInclusionProof", request, context)
        return audit_pb2.GetInclusionProofResponse(hashes=[b"\x01" * 32, b"\x02" * 32])

    def GetConsistencyProof(
        self, request: audit_pb2.GetConsistencyProofRequest, context: grpc.ServicerContext
    ) -> audit_pb2.GetConsistencyProofResponse:
        self.recorder.record("GetConsistencyProof", request, context)
        return audit_pb2.GetConsistencyProofResponse(hashes=[b"\x03" * 32])

    def GetPublicKeys(
        self, request: audit_pb2.GetPublicKeysRequest, context: grpc.ServicerContext
    ) -> audit_pb2.GetPublicKeysResponse:
        self.recorder.record("GetPublicKeys", request, context)
        return audit_pb2.GetPublicKeysResponse(
            origin="gnau-dealer/test", verifier_keys=["gnau-dealer/test+01020304+AQID"]
        )

    def WatchEntries(
        self, request: audit_pb2.WatchEntriesRequest, context: grpc.ServicerContext
    ) -> Iterator[audit_pb2.WatchEntriesResponse]:
        self.recorder.record("WatchEntries", request, context)
        breaks_after = self.watch_breaks.popleft() if self.watch_breaks else None
        for sent, index in enumerate(range(request.start_index, self.size)):
            if sent == breaks_after:
                context.abort(grpc.StatusCode.UNAVAILABLE, "server going away")
            yield audit_pb2.WatchEntriesResponse(entries=[entry(index)])
        if self.follow:
            context.add_callback(self.watch_ended.set)
            while context.is_active():
                time.sleep(0.01)

    def VerifyRound(
        self, request: audit_pb2.VerifyRoundRequest, context: grpc.ServicerContext
    ) -> audit_pb2.VerifyRoundResponse:
        self.recorder.record("VerifyRound", request, context)
        return audit_pb2.VerifyRoundResponse(ok=True, summary=f"round {request.round_id} verifies")


@dataclass
class FakeServer:
    """A started server on a loopback port, with its fakes."""

    server: grpc.Server
    target: str
    recorder: Recorder
    dealer: FakeDealer
    audit: FakeAudit


def start_fake_server() -> FakeServer:
    recorder = Recorder()
    dealer, audit = FakeDealer(recorder), FakeAudit(recorder)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    dealer_pb2_grpc.add_DealerServiceServicer_to_server(dealer, server)
    audit_pb2_grpc.add_AuditServiceServicer_to_server(audit, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return FakeServer(server, f"127.0.0.1:{port}", recorder, dealer, audit)
