"""A player's and a regulator's commands: fetch a round's receipt, verify it offline, and fetch
a round in the verifiable form ``gnau round verify`` reads.

- ``gnau receipt get ROUND_ID [--target HOST:PORT] [--token T] [--pin CHECKPOINT] [--out FILE]``
- ``gnau receipt verify FILE --key VKEY [--checkpoint PINNED] [--witness VKEY ... [--quorum K]]
  [--seat REF_OR_NUMBER] [--tiles URL]``
- ``gnau round get ROUND_ID [--target ...] [--token T] [--json]``
- ``gnau round verify [FILE]``: its arguments and checks are :mod:`.fairness_commands`'

Exit statuses: 0 valid (or done), 1 invalid (the first failing step is named), 2 unreadable
input, unusable arguments, or a call the service refused.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from gnau.v1 import round_pb2

from gnau_service.audit.checkpoint import Checkpoint, CheckpointError
from gnau_service.audit.note import NoteError, SignedNote
from gnau_service.cli.failing import fail
from gnau_service.cli.fairness_commands import add_round_verify_arguments
from gnau_service.cli.file_errors import problem
from gnau_service.cli.monitor_commands import add_tiles_option, verify_receipt_tiles
from gnau_service.cli.remote import (
    TargetError,
    UnusableKeyError,
    add_target_option,
    add_token_options,
    connect,
    read_vkey,
    refusal,
)
from gnau_service.cli.witness_options import add_witness_options, witness_policy

if TYPE_CHECKING:
    from gnau_service.audit.receipts import ReceiptEntry


def add_receipt_arguments(receipt: argparse.ArgumentParser) -> None:
    receipt_commands = receipt.add_subparsers(dest="receipt_command", required=True)
    get = receipt_commands.add_parser(
        "get", help="fetch the receipt of a revealed, settled or voided round"
    )
    get.add_argument("round_id", metavar="ROUND_ID")
    add_target_options(get)
    get.add_argument(
        "--pin",
        type=Path,
        metavar="CHECKPOINT",
        help="a signed checkpoint seen earlier: the receipt then proves it consistent",
    )
    get.add_argument("--out", type=Path, help="file to write (default: standard output)")
    get.set_defaults(run=run_receipt_get)
    verify = receipt_commands.add_parser(
        "verify", help="verify a round's receipt offline, with the log's public key"
    )
    verify.add_argument("receipt", type=Path, metavar="FILE")
    verify.add_argument(
        "--key",
        action="append",
        required=True,
        metavar="VKEY",
        help="the log's public key (C2SP vkey, or a file holding one); repeatable",
    )
    verify.add_argument("--checkpoint", type=Path, help="a signed checkpoint seen earlier")
    add_target_option(
        verify,
        fallback=None,
        meaning="a service to fetch what the receipt lacks from (a consistency proof from the"
        " pinned checkpoint); without one, such a receipt cannot be checked (exit 2)",
    )
    add_token_options(verify)
    add_witness_options(verify)
    add_tiles_option(
        verify,
        "the log's tiles (https://HOST/log/ or a directory): also check the receipt's entries "
        "and root against them",
    )
    verify.add_argument(
        "--seat",
        metavar="REF_OR_NUMBER",
        help="your player reference (p-...) or seat number: once the receipt is valid, show that "
        "seat (its stake, outcome and delta); exit 1 if the round has no such seat",
    )
    verify.set_defaults(run=run_receipt_verify)


def add_round_arguments(round_: argparse.ArgumentParser) -> None:
    round_commands = round_.add_subparsers(dest="round_command", required=True)
    round_get = round_commands.add_parser("get", help="one round, as the service holds it")
    round_get.add_argument("round_id", metavar="ROUND_ID")
    add_target_options(round_get)
    round_get.add_argument(
        "--json",
        action="store_true",
        help="the revealed round in the form gnau round verify reads (docs/fairness.md)",
    )
    round_get.set_defaults(run=run_round_get)
    round_verify = round_commands.add_parser(
        "verify", help="verify a revealed round: commitment, lock, deck and every hand"
    )
    add_round_verify_arguments(round_verify)


def add_target_options(parser: argparse.ArgumentParser) -> None:
    """Where the service is, and who asks (no token: the public role)."""
    add_target_option(parser)
    add_token_options(parser)


def run_receipt_get(args: argparse.Namespace) -> int:
    pinned_size = 0
    if args.pin is not None:
        try:
            pinned_size = Checkpoint.parse(SignedNote.parse(args.pin.read_bytes()).text).size
        except (OSError, NoteError, CheckpointError) as error:
            return fail(
                "receipt get",
                f"cannot read the pinned checkpoint {args.pin}: {problem(error, named=args.pin)}",
            )
    try:
        with connect(args) as client:
            text = client.get_round_receipt(args.round_id, pinned_size=pinned_size)
    except TargetError as error:
        return fail("receipt get", str(error))
    except grpc.RpcError as error:
        return fail("receipt get", refusal(args.target, error))
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        args.out.write_text(text, encoding="utf-8")
    except OSError as error:
        return fail("receipt get", f"cannot write {args.out}: {problem(error, named=args.out)}")
    print(f"wrote the receipt of round {args.round_id} to {args.out}")
    return 0


def run_receipt_verify(args: argparse.Namespace) -> int:
    # Imported here: a receipt's checks (the rounds' replay) are slow to import, and only this
    # command of the module's makes them.
    from gnau_service.audit.receipts import (  # noqa: PLC0415
        Receipt,
        ReceiptFormatError,
        verify_receipt,
    )

    try:
        keys = [read_vkey(text) for text in args.key]
        witnessed = witness_policy(args)
        # Bytes, as written: a pin with CRLF line ends is not the note that was signed.
        pinned = args.checkpoint.read_bytes().decode("utf-8") if args.checkpoint else None
        receipt = Receipt.from_text(args.receipt.read_bytes())
    except (OSError, UnicodeError, UnusableKeyError, ReceiptFormatError) as error:
        reason = problem(error, named=args.receipt)
        return fail("receipt verify", f"cannot verify {args.receipt}: {reason}")
    report = verify_receipt(
        receipt, keys, pinned, witnesses=witnessed.witnesses, quorum=witnessed.quorum
    )
    if report.unchecked is not None and args.target is not None and pinned is not None:
        # The proof the receipt lacks, from the service: the receipt fetched with the pin.
        try:
            pinned_size = Checkpoint.parse(SignedNote.parse(pinned.encode()).text).size
            with connect(args) as client:
                text = client.get_round_receipt(receipt.round_id, pinned_size=pinned_size)
            receipt = Receipt.from_text(text.encode())
        except (NoteError, CheckpointError, ReceiptFormatError, TargetError) as error:
            return fail("receipt verify", f"cannot fetch the proof from {args.target}: {error}")
        except grpc.RpcError as error:
            return fail("receipt verify", refusal(args.target, error))
        print(f"fetched the receipt again from {args.target}, with a proof from the pin")
        report = verify_receipt(
            receipt, keys, pinned, witnesses=witnessed.witnesses, quorum=witnessed.quorum
        )
    print(report.summary())
    if report.failure is not None:
        return 1
    if report.unchecked is not None:
        print(
            "gnau receipt verify: the receipt cannot prove this pin; get one that does with"
            f" gnau receipt get {receipt.round_id} --pin {args.checkpoint}, or add"
            " --target HOST:PORT to fetch it now",
            file=sys.stderr,
        )
        return 2
    if args.tiles is not None:
        checked = verify_receipt_tiles(args, receipt)
        if checked:
            return checked
    return 0 if args.seat is None else _show_seat(receipt.round, receipt.entries, args.seat)


_PLAYER_REF = re.compile(r"p-[0-9a-f]{32}")


def find_seat(round_: dict[str, Any] | None, query: str) -> dict[str, Any] | None:
    """The seat of a revealed round's JSON that ``query`` names: a player reference (v2, v3, in
    either case), a seat number, or (v1) the player id as written; None if no seat does."""
    text = query.strip()
    if round_ is None or not text:
        return None
    seats: list[dict[str, Any]] = round_["seats"]
    if _PLAYER_REF.fullmatch(text.lower()):
        return next((seat for seat in seats if seat.get("player_ref") == text.lower()), None)
    if text.isascii() and text.isdigit():
        return next((seat for seat in seats if seat["seat_number"] == int(text)), None)
    return next((seat for seat in seats if seat.get("player_id") == text), None)


def _show_seat(round_: dict[str, Any] | None, entries: Sequence[ReceiptEntry], query: str) -> int:
    """Print the seat of a verified receipt that ``query`` names, with its settlement."""
    seat = find_seat(round_, query)
    if seat is None or round_ is None:
        print(f"no seat of this round has the reference or seat number {query.strip()!r}")
        return 1
    who = (
        f"reference {seat['player_ref']}" if "player_ref" in seat else f"player {seat['player_id']}"
    )
    last = json.loads(entries[-1].data)
    outcome = ""
    if last["kind"] == "ROUND_SETTLED":
        players = last["payload"]["players"]
        result = next(item for item in players if item["seat"] == seat["seat_number"])
        outcome = f", {result['outcome']}, delta {result['delta']:+d}"
    elif last["kind"] == "ROUND_VOIDED":
        outcome = ", voided: no stake was won or lost"
    print(f"seat {seat['seat_number']}: {who}, stake {seat['stake']}{outcome}")
    return 0


def run_round_get(args: argparse.Namespace) -> int:
    try:
        with connect(args) as client:
            round_ = client.get_round(args.round_id)
    except TargetError as error:
        return fail("round get", str(error))
    except grpc.RpcError as error:
        return fail("round get", refusal(args.target, error))
    if not args.json:
        state = round_pb2.RoundState.Name(round_.state).removeprefix("ROUND_STATE_")
        print(f"round {round_.round_id}  table {round_.table_id}  {state}")
        for hand in round_.hands:
            print(f"  seat {hand.seat_number:<4} {' '.join(hand.cards)}")
        if round_.dealer_hand:
            print(f"  dealer     {' '.join(round_.dealer_hand)}")
        print("(--json writes it in the form gnau round verify reads, once it is revealed)")
        return 0
    if not round_.server_seed:
        return fail(
            "round get",
            f"round {args.round_id} is not revealed yet: its verifiable form exists once it is",
        )
    # Imported here: the server's and the fairness core's modules are slow to import, and only
    # --json needs them.
    from gnau_service.fairness.errors import FairnessError  # noqa: PLC0415
    from gnau_service.server.grpc.convert import revealed_round_from_proto  # noqa: PLC0415

    try:
        revealed = revealed_round_from_proto(round_)
    except (FairnessError, ValueError) as error:
        return fail("round get", f"the service's round does not read as a revealed round: {error}")
    print(json.dumps(revealed.to_json(), indent=2, ensure_ascii=False))
    return 0
