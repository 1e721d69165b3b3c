"""What a unit of work (a round step) may do: SQL on the store's tables, and appending events.

A unit runs inside a step transaction (:mod:`~gnau_service.store.steps`), in a savepoint of its
own. An appended event is a row of the outbox (``log_pending``), not yet a log entry: a step
touches only its round's rows, its table's open-round guard, the idempotency record and the
outbox, never the log head, so steps of different rounds (in different processes on one
PostgreSQL) do not wait for each other. The unit's caller is answered once the events are
integrated into the log (:mod:`~gnau_service.store.coordination`); the
:class:`~gnau_service.store.waiting.PendingEntry` objects it returned then carry their indices.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, TypeVar

from gnau_service.audit.entries import EntryKind, JsonValue, event_payload
from gnau_service.audit.timestamps import format_utc_timestamp
from gnau_service.store.backend import Backend
from gnau_service.store.connections import Connection, Row
from gnau_service.store.waiting import PendingEntry

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PreparedEvent:
    """An event checked and made canonical ahead of its step (:func:`prepare_event`), so that
    the step's transaction only inserts its bytes."""

    kind: EntryKind
    payload_json: bytes
    round_id: str | None


def prepare_event(
    kind: EntryKind, payload: dict[str, JsonValue], *, round_id: str | None = None
) -> PreparedEvent:
    """Check ``payload`` and make its RFC 8785 bytes, wherever and whenever it is appended.
    Raises :class:`~gnau_service.audit.entries.EntryError` for an event no entry may hold.

    An event's bytes do not depend on its time, whose width is fixed (every step's time is
    :func:`utc_now`'s form), so the size check made with any such time holds at the step's."""
    return PreparedEvent(
        kind, event_payload(kind, payload, time=_A_STEP_TIME, round_id=round_id), round_id
    )


#: A time of :func:`utc_now`'s form and width, for checking an event's size ahead of its step.
_A_STEP_TIME: Final = "2026-01-01T00:00:00.000000Z"


def utc_now() -> str:
    """The current time in the audit log's timestamp form."""
    return format_utc_timestamp(datetime.now(UTC))


def pending_indices_sql(count: int) -> str:
    """The query of ``(id, idx)`` for ``count`` pending ids (idx NULL until integrated).

    >>> pending_indices_sql(2)
    'SELECT id, idx FROM log_pending WHERE id IN (?, ?)'
    """
    marks = ", ".join("?" for _ in range(count))
    return f"SELECT id, idx FROM log_pending WHERE id IN ({marks})"  # noqa: S608  (only ?s)


class Transaction:
    """What a unit of work may do: SQL on the store's tables, and appending events."""

    def __init__(
        self,
        backend: Backend,
        connection: Connection,
        time: str,
        recent: dict[int, int] | None = None,
    ):
        self._backend = backend
        self._connection = connection
        self.time = time
        self._recent = {} if recent is None else recent
        #: The events this unit appended, in order.
        self.appended: list[PendingEntry] = []
        #: Earlier events whose indices the unit's answer needs, not integrated yet.
        self.awaited: list[PendingEntry] = []
        self._writes: list[tuple[str, tuple[object, ...]]] = []

    @property
    def row_lock(self) -> str:
        """What a SELECT appends to lock its rows until the step commits ("" where writers take
        turns anyway): a step that reads a row to change it locks it, so that two processes
        cannot both change it from the same state."""
        return self._backend.row_lock

    @property
    def share_lock(self) -> str:
        """What a SELECT appends to share-lock its rows until the step commits ("" where writers
        take turns anyway): a row the step acts on without changing it, whose change must wait
        for the step, or be read by it once made."""
        return self._backend.share_lock

    def execute(self, text: str, params: Sequence[object] = ()) -> list[Row]:
        """Run one statement (``?`` placeholders) and return its rows, if any."""
        self.flush()
        with self._backend.unavailable_as_store_error():
            return self._backend.run(self._connection, text, params)

    def query_all(self, *queries: tuple[str, Sequence[object]]) -> list[list[Row]]:
        """Run several SELECTs and return the rows of each."""
        self.flush()
        with self._backend.unavailable_as_store_error():
            return self._backend.run_queries(self._connection, queries)

    def write(self, text: str, params: Sequence[object] = ()) -> None:
        """Run a statement whose rows the unit does not need (an INSERT, UPDATE or DELETE). Where
        a round trip costs (PostgreSQL: :attr:`Backend.queues_writes
        <gnau_service.store.backend.Backend.queues_writes>`) it is queued, and runs in order with
        the others before the unit's next statement that answers, or when the unit ends
        (:meth:`flush`), all in one round trip. If it fails, the unit fails, as if it had run at
        once."""
        if self._backend.queues_writes:
            self._writes.append((text, tuple(params)))
            return
        with self._backend.unavailable_as_store_error():
            self._connection.execute(self._backend.sql(text), tuple(params))

    def flush(self, then: Sequence[str] = ()) -> None:
        """Run the queued writes, then the parameterless statements ``then``: one round trip
        on PostgreSQL, which stops at the first that fails."""
        if not self._writes and not then:
            return
        writes, self._writes = self._writes, []
        with self._backend.unavailable_as_store_error():
            self._backend.run_writes(self._connection, writes, then)

    def append(
        self, kind: EntryKind, payload: dict[str, JsonValue], *, round_id: str | None = None
    ) -> PendingEntry:
        """Append an event: it is committed with the step, and the caller is answered once the
        sequencer has made it a signed entry (then the returned entry has its index). Raises
        :class:`~gnau_service.audit.entries.EntryError` for an event no entry may hold."""
        # Checked and made canonical here, so that such an event fails its step (and only its
        # step) rather than the sequencer, which signs these bytes as they are.
        return self.append_prepared(prepare_event(kind, payload, round_id=round_id))

    def append_prepared(self, event: PreparedEvent) -> PendingEntry:
        """Append an event made ahead (:func:`prepare_event`), as :meth:`append` does."""
        kind, payload_json, round_id = event.kind, event.payload_json, event.round_id
        self.flush()
        with self._backend.unavailable_as_store_error():
            row = self._connection.execute(
                self._backend.sql(
                    "INSERT INTO log_pending (kind, round_id, payload, time)"
                    " VALUES (?, ?, ?, ?) RETURNING id"
                ),
                (str(kind), round_id, payload_json.decode("utf-8"), self.time),
            ).fetchone()
        assert row is not None  # an INSERT ... RETURNING returns the row it inserted
        entry = PendingEntry(int(row[0]), kind, round_id)
        self.appended.append(entry)
        return entry

    def refer(self, pending_ids: Sequence[int]) -> list[PendingEntry]:
        """Earlier events, by pending id, whose indices the unit's answer needs: those already
        integrated come with their index; for the others, the caller is answered once they are
        (a retry that arrives after its step committed but before integration waits so)."""
        if not pending_ids:
            return []
        # This process usually knows them: it integrated them, or answered their callers.
        known: dict[int, int | None] = {
            i: self._recent[i] for i in pending_ids if i in self._recent
        }
        unknown = [pending_id for pending_id in pending_ids if pending_id not in known]
        if unknown:
            rows = self.execute(pending_indices_sql(len(unknown)), tuple(unknown))
            known.update((int(row[0]), row[1]) for row in rows)
        entries = []
        for pending_id in pending_ids:
            index = known.get(pending_id)
            entry = PendingEntry(pending_id, index=-1 if index is None else int(index))
            if entry.index < 0:
                self.awaited.append(entry)
            entries.append(entry)
        return entries


#: A unit of work: what it returns is its caller's answer.
Work = Callable[[Transaction], T]
