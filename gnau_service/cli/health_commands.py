"""``gnau health``: ask a running service whether it is serving, for probes and operators.

The gRPC health protocol's Check, one call: exit 0 when the answer is SERVING, 1 when the service
answered anything else (NOT_SERVING while it drains on SIGTERM or its storage fails; an unknown
service name), 2 when it could not be asked (nothing listening, a timeout, TLS that fails).

Without ``--target`` it asks ``GNAU_TARGET`` if set (as every command that calls a service
does), else this machine's service at the port of ``GNAU_LISTEN`` (a wildcard host such as
``0.0.0.0`` becomes the loopback address), so a Docker HEALTHCHECK, a Kubernetes exec probe or a
systemd check needs no arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

import grpc
from grpc_health.v1 import health_pb2

from gnau_service.cli.failing import fail
from gnau_service.cli.remote import (
    DEFAULT_TARGET,
    TargetError,
    add_target_option,
    add_tls_options,
    transport,
)

DEFAULT_TIMEOUT_SECONDS = 3.0
# A listen address on every interface is reached, from this machine, at the loopback address.
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1"}  # noqa: S104


def add_health_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "One gRPC health Check. Exit 0: SERVING; 1: any other answer; 2: no answer."
    )
    add_target_option(
        parser,
        fallback=None,  # run_health finds this machine's own service (GNAU_LISTEN's port)
        meaning="host:port of the service (without it and GNAU_TARGET: this machine, at the port "
        f"of GNAU_LISTEN, else {DEFAULT_TARGET})",
    )
    parser.add_argument(
        "--service",
        default="",
        help="the service name to ask about, e.g. gnau.v1.DealerService (default: the server)",
    )
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS, help="seconds to wait"
    )
    add_tls_options(parser)
    parser.set_defaults(run=run_health)


def default_target(environ: Mapping[str, str]) -> str:
    """This machine's service: the port of ``GNAU_LISTEN``, on loopback for a wildcard host;
    without it, where the service listens by default (:data:`~.remote.DEFAULT_TARGET`).

    >>> default_target({"GNAU_LISTEN": "0.0.0.0:6000"}), default_target({})
    ('127.0.0.1:6000', '127.0.0.1:50051')
    >>> default_target({"GNAU_LISTEN": "[::]:6000"}), default_target({"GNAU_LISTEN": "10.1.2.3:1"})
    ('[::1]:6000', '10.1.2.3:1')
    """
    if "GNAU_LISTEN" not in environ:
        return DEFAULT_TARGET
    # Imported here: the server's settings are slow to import, and a probe given its
    # --target (or without GNAU_LISTEN) does not need them.
    from gnau_service.edge.addresses import split_host_port  # noqa: PLC0415

    host, port = split_host_port(environ["GNAU_LISTEN"])
    host = _WILDCARDS.get(host, host)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def run_health(args: argparse.Namespace) -> int:
    try:
        target = args.target or default_target(os.environ)
    except ValueError as error:
        return fail("health", f"GNAU_LISTEN: {error}")
    if not args.timeout > 0:
        return fail("health", f"--timeout must be positive, not {args.timeout}")
    try:
        credentials, options = transport(args)
    except TargetError as error:
        return fail("health", str(error))
    if credentials is None:
        channel = grpc.insecure_channel(target)
    else:
        channel = grpc.secure_channel(target, credentials, options=options)
    with channel:
        try:
            answer = _check(channel)(
                health_pb2.HealthCheckRequest(service=args.service), timeout=args.timeout
            )
        except grpc.RpcError as error:
            code = error.code().name if isinstance(error, grpc.Call) else "ERROR"
            if isinstance(error, grpc.Call) and error.code() == grpc.StatusCode.NOT_FOUND:
                print(f"{target}: service {args.service!r} is unknown to it", file=sys.stderr)
                return 1
            return fail("health", f"{target}: {code}: no answer")
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)
    print(f"{target}: {status}")
    return 0 if answer.status == health_pb2.HealthCheckResponse.SERVING else 1


def _check(
    channel: grpc.Channel,
) -> grpc.UnaryUnaryMultiCallable[health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse]:
    """The health protocol's Check (the typing stubs of ``HealthStub`` do not declare it)."""
    return channel.unary_unary(
        "/grpc.health.v1.Health/Check",
        request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
        response_deserializer=health_pb2.HealthCheckResponse.FromString,
    )
