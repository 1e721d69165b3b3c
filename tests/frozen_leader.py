"""The frozen-leader drill: three ``gnau serve`` replicas on one PostgreSQL log under load, the
sequencer stopped (not killed) for longer than its lease, then resumed; what the clients saw is
held against the log.

Each replica has a player (tests/failover_drill.py's: whole rounds, every refused step sent again
with its request id until acknowledged). The leader is found by the lease's holder, and stopped
in one of five ways (:class:`Freeze`):

- ``in-copy``: the leader's process, SIGSTOPped in the middle of its integration's ``COPY
  log_entries``. The drill holds a lock on ``log_entries`` until the leader's COPY waits for it,
  stops the process, then lets the lock go: the backend then waits for the stopped client inside
  the COPY, where no timeout of its session reaches it;
- ``anywhere``: the leader's process, SIGSTOPped at a random instant while its work session is
  inside a transaction: between its statements or inside one, wherever that falls (the outcome
  says where: :attr:`Outcome.caught`);
- ``in-transaction``: the leader's process, SIGSTOPped inside an integration. The drill holds a
  lock on ``log_checkpoints`` until the leader's work session waits for it (so it is inside its
  transaction, holding the head and lease rows), stops the process, then lets the lock go;
- ``between``: the leader's process, SIGSTOPped while its work session is idle;
- ``backend``: the leader's PostgreSQL work backend, SIGSTOPped while idle, the process running:
  its connection is as good as cut, without a reset.

Each freeze lasts ``hold_seconds``; the takeover is the time from the stop to the log's next
entry, whether that came while the leader was stopped or only after it was resumed (then it is
at least the hold: the log stood still for as long as the leader did).

Used by tests/server/test_frozen_leader.py (asserts) and bench/bench_takeover.py (prints).
"""

from __future__ import annotations

import io
import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

import psycopg

from gnau_service.audit.bundle import write_bundle
from gnau_service.audit.bundle_verification import verify_bundle
from gnau_service.audit.entries import decode_entry
from gnau_service.audit.note import Verifier
from gnau_service.store import open_reader
from gnau_service.store.sequencer import APPLICATION_NAME
from tests.failover_drill import STEP_ENTRY, start_players
from tests.serving import Served, served

REPLICAS: Final = 3
#: How long the drill waits for a condition it needs (a liveness bound, not a timing claim).
WAIT_SECONDS: Final = 30.0
#: How often the log's size is read while it stands still (seconds).
POLL_SECONDS: Final = 0.01


class Freeze(StrEnum):
    IN_COPY = "in-copy"
    ANYWHERE = "anywhere"
    IN_TRANSACTION = "in-transaction"
    BETWEEN = "between"
    BACKEND = "backend"


@dataclass(frozen=True)
class Outcome:
    """One freeze: how long until the log grew again, and what the log and clients show."""

    freeze: Freeze
    caught: str  # where the leader's work session was once stopped (pg_stat_activity)
    takeover_seconds: float  # freeze to the next integrated entry
    epochs: tuple[int, int]  # the lease's epoch at the freeze, and after the resume
    flowing: list[bool]  # per other replica: a step sent after the freeze was acknowledged
    # before the leader resumed
    acknowledged_steps: int
    lost: list[str]
    verified: bool
    failures: list[str]
    frozen_output: str  # the frozen replica's log from the freeze on
    frozen_alive: bool  # the frozen replica still serves afterwards


@contextmanager
def replicas(work: Path, url: str, lease_seconds: float) -> Iterator[list[Served]]:
    """``REPLICAS`` ``gnau serve`` on one log: one key, one token file."""
    lease = ("--sequencer-lease-seconds", f"{lease_seconds:g}")
    with ExitStack() as stack:
        first = stack.enter_context(served(work / "replica-0", "--database", url, *lease))
        shared = (
            "--key", str(first.data_dir / "log-signing-key.pem"),
            "--tokens", str(first.data_dir / "tokens.json"),
        )  # fmt: skip
        services = [first]
        for n in range(1, REPLICAS):
            other = stack.enter_context(
                served(work / f"replica-{n}", "--database", url, *lease, *shared)
            )
            other.token = first.token
            services.append(other)
        yield services


def lease(url: str) -> tuple[int, int, int]:
    """The lease's epoch, its holder's process id (from its name) and its work backend's pid."""
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute("SELECT epoch, holder, holder_pid FROM log_lease").fetchone()
    assert row is not None
    epoch, holder, backend = row
    pid = int(holder.rsplit("-", 1)[1]) if holder.startswith(APPLICATION_NAME) else 0
    return int(epoch), pid, int(backend)


def log_size(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute("SELECT size FROM log_head WHERE id = 1").fetchone()
    assert row is not None
    return int(row[0])


@dataclass(frozen=True)
class Activity:
    """A backend's row of pg_stat_activity, as far as the drill needs it."""

    state: str
    wait_event_type: str
    wait_event: str
    statement: str  # the first words of its (latest) statement
    in_transaction: bool

    def __str__(self) -> str:
        waiting = f", waiting on {self.wait_event}" if self.wait_event else ""
        return (
            f"{self.state} ({self.statement}{waiting})"
            if self.state == "active"
            else f"{self.state} (after {self.statement})"
        )


def activity(admin: psycopg.Connection[tuple[object, ...]], pid: int) -> Activity:
    row = admin.execute(
        "SELECT coalesce(state, ''), coalesce(wait_event_type, ''), coalesce(wait_event, ''),"
        " array_to_string((regexp_split_to_array(coalesce(query, ''), '\\s+'))[1:2], ' '),"
        " xact_start IS NOT NULL FROM pg_stat_activity WHERE pid = %s",
        (pid,),
    ).fetchone()
    if row is None:
        return Activity("", "", "", "", in_transaction=False)
    state, wait_type, wait, statement, in_transaction = row
    return Activity(str(state), str(wait_type), str(wait), str(statement), bool(in_transaction))


def backend_state(admin: psycopg.Connection[tuple[object, ...]], pid: int) -> tuple[str, str]:
    now = activity(admin, pid)
    return now.state, now.wait_event_type


def _until(condition: object, what: str) -> None:
    assert _within(condition, WAIT_SECONDS), f"never: {what}"


def _within(condition: object, seconds: float) -> bool:
    """Whether ``condition`` holds within ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


#: How long a stopped client's backend is given to finish what it had received, before the drill
#: reads where it was caught.
SETTLE_SECONDS: Final = 0.05
#: A leader stopped while its COPY waits for a lock is caught inside the COPY only if some of the
#: COPY's data was still unsent; if all of it was, its backend ends the COPY, and the drill tries
#: the next one, up to this many times, each given this long to show the backend waiting.
IN_COPY_TRIES: Final = 20
COPY_CAUGHT_SECONDS: Final = 2.0


def freeze(url: str, how: Freeze, process: int, backend: int) -> tuple[int, str]:
    """Stop the leader as ``how`` says; the pid to SIGCONT later, and where its work session was
    caught."""
    with psycopg.connect(url, autocommit=True) as admin:
        stopped = _freeze(admin, url, how, process, backend)
        time.sleep(SETTLE_SECONDS)
        return stopped, str(activity(admin, backend))


def _freeze(
    admin: psycopg.Connection[tuple[object, ...]], url: str, how: Freeze, process: int, backend: int
) -> int:
    if how is Freeze.IN_COPY:
        for _ in range(IN_COPY_TRIES):
            holder = psycopg.connect(url)
            try:
                holder.execute("LOCK TABLE log_entries IN SHARE MODE")
                _until(
                    lambda: (
                        (now := activity(admin, backend)).wait_event_type == "Lock"
                        and now.statement == "COPY log_entries"
                    ),
                    "the leader's COPY waits for the entries' table",
                )
                os.kill(process, signal.SIGSTOP)
            finally:
                holder.rollback()
                holder.close()
            if _within(
                lambda: (
                    (now := activity(admin, backend)).wait_event == "ClientRead"
                    and now.state == "active"
                    and now.statement == "COPY log_entries"
                ),
                COPY_CAUGHT_SECONDS,
            ):
                return process
            # The leader had sent the whole COPY before it stopped, so its backend finished it:
            # not frozen inside it. Again, with its next COPY.
            os.kill(process, signal.SIGCONT)
        raise AssertionError("the frozen leader's backend never waited for it inside the COPY")
    if how is Freeze.ANYWHERE:
        for _ in range(1000):
            time.sleep(random.uniform(0.0, 0.05))  # a random instant
            _until(
                lambda: activity(admin, backend).in_transaction,
                "the leader's work session is inside a transaction",
            )
            os.kill(process, signal.SIGSTOP)
            time.sleep(SETTLE_SECONDS)
            if activity(admin, backend).in_transaction:
                return process
            os.kill(process, signal.SIGCONT)  # its transaction ended before the stop: again
        raise AssertionError("the leader was never stopped inside a transaction")
    if how is Freeze.IN_TRANSACTION:
        holder = psycopg.connect(url)
        try:
            holder.execute("LOCK TABLE log_checkpoints IN EXCLUSIVE MODE")
            _until(
                lambda: backend_state(admin, backend)[1] == "Lock",
                "the leader waits for the checkpoint table inside its integration",
            )
            os.kill(process, signal.SIGSTOP)
        finally:
            holder.rollback()
            holder.close()
        _until(
            lambda: backend_state(admin, backend)[0] == "idle in transaction",
            "the frozen leader's transaction is idle",
        )
        return process
    target = process if how is Freeze.BETWEEN else backend
    for _ in range(1000):
        os.kill(target, signal.SIGSTOP)
        if backend_state(admin, backend)[0] == "idle":
            return target
        os.kill(target, signal.SIGCONT)
        time.sleep(0.003)
    raise AssertionError("the leader's work session was never idle")


def run_freeze(
    services: list[Served],
    url: str,
    how: Freeze,
    *,
    lease_seconds: float,
    hold_seconds: float,
    warm_up_seconds: float = 1.0,
    after_seconds: float = 1.0,
) -> Outcome:
    """Load; freeze the leader for ``hold_seconds``; resume it; load a while more; check."""
    stop = threading.Event()
    players, threads = start_players(services, [f"{how}-{n}" for n in range(len(services))], stop)
    frozen: Served | None = None
    try:
        time.sleep(warm_up_seconds)
        epoch, process, backend = lease(url)
        frozen = next(s for s in services if s.process.pid == process)
        logged_before = len(frozen.stderr_path.read_bytes())
        stopped, caught = freeze(url, how, process, backend)
        frozen_at = time.monotonic()
        size = log_size(url)
        try:
            while log_size(url) <= size and time.monotonic() < frozen_at + hold_seconds:
                time.sleep(POLL_SECONDS)
            took = time.monotonic() - frozen_at
            time.sleep(max(0.0, frozen_at + hold_seconds - time.monotonic()))
        finally:
            os.kill(stopped, signal.SIGCONT)
            resumed_at = time.monotonic()
        if log_size(url) <= size:  # it stood still for as long as the leader did: how much more?
            _until(lambda: log_size(url) > size, "the log grows again once the leader resumed")
            took = time.monotonic() - frozen_at
        time.sleep(after_seconds)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
    others = [p for p, s in zip(players, services, strict=True) if s is not frozen]
    flowing = [(p.first_ack_sent_after(frozen_at) or resumed_at) < resumed_at for p in others]
    after_epoch = lease(url)[0]
    acks = [ack for player in players for ack in player.acks]
    with open_reader(url) as reader:
        size = reader.size()
        verifier = Verifier.from_vkey(services[0].vkey)
        written = {
            (entry.round_id, entry.kind)
            for entry in (decode_entry(data, verifier) for data in reader.iter_entries(0, size))
        }
        bundle = io.StringIO()
        write_bundle(reader, bundle, end=size)
    report = verify_bundle(io.BytesIO(bundle.getvalue().encode()), pinned_keys=[verifier])
    lost = [
        f"{a.round_id} {a.step}" for a in acks if (a.round_id, STEP_ENTRY[a.step]) not in written
    ]
    return Outcome(
        freeze=how,
        caught=caught,
        takeover_seconds=took,
        epochs=(epoch, after_epoch),
        flowing=flowing,
        acknowledged_steps=len(acks),
        lost=lost,
        verified=report.ok,
        failures=[f for p in players for f in p.failures],
        frozen_output=frozen.stderr_path.read_bytes()[logged_before:].decode(errors="replace"),
        frozen_alive=frozen.process.poll() is None,
    )
