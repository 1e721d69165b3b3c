"""Lock: the seats and the optional beacon, hashed with the commitment into the transcript.

The transcript is fixed before any card exists::

    transcript_hash = SHA-256( frame(LOCK_TAG) || frame(commitment) || frame(seats)
                               || frame(beacon) )

``seats`` is every seat, in ascending seat-number order, each one framed. In a v3 round
(:class:`~gnau_service.fairness.encoding.FairnessVersion`) a seat is
``frame(frame(uint64(seat_number)) || frame(client_seed))``: neither who sits there nor the
stake is hashed, so neither can move a card. In a v2 round it was
``frame(frame(uint64(seat_number)) || frame(uint64(stake)) || frame(client_seed))``, and in a
v1 round ``frame(frame(uint64(seat_number)) || frame(player_id) || frame(uint64(stake))
|| frame(client_seed))``. ``beacon`` is ``00`` when there is none, else
``01 || frame(label) || frame(value)``. Every contribution enters through the hash, never by
XOR, so no participant can choose a value that cancels another's.

>>> from gnau_service.fairness.encoding import FairnessVersion
>>> ann, bob = "p-" + "ab" * 16, "p-" + "cd" * 16
>>> seats = [LockedSeat(2, bob, 250), LockedSeat(1, ann, 100, client_seed=b"lucky")]
>>> [seat.seat_number for seat in canonical_seats(seats, FairnessVersion.V3)]
[1, 2]
>>> compute_transcript_hash(bytes(32), seats, None, FairnessVersion.V2).hex()[:16]
'3e3311babd9ff3e2'
>>> v3 = compute_transcript_hash(bytes(32), seats, None, FairnessVersion.V3)
>>> richer = [LockedSeat(2, bob, 9_000), LockedSeat(1, ann, 1, client_seed=b"lucky")]
>>> v3 == compute_transcript_hash(bytes(32), richer, None, FairnessVersion.V3)
True
>>> v1_seats = [LockedSeat(2, "bob", 250), LockedSeat(1, "alice", 100, client_seed=b"lucky")]
>>> compute_transcript_hash(bytes(32), v1_seats, None, FairnessVersion.V1).hex()[:16]
'b659190b16e168f7'
>>> LockedSeat(1, "", 100)
Traceback (most recent call last):
...
gnau_service.fairness.errors.LockError: seat 1: player must be a non-empty string, got ''
>>> canonical_seats([LockedSeat(1, "alice", 100)], FairnessVersion.V2)
Traceback (most recent call last):
...
gnau_service.fairness.errors.LockError: seat 1: a v2 round names a player by a reference ...
>>> canonical_seats([LockedSeat(1, "alice", 100)], FairnessVersion.V3)
Traceback (most recent call last):
...
gnau_service.fairness.errors.LockError: seat 1: a v3 round names a player by a reference ...
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import Final

from gnau_service.common.quoting import quoted
from gnau_service.fairness.commitment import require_hash
from gnau_service.fairness.encoding import LOCK_TAGS, FairnessVersion, frames, uint64, utf8
from gnau_service.fairness.errors import LockError
from gnau_service.fairness.player_refs import is_player_ref
from gnau_service.fairness.validation import require_bytes, require_int, require_text

# Seat numbers fit a 32-bit and stakes a 64-bit signed integer column, so every locked value
# can be stored as it was hashed.
MAX_SEAT_NUMBER: Final = 2**31 - 1
MAX_STAKE: Final = 2**63 - 1
MAX_PLAYER_ID_BYTES: Final = 128
MAX_CLIENT_SEED_BYTES: Final = 64
MAX_BEACON_LABEL_BYTES: Final = 128
MAX_BEACON_VALUE_BYTES: Final = 1024

_NO_BEACON: Final = b"\x00"
_BEACON_PRESENT: Final = b"\x01"


@dataclass(frozen=True, slots=True)
class LockedSeat:
    """One player's seat as locked: who sits where, for how much, with which client seed.

    ``player`` is who sits there as the round publishes it: from v2 on a player reference
    (:mod:`~gnau_service.fairness.player_refs`), in a v1 round the platform's player id.
    ``stake`` is in minor currency units: locked in every version, hashed only before v3.
    ``client_seed`` is the player's own contribution to the shuffle (0 to 64 bytes; empty means
    the player gave none).
    """

    seat_number: int
    player: str
    stake: int
    client_seed: bytes = b""

    def __post_init__(self) -> None:
        require_int(
            self.seat_number,
            field="seat_number",
            minimum=1,
            maximum=MAX_SEAT_NUMBER,
            error=LockError,
        )
        where = f"seat {self.seat_number}: "
        require_text(
            self.player,
            field="player",
            max_bytes=MAX_PLAYER_ID_BYTES,
            error=LockError,
            where=where,
        )
        require_int(
            self.stake, field="stake", minimum=1, maximum=MAX_STAKE, error=LockError, where=where
        )
        require_bytes(
            self.client_seed,
            field="client_seed",
            min_bytes=0,
            max_bytes=MAX_CLIENT_SEED_BYTES,
            error=LockError,
            where=where,
        )

    def encode(self, version: FairnessVersion) -> bytes:
        """The seat's framed fields, as they enter the transcript of a ``version`` round."""
        if version is FairnessVersion.V1:
            return frames(
                uint64(self.seat_number), utf8(self.player), uint64(self.stake), self.client_seed
            )
        if version.hashes_stakes:
            return frames(uint64(self.seat_number), uint64(self.stake), self.client_seed)
        return frames(uint64(self.seat_number), self.client_seed)


@dataclass(frozen=True, slots=True)
class Beacon:
    """A public random value from outside the service, fixed as part of the lock.

    ``label`` says where the value comes from and which pulse it is (say
    ``"drand/quicknet/round/1234567"``), so that anyone can fetch it and compare.
    """

    label: str
    value: bytes

    def __post_init__(self) -> None:
        require_text(
            self.label,
            field="label",
            max_bytes=MAX_BEACON_LABEL_BYTES,
            error=LockError,
            where="beacon ",
        )
        require_bytes(
            self.value,
            field="value",
            min_bytes=1,
            max_bytes=MAX_BEACON_VALUE_BYTES,
            error=LockError,
            where="beacon ",
        )

    def encode(self) -> bytes:
        """``01`` then the framed label and value (a missing beacon is the single byte ``00``)."""
        return _BEACON_PRESENT + frames(utf8(self.label), self.value)


def canonical_seats(
    seats: Iterable[LockedSeat], version: FairnessVersion
) -> tuple[LockedSeat, ...]:
    """The seats in ascending seat-number order, refusing an empty table, a doubled seat, or
    from v2 on a player that is not a reference or a reference given twice.

    The order seats were given in does not matter: the transcript and the deal both use this.
    A reference is written in lower case only, unlike the hex of seeds and hashes: it is a name,
    compared as text with the signed entry and the player's links, not bytes to decode. Each is
    made for its own seat, so two seats of one round never share one.
    """
    given = list(seats)
    if not given:
        raise LockError("a round needs at least one seat", field="seats")
    for seat in given:
        if not isinstance(seat, LockedSeat):
            raise LockError(f"seats must be LockedSeat values, got {seat!r}", field="seats")
        if version.names_players_by_reference and not is_player_ref(seat.player):
            raise LockError(
                f"seat {seat.seat_number}: a v{int(version)} round names a player by a "
                f"reference (p- and 32 lower-case hex digits), not by {quoted(seat.player)}",
                field="player",
            )
    ordered = sorted(given, key=attrgetter("seat_number"))
    for before, after in itertools.pairwise(ordered):
        if before.seat_number == after.seat_number:
            raise LockError(f"seat {after.seat_number} is locked twice", field="seat_number")
    if version.names_players_by_reference:
        seat_of: dict[str, int] = {}
        for seat in ordered:
            first = seat_of.setdefault(seat.player, seat.seat_number)
            if first != seat.seat_number:
                raise LockError(
                    f"seat {seat.seat_number}: player reference {seat.player} is seat "
                    f"{first}'s too: a reference names one seat of one round",
                    field="player",
                )
    return tuple(ordered)


def encode_beacon(beacon: Beacon | None) -> bytes:
    """The beacon field of the transcript: ``00`` for none, else :meth:`Beacon.encode`."""
    if beacon is None:
        return _NO_BEACON
    if not isinstance(beacon, Beacon):
        raise LockError(f"beacon must be a Beacon or None, got {beacon!r}", field="beacon")
    return beacon.encode()


def transcript_preimage(
    commitment: bytes,
    seats: Iterable[LockedSeat],
    beacon: Beacon | None,
    version: FairnessVersion,
) -> bytes:
    """The exact bytes whose SHA-256 is the transcript hash."""
    require_hash(commitment, "commitment")
    encoded_seats = frames(*(seat.encode(version) for seat in canonical_seats(seats, version)))
    return frames(LOCK_TAGS[version], commitment, encoded_seats, encode_beacon(beacon))


def compute_transcript_hash(
    commitment: bytes,
    seats: Iterable[LockedSeat],
    beacon: Beacon | None,
    version: FairnessVersion,
) -> bytes:
    """SHA-256 of :func:`transcript_preimage`: what the shuffle is keyed with besides the seed."""
    return hashlib.sha256(transcript_preimage(commitment, seats, beacon, version)).digest()
