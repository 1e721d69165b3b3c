"""Players behind their references: forgetting one (crypto-shredding), and the auditor's lookup.

A seat of a round after v1 names its player by a *player reference*, an HMAC under the player's
secret key (:mod:`gnau_service.fairness.player_refs`); the keys and the links from references
to the platform's ``player_id`` live in the store's private tables
(:mod:`gnau_service.store.players`), never in the log. A player is an operator's: the same
``player_id`` at two operators is two players, with two keys, and one operator's forget or
lookup never reaches the other's.

- :func:`forget_player` (``DealerService.ForgetPlayer``, operator only): one unit of work
  deletes the player's key and every link of theirs and appends a ``PLAYER_FORGOTTEN`` event
  whose payload names the actor and the operator only. Nothing of the log changes, so every
  proof still verifies; nothing the store holds links the references to the player any more.
  Then the store scrubs the older copies of the deleted rows that its files keep (SQLite's
  ``-wal`` file), before the call is answered. The request record of a retried forget keeps
  its answer and its request id only: no trace of the player id, not even a hash.
- :func:`lookup_player` (``AuditService.LookupPlayer``, auditor and operator): a player id to
  their seats, or a reference to its player, while the key exists; each link is re-checked by
  recomputing the reference under the stored key, so a row that does not match is not shown.
  Scoped to an operator, or across every operator for an all-operator auditor.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import structlog

from gnau_service.audit.entries import EntryKind
from gnau_service.audit.operators import operator_id
from gnau_service.audit.round_events import with_actor_and_operator
from gnau_service.fairness.encoding import FairnessVersion
from gnau_service.fairness.player_refs import is_player_ref, new_player_key, player_ref
from gnau_service.fairness.transcript import LockedSeat
from gnau_service.rounds.record import RoundRecord
from gnau_service.rounds.refusals import InvalidRequest, RequestConflict
from gnau_service.rounds.requests import check_player_id
from gnau_service.store import LogReader, PendingEntry, Store, Transaction
from gnau_service.store.errors import ScrubIncomplete
from gnau_service.store.players import (
    PlayerSeat,
    keys_of_player,
    link_seats,
    player_keys,
    players_of_refs,
    read_player_keys,
    seat_of_ref,
    seats_of_player,
)
from gnau_service.store.players import (
    forget_player as forget_player_rows,
)
from gnau_service.store.reader import ReadSource
from gnau_service.store.round_rows import StoredRequest, find_request, save_request

log = structlog.get_logger("gnau.players")

#: The operation a forget's request record names.
FORGET_OPERATION: Final = "ForgetPlayer"


# -- the deal: references in, player ids out --------------------------------------------------


def seat_references(
    tx: Transaction,
    operator: str,
    round_id: str,
    seats: Sequence[LockedSeat],
    made: Mapping[str, bytes] | None = None,
) -> tuple[LockedSeat, ...]:
    """``seats``, locked with ``operator``'s player ids, named instead by their references in
    round ``round_id``; each player's key is made if they have none (one query for the keys of
    those who have one), and each link is recorded, in the deal's unit of work. A player with no
    key gets the one ``made`` for them ahead (:func:`planned_references`), if any."""
    made = made or {}
    keys = player_keys(
        tx,
        operator,
        {seat.player for seat in seats},
        lambda player: made.get(player) or new_player_key(),
    )
    named = _named_seats(keys, round_id, seats)
    link_seats(
        tx,
        [
            PlayerSeat(ref.player, seat.player, round_id, seat.seat_number, operator)
            for ref, seat in zip(named, seats, strict=True)
        ],
    )
    return named


def planned_references(
    source: ReadSource, operator: str, round_id: str, seats: Sequence[LockedSeat]
) -> tuple[tuple[LockedSeat, ...], dict[str, bytes]]:
    """What :func:`seat_references` will name ``seats`` by, planned ahead of the deal's unit of
    work from the keys ``source`` reads, and the keys made now for the players who have none
    (for the unit to keep). Nothing is written: the unit names the seats again, and a plan whose
    names differ (a key made meanwhile by another deal) is not used."""
    keys = read_player_keys(source, operator, {seat.player for seat in seats})
    made = {seat.player: new_player_key() for seat in seats if seat.player not in keys}
    return _named_seats(keys | made, round_id, seats), made


def _named_seats(
    keys: Mapping[str, bytes], round_id: str, seats: Sequence[LockedSeat]
) -> tuple[LockedSeat, ...]:
    return tuple(
        LockedSeat(
            seat.seat_number,
            player_ref(keys[seat.player], round_id, seat.seat_number),
            seat.stake,
            seat.client_seed,
        )
        for seat in seats
    )


def deal_fingerprint(body: str, seats: Iterable[tuple[int, str]]) -> str:
    """The fingerprint a Deal's request record keeps: of its body without the player ids
    (``body``), and of each seat's number and published name (its reference after v1). So
    the record holds only what the log publishes: no hash of a player id, which anyone with the
    round could test guesses against."""
    text = body + "".join(f"\n{number}:{name}" for number, name in sorted(seats))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def retried_names(
    tx: Transaction, record: RoundRecord, seats: Iterable[tuple[int, str]]
) -> list[tuple[int, str]]:
    """The published name of each (seat number, player id) of a retried Deal of ``record``'s
    round, under the keys of its operator's players as they are (no key is made: a player
    forgotten since has none, and their retry no longer matches)."""
    seats = list(seats)
    if record.version is FairnessVersion.V1:
        return seats
    keys = read_player_keys(tx, record.operator, {player for _, player in seats})
    return [
        (number, player_ref(keys[player], record.round_id, number) if player in keys else "")
        for number, player in seats
    ]


def seat_players(source: ReadSource, records: Iterable[RoundRecord]) -> dict[str, str]:
    """The player id of each seat reference of ``records`` still linked to one, in one query
    (none for v1 rounds, whose seats hold the platform's ids)."""
    refs = [
        seat.player
        for record in records
        if record.version is not FairnessVersion.V1
        for seat in record.seats
    ]
    return players_of_refs(source, refs) if refs else {}


# -- forgetting --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Forgotten:
    """The answer to a forget: whether a key was deleted, how many links, and the index of the
    ``PLAYER_FORGOTTEN`` entry (0 if nothing was forgotten and so nothing logged)."""

    forgotten: bool
    seats_unlinked: int
    log_index: int


async def forget_player(
    store: Store,
    player_id: str,
    request_id: str | None,
    *,
    operator: str,
    actor: str,
    deadline: float | None = None,
) -> Forgotten:
    """Forget ``operator``'s player ``player_id`` in one unit of work; with a ``request_id``
    (``operator``'s own), a retry gets the first answer (only the id is matched: the record
    keeps nothing of the player). The entry names the ``actor`` who asked and the operator,
    and nothing of the player. ``deadline``: the call's, as :meth:`Store.run_async
    <gnau_service.store.store.Store.run_async>` takes it."""
    check_player_id(player_id)
    operator_id(operator)

    def unit(tx: Transaction) -> tuple[dict[str, int], list[PendingEntry]]:
        if request_id is not None:
            request = find_request(tx, operator, request_id)
            if request is not None:
                if request.operation != FORGET_OPERATION:
                    raise RequestConflict(request_id, request.operation)
                saved: dict[str, int] = json.loads(request.response)
                pending = saved["pending_id"]
                return saved, tx.refer([pending]) if pending else []
        gone = forget_player_rows(tx, operator, player_id)
        pending = 0
        if gone.key_deleted or gone.seats_unlinked:
            payload = with_actor_and_operator({}, actor, operator)
            pending = tx.append(EntryKind.PLAYER_FORGOTTEN, payload).id
        saved = {
            "forgotten": int(gone.key_deleted),
            "seats_unlinked": gone.seats_unlinked,
            "pending_id": pending,
        }
        if request_id is not None:
            save_request(
                tx,
                operator,
                StoredRequest(request_id, FORGET_OPERATION, "", json.dumps(saved, sort_keys=True)),
            )
        return saved, list(tx.appended)

    saved, entries = await store.run_async(unit, deadline=deadline)
    # Deleted is not yet erased: the database's files may still hold older copies of the rows.
    # Every forget scrubs, a retry included, so a retry finishes a scrub that failed.
    try:
        await store.scrub_deleted_rows(deadline=deadline)
    except ScrubIncomplete as error:
        log.warning(
            "erased rows still on disk; a retry of the forget scrubs again", cause=str(error)
        )
        raise
    return Forgotten(
        forgotten=bool(saved["forgotten"]),
        seats_unlinked=saved["seats_unlinked"],
        log_index=entries[0].index if entries else 0,
    )


def check_lookup(player_id: str | None, reference: str | None) -> None:
    """Exactly one of a player id and a player reference, each well-formed."""
    if (player_id is None) == (reference is None):
        raise InvalidRequest([("player", "give exactly one of player_id and player_ref")])
    if player_id is not None:
        check_player_id(player_id)
    elif not is_player_ref(reference):
        raise InvalidRequest(
            [("player_ref", "must be a player reference: p- and 32 lower-case hex digits")]
        )


def lookup_player(
    store: LogReader,
    *,
    operator: str | None,
    player_id: str | None = None,
    reference: str | None = None,
) -> tuple[str, list[PlayerSeat]]:
    """The seats of ``operator``'s player ``player_id``, or the seat ``reference`` names and
    its player if it is ``operator``'s, while the player's key exists; ``("", [])`` otherwise.
    With ``operator`` None (an all-operator auditor) every operator's: the seats of each
    operator's player of that id. Every link shown is re-checked against its player's key.
    Blocking: call it from a thread."""
    check_lookup(player_id, reference)
    if reference is not None:
        seat = seat_of_ref(store, reference, operator=operator)
        if seat is None:
            return "", []
        player_id, candidates, operator = seat.player_id, [seat], seat.operator
    else:
        assert player_id is not None
        candidates = seats_of_player(store, player_id, operator=operator)
    keys = keys_of_player(store, player_id, operator=operator)
    if not keys:
        return "", []
    seats = [
        seat
        for seat in candidates
        if seat.operator in keys
        and player_ref(keys[seat.operator], seat.round_id, seat.seat_number) == seat.player_ref
    ]
    if reference is not None and not seats:
        return "", []
    return player_id, seats
