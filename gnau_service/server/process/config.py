"""Service configuration: defaults, then a TOML file, then ``GNAU_*`` environment variables,
then command-line flags, each overriding the one before.

Every setting is declared once, as a field of :class:`Settings`: its default, and its
:class:`Setting` (flag, environment variable, meaning, and how a value is read). :data:`SETTINGS`
is that table by name, for the command line; ``docs/configuration.md`` is that table too.
"""

from __future__ import annotations

import dataclasses
import errno
import math
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from gnau_service.audit.actors import cert_actor
from gnau_service.audit.clock_drift import DEFAULT_BOUND_SECONDS
from gnau_service.audit.entries import JsonValue
from gnau_service.common.quoting import quoted
from gnau_service.edge.addresses import split_host_port
from gnau_service.rounds.deadlines import (
    DEFAULT_DEAL_DEADLINE_SECONDS,
    DEFAULT_SETTLE_DEADLINE_SECONDS,
    MAX_DEADLINE_SECONDS,
    MIN_DEADLINE_SECONDS,
    Deadlines,
)
from gnau_service.rounds.limits import (
    DEFAULT_MAX_CALLS_PER_CALLER,
    DEFAULT_MAX_STAKE,
    DEFAULT_MAX_STREAMS,
    DEFAULT_MAX_STREAMS_PER_CALLER,
    LARGEST_MAX_STAKE,
    MOST_SEATS,
)
from gnau_service.rules.settlement import LARGEST_PAYOUT
from gnau_service.server.grpc.auth import AuthConfigError, Caller, Role, caller_of
from gnau_service.server.process.database_wait import DEFAULT_WAIT_SECONDS, PAUSE_SECONDS
from gnau_service.server.process.request_retention import (
    DEFAULT_RETENTION_DAYS,
    RETENTION_DAYS_RANGE,
)
from gnau_service.server.process.witness_endpoints import WitnessEndpoint, WitnessSpecError
from gnau_service.server.process.workers import AUTO, MAX_WORKERS, usable_cores
from gnau_service.store.lease import DEFAULT_LEASE_SECONDS, LEASE_SECONDS_RANGE

#: The values of ``--tracing``: off costs nothing (OpenTelemetry is not even imported).
TRACING_MODES: Final = ("off", "console", "otlp")


class ConfigError(ValueError):
    """A setting the service cannot use; the message names it and where it came from."""


@dataclass(frozen=True)
class Setting:
    """How a setting is given: its flag (``repeatable`` if given once per value), its
    environment variable, what it means, and how a value (a string from a flag or the
    environment, or any TOML value) is read; ``parse`` raises ValueError saying what is
    expected."""

    flag: str
    variable: str
    meaning: str
    parse: Callable[[object], Any]
    repeatable: bool = False


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be a string, not {quoted(value)}")
    return value


def _url(value: object) -> str:
    # A URL read from a file (a Kubernetes Secret made with echo) often ends in a newline, which
    # would become part of the database's name.
    return _text(value).strip()


def _path(value: object) -> Path:
    if not isinstance(value, str):
        raise ValueError(f"must be a path (a string), not {quoted(value)}")
    return Path(value)


def _boolean(value: object) -> bool:
    """
    >>> _boolean("True"), _boolean(False)
    (True, False)
    """
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("true", "false"):
        return str(value).lower() == "true"
    raise ValueError(f"must be true or false, not {quoted(value)}")


def _positive_whole(value: object) -> int:
    return int(_positive(_number(value, whole=True)))


def _positive_number(value: object) -> float:
    return _positive(_number(value, whole=False))


def _retention_days(value: object) -> int:
    return int(_within(_number(value, whole=True), RETENTION_DAYS_RANGE, "days"))


def _deadline_seconds(value: object) -> int:
    """A round's deal or settle deadline: whole seconds, 1 second to 7 days.

    >>> _deadline_seconds("600"), _deadline_seconds(604800)
    (600, 604800)
    >>> _deadline_seconds("0")
    Traceback (most recent call last):
    ...
    ValueError: must be 1 to 604800 seconds, not 0
    """
    bounds = (MIN_DEADLINE_SECONDS, MAX_DEADLINE_SECONDS)
    return int(_within(_number(value, whole=True), bounds, "seconds"))


def _lease_seconds(value: object) -> float:
    return _within(_number(value, whole=False), LEASE_SECONDS_RANGE, "seconds")


def _workers(value: object) -> int:
    """``--workers``: a whole number from 1 to :data:`MAX_WORKERS`, or ``auto``
    (:func:`~gnau_service.server.process.workers.usable_cores`).

    >>> _workers("4"), _workers(2), _workers(" Auto ") >= 1
    (4, 2, True)
    >>> _workers("0")
    Traceback (most recent call last):
    ...
    ValueError: must be auto or a whole number from 1 to 64, not '0'
    """
    if isinstance(value, str) and value.strip().lower() == AUTO:
        return min(usable_cores(), MAX_WORKERS)
    try:
        return int(_within(_number(value, whole=True), (1, MAX_WORKERS), "workers"))
    except ValueError:
        raise ValueError(
            f"must be auto or a whole number from 1 to {MAX_WORKERS}, not {quoted(value)}"
        ) from None


def _within(number: float, bounds: tuple[float, float], unit: str) -> float:
    low, high = bounds
    if not low <= number <= high:
        raise ValueError(f"must be {low:g} to {high:g} {unit}, not {number}")
    return number


def _zero_or_more(value: object) -> float:
    number = _number(value, whole=False)
    if not number >= 0:
        raise ValueError(f"must be 0 or more, not {number}")
    return number


def _positive(number: float) -> float:
    if not number > 0:
        raise ValueError(f"must be positive, not {number}")
    return number


def _strings(value: object) -> tuple[str, ...]:
    """Strings: a TOML list, or comma-separated.

    >>> _strings(" a, b,,"), _strings(["c"])
    (('a', 'b'), ('c',))
    """
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    if not all(isinstance(item, str) for item in items):
        raise ValueError(f"must be strings, not {quoted(value)}")
    return tuple(item.strip() for item in items if item.strip())


def _roles(value: object) -> dict[str, Caller]:
    """``CN=ROLE[@OPERATOR]`` pairs: a TOML table or list, or comma-separated. Without
    ``@OPERATOR``, an operator belongs to the default operator and an auditor to every one;
    ``auditor@*`` says every operator outright.

    >>> roles = _roles("alice=operator@casino-a, bob=auditor, carol=auditor@casino-b")
    >>> [(cn, str(caller.role), caller.operator) for cn, caller in roles.items()]
    [('alice', 'operator', 'casino-a'), ('bob', 'auditor', None), ('carol', 'auditor', 'casino-b')]
    >>> _roles("dave=operator")["dave"].operator
    'default'
    """
    pairs = value if isinstance(value, list | tuple) else str(value).split(",")
    if isinstance(value, dict):
        pairs = [f"{cn}={role}" for cn, role in value.items()]
    roles = {}
    for pair in pairs:
        name, sep, granted = str(pair).partition("=")
        if not sep:
            raise ValueError(f"expected CN=ROLE[@OPERATOR], got {quoted(pair)}")
        role, at, operator = granted.strip().partition("@")
        if role not in {str(known) for known in Role}:
            raise ValueError(
                f"unknown role {quoted(role)} in {quoted(pair)}: expected one of {', '.join(Role)}"
            )
        common_name = name.strip()
        try:
            roles[common_name] = caller_of(
                Role(role), cert_actor(common_name), operator.strip() if at else None
            )
        except AuthConfigError as error:
            raise ValueError(f"{error} in {quoted(pair)}") from None
    return roles


def _about(
    flag: str,
    variable: str,
    meaning: str,
    parse: Callable[[object], Any],
    *,
    repeatable: bool = False,
) -> dict[str, Setting]:
    """The metadata of a field of :class:`Settings`: its :class:`Setting`."""
    return {_SETTING: Setting(flag, variable, meaning, parse, repeatable)}


_SETTING: Final = "setting"


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


@dataclass(frozen=True)
class Settings:
    listen: str = field(
        default="127.0.0.1:50051",
        metadata=_about("--listen", "GNAU_LISTEN", "host:port to serve gRPC on", _text),
    )
    # One process unless asked: orchestrators scale by process already (docs/scaling.md).
    workers: int = field(
        default=1,
        metadata=_about(
            "--workers",
            "GNAU_WORKERS",
            f"processes serving the same ports and database, 1 to {MAX_WORKERS}, or auto (one"
            " per usable core); more than 1 starts a supervisor that restarts any that dies",
            _workers,
        ),
    )
    # Off unless set: the browser verifier and public receipts.
    http_listen: str = field(
        default="",
        metadata=_about(
            "--http-listen",
            "GNAU_HTTP_LISTEN",
            "host:port to serve the browser verifier and public receipts over HTTP; off unless set",
            _text,
        ),
    )
    # Off unless set: /metrics alone (the HTTP port serves it too).
    metrics_listen: str = field(
        default="",
        metadata=_about(
            "--metrics-listen",
            "GNAU_METRICS_LISTEN",
            "host:port to serve only the Prometheus metrics (GET /metrics) on; off unless set. "
            "The --http-listen port serves /metrics too",
            _text,
        ),
    )
    tracing: str = field(
        default="off",
        metadata=_about(
            "--tracing",
            "GNAU_TRACING",
            "OpenTelemetry spans, one per call: off, console (stdout) or otlp (OTEL_EXPORTER_OTLP_*"
            " environment); needs the [tracing] extra",
            _text,
        ),
    )
    data_dir: Path = field(
        default=Path("gnau-data"),
        metadata=_about(
            "--data-dir", "GNAU_DATA_DIR", "directory for the default database, key, tokens", _path
        ),
    )
    # Empty: sqlite:///<data_dir>/gnau.db (database_url).
    database: str = field(
        default="",
        metadata=_about(
            "--database", "GNAU_DATABASE", "sqlite:///path or postgresql://user@host/db", _url
        ),
    )
    migrate: bool = field(
        default=False,
        metadata=_about(
            "--migrate",
            "GNAU_MIGRATE",
            "migrate an older database schema at start (true/false); otherwise it is refused",
            _boolean,
        ),
    )
    # None: <data_dir>/log-signing-key.pem (key_path).
    key: Path | None = field(
        default=None,
        metadata=_about(
            "--key", "GNAU_KEY", "Ed25519 PEM log key (mode 0600); generated if missing", _path
        ),
    )
    origin: str = field(
        default="gnau-dealer/local",
        metadata=_about(
            "--origin", "GNAU_ORIGIN", "log origin (key name), gnau-dealer/<deployment>", _text
        ),
    )
    # None: <data_dir>/tokens.json (tokens_path).
    tokens: Path | None = field(
        default=None,
        metadata=_about(
            "--tokens", "GNAU_TOKENS", "JSON token file (mode 0600); generated if missing", _path
        ),
    )
    tls_cert: Path | None = field(
        default=None,
        metadata=_about(
            "--tls-cert", "GNAU_TLS_CERT", "server certificate (PEM); enables TLS", _path
        ),
    )
    tls_key: Path | None = field(
        default=None,
        metadata=_about("--tls-key", "GNAU_TLS_KEY", "server private key (PEM)", _path),
    )
    tls_client_ca: Path | None = field(
        default=None,
        metadata=_about(
            "--tls-client-ca", "GNAU_TLS_CLIENT_CA", "CA for client certs: mTLS", _path
        ),
    )
    software_manifest: Path | None = field(
        default=None,
        metadata=_about(
            "--software-manifest",
            "GNAU_SOFTWARE_MANIFEST",
            "the signed software manifest to check the installation against at start, daily and"
            " on request (docs/software.md); needs --release-key",
            _path,
        ),
    )
    release_key: Path | None = field(
        default=None,
        metadata=_about(
            "--release-key",
            "GNAU_RELEASE_KEY",
            "a file holding the verifier key (NAME+ID+KEY) the software manifest must be signed by",
            _path,
        ),
    )
    mtls_roles: dict[str, Caller] = field(
        default_factory=dict,
        metadata=_about(
            "--mtls-role",
            "GNAU_MTLS_ROLES",
            "CN=ROLE[@OPERATOR] for mTLS clients (repeatable)",
            _roles,
            repeatable=True,
        ),
    )
    reflection: bool = field(
        default=True,
        metadata=_about(
            "--reflection", "GNAU_REFLECTION", "serve gRPC reflection (true/false)", _boolean
        ),
    )
    # Off: the public role lists no rounds; a round id (96 random bits) is the capability.
    public_round_listing: bool = field(
        default=False,
        metadata=_about(
            "--public-round-listing",
            "GNAU_PUBLIC_ROUND_LISTING",
            "let the public role (no credentials) list rounds whose seed is public, over gRPC "
            "ListRounds and HTTP GET /rounds (true/false); off, only the operator and auditor list",
            _boolean,
        ),
    )
    max_message_bytes: int = field(
        default=1024 * 1024,
        metadata=_about(
            "--max-message-bytes",
            "GNAU_MAX_MESSAGE_BYTES",
            "largest message the server sends (requests: at most 65536 bytes)",
            _positive_whole,
        ),
    )
    max_concurrent_rpcs: int = field(
        default=1000,
        metadata=_about(
            "--max-concurrent-rpcs",
            "GNAU_MAX_CONCURRENT_RPCS",
            "then RESOURCE_EXHAUSTED",
            _positive_whole,
        ),
    )
    max_streams: int = field(
        default=DEFAULT_MAX_STREAMS,
        metadata=_about(
            "--max-streams",
            "GNAU_MAX_STREAMS",
            "streams open at once (under max_concurrent_rpcs), then RESOURCE_EXHAUSTED",
            _positive_whole,
        ),
    )
    max_calls_per_caller: int = field(
        default=DEFAULT_MAX_CALLS_PER_CALLER,
        metadata=_about(
            "--max-calls-per-caller",
            "GNAU_MAX_CALLS_PER_CALLER",
            "calls in flight at once from one credential (or, without one, one address), then"
            " RESOURCE_EXHAUSTED",
            _positive_whole,
        ),
    )
    max_streams_per_caller: int = field(
        default=DEFAULT_MAX_STREAMS_PER_CALLER,
        metadata=_about(
            "--max-streams-per-caller",
            "GNAU_MAX_STREAMS_PER_CALLER",
            "streams open at once from one credential (or, without one, one address), then"
            " RESOURCE_EXHAUSTED",
            _positive_whole,
        ),
    )
    max_stake: int = field(
        default=DEFAULT_MAX_STAKE,
        metadata=_about(
            "--max-stake",
            "GNAU_MAX_STAKE",
            f"largest stake, in minor units; at most {LARGEST_MAX_STAKE}",
            _positive_whole,
        ),
    )
    deal_deadline_seconds: int = field(
        default=DEFAULT_DEAL_DEADLINE_SECONDS,
        metadata=_about(
            "--deal-deadline",
            "GNAU_DEAL_DEADLINE",
            "seconds a round may stay shuffled and not dealt before the service voids it"
            f" (DEAL_DEADLINE_PASSED), {MIN_DEADLINE_SECONDS} to {MAX_DEADLINE_SECONDS}",
            _deadline_seconds,
        ),
    )
    settle_deadline_seconds: int = field(
        default=DEFAULT_SETTLE_DEADLINE_SECONDS,
        metadata=_about(
            "--settle-deadline",
            "GNAU_SETTLE_DEADLINE",
            "seconds a round may stay dealt and not settled before the service reveals it and"
            f" settles it at its result, {MIN_DEADLINE_SECONDS} to {MAX_DEADLINE_SECONDS}",
            _deadline_seconds,
        ),
    )
    request_retention_days: int = field(
        default=DEFAULT_RETENTION_DAYS,
        metadata=_about(
            "--request-retention-days",
            "GNAU_REQUEST_RETENTION_DAYS",
            "how long a request id is remembered (a retry within it gets the original answer),"
            f" {RETENTION_DAYS_RANGE[0]} to {RETENTION_DAYS_RANGE[1]} days",
            _retention_days,
        ),
    )
    sequencer_lease_seconds: float = field(
        default=DEFAULT_LEASE_SECONDS,
        metadata=_about(
            "--sequencer-lease-seconds",
            "GNAU_SEQUENCER_LEASE_SECONDS",
            "PostgreSQL: how long the log's sequencer may stop making progress before another"
            f" replica takes over, {LEASE_SECONDS_RANGE[0]:g} to {LEASE_SECONDS_RANGE[1]:g}",
            _lease_seconds,
        ),
    )
    database_wait_seconds: float = field(
        default=DEFAULT_WAIT_SECONDS,
        metadata=_about(
            "--database-wait-seconds",
            "GNAU_DATABASE_WAIT_SECONDS",
            "at start, how long to keep trying a database that does not answer yet, with a"
            f" growing pause ({PAUSE_SECONDS[0]:g} s, doubling, at most {PAUSE_SECONDS[1]:g} s),"
            " before giving up; 0 gives up at once",
            _zero_or_more,
        ),
    )
    grace_seconds: float = field(
        default=10.0,
        metadata=_about(
            "--grace-seconds",
            "GNAU_GRACE_SECONDS",
            "shutdown grace for calls in flight",
            _positive_number,
        ),
    )
    shutdown_notice_seconds: float = field(
        default=1.0,
        metadata=_about(
            "--shutdown-notice-seconds",
            "GNAU_SHUTDOWN_NOTICE_SECONDS",
            "on SIGTERM, how long health says NOT_SERVING before the port closes (0 or more)",
            _zero_or_more,
        ),
    )
    keepalive_seconds: float = field(
        default=30.0,
        metadata=_about(
            "--keepalive-seconds",
            "GNAU_KEEPALIVE_SECONDS",
            "HTTP/2 ping interval",
            _positive_number,
        ),
    )
    log_format: str = field(
        default="json", metadata=_about("--log-format", "GNAU_LOG_FORMAT", "json or console", _text)
    )
    witnesses: tuple[str, ...] = field(
        default=(),
        metadata=_about(
            "--witness",
            "GNAU_WITNESSES",
            "URL=VKEY of a witness (C2SP tlog-witness) to ask to cosign each new checkpoint: its "
            "submission prefix and its verifier key (repeatable; comma-separated in the "
            "environment)",
            _strings,
            repeatable=True,
        ),
    )
    witness_quorum: int = field(
        default=1,
        metadata=_about(
            "--witness-quorum",
            "GNAU_WITNESS_QUORUM",
            "how many witnesses must cosign a checkpoint for it to count as cosigned (receipts and "
            "GetCheckpoint's cosigned request use the newest such); 1 to the number of witnesses",
            _positive_whole,
        ),
    )
    witness_interval_ms: int = field(
        default=1000,
        metadata=_about(
            "--witness-interval-ms",
            "GNAU_WITNESS_INTERVAL_MS",
            "the least time between two submissions to one witness, in milliseconds (a new "
            "checkpoint waits for it; a failing witness is retried after twice as long, up to "
            "60 s)",
            _positive_whole,
        ),
    )
    witness_clock_bound_seconds: float = field(
        default=DEFAULT_BOUND_SECONDS,
        metadata=_about(
            "--witness-clock-bound-seconds",
            "GNAU_WITNESS_CLOCK_BOUND_SECONDS",
            "how far, in seconds, a witness's cosignature time may stand from this service's "
            "clock, or a cosigned checkpoint's newest entry time lie past it, before the service "
            "reports clock drift (docs/operations.md, *Time*)",
            _positive_number,
        ),
    )

    def game_settings(self) -> dict[str, JsonValue]:
        """The settings in force that change games or who sees them, as a CONFIG_CHANGED entry
        records them at each start."""
        return {
            "max_stake": self.max_stake,
            "deal_deadline_seconds": self.deal_deadline_seconds,
            "settle_deadline_seconds": self.settle_deadline_seconds,
            "public_round_listing": self.public_round_listing,
        }

    @property
    def deadlines(self) -> Deadlines:
        """The rounds' deal and settle deadlines, for the dealer and its completion."""
        return Deadlines(
            deal_seconds=self.deal_deadline_seconds, settle_seconds=self.settle_deadline_seconds
        )

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


#: Every setting by name: the configuration table.
SETTINGS: Final[Mapping[str, Setting]] = {
    declared.name: declared.metadata[_SETTING] for declared in dataclasses.fields(Settings)
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
    for name, setting in SETTINGS.items():
        if setting.variable in environ:
            values[name] = environ[setting.variable]
            sources[name] = f"environment variable {setting.variable}"
    values.update(flags)
    sources.update((name, f"flag {SETTINGS[name].flag}") for name in flags)
    return _typed(values, sources)


def _typed(values: Mapping[str, Any], sources: Mapping[str, str]) -> Settings:
    converted: dict[str, Any] = {}

    def setting(name: str) -> str:
        """A setting as a refusal names it: its name and the source that supplied it."""
        return f"setting {name!r} (from {sources.get(name, 'the defaults')})"

    for name, value in values.items():
        try:
            converted[name] = SETTINGS[name].parse(value)
        except (ValueError, TypeError) as error:
            raise ConfigError(f"{setting(name)}: {error}") from None
    settings = Settings(**converted)
    if (settings.tls_cert is None) != (settings.tls_key is None):
        raise ConfigError("--tls-cert and --tls-key go together")
    if (settings.software_manifest is None) != (settings.release_key is None):
        raise ConfigError("--software-manifest and --release-key go together")
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
    if settings.max_streams_per_caller > settings.max_streams:
        raise ConfigError(
            f"{setting('max_streams_per_caller')} must be at most 'max_streams' "
            f"({settings.max_streams})"
        )
    if settings.max_calls_per_caller > settings.max_concurrent_rpcs:
        raise ConfigError(
            f"{setting('max_calls_per_caller')} must be at most 'max_concurrent_rpcs' "
            f"({settings.max_concurrent_rpcs})"
        )
    return settings


def cannot_listen(setting: str, address: str, number: int, reason: str) -> OSError:
    """Why the listening ``setting`` (its name) cannot listen on ``address``: the OS's
    ``reason``, after the flag and the variable that set it.

    >>> print(cannot_listen("listen", "127.0.0.1:1", errno.EADDRINUSE, "Address already in use"))
    [Errno 98] --listen 127.0.0.1:1 (GNAU_LISTEN): Address already in use; another process holds it
    """
    about = SETTINGS[setting]
    hint = "; another process holds it" if number == errno.EADDRINUSE else ""
    return OSError(number, f"{about.flag} {address} ({about.variable}): {reason}{hint}")


def environment() -> Mapping[str, str]:
    return os.environ
