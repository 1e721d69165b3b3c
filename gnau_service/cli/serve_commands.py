"""``gnau serve`` runs the dealer service; ``gnau play`` plays and verifies rounds against one."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Iterable
from pathlib import Path

import grpc
import structlog
from gnau.v1 import round_pb2
from gnau_client import GnauClient, Seat  # the client package, as other teams use it

from gnau_service.audit.round_events import settle_round
from gnau_service.audit.signing import KeyFileError, read_private_file
from gnau_service.cli.amounts import signed_amount
from gnau_service.cli.remote import add_target_option
from gnau_service.cli.settings_flags import add_settings_flags, settings_from_args
from gnau_service.fairness.errors import FairnessError
from gnau_service.fairness.verifier import verify_revealed_round
from gnau_service.rules.cards import parse_card
from gnau_service.server.app import App, serve
from gnau_service.server.config import ConfigError, Settings
from gnau_service.server.convert import revealed_round_from_proto
from gnau_service.server.structured_logs import configure_logging
from gnau_service.store import redacted_url

SUIT_WIDTH = 4

log = structlog.get_logger("gnau.serve")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve_parser = subparsers.add_parser(
        "serve",
        help="run the dealer service",
        description="Run the gRPC dealer service. Settings: flags > GNAU_* environment > "
        "--config file > defaults (see docs/configuration.md).",
    )
    add_settings_flags(serve_parser)
    serve_parser.set_defaults(run=run_serve)

    play = subparsers.add_parser(
        "play", help="play rounds against a running service, show and verify them"
    )
    add_target_option(play)
    play.add_argument("--token", help="operator token (default: GNAU_TOKEN or the local file)")
    play.add_argument(
        "--token-file",
        type=Path,
        default=Settings().operator_token_path,
        help="a file holding the token (default: the one a first start writes)",
    )
    play.add_argument("--tables", type=int, default=1, help="tables to play on")
    play.add_argument("--rounds", type=int, default=1, help="rounds per table")
    play.add_argument("--seats", type=int, default=3, help="players per round")
    play.set_defaults(run=run_play)


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


def run_play(args: argparse.Namespace) -> int:
    token = args.token or os.environ.get("GNAU_TOKEN") or _local_operator_token(args.token_file)
    if token is None:
        print("gnau play: no operator token: pass --token or set GNAU_TOKEN", file=sys.stderr)
        return 2
    failures = 0
    try:
        with GnauClient(args.target, token=token) as client:
            for number in range(args.rounds):
                for table in range(1, args.tables + 1):
                    seats = [
                        Seat(seat_number=n, player_id=f"player-{n}", stake=10 * n)
                        for n in range(1, args.seats + 1)
                    ]
                    played = client.play_round(f"table-{table}", seats)
                    problem = _verify(played)
                    failures += problem is not None
                    print(_render(played, number + 1, problem))
    except grpc.RpcError as error:
        print(f"gnau play: {error.code().name}: {error.details()}", file=sys.stderr)
        return 2
    except ValueError as error:  # the client refuses a token in clear text to another host
        print(f"gnau play: {error}", file=sys.stderr)
        return 2
    total = args.tables * args.rounds
    print(f"{total - failures} of {total} rounds verified independently")
    return 1 if failures else 0


def _local_operator_token(path: Path) -> str | None:
    """The operator token a first start wrote for the local command line, if it is there."""
    try:
        return read_private_file(path, "token file").decode("utf-8").strip() or None
    except (KeyFileError, UnicodeDecodeError):
        return None


def _verify(played: round_pb2.Round) -> str | None:
    """Recompute the round from what the service returned; None if it all checks out."""
    try:
        revealed = revealed_round_from_proto(played)
    except (FairnessError, ValueError) as error:
        return f"cannot read the round: {error}"
    report = verify_revealed_round(revealed)
    if not report.ok:
        return str(report.first_failure)
    expected = [seat.delta for seat in settle_round(revealed).seats]
    got = [result.delta for result in played.settlement.seat_results]
    return None if expected == got else f"settlement {got} does not follow from the hands"


def _render(played: round_pb2.Round, number: int, problem: str | None) -> str:
    settlement = played.settlement
    lines = [f"{played.table_id}  round {number}  {played.round_id}"]
    for hand, result in zip(played.hands, settlement.seat_results, strict=True):
        outcome = round_pb2.Outcome.Name(result.outcome).removeprefix("OUTCOME_")
        lines.append(
            f"  seat {hand.seat_number}  {_symbols(hand.cards)}  "
            f"{result.evaluation.description.split('  ')[0]:<22} {outcome:<4} "
            f"{signed_amount(result.delta)}"
        )
    lines.append(
        f"  dealer  {_symbols(played.dealer_hand)}  "
        f"{settlement.dealer_evaluation.description.split('  ')[0]:<22} {'':<4} "
        f"{signed_amount(settlement.dealer_delta)}"
    )
    lines.append(
        "  verified: seed, commitment, deck, hands, settlement"
        if problem is None
        else f"  NOT VERIFIED: {problem}"
    )
    return "\n".join(lines)


def _symbols(cards: Iterable[str]) -> str:
    return " ".join(parse_card(card).symbol.rjust(3) for card in cards)
