"""``gnau audit``: export the log, verify a bundle offline, and recall rounds for people.

- ``gnau audit export --out BUNDLE [--from-round ID] [--to-round ID]``
- ``gnau audit checkpoint [--out FILE] [--key VKEY]``
- ``gnau audit verify BUNDLE [--key VKEY] [--checkpoint FILE] [--allow-unanchored] [--jobs N]
  [--witness VKEY ... [--quorum K]]`` (with witnesses, only a checkpoint cosigned by the quorum
  anchors the entries it covers)
- ``gnau audit verify --tiles URL --key VKEY [...]`` and ``gnau audit monitor URL --key VKEY
  [...]``: the log from its tiles alone (:mod:`.monitor_commands`)
- ``gnau audit show [--last N] [--json]`` and ``gnau audit round ROUND_ID [--json]``
- ``gnau audit players --player-id ID | --player-ref p-... [--json]``: a player's seats, or a
  reference's player, while the player's key exists (the store's private tables, not the log;
  over gRPC the auditor or operator role's ``AuditService.LookupPlayer``)

Every command but ``verify`` reads the log from its database (``--database``), or over gRPC from
a running service (``--target HOST:PORT`` with an auditor ``--token``, :mod:`.remote_log`): the
same code reads either, so a bundle exported over gRPC is byte for byte the database's. A call
the service refuses, or a service that cannot be reached, is one line on stderr and exit 2.

Exit statuses of ``verify`` (``docs/audit.md`` has the rule): 0 valid; 1 the bundle was read and
something after its header does not verify (or no signed root covers its last entries); 2
verification cannot start: the bundle cannot be read, its first line is not a header of this
format, or an argument is unusable.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeAlias

import grpc
from gnau_client import EntryOrderError

from gnau_service.audit.checkpoint import CheckpointError, open_checkpoint
from gnau_service.audit.entries import EntryError, clip
from gnau_service.audit.merkle import Frontier
from gnau_service.audit.note import NoteError
from gnau_service.audit.spans import entry_span
from gnau_service.cli.failing import fail
from gnau_service.cli.file_errors import problem
from gnau_service.cli.monitor_commands import (
    add_monitor_arguments,
    add_tiles_option,
    run_verify_tiles,
)
from gnau_service.cli.recall import (
    full_record,
    one_line,
    read_history,
    record_json,
    summary_json,
)
from gnau_service.cli.remote import (
    TargetError,
    UnusableKeyError,
    add_target_option,
    add_token_options,
    connect,
    read_vkey,
    refusal,
)
from gnau_service.cli.remote_log import RemoteLog, RemoteLogError, checkpoint_size
from gnau_service.cli.witness_options import add_witness_options, witness_policy

if TYPE_CHECKING:
    from gnau_service.audit.bundle import LogSource
    from gnau_service.audit.bundle_verification import Progress
    from gnau_service.store import LogReader

PROGRESS_FROM = 10_000
#: No limit, as SQL spells it: the largest LIMIT a 64-bit signed integer holds.
_EVERY = 2**63 - 1

#: The store's own default (a test holds them equal), for ``--database``'s help: the store is
#: imported only by a command that reads a database.
DEFAULT_DATABASE_URL: Final = "sqlite:///gnau-data/gnau.db"

#: Where the audit commands read the log: its database, or a service over gRPC.
AuditLog: TypeAlias = "LogReader | RemoteLog"


def add_audit_arguments(audit: argparse.ArgumentParser) -> None:
    commands = audit.add_subparsers(dest="audit_command", required=True, metavar="COMMAND")

    export = commands.add_parser("export", help="write the log to a portable bundle")
    _add_log_options(export)
    export.add_argument("--out", required=True, type=Path, help="bundle file to write")
    export.add_argument("--from-round", metavar="ROUND_ID", help="start at this round's commit")
    export.add_argument("--to-round", metavar="ROUND_ID", help="end after this round's last entry")
    export.set_defaults(run=run_export)

    checkpoint = commands.add_parser(
        "checkpoint", help="save the log's latest signed checkpoint, to pin it"
    )
    _add_log_options(checkpoint)
    checkpoint.add_argument("--out", type=Path, help="file to write (default: standard output)")
    checkpoint.add_argument(
        "--key",
        action="append",
        default=[],
        metavar="VKEY",
        help="refuse a checkpoint that this key (C2SP vkey, or a file holding one) did not sign",
    )
    checkpoint.set_defaults(run=run_checkpoint)

    verify = commands.add_parser("verify", help="verify a bundle offline and replay its rounds")
    verify.add_argument(
        "bundle",
        type=Path,
        nargs="?",
        help="bundle file (from gnau audit export), or a directory of the log's tiles",
    )
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
    add_witness_options(verify)
    add_tiles_option(
        verify, "verify the whole log from its tiles instead: https://HOST/log/ or a directory"
    )
    verify.set_defaults(run=run_verify)
    add_monitor_arguments(commands)

    show = commands.add_parser("show", help="the latest rounds, one line each")
    _add_log_options(show)
    show.add_argument("--last", type=_positive_int, default=10, help="how many rounds (default 10)")
    show.add_argument("--json", action="store_true", help="one JSON object per round")
    show.set_defaults(run=run_show)

    round_ = commands.add_parser("round", help="one round in full")
    _add_log_options(round_)
    round_.add_argument("round_id", metavar="ROUND_ID")
    round_.add_argument("--json", action="store_true", help="the round's events as JSON")
    round_.set_defaults(run=run_round)
    players = commands.add_parser(
        "players", help="map a player id to their seat references, or a reference to its player"
    )
    _add_log_options(players)
    which = players.add_mutually_exclusive_group(required=True)
    which.add_argument("--player-id", metavar="ID", help="the platform's player id")
    which.add_argument("--player-ref", metavar="p-...", help="a seat's player reference")
    players.add_argument("--json", action="store_true", help="the answer as one JSON object")
    players.set_defaults(run=run_players)


def _add_log_options(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--database",
        help=f"sqlite:///path or postgresql://... (default {DEFAULT_DATABASE_URL})",
    )
    add_target_option(
        where, fallback=None, meaning="read over gRPC from a running service instead of --database"
    )
    add_token_options(parser, role="the auditor (or operator) role's")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1, not {text!r}")
    return value


# -- where the log is read ------------------------------------------------------------------------


_CannotReadLogError = TargetError  # the log cannot be read as asked: exit 2, one line


def _with_log(
    args: argparse.Namespace,
    command: Callable[[AuditLog, argparse.Namespace], int],
    *,
    needs_entries: bool = True,
    reason: str | None = None,
) -> int:
    """Run ``command`` on the log ``args`` name; ``needs_entries`` if it reads entries, which
    over gRPC only the auditor and operator roles may."""
    try:
        with _opened_log(args, needs_entries=needs_entries, reason=reason) as log:
            return command(log, args)
    except _CannotReadLogError as error:
        return fail("audit", str(error))


@contextmanager
def _opened_log(
    args: argparse.Namespace, *, needs_entries: bool, reason: str | None = None
) -> Iterator[AuditLog]:
    # GNAU_TARGET is only a default: a --database given on the command line wins over it.
    if args.target is None or args.database is not None:
        # Imported here, as the store's other names below: the store (psycopg with it) is slow to
        # import, and a command reading over --target does not need it.
        from gnau_service.store import DatabaseUrlError, StoreError, open_reader  # noqa: PLC0415

        try:
            reader = open_reader(args.database or DEFAULT_DATABASE_URL)
        except DatabaseUrlError as error:
            raise _CannotReadLogError(str(error)) from None
        with reader:
            try:
                yield reader
            except StoreError as error:
                raise _CannotReadLogError(clip(str(error), 300)) from None
        return
    if reason is None and needs_entries:
        reason = "reading log entries needs a token of the auditor role"
    with connect(args, token_required=reason) as client:
        try:
            yield RemoteLog(client)
        except grpc.RpcError as error:
            raise _CannotReadLogError(refusal(args.target, error)) from None
        except (RemoteLogError, EntryOrderError) as error:
            raise _CannotReadLogError(f"{args.target}: {error}") from None


# -- export and checkpoint ------------------------------------------------------------------------


def run_export(args: argparse.Namespace) -> int:
    return _with_log(args, _export)


def _export(log: AuditLog, args: argparse.Namespace) -> int:
    # Imported here, as in run_verify: bundles (their replay of rounds with them) are slow to
    # import, and the commands that read rounds for people do not write or verify one.
    from gnau_service.audit.bundle import ExportError, write_bundle  # noqa: PLC0415

    first_index, end = 0, log.size()
    if args.from_round:
        span = log.round_span(args.from_round)
        if span is None:
            return fail("audit", f"round {args.from_round!r} is not in the log")
        first_index = span[0]
    if args.to_round:
        span = log.round_span(args.to_round)
        if span is None:
            return fail("audit", f"round {args.to_round!r} is not in the log")
        end = log.checkpoint_size_from(span[1] + 1) or end
    if end <= first_index:
        return fail("audit", "the log has no entries in that range")
    # A database reads every checkpoint in one query; over gRPC only the range's are fetched.
    source: LogSource = (
        log.bundle_source(first_index, end) if isinstance(log, RemoteLog) else _CosignedSource(log)
    )
    # Written aside and renamed when whole: a broken connection leaves no half bundle behind.
    partial = args.out.with_name(args.out.name + ".partial")
    try:
        # newline="\n": a bundle's lines end in LF on every system (CRLF is refused).
        with partial.open("w", encoding="utf-8", newline="\n") as out:
            reporting = _ReportingSource(source, _ProgressBar(), end - first_index)
            count = write_bundle(reporting, out, first_index=first_index, end=end)
        partial.replace(args.out)
    except (OSError, ExportError) as error:
        return fail("audit", f"cannot write {args.out}: {problem(error, named=args.out)}")
    finally:
        partial.unlink(missing_ok=True)
    written = entry_span(first_index, first_index + count)
    print(f"wrote {written} ({count:,} in all) to {args.out}")
    return 0


@dataclass(frozen=True)
class _CosignedSource:
    """A database as a LogSource whose checkpoints carry their witness cosignatures, as
    GetCheckpoints serves them (so a bundle is the same whichever way it was exported)."""

    reader: LogReader

    def iter_entries(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        return self.reader.iter_entries(start, end)

    def checkpoints(self) -> list[str]:
        from gnau_service.store.checkpoints import checkpoints_in  # noqa: PLC0415
        from gnau_service.store.cosignatures import keeps_cosignatures  # noqa: PLC0415

        if not keeps_cosignatures(self.reader):  # a schema from before migration 4
            return self.reader.checkpoints()
        return [note for _, note in checkpoints_in(self.reader, 0, None, _EVERY)]

    def public_keys(self) -> list[str]:
        return self.reader.public_keys()

    def frontier(self, size: int) -> Frontier:
        return self.reader.frontier(size)


@dataclass(frozen=True)
class _ReportingSource:
    """A LogSource that tells a progress bar of each entry read (write_bundle tells none)."""

    source: LogSource
    progress: Progress
    total: int

    def iter_entries(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        for done, data in enumerate(self.source.iter_entries(start, end), start=1):
            yield data
            self.progress(done, self.total)

    def checkpoints(self) -> list[str]:
        return self.source.checkpoints()

    def public_keys(self) -> list[str]:
        return self.source.public_keys()

    def frontier(self, size: int) -> Frontier:
        return self.source.frontier(size)


def run_checkpoint(args: argparse.Namespace) -> int:
    return _with_log(args, _checkpoint, needs_entries=False)


def _checkpoint(log: AuditLog, args: argparse.Namespace) -> int:
    try:
        keys = [read_vkey(text) for text in args.key]
    except UnusableKeyError as error:
        return fail("audit", str(error))
    note = log.checkpoint()
    if note is None:
        return fail("audit", "the log has no signed checkpoint yet")
    if keys:
        try:
            # The log's key name is its origin (LogSigner requires it).
            open_checkpoint(note, keys[0].name, keys)
        except (NoteError, CheckpointError) as error:
            print(f"the latest checkpoint does not verify: {clip(str(error), 300)}")
            return 1
    if args.out is None:
        sys.stdout.write(note)
        return 0
    try:
        # Bytes, as signed: a pinned checkpoint with CRLF line ends would be refused.
        args.out.write_bytes(note.encode("utf-8"))
    except OSError as error:
        return fail("audit", f"cannot write {args.out}: {error}")
    verified = " (verified)" if keys else ""
    print(f"saved the checkpoint of size {checkpoint_size(note):,}{verified} to {args.out}")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    # Here, not at the top: see _export.
    from gnau_service.audit.bundle import CannotVerifyError  # noqa: PLC0415
    from gnau_service.audit.bundle_report import Verdict  # noqa: PLC0415
    from gnau_service.audit.bundle_verification import verify_bundle  # noqa: PLC0415

    if args.tiles is not None or (args.bundle is not None and args.bundle.is_dir()):
        return run_verify_tiles(args)
    if args.bundle is None:
        return fail("audit", "verify needs a bundle file, or --tiles URL")
    try:
        keys = [read_vkey(text) for text in args.key]
        witnessed = witness_policy(args)
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
                witnesses=witnessed.witnesses,
                quorum=witnessed.quorum,
            )
    except (OSError, CannotVerifyError, UnusableKeyError) as error:
        return fail("audit", f"cannot verify {args.bundle}: {problem(error, named=args.bundle)}")
    print(report.summary())
    return 0 if report.verdict is Verdict.VALID else 1


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


# -- game recall ----------------------------------------------------------------------------------


def run_show(args: argparse.Namespace) -> int:
    return _with_log(args, _show)


def _show(log: AuditLog, args: argparse.Namespace) -> int:
    round_ids = log.recent_rounds(args.last)
    if not round_ids and not args.json:
        print("no rounds in the log yet")
    for round_id in round_ids:
        try:
            history = read_history(log, round_id)
        except (EntryError, NoteError) as error:
            _unverified(round_id, error, as_json=args.json)
            return 1
        print(json.dumps(summary_json(history)) if args.json else one_line(history))
    return 0


def run_round(args: argparse.Namespace) -> int:
    return _with_log(args, _round)


def _round(log: AuditLog, args: argparse.Namespace) -> int:
    if log.round_span(args.round_id) is None:
        return fail("audit", f"round {args.round_id!r} is not in the log")
    try:
        history = read_history(log, args.round_id)
    except (EntryError, NoteError) as error:
        _unverified(args.round_id, error, as_json=args.json)
        return 1
    print(json.dumps(record_json(history)) if args.json else "\n".join(full_record(history)))
    return 0


def _unverified(round_id: str, error: ValueError, *, as_json: bool) -> None:
    reason = f"its entries do not verify: {error}"
    print(
        json.dumps({"round_id": round_id, "error": reason})
        if as_json
        else f"round {round_id}: {reason}"
    )


# -- players ------------------------------------------------------------------------------------


def run_players(args: argparse.Namespace) -> int:
    return _with_log(
        args, _players, reason="mapping players needs a token of the auditor (or operator) role"
    )


def _players(log: AuditLog, args: argparse.Namespace) -> int:
    """Exit 0 with the mapping; 1 if no player whose key exists is known for it."""
    if isinstance(log, RemoteLog):
        answer = log.client.lookup_player(player_id=args.player_id, player_ref=args.player_ref)
        player_id = answer.player_id
        seats = [(seat.round_id, seat.seat_number, seat.player_ref) for seat in answer.seats]
    else:
        # Imported here: the lookup recomputes references (the fairness core), which the other
        # commands of the module do not need.
        from gnau_service.rounds.identities import lookup_player  # noqa: PLC0415
        from gnau_service.rounds.refusals import InvalidRequest  # noqa: PLC0415

        try:
            # The database itself: every operator's players, as an all-operator auditor.
            player_id, found = lookup_player(
                log, operator=None, player_id=args.player_id, reference=args.player_ref
            )
        except InvalidRequest as error:
            return fail("audit", str(error))
        seats = [(seat.round_id, seat.seat_number, seat.player_ref) for seat in found]
    if args.json:
        print(
            json.dumps(
                {
                    "player_id": player_id or None,
                    "seats": [
                        {"round_id": round_id, "seat_number": number, "player_ref": ref}
                        for round_id, number, ref in seats
                    ],
                },
                sort_keys=True,
            )
        )
    elif not player_id:
        asked = f"player {args.player_id!r}" if args.player_id else f"reference {args.player_ref}"
        print(f"no known player for {asked}: never seated, or forgotten (their key is deleted)")
    else:
        print(f"player {player_id!r}: {len(seats):,} seat(s)")
        for round_id, number, ref in seats:
            print(f"{ref}  round {round_id}  seat {number}")
    return 0 if player_id else 1
