"""Service configuration: defaults, then a TOML file, then ``GNAU_*`` environment variables,
then command-line flags, each overriding the one before.

Every setting is listed once, in :data:`SETTINGS`, with its flag, its environment variable and
its meaning; ``docs/configuration.md`` is that table.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from gnau_service.rules.errors import quoted
from gnau_service.rules.settlement import LARGEST_PAYOUT
from gnau_service.server.auth import Role
from gnau_service.server.limits import (
    DEFAULT_MAX_STAKE,
    DEFAULT_MAX_STREAMS,
    DEFAULT_MAX_STREAMS_PER_PEER,
    LARGEST_MAX_STAKE,
    MOST_SEATS,
)
from gnau_service.server.witnessing import WitnessEndpoint, WitnessSpecError

#: The values of ``--tracing``: off costs nothing (OpenTelemetry is not even imported).
TRACING_MODES: Final = ("off", "console", "otlp")


class ConfigError(ValueError):
    """A setting the service cannot use; the message names it and where it came from."""


@dataclass(frozen=True)
class Settings:
    listen: str = "127.0.0.1:50051"
    http_listen: str = ""  # off unless set: the browser verifier and public receipts
    metrics_listen: str = ""  # off unless set: /metrics alone (the HTTP port serves it too)
    tracing: str = "off"  # off, console or otlp
    data_dir: Path = Path("gnau-data")
    database: str = ""  # default: sqlite:///<data_dir>/gnau.db
    migrate: bool = False  # an older schema is refused unless this is set
    key: Path | None = None  # default: <data_dir>/log-signing-key.pem, generated if missing
    origin: str = "gnau-dealer/local"
    tokens: Path | None = None  # default: <data_dir>/tokens.json, generated if missing
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    mtls_roles: dict[str, Role] = field(default_factory=dict)
    reflection: bool = True
    max_message_bytes: int = 1024 * 1024
    max_concurrent_rpcs: int = 1000
    max_streams: int = DEFAULT_MAX_STREAMS
    max_streams_per_peer: int = DEFAULT_MAX_STREAMS_PER_PEER
    max_stake: int = DEFAULT_MAX_STAKE
    grace_seconds: float = 10.0
    shutdown_notice_seconds: float = 1.0
    keepalive_seconds: float = 30.0
    log_format: str = "json"
    witnesses: tuple[str, ...] = ()  # URL=VKEY of each witness asked to cosign checkpoints
    witness_quorum: int = 1  # cosignatures that make a checkpoint "cosigned"
    witness_interval_ms: int = 1000  # at most one submission per witness this often

    @property
    def database_url(self) -> str:
        return self.database or f"sqlite:///{self.data_dir / 'gnau.db'}"

    @property
    def key_path(self) -> Path:
        return self.key or self.data_dir / "log-signing-key.pem"

    @property
    def tokens_path(self) -> Path:
        return self.tokens or self.data_dir / "tokens.json"

    @property
    def operator_token_path(self) -> Path:
        """Where a first start puts its operator token for the local command line."""
        return self.data_dir / "operator-token"


#: name → (flag, environment variable, meaning): the configuration table.
SETTINGS: Final = {
    "listen": ("--listen", "GNAU_LISTEN", "host:port to serve gRPC on"),
    "http_listen": (
        "--http-listen",
        "GNAU_HTTP_LISTEN",
        "host:port to serve the browser verifier and public receipts over HTTP; off unless set",
    ),
    "metrics_listen": (
        "--metrics-listen",
        "GNAU_METRICS_LISTEN",
        "host:port to serve only the Prometheus metrics (GET /metrics) on; off unless set. "
        "The --http-listen port serves /metrics too",
    ),
    "tracing": (
        "--tracing",
        "GNAU_TRACING",
        "OpenTelemetry spans, one per call: off, console (stdout) or otlp (OTEL_EXPORTER_OTLP_*"
        " environment); needs the [tracing] extra",
    ),
    "data_dir": ("--data-dir", "GNAU_DATA_DIR", "directory for the default database, key, tokens"),
    "database": ("--database", "GNAU_DATABASE", "sqlite:///path or postgresql://user@host/db"),
    "migrate": (
        "--migrate",
        "GNAU_MIGRATE",
        "migrate an older database schema at start (true/false); otherwise it is refused",
    ),
    "key": ("--key", "GNAU_KEY", "Ed25519 PEM log key (mode 0600); generated if missing"),
    "origin": ("--origin", "GNAU_ORIGIN", "log origin (key name), gnau-dealer/<deployment>"),
    "tokens": ("--tokens", "GNAU_TOKENS", "JSON token file (mode 0600); generated if missing"),
    "tls_cert": ("--tls-cert", "GNAU_TLS_CERT", "server certificate (PEM); enables TLS"),
    "tls_key": ("--tls-key", "GNAU_TLS_KEY", "server private key (PEM)"),
    "tls_client_ca": ("--tls-client-ca", "GNAU_TLS_CLIENT_CA", "CA for client certs: mTLS"),
    "mtls_roles": ("--mtls-role", "GNAU_MTLS_ROLES", "CN=ROLE for mTLS clients (repeatable)"),
    "reflection": ("--reflection", "GNAU_REFLECTION", "serve gRPC reflection (true/false)"),
    "max_message_bytes": ("--max-message-bytes", "GNAU_MAX_MESSAGE_BYTES", "largest message"),
    "max_concurrent_rpcs": (
        "--max-concurrent-rpcs",
        "GNAU_MAX_CONCURRENT_RPCS",
        "then RESOURCE_EXHAUSTED",
    ),
    "max_streams": (
        "--max-streams",
        "GNAU_MAX_STREAMS",
        "streams open at once (under max_concurrent_rpcs), then RESOURCE_EXHAUSTED",
    ),
    "max_streams_per_peer": (
        "--max-streams-per-peer",
        "GNAU_MAX_STREAMS_PER_PEER",
        "streams open at once from one address, then RESOURCE_EXHAUSTED",
    ),
    "max_stake": (
        "--max-stake",
        "GNAU_MAX_STAKE",
        f"largest stake, in minor units; at most {LARGEST_MAX_STAKE}",
    ),
    "grace_seconds": (
        "--grace-seconds",
        "GNAU_GRACE_SECONDS",
        "shutdown grace for calls in flight",
    ),
    "shutdown_notice_seconds": (
        "--shutdown-notice-seconds",
        "GNAU_SHUTDOWN_NOTICE_SECONDS",
        "on SIGTERM, how long health says NOT_SERVING before the port closes (0 or more)",
    ),
    "keepalive_seconds": ("--keepalive-seconds", "GNAU_KEEPALIVE_SECONDS", "HTTP/2 ping interval"),
    "log_format": ("--log-format", "GNAU_LOG_FORMAT", "json or console"),
    "witnesses": (
        "--witness",
        "GNAU_WITNESSES",
        "URL=VKEY of a witness (C2SP tlog-witness) to ask to cosign each new checkpoint: its "
        "submission prefix and its verifier key (repeatable; comma-separated in the environment)",
    ),
    "witness_quorum": (
        "--witness-quorum",
        "GNAU_WITNESS_QUORUM",
        "how many witnesses must cosign a checkpoint for it to count as cosigned (receipts and "
        "GetCheckpoint's cosigned request use the newest such); 1 to the number of witnesses",
    ),
    "witness_interval_ms": (
        "--witness-interval-ms",
        "GNAU_WITNESS_INTERVAL_MS",
        "the least time between two submissions to one witness, in milliseconds (a new "
        "checkpoint waits for it; a failing witness is retried after twice as long, up to 60 s)",
    ),
}


def load_settings(
    config_file: Path | None, environ: Mapping[str, str], flags: Mapping[str, Any]
) -> Settings:
    """Merge the four sources; ``flags`` holds only the flags actually given."""
    values: dict[str, Any] = {}
    # Where each value came from, so that a refusal names what the operator must change.
    sources: dict[str, str] = {}
    if config_file is not None:
        try:
            values.update(tomllib.loads(config_file.read_text(encoding="utf-8")))
        except OSError as error:  # its str() would name the file a second time
            raise ConfigError(f"config file {config_file}: {error.strerror or error}") from None
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"config file {config_file}: {error}") from None
        unknown = set(values) - set(SETTINGS)
        if unknown:
            raise ConfigError(f"config file {config_file}: unknown setting(s) {sorted(unknown)}")
        sources.update((name, f"key {name!r} of config file {config_file}") for name in values)
    for name, (_, variable, _) in SETTINGS.items():
        if variable in environ:
            values[name] = environ[variable]
            sources[name] = f"environment variable {variable}"
    values.update(flags)
    sources.update((name, f"flag {SETTINGS[name][0]}") for name in flags)
    return _typed(values, sources)


def _typed(values: Mapping[str, Any], sources: Mapping[str, str]) -> Settings:
    types = {f.name: str(f.type) for f in dataclasses.fields(Settings)}
    converted: dict[str, Any] = {}

    def setting(name: str) -> str:
        """A setting as a refusal names it: its name and the source that supplied it."""
        return f"setting {name!r} (from {sources.get(name, 'the defaults')})"

    for name, value in values.items():
        kind = types[name]
        try:
            converted[name] = _convert(name, kind, value)
        except (ValueError, TypeError) as error:
            raise ConfigError(f"{setting(name)}: {error}") from None
    settings = Settings(**converted)
    if (settings.tls_cert is None) != (settings.tls_key is None):
        raise ConfigError("--tls-cert and --tls-key go together")
    if settings.tls_client_ca is not None and settings.tls_cert is None:
        raise ConfigError("--tls-client-ca (mTLS) needs --tls-cert and --tls-key")
    if settings.log_format not in ("json", "console"):
        raise ConfigError(
            f"{setting('log_format')}: must be json or console, not {quoted(settings.log_format)}"
        )
    for name in ("http_listen", "metrics_listen"):
        address = getattr(settings, name)
        if address:
            try:
                split_host_port(address)
            except ValueError as error:
                raise ConfigError(f"{setting(name)}: {error}") from None
    if settings.tracing not in TRACING_MODES:
        raise ConfigError(
            f"{setting('tracing')}: must be one of {', '.join(TRACING_MODES)}, "
            f"not {quoted(settings.tracing)}"
        )
    if settings.max_stake > LARGEST_MAX_STAKE:
        raise ConfigError(
            f"{setting('max_stake')} is {settings.max_stake}, more than "
            f"{LARGEST_MAX_STAKE}: {MOST_SEATS} seats at that stake, paid {LARGEST_PAYOUT}x, "
            "would settle beyond 2^53-1, the largest integer the audit log holds"
        )
    if settings.max_streams >= settings.max_concurrent_rpcs:
        raise ConfigError(
            f"{setting('max_streams')} must be less than 'max_concurrent_rpcs' "
            f"({settings.max_concurrent_rpcs}), so that streams never take every call the server "
            "allows"
        )
    for spec in settings.witnesses:
        try:
            WitnessEndpoint.parse(spec)
        except WitnessSpecError as error:
            raise ConfigError(f"{setting('witnesses')}: {error}") from None
    if settings.witnesses and settings.witness_quorum > len(settings.witnesses):
        raise ConfigError(
            f"{setting('witness_quorum')} is {settings.witness_quorum}, more than the "
            f"{len(settings.witnesses)} witnesses"
        )
    if settings.max_streams_per_peer > settings.max_streams:
        raise ConfigError(
            f"{setting('max_streams_per_peer')} must be at most 'max_streams' "
            f"({settings.max_streams})"
        )
    return settings


def _convert(name: str, kind: str, value: Any) -> Any:
    """``value`` (a string from a flag or the environment, or any TOML value) as a ``kind``;
    a ValueError says what is expected and quotes what was given, never Python's own words."""
    if kind in ("Path", "Path | None"):
        if not isinstance(value, str):
            raise ValueError(f"must be a path (a string), not {quoted(value)}")
        return Path(value)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "false"):
            return str(value).lower() == "true"
        raise ValueError(f"must be true or false, not {quoted(value)}")
    if kind in ("int", "float"):
        number = _number(value, whole=kind == "int")
        if name in _MAY_BE_ZERO:
            if not number >= 0:
                raise ValueError(f"must be 0 or more, not {number}")
        elif not number > 0:
            raise ValueError(f"must be positive, not {number}")
        return number
    if kind == "tuple[str, ...]":
        items = value if isinstance(value, list | tuple) else str(value).split(",")
        if not all(isinstance(item, str) for item in items):
            raise ValueError(f"must be strings, not {quoted(value)}")
        return tuple(item.strip() for item in items if item.strip())
    if kind == "dict[str, Role]":
        pairs = value if isinstance(value, list | tuple) else str(value).split(",")
        if isinstance(value, dict):
            pairs = [f"{cn}={role}" for cn, role in value.items()]
        roles = {}
        for pair in pairs:
            name_, sep, role = str(pair).partition("=")
            if not sep:
                raise ValueError(f"expected CN=ROLE, got {quoted(pair)}")
            if role.strip() not in {str(known) for known in Role}:
                raise ValueError(
                    f"unknown role {quoted(role.strip())} in {quoted(pair)}: expected one of "
                    f"{', '.join(Role)}"
                )
            roles[name_.strip()] = Role(role.strip())
        return roles
    if not isinstance(value, str):
        raise ValueError(f"must be a string, not {quoted(value)}")
    return value


def _number(value: object, *, whole: bool) -> int | float:
    """A whole number (``whole``) or any finite number, from a string or a TOML number.

    >>> _number("1_000", whole=True), _number(" 42 ", whole=True), _number("2.5", whole=False)
    (1000, 42, 2.5)
    >>> _number("abc", whole=True)
    Traceback (most recent call last):
    ...
    ValueError: must be a whole number, not 'abc'
    >>> _number(1.5, whole=True)
    Traceback (most recent call last):
    ...
    ValueError: must be a whole number, not 1.5
    """
    expected = "a whole number" if whole else "a number"
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"must be {expected}, not {quoted(value)}")
    if whole and isinstance(value, float):
        raise ValueError(f"must be {expected}, not {quoted(value)}")
    try:
        number = int(value) if whole else float(value)
    except ValueError:
        raise ValueError(f"must be {expected}, not {quoted(value)}") from None
    if not math.isfinite(number):
        raise ValueError(f"must be {expected}, not {quoted(value)}")
    return number


#: Settings for which 0 is a sensible value; every other number must be positive.
_MAY_BE_ZERO: Final = frozenset({"shutdown_notice_seconds"})


def split_host_port(address: str) -> tuple[str, int]:
    """``host:port`` (an IPv6 host in brackets, ``[::1]:8080``) as the host and the port number.

    >>> split_host_port("127.0.0.1:8080"), split_host_port("[::1]:0")
    (('127.0.0.1', 8080), ('::1', 0))
    >>> split_host_port("8080")
    Traceback (most recent call last):
    ...
    ValueError: expected host:port, got '8080'
    """
    host, colon, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not colon or not host or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"expected host:port, got {quoted(address)}")
    return host, int(port)


def environment() -> Mapping[str, str]:
    return os.environ
