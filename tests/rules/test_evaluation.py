"""Evaluation: every worked example of the seed texts (as the rules page corrects them), every
house rule flipped, and properties checked against an independent oracle."""

import dataclasses
import functools
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnau_service.rules import evaluation
from gnau_service.rules.cards import Card, parse_cards, standard_deck
from gnau_service.rules.errors import CardError
from gnau_service.rules.evaluation import (
    ALL_HAND_RANKS,
    Category,
    Evaluator,
    HandRank,
    OxSearch,
    Reading,
    class_multisets,
    class_representative,
    multiset_key,
)
from gnau_service.rules.house_rules import HouseRules
from tests.rules import oracle

DEFAULT = HouseRules()

# (cards, category, value, where the example comes from)
SEED_EXAMPLES = [
    # English "Ox power" table and the rules page's list of rows that are right as printed.
    ("3D 4C 3S AS 2C", "FIVE_SMALL", None, "en: Five Small"),
    ("KD 4C 3S AS QC", "NGAU_TONKU", None, "en: Ngau Tonku"),
    ("KD 4C 3S AD QC", "SINGLE_OX", 1, "en: Nenku is an ordinary Single-Ox 1"),
    ("KD 4C 3S 8D 8C", "DOUBLE_OX", 8, "en: Double-Ox row (example shown is Double-Ox 8)"),
    ("KD 4C 3S 8D 5D", "SINGLE_OX", 3, "en: Single-Ox row (8 + 5 = 13)"),
    ("4D 4C 3S 8D 5D", "NO_OX", None, "en: No Ox"),
    # "Ox formation alternatives", Example 1: the strongest reading is Double-Ox 8.
    ("3C 6S 8H 4H 8C", "DOUBLE_OX", 8, "en: Example 1"),
    # "Sample hands and scoring", with the rules page's corrections.
    ("TC 9S 8H 4H 4C", "NO_OX", None, "en sample: No Ox"),
    ("TC 9S 8H 7H 4C", "SINGLE_OX", 8, "en sample says Single-Ox 1; corrected"),
    ("JC 8S 2H 8H 5C", "SINGLE_OX", 3, "en sample: Single-Ox 3"),
    ("TC TS TH 9H 5C", "SINGLE_OX", 4, "en sample: Single-Ox 4"),
    ("KC 8S 2H 9H 6C", "SINGLE_OX", 5, "en sample: Single-Ox 5"),
    ("TC 6S 4H 9H 7C", "SINGLE_OX", 6, "en sample: Single-Ox 6"),
    ("KC 7S 3H JH 7C", "SINGLE_OX", 0, "en sample says Single-Ox 7; its note says 0"),
    ("KC QS JH 7H AC", "SINGLE_OX", 8, "en sample: Single-Ox 8"),
    ("7C AS 2H 3H 6C", "SINGLE_OX", 9, "en sample: Single-Ox 9"),
    ("KC QS TH 9H AC", "SINGLE_OX", 0, "en sample: Single-Ox 0"),
    ("6C 4S JH 9H 9C", "DOUBLE_OX", 9, "en sample: Double-Ox 9 (and the mislabelled row)"),
    ("KD JH TS JD QC", "DOUBLE_OX", 11, "en sample says Five Dukes; Double-Ox J by default"),
]


def rank_of(text: str, rules: HouseRules = DEFAULT) -> HandRank:
    return Evaluator(rules).rank(parse_cards(text))


@pytest.mark.parametrize(("cards", "category", "value", "source"), SEED_EXAMPLES)
def test_seed_examples(cards: str, category: str, value: int | None, source: str) -> None:
    rank = rank_of(cards)
    assert (rank.category, rank.value) == (category, value), source
    assert oracle.best_result(parse_cards(cards)) == (category, value), source


def test_seed_sample_with_two_ten_of_clubs_needs_two_decks() -> None:
    # "10♣ 9♠ 8♥ 2♥ 10♣" holds the 10♣ twice: Single-Ox 9 with two decks, refused with one.
    assert rank_of("TC 9S 8H 2H TC", HouseRules(decks=2)) == HandRank.of(Category.SINGLE_OX, 9)
    with pytest.raises(CardError, match="TC appears 2 times but 1 deck holds only 1"):
        rank_of("TC 9S 8H 2H TC")


def test_example_1_shows_every_reading_the_seed_lists() -> None:
    # 3(6)+6+8 -> Single-Ox 2; 3+6(3)+4 -> Double-Ox 8; 8+4+8 -> Single-Ox 9.
    results = set(oracle.every_result(parse_cards("3C 6S 8H 4H 8C")))
    assert {("SINGLE_OX", 2), ("DOUBLE_OX", 8), ("SINGLE_OX", 9)} <= results


def test_example_1_description_names_ox_power_and_counted_points() -> None:
    evaluation = Evaluator(DEFAULT).evaluate(parse_cards("3C 6S 8H 4H 8C"))
    assert evaluation.describe() == "Double-Ox 8  ox 3C(3) 6S(3) 4H  power 8H 8C"
    assert evaluation.points == (3, 3, 8, 4, 8)


def test_nenku_is_marked_and_described() -> None:
    evaluation = Evaluator(DEFAULT).evaluate(parse_cards("KD 4C 3S AD QC"))
    assert evaluation.nenku
    assert evaluation.describe().startswith("Single-Ox 1 (Nenku)")
    assert not Evaluator(DEFAULT).evaluate(parse_cards("KD 4C 3S AS QC")).nenku


# (cards, rule, result by default, result with the rule flipped)
HOUSE_RULE_FLIPS = [
    ("KD JH TS JD QC", "ten_is_duke=true", ("DOUBLE_OX", 11), ("FIVE_DUKES", None)),
    ("TD AS 3C 8C 9H", "ten_is_duke=true", ("SINGLE_OX", 4), ("NGAU_TONKU", None)),
    ("7C AS 2H 3H 6C", "three_six_pair=true", ("SINGLE_OX", 9), ("DOUBLE_OX", 6)),
    ("3C 3D 5H 5S KC", "three_six_pair=true", ("DOUBLE_OX", 3), ("DOUBLE_OX", 6)),
    ("5C 5D 5H 9S 2C", "trips_make_ox=false", ("SINGLE_OX", 1), ("NO_OX", None)),
    ("AS AD 2C 2D 4C", "five_small=false", ("FIVE_SMALL", None), ("NO_OX", None)),
    ("3D 4C 3S AS 2C", "five_small=false", ("FIVE_SMALL", None), ("SINGLE_OX", 6)),
]


@pytest.mark.parametrize(("cards", "rule", "default", "flipped"), HOUSE_RULE_FLIPS)
def test_house_rule_changes_the_result(
    cards: str, rule: str, default: tuple[str, int | None], flipped: tuple[str, int | None]
) -> None:
    rules = HouseRules.from_assignments([rule])
    for house_rules, expected in ((DEFAULT, default), (rules, flipped)):
        rank = rank_of(cards, house_rules)
        assert (rank.category, rank.value) == expected
        assert oracle.best_result(parse_cards(cards), **oracle_flags(house_rules)) == expected


def test_decks_allow_identical_cards_which_pair_like_any_other() -> None:
    rules = HouseRules(decks=2)
    assert rank_of("KC KC KD 9S 9S", rules) == HandRank.of(Category.DOUBLE_OX, 9)
    with pytest.raises(CardError, match="appears 3 times but 2 decks hold only 2"):
        rank_of("KC KC KC 9S 9D", rules)


def test_hierarchy_is_the_rules_page_order() -> None:
    names = [str(rank) for rank in sorted(ALL_HAND_RANKS, reverse=True)]
    assert names == [
        "Five Dukes", "Five Small", "Ngau Tonku",
        *(f"Double-Ox {face}" for face in "K Q J 10 9 8 7 6 5 4 3 2 A".split()),
        *(f"Single-Ox {value}" for value in (0, 9, 8, 7, 6, 5, 4, 3, 2, 1)),
        "No Ox",
    ]  # fmt: skip


@pytest.mark.parametrize("count", [0, 4, 6])
def test_a_hand_is_exactly_five_cards(count: int) -> None:
    cards = standard_deck()[:count]
    for evaluate in (Evaluator(DEFAULT).rank, Evaluator(DEFAULT).evaluate):
        with pytest.raises(CardError, match=f"exactly 5 cards, got {count}"):
            evaluate(cards)


def test_evaluation_json_has_the_documented_fields() -> None:
    payload = Evaluator(DEFAULT).evaluate(parse_cards("KD 4C 3S AS QC")).to_json()
    assert payload["cards"] == ["KD", "4C", "3S", "AS", "QC"]
    assert (payload["category"], payload["value"]) == ("NGAU_TONKU", None)
    assert payload["ox"] == ["4C", "3S", "QC"]
    assert payload["power"] == ["KD", "AS"]
    assert payload["points"] == [10, 4, 6, 1, 10]


# -- properties ---------------------------------------------------------------------------------

HOUSE_RULES = st.builds(
    HouseRules,
    ten_is_duke=st.booleans(),
    three_six_pair=st.booleans(),
    trips_make_ox=st.booleans(),
    five_small=st.booleans(),
)


def oracle_flags(rules: HouseRules) -> dict[str, bool]:
    return {
        "ten_is_duke": rules.ten_is_duke,
        "three_six_pair": rules.three_six_pair,
        "trips_make_ox": rules.trips_make_ox,
        "five_small": rules.five_small,
    }


def hands(decks: int = 1) -> st.SearchStrategy[list[Card]]:
    return st.lists(st.sampled_from(range(52 * decks)), min_size=5, max_size=5, unique=True).map(
        lambda indices: [standard_deck(decks)[i] for i in indices]
    )


@settings(max_examples=300)
@given(hands(), HOUSE_RULES)
def test_table_evaluator_agrees_with_the_oracle(cards: list[Card], rules: HouseRules) -> None:
    rank = Evaluator(rules).rank(cards)
    assert (rank.category, rank.value) == oracle.best_result(cards, **oracle_flags(rules))


@given(hands(decks=2), HOUSE_RULES)
def test_table_evaluator_agrees_with_the_search_on_two_decks(
    cards: list[Card], rules: HouseRules
) -> None:
    rules = dataclasses.replace(rules, decks=2)
    assert Evaluator(rules).rank(cards) == OxSearch(rules).read(cards).rank


@given(hands(), HOUSE_RULES, st.randoms(use_true_random=False))
def test_evaluation_is_invariant_under_card_order(
    cards: list[Card], rules: HouseRules, random: st.SearchStrategy[object]
) -> None:
    shuffled = list(cards)
    random.shuffle(shuffled)  # type: ignore[attr-defined]
    first, second = Evaluator(rules).evaluate(cards), Evaluator(rules).evaluate(shuffled)
    assert (first.rank, first.nenku) == (second.rank, second.nenku)


@settings(max_examples=300)
@given(hands(), HOUSE_RULES)
def test_reported_ox_and_power_make_the_reported_result(
    cards: list[Card], rules: HouseRules
) -> None:
    evaluation = Evaluator(rules).evaluate(cards)
    if not evaluation.ox:
        assert evaluation.category in (Category.NO_OX, Category.FIVE_SMALL)
        without_five_small = {**oracle_flags(rules), "five_small": False}
        assert oracle.best_result(cards, **without_five_small) == ("NO_OX", None)
        return
    assert sorted(evaluation.ox + evaluation.power, key=str) == sorted(cards, key=str)
    for card in cards:
        assert evaluation.counted_points(card) in oracle.points_options(card)
    ox_points = [evaluation.counted_points(card) for card in evaluation.ox]
    assert oracle.is_ox(evaluation.ox, ox_points, trips_make_ox=rules.trips_make_ox)
    first, second = evaluation.power
    made = oracle.power_result(
        first,
        second,
        (evaluation.counted_points(first), evaluation.counted_points(second)),
        ten_is_duke=rules.ten_is_duke,
        three_six_pair=rules.three_six_pair,
    )
    if evaluation.category in (Category.FIVE_DUKES, Category.FIVE_SMALL):
        return  # the special hand outranks whatever its ox reading makes
    assert made == (evaluation.category, evaluation.value)


@settings(max_examples=300)
@given(hands(), HOUSE_RULES)
def test_no_ox_choice_beats_the_reported_result(cards: list[Card], rules: HouseRules) -> None:
    rank = Evaluator(rules).rank(cards)
    flags = oracle_flags(rules)
    del flags["five_small"]
    for result in oracle.every_result(cards, **flags):
        assert oracle.strength(*result) <= oracle.strength(str(rank.category), rank.value)


@given(hands(), hands(), HOUSE_RULES)
def test_ranks_are_a_total_order(first: list[Card], second: list[Card], rules: HouseRules) -> None:
    a, b = Evaluator(rules).rank(first), Evaluator(rules).rank(second)
    assert (a < b) + (a == b) + (a > b) == 1
    assert (a == b) == ((a.category, a.value) == (b.category, b.value))


def test_every_multiset_reading_is_the_search_reading_of_a_sorted_hand() -> None:
    # Spot-check the table against the search on every hand drawn from a fixed 13-card slice.
    rules = HouseRules(three_six_pair=True)
    evaluator, search = Evaluator(rules), OxSearch(rules)
    for cards in itertools.combinations(standard_deck()[13:26], 5):
        assert evaluator.rank(cards) == search.read(cards).rank


# -- one hand without the whole table -----------------------------------------------------------


@functools.cache
def whole_table(rules: HouseRules) -> tuple[dict[int, Reading], dict[int, HandRank]]:
    """Every multiset's reading, built in one go as the evaluator once did at construction."""
    search = OxSearch(rules)
    readings = {
        multiset_key(classes): search.read([class_representative(c) for c in classes])
        for classes in class_multisets()
    }
    return readings, {key: reading.rank for key, reading in readings.items()}


@settings(max_examples=100)
@given(hands(), HOUSE_RULES)
def test_one_hand_searched_alone_reads_as_the_whole_table_does(
    cards: list[Card], rules: HouseRules
) -> None:
    """``gnau evaluate`` searches only the multiset of the hand it is given: its answer must be
    the one the whole table, built first, gives (the same reading, not only the same rank)."""
    flags = (rules.ten_is_duke, rules.three_six_pair, rules.trips_make_ox, rules.five_small)
    # Forget whatever earlier examples filled in, so this hand's entry is searched now.
    evaluation._readings_table.cache_clear()
    evaluation._ranks_table.cache_clear()
    alone = Evaluator(rules)
    searched = (alone.rank(cards), alone.evaluate(cards))
    assert len(evaluation._readings_table(*flags)) == 1  # only this hand's multiset
    tabled = Evaluator(rules)
    tabled._readings, tabled._ranks = whole_table(rules)  # type: ignore[assignment]
    assert searched == (tabled.rank(cards), tabled.evaluate(cards))
