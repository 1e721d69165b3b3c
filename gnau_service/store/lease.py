"""The sequencer's lease (PostgreSQL): which process integrates the outbox, and how a process
that stops making progress loses it within a bound, whatever stopped it.

The one-row table ``log_lease`` holds an *epoch*, the holder's name, the PostgreSQL backend pid of
the holder's work session, and when the lease was renewed and expires. Every time is the
database's own clock (``clock_timestamp()``), so no two processes' clocks are compared.

The protocol, with ``L`` the lease (``--sequencer-lease-seconds``):

1. **Take.** A process that does not hold the lease tries every :data:`ELECTION_SECONDS` to take
   it (:data:`TAKE_SQL`): it succeeds only if the lease has expired, or its holder's session no
   longer exists (a killed process: taken at the next try), and only if no transaction holds the
   row (``SKIP LOCKED``: the try never waits). Taking adds one to the epoch, and the taker's
   epoch is that new one.
2. **Renew and fence.** Every integration, after it locks the log head, renews the lease
   (:data:`RENEW_SQL`) only if the epoch is still its own; if not, it is *deposed*
   (:class:`Deposed`) and rolls back. The renewal's row lock is then held to the integration's
   COMMIT. A leader with nothing to integrate still runs one every
   :data:`~gnau_service.store.sequencer.SWEEP_SECONDS`, which renews. Log-level work outside the
   sequencer (a key rotation, which holds no lease) locks the lease's row after the head's too
   (:data:`HOLD_SQL`), so that every transaction that writes the log holds that row.
3. **Bound every wait.** The work session (the sequencer's, a rotation's) runs with
   ``statement_timeout``, ``lock_timeout`` and ``idle_in_transaction_session_timeout`` of ``L``
   (:func:`session_settings`), and with TCP keepalives and ``tcp_user_timeout``
   (:func:`keepalive_parameters`), so PostgreSQL itself ends a transaction whose client stopped
   between statements (frozen, swapping, cut off), releasing the head and lease rows.
4. **End an overdue holder.** Those timeouts do not cover a backend waiting on its client in the
   middle of a statement: inside a ``COPY ... FROM STDIN`` (the sequencer's bulk write), between
   the messages of an extended-protocol batch before its Sync (the statement timeout is
   disarmed after each Execute, and the idle one is armed only at ReadyForQuery), in a message
   only partly sent, or blocked writing a result the client does not read. There PostgreSQL
   acts only on a request to terminate. So a candidate whose take finds the row locked runs
   :data:`END_OVERDUE_SQL`: if the lease, as last committed, has expired, and the transaction
   that holds the row (the row's ``xmax`` is its transaction id) began more than ``L`` ago, it
   ends that transaction's session (``pg_terminate_backend``), waits up to
   :data:`END_WAIT_SECONDS` for it to exit, and tries to take the lease again at once. This needs
   the right to signal that backend and to see its transaction's start: every process of the
   log connects as one role (or its role has ``pg_signal_backend`` and ``pg_read_all_stats``);
   lacking it, the refusal is logged and the log stalls as if nobody could end it.

**Safety: a deposed leader never commits an integration.** An integration commits only if its
renewal found its own epoch, and it holds the lease row from that renewal to its COMMIT. A take
changes the row, so it cannot commit between them: a taker that finds the row locked skips it
(step 1). So at every integration's commit its epoch is the current one, and epochs only grow: a
process deposed by a take can commit nothing after it. Ending a session (step 4) changes no
row: its transaction is rolled back, or, if its COMMIT got there first, committed whole while it
still held the row, before any take could lock it. A live leader that is ended by mistake (its
integration outlasted the lease, or ended just as the candidate looked) loses its session, not
the log's consistency: it reconnects as a follower, and its waiting callers are answered from
the database when their events are integrated. What the log needs for correctness is still the
head lock (see :mod:`~gnau_service.store.sequencer`): every integration reads the outbox after
taking it, so even two leaders could not integrate an event twice. The lease makes one process
do the work, and ends any leader's turn.

**Liveness: a takeover within** :func:`takeover_bound` **of the leader stopping.** Say it stops
at ``f``. Outside a transaction, it renews no more: its lease expires ``L`` after its last
renewal, which came before ``f``. Inside a transaction that began at ``s <= f`` and has not
renewed yet, it holds the head but not the lease row, and its backend is idle in that
transaction, so PostgreSQL ends it ``L`` after its last statement: by ``f + L``. Inside a
transaction that holds the lease row, wherever its backend waits: the lease as last committed
was renewed before that transaction locked the row, so before ``f``, and the transaction began
before ``f`` too; by ``f + L`` both conditions of step 4 hold, and the next try ends the session
and takes the lease. Either way a follower's try, at most :data:`ELECTION_SECONDS` after
``f + L``, succeeds. What this cannot cover is a PostgreSQL backend that is itself stopped
(``SIGSTOP``) inside the transaction: it enforces no timeout, takes no signal until it is
resumed, and the next log index is its uncommitted row. docs/operations.md ("A stalled log")
says what an operator does then; the stall is reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from gnau_service.store.errors import StoreError

#: The default lease (seconds): long enough that a busy leader renews it many times over, short
#: enough that clients with a 10 s deadline see their steps answered after a takeover.
DEFAULT_LEASE_SECONDS: Final = 5.0
#: How often a process that does not hold the lease tries to take it (seconds).
ELECTION_SECONDS: Final = 0.5
#: How long a candidate waits for the session it ended to exit before it tries to take the
#: lease again (seconds); a session that takes longer is gone by the next election's try.
END_WAIT_SECONDS: Final = 0.2
#: A reading of the log's progress older than this is stale: the sequencer reads it every sweep,
#: once a second, so three sweeps were missed (its process cannot reach the database).
STALE_READING_SECONDS: Final = 3.0
#: The shortest and longest leases accepted (a leader renews at least every sweep, once a second).
LEASE_SECONDS_RANGE: Final = (2.0, 300.0)

#: Take the lease if it expired or its holder's session is gone, never waiting for its row.
#: Parameters: the taker's name, then the lease in seconds. Returns the new epoch, or nothing.
TAKE_SQL: Final = (
    "UPDATE log_lease SET epoch = epoch + 1, holder = %s, holder_pid = pg_backend_pid(),"
    " renewed_at = clock_timestamp(), expires_at = clock_timestamp() + make_interval(secs => %s)"
    " WHERE id = (SELECT id FROM log_lease WHERE id = 1 AND (expires_at <= clock_timestamp()"
    " OR NOT EXISTS (SELECT 1 FROM pg_stat_get_activity(holder_pid)))"
    " FOR UPDATE SKIP LOCKED) RETURNING epoch"
)
#: Renew the lease if the epoch is still the renewer's (then its row stays locked to COMMIT).
#: Parameters: the lease in seconds, then the epoch. Returns a row if renewed.
RENEW_SQL: Final = (
    "UPDATE log_lease SET renewed_at = clock_timestamp(),"
    " expires_at = clock_timestamp() + make_interval(secs => %s)"
    " WHERE id = 1 AND epoch = %s RETURNING epoch"
)
#: What log-level work outside the sequencer (a key rotation) runs after it locks the log head:
#: it holds the lease's row to its COMMIT, as an integration's renewal does (step 2 above).
HOLD_SQL: Final = "SELECT epoch FROM log_lease WHERE id = 1 FOR UPDATE"
#: End the session whose transaction has held the lease's row past the lease (step 4 above): the
#: lease as last committed has expired, and the transaction holding the row, the one whose id is
#: the row's ``xmax`` while it holds it, began more than the lease ago. The CASE keeps the
#: terminate from running for a transaction that is not overdue. Parameters: the lease in
#: seconds, then how long to wait for the session to exit (milliseconds). Returns, for a
#: transaction holding the expired lease's row: its session's pid, whether its start can be
#: seen (pg_read_all_stats, or the same role), and whether it was ended (None: not overdue yet;
#: false: it did not exit in time, so its backend may be stopped). Nothing if there is none.
END_OVERDUE_SQL: Final = (
    "SELECT activity.pid, activity.xact_start IS NOT NULL,"
    " CASE WHEN activity.xact_start <= clock_timestamp() - make_interval(secs => %s)"
    " THEN pg_terminate_backend(activity.pid, %s) END"
    " FROM log_lease JOIN pg_stat_activity AS activity ON activity.backend_xid = log_lease.xmax"
    " WHERE log_lease.id = 1 AND log_lease.expires_at <= clock_timestamp()"
)
#: What any process reads of the log's progress: the lease (epoch, holder, seconds since its
#: renewal, whether it has expired) and how long the oldest event waiting in the outbox has
#: waited (None if none waits), all by the database's clock.
PROGRESS_SQL: Final = (
    "SELECT epoch, holder, extract(epoch FROM clock_timestamp() - renewed_at)::float8,"
    " expires_at <= clock_timestamp(),"
    " (SELECT extract(epoch FROM clock_timestamp() - time::timestamptz)::float8 FROM log_pending"
    " WHERE idx IS NULL ORDER BY id LIMIT 1)"
    " FROM log_lease WHERE id = 1"
)


class Deposed(StoreError):  # noqa: N818  (a condition the sequencer acts on)
    """Another process took the lease: this one's integration is rolled back."""

    def __init__(self, epoch: int) -> None:
        super().__init__(f"another process took the sequencer's lease from epoch {epoch}")
        self.epoch = epoch


@dataclass(frozen=True)
class Lease:
    """A lease this process took: its epoch, and how long each renewal lasts."""

    epoch: int
    seconds: float

    def renewal(self) -> tuple[str, tuple[float, int]]:
        """The statement that renews it, fencing the integration it runs in."""
        return RENEW_SQL, (self.seconds, self.epoch)


@dataclass(frozen=True)
class LogProgress:
    """The log's progress as one process last read it (:data:`PROGRESS_SQL`)."""

    epoch: int
    holder: str
    #: Seconds since the leader last renewed the lease, which it does in every integration.
    lease_age: float
    lease_expired: bool
    #: Seconds the oldest event committed but not integrated has waited (0 if none waits).
    oldest_wait: float
    #: When it was read (``time.monotonic()``).
    read_at: float


def takeover_bound(lease_seconds: float) -> float:
    """The longest from a leader stopping to another taking the lease (see above), less the
    time an integration takes.

    >>> takeover_bound(5.0)
    5.5
    """
    return lease_seconds + ELECTION_SECONDS


def stall_bound(lease_seconds: float) -> float:
    """How long a committed event may wait for integration before the log counts as stalled:
    a takeover's bound and a second more, so that a takeover alone stalls nobody.

    >>> stall_bound(5.0)
    6.5
    """
    return takeover_bound(lease_seconds) + 1.0


def session_settings(lease_seconds: float) -> Mapping[str, str]:
    """The sequencer's work session's timeouts: no statement, lock wait or idle transaction
    outlasts the lease."""
    millis = f"{int(lease_seconds * 1000)}"
    return {
        "statement_timeout": millis,
        "lock_timeout": millis,
        "idle_in_transaction_session_timeout": millis,
    }


def keepalive_parameters(lease_seconds: float) -> Mapping[str, str]:
    """libpq's TCP settings for the sequencer's connections: a peer that stops answering (a host
    cut off without a reset) is noticed within about the lease, not the kernel's two hours."""
    idle = max(1, int(lease_seconds / 2))
    return {
        "keepalives": "1",
        "keepalives_idle": f"{idle}",
        "keepalives_interval": "1",
        "keepalives_count": "3",
        "tcp_user_timeout": f"{int(lease_seconds * 1000)}",
    }
