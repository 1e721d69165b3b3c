"""The statistics script: its maths, its PNG, a fixed-seed run of the whole battery on the real
shuffle (so it runs in every test run and can never be flaky), and its power to catch a bias."""

from __future__ import annotations

import math
import random
import struct
import zlib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from gnau_service.rules.cards import CARDS_PER_DECK

from .conftest import REPO_ROOT, load_script

stats: ModuleType = load_script(REPO_ROOT / "bench" / "fairness_stats.py")

FIXED_MASTER_SEED = bytes(1)
SMOKE_SHUFFLES = 20_000


@pytest.fixture(scope="module")
def battery() -> Any:
    return stats.run_battery(SMOKE_SHUFFLES, FIXED_MASTER_SEED, workers=1)


def test_the_real_shuffle_passes_every_test_at_99_percent(battery: Any) -> None:
    results = battery.results
    assert [result.name for result in results] == [
        "position by card (52x52)",
        "serial pairs, first card of consecutive rounds",
        "serial correlation, lag 1, first card",
        "runs above/below the middle, first card",
        "hand categories, seat 1",
    ]
    for result in results:
        assert result.p_value >= 0.01, result
        assert result.passed
    assert battery.passed
    assert battery.tally.rounds == SMOKE_SHUFFLES
    assert sum(battery.tally.position_counts) == SMOKE_SHUFFLES * CARDS_PER_DECK


def test_the_report_and_heatmap_are_written(battery: Any, tmp_path: Path) -> None:
    report, heatmap = stats.write_report(battery, tmp_path / "results")
    text = report.read_text(encoding="utf-8")
    assert "**Overall: PASS**" in text
    assert f"({heatmap.name})" in text
    assert text.count("| pass |") == 5
    width, height, pixels = _decode_png(heatmap.read_bytes())
    assert (width, height) == (520, 520 + 16)
    assert len(pixels) == height * width * 3


def test_a_parallel_run_counts_the_same_as_a_serial_one() -> None:
    serial = stats.tally_rounds(FIXED_MASTER_SEED, 0, 40)
    parallel = stats.tally_in_parallel(FIXED_MASTER_SEED, 40, workers=2)
    assert parallel == serial


def test_a_biased_shuffle_is_caught() -> None:
    """The naive 'swap each position with any position' shuffle is biased (52**52 equally
    likely paths onto 52! orders); the position-by-card test must see it."""
    generator = random.Random(20240601)
    tally = stats.Tally()
    for _ in range(SMOKE_SHUFFLES):
        deck = list(range(CARDS_PER_DECK))
        for position in range(CARDS_PER_DECK):
            other = generator.randrange(CARDS_PER_DECK)
            deck[position], deck[other] = deck[other], deck[position]
        tally.add_round(deck)
    assert stats.position_by_card_test(tally).p_value < 1e-6


def test_correlated_rounds_are_caught() -> None:
    generator = random.Random(7)
    tally = stats.Tally()
    first = 0
    for _ in range(SMOKE_SHUFFLES):
        # Each round's first card is the previous one's, give or take one.
        first = (first + generator.choice((-1, 0, 1))) % CARDS_PER_DECK
        tally.add_round([first, *(card for card in range(CARDS_PER_DECK) if card != first)])
    assert stats.serial_pair_test(tally).p_value < 1e-6
    assert stats.serial_correlation_test(tally).p_value < 1e-6
    assert stats.runs_test(tally).p_value < 1e-6


def test_hand_categories_pool_rare_cells_and_score_a_perfect_fit_as_one() -> None:
    exact = {"COMMON": 900, "RARE": 99, "RAREST": 1}
    tally = stats.Tally(categories={"COMMON": 90, "RARE": 10})
    result = stats.hand_category_test(tally, exact)
    # 100 hands: RAREST (0.1 expected) and RARE (9.9) pool into 10.0, against COMMON's 90.
    assert result.degrees_of_freedom == 1
    assert result.statistic == pytest.approx(0.0)
    assert result.p_value == pytest.approx(1.0)


@pytest.mark.parametrize("statistic", [0.1, 1.0, 3.0, 6.0, 20.0, 80.0])
def test_chi_square_p_values_match_closed_forms(statistic: float) -> None:
    assert stats.chi_square_p_value(statistic, 1) == pytest.approx(
        math.erfc(math.sqrt(statistic / 2)), rel=1e-12, abs=1e-300
    )
    assert stats.chi_square_p_value(statistic, 2) == pytest.approx(
        math.exp(-statistic / 2), rel=1e-12
    )
    assert stats.chi_square_p_value(statistic, 4) == pytest.approx(
        math.exp(-statistic / 2) * (1 + statistic / 2), rel=1e-12
    )


def test_chi_square_p_values_for_many_degrees_of_freedom() -> None:
    assert stats.chi_square_p_value(3.841458820694124, 1) == pytest.approx(0.05, rel=1e-9)
    # Wilson-Hilferty is accurate to about 1e-6 at 2,601 degrees of freedom.
    for statistic in (2400.0, 2601.0, 2750.0, 2900.0):
        k = 2601
        z = ((statistic / k) ** (1 / 3) - (1 - 2 / (9 * k))) / math.sqrt(2 / (9 * k))
        assert stats.chi_square_p_value(statistic, k) == pytest.approx(
            0.5 * math.erfc(z / math.sqrt(2)), abs=1e-5
        )
    assert stats.chi_square_p_value(0.0, 5) == 1.0


def test_normal_p_value() -> None:
    assert stats.normal_p_value(1.959963984540054) == pytest.approx(0.05, rel=1e-9)
    assert stats.normal_p_value(-2.5758293035489) == pytest.approx(0.01, rel=1e-9)


def test_png_encoder_round_trips() -> None:
    image_rows = [bytes(range(6 * y, 6 * y + 6)) for y in range(3)]  # 2 x 3 RGB pixels
    width, height, pixels = _decode_png(stats.encode_png(2, 3, image_rows))
    assert (width, height) == (2, 3)
    assert pixels == b"".join(image_rows)
    with pytest.raises(ValueError, match="image size"):
        stats.encode_png(2, 3, image_rows[:2])


def _decode_png(data: bytes) -> tuple[int, int, bytes]:
    """A minimal reader for the encoder's output: checks every CRC, returns RGB pixels."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    offset, chunks = 8, {}
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, kind
        chunks[kind] = body
        offset += 12 + length
    assert list(chunks) == [b"IHDR", b"IDAT", b"IEND"]
    width, height, depth, colour_type, *_ = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert (depth, colour_type) == (8, 2)
    raw = zlib.decompress(chunks[b"IDAT"])
    stride = 3 * width + 1
    assert len(raw) == height * stride
    assert all(raw[row * stride] == 0 for row in range(height))
    pixels = b"".join(raw[row * stride + 1 : (row + 1) * stride] for row in range(height))
    return width, height, pixels
