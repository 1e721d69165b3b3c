"""SQLite: the embedded default. One file, WAL, ``synchronous=FULL``, append-only log tables.

Its coordination is in-step integration (:mod:`~gnau_service.store.in_step`): one writer at a
time, each step transaction integrating its own events before it commits. Several processes may
share the file (``gnau serve --workers N``): each step transaction takes the write lock with
``BEGIN IMMEDIATE`` and reads the log head after taking it, so processes append in turn, never
beside each other; a process hears another's appends through ``PRAGMA data_version``
(:meth:`SqliteBackend.watch_sizes`).

The file holds unrevealed server seeds, so it is private to its owner: created 0600 by this
backend before SQLite opens it (SQLite gives the ``-wal`` and ``-shm`` files the database file's
mode), and an existing one that group or others can read is tightened, with a warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import sqlite3
import stat
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from gnau_service.store.backend import Backend
from gnau_service.store.connections import Connection, Row
from gnau_service.store.coordination import Coordination, WritingStore
from gnau_service.store.errors import ScrubIncomplete, StoreError
from gnau_service.store.in_step import InStepIntegration
from gnau_service.store.migrations import MIGRATIONS, Dialect, Migration
from gnau_service.store.schema import first_line

log = logging.getLogger(__name__)

#: The files SQLite keeps for a database in WAL mode, after the database file's own name.
COMPANION_SUFFIXES: Final = ("-wal", "-shm")
#: The file beside the database whose lock is the writers' turn (:class:`FileTurn`); empty.
TURN_SUFFIX: Final = "-turn"
#: How long a connection waits for a lock: another connection's transaction, or its switch of a
#: new file to WAL.
BUSY_SECONDS: Final = 30.0
#: The pause between tries of the WAL switch while another connection holds the file.
WAL_RETRY_SECONDS: Final = 0.01
#: How often a process asks whether another has written (``PRAGMA data_version``): the most a
#: watcher on one worker waits to hear of an entry another worker appended.
DATA_VERSION_SECONDS: Final = 0.05
#: How long a forget waits at most for the ``-wal`` file to be emptied of the erased rows' old
#: copies (:meth:`SqliteBackend.scrub_deleted_rows`) before it is answered
#: ``STORAGE_UNAVAILABLE``: well within the clients' default deadline, so that their automatic
#: retry, with the same request id, can try again.
SCRUB_SECONDS: Final = 2.0
#: How long one try of the scrub waits, holding the writers' turn, for readers to finish.
SCRUB_TRY_SECONDS: Final = 0.25


def split_statements(script: str) -> list[str]:
    """The statements of a script, each ended where SQLite says it is complete (a trigger's body
    holds semicolons of its own). The schema runs statement by statement because
    ``executescript`` would first commit the transaction that holds the write lock."""
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    if pending.strip():
        raise ValueError(f"an incomplete statement ends the script: {pending.strip()!r}")
    return statements


#: SQLite's primary result codes for a file another connection holds: BUSY and LOCKED.
_BUSY_CODES: Final = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


def is_busy(error: sqlite3.Error) -> bool:
    """Whether ``error`` says another connection holds the file (extended codes included)."""
    return (
        isinstance(error, sqlite3.OperationalError) and error.sqlite_errorcode & 0xFF in _BUSY_CODES
    )


def use_wal(connection: sqlite3.Connection) -> None:
    """Put the file in WAL mode (it stays so), waiting while another connection holds it.

    Switching a new file needs it to itself, and SQLite answers "database is locked" at once,
    without its busy handler, while another connection reads or switches it: several processes
    opening one new database together would fail at random. So it is tried again until
    :data:`BUSY_SECONDS` have passed, as any other statement would wait.
    """
    deadline = time.monotonic() + BUSY_SECONDS
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if not is_busy(error) or time.monotonic() >= deadline:
                raise
        time.sleep(WAL_RETRY_SECONDS)


class SqliteBackend(Backend):
    """A SQLite database file. Readers get one connection per thread (WAL lets them run beside
    the writer); the one step writer starts each batch with ``BEGIN IMMEDIATE`` and integrates
    its events before it commits, so even a second process on the same file appends after, never
    beside, this one."""

    begin_sql = "BEGIN IMMEDIATE"
    driver_error = sqlite3.Error

    def __init__(self, path: str | Path, *, migrations: Sequence[Migration] = MIGRATIONS) -> None:
        self.path = Path(path)
        #: The migrations this gnau knows (a test may pretend to be an older gnau).
        self.migrations = migrations
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            make_private(self.path)
        except OSError as error:
            raise StoreError(f"{self}: cannot make a private database file: {error}") from error
        self._local = threading.local()

    def __str__(self) -> str:
        return str(self.path)

    def connect(self) -> sqlite3.Connection:
        connection = None
        try:
            connection = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_SECONDS
            )
            use_wal(connection)
            connection.execute("PRAGMA synchronous = FULL")
            connection.execute("PRAGMA foreign_keys = ON")
            # A deleted row's bytes are overwritten, not left in a free page: forgetting a
            # player (store/players.py) leaves no trace of their key in the file or a backup.
            # The older versions of its pages in the -wal file go too (scrub_deleted_rows).
            connection.execute("PRAGMA secure_delete = ON")
        except sqlite3.Error as error:
            if connection is not None:
                connection.close()
            raise StoreError(f"{self}: cannot open the database: {first_line(error)}") from error
        return connection

    @contextmanager
    def reader(self) -> Iterator[sqlite3.Connection]:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = self.connect()
        yield connection

    async def watch_sizes(self) -> AsyncIterator[int]:
        """The log's size each time it may have grown: SQLite says, on a connection that never
        writes, that another connection (of any process) has committed since it last asked
        (``PRAGMA data_version``, one read of shared memory), every
        :data:`DATA_VERSION_SECONDS`; then the head's size is read."""
        # One thread of its own: the connection is closed there, after any read still under way
        # when the watch is cancelled (closing it beside a read would crash the process).
        thread = ThreadPoolExecutor(1, thread_name_prefix="gnau-data-version")
        loop = asyncio.get_running_loop()
        connection: sqlite3.Connection | None = None
        try:
            connection = await loop.run_in_executor(thread, self.connect)
            seen = None
            while True:
                seen, size = await loop.run_in_executor(thread, _size_if_changed, connection, seen)
                if size is not None:
                    yield size
                await asyncio.sleep(DATA_VERSION_SECONDS)
        finally:
            if connection is not None:
                thread.submit(self.close_quietly, connection)
            thread.shutdown(wait=False)

    def coordinate(self, store: WritingStore) -> Coordination:
        return InStepIntegration(self, store, self.begin_at_once, FileTurn(self.turn_path))

    def scrub_deleted_rows(self, give_up_at: float | None = None) -> None:
        """Copy every change into the database file and truncate the ``-wal`` file to nothing
        (``PRAGMA wal_checkpoint(TRUNCATE)``), trying for up to :data:`SCRUB_SECONDS`, or until
        ``give_up_at`` if that comes first; raises :class:`ScrubIncomplete` if it could not.

        ``secure_delete`` overwrites a deleted row with zeros, but only in the newest version of
        its page. Every commit appends the pages it changed to the ``-wal`` file, so the file
        still holds the older versions, erased rows included, until it is emptied; a checkpoint
        that does not truncate leaves them too, as the next writers overwrite the file from its
        start and never reach what lies past their last page.

        Truncating needs every connection to the file, in every process sharing it
        (``--workers``), to be done with those versions: no writer, and no reader of an older
        snapshot. So each try holds the writers' turn (:class:`FileTurn`, on a descriptor of its
        own, so this process's step writer waits for it as well), under which no step
        transaction runs, and lets SQLite's busy handler wait up to :data:`SCRUB_TRY_SECONDS`
        for the readers. Between tries the turn goes back, so that rounds go on beside a long
        read (a backup of a large file, an export); one that lasts longer fails the scrub, and a
        retry of the forget scrubs again."""
        deadline = time.monotonic() + SCRUB_SECONDS
        if give_up_at is not None:
            deadline = min(deadline, give_up_at)
        turn = FileTurn(self.turn_path)
        connection = None
        try:
            connection = self.connect()
            connection.execute(f"PRAGMA busy_timeout = {round(SCRUB_TRY_SECONDS * 1000):d}")
            while True:
                turn.take()
                try:
                    blocked = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                finally:
                    turn.release()
                if not blocked:
                    return
                if time.monotonic() >= deadline:
                    raise ScrubIncomplete(
                        f"{self}: a reader kept the -wal file, which still holds old copies of"
                        " erased rows"
                    )
                time.sleep(SCRUB_TRY_SECONDS)
        except ScrubIncomplete:
            raise
        except (sqlite3.Error, StoreError) as error:
            raise ScrubIncomplete(f"{self}: cannot empty the -wal file: {error}") from error
        finally:
            if connection is not None:
                self.close_quietly(connection)
            turn.close()

    @property
    def turn_path(self) -> Path:
        """The file whose ``flock`` is the writers' turn (see :class:`FileTurn`)."""
        return self.path.with_name(self.path.name + TURN_SUFFIX)

    def schema_version(self, connection: Connection) -> int:
        return user_version(sqlite_connection(connection))

    def has_table(self, connection: Connection, table: str) -> bool:
        query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
        return connection.execute(query, (table,)).fetchone() is not None

    @contextmanager
    def schema_change(self, connection: Connection) -> Iterator[None]:
        # BEGIN IMMEDIATE takes the write lock, so starting processes take turns, and a live
        # writer's batch is waited for (the busy timeout).
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield
            connection.execute("COMMIT")
        except BaseException:
            # SQLite ends the transaction itself after some errors: the first error is the news.
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
            raise

    def apply_migration(self, connection: Connection, migration: Migration) -> None:
        for statement in split_statements(migration.script(Dialect.SQLITE)):
            connection.execute(statement)
        connection.execute(f"PRAGMA user_version = {migration.version:d}")

    def insert_rows(
        self, connection: Connection, table: str, columns: Mapping[str, str], rows: Sequence[Row]
    ) -> None:
        """One prepared statement, run for every row (in-process, so no round trips to save)."""
        names = ", ".join(columns)
        marks = ", ".join("?" for _ in columns)
        sqlite_connection(connection).executemany(
            f"INSERT INTO {table} ({names}) VALUES ({marks})", rows
        )

    def index_pending(self, connection: Connection, indices: Mapping[int, int]) -> None:
        sqlite_connection(connection).executemany(
            "UPDATE log_pending SET idx = ?, payload = NULL WHERE id = ?",
            [(index, pending_id) for pending_id, index in indices.items()],
        )

    def begin_at_once(self, connection: Connection) -> bool:
        """Begin a step transaction if that needs no waiting (the write lock is free now);
        whether it began."""
        # Without the busy handler: BEGIN IMMEDIATE takes the write lock if it is free (then it
        # does no I/O worth a thread) and says SQLITE_BUSY at once if another connection holds
        # it (then the caller waits for it on a thread, with the busy handler back on).
        connection.execute("PRAGMA busy_timeout = 0")
        try:
            connection.execute(self.begin_sql)
        except sqlite3.OperationalError as error:
            if is_busy(error):
                return False
            raise
        finally:
            connection.execute(f"PRAGMA busy_timeout = {round(BUSY_SECONDS * 1000):d}")
        return True

    def is_unavailable(self, error: BaseException) -> bool:
        return (
            isinstance(error, sqlite3.OperationalError)
            and error.sqlite_errorcode & 0xFF in _UNAVAILABLE_CODES
        )


#: SQLite's primary result codes that mean the file cannot be used now: BUSY, LOCKED, NOMEM,
#: READONLY, IOERR, FULL, CANTOPEN, PROTOCOL (https://sqlite.org/rescode.html). Others (a
#: syntax error, a constraint) are a refusal of the statement itself.
_UNAVAILABLE_CODES: Final = frozenset({5, 6, 7, 8, 10, 13, 14, 15})


def _size_if_changed(connection: sqlite3.Connection, seen: int | None) -> tuple[int, int | None]:
    """The data version now, and the log's size if the version is not ``seen``."""
    version = int(connection.execute("PRAGMA data_version").fetchone()[0])
    if version == seen:
        return version, None
    row = connection.execute("SELECT size FROM log_head WHERE id = 1").fetchone()
    return version, None if row is None else int(row[0])


class FileTurn:
    """The writers' turn among processes (:class:`~gnau_service.store.in_step.WriterTurn`): an
    exclusive ``flock`` on an empty file beside the database, opened on first use (0600). The
    kernel releases it when its holder dies, and wakes a waiter as soon as it is released. A
    file that cannot be opened (a read-only directory) means no turn: SQLite's lock still
    serialises the writers, only less promptly."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._descriptor: int | None = None
        self._opened = False

    def _file(self) -> int | None:
        if not self._opened:
            self._opened = True
            try:
                self._descriptor = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as error:
                log.warning("no writers' turn file (%s): writers take turns by polling", error)
        return self._descriptor

    def take_at_once(self) -> bool:
        descriptor = self._file()
        if descriptor is None:
            return True
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def take(self) -> None:
        descriptor = self._file()
        if descriptor is not None:
            fcntl.flock(descriptor, fcntl.LOCK_EX)

    def release(self) -> None:
        if self._descriptor is not None:
            fcntl.flock(self._descriptor, fcntl.LOCK_UN)

    def close(self) -> None:
        descriptor, self._descriptor = self._descriptor, None
        if descriptor is not None:
            os.close(descriptor)  # which lets the lock go


def sqlite_connection(connection: Connection) -> sqlite3.Connection:
    """``connection`` as SQLite's own class, for what only it has: a backend is handed only the
    connections it opened itself."""
    assert isinstance(connection, sqlite3.Connection)
    return connection


def user_version(connection: sqlite3.Connection) -> int:
    """The schema version SQLite keeps in the file's header: 0 in a new or pre-version file."""
    return int(connection.execute("PRAGMA user_version").fetchone()[0])


def make_private(path: Path) -> None:
    """Create the database file 0600 if it is missing, before SQLite opens it (SQLite would
    create it with the process's umask, and its ``-wal`` and ``-shm`` files copy that mode).
    An existing file, or companion file, that group or others can use loses those bits."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        _tighten_existing(path)
    else:
        os.close(descriptor)


def _tighten_existing(path: Path) -> None:
    companions = [path.with_name(path.name + suffix) for suffix in COMPANION_SUFFIXES]
    loosened = [file for file in (path, *companions) if _tighten(file)]
    if loosened:
        log.warning(
            "database files were open to group or others; now owner-only (0600): %s",
            ", ".join(str(file) for file in loosened),
        )


def _tighten(file: Path) -> bool:
    """Take group and others' bits off ``file``; whether it had any. A missing file has none,
    and anything but a regular file (a directory given by mistake) is SQLite's to refuse."""
    try:
        status = file.stat()
    except FileNotFoundError:
        return False
    mode = stat.S_IMODE(status.st_mode)
    if not stat.S_ISREG(status.st_mode) or not mode & 0o077:
        return False
    file.chmod(mode & 0o700)
    return True
