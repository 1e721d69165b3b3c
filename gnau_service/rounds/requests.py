"""The checks of a request's fields before the dealer acts on it; each failure raises
:class:`~gnau_service.rounds.refusals.InvalidRequest` naming every bad field it found.

>>> check_table_id("table 7")
>>> try:
...     check_round_id("")
... except InvalidRequest as error:
...     [path for path, _ in error.violations]
['round_id']
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

from gnau_service.audit.round_events import VoidReason
from gnau_service.fairness.deal import max_seats
from gnau_service.fairness.errors import FairnessError, LockError
from gnau_service.fairness.transcript import MAX_PLAYER_ID_BYTES, Beacon, LockedSeat
from gnau_service.fairness.validation import require_text
from gnau_service.rounds.limits import (
    MAX_COMPLETED_BY_BYTES,
    MAX_JSON_INTEGER,
    MAX_ROUND_ID_BYTES,
    MAX_TABLE_ID_BYTES,
    MAX_VOID_REASON_BYTES,
    MOST_SEATS,
)
from gnau_service.rounds.refusals import InvalidRequest
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.settlement import largest_payout


@dataclass(frozen=True)
class SeatRequest:
    """A seat as a client asks for it, before validation."""

    seat_number: int
    player_id: str
    stake: int
    client_seed: bytes = b""


def check_table_id(table_id: str) -> None:
    """A table id: 1 to 128 bytes of UTF-8, no control character, no space at either end."""
    if not _is_name(table_id, MAX_TABLE_ID_BYTES) or table_id != table_id.strip(" "):
        raise InvalidRequest(
            [
                (
                    "table_id",
                    f"must be 1 to {MAX_TABLE_ID_BYTES} bytes of UTF-8, with no control "
                    "character and no space at either end",
                )
            ]
        )


def check_round_id(round_id: str) -> None:
    """A round id a round could have: 1 to 128 bytes of UTF-8, no control character (a
    well-formed id of no round is NOT_FOUND, later)."""
    if not _is_name(round_id, MAX_ROUND_ID_BYTES):
        raise InvalidRequest(
            [
                (
                    "round_id",
                    f"must be 1 to {MAX_ROUND_ID_BYTES} bytes of UTF-8, with no control character",
                )
            ]
        )


def check_void_reason(reason_code: VoidReason | None, reason: str) -> VoidReason:
    """Why an operator voids a round: a code of the closed list that an operator may use, and
    free text of at most :data:`MAX_VOID_REASON_BYTES` bytes with no control character."""
    violations = []
    if reason_code is None or not reason_code.operator_may_use:
        codes = ", ".join(code for code in VoidReason if code.operator_may_use)
        violations.append(("reason_code", f"must be one of {codes}"))
    if reason and not _is_name(reason, MAX_VOID_REASON_BYTES):
        violations.append(
            (
                "reason",
                f"must be 0 to {MAX_VOID_REASON_BYTES} bytes of UTF-8, with no control character",
            )
        )
    if violations:
        raise InvalidRequest(violations)
    assert reason_code is not None
    return reason_code


def check_completed_by(completed_by: str) -> None:
    """A ListRounds filter on who completed a round: an actor's length, no control character."""
    if completed_by and not _is_name(completed_by, MAX_COMPLETED_BY_BYTES):
        raise InvalidRequest(
            [
                (
                    "completed_by",
                    f"must be 0 to {MAX_COMPLETED_BY_BYTES} bytes of UTF-8, with no control "
                    "character",
                )
            ]
        )


class SeatLimits(NamedTuple):
    """What a Deal's seats are held to: its table's limits (:mod:`~gnau_service.rounds.catalogue`)
    within the service's ``--max-stake``."""

    max_stake: int
    min_stake: int = 1
    max_seats: int = MOST_SEATS


def locked_seats(
    rules: HouseRules,
    seats: Sequence[SeatRequest],
    beacon: tuple[str, bytes] | None,
    limits: SeatLimits,
) -> tuple[tuple[LockedSeat, ...], Beacon | None]:
    """The seats and the beacon of a Deal under ``rules``, each validated, every bad field
    reported at once."""
    violations: list[tuple[str, str]] = []
    most = max_seats(rules.decks)
    min_stake, max_stake = limits.min_stake, limits.max_stake
    if not seats:
        violations.append(("seats", "a round needs at least one seat"))
    if len(seats) > most:
        violations.append(
            ("seats", f"{len(seats)} seats, but {rules.decks} deck(s) deal at most {most}")
        )
    elif len(seats) > limits.max_seats:
        violations.append(
            ("seats", f"{len(seats)} seats, but the table seats at most {limits.max_seats}")
        )
    locked: list[LockedSeat] = []
    seen: set[int] = set()
    payout = largest_payout(rules)
    for i, seat in enumerate(seats):
        path = f"seats[{i}]"
        # LockedSeat checks each field's range (seat numbers 1 to 2^31-1, gaps allowed).
        if seat.seat_number in seen:
            violations.append((f"{path}.seat_number", f"seat {seat.seat_number} is repeated"))
        seen.add(seat.seat_number)
        if not min_stake <= seat.stake <= max_stake:
            violations.append(
                (f"{path}.stake", f"must be from {min_stake:,} to {max_stake:,}, got {seat.stake}")
            )
            continue
        if seat.stake * payout > MAX_JSON_INTEGER:
            violations.append(
                (
                    f"{path}.stake",
                    f"{seat.stake:,} x the largest payout ({payout}) exceeds 2^53-1, "
                    "the most the audit log can hold",
                )
            )
            continue
        try:
            # The platform's id, checked as the request's own field; what the round locks and
            # publishes as the seat's player is decided below it.
            require_text(
                seat.player_id,
                field="player_id",
                max_bytes=MAX_PLAYER_ID_BYTES,
                error=LockError,
                where=f"seat {seat.seat_number}: ",
            )
            if "\x00" in seat.player_id:
                # The store keys the player's secret by the id, and no text column holds NUL.
                raise LockError(
                    f"seat {seat.seat_number}: player_id must not hold NUL (U+0000)",
                    field="player_id",
                )
            locked.append(
                LockedSeat(seat.seat_number, seat.player_id, seat.stake, seat.client_seed)
            )
        except FairnessError as error:
            violations.append((f"{path}.{error.field}", str(error)))
    exposure = sum(seat.stake for seat in locked) * payout
    if exposure > MAX_JSON_INTEGER and len(locked) == len(seats):
        violations.append(
            (
                "seats",
                f"the stakes sum to {exposure // payout:,}; x the largest payout ({payout}), "
                "the dealer's result could exceed 2^53-1, the most the audit log can hold",
            )
        )
    locked_beacon = None
    if beacon is not None:
        try:
            locked_beacon = Beacon(*beacon)
        except FairnessError as error:
            violations.append((f"beacon.{error.field}", str(error)))
    if violations:
        raise InvalidRequest(violations)
    return tuple(locked), locked_beacon


def check_player_id(player_id: str, path: str = "player_id") -> None:
    """A platform's player id, as a seat of Deal takes it: 1 to 128 bytes of UTF-8, and no NUL
    (which no database text column holds). The refusal never quotes the id.

    >>> check_player_id("alice@example.com")
    >>> try:
    ...     check_player_id("")
    ... except InvalidRequest as error:
    ...     error.violations
    (('player_id', 'must be 1 to 128 bytes of UTF-8, with no NUL'),)
    """
    try:
        size = len(player_id.encode("utf-8"))
    except UnicodeEncodeError:
        size = 0
    if not 1 <= size <= MAX_PLAYER_ID_BYTES or "\x00" in player_id:
        raise InvalidRequest(
            [(path, f"must be 1 to {MAX_PLAYER_ID_BYTES} bytes of UTF-8, with no NUL")]
        )


def _is_name(text: str, max_bytes: int) -> bool:
    # No control character: NUL, in particular, no database text column can hold.
    return bool(text) and len(text.encode()) <= max_bytes and not _CONTROL.search(text)


#: C0 and C1 control characters and DEL.
_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f]")
