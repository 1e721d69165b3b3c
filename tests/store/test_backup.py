"""The backup mechanics: private new files, and PostgreSQL's tools never given a password on
their command line."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest

from gnau_service.audit.signing import LogSigner
from gnau_service.store import open_store
from gnau_service.store.backup import (
    BackupError,
    BackupFormat,
    backup_format,
    backup_sqlite,
    copied_log,
    pg_command,
    private_new_file,
)
from tests.store.test_store import append_many


def test_postgresql_tools_get_the_password_in_their_environment_only() -> None:
    command = pg_command(
        "pg_dump", "postgresql://gnau:s3cret%40x@db.internal:5433/gnau?sslmode=require", "-Fc"
    )
    assert command.env["PGPASSWORD"] == "s3cret@x"
    assert not any("s3cret" in argument for argument in command.argv)
    assert command.argv[1] == "-Fc"
    dbname = command.argv[-1]
    for part in ("host=db.internal", "port=5433", "dbname=gnau", "user=gnau", "sslmode=require"):
        assert part in dbname


def test_a_sqlite_backup_is_one_private_self_contained_file(
    tmp_path: Path, signer: LogSigner
) -> None:
    with open_store(f"sqlite:///{tmp_path / 'gnau.db'}", signer) as store:
        append_many(store, 7)
        out = tmp_path / "backup.db"
        backup_sqlite(tmp_path / "gnau.db", out)  # while the store is open
        latest = store.checkpoint()
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert backup_format(out) is BackupFormat.SQLITE
    assert copied_log(out).size == 7 and copied_log(out).checkpoint == latest
    with sqlite3.connect(out) as connection:  # no -wal file needed: rollback-journal mode
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    assert not Path(f"{out}-wal").exists()


def test_a_failed_backup_leaves_no_file(tmp_path: Path) -> None:
    out = tmp_path / "backup.db"
    with pytest.raises(RuntimeError), private_new_file(out):
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
        raise RuntimeError("the copy failed")
    assert not out.exists()
    not_a_database = tmp_path / "notes.txt"
    not_a_database.write_text("not a database, " * 100)
    with pytest.raises(BackupError, match="not a database"):
        backup_sqlite(not_a_database, out)
    assert not out.exists()
