"""The sequencer: gives committed pending events their log indices, signs them, and checkpoints.

A round step commits its events into the outbox (``log_pending``) without touching the log head
(see :mod:`gnau_service.store.transaction`). The sequencer integrates them: in one transaction it

1. locks the head row (PostgreSQL ``SELECT ... FOR UPDATE``; SQLite's write lock), and reads the
   log's current key (refusing with :class:`~gnau_service.store.errors.KeyNotCurrent` if this
   process cannot sign with it);
2. reads, *after* taking that lock, the pending events not yet integrated, in id order, at most
   :data:`SEQUENCE_BATCH` of them;
3. appends them with :class:`~gnau_service.audit.log.LogAppender` (index, chain hash, canonical
   bytes, signature, Merkle nodes), writes entries, nodes, head and a signed checkpoint of the new
   head, and sets each event's ``idx`` (dropping its payload, now in the entry);
4. commits, and announces the new size and each event's index (NOTIFY on PostgreSQL, see
   :mod:`~gnau_service.store.head_notices`).

Step 2 comes after step 1 so that a deposed sequencer cannot integrate anything twice: whoever
holds the head lock sees every event a previous holder integrated (its commit came before the
lock was granted, and each statement under READ COMMITTED reads what was committed before it
began). The lock, not the election below, is what keeps the log correct; the election only makes
one process do the work. docs/audit.md ("Sequencing") proves that a round's events enter the log
in causal order.

None of this depends on when a step's writes were computed. Where other processes wait for
SQLite's writers' turn, a step is computed before its transaction, from its round as committed,
and its unit uses that plan only if it finds the round, read under the same lock as ever, at the
version the plan was made from; else it computes it again inside
(:mod:`~gnau_service.rounds.planning`). So the outbox rows a step commits are those it would
have computed in its transaction, and the order of the log, the absence of gaps and what a crash
leaves (a step's rows and events together, or neither) are the transactions' alone, as above.

Each backend runs this protocol its own way (:mod:`~gnau_service.store.coordination`). On SQLite
(one writer at a time, in one process) each step transaction integrates its own events, before
its COMMIT: one fsync for both (:mod:`~gnau_service.store.in_step`). On PostgreSQL one process per
log is the sequencer (:class:`Sequencer`): the holder of the log's lease
(:mod:`~gnau_service.store.lease`), which every other process tries to take every
:data:`~gnau_service.store.lease.ELECTION_SECONDS`. Each integration renews the lease after step 1
and is rolled back if another process has taken it meanwhile (the fence), so a deposed sequencer
commits nothing. A log-level entry written outside the sequencer (a key rotation) locks the
lease's row after step 1 instead, so every transaction that writes the log holds that row. A
sequencer that stops, killed or frozen, in a transaction or not, loses the lease within
:func:`~gnau_service.store.lease.takeover_bound`: a transaction of a stopped process that holds
the lease's row past the lease is ended by the next process to try to take it, wherever its
backend waits, in the middle of step 3's ``COPY`` included. So the bulk write stays a binary
``COPY`` (one statement, bytes as they are): a backend waiting inside it for a stopped client is
ended like any other.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from time import perf_counter
from typing import Final, Generic, NamedTuple, Protocol, TypeVar

from gnau_service.audit.entries import EntryKind
from gnau_service.audit.log import AppendedEntry, LogAppender, LogHead
from gnau_service.audit.signing import LogSigner
from gnau_service.store.backend import CURRENT_KEY_SQL, Backend
from gnau_service.store.connections import Connection, ListeningConnection
from gnau_service.store.coordination import Integrated, WritingStore
from gnau_service.store.errors import KeyNotCurrent
from gnau_service.store.head_notices import HeadNotice
from gnau_service.store.lease import ELECTION_SECONDS, Deposed, Lease, LogProgress

#: Pending events integrated in one transaction at most.
SEQUENCE_BATCH: Final = 1024
#: How often the sequencer looks for pending events even if nobody said there are any: events
#: whose step's process died between its COMMIT and its NOTIFY, or whose notice was lost.
SWEEP_SECONDS: Final = 1.0
#: The start of the sequencer sessions' application_name (then the process id), by which
#: pg_stat_activity and the lease's holder name the process.
APPLICATION_NAME: Final = "gnau-sequencer"
#: The start of the application_name (then the process id) of a session that writes a log-level
#: entry outside the sequencer: a key rotation.
LOG_WORK_APPLICATION_NAME: Final = "gnau-log-work"
#: How long a failed sequencer waits before it connects again: the first wait, doubled after
#: each failure up to the last. A promoted standby takes a fraction of a second; a database that
#: stays down is asked twice a second, as often as an election.
RETRY_SECONDS: Final = (0.05, 0.5)

log = logging.getLogger(__name__)

#: Appends a log-level entry (a key rotation) after the batch's pending events, in the same
#: transaction, under the same head lock.
LogLevelWork = Callable[[LogAppender, Connection], AppendedEntry]
#: Gives the signer of the log's current key (given that key), or raises KeyNotCurrent.
SignerFor = Callable[[str | None], LogSigner]
#: The connections of an election's database, as its driver opens them (psycopg's).
SessionT = TypeVar("SessionT", bound=ListeningConnection)


class Integration(NamedTuple):
    """What one integration wrote in its (still open) transaction: the entries it appended, each
    pending event's new index, and the appender, which holds the new head and its signer."""

    appended: list[AppendedEntry]
    indices: dict[int, int]
    appender: LogAppender


def integrate(
    backend: Backend,
    connection: Connection,
    signer_for: SignerFor,
    *,
    log_level: LogLevelWork | None = None,
    lease: Lease | None = None,
) -> Integration:
    """Integrate up to :data:`SEQUENCE_BATCH` pending events inside the caller's open
    transaction (then a ``log_level`` entry, if given); nothing is committed here. With a
    ``lease``, renew it under the head lock first, or raise Deposed; without one, hold the
    lease's row where the backend has one (a key rotation's transaction)."""
    queries: list[tuple[str, Sequence[object]]] = [
        (backend.read_head_sql, ()),
        (CURRENT_KEY_SQL, ()),
    ]
    if lease is not None:
        queries.append(lease.renewal())
    elif backend.hold_lease_sql is not None:
        queries.append((backend.hold_lease_sql, ()))
    head_rows, key_rows, *renewed = backend.run_queries(connection, queries)
    if lease is not None and not renewed[0]:
        raise Deposed(lease.epoch)
    head = LogHead.decode(*head_rows[0])
    appender = LogAppender(signer_for(str(key_rows[0][0]) if key_rows else None), head)
    appended: list[AppendedEntry] = []
    indices: dict[int, int] = {}
    for pending_id, kind, round_id, payload, time in backend.read_pending(
        connection, SEQUENCE_BATCH
    ):
        # The payload is the canonical JSON that Transaction.append checked and wrote.
        entry = appender.append_event(
            EntryKind(kind), payload.encode("utf-8"), time=time, round_id=round_id
        )
        appended.append(entry)
        indices[int(pending_id)] = entry.index
    if log_level is not None:
        appended.append(log_level(appender, connection))
    if appended:
        write_log(backend, connection, appender, appended, indices)
        backend.index_pending(connection, indices)
    return Integration(appended, indices, appender)


def write_log(
    backend: Backend,
    connection: Connection,
    appender: LogAppender,
    appended: list[AppendedEntry],
    indices: Mapping[int, int],
) -> None:
    """Write appended entries, their tree nodes, the new head and its signed checkpoint, and
    announce the new head with the pending events' ``indices``."""
    backend.insert_rows(
        connection,
        "log_entries",
        {"idx": "bigint", "kind": "text", "round_id": "text", "data": "bytea"},
        [(e.index, e.kind.value, e.round_id, e.data) for e in appended],
    )
    backend.insert_rows(
        connection,
        "log_nodes",
        {"level": "integer", "idx": "bigint", "hash": "bytea"},
        [(n.level, n.index, n.hash) for e in appended for n in e.nodes],
    )
    size, prev_hash, frontier = appender.head.encode()
    backend.run(
        connection,
        "UPDATE log_head SET size = ?, prev_hash = ?, frontier = ? WHERE id = 1",
        (size, prev_hash, frontier),
    )
    backend.announce_size(connection, HeadNotice(size, indices))
    backend.run(
        connection,
        "INSERT INTO log_checkpoints (size, note) VALUES (?, ?)",
        (size, str(appender.checkpoint())),
    )


def sequence(
    backend: Backend,
    connection: Connection,
    signer_for: SignerFor,
    *,
    log_level: LogLevelWork | None = None,
    lease: Lease | None = None,
) -> Integrated:
    """One sequencer transaction on its own connection: begin, integrate, commit."""
    started = perf_counter()
    backend.run(connection, backend.begin_sql)
    try:
        appended, indices, appender = integrate(
            backend, connection, signer_for, log_level=log_level, lease=lease
        )
        committing = perf_counter()
        backend.run(connection, "COMMIT")
    except BaseException:
        backend.rollback_quietly(connection)
        raise
    now = perf_counter()
    return Integrated(tuple(appended), indices, appender, now - started, now - committing)


class Notices(NamedTuple):
    """The notices a session has received: how the log grew, and whether steps committed
    events."""

    heads: list[HeadNotice]
    steps: bool


class Election(Protocol[SessionT]):
    """How processes elect the log's sequencer and tell each other of its work: the lease
    (:mod:`~gnau_service.store.lease`) and LISTEN/NOTIFY
    (:class:`~gnau_service.store.postgres.PostgresBackend`)."""

    #: Tells the sequencer, wherever it runs, that steps committed events: sent after a step's
    #: COMMIT by a process that is not the sequencer.
    steps_notice_sql: str
    #: How long the lease lasts after each renewal (seconds).
    lease_seconds: float

    def connect_sequencer(self, application_name: str, *, work: bool) -> SessionT:
        """A connection of the sequencer: its ``work`` session (integrations, the lease), whose
        every wait is bounded by the lease, or its notice session."""
        ...

    def connect_step_writer(self) -> SessionT:
        """A step writer's connection, on which a transaction idle for the lease is ended."""
        ...

    def take_lease(self, work: SessionT, holder: str) -> Lease | None:
        """Take the log's lease on ``work`` if it is free (expired, or its holder gone), first
        ending the session of a transaction that holds its row past the lease."""
        ...

    def progress(self, connection: SessionT) -> LogProgress:
        """The lease, and how long the oldest event in the outbox has waited."""
        ...

    def listen(self, session: SessionT) -> None:
        """Hear, on ``session``, the log growing."""
        ...

    def listen_for_steps(self, session: SessionT) -> None:
        """Hear, on ``session`` too, steps committing events (the sequencer alone does)."""
        ...

    def notifications(self, session: SessionT) -> Notices:
        """The notices ``session`` has received."""
        ...


class Sequencer(Generic[SessionT]):
    """The PostgreSQL sequencer of one store, on a thread of its own: it keeps trying to take the
    log's lease, and while it holds it integrates pending events whenever a step commits (in
    this process: :meth:`wake`; in another: NOTIFY on the pending channel, which it listens to
    only while it leads), and every :data:`SWEEP_SECONDS` in any case, which renews the lease.
    The same thread, leading or not, hears the log grow (the head channel) and tells the store,
    whose waiting callers may be answered; and every sweep reads the log's progress
    (:attr:`progress`), by which the service reports a stalled log."""

    def __init__(self, backend: Backend, election: Election[SessionT], store: WritingStore) -> None:
        self._backend = backend
        self._election = election
        self._store = store
        self._stopping = threading.Event()
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._wake_reader.setblocking(False)
        self._wake_writer.setblocking(False)
        self._name = f"{APPLICATION_NAME}-{os.getpid()}"
        #: The lease this process holds now (None: it does not lead).
        self.lease: Lease | None = None
        #: The log's progress as last read (None until the first read).
        self.progress: LogProgress | None = None
        self._thread = threading.Thread(target=self._run, name="gnau-sequencer", daemon=True)
        self._thread.start()

    @property
    def leading(self) -> bool:
        """Whether this process holds the lease (as far as it knows: the fence decides)."""
        return self.lease is not None

    def wake(self) -> None:
        """A step committed pending events in this process."""
        # A full buffer means it is woken already; a closed socket, that it has stopped.
        with contextlib.suppress(OSError):
            self._wake_writer.send(b"\0")

    def close(self) -> None:
        self._stopping.set()
        self.wake()
        self._thread.join(timeout=10)
        self._wake_reader.close()
        self._wake_writer.close()

    def _run(self) -> None:
        backend, election = self._backend, self._election
        first_retry, last_retry = RETRY_SECONDS
        retry = first_retry
        while not self._stopping.is_set():
            session = work = None
            try:
                session = election.connect_sequencer(self._name, work=False)
                work = election.connect_sequencer(self._name, work=True)
                election.listen(session)
                retry = first_retry
                self._serve(session, work)
            except Exception as error:
                if not self._stopping.is_set():
                    log.warning("sequencer connection failed; retrying: %s", error)
                self.lease = None
                self._store.expire_waiters()  # no query: the database may be the trouble
                self._stopping.wait(retry)
                retry = min(2 * retry, last_retry)
            finally:
                for connection in (session, work):
                    if connection is not None:
                        backend.close_quietly(connection)
        self.lease = None

    def _serve(self, session: SessionT, work: SessionT) -> None:
        election = self._election
        next_election = 0.0
        next_sweep = 0.0
        pending = True  # a new sequencer first integrates whatever is left
        while not self._stopping.is_set():
            now = perf_counter()
            if self.lease is None and now >= next_election:
                self.lease = election.take_lease(work, self._name)
                next_election = now + ELECTION_SECONDS
                if self.lease is not None:
                    log.info("this process is now the log's sequencer (epoch %d)", self.lease.epoch)
                    # Only the sequencer hears steps' notices: every process listening would
                    # wake every replica at every step. Steps committed before this LISTEN are
                    # integrated at once below (``pending``), so none is missed.
                    election.listen_for_steps(session)
                    pending = True
            swept = now >= next_sweep
            if self.lease is not None and (pending or swept):
                self._integrate_all(work, self.lease)
                pending = False
            if swept:
                self.progress = election.progress(work)
                # A safety net under the head channel's notices (one lost while reconnecting),
                # and the answer of this process's callers whose events another integrated (a
                # key rotation, or a takeover) while it thought it led.
                self._store.check_waiters()
                next_sweep = perf_counter() + SWEEP_SECONDS
            wait_until = next_sweep if self.lease is not None else min(next_sweep, next_election)
            timeout = max(0.0, wait_until - perf_counter())
            watched: list[int | socket.socket] = [session.fileno(), self._wake_reader]
            readable, _, _ = select.select(watched, [], [], timeout)
            if self._wake_reader in readable:
                self._drain_wakes()
                pending = True
            if session.fileno() in readable:
                grown, steps = election.notifications(session)
                pending = pending or steps
                if grown and self.lease is None:  # the sequencer's own callers are answered
                    self._store.notified(grown)
        if self.lease is not None:
            # What this process's steps committed last is integrated before it lets go.
            self._integrate_all(work, self.lease)

    def _integrate_all(self, work: SessionT, lease: Lease) -> None:
        try:
            while not self._stopping.is_set():
                done = sequence(self._backend, work, self._store.signer_for, lease=lease)
                self._store.integrated(done)
                if len(done.indices) < SEQUENCE_BATCH:
                    return
        except (KeyNotCurrent, Deposed) as refused:
            # Another process may hold the current key, or has the lease: step down (the caller
            # closes the sessions), so that it can work.
            log.warning("sequencer stepping down: %s", refused)
            self.lease = None
            raise

    def _drain_wakes(self) -> None:
        with contextlib.suppress(OSError):  # BlockingIOError: drained
            while self._wake_reader.recv(4096):
                pass
