"""Calling a running service from the command line: ``--target``, ``--token``, ``--tls-ca``,
one way to connect, one line for a refusal, and reading a pinned log key.

Every command that calls a service takes ``--target HOST:PORT``, whose default is the
``GNAU_TARGET`` environment variable, then ``127.0.0.1:50051`` (the ``gnau audit`` commands,
which read a database unless told otherwise, have no fixed default: see :func:`add_target_option`).

A token is a credential: it is sent in clear text only to this machine (a loopback address or a
Unix socket); to any other host the call must go over TLS (``--tls-ca``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Final, NamedTuple, TypeVar

import grpc
from gnau_client import GnauClient, is_local_target

from gnau_service.audit.entries import clip
from gnau_service.audit.note import Verifier
from gnau_service.cli.file_errors import problem

#: Where a command calls the service when neither --target nor GNAU_TARGET says: where it
#: listens by default (``Settings().listen``, which a test holds equal to it).
DEFAULT_TARGET: Final = "127.0.0.1:50051"
TARGET_VARIABLE: Final = "GNAU_TARGET"


def add_target_option(
    parser: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup,
    *,
    fallback: str | None = DEFAULT_TARGET,
    meaning: str = "host:port of the service",
) -> None:
    """``--target HOST:PORT``, defaulting to GNAU_TARGET, then to ``fallback`` (None: no
    service unless one is named)."""
    default = os.environ.get(TARGET_VARIABLE) or fallback
    shown = f"default: {TARGET_VARIABLE}" + (f", then {fallback}" if fallback else "")
    parser.add_argument(
        "--target", metavar="HOST:PORT", default=default, help=f"{meaning} ({shown})"
    )


class TargetError(Exception):
    """The service cannot be called as asked: the message is one line for stderr."""


K = TypeVar("K")


class UnusableKeyError(ValueError):
    """A ``--key`` that is neither a vkey nor a readable file holding one."""


def add_token_options(parser: argparse.ArgumentParser, *, role: str = "a") -> None:
    parser.add_argument(
        "--token",
        help=f"with --target: {role} bearer token (default: GNAU_TOKEN)",
    )
    add_tls_options(parser)


def add_tls_options(parser: argparse.ArgumentParser) -> None:
    """The one set of TLS options of every command that calls a service."""
    parser.add_argument(
        "--tls-ca",
        type=Path,
        metavar="FILE",
        help="call the service over TLS, trusting this CA certificate (PEM); needed to send a "
        "token to any host but this one",
    )
    parser.add_argument(
        "--tls-server-name",
        metavar="NAME",
        help="with --tls-ca: the name the server's certificate must carry, when it is not the "
        "target's host (through a port-forward, or a probe calling 127.0.0.1)",
    )


class Transport(NamedTuple):
    """How to reach a service: TLS credentials (None: plain text) and channel options."""

    credentials: grpc.ChannelCredentials | None
    options: tuple[tuple[str, str], ...]


def transport(args: argparse.Namespace) -> Transport:
    """The channel's TLS, from ``--tls-ca`` and ``--tls-server-name``; TargetError if they
    cannot be used."""
    if args.tls_server_name is not None and args.tls_ca is None:
        raise TargetError("--tls-server-name needs --tls-ca")
    if args.tls_ca is None:
        return Transport(None, ())
    try:
        credentials = grpc.ssl_channel_credentials(root_certificates=args.tls_ca.read_bytes())
    except OSError as error:
        raise TargetError(f"--tls-ca {args.tls_ca}: {problem(error, named=args.tls_ca)}") from None
    named = (
        ()
        if args.tls_server_name is None
        else (("grpc.ssl_target_name_override", args.tls_server_name),)
    )
    return Transport(credentials, named)


def connect(
    args: argparse.Namespace, *, token_required: str | None = None, token: str | None = None
) -> GnauClient:
    """A client for ``args.target``, with ``token`` (else ``args.token`` or GNAU_TOKEN) and the
    TLS options. ``token_required``: the reason a call needs a token, if it does."""
    token = token or args.token or os.environ.get("GNAU_TOKEN") or None
    if token is None and token_required is not None:
        raise TargetError(f"{token_required}: pass --token or set GNAU_TOKEN")
    credentials, options = transport(args)
    if credentials is None and token is not None and not is_local_target(args.target):
        raise TargetError(
            f"the token would cross the network to {args.target} in clear text: call over TLS "
            "with --tls-ca FILE"
        )
    try:
        return GnauClient(args.target, credentials=credentials, token=token, options=options)
    except ValueError as error:  # a token that is not a bearer token
        raise TargetError(f"--token: {error}") from None


def refusal(target: str, error: grpc.RpcError) -> str:
    """A failed call in one line: the status and the server's (or gRPC's) message."""
    if not isinstance(error, grpc.Call):
        return f"{target}: {error}"
    details = " ".join(str(error.details() or "").split())
    return f"{target}: {error.code().name}: {clip(details, 300)}"


def read_vkey(text: str) -> Verifier:
    """A log's verifier key given as itself, or as a file holding one."""
    return read_key(text, "--key", Verifier.from_vkey)


def read_key(text: str, flag: str, parse: Callable[[str], K]) -> K:
    """A key given to ``flag`` as itself (a vkey has "+" signs), or as a file holding one;
    ``parse`` reads the vkey."""
    path = Path(text)
    if "+" not in text and path.is_file():
        try:
            text = path.read_bytes().decode("utf-8").strip()
        except UnicodeDecodeError as error:
            raise UnusableKeyError(f"{flag} file {path} is not UTF-8: {error.reason}") from None
    try:
        return parse(text)
    # KeyFormatError, or the UnicodeEncodeError of a key name holding a lone surrogate.
    except ValueError as error:
        raise UnusableKeyError(f"{flag}: {clip(str(error), 200)}") from None
