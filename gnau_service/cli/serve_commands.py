"""``gnau serve`` runs the dealer service (``gnau play`` plays rounds against one:
:mod:`gnau_service.cli.play_commands`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

import structlog

from gnau_service.cli.settings_flags import add_settings_flags, settings_from_args
from gnau_service.server.app import App, serve
from gnau_service.server.config import ConfigError, Settings, split_host_port
from gnau_service.server.structured_logs import configure_logging
from gnau_service.store import redacted_url

log = structlog.get_logger("gnau.serve")


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run the gRPC dealer service. Settings: flags > GNAU_* environment > "
        "--config file > defaults (see docs/configuration.md)."
    )
    add_settings_flags(parser)
    parser.set_defaults(run=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    # Every file the service creates (database, its -wal and -shm, keys, tokens) is private.
    os.umask(0o077)
    # Until the settings are read, log as asked on the command line or in the environment.
    configure_logging(
        "console"
        if getattr(args, "log_format", os.environ.get("GNAU_LOG_FORMAT")) == "console"
        else "json"
    )
    try:
        settings = settings_from_args(args)
    except ConfigError as error:
        return _cannot_start(error)
    configure_logging(settings.log_format, trace_ids=settings.tracing != "off")
    try:
        asyncio.run(serve(settings, on_started=_announce))
    except (ValueError, OSError, RuntimeError) as error:
        # Key files, token files, database URLs and stores, ports in use: named, one line.
        return _cannot_start(error)
    except Exception as error:
        # A bug: its traceback, in the log's own format (without local variables), to report.
        log.critical("internal error", error=type(error).__name__, exc_info=error)
        return 2
    return 0


def _cannot_start(error: Exception) -> int:
    """One line saying why, in the log's format (JSON unless the console was asked for)."""
    log.error("cannot start", error=str(error))
    return 2


def _local_url(address: str, port: int) -> str:
    """Where a browser on this machine reaches an HTTP port bound to ``address``.

    >>> _local_url("0.0.0.0:8080", 8080), _local_url("[::1]:0", 41000)
    ('http://127.0.0.1:8080/', 'http://[::1]:41000/')
    """
    host = split_host_port(address)[0]
    if host in {"", "0.0.0.0", "::"}:  # noqa: S104  (a wildcard bind, read, not made)
        host = "127.0.0.1"
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def _announce(app: App) -> None:
    """Tell the operator where the service is, and about a token it has just made.

    A new operator token is shown only on a terminal: under systemd, Docker or Kubernetes
    stdout is a log, and a token in a log is a leaked token. Elsewhere the file is named."""
    settings: Settings = app.settings
    token = app.new_operator_token
    if settings.log_format == "json":  # every line JSON: the "serving" line says the rest
        if token is not None:
            log.warning("new local operator token written", path=str(settings.operator_token_path))
        return
    print(
        f"gnau: serving on {settings.listen} (database {redacted_url(settings.database_url)})",
        flush=True,
    )
    print(f"gnau: log key {app.store.signer.vkey}", flush=True)
    if app.http_port is not None:
        print(f"gnau: the verifier page at {_local_url(settings.http_listen, app.http_port)}")
    if app.metrics_port is not None:
        where = _local_url(settings.metrics_listen, app.metrics_port)
        print(f"gnau: metrics at {where}metrics", flush=True)
    if token is None:
        return
    if sys.stdout.isatty():
        print(
            f"gnau: new local operator token (kept in {settings.operator_token_path}):\n"
            f"      {token}"
        )
    else:
        print(
            f"gnau: new local operator token written to {settings.operator_token_path}",
            flush=True,
        )
