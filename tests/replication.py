"""PostgreSQL clusters of a test's own, in temporary directories: a primary and a streaming,
synchronous standby for failover drills (tests/failover_drill.py), or one cluster not yet
started (a dealer started before its database).

Both clusters are made with the Debian packages' binaries (``initdb``, ``pg_basebackup``,
``pg_ctl`` in :data:`BIN`), listen on 127.0.0.1 on free ports and on a unix socket in their own
directory, and trust every local connection (replication too). PostgreSQL refuses to run as
root: when this process is root the binaries run as the ``postgres`` user, which owns the
directories (mode 0700). Without the binaries the drill is skipped with the reason; in CI
(``CI`` set) that fails the run instead, as tests/postgres.py does for the shared server.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import psycopg
import pytest

from tests.serving import free_port

BIN: Final = Path(os.environ.get("GNAU_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
SERVER_USER: Final = "postgres"  # who runs the server binaries when this process is root
STANDBY_NAME: Final = "standby"  # its application_name, named in synchronous_standby_names
DATABASE: Final = "gnau"
READY_SECONDS: Final = 60.0


def missing_reason() -> str | None:
    """Why a replicated pair cannot be made here, or None if it can."""
    for tool in ("initdb", "pg_ctl", "pg_basebackup", "postgres"):
        if not (BIN / tool).exists():
            return f"the PostgreSQL binaries are not installed: no {BIN / tool}"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return f"running as root, and there is no {SERVER_USER!r} user to run PostgreSQL"
    return None


def require_binaries() -> None:
    reason = missing_reason()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the tests with their own clusters, but {reason}", pytrace=False)
    pytest.skip(reason)


def _run(*args: str | Path) -> None:
    """A PostgreSQL tool, as the server user when this process is root; its output on failure."""
    # runuser, not subprocess's user=: that forks (and runs gRPC's fork handlers, which crash
    # the child while the drill's channels are busy) where a plain exec can use vfork.
    as_user = ["runuser", "-u", SERVER_USER, "--"] if os.geteuid() == 0 else []
    # A file, not a pipe: the server that ``pg_ctl start`` leaves running inherits it.
    with tempfile.TemporaryFile() as output:
        done = subprocess.run(
            [*as_user, *(str(arg) for arg in args)],
            stdout=output,
            stderr=subprocess.STDOUT,
            check=False,
            stdin=subprocess.DEVNULL,
            cwd="/",
        )
        if done.returncode != 0:
            output.seek(0)
            text = output.read().decode(errors="replace")
            name = Path(str(args[0])).name
            raise RuntimeError(f"{name} {args[1]} exited {done.returncode}:\n{text}")


@dataclass(frozen=True)
class Cluster:
    """One PostgreSQL cluster: its directory, and the port it listens on at 127.0.0.1."""

    data_dir: Path
    port: int

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, database: str = DATABASE) -> str:
        return f"postgresql://postgres@{self.host}/{database}"

    def configure(self, **settings: str) -> None:
        lines = "".join(f"{name} = '{value}'\n" for name, value in settings.items())
        with (self.data_dir / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write(lines)

    def start(self) -> None:
        log = self.data_dir.parent / f"{self.data_dir.name}.log"
        _run(BIN / "pg_ctl", "start", "--wait", "-t", "60", "-D", self.data_dir, "-l", log)

    def promote(self) -> None:
        _run(BIN / "pg_ctl", "promote", "--wait", "-t", "60", "-D", self.data_dir)

    def stop(self) -> None:
        if (self.data_dir / "postmaster.pid").exists():
            _run(BIN / "pg_ctl", "stop", "-m", "immediate", "-D", self.data_dir)

    def kill(self) -> None:
        """SIGKILL to the postmaster and every process it started: the machine is gone."""
        postmaster = int((self.data_dir / "postmaster.pid").read_text().split()[0])
        for pid in [postmaster, *_children(postmaster)]:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def log(self) -> str:
        path = self.data_dir.parent / f"{self.data_dir.name}.log"
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def _children(parent: int) -> list[int]:
    found = []
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = status.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[1]) == parent:
            found.append(int(status.parent.name))
    return found


@dataclass(frozen=True)
class Pair:
    primary: Cluster
    standby: Cluster

    @property
    def url(self) -> str:
        """The multi-host URL every replica uses: libpq tries the hosts in turn and keeps the
        first that accepts writes, so after a promotion it finds the new primary."""
        hosts = f"{self.primary.host},{self.standby.host}"
        return f"postgresql://postgres@{hosts}/{DATABASE}?target_session_attrs=read-write"

    def wait_until_synchronous(self) -> None:
        """Until the primary reports the standby streaming in ``sync`` state."""
        deadline = time.monotonic() + READY_SECONDS
        with psycopg.connect(self.primary.url("postgres"), autocommit=True) as connection:
            while True:
                row = connection.execute(
                    "SELECT sync_state FROM pg_stat_replication WHERE application_name = %s",
                    (STANDBY_NAME,),
                ).fetchone()
                if row is not None and row[0] == "sync":
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the standby did not become synchronous: {row}")
                time.sleep(0.1)


def _directory(prefix: str) -> Path:
    """A temporary directory (mode 0700) that the server user owns."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    if os.geteuid() == 0:
        shutil.chown(root, user=SERVER_USER, group=SERVER_USER)
    return root


def _initdb(cluster: Cluster) -> None:
    """A new cluster, listening on 127.0.0.1 at its port and on a socket beside its directory."""
    _run(BIN / "initdb", "-D", cluster.data_dir, "-U", "postgres", "--auth=trust", "-E", "UTF8")
    cluster.configure(
        listen_addresses="127.0.0.1",
        port=str(cluster.port),
        unix_socket_directories=str(cluster.data_dir.parent),
    )


def _remove(root: Path, *clusters: Cluster) -> None:
    for cluster in clusters:
        try:
            cluster.stop()
        except RuntimeError:
            cluster.kill()  # a killed primary's pid file remains; make sure it is all gone
    shutil.rmtree(root, ignore_errors=True)


@contextmanager
def unstarted_cluster() -> Iterator[Cluster]:
    """A cluster of its own, made but not started (a client may start before its database, and
    :meth:`Cluster.start` starts it); stopped and removed on exit."""
    require_binaries()
    root = _directory("gnau-pg-")
    cluster = Cluster(root / "data", free_port())
    try:
        _initdb(cluster)
        yield cluster
    finally:
        _remove(root, cluster)


@contextmanager
def replicated_pair() -> Iterator[Pair]:
    """A primary with a ``gnau`` database and a synchronous standby streaming from it; both
    stopped and removed on exit."""
    require_binaries()
    root = _directory("gnau-failover-")
    primary = Cluster(root / "primary", free_port())
    standby = Cluster(root / "standby", free_port())
    try:
        _initdb(primary)
        primary.configure(
            wal_level="replica",
            max_wal_senders="4",
            # A commit returns once the standby has flushed its WAL: an acknowledged write is on
            # both machines, so the standby can take over without losing it.
            synchronous_standby_names=STANDBY_NAME,
            synchronous_commit="on",
            fsync="on",
        )
        with (primary.data_dir / "pg_hba.conf").open("a", encoding="utf-8") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")
        primary.start()
        with psycopg.connect(primary.url("postgres"), autocommit=True) as admin:
            # No standby yet: a synchronous commit would wait for one for ever.
            admin.execute("SET synchronous_commit = local")
            admin.execute(f"CREATE DATABASE {DATABASE}")
        _run(
            BIN / "pg_basebackup", "-D", standby.data_dir, "-h", "127.0.0.1",
            "-p", str(primary.port), "-U", "postgres", "--write-recovery-conf",
            "--checkpoint=fast", "--wal-method=stream",
        )  # fmt: skip
        standby.configure(
            port=str(standby.port),
            # The walreceiver's application_name, which synchronous_standby_names names.
            cluster_name=STANDBY_NAME,
            # Once promoted it has no standby of its own: waiting for one would stop every write.
            synchronous_standby_names="",
            # A promotion that arrives as the walreceiver dies waits out this retry interval
            # (5 s by default), so the drill's recovery time would swing by the default.
            wal_retrieve_retry_interval="500ms",
        )
        standby.start()
        pair = Pair(primary, standby)
        pair.wait_until_synchronous()
        yield pair
    finally:
        _remove(root, standby, primary)
