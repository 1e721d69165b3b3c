"""``gnau db``: the database's schema version and migrations, backups and restores.

- ``gnau db status``: the schema version, the migrations pending and applied, the log's size;
- ``gnau db migrate``: apply the pending migrations (back up first);
- ``gnau db backup OUT``: a backup while the service runs (SQLite's online backup API;
  PostgreSQL's ``pg_dump``), written to a new file, mode 0600;
- ``gnau db restore BACKUP --database TARGET [--expect-checkpoint FILE] [--key VKEY]``: restore
  into a new, empty database, then verify the whole log (under the pinned key, and extending the
  newest checkpoint ever published: otherwise it is a rollback).

Each finds the database as ``gnau serve`` does (``--database``, ``GNAU_DATABASE``, ``--config``,
the data directory). Exit statuses: 0 done (``status``: the schema is this gnau's); 1 ``status``
found the schema not this gnau's, or the restored log does not verify; 2 the database, a file or
an argument cannot be used. ``docs/operations.md`` has the runbooks.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from gnau_service.audit.bundle import CannotVerifyError, write_bundle
from gnau_service.audit.bundle_report import BundleReport
from gnau_service.audit.bundle_verification import verify_bundle
from gnau_service.audit.note import Verifier
from gnau_service.cli.remote import UnusableKeyError, read_vkey
from gnau_service.cli.settings_flags import add_settings_flags, settings_from_args
from gnau_service.server.process.config import ConfigError
from gnau_service.store import (
    DatabaseUrlError,
    LogReader,
    StoreError,
    open_backend,
    redacted_url,
    sqlite_path,
)
from gnau_service.store.backend import Backend
from gnau_service.store.backup import (
    BackupFormat,
    backup_format,
    backup_postgres,
    backup_sqlite,
    copied_log,
    restore_postgres,
    restore_sqlite,
)
from gnau_service.store.connections import Connection
from gnau_service.store.schema import (
    SchemaState,
    create_schema,
    migrations_to_run,
    read_history,
    schema_state,
)

DATABASE_SETTINGS = ("data_dir", "database")


class CommandError(Exception):
    """A one-line refusal, and the exit status that goes with it."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


def add_db_arguments(db: argparse.ArgumentParser) -> None:
    db.description = (
        "The service's database, found as `gnau serve` finds it (see "
        "docs/operations.md: Schema migrations, Backup and restore)."
    )
    commands = db.add_subparsers(dest="db_command", required=True, metavar="COMMAND")

    status = commands.add_parser("status", help="the schema version, pending migrations, log size")
    add_settings_flags(status, DATABASE_SETTINGS)
    status.set_defaults(run=run_status)

    migrate = commands.add_parser("migrate", help="apply the pending schema migrations")
    add_settings_flags(migrate, DATABASE_SETTINGS)
    migrate.set_defaults(run=run_migrate)

    backup = commands.add_parser(
        "backup", help="back the database up to a new file (mode 0600), while it serves"
    )
    backup.add_argument("out", type=Path, metavar="OUT", help="the backup file to create")
    add_settings_flags(backup, DATABASE_SETTINGS)
    backup.set_defaults(run=run_backup)

    restore = commands.add_parser(
        "restore", help="restore a backup into a new, empty database and verify its log"
    )
    restore.add_argument("backup", type=Path, metavar="BACKUP", help="a `gnau db backup` file")
    restore.add_argument(
        "--expect-checkpoint",
        type=Path,
        metavar="FILE",
        help="the newest checkpoint ever published (a signed note): the restored log must "
        "extend it, or it is a rollback",
    )
    restore.add_argument(
        "--key",
        dest="pinned_keys",  # not the service's signing key setting
        action="append",
        default=[],
        metavar="VKEY",
        help="the log's public key to trust (C2SP vkey, or a file holding one); repeatable",
    )
    add_settings_flags(restore, DATABASE_SETTINGS)
    restore.set_defaults(run=run_restore)


def _run(args: argparse.Namespace, command: str, body: Callable[[argparse.Namespace], int]) -> int:
    try:
        status = body(args)
    except CommandError as error:
        print(f"gnau db {command}: {error}", file=sys.stderr)
        return error.status
    except (ConfigError, DatabaseUrlError, StoreError, UnusableKeyError) as error:
        print(f"gnau db {command}: {error}", file=sys.stderr)
        return 2
    return status


def _database_url(args: argparse.Namespace) -> str:
    return settings_from_args(args).database_url


def _sqlite_file(url: str) -> Path | None:
    """The file of a SQLite ``url``; None for PostgreSQL's (any other is refused by name)."""
    path = sqlite_path(url)
    if path is None and not url.startswith(("postgresql://", "postgres://")):
        open_backend(url)  # raises DatabaseUrlError, naming the URLs it takes
    return path


def _existing_backend(url: str) -> Backend:
    """The backend at ``url``, which must exist: a typo must not make a new SQLite file."""
    path = sqlite_path(url)
    if path is not None and not path.is_file():
        raise CommandError(f"there is no database at {redacted_url(url)}")
    return open_backend(url)


@contextlib.contextmanager
def _connection(backend: Backend) -> Iterator[Connection]:
    try:
        connection = backend.connect()
        try:
            yield connection
        finally:
            connection.close()
    finally:
        backend.close()


# -- status and migrate -------------------------------------------------------------------------


def run_status(args: argparse.Namespace) -> int:
    return _run(args, "status", _status)


def _status(args: argparse.Namespace) -> int:
    url = _database_url(args)
    backend = _existing_backend(url)
    with _connection(backend) as connection:
        state = schema_state(backend, connection)
        history = read_history(backend, connection)
        known = backend.migrations
        latest = known[-1].version
        print(f"database: {redacted_url(url)}")
        if state.empty:
            print(f"schema: none yet (an empty database); this gnau's is version {latest}")
        else:
            print(f"schema: version {state.version}; this gnau's is version {latest}")
        for applied in history:
            print(
                f"applied: {applied.version} ({applied.summary}) at {applied.applied_at}"
                f" by gnau {applied.gnau_version}"
            )
        if state.version > latest:
            print("newer than this gnau: upgrade gnau before serving it")
            return 1
        pending = migrations_to_run(state, str(backend), migrate=True, known=known)
        for migration in pending:
            print(f"pending: {migration}")
        if not state.empty:
            reader = LogReader(backend)
            _print_log(reader.size(), reader.checkpoint())
        if pending:
            print("to migrate: back it up (gnau db backup FILE), then run gnau db migrate")
            return 1
        print("up to date")
        return 0


def run_migrate(args: argparse.Namespace) -> int:
    return _run(args, "migrate", _migrate)


def _migrate(args: argparse.Namespace) -> int:
    url = _database_url(args)
    backend = _existing_backend(url)
    with _connection(backend) as connection:
        before = schema_state(backend, connection)
        applied = create_schema(backend, connection, migrate=True)
        after = schema_state(backend, connection)
    if not applied:
        print(f"{redacted_url(url)}: schema version {after.version} is up to date; nothing to do")
        return 0
    start = "an empty database" if before.empty else f"version {before.version}"
    print(f"{redacted_url(url)}: migrated from {start} to version {after.version}")
    for migration in applied:
        print(f"applied: {migration}")
    return 0


# -- backup and restore -------------------------------------------------------------------------


def run_backup(args: argparse.Namespace) -> int:
    return _run(args, "backup", _backup)


def _backup(args: argparse.Namespace) -> int:
    url = _database_url(args)
    out: Path = args.out
    database = _sqlite_file(url)
    if database is not None:
        backup_sqlite(database, out)
        print(f"wrote {out} ({out.stat().st_size:,} bytes, mode 0600), a copy of {url}")
        copied = copied_log(out)
        _print_log(copied.size, copied.checkpoint)
    else:
        backup_postgres(url, out)
        size = out.stat().st_size
        print(f"wrote {out} ({size:,} bytes, mode 0600): pg_dump of {redacted_url(url)}")
        print(f"check it: gnau db restore {out} --database <a new, empty database>")
    return 0


def run_restore(args: argparse.Namespace) -> int:
    return _run(args, "restore", _restore)


def _restore(args: argparse.Namespace) -> int:
    target = _database_url(args)
    backup: Path = args.backup
    expected = _read_expected(args.expect_checkpoint)
    keys = [read_vkey(text) for text in args.pinned_keys]
    kind = backup_format(backup)
    database = _sqlite_file(target)
    if (kind is BackupFormat.SQLITE) != (database is not None):
        raise CommandError(
            f"{backup} is a {kind}, which cannot be restored into {redacted_url(target)}"
        )
    if database is not None:
        restore_sqlite(backup, database)
    else:
        restore_postgres(backup, target)
    print(f"restored {backup} into {redacted_url(target)}")
    with LogReader(open_backend(target)) as reader:
        report = _verify(reader, keys, expected)
        print(report.summary())
        if not report.ok:
            raise CommandError(
                f"the restored log in {redacted_url(target)} does not verify: do not serve it",
                status=1,
            )
        _print_log(reader.size(), reader.checkpoint())
        state = _schema_state(reader.backend)
    if expected is not None:
        print(f"consistent with the expected checkpoint {args.expect_checkpoint}")
    latest = reader.backend.migrations[-1].version
    if state.version < latest:
        print(f"schema version {state.version}: run gnau db migrate before serving it")
    return 0


def _read_expected(path: Path | None) -> bytes | None:
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError as error:
        raise CommandError(
            f"cannot read the expected checkpoint {path}: {error.strerror}"
        ) from error


def _schema_state(backend: Backend) -> SchemaState:
    connection = backend.connect()
    try:
        return schema_state(backend, connection)
    finally:
        connection.close()


def _verify(reader: LogReader, keys: list[Verifier], expected: bytes | None) -> BundleReport:
    """The whole log exported as an audit bundle and verified, as an auditor would: every
    entry, checkpoint and round, under the pinned ``keys``, and consistency with ``expected``."""
    with tempfile.TemporaryDirectory(prefix="gnau-restore-") as scratch:
        bundle = Path(scratch) / "restored.bundle"
        with bundle.open("w", encoding="utf-8") as out:
            write_bundle(reader, out, end=reader.size())
        with bundle.open("rb") as lines:
            try:
                return verify_bundle(lines, pinned_keys=keys, pinned_checkpoint=expected)
            except CannotVerifyError as error:
                raise CommandError(f"cannot verify the restored log: {error}") from error


def _print_log(size: int, checkpoint: str | None) -> None:
    print(f"log: {size:,} entries")
    if checkpoint is not None:
        print("latest checkpoint:")
        print(checkpoint.rstrip("\n"))
