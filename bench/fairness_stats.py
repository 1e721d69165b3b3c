"""Statistical evidence that the shuffle is uniform, at 99% confidence per test.

Deals many complete rounds through the real pipeline (commit, lock, shuffle, deal; 1 deck,
9 seats, default house rules) and runs, with ``scipy.stats`` for every statistic's
distribution and p-value:

- **position by card**: chi-square of the 52x52 matrix counting which card lands at which
  deck position (scaled for its fixed margins, below);
- **each position**: ``scipy.stats.chisquare`` of the 52 cards at each of the 52 positions,
  then ``scipy.stats.kstest`` of those 52 p-values against the uniform distribution;
- **serial pairs**: ``chisquare`` of the first card of round 2k against the first card of
  round 2k+1 (disjoint pairs of consecutive rounds, so the pairs are independent);
- **serial correlation**: ``scipy.stats.pearsonr`` of the first card's index in consecutive
  rounds (lag 1);
- **runs**: the changes between "first card in the upper half of the deck order" in
  consecutive rounds, an exact ``scipy.stats.binomtest`` against Binomial(n - 1, 1/2);
- **hand categories**: for each of the 9 seats, ``chisquare`` of its hand category against the
  exact counts over all C(52, 5) hands (``gnau_service.rules.stats.hand_stats``, what
  ``gnau stats`` prints);
- **serial categories**: ``scipy.stats.chi2_contingency`` of seat 1's hand category in round
  2k against round 2k+1 (disjoint pairs): independence of consecutive rounds' outcomes.

A test passes when its p-value is at least 0.01. Round ``i`` uses the server seed
``SHA-256("gnau-dealer/bench/fairness-stats" || master_seed || uint64(i))``: any run can be
repeated exactly with ``--seed``, and the rounds can be dealt by any number of processes in any
order. ``--cache DIR`` keeps the tally of each block of ``CACHE_ROUNDS`` rounds, so an
interrupted run resumes, and a report on the first N rounds of a longer run costs nothing.
Dealing and counting are pure Python; the statistics and the figures need the ``evidence``
extra (``pip install -e '.[evidence]'``: scipy, numpy, matplotlib).

    .venv/bin/python bench/fairness_stats.py --seed 00 --out-dir docs/evidence  # 10M rounds
    .venv/bin/python bench/fairness_stats.py --shuffles 20000 --seed 00
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.metadata
import math
import multiprocessing
import os
import pickle
import platform
import secrets
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

import matplotlib as mpl
import numpy as np
from matplotlib import pyplot as plt
from scipy import stats

from gnau_service.fairness import CommittedRound, LockedSeat
from gnau_service.fairness.encoding import CURRENT_VERSION
from gnau_service.rules.cards import CARDS_PER_DECK, card_from_index
from gnau_service.rules.evaluation import Evaluator
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.stats import hand_stats

if TYPE_CHECKING:
    from matplotlib.figure import Figure

ALPHA: Final = 0.01
CARDS: Final = CARDS_PER_DECK
RULES: Final = HouseRules()
# v2 rounds: each seat names its player by a reference (fixed ones here; the service's are keyed).
SEATS: Final = tuple(LockedSeat(number, f"p-{number:032x}", 100) for number in range(1, 10))
SEAT_COUNT: Final = len(SEATS)
MIN_EXPECTED_PER_CELL: Final = 5.0
DEFAULT_SHUFFLES: Final = 10_000_000
CACHE_ROUNDS: Final = 50_000
"""Rounds per cached block (``--cache``): fixed, so that runs of any length share blocks."""
CATEGORIES: Final = tuple(hand_stats(RULES).categories)
"""The hand categories in ``hand_stats``'s order; a round records seat 1's by its index."""
ROUND_SEED_TAG: Final = b"gnau-dealer/bench/fairness-stats"
DEFAULT_OUT_DIR: Final = Path(__file__).resolve().parent / "results"
HEATMAP_NAME: Final = "fairness_position_by_card.png"
RESIDUALS_NAME: Final = "fairness_residuals.png"
CARD_NAMES: Final = tuple(str(card_from_index(index)) for index in range(CARDS))

mpl.use("Agg")  # files only, never a window


# --- counting rounds ----------------------------------------------------------------------


@dataclass
class Tally:
    """What the tests need from a run of rounds; tallies of disjoint runs merge."""

    rounds: int = 0
    position_counts: list[int] = field(default_factory=lambda: [0] * CARDS * CARDS)
    """``position_counts[position * 52 + card_index]``: times the card was at the position."""
    first_cards: bytearray = field(default_factory=bytearray)
    """The card index at position 0 of each round, in round order."""
    seat_categories: list[Counter[str]] = field(
        default_factory=lambda: [Counter() for _ in range(SEAT_COUNT)]
    )
    """``seat_categories[s]``: how often seat ``s + 1`` was dealt each hand category."""
    first_categories: bytearray = field(default_factory=bytearray)
    """Seat 1's hand category (its index in ``CATEGORIES``) in each round, in round order."""
    cached_rounds: int = 0
    """Rounds whose counts were read from ``--cache`` (dealt by an earlier run), not dealt now."""

    def add_round(self, deck: Sequence[int], seat_categories: Sequence[str] = ()) -> None:
        counts = self.position_counts
        for position, card_index in enumerate(deck):
            counts[position * CARDS + card_index] += 1
        self.first_cards.append(deck[0])
        for seat, category in enumerate(seat_categories):
            self.seat_categories[seat][category] += 1
        if seat_categories:
            self.first_categories.append(CATEGORIES.index(seat_categories[0]))
        self.rounds += 1

    def merge(self, later: Tally) -> None:
        """Add ``later``, whose rounds come right after this tally's."""
        self.rounds += later.rounds
        self.position_counts = [
            a + b for a, b in zip(self.position_counts, later.position_counts, strict=True)
        ]
        self.first_cards += later.first_cards
        for mine, theirs in zip(self.seat_categories, later.seat_categories, strict=True):
            mine.update(theirs)
        self.first_categories += later.first_categories
        self.cached_rounds += later.cached_rounds


def round_seed(master_seed: bytes, index: int) -> bytes:
    return hashlib.sha256(ROUND_SEED_TAG + master_seed + index.to_bytes(8, "big")).digest()


def tally_rounds(master_seed: bytes, start: int, stop: int) -> Tally:
    """Deal rounds ``start .. stop-1`` through the real pipeline and count them."""
    evaluator = Evaluator(RULES)
    tally = Tally()
    for index in range(start, stop):
        committed = CommittedRound(f"stats/{index}", RULES, round_seed(master_seed, index))
        dealt = committed.lock(SEATS).deal()
        categories = [str(evaluator.rank(hand.cards).category) for hand in dealt.deal.seat_hands]
        tally.add_round([card.index for card in dealt.deck], categories)
    return tally


def _tally_chunk(arguments: tuple[bytes, int, int, Path | None]) -> Tally:
    master_seed, start, stop, cache = arguments
    if cache is None:
        return tally_rounds(master_seed, start, stop)
    path = cache / master_seed.hex() / f"{start:012d}-{stop:012d}.pickle"
    if path.exists():
        loaded: Tally = pickle.loads(path.read_bytes())
        loaded.cached_rounds = loaded.rounds
        return loaded
    tally = tally_rounds(master_seed, start, stop)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_bytes(pickle.dumps(tally))  # read back only from the cache it wrote
    partial.replace(path)  # whole or absent, even if the run is killed
    return tally


def tally_in_parallel(
    master_seed: bytes, rounds: int, workers: int, cache: Path | None = None
) -> Tally:
    """The same tally as ``tally_rounds(master_seed, 0, rounds)``, spread over processes;
    with ``cache``, blocks of ``CACHE_ROUNDS`` rounds are read from and written to it."""
    if cache is None and workers <= 1:
        return tally_rounds(master_seed, 0, rounds)
    # Several chunks per worker even out the load; cached blocks keep their fixed size.
    chunk = CACHE_ROUNDS if cache else max(1, min(CACHE_ROUNDS, -(-rounds // (workers * 8))))
    chunks = [
        (master_seed, start, min(start + chunk, rounds), cache) for start in range(0, rounds, chunk)
    ]
    total = Tally()
    with multiprocessing.Pool(max(1, workers)) as pool:
        for part in pool.imap(_tally_chunk, chunks):  # in order: the serial tests need it
            total.merge(part)
    return total


# --- the tests ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TestResult:
    name: str
    statistic: float
    degrees_of_freedom: int | None
    p_value: float
    detail: str
    method: str
    """The scipy function, or distribution, the p-value comes from."""

    @property
    def passed(self) -> bool:
        return self.p_value >= ALPHA


def position_by_card_test(tally: Tally) -> TestResult:
    """Chi-square of the 52x52 position-by-card matrix.

    Each shuffle puts every card at exactly one position, so both margins are fixed and the
    cell counts are not independent: for uniform permutations, sum((O - E)**2 / E) is
    52/51 times a chi-square with 51**2 degrees of freedom (its mean is 2704 * 51/52 = 2652,
    not 2601). The statistic is scaled by 51/52 to be one; the p-value is
    ``scipy.stats.chi2.sf``.
    """
    expected = tally.rounds / CARDS
    raw = sum((count - expected) ** 2 for count in tally.position_counts) / expected
    statistic = raw * (CARDS - 1) / CARDS
    df = (CARDS - 1) ** 2
    return TestResult(
        "position by card (52x52)",
        statistic,
        df,
        float(stats.chi2.sf(statistic, df)),
        f"{tally.rounds:,} shuffles, {expected:,.1f} expected per cell",
        "chi2.sf, statistic x 51/52",
    )


def position_p_values(tally: Tally) -> list[float]:
    """For each deck position, ``scipy.stats.chisquare`` of the cards found there (uniform
    expected): each row is a multinomial sample on its own, so each is an exact chi-square
    with 51 degrees of freedom."""
    matrix = np.array(tally.position_counts, dtype=float).reshape(CARDS, CARDS)
    return [float(stats.chisquare(row).pvalue) for row in matrix]


def each_position_test(tally: Tally) -> TestResult:
    """The 52 per-position p-values against the uniform distribution (Kolmogorov-Smirnov):
    a bias confined to a few positions shows here though the whole matrix dilutes it."""
    p_values = position_p_values(tally)
    result = stats.kstest(p_values, "uniform")
    return TestResult(
        "each position: 52 chi-squares, KS of their p-values",
        float(result.statistic),
        None,
        float(result.pvalue),
        f"smallest of the 52 p-values {min(p_values):.4f}",
        "chisquare per row; kstest vs uniform",
    )


def serial_pair_test(tally: Tally) -> TestResult:
    """Chi-square of (first card of round 2k, first card of round 2k+1) against uniform.

    Falls back from cards (52x52 cells) to ranks (13x13) when there are too few pairs for at
    least five expected per cell.
    """
    pairs = len(tally.first_cards) // 2
    by_card = pairs / CARDS**2 >= MIN_EXPECTED_PER_CELL
    classes = CARDS if by_card else 13
    firsts = np.frombuffer(bytes(tally.first_cards[: 2 * pairs]), dtype=np.uint8).astype(int)
    cells = firsts if by_card else firsts % 13
    counts = np.bincount(cells[0::2] * classes + cells[1::2], minlength=classes**2)
    result = stats.chisquare(counts)
    unit = "cards, 52x52" if by_card else "ranks, 13x13 (too few pairs for 52x52)"
    return TestResult(
        "serial pairs, first card of consecutive rounds",
        float(result.statistic),
        classes**2 - 1,
        float(result.pvalue),
        f"{pairs:,} disjoint pairs by {unit}, {pairs / classes**2:,.1f} expected per cell",
        "chisquare",
    )


def serial_correlation_test(tally: Tally) -> TestResult:
    """Pearson's correlation of the first card's index with the next round's."""
    firsts = np.frombuffer(bytes(tally.first_cards), dtype=np.uint8).astype(float)
    result = stats.pearsonr(firsts[:-1], firsts[1:])
    return TestResult(
        "serial correlation, lag 1, first card",
        float(result.statistic),
        None,
        float(result.pvalue),
        f"r = {float(result.statistic):+.5f} over {len(firsts):,} rounds",
        "pearsonr",
    )


def runs_test(tally: Tally) -> TestResult:
    """Runs of 'first card index >= 26' across rounds: each round is a fair coin, so the
    number of changes between consecutive rounds is Binomial(n - 1, 1/2); exact test."""
    upper = np.frombuffer(bytes(tally.first_cards), dtype=np.uint8) >= CARDS // 2
    changes = int(np.count_nonzero(upper[1:] != upper[:-1]))
    trials = len(upper) - 1
    result = stats.binomtest(changes, trials, 0.5)
    return TestResult(
        "runs above/below the middle, first card",
        float(changes + 1),
        None,
        float(result.pvalue),
        f"{changes + 1:,} runs, {1 + trials / 2:,.1f} expected",
        "binomtest",
    )


def hand_category_test(
    observed: Counter[str] | dict[str, int], exact: dict[str, int], seat: int = 1
) -> TestResult:
    """Chi-square of one seat's hand categories against the exact counts over all hands.

    Categories expected fewer than five times are pooled, rarest first, into the next rarest.
    """
    total_hands = sum(exact.values())
    hands = sum(observed.values())
    cells = sorted(
        ([exact[name] * hands / total_hands, observed.get(name, 0)] for name in exact),
        key=lambda cell: cell[0],
    )
    while len(cells) > 2 and cells[0][0] < MIN_EXPECTED_PER_CELL:
        rarest = cells.pop(0)
        cells[0] = [cells[0][0] + rarest[0], cells[0][1] + rarest[1]]
    expected = [cell[0] for cell in cells]
    observed = [cell[1] for cell in cells]
    result = stats.chisquare(observed, expected)
    return TestResult(
        f"hand categories, seat {seat}",
        float(result.statistic),
        len(cells) - 1,
        float(result.pvalue),
        f"{hands:,} hands in {len(cells)} cells",
        "chisquare",
    )


def serial_category_test(tally: Tally, exact: dict[str, int]) -> TestResult:
    """Independence of seat 1's hand category in round 2k and in round 2k+1 (disjoint pairs):
    ``scipy.stats.chi2_contingency`` of the table of pairs.

    Categories are merged, rarest first, until each row's expected share of the pairs gives
    every cell at least five expected.
    """
    pairs = len(tally.first_categories) // 2
    total = sum(exact.values())
    order = sorted(range(len(CATEGORIES)), key=lambda index: exact[CATEGORIES[index]])
    groups = [[index] for index in order]
    share = [exact[CATEGORIES[index]] / total for index in order]
    while len(groups) > 2 and pairs * share[0] ** 2 < MIN_EXPECTED_PER_CELL:
        groups[1] += groups.pop(0)
        share[1] += share.pop(0)
    group_of = np.zeros(len(CATEGORIES), dtype=int)
    for group, members in enumerate(groups):
        group_of[members] = group
    cells = group_of[np.frombuffer(bytes(tally.first_categories[: 2 * pairs]), dtype=np.uint8)]
    table = np.bincount(cells[0::2] * len(groups) + cells[1::2], minlength=len(groups) ** 2)
    result = stats.chi2_contingency(table.reshape(len(groups), len(groups)), correction=False)
    return TestResult(
        "serial hand categories, seat 1, consecutive rounds",
        float(result.statistic),
        int(result.dof),
        float(result.pvalue),
        f"{pairs:,} disjoint pairs, {len(groups)}x{len(groups)} table of category groups",
        "chi2_contingency",
    )


@dataclass(frozen=True)
class Battery:
    master_seed: bytes
    workers: int
    elapsed_seconds: float
    tally: Tally
    exact_categories: dict[str, int]
    results: tuple[TestResult, ...]

    @property
    def passed(self) -> bool:
        return all(result.passed for result in self.results)


def run_battery(
    shuffles: int, master_seed: bytes, workers: int = 1, cache: Path | None = None
) -> Battery:
    """Deal ``shuffles`` rounds and run every test on them."""
    if shuffles < 2:
        raise ValueError(f"need at least 2 shuffles, got {shuffles}")
    started = time.perf_counter()
    tally = tally_in_parallel(master_seed, shuffles, workers, cache)
    elapsed = time.perf_counter() - started
    exact = hand_stats(RULES).categories
    results = (
        position_by_card_test(tally),
        each_position_test(tally),
        serial_pair_test(tally),
        serial_correlation_test(tally),
        runs_test(tally),
        *(
            hand_category_test(observed, exact, seat)
            for seat, observed in enumerate(tally.seat_categories, start=1)
        ),
        serial_category_test(tally, exact),
    )
    return Battery(master_seed, workers, elapsed, tally, exact, results)


# --- the figures ----------------------------------------------------------------------------


def position_residuals(tally: Tally) -> list[float]:
    """The standardized residual (O - E) / sd of each position-by-card cell: the cell is
    Binomial(rounds, 1/52), so each is close to standard normal for a fair shuffle."""
    expected = tally.rounds / CARDS
    sd = math.sqrt(tally.rounds * (1 / CARDS) * (1 - 1 / CARDS))
    return [(count - expected) / sd for count in tally.position_counts]


COLOUR_LIMIT: Final = 4.0
"""The colour scale runs from -4 to +4 sd; a fair shuffle's 2,704 cells seldom go past 4."""


def heatmap_figure(tally: Tally, result: TestResult) -> Figure:
    """Deck position by card, coloured by standardized residual, with its scale."""
    residuals = np.array(position_residuals(tally)).reshape(CARDS, CARDS)
    figure, axes = plt.subplots(figsize=(13, 11.5), layout="constrained")
    image = axes.imshow(
        residuals,
        cmap="RdBu_r",
        vmin=-COLOUR_LIMIT,
        vmax=COLOUR_LIMIT,
        interpolation="nearest",
        aspect="equal",
    )
    axes.set_title(
        f"Where each card lands after {tally.rounds:,} shuffles (1 deck)\n"
        f"white = as often as expected ({tally.rounds / CARDS:,.0f} per cell), "
        "red = more often, blue = less often\n"
        f"chi-square {result.statistic:,.1f} on {result.degrees_of_freedom:,} df, "
        f"p = {result.p_value:.3f} ({'pass' if result.passed else 'FAIL'} at 99%)",
        fontsize=13,
    )
    axes.set_xlabel("card (canonical deck order: clubs, diamonds, hearts, spades)", fontsize=12)
    axes.set_ylabel("deck position (0 = first card dealt)", fontsize=12)
    axes.set_xticks(range(CARDS), CARD_NAMES, rotation=90, fontsize=8, family="monospace")
    axes.set_yticks(range(0, CARDS, 3), [str(p) for p in range(0, CARDS, 3)], fontsize=9)
    for boundary in (12.5, 25.5, 38.5):
        axes.axvline(boundary, color="0.35", linewidth=1.2)
    suits = axes.secondary_xaxis("top")
    suits.set_xticks([6, 19, 32, 45], ["clubs", "diamonds", "hearts", "spades"], fontsize=12)
    suits.tick_params(length=0)
    colour_bar = figure.colorbar(image, ax=axes, shrink=0.8, extend="both")
    colour_bar.set_label(
        "standardized residual (observed - expected) / sd, in standard deviations", fontsize=12
    )
    colour_bar.set_ticks(np.arange(-COLOUR_LIMIT, COLOUR_LIMIT + 1))
    return figure


def residuals_figure(tally: Tally) -> Figure:
    """The 2,704 residuals against the standard normal curve they should follow."""
    residuals = np.array(position_residuals(tally))
    figure, axes = plt.subplots(figsize=(10, 6), layout="constrained")
    bins = np.linspace(-5, 5, 51)
    axes.hist(residuals, bins=bins, color="0.65", edgecolor="0.3", label="the 2,704 cells")
    grid = np.linspace(-5, 5, 401)
    width = bins[1] - bins[0]
    axes.plot(
        grid,
        stats.norm.pdf(grid) * len(residuals) * width,
        color="tab:red",
        linewidth=2,
        label="standard normal, as a fair shuffle gives",
    )
    beyond = int(np.count_nonzero(np.abs(residuals) > 2.576))
    expected_beyond = len(residuals) * 2 * stats.norm.sf(2.576)
    axes.set_title(
        f"Position-by-card residuals after {tally.rounds:,} shuffles\n"
        f"{beyond} cells beyond +/-2.58 sd, {expected_beyond:.0f} expected by chance; "
        f"largest {residuals[np.argmax(np.abs(residuals))]:+.2f} sd",
        fontsize=13,
    )
    axes.set_xlabel("standardized residual (observed - expected) / sd", fontsize=12)
    axes.set_ylabel("number of cells (of 2,704)", fontsize=12)
    axes.legend(fontsize=11)
    return figure


def save_figure(figure: Figure, path: Path) -> None:
    figure.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(figure)


# --- the report -----------------------------------------------------------------------------


def _format_statistic(result: TestResult) -> str:
    if result.statistic == int(result.statistic) and abs(result.statistic) >= 1:
        return f"{int(result.statistic):,}"  # a count
    if result.degrees_of_freedom is None and abs(result.statistic) < 1:
        return f"{result.statistic:+.5f}"  # a correlation or a KS distance
    return f"{result.statistic:,.3f}"


def render_report(battery: Battery) -> str:
    tally = battery.tally
    seconds = battery.elapsed_seconds
    lines = [
        "# Shuffle fairness statistics",
        "",
        f"- Rounds dealt: {tally.rounds:,} (1 deck, 9 seats, default house rules), through "
        "commit, lock, HMAC_DRBG shuffle and deal, fairness construction "
        f"{CURRENT_VERSION.name.lower()} (the default of this checkout).",
        f"- Master seed: `{battery.master_seed.hex()}` (repeat with "
        f"`bench/fairness_stats.py --shuffles {tally.rounds} --seed {battery.master_seed.hex()}`; "
        "each round's server seed is derived from it, so any process may deal any round).",
        (
            f"- Dealt in {seconds:,.1f} s on {battery.workers} worker process(es): "
            f"{tally.rounds / seconds:,.0f} rounds/s."
            if not tally.cached_rounds
            else f"- {tally.cached_rounds:,} of the rounds were dealt by an earlier run of the "
            "same command and read from its `--cache`; this run took "
            f"{seconds:,.1f} s on {battery.workers} worker process(es)."
        ),
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores shared with other work; "
        f"Python {platform.python_version()}; "
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d}.",
        f"- Statistics: scipy {_version('scipy')} (`scipy.stats`), figures: matplotlib "
        f"{_version('matplotlib')}.",
        f"- Each test at 99% confidence: it passes when p >= {ALPHA}. A fair shuffle fails any "
        "one test about once in 100 runs.",
        "",
        f"**Overall: {'PASS' if battery.passed else 'FAIL'}**",
        "",
        "| test | statistic | df | p-value | 99% | scipy | notes |",
        "|---|---:|---:|---:|---|---|---|",
    ]
    for result in battery.results:
        df = "" if result.degrees_of_freedom is None else str(result.degrees_of_freedom)
        verdict = "pass" if result.passed else "**FAIL**"
        lines.append(
            f"| {result.name} | {_format_statistic(result)} | {df} | {result.p_value:.4f} "
            f"| {verdict} | `{result.method}` | {result.detail} |"
        )
    all_seats: Counter[str] = sum(tally.seat_categories, Counter())
    hands = sum(all_seats.values())
    total = sum(battery.exact_categories.values())
    lines += [
        "",
        "## Hand categories, all seats",
        "",
        f"Exact counts are over all {total:,} five-card hands (`hand_stats`, as `gnau stats` "
        f"prints them); observed: the {SEAT_COUNT} seats' hands together (each seat is tested "
        "on its own above: hands of one round share a deck, so the pooled counts are not a "
        "multinomial sample).",
        "",
        "| category | exact count | exact share | expected | observed | observed share |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, count in battery.exact_categories.items():
        observed = all_seats.get(name, 0)
        lines.append(
            f"| {name} | {count:,} | {count / total:.6f} | {count * hands / total:,.1f} "
            f"| {observed:,} | {observed / hands:.6f} |"
        )
    tests = len(battery.results)
    residuals = position_residuals(tally)
    worst = max(range(len(residuals)), key=lambda cell: abs(residuals[cell]))
    position, card = divmod(worst, CARDS)
    expected_per_cell = tally.rounds / CARDS
    cell_sd = math.sqrt(tally.rounds * (1 / CARDS) * (1 - 1 / CARDS))
    matrix_df, row_df = (CARDS - 1) ** 2, CARDS - 1
    matrix_margin = float(stats.chi2.isf(ALPHA, matrix_df)) - matrix_df
    row_margin = float(stats.chi2.isf(ALPHA, row_df)) - row_df
    matrix_bias = math.sqrt(matrix_margin) * cell_sd / expected_per_cell
    row_bias = math.sqrt(row_margin) * cell_sd / expected_per_cell
    lines += [
        "",
        "## Position by card",
        "",
        f"![position-by-card heatmap]({HEATMAP_NAME})",
        "",
        "Each cell is one card (column) at one deck position (row), coloured by how far its "
        "count is from the expected count, in standard deviations (the colour bar). A fair "
        "shuffle shows pale noise with no pattern: no row, column or diagonal darker than the "
        "rest.",
        "",
        f"![histogram of the residuals]({RESIDUALS_NAME})",
        "",
        f"Largest residual: {residuals[worst]:+.2f} sd ({card_from_index(card)} at position "
        f"{position}); with 2,704 cells, about 27 beyond 2.58 sd are expected by chance, "
        f"observed {sum(abs(r) > 2.576 for r in residuals)}.",
        "",
        "## What this shows, and what it does not",
        "",
        f"- At {tally.rounds:,} rounds, "
        + (
            "no test sees a departure from a uniformly random deck"
            if battery.passed
            else "**a test sees a departure from a uniformly random deck**"
        )
        + ": each card equally likely at each position (the matrix and each position), "
        "consecutive rounds independent (serial pairs, correlation, runs, hand categories), "
        "each seat's hands as frequent as their exact counts.",
        f"- Resolution: a cell's count has a standard deviation of {cell_sd:,.0f}, "
        f"{cell_sd / expected_per_cell:.2%} of its expected {expected_per_cell:,.0f}. A bias "
        "confined to one cell, of z standard deviations, adds about z squared to the "
        f"statistics, so it fails the matrix test (99% threshold {matrix_margin:.0f} above "
        f"its mean) from about {matrix_bias:.1%} of the cell's count, and its position's "
        f"chi-square ({row_margin:.0f} above the mean on 51 df) from about {row_bias:.1%}. "
        "A bias spread over many cells is seen at a far smaller size per cell.",
        f"- The {tests} tests read the same rounds (the first card of each "
        "feeds three of them; the seats share each deck), so their p-values are not "
        f"independent. At 99% each, a fair shuffle fails at least one of {tests} "
        f"independent tests in about one run in {1 / (1 - (1 - ALPHA) ** tests):.0f}.",
        "- Nothing here shows that the deck is unpredictable, which rests on the secret seed "
        "and on HMAC_DRBG (`docs/fairness.md`, section 3); `nist_sp800_22.md` and `dieharder.md` "
        "test the DRBG's bits themselves.",
        "",
    ]
    return "\n".join(lines)


def _version(package: str) -> str:
    return importlib.metadata.version(package)


def write_report(battery: Battery, out_dir: Path) -> tuple[Path, Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    heatmap = out_dir / HEATMAP_NAME
    residuals = out_dir / RESIDUALS_NAME
    report = out_dir / "fairness_stats.md"
    save_figure(heatmap_figure(battery.tally, battery.results[0]), heatmap)
    save_figure(residuals_figure(battery.tally), residuals)
    report.write_text(render_report(battery), encoding="utf-8")
    return report, heatmap, residuals


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Statistical tests of the fair shuffle.")
    parser.add_argument(
        "--shuffles", type=int, default=DEFAULT_SHUFFLES, help="rounds to deal (default 10M)"
    )
    parser.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--seed", help="master seed, hex (default: fresh from secrets)")
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR, help="report folder")
    parser.add_argument(
        "--cache", type=Path, help="keep each block's tally here; a rerun resumes from it"
    )
    args = parser.parse_args(argv)
    master_seed = bytes.fromhex(args.seed) if args.seed else secrets.token_bytes(16)
    print(f"dealing {args.shuffles:,} rounds on {args.workers} worker(s), seed {master_seed.hex()}")
    battery = run_battery(args.shuffles, master_seed, args.workers, args.cache)
    for result in battery.results:
        verdict = "pass" if result.passed else "FAIL"
        print(f"  {verdict}  p={result.p_value:.4f}  {result.name}: {result.detail}")
    written = write_report(battery, args.out_dir)
    verdict = "PASS" if battery.passed else "FAIL"
    print(f"{verdict} in {battery.elapsed_seconds:.1f} s; wrote {', '.join(map(str, written))}")
    return 0 if battery.passed else 1


if __name__ == "__main__":
    sys.exit(main())
