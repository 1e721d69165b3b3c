"""Player references: how a round after v1 (v2, v3) names who sits at each seat without naming them.

A reference is a keyed hash of the round id and the seat number under a secret key that the
service keeps for each player (a private table of the store, never the log)::

    player_ref = "p-" || hex( HMAC-SHA-256( key, frame(PLAYER_REF_TAG) || frame(round_id)
                                                 || frame(uint64(seat_number)) )[:16] )

- *Unlinkable*: without the key, two references of one player look like independent random
  128-bit strings, in one round or in two; the platform's player id never enters the hash.
- *Checkable*: whoever holds the key (the operator, an auditor) can recompute a reference and
  so show that a seat was that player's.
- *Erasable*: once the key is deleted nobody can recompute or link any of the player's
  references, while every entry that holds them stays byte for byte as it was signed.
- *Outside the deck*: no transcript after v1 hashes the reference, so a key drawn at the deal
  (after the commitment) cannot move a single card.

>>> key = bytes(range(32))
>>> player_ref(key, "r-1", 1)
'p-e23e081f6208b581deea5d6aaa8af11d'
>>> player_ref(key, "r-1", 2) != player_ref(key, "r-1", 1) != player_ref(key, "r-2", 1)
True
>>> is_player_ref(player_ref(key, "r-1", 1)), is_player_ref("alice@example.com")
(True, False)
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Final

from gnau_service.fairness.encoding import PLAYER_REF_TAG, frames, uint64, utf8

PLAYER_KEY_BYTES: Final = 32
PLAYER_REF_BYTES: Final = 16
"""128 bits: no two references collide in the life of any log, and none can be guessed."""
PLAYER_REF_PREFIX: Final = "p-"
PLAYER_REF_PATTERN: Final = re.compile(r"p-[0-9a-f]{32}")


def new_player_key() -> bytes:
    """A fresh 256-bit key for a player first seen, from the operating system's CSPRNG."""
    return secrets.token_bytes(PLAYER_KEY_BYTES)


def player_ref(key: bytes, round_id: str, seat_number: int) -> str:
    """The reference of the player holding ``key`` at ``seat_number`` of ``round_id``."""
    if len(key) != PLAYER_KEY_BYTES:
        raise ValueError(f"a player key is {PLAYER_KEY_BYTES} bytes, got {len(key)}")
    message = frames(PLAYER_REF_TAG, utf8(round_id), uint64(seat_number))
    digest = hmac.new(key, message, hashlib.sha256).digest()
    return PLAYER_REF_PREFIX + digest[:PLAYER_REF_BYTES].hex()


def is_player_ref(text: object) -> bool:
    """Whether ``text`` is a player reference: ``p-`` and 32 lowercase hex digits."""
    return isinstance(text, str) and PLAYER_REF_PATTERN.fullmatch(text) is not None
