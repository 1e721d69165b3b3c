"""The private player tables: each player's secret key, and which player each seat names.

A seat of a round holds a *player reference* (``p-`` and 32 hex digits), an HMAC under its
player's secret key of the round id and the seat number; the log, the round records, receipts
and exports hold the reference only. These two tables are what links references back to the
platform's ``player_id``, and they are private: nothing of the log, no export and no bundle
reads them (a backup copies them like every table). The store does not compute a reference: it
keeps the keys and the links (the server computes, and re-checks, the HMAC).

A player is an operator's (:mod:`gnau_service.audit.operators`): the player ``"42"`` of one
operator and the player ``"42"`` of another are two players, each with a key of their own.

- ``player_keys(operator, player_id, secret, created_at)``: one 32-byte key per player of an
  operator, made the first time the player is seated (:func:`player_key`, inside Deal's unit of
  work);
- ``player_seats(player_ref, player_id, round_id, seat_number, operator)``: one row per seat
  dealt (:func:`link_seats`, in the same unit), indexed by operator and ``player_id``. A
  reference is unique across operators (each is an HMAC under a random key).

:func:`forget_player` deletes a player's key and every link of theirs in one unit of work
(crypto-shredding): once it commits, nothing the store holds links their references to them.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Final

from gnau_service.store.connections import Row
from gnau_service.store.reader import LogReader, ReadSource, read_rows
from gnau_service.store.transaction import Transaction

#: The length of a player's secret key, in bytes.
PLAYER_KEY_BYTES: Final = 32

_SEAT_COLUMNS = "player_ref, player_id, round_id, seat_number, operator"


@dataclass(frozen=True)
class PlayerSeat:
    """One link: the seat ``seat_number`` of ``round_id``, named ``player_ref``, is the player
    ``player_id`` of ``operator``."""

    player_ref: str
    player_id: str
    round_id: str
    seat_number: int
    operator: str


@dataclass(frozen=True)
class ForgottenPlayer:
    """What forgetting a player deleted: whether they had a key, and how many seat links."""

    key_deleted: bool
    seats_unlinked: int


def _fresh_key() -> bytes:
    return secrets.token_bytes(PLAYER_KEY_BYTES)


def player_key(
    tx: Transaction, operator: str, player_id: str, new_key: Callable[[], bytes] = _fresh_key
) -> bytes:
    """``operator``'s player ``player_id``'s secret key, made with ``new_key()`` (32 bytes) and
    kept if the player has none yet (:func:`player_keys` of one player)."""
    return player_keys(tx, operator, [player_id], lambda _: new_key())[player_id]


def player_keys(
    tx: Transaction,
    operator: str,
    player_ids: Collection[str],
    new_key: Callable[[str], bytes] = lambda _: _fresh_key(),
) -> dict[str, bytes]:
    """The secret key of each of ``operator``'s ``player_ids``, a new one made with
    ``new_key(player_id)`` (32 bytes) and kept for each player who has none yet: one query for
    those who have one. Two processes seating a new player at once keep one key: the loser of the
    insert reads the winner's (on PostgreSQL the insert waits for the other transaction to end)."""
    keys = read_player_keys(tx, operator, player_ids)
    missing = sorted(set(player_ids) - keys.keys())
    for player_id in missing:
        key = new_key(player_id)
        if len(key) != PLAYER_KEY_BYTES:
            raise ValueError(f"a player key is {PLAYER_KEY_BYTES} bytes, not {len(key)}")
        tx.execute(
            "INSERT INTO player_keys (operator, player_id, secret, created_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (operator, player_id) DO NOTHING",
            (operator, player_id, key, tx.time),
        )
    if missing:
        keys.update(read_player_keys(tx, operator, missing))
    return keys


def link_seats(tx: Transaction, seats: Sequence[PlayerSeat]) -> None:
    """Record which player each of ``seats`` names (in the unit of work that deals them)."""
    for seat in seats:
        tx.write(
            f"INSERT INTO player_seats ({_SEAT_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
            (seat.player_ref, seat.player_id, seat.round_id, seat.seat_number, seat.operator),
        )


def forget_player(tx: Transaction, operator: str, player_id: str) -> ForgottenPlayer:
    """Delete the key of ``operator``'s player ``player_id`` and every link of theirs (the
    same id at another operator is another player, left alone); what was deleted."""
    player = (operator, player_id)
    keys, links = tx.query_all(
        (
            f"SELECT player_id FROM player_keys WHERE operator = ? AND player_id = ?{tx.row_lock}",
            player,
        ),
        ("SELECT COUNT(*) FROM player_seats WHERE operator = ? AND player_id = ?", player),
    )
    tx.execute("DELETE FROM player_seats WHERE operator = ? AND player_id = ?", player)
    tx.execute("DELETE FROM player_keys WHERE operator = ? AND player_id = ?", player)
    return ForgottenPlayer(key_deleted=bool(keys), seats_unlinked=int(links[0][0]))


# -- reads (of the operator's and the auditor's answers) --------------------------------------


def read_player_key(source: ReadSource, operator: str, player_id: str) -> bytes | None:
    """The secret key of ``operator``'s player ``player_id``, or None if they have none (never
    seated, or forgotten)."""
    return read_player_keys(source, operator, [player_id]).get(player_id)


def read_player_keys(
    source: ReadSource, operator: str, player_ids: Collection[str]
) -> dict[str, bytes]:
    """The secret key of each of ``operator``'s ``player_ids`` who has one, in one query, read
    by a reader or inside a unit of work."""
    if not player_ids:
        return {}
    wanted = sorted(set(player_ids))
    marks = ", ".join("?" for _ in wanted)
    rows = read_rows(
        source,
        f"SELECT player_id, secret FROM player_keys WHERE operator = ? AND player_id IN ({marks})",
        [operator, *wanted],
    )
    return {str(row[0]): _secret(row[1:]) for row in rows}


def keys_of_player(source: ReadSource, player_id: str, *, operator: str | None) -> dict[str, bytes]:
    """The secret key of the player ``player_id`` of ``operator`` (of every operator that has a
    player of that id, if None), by operator."""
    condition, params = _of_operator("player_id = ?", player_id, operator)
    rows = read_rows(source, f"SELECT operator, secret FROM player_keys WHERE {condition}", params)
    return {str(row[0]): _secret(row[1:]) for row in rows}


def seats_of_player(reader: LogReader, player_id: str, *, operator: str | None) -> list[PlayerSeat]:
    """Every seat linked to the player ``player_id`` of ``operator`` (of every operator that
    has a player of that id, if None), by operator, round id and seat number."""
    condition, params = _of_operator("player_id = ?", player_id, operator)
    rows = reader.query(
        f"SELECT {_SEAT_COLUMNS} FROM player_seats WHERE {condition}"
        " ORDER BY operator, round_id, seat_number",
        params,
    )
    return [_seat(row) for row in rows]


def seat_of_ref(reader: LogReader, player_ref: str, *, operator: str | None) -> PlayerSeat | None:
    """The seat ``player_ref`` names if it is of a player of ``operator`` (of any, if None), or
    None if nothing links it to one."""
    condition, params = _of_operator("player_ref = ?", player_ref, operator)
    rows = reader.query(f"SELECT {_SEAT_COLUMNS} FROM player_seats WHERE {condition}", params)
    return _seat(rows[0]) if rows else None


def players_of_refs(source: ReadSource, player_refs: Collection[str]) -> dict[str, str]:
    """The player id of each of ``player_refs`` still linked to one, in one query, read by a
    reader or inside a unit of work (a reference of a forgotten player, or of no seat, is left
    out)."""
    if not player_refs:
        return {}
    wanted = sorted(set(player_refs))
    marks = ", ".join("?" for _ in wanted)
    text = f"SELECT player_ref, player_id FROM player_seats WHERE player_ref IN ({marks})"
    return {str(ref): str(player) for ref, player in read_rows(source, text, wanted)}


def _of_operator(condition: str, value: str, operator: str | None) -> tuple[str, tuple[str, ...]]:
    """``condition`` on ``value``, and on the operator if one is given."""
    if operator is None:
        return condition, (value,)
    return f"operator = ? AND {condition}", (operator, value)


def _secret(row: Row) -> bytes:
    return bytes(row[0])


def _seat(row: Row) -> PlayerSeat:
    return PlayerSeat(str(row[0]), str(row[1]), str(row[2]), int(row[3]), str(row[4]))
