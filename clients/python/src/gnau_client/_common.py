"""What the sync and the async client share: channel configuration, metadata and requests."""

from __future__ import annotations

import ipaddress
import json
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, TypeAlias

import grpc
from gnau.v1 import audit_pb2, dealer_pb2, round_pb2, types_pb2

VERSION: Final = "0.1.0"

DEFAULT_TIMEOUT: Final = 5.0
"""Seconds a unary call may take unless the client or the call says otherwise."""

SERVICES: Final = ("gnau.v1.DealerService", "gnau.v1.AuditService")
"""The fully qualified services the retry policy applies to."""

MAX_REQUEST_ID_LENGTH: Final = 36

ChannelOption: TypeAlias = tuple[str, str | int]
Metadata: TypeAlias = tuple[tuple[str, str | bytes], ...]

# RFC 6750 section 2.1: the characters a bearer token may hold.
_BEARER_TOKEN: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_PRINTABLE_ASCII: Final = re.compile(r"[\x21-\x7e]+")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """gRPC's own retries of failed calls, written into the channel's service config.

    gRPC retries a call that failed with one of ``retryable_status_codes`` (``UNAVAILABLE``: the
    request did not reach a server able to act on it) up to ``max_attempts`` attempts in all,
    waiting a random time up to ``initial_backoff * backoff_multiplier ** (n - 1)`` seconds
    (at most ``max_backoff``) before retry ``n``. A streaming call is retried only until its
    first response arrives. Retries resend the same request bytes, so a mutating call's
    ``request_id`` is the same on every attempt and the server acts at most once.

    Retries are throttled per server (gRPC's ``retryThrottling``): each failed attempt costs a
    token, each successful call earns ``throttle_token_ratio`` of one, and no call is retried
    while half or fewer of ``throttle_max_tokens`` remain, so a server that keeps failing is
    not sent five times the load. The defaults allow about two fully failed calls in a row and
    keep retrying while under about a third of attempts fail. ``throttle_max_tokens=None``
    turns the throttle off.

    >>> RetryPolicy().service_config()["methodConfig"][0]["retryPolicy"]["maxAttempts"]
    5
    """

    max_attempts: int = 5
    initial_backoff: float = 0.1
    max_backoff: float = 2.0
    backoff_multiplier: float = 2.0
    retryable_status_codes: tuple[str, ...] = ("UNAVAILABLE",)
    throttle_max_tokens: int | None = 20
    throttle_token_ratio: float = 0.5

    def __post_init__(self) -> None:
        # gRPC caps maxAttempts at 5 and refuses the whole service config for a value below 2.
        if not 2 <= self.max_attempts <= 5:
            raise ValueError(f"max_attempts must be 2 to 5, got {self.max_attempts!r}")
        for name in ("initial_backoff", "max_backoff", "backoff_multiplier"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        if self.max_backoff < self.initial_backoff:
            raise ValueError("max_backoff must be at least initial_backoff")
        if not self.retryable_status_codes:
            raise ValueError("retryable_status_codes must name at least one status code")
        for code in self.retryable_status_codes:
            if code not in grpc.StatusCode.__members__ or code == "OK":
                raise ValueError(f"not a retryable gRPC status code name: {code!r}")
        # gRPC's limits: maxTokens in (0, 1000], tokenRatio positive (3 decimals are kept).
        if self.throttle_max_tokens is not None and not 1 <= self.throttle_max_tokens <= 1000:
            raise ValueError(
                f"throttle_max_tokens must be 1 to 1000 or None, got {self.throttle_max_tokens!r}"
            )
        if not self.throttle_token_ratio >= 0.001:
            raise ValueError(
                f"throttle_token_ratio must be at least 0.001, got {self.throttle_token_ratio!r}"
            )

    def service_config(self) -> dict[str, object]:
        """The service config (as JSON values) that applies this policy to every Gnau call."""
        config: dict[str, object] = {
            "methodConfig": [
                {
                    "name": [{"service": service} for service in SERVICES],
                    "retryPolicy": {
                        "maxAttempts": self.max_attempts,
                        "initialBackoff": _duration(self.initial_backoff),
                        "maxBackoff": _duration(self.max_backoff),
                        "backoffMultiplier": self.backoff_multiplier,
                        "retryableStatusCodes": list(self.retryable_status_codes),
                    },
                }
            ]
        }
        if self.throttle_max_tokens is not None:
            config["retryThrottling"] = {
                "maxTokens": self.throttle_max_tokens,
                "tokenRatio": self.throttle_token_ratio,
            }
        return config


def _duration(seconds: float) -> str:
    """A protobuf JSON duration: ``0.1`` -> ``"0.1s"`` (never an exponent)."""
    text = f"{seconds:.9f}".rstrip("0").rstrip(".")
    return f"{text}s"


def channel_options(
    retry: RetryPolicy | None = None, extra: Sequence[ChannelOption] = ()
) -> list[ChannelOption]:
    """Channel options for a Gnau channel: retries per ``retry`` (none if ``None``), a
    ``gnau-client/<version>`` user agent, then ``extra``, whose keys replace earlier ones.

    >>> dict(channel_options(RetryPolicy()))["grpc.enable_retries"]
    1
    """
    options: dict[str, str | int] = {
        "grpc.enable_retries": 1 if retry is not None else 0,
        "grpc.primary_user_agent": f"gnau-client/{VERSION}",
    }
    if retry is not None:
        options["grpc.service_config"] = json.dumps(retry.service_config(), sort_keys=True)
    options.update(dict(extra))
    return list(options.items())


def bearer_metadata(token: str | None) -> Metadata:
    """The call metadata that carries ``token``: ``authorization: Bearer <token>``, or none."""
    if token is None:
        return ()
    if not _BEARER_TOKEN.fullmatch(token):
        raise ValueError("a bearer token is 1 or more of A-Z a-z 0-9 - . _ ~ + / then any '='")
    return (("authorization", f"Bearer {token}"),)


def is_local_target(target: str) -> bool:
    """Whether a gRPC target names this machine only: a Unix socket or a loopback address.

    >>> [is_local_target(t) for t in ("localhost:50051", "[::1]:1", "unix:/run/g.sock", "db:1")]
    [True, True, True, False]
    """
    if target.startswith(("unix:", "unix-abstract:")):
        return True
    address = target
    for scheme in ("dns:///", "ipv4:", "ipv6:"):
        if address.startswith(scheme):
            address = address.removeprefix(scheme)
            break
    addresses = address.split(",") if target.startswith(("ipv4:", "ipv6:")) else [address]
    return all(_is_loopback(_host(part)) for part in addresses)


def _host(address: str) -> str:
    if address.startswith("["):
        return address[1 : address.find("]")] if "]" in address else address
    if address.count(":") == 1:
        return address.split(":", maxsplit=1)[0]
    return address


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_token_transport(
    target: str,
    credentials: grpc.ChannelCredentials | None,
    token: str | None,
    allow_insecure_token: bool,
) -> None:
    """Refuse to send a bearer token in clear text to another machine."""
    if token is None or credentials is not None or allow_insecure_token:
        return
    if not is_local_target(target):
        raise ValueError(
            f"a bearer token would cross the network in clear text to {target!r}: pass "
            "credentials (e.g. grpc.ssl_channel_credentials()), or allow_insecure_token=True"
        )


def new_request_id() -> str:
    """A fresh request id: a random UUID4 (AIP-155)."""
    return str(uuid.uuid4())


def request_id_or_new(request_id: str | None) -> str:
    """``request_id`` checked (1 to 36 printable ASCII characters), or a fresh one if ``None``."""
    if request_id is None:
        return new_request_id()
    if len(request_id) > MAX_REQUEST_ID_LENGTH or not _PRINTABLE_ASCII.fullmatch(request_id):
        raise ValueError(
            f"request_id must be 1 to {MAX_REQUEST_ID_LENGTH} printable ASCII characters, "
            f"got {request_id!r}"
        )
    return request_id


def cards_list(cards: str | Iterable[str]) -> list[str]:
    """Cards given as one string (``"3C 6S 8H 4H 8C"``) or as separate strings."""
    return cards.split() if isinstance(cards, str) else list(cards)


class EntryOrderError(ValueError):
    """The server sent an audit-log entry out of order: not the index the stream was at."""

    def __init__(self, expected: int, got: int) -> None:
        super().__init__(f"audit log stream sent entry {got} where entry {expected} was due")
        self.expected = expected
        self.got = got


def check_entry(entry: audit_pb2.Entry, expected: int) -> int:
    """Check that ``entry`` is the one due at ``expected``; return the next index due."""
    if entry.index != expected:
        raise EntryOrderError(expected, entry.index)
    return expected + 1


# Request builders: one per call, shared by both clients so they can never differ.


def shuffle_request(
    table_id: str, house_rules: types_pb2.HouseRules | None, request_id: str | None
) -> dealer_pb2.ShuffleRequest:
    return dealer_pb2.ShuffleRequest(
        request_id=request_id_or_new(request_id), table_id=table_id, house_rules=house_rules
    )


def deal_request(
    round_id: str,
    seats: Iterable[round_pb2.Seat],
    beacon: round_pb2.Beacon | None,
    request_id: str | None,
) -> dealer_pb2.DealRequest:
    return dealer_pb2.DealRequest(
        request_id=request_id_or_new(request_id), round_id=round_id, seats=seats, beacon=beacon
    )


def reveal_request(round_id: str, request_id: str | None) -> dealer_pb2.RevealRequest:
    return dealer_pb2.RevealRequest(request_id=request_id_or_new(request_id), round_id=round_id)


def settle_request(round_id: str, request_id: str | None) -> dealer_pb2.SettleRequest:
    return dealer_pb2.SettleRequest(request_id=request_id_or_new(request_id), round_id=round_id)


def forget_player_request(player_id: str, request_id: str | None) -> dealer_pb2.ForgetPlayerRequest:
    return dealer_pb2.ForgetPlayerRequest(
        player_id=player_id, request_id=request_id_or_new(request_id)
    )


def lookup_player_request(
    player_id: str | None, player_ref: str | None
) -> audit_pb2.LookupPlayerRequest:
    """Exactly one of ``player_id`` and ``player_ref``."""
    if player_id is not None and player_ref is None:
        return audit_pb2.LookupPlayerRequest(player_id=player_id)
    if player_ref is not None and player_id is None:
        return audit_pb2.LookupPlayerRequest(player_ref=player_ref)
    raise ValueError("give exactly one of player_id and player_ref")


def void_round_request(
    round_id: str,
    reason_code: round_pb2.VoidReason.ValueType,
    reason: str,
    request_id: str | None,
) -> dealer_pb2.VoidRoundRequest:
    return dealer_pb2.VoidRoundRequest(
        request_id=request_id_or_new(request_id),
        round_id=round_id,
        reason_code=reason_code,
        reason=reason,
    )


def list_rounds_request(
    table_id: str,
    page_size: int,
    page_token: str,
    completed_by: str,
    completed_since: datetime | None,
    *,
    operator: str = "",
) -> dealer_pb2.ListRoundsRequest:
    request = dealer_pb2.ListRoundsRequest(
        table_id=table_id,
        page_size=page_size,
        page_token=page_token,
        completed_by=completed_by,
        operator=operator,
    )
    if completed_since is not None:
        request.completed_since.FromDatetime(completed_since)
    return request
