"""The statistics script: its tests on hand-computed tables (so scipy is checked by arithmetic,
not by itself), a fixed-seed run of the whole battery on the real shuffle (so it runs in every
test run and can never be flaky), its power to catch a bias, and its figures."""

from __future__ import annotations

import math
import random
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from PIL import Image

from gnau_service.rules.cards import CARDS_PER_DECK

from .conftest import REPO_ROOT, load_script

fairness_stats: ModuleType = load_script(REPO_ROOT / "bench" / "fairness_stats.py")

FIXED_MASTER_SEED = bytes(1)
SMOKE_SHUFFLES = 20_000


@pytest.fixture(scope="module")
def battery() -> Any:
    return fairness_stats.run_battery(SMOKE_SHUFFLES, FIXED_MASTER_SEED, workers=1)


def test_the_real_shuffle_passes_every_test_at_99_percent(battery: Any) -> None:
    results = battery.results
    assert [result.name for result in results] == [
        "position by card (52x52)",
        "each position: 52 chi-squares, KS of their p-values",
        "serial pairs, first card of consecutive rounds",
        "serial correlation, lag 1, first card",
        "runs above/below the middle, first card",
        *(f"hand categories, seat {seat}" for seat in range(1, 10)),
        "serial hand categories, seat 1, consecutive rounds",
    ]
    for result in results:
        assert 0.01 <= result.p_value <= 1.0, result
        assert result.passed
    assert battery.passed
    assert battery.tally.rounds == SMOKE_SHUFFLES
    assert sum(battery.tally.position_counts) == SMOKE_SHUFFLES * CARDS_PER_DECK


def test_the_report_and_figures_are_written(battery: Any, tmp_path: Path) -> None:
    report, heatmap, residuals = fairness_stats.write_report(battery, tmp_path / "results")
    text = report.read_text(encoding="utf-8")
    assert "**Overall: PASS**" in text
    assert f"({heatmap.name})" in text
    assert f"({residuals.name})" in text
    assert text.count("| pass |") == 15
    assert "`chi2.sf, statistic x 51/52`" in text
    assert "## What this shows, and what it does not" in text
    # 20,000 rounds: 384.6 per cell, sd sqrt(20000 / 52 * 51 / 52) = 19.42, i.e. 5.05%.
    assert "a standard deviation of 19, 5.05% of its expected 385" in text
    for figure in (heatmap, residuals):
        with Image.open(figure) as image:
            assert image.format == "PNG"
            width, height = image.size
            assert width >= 800
            assert height >= 500
            # Not blank: a figure of one colour would have one extreme.
            assert len(set(image.convert("L").getextrema())) == 2


def test_the_heatmap_says_what_it_shows(battery: Any) -> None:
    figure = fairness_stats.heatmap_figure(battery.tally, battery.results[0])
    try:
        heatmap, colour_bar = figure.axes[:2]
        assert "20,000 shuffles" in heatmap.get_title()
        assert "p = " in heatmap.get_title()
        assert heatmap.get_xlabel().startswith("card")
        assert heatmap.get_ylabel().startswith("deck position")
        assert [label.get_text() for label in heatmap.get_xticklabels()][:3] == ["AC", "2C", "3C"]
        assert "standardized residual" in colour_bar.get_ylabel()
        image = heatmap.get_images()[0]
        assert image.get_clim() == (-4.0, 4.0)
        assert image.get_array().shape == (CARDS_PER_DECK, CARDS_PER_DECK)
    finally:
        fairness_stats.plt.close(figure)


def test_a_parallel_run_counts_the_same_as_a_serial_one() -> None:
    serial = fairness_stats.tally_rounds(FIXED_MASTER_SEED, 0, 40)
    parallel = fairness_stats.tally_in_parallel(FIXED_MASTER_SEED, 40, workers=2)
    assert parallel == serial


def test_a_biased_shuffle_is_caught() -> None:
    """The naive 'swap each position with any position' shuffle is biased (52**52 equally
    likely paths onto 52! orders); the position-by-card tests must see it."""
    generator = random.Random(20240601)
    tally = fairness_stats.Tally()
    for _ in range(SMOKE_SHUFFLES):
        deck = list(range(CARDS_PER_DECK))
        for position in range(CARDS_PER_DECK):
            other = generator.randrange(CARDS_PER_DECK)
            deck[position], deck[other] = deck[other], deck[position]
        tally.add_round(deck)
    assert fairness_stats.position_by_card_test(tally).p_value < 1e-6
    assert fairness_stats.each_position_test(tally).p_value < 1e-6


def test_correlated_rounds_are_caught() -> None:
    generator = random.Random(7)
    tally = fairness_stats.Tally()
    first = 0
    for _ in range(SMOKE_SHUFFLES):
        # Each round's first card is the previous one's, give or take one.
        first = (first + generator.choice((-1, 0, 1))) % CARDS_PER_DECK
        tally.add_round([first, *(card for card in range(CARDS_PER_DECK) if card != first)])
    assert fairness_stats.serial_pair_test(tally).p_value < 1e-6
    assert fairness_stats.serial_correlation_test(tally).p_value < 1e-6
    assert fairness_stats.runs_test(tally).p_value < 1e-6


# --- each test against arithmetic done by hand --------------------------------------------------


def test_hand_category_chi_square_of_a_small_table() -> None:
    """Observed 10, 20, 30 against 20 each: (100 + 0 + 100) / 20 = 10 on 2 degrees of freedom,
    whose survival function is exp(-x/2): p = exp(-5)."""
    exact = {"A": 1, "B": 1, "C": 1}
    result = fairness_stats.hand_category_test({"A": 10, "B": 20, "C": 30}, exact)
    assert result.degrees_of_freedom == 2
    assert result.statistic == pytest.approx(10.0, rel=1e-12)
    assert result.p_value == pytest.approx(math.exp(-5), rel=1e-9)


def test_hand_category_chi_square_on_one_degree_of_freedom() -> None:
    """Observed 60, 40 against 50 each: (100 + 100) / 50 = 4 on 1 df: p = erfc(sqrt(2))."""
    result = fairness_stats.hand_category_test({"A": 60, "B": 40}, {"A": 1, "B": 1})
    assert result.statistic == pytest.approx(4.0, rel=1e-12)
    assert result.p_value == pytest.approx(math.erfc(math.sqrt(2)), rel=1e-9)


def test_hand_categories_pool_rare_cells_and_score_a_perfect_fit_as_one() -> None:
    exact = {"COMMON": 900, "RARE": 99, "RAREST": 1}
    result = fairness_stats.hand_category_test({"COMMON": 90, "RARE": 10}, exact)
    # 100 hands: RAREST (0.1 expected) and RARE (9.9) pool into 10.0, against COMMON's 90.
    assert result.degrees_of_freedom == 1
    assert result.statistic == pytest.approx(0.0)
    assert result.p_value == pytest.approx(1.0)


def test_the_position_statistic_of_52_identical_shuffles() -> None:
    """52 rounds of the unshuffled deck: 1 expected per cell; the 52 diagonal cells hold 52
    ((52 - 1)**2 = 2601 each), the other 2,652 hold 0 (1 each). Raw sum 52 * 2601 + 2652 =
    137,904, scaled by 51/52: 135,252."""
    tally = fairness_stats.Tally()
    for _ in range(52):
        tally.add_round(list(range(CARDS_PER_DECK)))
    result = fairness_stats.position_by_card_test(tally)
    assert result.statistic == pytest.approx(135_252.0, rel=1e-12)
    assert result.degrees_of_freedom == 2601
    assert result.p_value == 0.0


def test_the_position_p_value_at_the_mean_and_two_sd_above() -> None:
    """Chi-square on 2,601 df, by the Wilson-Hilferty approximation (accurate to about 1e-6
    here), worked by hand: at the mean, z = 0.00924 and p = 0.49631; two sd above the mean
    (2601 + 2 * sqrt(5202) = 2745.25), z = 1.97337 and p = 0.02423."""
    tally = fairness_stats.Tally(rounds=52, position_counts=[1] * CARDS_PER_DECK**2)
    assert fairness_stats.position_by_card_test(tally).p_value == 1.0  # a perfect fit
    k = 2601
    for statistic, expected in ((k, 0.49631), (k + 2 * math.sqrt(2 * k), 0.02423)):
        z = ((statistic / k) ** (1 / 3) - (1 - 2 / (9 * k))) / math.sqrt(2 / (9 * k))
        assert 0.5 * math.erfc(z / math.sqrt(2)) == pytest.approx(expected, abs=1e-5)
        assert float(fairness_stats.stats.chi2.sf(statistic, k)) == pytest.approx(
            expected, abs=1e-5
        )


def test_the_runs_test_is_exact_binomial() -> None:
    """11 rounds alternating below and above the middle: 10 changes in 10 fair coin tosses,
    p = 2 * 2**-10 (two-sided)."""
    tally = fairness_stats.Tally()
    for index in range(11):
        first = 0 if index % 2 == 0 else 51
        tally.add_round([first, *(card for card in range(CARDS_PER_DECK) if card != first)])
    result = fairness_stats.runs_test(tally)
    assert result.statistic == 11
    assert result.p_value == pytest.approx(2 / 1024, rel=1e-12)


def test_the_serial_pair_chi_square_of_a_small_table() -> None:
    """338 pairs by rank (too few for cards): 2 expected in each of 169 cells. All pairs are
    (A, A): (338 - 2)**2 / 2 + 168 * 2**2 / 2 = 56,448 + 336 = 56,784."""
    tally = fairness_stats.Tally()
    for _ in range(2 * 338):
        tally.add_round(list(range(CARDS_PER_DECK)))
    result = fairness_stats.serial_pair_test(tally)
    assert result.degrees_of_freedom == 168
    assert result.statistic == pytest.approx(56_784.0, rel=1e-12)
    assert "ranks, 13x13" in result.detail


def test_serial_correlation_of_a_small_sequence() -> None:
    """First cards 0, 1, 2, 3, 4: the lag-1 pairs (0,1) (1,2) (2,3) (3,4) lie on a line, r = 1;
    with 4 pairs the two-sided p-value of r = 1 is 0."""
    tally = fairness_stats.Tally()
    for first in range(5):
        tally.add_round([first, *(card for card in range(CARDS_PER_DECK) if card != first)])
    result = fairness_stats.serial_correlation_test(tally)
    assert result.statistic == pytest.approx(1.0, rel=1e-12)
    assert result.p_value == pytest.approx(0.0, abs=1e-12)


def test_consecutive_rounds_with_the_same_hand_category_are_caught() -> None:
    """Each odd round repeats the previous round's category for seat 1: the contingency table
    of pairs is diagonal, and the serial category test must see it."""
    exact = fairness_stats.hand_stats(fairness_stats.RULES).categories
    names = list(exact)
    generator = random.Random(11)
    weights = list(exact.values())
    tally = fairness_stats.Tally()
    for _ in range(SMOKE_SHUFFLES // 2):
        category = generator.choices(names, weights)[0]
        for _ in range(2):
            tally.add_round(list(range(CARDS_PER_DECK)), [category] * 9)
    result = fairness_stats.serial_category_test(tally, exact)
    assert result.p_value < 1e-6
    assert f"{SMOKE_SHUFFLES // 2:,} disjoint pairs" in result.detail
    independent = fairness_stats.Tally()
    for _ in range(SMOKE_SHUFFLES):
        independent.add_round(list(range(CARDS_PER_DECK)), generator.choices(names, weights) * 9)
    assert fairness_stats.serial_category_test(independent, exact).passed
