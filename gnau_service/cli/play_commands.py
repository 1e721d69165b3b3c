"""``gnau play``: play rounds against a running service, show them, and verify each one from
what the service returned (the client package, as other teams use it)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Final

import grpc
from gnau.v1 import round_pb2
from gnau_client import Seat

from gnau_service.audit.round_events import settle_round
from gnau_service.cli.amounts import signed_amount
from gnau_service.cli.failing import fail
from gnau_service.cli.remote import TargetError, add_target_option, add_tls_options, connect
from gnau_service.common.private_files import KeyFileError, read_private_file
from gnau_service.fairness.errors import FairnessError
from gnau_service.fairness.verifier import verify_revealed_round
from gnau_service.rules.cards import parse_card


def add_play_arguments(play: argparse.ArgumentParser) -> None:
    add_target_option(play)
    play.add_argument("--token", help="operator token (default: GNAU_TOKEN or the local file)")
    play.add_argument(
        "--token-file",
        type=Path,
        help="a file holding the token (default: the one a first start writes)",
    )
    add_tls_options(play)
    play.add_argument("--tables", type=int, default=1, help="tables to play on")
    play.add_argument("--rounds", type=int, default=1, help="rounds per table")
    play.add_argument("--seats", type=int, default=3, help="players per round")
    play.set_defaults(run=run_play)


def run_play(args: argparse.Namespace) -> int:
    token, source = _operator_token(args)
    if token is None:
        return fail("play", "no operator token: pass --token or set GNAU_TOKEN")
    failures = 0
    try:
        with connect(args, token=token) as client:
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
        if error.code() == grpc.StatusCode.UNAUTHENTICATED:
            print(
                f"gnau play: the token sent came from {source}; a service with another data "
                "directory keeps its own: pass --token-file DATA_DIR/operator-token",
                file=sys.stderr,
            )
        return 2
    except TargetError as error:  # a token in clear text to another host, an unreadable CA
        return fail("play", str(error))
    total = args.tables * args.rounds
    print(GLOSSARY_HINT)
    print(f"{total - failures} of {total} rounds verified independently")
    return 1 if failures else 0


#: Where a newcomer finds the game's words (Ox, Double-Ox, Ngau Tonku, Duke) that the rounds use.
GLOSSARY_HINT: Final = (
    "the game's words (Ox, Double-Ox, Ngau Tonku, Duke): README.md#words-of-the-game"
)


def _operator_token(args: argparse.Namespace) -> tuple[str | None, str]:
    """The token to send, and where it came from (said if the service refuses it)."""
    if args.token:
        return args.token, "--token"
    if os.environ.get("GNAU_TOKEN"):
        return os.environ["GNAU_TOKEN"], "GNAU_TOKEN"
    path = args.token_file
    if path is None:
        # Imported here: the settings (the server's) are slow to import, and a token given
        # as --token or GNAU_TOKEN does not need them.
        from gnau_service.server.process.config import Settings  # noqa: PLC0415

        path = Settings().operator_token_path
    return _local_operator_token(path), f"the file {path}"


def _local_operator_token(path: Path) -> str | None:
    """The operator token a first start wrote for the local command line at ``path``, if it
    is there."""
    try:
        return read_private_file(path, "token file").decode("utf-8").strip() or None
    except (KeyFileError, UnicodeDecodeError):
        return None


def _verify(played: round_pb2.Round) -> str | None:
    """Recompute the round from what the service returned; None if it all checks out."""
    # Imported here, once a round has come back: the server's modules are slow to import.
    from gnau_service.server.grpc.convert import revealed_round_from_proto  # noqa: PLC0415

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
