"""The interceptor over a real server: undecodable requests, faults inside handlers, request ids,
and every handler shape (health's Watch, reflection's bidirectional stream)."""

from __future__ import annotations

import json
import uuid

import grpc
import pytest
from gnau.v1 import dealer_pb2
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status

from gnau_service.rounds.dealer import Dealer
from tests.server.conftest import TOKENS, Service


def raw_method(channel: grpc.aio.Channel, method: str) -> grpc.aio.UnaryUnaryMultiCallable:
    """A method that sends the bytes it is given, as a hostile client would."""
    return channel.unary_unary(
        method, request_serializer=lambda data: data, response_deserializer=lambda data: data
    )


def error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo:
    status = rpc_status.from_call(error)
    assert status is not None, "the refusal carries no google.rpc.Status"
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    raise AssertionError("no ErrorInfo in the status")


def log_lines(captured: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in captured.splitlines() if line.startswith("{")]


OPERATOR = (("authorization", f"Bearer {TOKENS['operator']}"),)
REVEAL = dealer_pb2.RevealRequest(request_id="r-1", round_id="r-1").SerializeToString()
#: A DealRequest whose one seat's player_id is the byte 0xff: not UTF-8.
BAD_UTF8_DEAL = b"\x0a\x01x" + b"\x1a\x05\x12\x01\xff\x18\x01"


@pytest.mark.parametrize(
    ("method", "data"),
    [
        ("/gnau.v1.DealerService/Reveal", REVEAL + b"\x1b"),  # one trailing byte
        ("/gnau.v1.DealerService/Deal", BAD_UTF8_DEAL),
        ("/gnau.v1.DealerService/GetRound", b"\xff\xff\xff\xff"),
        ("/gnau.v1.AuditService/GetCheckpoint", b"\x0a\x80"),  # a truncated length
    ],
    ids=["trailing byte", "bad UTF-8", "junk", "truncated"],
)
async def test_an_undecodable_request_is_invalid_argument_without_a_traceback(
    service: Service, capsys: pytest.CaptureFixture[str], method: str, data: bytes
) -> None:
    # The caller's credentials are good: a request is decoded only after they are checked.
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await raw_method(service.channel, method)(data, metadata=OPERATOR)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == "the request could not be decoded"
    assert error_info(caught.value).reason == "UNDECODABLE_REQUEST"
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    assert "DecodeError" not in captured.err


async def test_undecodable_requests_warn_once_per_peer_with_a_count(
    service: Service, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    reveal = raw_method(service.channel, "/gnau.v1.DealerService/Reveal")
    for _ in range(7):
        with pytest.raises(grpc.aio.AioRpcError):
            await reveal(REVEAL + b"\x1b", metadata=OPERATOR)
    lines = log_lines(capsys.readouterr().err)
    warnings = [line for line in lines if line.get("level") == "warning"]
    assert len(warnings) == 1, warnings
    assert len(lines) == 1, "undecodable requests cost one line a peer a minute, no more"
    assert warnings[0]["event"] == "undecodable requests"
    assert warnings[0]["peer"] == "127.0.0.1" and warnings[0]["count"] == 1
    assert service.app.interceptor.undecodable.total == 7


async def test_a_fault_inside_a_handler_is_internal_with_only_the_request_id(
    service: Service, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: Dealer, round_id: str, **options: object) -> None:
        server_seed = "5eed" * 16  # a local a traceback could show
        raise RuntimeError(f"secret internals: /var/lib/gnau {len(server_seed)}")

    monkeypatch.setattr(Dealer, "get", broken)
    request_id = str(uuid.uuid4())
    call = service.dealer.GetRound(
        dealer_pb2.GetRoundRequest(round_id="r-1"),
        metadata=(
            ("authorization", f"Bearer {TOKENS['operator']}"),
            ("x-request-id", request_id),
        ),
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    error = caught.value
    assert error.code() == grpc.StatusCode.INTERNAL
    assert error.details() == f"internal error; quote request id {request_id}"
    assert "secret" not in str(error.debug_error_string())
    info = error_info(error)
    assert (info.reason, info.metadata["request_id"]) == ("INTERNAL", request_id)
    err = capsys.readouterr().err
    assert "5eed5eed" not in err, "a traceback in the log showed a local variable"
    failed = [line for line in log_lines(err) if line["event"] == "rpc failed"]
    assert len(failed) == 1 and failed[0]["request_id"] == request_id
    assert failed[0]["error"] == "RuntimeError"  # the traceback is there, as structured data
    assert isinstance(failed[0]["exception"], list)


@pytest.mark.parametrize("given", ["x" * 64, "x" * 65, "x" * 2000, ""])
async def test_a_request_id_header_is_echoed_only_if_short(service: Service, given: str) -> None:
    # gRPC clients send only printable ASCII in text metadata, so length is what can go wrong.
    call = service.dealer.EvaluateHand(
        dealer_pb2.EvaluateHandRequest(cards=["AS", "2C", "3C", "4C", "5C"]),
        metadata=(("x-request-id", given),),
    )
    await call
    echoed = str(dict(await call.trailing_metadata())["x-request-id"])
    if len(given) == 64:
        assert echoed == given
    else:
        assert echoed != given and uuid.UUID(echoed).version == 4


async def test_health_watch_streams_serving(service: Service) -> None:
    watch = health_pb2_grpc.HealthStub(service.channel).Watch(health_pb2.HealthCheckRequest())
    first = await watch.read()
    assert first.status == health_pb2.HealthCheckResponse.SERVING
    watch.cancel()


async def test_a_channel_with_client_side_health_checking_gets_through(service: Service) -> None:
    # Client-side health checking watches grpc.health.v1 Watch on every subchannel: if Watch
    # fails, the channel never routes a call, and every call fails UNAVAILABLE.
    config = {
        "loadBalancingConfig": [{"round_robin": {}}],
        "healthCheckConfig": {"serviceName": ""},
    }
    async with grpc.aio.insecure_channel(
        f"127.0.0.1:{service.app.port}",
        options=[("grpc.service_config", json.dumps(config))],
    ) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        answer = await stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING


async def test_reflection_answers_through_the_interceptor(service: Service) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(service.channel)
    call = stub.ServerReflectionInfo()
    await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
    answer = await call.read()
    await call.done_writing()
    names = {item.name for item in answer.list_services_response.service}
    assert {"gnau.v1.DealerService", "gnau.v1.AuditService"} <= names
