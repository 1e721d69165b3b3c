"""``--witness VKEY`` (repeatable) and ``--quorum K``: the witnesses a verifying command trusts,
and how many of them must have cosigned a checkpoint for it to be believed (docs/witness.md).

Without ``--witness`` nothing is asked of cosignatures. With it, ``--quorum`` defaults to every
witness given; it may be lowered to K of them (K of N: the checkpoint is believed unless K
witnesses collude with the log). Cosignatures from keys not given are ignored.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from gnau_service.audit.cosignature import WitnessKey
from gnau_service.cli.remote import UnusableKeyError, read_key


@dataclass(frozen=True)
class WitnessPolicy:
    """The trusted witness keys, and the least number of them that must cosign."""

    witnesses: tuple[WitnessKey, ...] = ()
    quorum: int = 0


def add_witness_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--witness",
        action="append",
        default=[],
        metavar="VKEY",
        help="a witness key (C2SP vkey, or a file holding one) whose cosignatures count; "
        "repeatable",
    )
    parser.add_argument(
        "--quorum",
        type=int,
        metavar="K",
        help="refuse a checkpoint with fewer than K valid cosignatures from the --witness keys "
        "(default: all of them)",
    )


def witness_policy(args: argparse.Namespace) -> WitnessPolicy:
    """The policy the options give; raises :class:`UnusableKeyError` for a bad key or quorum."""
    keys = tuple(
        dict.fromkeys(read_key(text, "--witness", WitnessKey.from_vkey) for text in args.witness)
    )
    quorum = len(keys) if args.quorum is None else args.quorum
    if not keys and args.quorum:
        raise UnusableKeyError("--quorum needs the witnesses' keys (--witness VKEY)")
    if not 0 <= quorum <= len(keys):
        raise UnusableKeyError(f"--quorum {quorum} is not between 0 and the {len(keys)} --witness")
    return WitnessPolicy(keys, quorum)
