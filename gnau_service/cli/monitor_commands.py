"""The log read through its tiles alone (C2SP tlog-tiles: the service's ``/log/``, or a
published bucket or directory), with no token:

- ``gnau audit monitor URL --key VKEY [--key ...] [--witness VKEY ... [--quorum K]]
  [--since CHECKPOINT] [--state FILE] [--interval SECONDS] [--bundle-grace SECONDS] [--once]``:
  follow the log (:mod:`gnau_service.tiles.monitor`), one line on stderr per new checkpoint;
  exit 1, with the evidence, at the first thing that does not verify;
- ``gnau audit verify --tiles URL --key VKEY ...``: verify the whole log from its tiles, as far as
  its bundles are public;
- ``gnau receipt verify FILE --key VKEY --tiles URL``: also check the receipt's entries against
  the tiles.

Exit statuses: 0 verified; 1 something does not verify; 2 the tiles cannot be read, or an
argument is unusable.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gnau_service.cli.failing import fail
from gnau_service.cli.remote import UnusableKeyError, read_vkey
from gnau_service.cli.witness_options import add_witness_options, witness_policy

if TYPE_CHECKING:
    from gnau_service.audit.note import Verifier
    from gnau_service.audit.receipts import Receipt
    from gnau_service.tiles.monitor import Monitor


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds from 0, not {text!r}")
    return value


def add_monitor_arguments(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    monitor = commands.add_parser(
        "monitor", help="follow the log through its tiles (no token), verifying every entry"
    )
    monitor.add_argument(
        "tiles", metavar="URL", help="the log's tiles: https://HOST/log/ or a directory"
    )
    monitor.add_argument(
        "--key",
        action="append",
        required=True,
        metavar="VKEY",
        help="the log's public key (C2SP vkey, or a file holding one); repeatable",
    )
    add_witness_options(monitor)
    monitor.add_argument(
        "--since",
        type=Path,
        metavar="CHECKPOINT",
        help="start from this signed checkpoint seen earlier: entries before it are not read",
    )
    monitor.add_argument(
        "--state", type=Path, metavar="FILE", help="where to keep the state, to resume from"
    )
    monitor.add_argument(
        "--interval", type=_seconds, default=30.0, help="seconds between passes (default 30)"
    )
    monitor.add_argument(
        "--bundle-grace",
        type=_seconds,
        default=3600.0,
        metavar="SECONDS",
        help="how long a bundle a checkpoint covers may stay unpublished (default 3600)",
    )
    monitor.add_argument("--once", action="store_true", help="one pass, then exit")
    monitor.add_argument("--jobs", type=int, help="worker processes (default: every core)")
    monitor.add_argument(
        "--timeout", type=_seconds, default=30.0, help="seconds a request may take (default 30)"
    )
    monitor.set_defaults(run=run_monitor)


def add_tiles_option(parser: argparse.ArgumentParser, meaning: str) -> None:
    parser.add_argument("--tiles", metavar="URL", help=meaning)


def _keys(texts: Sequence[str]) -> list[Verifier]:
    return [read_vkey(text) for text in texts]


def run_monitor(args: argparse.Namespace) -> int:
    from gnau_service.tiles.client import TileFetchError, open_tiles  # noqa: PLC0415
    from gnau_service.tiles.monitor import (  # noqa: PLC0415
        CannotMonitorError,
        Monitor,
        MonitorFailure,
        MonitorState,
    )

    try:
        keys = _keys(args.key)
        witnessed = witness_policy(args)
        state = None
        if args.state is not None and args.state.exists():
            state = MonitorState.load(args.state)
        monitor = Monitor(
            open_tiles(args.tiles, args.timeout),
            keys,
            state=state,
            witnesses=witnessed.witnesses,
            quorum=witnessed.quorum,
            bundle_grace=args.bundle_grace,
            jobs=args.jobs,
        )
        if state is None and args.since is not None:
            monitor.start_at(args.since.read_bytes())
    except (OSError, UnusableKeyError, CannotMonitorError) as error:
        return fail("audit monitor", str(error))
    if state is not None:
        print(
            f"resuming: checkpoint {state.size:,}, {state.verified:,} entries verified",
            file=sys.stderr,
        )
    while True:
        try:
            result = monitor.step()
        except MonitorFailure as failure:
            print(f"FAILED: {failure}")
            return 1
        except TileFetchError as error:
            if args.once:
                return fail("audit monitor", str(error))
            print(f"gnau audit monitor: {error} (trying again)", file=sys.stderr)
        else:
            if args.state is not None:
                try:
                    monitor.state.save(args.state)
                except OSError as error:
                    return fail("audit monitor", f"cannot write the state {args.state}: {error}")
            if args.once or result.new_checkpoint or result.new_entries:
                print(result.line(), file=sys.stderr, flush=True)
        if args.once:
            return 0
        try:
            time.sleep(args.interval)
        except KeyboardInterrupt:
            return 0


def run_verify_tiles(args: argparse.Namespace) -> int:
    """``gnau audit verify --tiles URL``: the whole log from its tiles, one pass."""
    from gnau_service.tiles.client import TileFetchError, open_tiles  # noqa: PLC0415
    from gnau_service.tiles.monitor import (  # noqa: PLC0415
        CannotMonitorError,
        Monitor,
        MonitorFailure,
    )

    location = args.tiles if args.tiles is not None else str(args.bundle)
    try:
        keys = _keys(args.key)
        if not keys:
            raise UnusableKeyError("verifying tiles needs the log's key (--key VKEY)")
        witnessed = witness_policy(args)
        pinned = args.checkpoint.read_bytes() if args.checkpoint else None
        monitor: Monitor = Monitor(
            open_tiles(location),
            keys,
            witnesses=witnessed.witnesses,
            quorum=witnessed.quorum,
            bundle_grace=float("inf"),
            jobs=args.jobs,
        )
    except (OSError, UnusableKeyError, CannotMonitorError) as error:
        return fail("audit", f"cannot verify {location}: {error}")
    try:
        result = monitor.step()
        pinned_size = None if pinned is None else monitor.check_pinned(pinned)
    except MonitorFailure as failure:
        print(f"result: INVALID: {failure}")
        return 1
    except (TileFetchError, CannotMonitorError) as error:
        return fail("audit", f"cannot verify {location}: {error}")
    state = monitor.state
    if state.checkpoint is None:
        return fail("audit", f"{location} has no checkpoint yet")
    print(f"checkpoint: size {state.size:,}, root {state.root} (signature and tiles verified)")
    print(
        f"entries: {state.verified:,} of {state.size:,} verified against the tiles, "
        f"{state.rounds_replayed:,} rounds settled or voided and replayed"
    )
    if pinned_size is not None:
        print(f"pinned checkpoint: size {pinned_size:,}, consistent")
    if result.waiting:
        print(
            f"not yet public: {result.waiting:,} bundles (entries {state.verified:,} on): "
            "verified as far as the log is public"
        )
    print("result: VALID")
    return 0


def verify_receipt_tiles(args: argparse.Namespace, receipt: Receipt) -> int:
    """``gnau receipt verify --tiles URL``, once the receipt itself verified: its entries'
    leaf hashes against the tiles, the tiles' root against its checkpoint's, and the log's latest
    checkpoint consistent with it."""
    from gnau_service.audit.checkpoint import CheckpointError, open_checkpoint  # noqa: PLC0415
    from gnau_service.audit.note import NoteError  # noqa: PLC0415
    from gnau_service.audit.signing import RotationError, trusted_keys  # noqa: PLC0415
    from gnau_service.tiles.client import TileFetchError, open_tiles  # noqa: PLC0415
    from gnau_service.tiles.monitor import (  # noqa: PLC0415
        MonitorFailure,
        check_entries_in_tiles,
    )

    try:
        keys = _keys(args.key)
        chain = [key.verifier for key in trusted_keys(keys[0], receipt.key_rotations)]
        signed = open_checkpoint(receipt.checkpoint, keys[0].name, chain)
    except (UnusableKeyError, NoteError, CheckpointError, RotationError) as error:
        return fail("receipt verify", f"cannot check against the tiles: {error}")
    entries = [(entry.index, entry.data) for entry in receipt.entries]
    try:
        lines = check_entries_in_tiles(open_tiles(args.tiles), signed, entries, chain)
    except MonitorFailure as failure:
        print(f"tiles: INVALID: {failure}")
        return 1
    except TileFetchError as error:
        return fail("receipt verify", f"cannot read the tiles: {error}")
    print("\n".join(lines))
    return 0
