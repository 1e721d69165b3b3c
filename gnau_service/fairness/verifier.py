"""Verify a revealed round: recompute every link of the chain and say which one breaks.

The links, in order, each recomputed from the published values it depends on:

1. **commitment**: SHA-256 over the round id, house rules and revealed seed (under the tag of
   the round's fairness version);
2. **lock**: the transcript hash over the published commitment, the seats and the beacon (in
   a v3 round, each seat's number and client seed; in v2, its stake too; in v1, its stake and
   player id too);
3. **deck**: the shuffle keyed by the revealed seed and the published transcript hash;
4. **hand of seat N** and **dealer hand**: the round-robin deal of that recomputed deck.

Because each check starts from published values, a single tampered field breaks the link that
reads it: a changed client seed fails the lock, a changed hand fails that hand, a changed seed
fails the commitment (and, since the deck comes from the seed, the deck after it). A v3 round's
stakes are not hashed (no amount wagered moves a card), so a changed stake breaks no link of the
revealed round alone: the signed ``ROUND_DEALT`` entry binds them, as it binds player
references. The verifier needs nothing beyond the standard library and this package.

>>> from gnau_service.fairness.round import CommittedRound
>>> from gnau_service.fairness.transcript import LockedSeat
>>> from gnau_service.rules.house_rules import HouseRules
>>> ann = "p-" + "a0" * 16
>>> round_ = CommittedRound("r-1", HouseRules(), bytes(32)).lock([LockedSeat(1, ann, 5)])
>>> revealed = round_.deal().reveal()
>>> verify_revealed_round(revealed).summary()
'round r-1 verifies: commitment, lock, deck and 2 hands match (1 seat, 1 deck)'
>>> import dataclasses
>>> tampered = dataclasses.replace(revealed, seats=(LockedSeat(1, ann, 5, b"mine"),))
>>> print(verify_revealed_round(tampered).first_failure)  # doctest: +ELLIPSIS
lock: the seats and beacon hash to ..., but the published transcript hash is ...
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gnau_service.fairness.commitment import compute_commitment
from gnau_service.fairness.deal import deal_round_robin
from gnau_service.fairness.errors import FairnessError
from gnau_service.fairness.reveal import RevealedRound
from gnau_service.fairness.shuffle import shuffle_deck
from gnau_service.fairness.transcript import compute_transcript_hash
from gnau_service.rules.cards import Card, format_cards


class Check(StrEnum):
    """The links of a round's chain, in the order they are checked."""

    COMMITMENT = "commitment"
    LOCK = "lock"
    DECK = "deck"
    SEAT_HAND = "seat_hand"
    DEALER_HAND = "dealer_hand"


@dataclass(frozen=True, slots=True)
class CheckFailure:
    """One broken link: which check, for which seat if it is a seat's hand, and why."""

    check: Check
    detail: str
    seat_number: int | None = None

    @property
    def subject(self) -> str:
        """What failed, as people say it: ``commitment``, ``hand of seat 3``, ``dealer hand``."""
        if self.check is Check.SEAT_HAND:
            return f"hand of seat {self.seat_number}"
        return self.check.value.replace("_", " ")

    def __str__(self) -> str:
        return f"{self.subject}: {self.detail}"


@dataclass(frozen=True, slots=True)
class VerificationReport:
    """The outcome of verifying one revealed round: valid exactly when ``failures`` is empty."""

    round_id: str
    seat_count: int
    decks: int
    failures: tuple[CheckFailure, ...]

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def first_failure(self) -> CheckFailure | None:
        """The earliest broken link of the chain: the reason the round does not verify."""
        return self.failures[0] if self.failures else None

    def summary(self) -> str:
        """One line: that the round verifies, or the first check that fails."""
        if self.first_failure is None:
            seats = "1 seat" if self.seat_count == 1 else f"{self.seat_count} seats"
            decks = "1 deck" if self.decks == 1 else f"{self.decks} decks"
            return (
                f"round {self.round_id} verifies: commitment, lock, deck and "
                f"{self.seat_count + 1} hands match ({seats}, {decks})"
            )
        more = len(self.failures) - 1
        also = f" (and {more} more check{'s' if more > 1 else ''})" if more else ""
        return f"round {self.round_id} does NOT verify: {self.first_failure}{also}"

    def raise_if_invalid(self) -> None:
        """Raise :class:`RoundVerificationError` unless every check passed."""
        if not self.ok:
            raise RoundVerificationError(self)


class RoundVerificationError(FairnessError):
    """A revealed round that does not verify; ``field`` is the first failed check."""

    def __init__(self, report: VerificationReport) -> None:
        assert report.first_failure is not None
        super().__init__(report.summary(), field=report.first_failure.check.value)
        self.report = report


def verify_revealed_round(revealed: RevealedRound) -> VerificationReport:
    """Recompute every link of ``revealed`` and report each one that does not match."""
    failures: list[CheckFailure] = []

    commitment = compute_commitment(
        revealed.round_id, revealed.rules, revealed.server_seed, revealed.version
    )
    if commitment != revealed.commitment:
        failures.append(
            CheckFailure(
                Check.COMMITMENT,
                f"the round id, house rules and revealed seed hash to {commitment.hex()}, "
                f"but the published commitment is {revealed.commitment.hex()}",
            )
        )

    transcript_hash = compute_transcript_hash(
        revealed.commitment, revealed.seats, revealed.beacon, revealed.version
    )
    if transcript_hash != revealed.transcript_hash:
        failures.append(
            CheckFailure(
                Check.LOCK,
                f"the seats and beacon hash to {transcript_hash.hex()}, "
                f"but the published transcript hash is {revealed.transcript_hash.hex()}",
            )
        )

    deck = shuffle_deck(revealed.server_seed, revealed.transcript_hash, revealed.rules.decks)
    if deck != revealed.deck:
        failures.append(CheckFailure(Check.DECK, _deck_difference(deck, revealed.deck)))

    deal = deal_round_robin(deck, (seat.seat_number for seat in revealed.seats))
    published = {hand.seat_number: hand.cards for hand in revealed.seat_hands}
    for hand in deal.seat_hands:
        claimed = published.pop(hand.seat_number, None)
        if claimed is None:
            detail = (
                f"no hand is published for this seat; the deal gives {format_cards(hand.cards)}"
            )
        elif claimed != hand.cards:
            detail = _hand_difference(hand.cards, claimed)
        else:
            continue
        failures.append(CheckFailure(Check.SEAT_HAND, detail, seat_number=hand.seat_number))
    for seat_number in sorted(published):
        failures.append(
            CheckFailure(
                Check.SEAT_HAND,
                "a hand is published for this seat, but no such seat is locked",
                seat_number=seat_number,
            )
        )

    if deal.dealer_hand != revealed.dealer_hand:
        failures.append(
            CheckFailure(
                Check.DEALER_HAND, _hand_difference(deal.dealer_hand, revealed.dealer_hand)
            )
        )

    return VerificationReport(
        round_id=revealed.round_id,
        seat_count=len(revealed.seats),
        decks=revealed.rules.decks,
        failures=tuple(failures),
    )


def _deck_difference(recomputed: tuple[Card, ...], published: tuple[Card, ...]) -> str:
    if len(recomputed) != len(published):
        return (
            f"the seed and transcript give {len(recomputed)} cards, "
            f"but the published deck has {len(published)}"
        )
    position = next(
        index
        for index, (ours, theirs) in enumerate(zip(recomputed, published, strict=True))
        if ours != theirs
    )
    return (
        f"at position {position} (0 is dealt first) the seed and transcript give "
        f"{recomputed[position]}, but the published deck has {published[position]}"
    )


def _hand_difference(dealt: tuple[Card, ...], published: tuple[Card, ...]) -> str:
    return (
        f"the deal gives {format_cards(dealt)}, but the published hand is {format_cards(published)}"
    )
