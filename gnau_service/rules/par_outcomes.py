"""Every outcome of a heads-up deal under a rule set, counted exactly and priced.

The deals are counted by the class-multiset method of :mod:`gnau_service.rules.par_counts`
(proof in docs/par.md); this module sorts them into settlement outcomes (win, tie or loss, the
deciding hand, how it was decided, suited or not) and prices each with settlement's own rule,
:func:`~gnau_service.rules.settlement.category_units`, so that the PAR sheet
(:mod:`gnau_service.rules.par`) and the seat covariance (:mod:`gnau_service.rules.par_seats`)
price what the service settles.

>>> from gnau_service.rules.house_rules import HouseRules
>>> outcomes = deal_outcomes(HouseRules(decks=1), ClassPool.decks(1))
>>> sum(outcome.probability for outcome in outcomes)
Fraction(1, 1)
>>> outcomes[0].description
'Player wins with Five Dukes (higher hand)'
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import Final

from gnau_service.rules.evaluation import ALL_HAND_RANKS, Category, HandRank
from gnau_service.rules.house_rules import HouseRules, TieRule
from gnau_service.rules.par_counts import ClassPool, DealCounts, deal_counts, top_suit_ways
from gnau_service.rules.par_counts import top_classes as _top_classes
from gnau_service.rules.settlement import Outcome, category_units


class Resolution(StrEnum):
    """How a deal was decided."""

    #: One hand ranks above the other.
    HIGHER_HAND = "higher_hand"
    #: Equal hands, which go to the dealer (``tie=dealer``).
    EQUAL_TO_DEALER = "equal_to_dealer"
    #: Equal hands, decided by the single highest card (``tie=high_card``).
    HIGH_CARD = "high_card"
    #: Equal hands, nothing moves (``tie=push``).
    PUSH = "push"
    #: Five Dukes against Five Dukes, a tie under every rule.
    FIVE_DUKES = "five_dukes"


@dataclass(frozen=True, slots=True)
class ParOutcome:
    """One settlement outcome: the player's result, the hand that decided it, and its price.

    ``hand`` is the winning hand (the player's for a win, the dealer's for a loss) or, for a
    tie, the rank both hands share. ``suited`` is true when that winning hand's five cards share
    one suit and ``suited_double`` pays it double (always false otherwise).
    """

    outcome: Outcome
    hand: HandRank
    resolution: Resolution
    suited: bool
    #: Heads-up deals with this outcome.
    deals: int
    probability: Fraction
    #: The player's result per unit stake (negative: the player pays).
    units: int

    @property
    def description(self) -> str:
        """``Player wins with Double-Ox 8 (higher hand)``, ``Tie: Five Dukes``, ..."""
        hand = str(self.hand) + (", suited" if self.suited else "")
        how = _HOW[self.resolution]
        if self.outcome is Outcome.TIE:
            return f"Tie: {hand} against {hand}" + (f" ({how})" if how else "")
        who = "Player wins" if self.outcome is Outcome.WIN else "Dealer wins"
        return f"{who} with {hand} ({how})"


_HOW: Final = {
    Resolution.HIGHER_HAND: "higher hand",
    Resolution.EQUAL_TO_DEALER: "equal hands go to the dealer",
    Resolution.HIGH_CARD: "high card",
    Resolution.PUSH: "push",
    Resolution.FIVE_DUKES: "",
}


_OutcomeKey = tuple[Outcome, int, Resolution, bool]
_Add = Callable[[tuple[Outcome, int, Resolution], Fraction | int, Fraction | int], None]
_FIVE_DUKES: Final = HandRank.of(Category.FIVE_DUKES).strength
_BY_STRENGTH: Final = {rank.strength: rank for rank in ALL_HAND_RANKS}
_ORDER: Final = {Outcome.WIN: 0, Outcome.TIE: 1, Outcome.LOSE: 2}


def deal_outcomes(
    rules: HouseRules, pool: ClassPool, *, dealer: tuple[int, ...] | None = None
) -> tuple[ParOutcome, ...]:
    """Every outcome of a heads-up deal from ``pool`` under ``rules``, counted exactly; with
    ``dealer`` (class counts), of the deals whose dealer's hand has that class multiset only,
    and ``probability`` is then conditional on it."""
    counts = deal_counts(rules, pool, dealer=dealer)
    tally = _tally(rules, counts)
    rows = []
    for (outcome, strength, resolution, suited), deals in tally.items():
        if not deals:
            continue
        assert deals.denominator == 1, "a deal count must be a whole number"
        hand = _BY_STRENGTH[strength]
        units = 0
        if outcome is not Outcome.TIE:
            units = category_units(hand.category, rules, suited=suited)
            units = units if outcome is Outcome.WIN else -units
        rows.append(
            ParOutcome(
                outcome=outcome,
                hand=hand,
                resolution=resolution,
                suited=suited,
                deals=int(deals),
                probability=Fraction(int(deals), counts.total),
                units=units,
            )
        )
    rows.sort(
        key=lambda row: (
            _ORDER[row.outcome],
            -row.hand.strength if row.outcome is not Outcome.LOSE else row.hand.strength,
            row.resolution,
            not row.suited,
        )
    )
    assert sum(row.deals for row in rows) == counts.total, "every deal has one outcome"
    return tuple(rows)


def _tally(rules: HouseRules, counts: DealCounts) -> dict[_OutcomeKey, Fraction]:
    """Deals per outcome. Fractions only in passing: a high-card share of a class count."""
    tally: defaultdict[_OutcomeKey, Fraction] = defaultdict(Fraction)

    def add(
        key: tuple[Outcome, int, Resolution], deals: Fraction | int, suited: Fraction | int
    ) -> None:
        tally[(*key, False)] += deals - suited
        tally[(*key, True)] += suited

    player_suited: defaultdict[tuple[int, int], int] = defaultdict(int)
    dealer_suited: defaultdict[tuple[int, int], int] = defaultdict(int)
    for (_, player, dealer), deals in counts.player_suited.items():
        player_suited[player, dealer] += deals
    for (_, player, dealer), deals in counts.dealer_suited.items():
        dealer_suited[player, dealer] += deals
    for (player, dealer), deals in counts.by_rank.items():
        if player > dealer:
            win = (Outcome.WIN, player, Resolution.HIGHER_HAND)
            add(win, deals, player_suited[player, dealer])
        elif player < dealer:
            lose = (Outcome.LOSE, dealer, Resolution.HIGHER_HAND)
            add(lose, deals, dealer_suited[player, dealer])
        elif player == _FIVE_DUKES:
            add((Outcome.TIE, player, Resolution.FIVE_DUKES), deals, 0)
        elif rules.tie is TieRule.PUSH:
            add((Outcome.TIE, player, Resolution.PUSH), deals, 0)
        elif rules.tie is TieRule.DEALER:
            lose = (Outcome.LOSE, player, Resolution.EQUAL_TO_DEALER)
            add(lose, deals, dealer_suited[player, dealer])
    if rules.tie is TieRule.HIGH_CARD:
        _tally_high_card(counts, add)
    return tally


def _tally_high_card(counts: DealCounts, add: _Add) -> None:
    """Equal hands under ``tie=high_card``: the higher top face wins; on equal top faces, the
    top card's suit, whose odds follow from the hands' counts in the top face's classes."""
    pool = counts.pool
    win: defaultdict[int, Fraction] = defaultdict(Fraction)
    lose: defaultdict[int, Fraction] = defaultdict(Fraction)
    win_suited: defaultdict[int, Fraction] = defaultdict(Fraction)
    lose_suited: defaultdict[int, Fraction] = defaultdict(Fraction)
    for (
        strength,
        player_face,
        player_top,
        dealer_face,
        dealer_top,
    ), deals in counts.equal_ranks.items():
        if strength == _FIVE_DUKES:
            continue
        if player_face != dealer_face:
            (win if player_face > dealer_face else lose)[strength] += deals
            continue
        ways = top_suit_ways(_top_suits(pool, player_face), player_top, dealer_top)
        total = sum(ways.values())
        won = sum(n for (player_suit, dealer_suit), n in ways.items() if player_suit > dealer_suit)
        win[strength] += Fraction(deals * won, total)
        lose[strength] += Fraction(deals * (total - won), total)
    # A suited hand's top card is of its suit; the other hand's top suit is still open. The
    # suited player wins over a lower top suit; the suited dealer over a lower or equal one.
    _add_suited_shares(win_suited, counts.player_suited_equal, pool, dealer_suited=False)
    _add_suited_shares(lose_suited, counts.dealer_suited_equal, pool, dealer_suited=True)
    for strength in win.keys() | lose.keys():
        add((Outcome.WIN, strength, Resolution.HIGH_CARD), win[strength], win_suited[strength])
        add((Outcome.LOSE, strength, Resolution.HIGH_CARD), lose[strength], lose_suited[strength])


def _add_suited_shares(
    wins: defaultdict[int, Fraction],
    table: dict[tuple[int, int, int, tuple[int, ...], int, tuple[int, ...]], int],
    pool: ClassPool,
    *,
    dealer_suited: bool,
) -> None:
    """Add to ``wins`` the equal-rank deals a suited hand wins by high card."""
    for (suit, strength, player_face, player_top, dealer_face, dealer_top), deals in table.items():
        suited_face, suited_top, other_face, other_top = (
            (dealer_face, dealer_top, player_face, player_top)
            if dealer_suited
            else (player_face, player_top, dealer_face, dealer_top)
        )
        if strength == _FIVE_DUKES or suited_face < other_face:
            continue
        share = Fraction(1)
        if suited_face == other_face:
            ways = top_suit_ways(_top_suits(pool, suited_face), suited_top, other_top, suit)
            beaten = sum(
                n
                for (_, other), n in ways.items()
                if other < suit or (dealer_suited and other == suit)
            )
            share = Fraction(beaten, sum(ways.values()))
        wins[strength] += deals * share


def _top_suits(pool: ClassPool, face: int) -> tuple[tuple[int, ...], ...]:
    return tuple(pool.suit_copies[c] for c in _top_classes(face))
