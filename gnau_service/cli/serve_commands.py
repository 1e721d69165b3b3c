"""``gnau serve`` runs the dealer service (``gnau play`` plays rounds against one:
:mod:`gnau_service.cli.play_commands`)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
from typing import TYPE_CHECKING

import structlog

from gnau_service.cli.settings_flags import add_settings_flags, given_flags, settings_from_args
from gnau_service.edge.addresses import split_host_port
from gnau_service.server.process.config import SETTINGS, ConfigError, Settings
from gnau_service.server.process.structured_logs import configure_logging
from gnau_service.server.process.supervisor import Started, Supervisor
from gnau_service.server.process.workers import WorkerRole
from gnau_service.store import redacted_url

if TYPE_CHECKING:
    from gnau_service.server.process.app import App

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
        role = WorkerRole.from_environment(os.environ)
    except (ConfigError, ValueError, TypeError) as error:
        return _cannot_start(error)
    if role is not None:
        # The supervisor resolved the ports (a port 0 to the one all workers share).
        settings = dataclasses.replace(
            settings,
            listen=role.listen,
            http_listen=role.http_listen,
            metrics_listen=role.metrics_listen,
            workers=1,
        )
        role.follow_supervisor()
    configure_logging(
        settings.log_format,
        trace_ids=settings.tracing != "off",
        worker=None if role is None else role.index,
    )
    try:
        if role is not None and role.sequencer:
            from gnau_service.server.process.sequencing import sequence  # noqa: PLC0415

            asyncio.run(sequence(settings, role))
            return 0
        if settings.workers > 1:
            supervisor = Supervisor(settings, _worker_arguments(args))
            return asyncio.run(supervisor.run(on_started=_announce_workers))
        # Only a process that serves loads the server (a supervisor stays small).
        from gnau_service.server.process.app import serve  # noqa: PLC0415  (never in a supervisor)

        asyncio.run(serve(settings, on_started=_announce if role is None else _quiet, role=role))
    except (ValueError, OSError, RuntimeError) as error:
        # Key files, token files, database URLs and stores, ports in use: named, one line.
        return _cannot_start(error)
    except Exception as error:
        # A bug: its traceback, in the log's own format (without local variables), to report.
        log.critical("internal error", error=type(error).__name__, exc_info=error)
        return 2
    return 0


def _worker_arguments(args: argparse.Namespace) -> list[str]:
    """``gnau serve`` with the flags this one was given, for its workers (which read the same
    environment and ``--config`` file)."""
    arguments = ["serve"]
    if args.config is not None:
        arguments += ["--config", str(args.config)]
    for name, value in given_flags(args).items():
        flag = SETTINGS[name].flag
        for each in value if isinstance(value, list) else [value]:
            arguments += [flag, str(each)]
    return arguments


def _quiet(app: App) -> None:
    """A worker: its supervisor announces the service."""


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


def _announce_workers(started: Started) -> None:
    """:func:`_announce`, for a supervisor whose workers all serve."""
    settings = started.settings
    _announce_to_console(
        settings,
        f"{settings.listen} with {started.workers} workers",
        started.vkey,
        started.http_port,
        started.metrics_port,
        started.new_operator_token,
    )


def _announce(app: App) -> None:
    """:func:`_announce_to_console`, for one process."""
    _announce_to_console(
        app.settings,
        app.settings.listen,
        app.store.signer.vkey,
        app.http_port,
        app.metrics_port,
        app.new_operator_token,
    )


def _announce_to_console(  # noqa: PLR0917  (one call per kind of start)
    settings: Settings,
    where: str,
    vkey: str,
    http_port: int | None,
    metrics_port: int | None,
    token: str | None,
) -> None:
    """Tell the operator where the service is, and about a token it has just made.

    A new operator token is shown only on a terminal: under systemd, Docker or Kubernetes
    stdout is a log, and a token in a log is a leaked token. Elsewhere the file is named."""
    if settings.log_format == "json":  # every line JSON: the "serving" line says the rest
        if token is not None:
            log.warning("new local operator token written", path=str(settings.operator_token_path))
        return
    print(
        f"gnau: serving on {where} (database {redacted_url(settings.database_url)})",
        flush=True,
    )
    print(f"gnau: log key {vkey}", flush=True)
    if http_port is not None:
        print(f"gnau: the verifier page at {_local_url(settings.http_listen, http_port)}")
    if metrics_port is not None:
        page = _local_url(settings.metrics_listen, metrics_port)
        print(f"gnau: metrics at {page}metrics", flush=True)
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
