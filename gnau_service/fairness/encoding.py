"""The length-prefixed encoding that every fairness hash is computed over.

A *frame* is a byte string preceded by its length as a 4-byte big-endian unsigned integer. A
message is a run of frames, the first of which is a domain-separation tag. Because every frame
says where it ends, two different lists of fields never encode to the same bytes, and because
each hash starts with its own tag, a commitment can never be read as a transcript or as DRBG
input. A field that is itself a list (the seats, the house rules) is a run of frames inside
one frame.

>>> frame(b"abc").hex()
'00000003616263'
>>> frames(b"ab", b"", b"c").hex()
'000000026162000000000000000163'
>>> uint64(300).hex()
'000000000000012c'
>>> frames(b"a", b"bc") != frames(b"ab", b"c")
True
>>> COMMITMENT_TAGS[FairnessVersion.V3]
b'gnau-dealer/fairness/v3/commitment'
>>> [version.hashes_stakes for version in FairnessVersion]
[True, True, False]
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final


class FairnessVersion(IntEnum):
    """Which encoding a round's commitment and lock use.

    - ``V1``: each locked seat's transcript frame holds the platform's player id;
    - ``V2``: a seat is locked by its number, stake and client seed only. Who sits there is
      published as a player reference (:mod:`~gnau_service.fairness.player_refs`), which is
      outside the shuffle's input, so a reference (or its key) chosen at the deal cannot move
      a card;
    - ``V3``: as v2, but a seat is locked by its number and client seed only: the stake is out
      of the shuffle's input too, so the amount wagered cannot change a card (it is still
      locked, and published in the signed log). Every new round is v3.

    The commitment's tag names the version, so it is fixed before any seat is.
    """

    V1 = 1
    V2 = 2
    V3 = 3

    @property
    def names_players_by_reference(self) -> bool:
        """Whether a seat names its player by a reference (every version after v1)."""
        return self >= FairnessVersion.V2

    @property
    def hashes_stakes(self) -> bool:
        """Whether a seat's stake is part of the transcript, hence of the shuffle's input."""
        return self < FairnessVersion.V3


#: The version of every round the service commits now.
CURRENT_VERSION: Final = FairnessVersion.V3


# The domain-separation tags, one per hash or keyed derivation. Kept together so that it is
# plain to see that they are all different; the version changes with any change of encoding.
COMMITMENT_TAGS: Final = {
    FairnessVersion.V1: b"gnau-dealer/fairness/v1/commitment",
    FairnessVersion.V2: b"gnau-dealer/fairness/v2/commitment",
    FairnessVersion.V3: b"gnau-dealer/fairness/v3/commitment",
}
LOCK_TAGS: Final = {
    FairnessVersion.V1: b"gnau-dealer/fairness/v1/lock",
    FairnessVersion.V2: b"gnau-dealer/fairness/v2/lock",
    FairnessVersion.V3: b"gnau-dealer/fairness/v3/lock",
}
#: The shuffle is the same in every version: the DRBG keyed by the seed and the transcript hash.
SHUFFLE_TAG: Final = b"gnau-dealer/fairness/v1/shuffle"
PLAYER_REF_TAG: Final = b"gnau-dealer/player-ref/v1"

FRAME_LENGTH_BYTES: Final = 4
MAX_FRAME_BYTES: Final = 2 ** (8 * FRAME_LENGTH_BYTES) - 1


def frame(data: bytes) -> bytes:
    """``data`` preceded by its length (4 bytes, big-endian)."""
    if len(data) > MAX_FRAME_BYTES:
        raise ValueError(f"a frame holds at most {MAX_FRAME_BYTES} bytes, got {len(data)}")
    return len(data).to_bytes(FRAME_LENGTH_BYTES, "big") + data


def frames(*fields: bytes) -> bytes:
    """Each field framed, concatenated in order."""
    return b"".join(frame(data) for data in fields)


def uint64(value: int) -> bytes:
    """An integer from 0 to 2**64-1 as 8 bytes, big-endian (fixed width, so no sign or
    leading-zero questions arise)."""
    return value.to_bytes(8, "big")


def utf8(text: str) -> bytes:
    """Text as its exact UTF-8 bytes, without normalization."""
    return text.encode("utf-8")
