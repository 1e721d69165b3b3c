"""Statistical evidence that the shuffle is uniform, at 99% confidence per test.

Deals many complete rounds through the real pipeline (commit, lock, shuffle, deal; 1 deck,
9 seats, default house rules) and runs:

- **position by card**: chi-square of the 52x52 matrix counting which card lands at which
  deck position;
- **serial pairs**: chi-square of the first card of round 2k against the first card of round
  2k+1 (disjoint pairs of consecutive rounds, so the pairs are independent);
- **serial correlation**: lag-1 correlation of the first card's index across consecutive
  rounds;
- **runs**: runs of "first card in the upper half of the deck order" across rounds;
- **hand categories**: the category of seat 1's hand against the exact counts over all
  C(52, 5) hands (``gnau_service.rules.stats.hand_stats``).

A test passes when its p-value is at least 0.01. Round ``i`` uses the server seed
``SHA-256("gnau-dealer/bench/fairness-stats" || master_seed || uint64(i))``: any run can be
repeated exactly with ``--seed``. Everything is pure Python (p-values from the regularized
incomplete gamma function, the heatmap from a small PNG encoder): no numpy, scipy or plotting.

    .venv/bin/python bench/fairness_stats.py                       # 1,000,000 rounds, 2 cores
    .venv/bin/python bench/fairness_stats.py --shuffles 20000 --seed 00
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import math
import multiprocessing
import secrets
import struct
import sys
import time
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from gnau_service.fairness import CommittedRound, LockedSeat
from gnau_service.rules.cards import CARDS_PER_DECK, card_from_index
from gnau_service.rules.evaluation import Evaluator
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.stats import hand_stats

ALPHA: Final = 0.01
CARDS: Final = CARDS_PER_DECK
RULES: Final = HouseRules()
SEATS: Final = tuple(LockedSeat(number, f"player-{number}", 100) for number in range(1, 10))
MIN_EXPECTED_PER_CELL: Final = 5.0
ROUND_SEED_TAG: Final = b"gnau-dealer/bench/fairness-stats"
DEFAULT_OUT_DIR: Final = Path(__file__).resolve().parent / "results"


# --- p-values, in pure Python -------------------------------------------------------------


def regularized_upper_gamma(a: float, x: float) -> float:
    """Q(a, x) = Γ(a, x) / Γ(a): the series below ``a + 1``, Lentz's continued fraction above.

    (Numerical Recipes, section 6.2.) Accurate to about 1e-14 for the sizes used here.
    """
    if a <= 0:
        raise ValueError(f"a must be positive, got {a}")
    if x <= 0:
        return 1.0
    log_prefactor = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        denominator = a
        for _ in range(100_000):
            denominator += 1
            term *= x / denominator
            total += term
            if abs(term) < abs(total) * 1e-16:
                break
        return max(0.0, 1.0 - total * math.exp(log_prefactor))
    tiny = 1e-300
    b = x + 1 - a
    c = 1 / tiny
    d = 1 / b
    fraction = d
    for i in range(1, 100_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = d if abs(d) > tiny else tiny
        c = b + an / c
        c = c if abs(c) > tiny else tiny
        d = 1 / d
        fraction *= d * c
        if abs(d * c - 1) < 1e-16:
            break
    return math.exp(log_prefactor) * fraction


def chi_square_p_value(statistic: float, degrees_of_freedom: int) -> float:
    """P(X >= statistic) for X chi-square distributed with the given degrees of freedom."""
    return regularized_upper_gamma(degrees_of_freedom / 2, statistic / 2)


def normal_p_value(z: float) -> float:
    """Two-sided P(|Z| >= |z|) for a standard normal Z."""
    return math.erfc(abs(z) / math.sqrt(2))


# --- counting rounds ----------------------------------------------------------------------


@dataclass
class Tally:
    """What the tests need from a run of rounds; tallies of disjoint runs merge."""

    rounds: int = 0
    position_counts: list[int] = field(default_factory=lambda: [0] * CARDS * CARDS)
    """``position_counts[position * 52 + card_index]``: times the card was at the position."""
    first_cards: bytearray = field(default_factory=bytearray)
    """The card index at position 0 of each round, in round order."""
    categories: Counter[str] = field(default_factory=Counter)
    """Seat 1's hand category, per round."""

    def add_round(self, deck: Sequence[int], seat_one_category: str | None = None) -> None:
        counts = self.position_counts
        for position, card_index in enumerate(deck):
            counts[position * CARDS + card_index] += 1
        self.first_cards.append(deck[0])
        if seat_one_category is not None:
            self.categories[seat_one_category] += 1
        self.rounds += 1

    def merge(self, later: Tally) -> None:
        """Add ``later``, whose rounds come right after this tally's."""
        self.rounds += later.rounds
        self.position_counts = [
            a + b for a, b in zip(self.position_counts, later.position_counts, strict=True)
        ]
        self.first_cards += later.first_cards
        self.categories.update(later.categories)


def round_seed(master_seed: bytes, index: int) -> bytes:
    return hashlib.sha256(ROUND_SEED_TAG + master_seed + index.to_bytes(8, "big")).digest()


def tally_rounds(master_seed: bytes, start: int, stop: int) -> Tally:
    """Deal rounds ``start .. stop-1`` through the real pipeline and count them."""
    evaluator = Evaluator(RULES)
    tally = Tally()
    for index in range(start, stop):
        committed = CommittedRound(f"stats/{index}", RULES, round_seed(master_seed, index))
        dealt = committed.lock(SEATS).deal()
        category = evaluator.rank(dealt.deal.seat_hands[0].cards).category
        tally.add_round([card.index for card in dealt.deck], str(category))
    return tally


def _tally_chunk(arguments: tuple[bytes, int, int]) -> Tally:
    return tally_rounds(*arguments)


def tally_in_parallel(master_seed: bytes, rounds: int, workers: int) -> Tally:
    """The same tally as ``tally_rounds(master_seed, 0, rounds)``, spread over processes."""
    if workers <= 1:
        return tally_rounds(master_seed, 0, rounds)
    chunk = max(1, -(-rounds // (workers * 8)))  # several chunks per worker evens out the load
    chunks = [(master_seed, start, min(start + chunk, rounds)) for start in range(0, rounds, chunk)]
    total = Tally()
    with multiprocessing.Pool(workers) as pool:
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

    @property
    def passed(self) -> bool:
        return self.p_value >= ALPHA


def position_by_card_test(tally: Tally) -> TestResult:
    """Chi-square of the 52x52 position-by-card matrix.

    Each shuffle puts every card at exactly one position, so both margins are fixed and the
    cell counts are not independent: for uniform permutations, sum((O - E)**2 / E) is
    52/51 times a chi-square with 51**2 degrees of freedom. The statistic is scaled by 51/52
    to be one.
    """
    expected = tally.rounds / CARDS
    raw = sum((count - expected) ** 2 for count in tally.position_counts) / expected
    statistic = raw * (CARDS - 1) / CARDS
    df = (CARDS - 1) ** 2
    return TestResult(
        "position by card (52x52)",
        statistic,
        df,
        chi_square_p_value(statistic, df),
        f"{tally.rounds:,} shuffles, {expected:,.1f} expected per cell",
    )


def serial_pair_test(tally: Tally) -> TestResult:
    """Chi-square of (first card of round 2k, first card of round 2k+1) against uniform.

    Falls back from cards (52x52 cells) to ranks (13x13) when there are too few pairs for at
    least five expected per cell.
    """
    pairs = len(tally.first_cards) // 2
    by_card = pairs / CARDS**2 >= MIN_EXPECTED_PER_CELL
    classes = CARDS if by_card else 13

    def cell(card_index: int) -> int:
        return card_index if by_card else card_index % 13

    counts = Counter(
        (cell(tally.first_cards[2 * k]), cell(tally.first_cards[2 * k + 1])) for k in range(pairs)
    )
    expected = pairs / classes**2
    statistic = sum(
        (counts.get((a, b), 0) - expected) ** 2 / expected
        for a in range(classes)
        for b in range(classes)
    )
    df = classes**2 - 1
    unit = "cards, 52x52" if by_card else "ranks, 13x13 (too few pairs for 52x52)"
    return TestResult(
        "serial pairs, first card of consecutive rounds",
        statistic,
        df,
        chi_square_p_value(statistic, df),
        f"{pairs:,} disjoint pairs by {unit}, {expected:,.1f} expected per cell",
    )


def serial_correlation_test(tally: Tally) -> TestResult:
    """Lag-1 correlation of the first card's index, standardized with the known uniform mean
    and variance: under independence sum(z_i z_{i+1}) / sqrt(n - 1) is standard normal."""
    mean, variance = (CARDS - 1) / 2, (CARDS**2 - 1) / 12
    z = [(index - mean) / math.sqrt(variance) for index in tally.first_cards]
    lagged = sum(a * b for a, b in itertools.pairwise(z))
    correlation = lagged / (len(z) - 1)
    statistic = lagged / math.sqrt(len(z) - 1)
    return TestResult(
        "serial correlation, lag 1, first card",
        statistic,
        None,
        normal_p_value(statistic),
        f"r = {correlation:+.5f} over {len(z):,} rounds (z-test)",
    )


def runs_test(tally: Tally) -> TestResult:
    """Runs of 'first card index >= 26' across rounds: each is a fair coin, so the number of
    changes between consecutive rounds is Binomial(n - 1, 1/2)."""
    upper = [index >= CARDS // 2 for index in tally.first_cards]
    runs = 1 + sum(a != b for a, b in itertools.pairwise(upper))
    expected, variance = 1 + (len(upper) - 1) / 2, (len(upper) - 1) / 4
    statistic = (runs - expected) / math.sqrt(variance)
    return TestResult(
        "runs above/below the middle, first card",
        statistic,
        None,
        normal_p_value(statistic),
        f"{runs:,} runs, {expected:,.1f} expected (z-test)",
    )


def hand_category_test(tally: Tally, exact: dict[str, int]) -> TestResult:
    """Chi-square of seat 1's hand categories against the exact counts over all hands.

    Categories expected fewer than five times are pooled, rarest first, into the next rarest.
    """
    total_hands = sum(exact.values())
    hands = sum(tally.categories.values())
    cells = sorted(
        ([exact[name] * hands / total_hands, tally.categories.get(name, 0)] for name in exact),
        key=lambda cell: cell[0],
    )
    while len(cells) > 2 and cells[0][0] < MIN_EXPECTED_PER_CELL:
        rarest = cells.pop(0)
        cells[0] = [cells[0][0] + rarest[0], cells[0][1] + rarest[1]]
    statistic = sum((observed - expected) ** 2 / expected for expected, observed in cells)
    df = len(cells) - 1
    return TestResult(
        "hand categories, seat 1",
        statistic,
        df,
        chi_square_p_value(statistic, df),
        f"{hands:,} hands in {len(cells)} cells",
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


def run_battery(shuffles: int, master_seed: bytes, workers: int = 1) -> Battery:
    """Deal ``shuffles`` rounds and run every test on them."""
    if shuffles < 2:
        raise ValueError(f"need at least 2 shuffles, got {shuffles}")
    started = time.perf_counter()
    tally = tally_in_parallel(master_seed, shuffles, workers)
    elapsed = time.perf_counter() - started
    exact = hand_stats(RULES).categories
    results = (
        position_by_card_test(tally),
        serial_pair_test(tally),
        serial_correlation_test(tally),
        runs_test(tally),
        hand_category_test(tally, exact),
    )
    return Battery(master_seed, workers, elapsed, tally, exact, results)


# --- the report ---------------------------------------------------------------------------


def encode_png(width: int, height: int, rows: Iterable[bytes]) -> bytes:
    """An 8-bit RGB PNG (RFC 2083) of ``height`` rows of ``3 * width`` bytes each."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    raw = bytearray()
    for count, row in enumerate(rows, start=1):
        if len(row) != 3 * width or count > height:
            raise ValueError("rows do not match the image size")
        raw += b"\x00" + row  # filter type 0: the row as it is
    if len(raw) != height * (3 * width + 1):
        raise ValueError("rows do not match the image size")
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit truecolour
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(bytes(raw), 9))
        + chunk(b"IEND", b"")
    )


def _diverging_colour(z: float, clip: float = 3.0) -> bytes:
    """Blue below, white at, red above expectation; full colour at ``clip`` deviations."""
    strength = min(abs(z) / clip, 1.0)
    fade = round(255 * (1 - strength))
    return bytes((255, fade, fade)) if z > 0 else bytes((fade, fade, 255))


def position_residuals(tally: Tally) -> list[float]:
    """The standardized residual (O - E) / sd of each position-by-card cell."""
    expected = tally.rounds / CARDS
    sd = math.sqrt(tally.rounds * (1 / CARDS) * (1 - 1 / CARDS))
    return [(count - expected) / sd for count in tally.position_counts]


def heatmap_png(tally: Tally, cell_pixels: int = 10) -> bytes:
    """Rows are positions 0 (dealt first) to 51, columns cards AC..KC AD..KD AH..KH AS..KS;
    grey lines separate the suits; the strip at the bottom runs from -3 to +3 deviations."""
    residuals = position_residuals(tally)
    size = CARDS * cell_pixels
    rows: list[bytes] = []
    for position in range(CARDS):
        pixels = []
        for card in range(CARDS):
            colour = _diverging_colour(residuals[position * CARDS + card])
            suit_starts = card % 13 == 0 and card > 0
            pixels += [_GREY if suit_starts and x == 0 else colour for x in range(cell_pixels)]
        rows += [b"".join(pixels)] * cell_pixels
    legend = b"".join(_diverging_colour(-3 + 6 * x / (size - 1)) for x in range(size))
    rows += [_WHITE * size] * 4 + [legend] * 12
    return encode_png(size, len(rows), rows)


_GREY: Final = b"\x80\x80\x80"
_WHITE: Final = b"\xff\xff\xff"


def render_report(battery: Battery, heatmap_name: str) -> str:
    tally = battery.tally
    seconds = battery.elapsed_seconds
    lines = [
        "# Shuffle fairness statistics",
        "",
        f"- Rounds dealt: {tally.rounds:,} (1 deck, 9 seats, default house rules), through "
        "commit, lock, HMAC_DRBG shuffle and deal.",
        f"- Master seed: `{battery.master_seed.hex()}` (repeat with "
        f"`bench/fairness_stats.py --shuffles {tally.rounds} --seed {battery.master_seed.hex()}`).",
        f"- Dealt in {seconds:,.1f} s on {battery.workers} worker process(es): "
        f"{tally.rounds / seconds:,.0f} rounds/s.",
        f"- Each test at 99% confidence: it passes when p >= {ALPHA}. A fair shuffle fails any "
        "one test about once in 100 runs.",
        "",
        f"**Overall: {'PASS' if battery.passed else 'FAIL'}**",
        "",
        "| test | statistic | df | p-value | 99% | notes |",
        "|---|---:|---:|---:|---|---|",
    ]
    for result in battery.results:
        df = "normal" if result.degrees_of_freedom is None else str(result.degrees_of_freedom)
        verdict = "pass" if result.passed else "**FAIL**"
        lines.append(
            f"| {result.name} | {result.statistic:,.3f} | {df} | {result.p_value:.4f} "
            f"| {verdict} | {result.detail} |"
        )
    hands = sum(tally.categories.values())
    total = sum(battery.exact_categories.values())
    lines += [
        "",
        "## Hand categories of seat 1",
        "",
        f"Exact counts are over all {total:,} five-card hands (`hand_stats`).",
        "",
        "| category | exact count | exact share | expected | observed | observed share |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, count in battery.exact_categories.items():
        observed = tally.categories.get(name, 0)
        lines.append(
            f"| {name} | {count:,} | {count / total:.6f} | {count * hands / total:,.1f} "
            f"| {observed:,} | {observed / hands:.6f} |"
        )
    residuals = position_residuals(tally)
    worst = max(range(len(residuals)), key=lambda cell: abs(residuals[cell]))
    position, card = divmod(worst, CARDS)
    lines += [
        "",
        "## Position by card",
        "",
        f"![position-by-card heatmap]({heatmap_name})",
        "",
        "Rows: deck positions 0 (dealt first) to 51, top to bottom. Columns: cards in canonical "
        "order, AC..KC, AD..KD, AH..KH, AS..KS (grey lines between suits). Colour: the "
        "standardized residual (observed - expected) / sd of the cell, blue below and red above "
        "expectation, full colour at 3 sd; the bottom strip runs from -3 to +3 sd. A fair "
        "shuffle shows pale noise with no pattern.",
        "",
        f"Largest residual: {residuals[worst]:+.2f} sd ({card_from_index(card)} at position "
        f"{position}); with 2,704 cells, about 27 beyond 2.58 sd are expected by chance, "
        f"observed {sum(abs(r) > 2.576 for r in residuals)}.",
        "",
    ]
    return "\n".join(lines)


def write_report(battery: Battery, out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    heatmap = out_dir / "fairness_position_by_card.png"
    report = out_dir / "fairness_stats.md"
    heatmap.write_bytes(heatmap_png(battery.tally))
    report.write_text(render_report(battery, heatmap.name), encoding="utf-8")
    return report, heatmap


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Statistical tests of the fair shuffle.")
    parser.add_argument("--shuffles", type=int, default=1_000_000, help="rounds to deal")
    parser.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--seed", help="master seed, hex (default: fresh from secrets)")
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR, help="report folder")
    args = parser.parse_args(argv)
    master_seed = bytes.fromhex(args.seed) if args.seed else secrets.token_bytes(16)
    print(f"dealing {args.shuffles:,} rounds on {args.workers} worker(s), seed {master_seed.hex()}")
    battery = run_battery(args.shuffles, master_seed, args.workers)
    for result in battery.results:
        verdict = "pass" if result.passed else "FAIL"
        print(f"  {verdict}  p={result.p_value:.4f}  {result.name}: {result.detail}")
    report, heatmap = write_report(battery, args.out_dir)
    verdict = "PASS" if battery.passed else "FAIL"
    print(f"{verdict} in {battery.elapsed_seconds:.1f} s; wrote {report} and {heatmap}")
    return 0 if battery.passed else 1


if __name__ == "__main__":
    sys.exit(main())
