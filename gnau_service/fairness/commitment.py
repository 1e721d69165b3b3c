"""Commit: a fresh server seed for each round, and the commitment that binds the round to it.

The commitment is published before any seat is locked::

    commitment = SHA-256( frame(COMMITMENT_TAG) || frame(round_id) || frame(house_rules)
                          || frame(uint64(decks)) || frame(server_seed) )

``COMMITMENT_TAG`` names the round's fairness version
(:class:`~gnau_service.fairness.encoding.FairnessVersion`), so one commitment cannot be opened
as a round of another version.

It is *binding*: SHA-256 is collision resistant and the encoding is injective, so no other
seed, round id or rule set opens it. It is *hiding*: the seed is 256 secret, uniformly random
bits, so the commitment tells nothing about it or about the deck it will make.

>>> from gnau_service.rules.house_rules import HouseRules
>>> compute_commitment("round-1", HouseRules(), bytes(range(32)), FairnessVersion.V1).hex()
'9a67e377fdb9e1e511c4609960adea7779e6fbe72bde29682042e2ff4dbaa1a1'
>>> len(new_server_seed()), new_server_seed() != new_server_seed()
(32, True)
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Final

from gnau_service.fairness.encoding import COMMITMENT_TAGS, FairnessVersion, frames, uint64, utf8
from gnau_service.fairness.errors import CommitError
from gnau_service.fairness.validation import require_bytes, require_text
from gnau_service.rules.house_rules import HouseRules

SERVER_SEED_BYTES: Final = 32
"""256 bits: more than the 226 bits that 52! orderings need, and SHA-256's strength."""
HASH_BYTES: Final = 32
"""The size of a commitment and of a transcript hash (SHA-256)."""
MAX_ROUND_ID_BYTES: Final = 128


def new_server_seed() -> bytes:
    """A fresh 256-bit server seed from the operating system's CSPRNG, one per round."""
    return secrets.token_bytes(SERVER_SEED_BYTES)


def require_round_id(round_id: object) -> None:
    """Refuse a round id that is not a non-empty string of at most 128 UTF-8 bytes."""
    require_text(round_id, field="round_id", max_bytes=MAX_ROUND_ID_BYTES, error=CommitError)


def require_hash(value: object, field: str) -> None:
    """Refuse anything but the 32 bytes of a SHA-256 hash (a commitment, a transcript hash)."""
    require_bytes(value, field=field, min_bytes=HASH_BYTES, max_bytes=HASH_BYTES, error=CommitError)


def require_server_seed(server_seed: object) -> None:
    """Refuse a server seed that is not exactly 32 bytes."""
    require_bytes(
        server_seed,
        field="server_seed",
        min_bytes=SERVER_SEED_BYTES,
        max_bytes=SERVER_SEED_BYTES,
        error=CommitError,
    )


def encode_house_rules(rules: HouseRules) -> bytes:
    """Every house rule as a framed key then its framed value text, keys in sorted order.

    Value text is ``true``/``false`` for a flag, decimal for a number and the value itself for
    a choice (``push``): the spelling of ``KEY=VALUE`` on the command line.

    >>> encode_house_rules(HouseRules())[:14].hex(" ", 1)
    '00 00 00 05 64 65 63 6b 73 00 00 00 01 31'
    """
    return b"".join(
        frames(utf8(key), utf8(_rule_text(value))) for key, value in sorted(rules.as_dict().items())
    )


def commitment_preimage(
    round_id: str, rules: HouseRules, server_seed: bytes, version: FairnessVersion
) -> bytes:
    """The exact bytes whose SHA-256 is the commitment."""
    require_round_id(round_id)
    require_server_seed(server_seed)
    if not isinstance(rules, HouseRules):
        raise CommitError(f"rules must be HouseRules, got {type(rules).__name__}", field="rules")
    return frames(
        COMMITMENT_TAGS[version],
        utf8(round_id),
        encode_house_rules(rules),
        # The deck count is inside the rules too; on its own it binds the size of the shuffled
        # deck however the rule encoding evolves.
        uint64(rules.decks),
        server_seed,
    )


def compute_commitment(
    round_id: str, rules: HouseRules, server_seed: bytes, version: FairnessVersion
) -> bytes:
    """SHA-256 of :func:`commitment_preimage`: the 32 bytes published before the lock."""
    return hashlib.sha256(commitment_preimage(round_id, rules, server_seed, version)).digest()


def _rule_text(value: bool | str | int) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
