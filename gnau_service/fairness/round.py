"""The dealer's side of a round, one type per step: commit, lock, deal, reveal.

Each step can only be reached from the one before, so the service cannot shuffle before the
seats are locked, nor lock without a published commitment. The server seed is kept out of
every ``repr``, and the cards out of the dealt round's, so that logging a round in play does
not leak it.

>>> from gnau_service.rules.house_rules import HouseRules
>>> committed = CommittedRound("table-1/round-1", HouseRules(), server_seed=bytes(range(32)))
>>> committed.version, committed.commitment.hex()[:16]
(<FairnessVersion.V3: 3>, '4c43b210c6f66318')
>>> bob, alice = "p-" + "b0" * 16, "p-" + "a1" * 16
>>> locked = committed.lock([LockedSeat(2, bob, 250), LockedSeat(1, alice, 100)])
>>> dealt = locked.deal()
>>> [str(card) for card in dealt.deal.hand_of(1)]
['2H', 'AC', 'AS', 'QS', '7D']
>>> revealed = dealt.reveal()
>>> revealed.server_seed == committed.server_seed, "server_seed" in repr(committed)
(True, False)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from gnau_service.fairness.commitment import compute_commitment, new_server_seed
from gnau_service.fairness.deal import Deal, deal_round_robin, require_hands_fit
from gnau_service.fairness.encoding import CURRENT_VERSION, FairnessVersion
from gnau_service.fairness.errors import CommitError
from gnau_service.fairness.reveal import RevealedRound
from gnau_service.fairness.shuffle import shuffle_deck
from gnau_service.fairness.transcript import (
    Beacon,
    LockedSeat,
    canonical_seats,
    compute_transcript_hash,
)
from gnau_service.rules.cards import Card
from gnau_service.rules.house_rules import HouseRules


@dataclass(frozen=True, slots=True)
class CommittedRound:
    """Step 1: a round with its secret seed and the commitment to publish.

    ``version`` is the fairness format (:class:`~gnau_service.fairness.encoding.FairnessVersion`):
    every new round is v3 (:data:`~gnau_service.fairness.encoding.CURRENT_VERSION`); v1 and v2
    are there to recompute the rounds logged before it.
    """

    round_id: str
    rules: HouseRules
    server_seed: bytes = field(repr=False)
    version: FairnessVersion = CURRENT_VERSION
    commitment: bytes = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "version", _known_version(self.version))
        commitment = compute_commitment(self.round_id, self.rules, self.server_seed, self.version)
        object.__setattr__(self, "commitment", commitment)

    @classmethod
    def with_fresh_seed(cls, round_id: str, rules: HouseRules) -> CommittedRound:
        """Open a new (v3) round with a fresh seed from the OS CSPRNG: the production path."""
        return cls(round_id, rules, new_server_seed())

    def lock(self, seats: Iterable[LockedSeat], beacon: Beacon | None = None) -> LockedRound:
        """Step 2: lock the seats (and beacon), refusing a table the decks cannot deal."""
        return LockedRound(self, tuple(seats), beacon)


@dataclass(frozen=True, slots=True)
class LockedRound:
    """Step 2: the locked seats and beacon, and the transcript hash that binds them."""

    committed: CommittedRound
    seats: tuple[LockedSeat, ...]
    beacon: Beacon | None = None
    transcript_hash: bytes = field(init=False)

    def __post_init__(self) -> None:
        version = self.committed.version
        seats = canonical_seats(self.seats, version)
        require_hands_fit(len(seats), self.committed.rules.decks)
        object.__setattr__(self, "seats", seats)
        object.__setattr__(
            self,
            "transcript_hash",
            compute_transcript_hash(self.committed.commitment, seats, self.beacon, version),
        )

    def deal(self) -> DealtRound:
        """Step 3: shuffle and deal. Deterministic: the same locked round always deals the same."""
        return DealtRound(self)


@dataclass(frozen=True, slots=True)
class DealtRound:
    """Step 3: the shuffled deck and the hands, ready to play; :meth:`reveal` when it ends."""

    locked: LockedRound
    deck: tuple[Card, ...] = field(init=False, repr=False)
    deal: Deal = field(init=False, repr=False)

    def __post_init__(self) -> None:
        committed = self.locked.committed
        deck = shuffle_deck(
            committed.server_seed, self.locked.transcript_hash, committed.rules.decks
        )
        object.__setattr__(self, "deck", deck)
        object.__setattr__(
            self, "deal", deal_round_robin(deck, (seat.seat_number for seat in self.locked.seats))
        )

    def reveal(self) -> RevealedRound:
        """Step 4: the record to publish once the round is over, seed included."""
        committed, locked = self.locked.committed, self.locked
        return RevealedRound(
            round_id=committed.round_id,
            rules=committed.rules,
            seats=locked.seats,
            beacon=locked.beacon,
            commitment=committed.commitment,
            transcript_hash=locked.transcript_hash,
            server_seed=committed.server_seed,
            deck=self.deck,
            seat_hands=self.deal.seat_hands,
            dealer_hand=self.deal.dealer_hand,
            version=committed.version,
        )


def _known_version(version: object) -> FairnessVersion:
    try:
        return FairnessVersion(version)  # type: ignore[arg-type]  # checked here
    except ValueError:
        raise CommitError(f"no such fairness version: {version!r}", field="version") from None
