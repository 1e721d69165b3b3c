"""``gnau tiles``: the log as static C2SP tlog-tiles, outside the service (docs/audit.md).

- ``gnau tiles publish --database URL --to DIR|s3://bucket[/prefix] [--endpoint-url URL]
  [--follow SECONDS] [--all-bundles] [--witness VKEY ... [--quorum K]]``: write the latest
  checkpoint (with witnesses, the newest that K of them cosigned, as the HTTP port serves it) and
  every tile it commits to that the target lacks (:mod:`gnau_service.tiles.publisher`), once,
  or every ``SECONDS`` until SIGINT or SIGTERM. Entry bundles holding a round not yet revealed
  wait for a later pass, unless ``--all-bundles`` (a bucket for auditors alone). An S3 bucket's
  credentials and region are boto3's usual ones (``AWS_ACCESS_KEY_ID``, ``~/.aws``, instance
  roles).

Exit statuses (main.py's): 0 published (with ``--follow``: stopped by a signal); 1 the target
holds something this log never wrote there (another log, a fork, a tile with other bytes):
nothing is overwritten; 2 the database, the target or an argument cannot be used. A one-off pass
prints one line on stdout; ``--follow`` prints one line a pass on stderr. No line holds the
database URL's password.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qsl, urlsplit

from gnau_service.audit.entries import clip
from gnau_service.cli.failing import fail
from gnau_service.cli.remote import UnusableKeyError
from gnau_service.cli.witness_options import add_witness_options, witness_policy

if TYPE_CHECKING:
    from gnau_service.tiles.publisher import PublishReport

COMMAND: Final = "tiles publish"
#: The store's default database (a test holds them equal): the store is imported only to run.
DEFAULT_DATABASE_URL: Final = "sqlite:///gnau-data/gnau.db"


def add_tiles_arguments(tiles: argparse.ArgumentParser) -> None:
    commands = tiles.add_subparsers(dest="tiles_command", required=True, metavar="COMMAND")
    publish = commands.add_parser(
        "publish",
        help="write the log's checkpoint and tiles to a directory or an S3 bucket",
        description="Write the latest signed checkpoint and every C2SP tlog-tiles tile it commits "
        "to that the target lacks; tiles are written only where absent and never overwritten, "
        "the checkpoint last. Bundles with rounds not yet revealed wait for a later pass.",
    )
    publish.add_argument(
        "--database",
        default=DEFAULT_DATABASE_URL,
        help=f"the service's database: sqlite:///path or postgresql://... "
        f"(default {DEFAULT_DATABASE_URL})",
    )
    publish.add_argument(
        "--to",
        required=True,
        metavar="DIR|s3://BUCKET[/PREFIX]",
        help="a directory (a web server serves it), or an S3-compatible bucket and prefix",
    )
    publish.add_argument(
        "--endpoint-url",
        metavar="URL",
        help="the S3 endpoint, for a store other than AWS (SeaweedFS, MinIO, R2, ...)",
    )
    publish.add_argument(
        "--follow",
        type=float,
        metavar="SECONDS",
        help="publish again every SECONDS until SIGINT or SIGTERM (one line a pass on stderr)",
    )
    publish.add_argument(
        "--all-bundles",
        action="store_true",
        help="publish every entry bundle at once, hands of rounds not revealed yet included: "
        "only for a target that auditors alone can read",
    )
    add_witness_options(publish)
    publish.set_defaults(run=run_publish)


def scrubbed(message: str, url: str) -> str:
    """``message`` without the database URL's password, wherever a lower layer quoted it.

    >>> scrubbed("no db at postgresql://u:pw1@h/d?password=pw2", "postgresql://u:pw1@h/d?password=pw2")
    'no db at postgresql://u:***@h/d?password=***'
    """
    from gnau_service.store.urls import redacted_url  # noqa: PLC0415

    message = message.replace(url, redacted_url(url))
    try:
        parts = urlsplit(url)
        secrets = [parts.password or ""]
        secrets += [value for key, value in parse_qsl(parts.query) if key.lower() == "password"]
    except ValueError:
        secrets = []
    for secret in secrets:
        if secret:
            message = message.replace(secret, "***")
    return message


def run_publish(args: argparse.Namespace) -> int:
    # Imported here: gnau --help imports no command's work (tests/cli/test_lazy_imports.py).
    from gnau_service.store import (  # noqa: PLC0415
        DatabaseUrlError,
        StoreError,
        open_reader,
    )
    from gnau_service.store.cosignatures import WitnessQuorum  # noqa: PLC0415
    from gnau_service.tiles.publisher import PublishError, follow, publish_once  # noqa: PLC0415
    from gnau_service.tiles.targets import TargetError, TileConflict, open_target  # noqa: PLC0415

    url: str = args.database

    def said(error: Exception) -> str:
        return clip(scrubbed(str(error), url), 400)

    if args.follow is not None and not args.follow > 0:
        return fail(COMMAND, f"--follow must be a number of seconds above 0, not {args.follow}")
    try:
        witnessed = witness_policy(args)
    except UnusableKeyError as error:
        return fail(COMMAND, clip(str(error), 400))
    # Cosignatures are kept by the witness's vkey (as gnau serve --witness names it).
    quorum = WitnessQuorum(tuple(key.vkey for key in witnessed.witnesses), witnessed.quorum)
    try:
        target = open_target(args.to, endpoint_url=args.endpoint_url)
    except ValueError as error:
        return fail(COMMAND, clip(str(error), 400))
    try:
        reader = open_reader(url)
    except DatabaseUrlError as error:
        return fail(COMMAND, said(error))
    with reader:
        try:
            if args.follow is None:
                report = publish_once(reader, target, public=not args.all_bundles, quorum=quorum)
                print(f"published to {target}: {report.line()}")
                return 0
            stop = threading.Event()
            _stop_on_signals(stop)
            print(
                f"gnau {COMMAND}: publishing to {target} every {args.follow:g} s; "
                "SIGINT or SIGTERM stops",
                file=sys.stderr,
                flush=True,
            )

            def on_pass(report: PublishReport) -> None:
                _progress(report.line())

            def on_error(error: Exception) -> bool:
                if isinstance(error, PublishError | TileConflict):
                    return False
                if isinstance(error, TargetError | StoreError):
                    _progress(f"this pass failed, trying again in {args.follow:g} s: {said(error)}")
                    return True
                return False

            follow(
                reader,
                target,
                interval=args.follow,
                stop=stop,
                public=not args.all_bundles,
                quorum=quorum,
                on_pass=on_pass,
                on_error=on_error,
            )
            _progress("stopped")
            return 0
        except (PublishError, TileConflict) as error:
            print(f"gnau {COMMAND}: {target}: {said(error)}", file=sys.stderr)
            return 1
        except (TargetError, StoreError) as error:
            return fail(COMMAND, said(error))


def _progress(text: str) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"gnau {COMMAND}: {now} {text}", file=sys.stderr, flush=True)


def _stop_on_signals(stop: threading.Event) -> None:
    """SIGINT and SIGTERM end the loop after the tile being written (never mid-write)."""

    def stopping(signum: int, frame: object) -> None:
        del signum, frame
        stop.set()

    signal.signal(signal.SIGINT, stopping)
    signal.signal(signal.SIGTERM, stopping)
