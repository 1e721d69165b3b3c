"""``gnau audit``: export the log, verify a bundle offline, and recall rounds for people.

- ``gnau audit export --out BUNDLE [--from-round ID] [--to-round ID]``
- ``gnau audit verify BUNDLE [--key VKEY] [--checkpoint FILE] [--allow-unanchored] [--jobs N]``
- ``gnau audit show [--last N]`` and ``gnau audit round ROUND_ID``

Exit statuses of ``verify`` (``docs/audit.md`` has the rule): 0 valid; 1 the bundle was read and
something after its header does not verify (or no signed root covers its last entries); 2
verification cannot start: the bundle cannot be read, its first line is not a header of this
format, or an argument is unusable.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from gnau_service.audit.bundle import (
    CannotVerifyError,
    ExportError,
    Verdict,
    verify_bundle,
    write_bundle,
)
from gnau_service.audit.entries import EntryError, clip
from gnau_service.audit.note import NoteError, Verifier
from gnau_service.cli.recall import full_record, one_line, read_history
from gnau_service.store import DEFAULT_DATABASE_URL, DatabaseUrlError, open_reader

PROGRESS_FROM = 10_000


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = subparsers.add_parser("audit", help="export, verify and read the audit log")
    commands = audit.add_subparsers(dest="audit_command", required=True, metavar="COMMAND")

    export = commands.add_parser("export", help="write the log to a portable bundle")
    _add_database_option(export)
    export.add_argument("--out", required=True, type=Path, help="bundle file to write")
    export.add_argument("--from-round", metavar="ROUND_ID", help="start at this round's commit")
    export.add_argument("--to-round", metavar="ROUND_ID", help="end after this round's last entry")
    export.set_defaults(run=run_export)

    verify = commands.add_parser("verify", help="verify a bundle offline and replay its rounds")
    verify.add_argument("bundle", type=Path, help="bundle file (from gnau audit export)")
    verify.add_argument(
        "--key",
        action="append",
        default=[],
        metavar="VKEY",
        help="the log's public key to trust (C2SP vkey, or a file holding one); repeatable",
    )
    verify.add_argument("--checkpoint", type=Path, help="a signed checkpoint seen earlier")
    verify.add_argument(
        "--allow-unanchored",
        action="store_true",
        help="accept, with a warning, a bundle whose last entries no signed checkpoint covers",
    )
    verify.add_argument("--jobs", type=_positive_int, help="worker processes (default: every core)")
    verify.set_defaults(run=run_verify)

    show = commands.add_parser("show", help="the latest rounds, one line each")
    _add_database_option(show)
    show.add_argument("--last", type=int, default=10, help="how many rounds (default 10)")
    show.set_defaults(run=run_show)

    round_ = commands.add_parser("round", help="one round in full")
    _add_database_option(round_)
    round_.add_argument("round_id", metavar="ROUND_ID")
    round_.set_defaults(run=run_round)


def _add_database_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database",
        default=DEFAULT_DATABASE_URL,
        help=f"sqlite:///path or postgresql://... (default {DEFAULT_DATABASE_URL})",
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1, not {text!r}")
    return value


def _fail(message: str) -> int:
    print(f"gnau audit: {message}", file=sys.stderr)
    return 2


def run_export(args: argparse.Namespace) -> int:
    try:
        reader = open_reader(args.database)
    except DatabaseUrlError as error:
        return _fail(str(error))
    with reader:
        first_index, end = 0, reader.size()
        if args.from_round:
            span = reader.round_span(args.from_round)
            if span is None:
                return _fail(f"round {args.from_round!r} is not in the log")
            first_index = span[0]
        if args.to_round:
            span = reader.round_span(args.to_round)
            if span is None:
                return _fail(f"round {args.to_round!r} is not in the log")
            end = reader.checkpoint_size_from(span[1] + 1) or end
        if end <= first_index:
            return _fail("the log has no entries in that range")
        try:
            # newline="\n": a bundle's lines end in LF on every system (CRLF is refused).
            with args.out.open("w", encoding="utf-8", newline="\n") as out:
                count = write_bundle(reader, out, first_index=first_index, end=end)
        except (OSError, ExportError) as error:
            return _fail(f"cannot write {args.out}: {error}")
    print(f"wrote {count:,} entries ({first_index:,} to {end - 1:,}) to {args.out}")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    try:
        keys = [_read_key(text) for text in args.key]
        # Bytes, as they are: reading text would turn CRLF into LF, and CRLF must be refused.
        pinned = args.checkpoint.read_bytes() if args.checkpoint else None
        # Binary lines split at LF only; text mode would also split at a lone CR.
        with args.bundle.open("rb") as lines:
            report = verify_bundle(
                lines,
                pinned_keys=keys,
                pinned_checkpoint=pinned,
                allow_unanchored=args.allow_unanchored,
                progress=_ProgressBar(),
                jobs=args.jobs,
            )
    except (OSError, CannotVerifyError) as error:
        return _fail(f"cannot verify {args.bundle}: {error}")
    print(report.summary())
    return 0 if report.verdict is Verdict.VALID else 1


class _UnusableKeyError(CannotVerifyError):
    """A --key that is neither a vkey nor a readable file holding one."""


def _read_key(text: str) -> Verifier:
    path = Path(text)
    if "+" not in text and path.is_file():
        try:
            text = path.read_bytes().decode("utf-8").strip()
        except UnicodeDecodeError as error:
            raise _UnusableKeyError(f"--key file {path} is not UTF-8: {error.reason}") from None
    try:
        return Verifier.from_vkey(text)
    # KeyFormatError, or the UnicodeEncodeError of a key name holding a lone surrogate.
    except ValueError as error:
        raise _UnusableKeyError(f"--key: {clip(str(error), 200)}") from None


class _ProgressBar:
    """A progress bar on stderr for long bundles, redrawn at most ten times a second."""

    def __init__(self) -> None:
        self._last_drawn = 0.0

    def __call__(self, done: int, total: int) -> None:
        if total < PROGRESS_FROM:
            return
        now = time.monotonic()
        if done < total and now - self._last_drawn < 0.1:
            return
        self._last_drawn = now
        width = 40
        filled = width * done // total
        bar = "#" * filled + "." * (width - filled)
        print(f"\r[{bar}] {done:,}/{total:,} entries", end="", file=sys.stderr, flush=True)
        if done >= total:
            print(file=sys.stderr)


def run_show(args: argparse.Namespace) -> int:
    try:
        reader = open_reader(args.database)
    except DatabaseUrlError as error:
        return _fail(str(error))
    with reader:
        round_ids = reader.recent_rounds(args.last)
        if not round_ids:
            print("no rounds in the log yet")
        for round_id in round_ids:
            try:
                history = read_history(reader, round_id)
            except (EntryError, NoteError) as error:
                print(f"round {round_id}: its entries do not verify: {error}")
                return 1
            print(one_line(history))
    return 0


def run_round(args: argparse.Namespace) -> int:
    try:
        reader = open_reader(args.database)
    except DatabaseUrlError as error:
        return _fail(str(error))
    with reader:
        if reader.round_span(args.round_id) is None:
            return _fail(f"round {args.round_id!r} is not in the log")
        try:
            history = read_history(reader, args.round_id)
        except (EntryError, NoteError) as error:
            print(f"round {args.round_id}: its entries do not verify: {error}")
            return 1
    print("\n".join(full_record(history)))
    return 0
