"""Backups of a store while it serves, and restores into a new, empty database.

SQLite: SQLite's online backup API (:meth:`sqlite3.Connection.backup`) copies the database in one
step, a consistent snapshot read beside the live writer (WAL lets it), into a new file created
0600. PostgreSQL: ``pg_dump --format=custom``, which reads one snapshot and takes only ACCESS
SHARE locks, so writers carry on; ``pg_restore --single-transaction`` into an empty database
recreates the tables, loads the rows, and only then creates the append-only triggers (they are
in the dump's post-data section), so the triggers are back and the load is not refused by them.
The password of a URL goes to the tools in ``PGPASSWORD``, never on their command line.

A backup file holds everything the database does, unrevealed server seeds included: it is
created 0600, and an existing file is never overwritten.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from gnau_service.store.errors import StoreError
from gnau_service.store.schema import first_line
from gnau_service.store.urls import redacted_url

SQLITE_MAGIC: Final = b"SQLite format 3\x00"
PG_DUMP_MAGIC: Final = b"PGDMP"


class BackupError(StoreError):
    """A backup or restore that cannot be done; the message says why, on one line."""


class BackupFormat(StrEnum):
    SQLITE = "SQLite database file"
    PG_DUMP = "pg_dump custom-format archive"


def backup_format(path: Path) -> BackupFormat:
    """What kind of backup ``path`` is, from its first bytes."""
    try:
        with path.open("rb") as file:
            start = file.read(len(SQLITE_MAGIC))
    except OSError as error:
        raise BackupError(f"cannot read the backup {path}: {error.strerror}") from error
    if start.startswith(SQLITE_MAGIC):
        return BackupFormat.SQLITE
    if start.startswith(PG_DUMP_MAGIC):
        return BackupFormat.PG_DUMP
    raise BackupError(f"{path} is neither a SQLite database nor a pg_dump custom-format archive")


@contextlib.contextmanager
def private_new_file(path: Path) -> Iterator[int]:
    """A new file at ``path``, 0600, as a descriptor; never an existing one. Removed again if
    the ``with`` block fails, so a failed backup leaves no half-written file behind."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise BackupError(f"{path} exists: a backup never overwrites a file") from None
    except OSError as error:
        raise BackupError(f"cannot create {path}: {error.strerror}") from error
    try:
        yield descriptor
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    finally:
        os.close(descriptor)


# -- SQLite -------------------------------------------------------------------------------------


def backup_sqlite(source: Path, out: Path) -> None:
    """Copy the SQLite database at ``source`` to the new file ``out`` (0600), while it serves."""
    if not source.is_file():
        raise BackupError(f"there is no database at {source}")
    with private_new_file(out):
        # Read-write, though it only reads: a read-only connection to a WAL database cannot
        # make the shared-memory file a stopped server removed.
        _sqlite_copy(source, out, read_only=False)


def restore_sqlite(backup: Path, target: Path) -> None:
    """Copy the SQLite backup ``backup`` into ``target``, which must not hold a database yet."""
    if target.exists() and target.stat().st_size > 0:
        raise BackupError(
            f"refusing to overwrite {target}: it is not empty; restore into a new path"
        )
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if target.exists():
        os.chmod(target, 0o600)
        _sqlite_copy(backup, target, read_only=True)
        return
    with private_new_file(target):
        _sqlite_copy(backup, target, read_only=True)


def _sqlite_copy(source: Path, target: Path, *, read_only: bool) -> None:
    """The whole of ``source`` into ``target`` in one step of the backup API, then SQLite's own
    check of the copy. One step reads one snapshot: a live writer neither waits nor restarts it.
    The copy is left in rollback-journal mode, one self-contained file (the service turns WAL
    back on when it opens it)."""
    uri = f"file:{source}?mode=ro" if read_only else f"file:{source}"
    try:
        with (
            contextlib.closing(sqlite3.connect(uri, uri=True, timeout=30.0)) as reader,
            contextlib.closing(sqlite3.connect(target, timeout=30.0)) as writer,
        ):
            reader.backup(writer)
            writer.execute("PRAGMA journal_mode = DELETE")
            verdict = writer.execute("PRAGMA quick_check").fetchone()[0]
    except sqlite3.Error as error:
        raise BackupError(f"cannot copy {source} to {target}: {first_line(error)}") from error
    if verdict != "ok":
        raise BackupError(f"the copy of {source} in {target} is damaged: {verdict}")


@dataclass(frozen=True)
class CopiedLog:
    """What a SQLite backup holds of the log: its size and latest checkpoint."""

    size: int
    checkpoint: str | None


def copied_log(path: Path) -> CopiedLog:
    """The log in the SQLite backup at ``path``, read without changing the file (a store's
    connection would turn WAL on in it)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as reader:
            size = reader.execute("SELECT size FROM log_head").fetchone()[0]
            note = reader.execute(
                "SELECT note FROM log_checkpoints ORDER BY size DESC LIMIT 1"
            ).fetchone()
    except sqlite3.Error as error:
        raise BackupError(f"cannot read the log in {path}: {first_line(error)}") from error
    return CopiedLog(int(size), None if note is None else str(note[0]))


# -- PostgreSQL ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PgCommand:
    """A PostgreSQL client command: its arguments (no password) and its environment."""

    argv: tuple[str, ...]
    env: dict[str, str]

    def run(self, what: str, **kwargs: object) -> None:
        try:
            # The program is pg_dump or pg_restore, found on PATH; no shell is involved.
            finished = subprocess.run(  # type: ignore[call-overload]  # noqa: S603
                self.argv, env=self.env, stderr=subprocess.PIPE, check=False, **kwargs
            )
        except OSError as error:
            raise BackupError(f"cannot run {self.argv[0]}: {error.strerror}") from error
        if finished.returncode != 0:
            message = finished.stderr.decode("utf-8", "replace").strip().splitlines()
            reason = message[0] if message else f"exit status {finished.returncode}"
            raise BackupError(f"{what} failed: {reason}")


def pg_command(program: str, url: str, *arguments: str) -> PgCommand:
    """``program`` (pg_dump or pg_restore, from PATH) run against ``url``: the password, if the
    URL holds one, goes in the environment, where other users' ``ps`` does not show it."""
    path = shutil.which(program)
    if path is None:
        raise BackupError(f"{program} is not on PATH: install the PostgreSQL client tools")
    try:
        parameters = conninfo_to_dict(url)
    except psycopg.ProgrammingError as error:
        raise BackupError(f"{redacted_url(url)}: {first_line(error)}") from error
    env = dict(os.environ)
    password = parameters.pop("password", None)
    if password is not None:
        env["PGPASSWORD"] = str(password)
    conninfo = make_conninfo("", **parameters)
    return PgCommand((path, *arguments, f"--dbname={conninfo}"), env)


def backup_postgres(url: str, out: Path) -> None:
    """``pg_dump --format=custom`` of the database at ``url`` into the new file ``out`` (0600)."""
    command = pg_command("pg_dump", url, "--format=custom", "--no-owner", "--no-privileges")
    with private_new_file(out) as descriptor:
        command.run(f"pg_dump of {redacted_url(url)}", stdout=descriptor)


def restore_postgres(backup: Path, url: str) -> None:
    """``pg_restore`` the archive ``backup`` into the empty database at ``url``, all or nothing."""
    tables = user_tables(url)
    if tables:
        raise BackupError(
            f"refusing to restore into {redacted_url(url)}: it already holds {len(tables)}"
            f" table(s) ({', '.join(tables[:3])}); restore into a new, empty database"
        )
    command = pg_command(
        "pg_restore",
        url,
        "--exit-on-error",
        "--single-transaction",
        "--no-owner",
        "--no-privileges",
        str(backup),
    )
    command.run(f"pg_restore into {redacted_url(url)}", stdout=subprocess.DEVNULL)


def user_tables(url: str) -> list[str]:
    """The tables of the database at ``url`` outside PostgreSQL's own schemas."""
    try:
        with psycopg.connect(url, autocommit=True) as connection:
            rows = connection.execute(
                "SELECT schemaname || '.' || tablename FROM pg_tables"
                " WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1"
            ).fetchall()
    except psycopg.Error as error:
        raise BackupError(f"{redacted_url(url)}: cannot connect: {first_line(error)}") from error
    return [str(row[0]) for row in rows]
