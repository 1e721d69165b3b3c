"""``gnau report``: rounds, stakes, payouts and the actual return to player against the PAR
sheet's, per operator, table, rule set and period, computed from the log alone.

- ``gnau report BUNDLE [options]``: from a bundle (``gnau audit export``), so an auditor
  recomputes the operator's report from an export with the same command;
- ``gnau report --database URL [options]``: from the service's database (default
  ``sqlite:///gnau-data/gnau.db``, the store's).

Options: ``--period day|month|year`` (default ``month``), ``--operator ID`` (repeatable),
``--table T`` (repeatable, at whichever operator),
``--since DATE`` and ``--until DATE`` (UTC dates, both included, of each round's final entry),
``--format csv|json`` (default ``csv``), ``--out FILE`` (default standard output), ``--key VKEY``
(the log's public key to trust, repeatable: without one, the source's own first key is trusted
and a warning says so), ``--jobs N``. Every entry's signature, index and chain are checked as it
is read (:mod:`gnau_service.audit.report_reading`); checkpoints and each round's replay are
``gnau audit verify``'s. docs/reports.md defines every column.

Exit statuses (main.py's): 0 the report was written; 1 the log was read but an entry does not
verify or cannot be counted (nothing is written); 2 the source or an argument cannot be used.
Every refusal is one line on stderr, ``gnau report: ...``; warnings are lines on stderr too,
``gnau report: warning: ...``, so that standard output holds the report alone.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Final

from gnau_service.audit.entries import clip
from gnau_service.audit.operators import DEFAULT_OPERATOR, check_operator
from gnau_service.cli.failing import fail
from gnau_service.cli.file_errors import problem

if TYPE_CHECKING:
    from gnau_service.audit.note import Verifier
    from gnau_service.audit.report_reading import CheckedEntries

COMMAND: Final = "report"
PERIODS: Final = ("day", "month", "year")
FORMATS: Final = ("csv", "json")
#: The store's default database (a test holds them equal): the store is imported only to read one.
DEFAULT_DATABASE_URL: Final = "sqlite:///gnau-data/gnau.db"


class _UnusableError(ValueError):
    """The source or an argument cannot be used: exit status 2."""


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", nargs="?", type=Path, help="bundle file (from gnau audit export)")
    parser.add_argument(
        "--database",
        help=f"read the service's database instead: sqlite:///path or postgresql://... "
        f"(the default without a bundle: {DEFAULT_DATABASE_URL})",
    )
    parser.add_argument("--period", default="month", help="day, month or year (default month)")
    parser.add_argument(
        "--operator",
        action="append",
        metavar="OPERATOR_ID",
        help=f"only this operator's rounds (those from before operators are"
        f" {DEFAULT_OPERATOR!r}'s); repeatable",
    )
    parser.add_argument(
        "--table",
        action="append",
        metavar="TABLE_ID",
        help="only this table (at whichever operator); repeatable",
    )
    parser.add_argument("--since", metavar="YYYY-MM-DD", help="first UTC day counted")
    parser.add_argument("--until", metavar="YYYY-MM-DD", help="last UTC day counted")
    parser.add_argument("--format", default="csv", help="csv or json (default csv)")
    parser.add_argument("--out", type=Path, help="file to write (default: standard output)")
    parser.add_argument(
        "--key",
        action="append",
        default=[],
        metavar="VKEY",
        help="the log's public key to trust (C2SP vkey, or a file holding one); repeatable",
    )
    parser.add_argument(
        "--jobs", type=int, help="worker processes decoding entries (default: every core)"
    )
    parser.set_defaults(run=run_report)


def run_report(args: argparse.Namespace) -> int:
    # Imported here: gnau --help imports no command's work (tests/cli/test_lazy_imports.py).
    from gnau_service.audit.report import (  # noqa: PLC0415
        LogReport,
        Period,
        ReportError,
        csv_text,
        json_text,
    )
    from gnau_service.audit.report_reading import ReportInputError  # noqa: PLC0415

    try:
        period, since, until, keys = _arguments(args)
        report = LogReport(
            Period(period),
            since=since,
            until=until,
            operators=None if args.operator is None else frozenset(args.operator),
            tables=None if args.table is None else frozenset(args.table),
        )
        with _entries(args, keys) as checked:
            report.partial = checked.first_index > 0
            for warning in checked.warnings:
                print(f"gnau {COMMAND}: warning: {warning}", file=sys.stderr)
            report.add_all(checked.entries(args.jobs))
        rows = report.rows()
    except _UnusableError as error:
        return fail(COMMAND, clip(str(error), 400))
    except (ReportInputError, ReportError) as error:
        print(f"gnau {COMMAND}: {clip(str(error), 400)}", file=sys.stderr)
        return 1
    text = csv_text(rows) if args.format == "csv" else json_text(report, rows)
    if report.rounds_open:
        print(
            f"gnau {COMMAND}: warning: {report.rounds_open:,} rounds were still open at the end "
            "of the log and are in no row",
            file=sys.stderr,
        )
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        args.out.write_text(text, encoding="utf-8", newline="\n")
    except OSError as error:
        return fail(COMMAND, f"cannot write {args.out}: {problem(error, named=args.out)}")
    return 0


def _arguments(args: argparse.Namespace) -> tuple[str, date | None, date | None, list[Verifier]]:
    if args.period not in PERIODS:
        raise _UnusableError(f"--period must be day, month or year, not {args.period!r}")
    if args.format not in FORMATS:
        raise _UnusableError(f"--format must be csv or json, not {args.format!r}")
    for operator in args.operator or ():
        problem = check_operator(operator)
        if problem is not None:
            raise _UnusableError(f"--operator: {problem}")
    if args.jobs is not None and args.jobs < 1:
        raise _UnusableError(f"--jobs must be a whole number from 1, not {args.jobs}")
    since, until = _date(args.since, "--since"), _date(args.until, "--until")
    if since is not None and until is not None and until < since:
        raise _UnusableError(f"--until {until} is before --since {since}")
    if args.bundle is not None and args.database is not None:
        raise _UnusableError("give a bundle or --database, not both")
    keys: list[Verifier] = []
    if args.key:
        from gnau_service.cli.remote import UnusableKeyError, read_vkey  # noqa: PLC0415

        try:
            keys = [read_vkey(text) for text in args.key]
        except UnusableKeyError as error:
            raise _UnusableError(str(error)) from None
    return args.period, since, until, keys


def _date(text: str | None, flag: str) -> date | None:
    if text is None:
        return None
    try:
        if len(text) != 10:
            raise ValueError
        return date.fromisoformat(text)
    except ValueError:
        raise _UnusableError(f"{flag} must be a date like 2026-12-01, not {text!r}") from None


@contextmanager
def _entries(args: argparse.Namespace, keys: list[Verifier]) -> Iterator[CheckedEntries]:
    from gnau_service.audit.bundle import BundleFormatError  # noqa: PLC0415
    from gnau_service.audit.report_reading import bundle_entries, log_entries  # noqa: PLC0415

    if args.bundle is not None:
        try:
            # Binary lines split at LF only, as gnau audit verify reads them.
            with args.bundle.open("rb") as lines:
                try:
                    checked = bundle_entries(lines, keys)
                except BundleFormatError as error:
                    raise _UnusableError(f"cannot read {args.bundle}: {error}") from None
                yield checked
        except OSError as error:
            raise _UnusableError(
                f"cannot read {args.bundle}: {problem(error, named=args.bundle)}"
            ) from None
        return
    # Imported here: the store (psycopg with it) is slow to import, and a bundle does not need it.
    from gnau_service.store import DatabaseUrlError, StoreError, open_reader  # noqa: PLC0415

    try:
        reader = open_reader(args.database or DEFAULT_DATABASE_URL)
    except DatabaseUrlError as error:
        raise _UnusableError(str(error)) from None
    with reader:
        try:
            size = reader.size()
            yield log_entries(reader.iter_entries(0, size), size, reader.public_keys(), keys)
        except StoreError as error:
            raise _UnusableError(clip(str(error), 300)) from None
