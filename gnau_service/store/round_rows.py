"""The service's round table and request (idempotency) table: rows in, rows out.

The store does not interpret a round: ``record`` is the round's public JSON and ``server_seed`` its
secret, kept apart so that no read of ``record`` can leak it. Every round and request belongs to
one operator (:mod:`gnau_service.audit.operators`): a table id and a request id are an operator's
own, and a read given an operator finds that operator's rows only (a round of another is not
there, as a round that does not exist). At most one round per table of an operator is unfinished
(a partial unique index); a request id is stored with its operation, a fingerprint of its body and
the response it got, in the same transaction as the change it made. Steps of different
rounds run side by side (see :mod:`gnau_service.store.transaction`): a step reads its round's row
with the transaction's row lock (:attr:`Transaction.row_lock`), so what it read of the round stays
true until it commits; a race on the open-round guard or a request id between processes ends in a
unique violation, and the store runs the losing step again.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import NamedTuple

from gnau_service.store.connections import Row
from gnau_service.store.reader import LogReader
from gnau_service.store.transaction import Transaction

_COLUMNS = "round_id, operator, table_id, state, record, server_seed, created_at, updated_at"
#: The states of an unfinished round, as the rounds table spells them (and as its partial unique
#: index, one unfinished round per table, names them).
OPEN_STATES = ("SHUFFLED", "DEALT", "REVEALED")
#: The SQL condition on ``state`` for an unfinished round.
IS_OPEN = f"state IN ({', '.join(repr(state) for state in OPEN_STATES)})"
_FIND_REQUEST = (
    "SELECT request_id, operation, fingerprint, response FROM requests"
    " WHERE operator = ? AND request_id = ?"
)


@dataclass(frozen=True)
class StoredRound:
    round_id: str
    operator: str
    table_id: str
    state: str
    record: str
    server_seed: str
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class StoredRequest:
    request_id: str
    operation: str
    fingerprint: str
    response: str


class RequestAndRound(NamedTuple):
    """What a step reads first: its request id's record, and its round (None where missing)."""

    request: StoredRequest | None
    round: StoredRound | None


class OpenRoundExists(Exception):  # noqa: N818  (a condition, not an error of the store)
    """The table already has an unfinished round."""


def claim_table(tx: Transaction, operator: str, table_id: str) -> None:
    """Take ``operator``'s table for a new round, before its first event is appended; raises
    :class:`OpenRoundExists` if the table has an unfinished round (another operator's table of
    the same id is another table).

    The table's open-round row is read with the row lock. If a step of that round (its Settle or
    Void) is still running, the read waits for it; under READ COMMITTED it then re-checks the
    row's latest version, so a round that step finished no longer counts. The new round's event
    is therefore appended, and takes its outbox id, only after the previous round's final event
    committed: its id is larger and the sequencer cannot log it first (docs/audit.md,
    *Sequencing*). With no open row there is nothing to lock: two Shuffles of one table may both
    pass here, and the partial unique index on the rounds table lets only one insert its round
    (the other's step, event included, is rolled back and run again, and is refused here).
    """
    existing = tx.execute(
        f"SELECT round_id, state FROM rounds WHERE operator = ? AND table_id = ? AND {IS_OPEN}"
        f"{tx.row_lock}",
        (operator, table_id),
    )
    if existing:
        raise OpenRoundExists(str(existing[0][0]), str(existing[0][1]))


def insert_round(tx: Transaction, row: StoredRound) -> None:
    """Insert a new round, in the step that claimed its table (:func:`claim_table`)."""
    tx.write(
        f"INSERT INTO rounds ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            row.round_id,
            row.operator,
            row.table_id,
            row.state,
            row.record,
            row.server_seed,
            row.created_at,
            row.updated_at,
        ),
    )


def load_round(tx: Transaction, round_id: str) -> StoredRound | None:
    """A round, of whichever operator (a request's own round, read back for its answer)."""
    rows = tx.execute(f"SELECT {_COLUMNS} FROM rounds WHERE round_id = ?", (round_id,))
    return _round(rows[0]) if rows else None


def lock_round(tx: Transaction, round_id: str) -> StoredRound | None:
    """A round of whichever operator, locked for a step that has no request of its own (the
    service's completion)."""
    rows = tx.execute(f"SELECT {_COLUMNS} FROM rounds WHERE round_id = ?{tx.row_lock}", (round_id,))
    return _round(rows[0]) if rows else None


def update_round(tx: Transaction, round_id: str, state: str, record: str, updated_at: str) -> None:
    tx.write(
        "UPDATE rounds SET state = ?, record = ?, updated_at = ? WHERE round_id = ?",
        (state, record, updated_at, round_id),
    )


def set_deadline(tx: Transaction, round_id: str, due_at: str) -> None:
    """When the service completes the open round if nobody else does (a later step moves it)."""
    tx.write(
        "INSERT INTO round_deadlines (round_id, due_at) VALUES (?, ?)"
        " ON CONFLICT (round_id) DO UPDATE SET due_at = excluded.due_at",
        (round_id, due_at),
    )


def record_completion(tx: Transaction, round_id: str, completed_by: str) -> None:
    """The round is final: it has no deadline any more, and ``completed_by`` completed it now."""
    tx.write("DELETE FROM round_deadlines WHERE round_id = ?", (round_id,))
    tx.write(
        "INSERT INTO round_completions (round_id, completed_by, completed_at) VALUES (?, ?, ?)",
        (round_id, completed_by, tx.time),
    )


def due_rounds(reader: LogReader, now: str, limit: int) -> list[str]:
    """The ids of up to ``limit`` open rounds whose deadline is ``now`` or earlier, the most
    overdue first."""
    rows = reader.query(
        "SELECT round_id FROM round_deadlines WHERE due_at <= ? ORDER BY due_at, round_id LIMIT ?",
        (now, limit),
    )
    return [str(row[0]) for row in rows]


def read_round(reader: LogReader, round_id: str, *, operator: str | None) -> StoredRound | None:
    """The round ``round_id`` if it is ``operator``'s (of any operator if None)."""
    text, params = _of_operator(f"SELECT {_COLUMNS} FROM rounds WHERE round_id = ?", operator)
    rows = reader.query(text, (round_id, *params))
    return _round(rows[0]) if rows else None


def list_rounds(
    reader: LogReader,
    table_id: str | None,
    limit: int,
    after: tuple[str, str] | None = None,
    *,
    operator: str | None,
    states: Collection[str] | None = None,
    completed_by: str | None = None,
    completed_since: str | None = None,
) -> list[StoredRound]:
    """A table's rounds (every table's if ``table_id`` is None) of ``operator`` (of every
    operator if None: ``table_id`` then matches that table id at any operator), newest first,
    ``limit`` at a time; ``after`` is the (created_at, round_id) of the last round of the
    previous page; only rounds in one of ``states``, if given, and only rounds completed by
    ``completed_by`` or at ``completed_since`` or later, if given."""
    conditions: list[str] = []
    params: list[str] = []
    if completed_by is not None or completed_since is not None:
        completion = []
        if completed_by is not None:
            completion.append("completed_by = ?")
            params.append(completed_by)
        if completed_since is not None:
            completion.append("completed_at >= ?")
            params.append(completed_since)
        conditions.append(
            f"round_id IN (SELECT round_id FROM round_completions WHERE {' AND '.join(completion)})"
        )
    if operator is not None:
        conditions.append("operator = ?")
        params.append(operator)
    if table_id is not None:
        conditions.append("table_id = ?")
        params.append(table_id)
    if states is not None:
        conditions.append(f"state IN ({', '.join('?' for _ in states)})")
        params += sorted(states)
    if after is not None:
        # A row comparison, which both databases answer with a seek in the index.
        conditions.append("(created_at, round_id) < (?, ?)")
        params += [after[0], after[1]]
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    rows = reader.query(
        f"SELECT {_COLUMNS} FROM rounds{where} ORDER BY created_at DESC, round_id DESC LIMIT ?",
        (*params, limit),
    )
    return [_round(row) for row in rows]


def find_request(tx: Transaction, operator: str, request_id: str) -> StoredRequest | None:
    """``operator``'s record of ``request_id`` (another operator's of the same id is not it)."""
    rows = tx.execute(_FIND_REQUEST, (operator, request_id))
    return _request(rows[0]) if rows else None


def find_request_and_round(
    tx: Transaction, operator: str, request_id: str, round_id: str
) -> RequestAndRound:
    """``operator``'s record of a request id and its round (None where the round is not
    ``operator``'s), the round locked for the step. The round first: a step of the same round
    in another process is waited for, and the request read after it sees that step's request
    if it was this one's first try."""
    rounds, requests = tx.query_all(
        (
            f"SELECT {_COLUMNS} FROM rounds WHERE round_id = ? AND operator = ?{tx.row_lock}",
            (round_id, operator),
        ),
        (_FIND_REQUEST, (operator, request_id)),
    )
    return RequestAndRound(
        _request(requests[0]) if requests else None,
        _round(rounds[0]) if rounds else None,
    )


def save_request(tx: Transaction, operator: str, request: StoredRequest) -> None:
    """Keep ``operator``'s request and its answer."""
    tx.write(
        "INSERT INTO requests (operator, request_id, operation, fingerprint, response, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (
            operator,
            request.request_id,
            request.operation,
            request.fingerprint,
            request.response,
            tx.time,
        ),
    )


def _of_operator(text: str, operator: str | None) -> tuple[str, tuple[str, ...]]:
    """``text`` (a query ending in its conditions) limited to ``operator``'s rows, if given."""
    return (text, ()) if operator is None else (f"{text} AND operator = ?", (operator,))


def _request(row: Row) -> StoredRequest:
    return StoredRequest(*(str(value) for value in row))


def _round(row: Row) -> StoredRound:
    return StoredRound(*(str(value) for value in row))
