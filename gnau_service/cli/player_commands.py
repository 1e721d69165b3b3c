"""``gnau player forget PLAYER_ID``: erase a player by crypto-shredding, over gRPC.

The running service (``--target``, with an operator ``--token`` or ``GNAU_TOKEN``) deletes the
player's secret key and every private link of their seat references to them, and logs a
``PLAYER_FORGOTTEN`` entry that names no one (``DealerService.ForgetPlayer``). The log and every
receipt and proof stay valid; from then on nothing links the player's references to them.
``gnau audit players`` reads the links while they exist.

Exit statuses: 0 the player was forgotten, or there was nothing to forget (the output says
which); 2 the call failed (refused, or the service cannot be reached; an UNAVAILABLE one also
says the ``--request-id`` to retry with, as does one that ran out of time).
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path

import grpc

from gnau_service.cli.failing import fail
from gnau_service.cli.remote import (
    TargetError,
    add_target_option,
    add_token_options,
    connect,
    refusal,
)
from gnau_service.common.private_files import KeyFileError, read_private_file


def add_player_arguments(player: argparse.ArgumentParser) -> None:
    commands = player.add_subparsers(dest="player_command", required=True, metavar="COMMAND")
    forget = commands.add_parser(
        "forget",
        help="delete a player's key and seat links (crypto-shredding); logged, naming no one",
    )
    forget.add_argument("player_id", metavar="PLAYER_ID", help="the platform's player id")
    add_target_option(forget)
    add_token_options(forget, role="the operator role's")
    forget.add_argument(
        "--token-file",
        type=Path,
        metavar="FILE",
        help="with --target: a file holding the operator token (such as the operator-token file "
        "a first start writes), instead of --token",
    )
    forget.add_argument(
        "--request-id",
        help="idempotency key: a retry with it gets the first answer (default: a fresh UUID4)",
    )
    forget.add_argument("--json", action="store_true", help="the answer as one JSON object")
    forget.set_defaults(run=run_forget)


def run_forget(args: argparse.Namespace) -> int:
    needs = "forgetting a player needs a token of the operator role"
    if args.token_file is not None and args.token is None:
        try:
            args.token = read_private_file(args.token_file, "token file").decode().strip()
        except (KeyFileError, UnicodeDecodeError) as error:
            return fail("player forget", str(error))
    # Made here, so that a failure worth retrying can name it: a forget answered UNAVAILABLE, or
    # not in time, may be done but not yet erased on disk, and its retry with the same id
    # finishes it.
    request_id = args.request_id or str(uuid.uuid4())
    try:
        with connect(args, token_required=needs) as client:
            answer = client.forget_player(args.player_id, request_id=request_id)
    except (TargetError, ValueError) as error:
        return fail("player forget", str(error))
    except grpc.RpcError as error:
        print(f"gnau player forget: {refusal(args.target, error)}", file=sys.stderr)
        if error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            print(f"gnau player forget: retry with --request-id {request_id}", file=sys.stderr)
        return 2
    logged = answer.forgotten or answer.seats_unlinked > 0
    if args.json:
        print(
            json.dumps(
                {
                    "forgotten": answer.forgotten,
                    "seats_unlinked": answer.seats_unlinked,
                    "log_index": answer.log_index if logged else None,
                },
                sort_keys=True,
            )
        )
    elif logged:
        print(
            f"forgotten: the player's key and {answer.seats_unlinked:,} seat link(s) are deleted;"
            f" PLAYER_FORGOTTEN is entry {answer.log_index:,} of the log"
        )
    else:
        print("nothing to forget: the service holds no key and no seat link for that player")
    return 0
