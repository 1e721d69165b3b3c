"""Provable fairness for Gnau rounds: commit, lock, shuffle and deal, reveal, verify.

A pure library: no I/O, no clock, no :mod:`random`. The only randomness is the server seed
from :func:`secrets.token_bytes`; everything after it is a deterministic function of the seed
and of what was locked, which is what lets anyone recompute a round once the seed is revealed.
``docs/fairness.md`` specifies the construction byte by byte.

>>> from gnau_service.rules.house_rules import HouseRules
>>> committed = CommittedRound.with_fresh_seed("table-9/round-42", HouseRules())
>>> # publish committed.commitment, take bets and client seeds, then:
>>> alice = player_ref(new_player_key(), committed.round_id, 1)  # kept by the service
>>> locked = committed.lock([LockedSeat(1, alice, 100, client_seed=b"my luck")])
>>> dealt = locked.deal()           # play the round from dealt.deal
>>> revealed = dealt.reveal()       # publish revealed.to_json() when the round is over
>>> verify_revealed_round(RevealedRound.from_json(revealed.to_json())).ok
True
"""

from gnau_service.fairness.commitment import (
    compute_commitment,
    new_server_seed,
)
from gnau_service.fairness.deal import Deal, SeatHand, deal_round_robin
from gnau_service.fairness.drbg import HmacDrbg
from gnau_service.fairness.encoding import FairnessVersion
from gnau_service.fairness.errors import (
    CommitError,
    DealError,
    DrbgError,
    FairnessError,
    LockError,
    RevealFormatError,
)
from gnau_service.fairness.player_refs import is_player_ref, new_player_key, player_ref
from gnau_service.fairness.reveal import REVEALED_ROUND_FORMATS, RevealedRound
from gnau_service.fairness.round import CommittedRound, DealtRound, LockedRound
from gnau_service.fairness.shuffle import shuffle_deck
from gnau_service.fairness.transcript import Beacon, LockedSeat, compute_transcript_hash
from gnau_service.fairness.verifier import (
    Check,
    CheckFailure,
    RoundVerificationError,
    VerificationReport,
    verify_revealed_round,
)

__all__ = [
    "REVEALED_ROUND_FORMATS",
    "Beacon",
    "Check",
    "CheckFailure",
    "CommitError",
    "CommittedRound",
    "Deal",
    "DealError",
    "DealtRound",
    "DrbgError",
    "FairnessError",
    "FairnessVersion",
    "HmacDrbg",
    "LockError",
    "LockedRound",
    "LockedSeat",
    "RevealFormatError",
    "RevealedRound",
    "RoundVerificationError",
    "SeatHand",
    "VerificationReport",
    "compute_commitment",
    "compute_transcript_hash",
    "deal_round_robin",
    "is_player_ref",
    "new_player_key",
    "new_server_seed",
    "player_ref",
    "shuffle_deck",
    "verify_revealed_round",
]
