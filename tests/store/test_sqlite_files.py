"""The SQLite database holds unrevealed server seeds: it, its -wal and its -shm are the owner's
alone (0600) whatever the process's umask, and a file left open to others is tightened."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from gnau_client import GnauClient

from gnau_service.audit.signing import LogSigner
from gnau_service.store import open_store
from tests.serving import served
from tests.store.test_store import append_many

SUFFIXES = ("", "-wal", "-shm")
PRIVATE = {suffix: "0o600" for suffix in SUFFIXES}


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    """The common default umask, under which SQLite alone would make its files 0644."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def modes(database: Path) -> dict[str, str]:
    """The permission bits of the database file and of its -wal and -shm files, in octal."""
    return {
        suffix: oct(stat.S_IMODE(os.stat(f"{database}{suffix}").st_mode)) for suffix in SUFFIXES
    }


@pytest.mark.usefixtures("permissive_umask")
def test_a_new_database_and_its_wal_and_shm_are_private(tmp_path: Path, signer: LogSigner) -> None:
    database = tmp_path / "outside-the-data-dir" / "gnau.db"
    with open_store(f"sqlite:///{database}", signer) as store:
        append_many(store, 20)
        assert store.size() == 20  # a reader's connection too
        assert modes(database) == PRIVATE
    assert stat.S_IMODE(database.stat().st_mode) == 0o600
    assert stat.S_IMODE(database.parent.stat().st_mode) == 0o700


@pytest.mark.system
@pytest.mark.usefixtures("permissive_umask")
def test_a_served_database_outside_the_data_dir_is_private(tmp_path: Path) -> None:
    database = tmp_path / "shared" / "gnau.db"
    database.parent.mkdir(mode=0o755)
    with served(tmp_path / "data", "--database", f"sqlite:///{database}") as service:
        with GnauClient(service.target, token=service.token) as client:
            client.shuffle("table-1")  # an unrevealed seed is now in the file
        assert modes(database) == PRIVATE


@pytest.mark.usefixtures("permissive_umask")
def test_database_files_open_to_others_are_tightened_with_one_warning(
    tmp_path: Path, signer: LogSigner, caplog: pytest.LogCaptureFixture
) -> None:
    database = tmp_path / "gnau.db"
    url = f"sqlite:///{database}"
    with open_store(url, signer) as first:  # open, so its -wal and -shm stay
        append_many(first, 3)
        for suffix in SUFFIXES:
            os.chmod(f"{database}{suffix}", 0o644)  # as SQLite made them before this fix

        with caplog.at_level(logging.WARNING):
            with open_store(url, signer) as second:
                assert append_many(second, 3) == [3, 4, 5]
                assert modes(database) == PRIVATE
            warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
            assert len(warnings) == 1
            assert all(f"{database}{suffix}" in warnings[0] for suffix in SUFFIXES)

            caplog.clear()
            with open_store(url, signer):
                pass
            assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
