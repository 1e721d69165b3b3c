"""NIST SP 800-22 Rev. 1a, all 15 tests, on the shuffle DRBG's output, with section 4.2's checks.

**The bits.** The stream of ``bench/drbg_stream.py`` (the same rounds, master seed and DRBG
calls as ``dieharder.md``), in the DRBG's own byte order: each round's ``Generate(64)``
outputs as returned, each byte read most significant bit first. These are the bits of the
32-bit big-endian words the shuffle draws, in the order it draws them. Sequence ``j`` is bits
``j * n .. (j + 1) * n - 1`` of that stream (``n`` = 1,000,000 by default, as SP 800-22's
usual configuration).

**The tests** (NIST's defaults in its ``assess`` tool): frequency; block frequency (M = 128);
cumulative sums (forward and reverse); runs; longest run of ones; binary matrix rank; discrete
Fourier transform; non-overlapping template (m = 9, all 148 aperiodic templates); overlapping
template (m = 9); Maurer's universal; approximate entropy (m = 10); random excursions (8
states); random excursions variant (18 states); serial (m = 16, two p-values); linear
complexity (M = 500): 188 p-values per sequence, the rows of NIST's ``finalAnalysisReport``.

**The implementation.** ``sp80022suite`` (PyPI) is NIST's own C reference code of the suite
(``sts``, as revised for Rev. 1a) built as a Python extension. Ten of its tests return the
test's one p-value and are used as they are. For the five tests with several p-values, it
returns only the smallest (forward or reverse; one of 8 or 18 states; one of two serial
statistics; one of 148 templates), and the smallest of several p-values is not uniform, so
section 4.2's checks cannot use it. Those five are computed here with numpy from SP 800-22's
formulas (the functions below), every p-value of them; on every tenth sequence, the smallest is
checked against the C code's answer, the one number of them that NIST's code gives.
``tests/evidence/`` checks all 15 against the worked examples in SP 800-22's own text.

**Section 4.2's checks**, per p-value row over the ``m`` sequences: the proportion passing at
alpha = 0.01 must lie within p^ +/- 3 sqrt(p^ (1 - p^) / m), p^ = 0.99; the p-values must be
uniform: chi-square of their counts in 10 equal bins, P-value_T = igamc(9/2, chi2/2) >= 0.0001.
The random excursion tests apply only to sequences with at least 500 cycles; their rows count
those sequences only.

    .venv/bin/python bench/nist_sts.py --sequences 1000 --out docs/evidence/nist_sp800_22.md
    .venv/bin/python bench/nist_sts.py --sequences 10 --out /tmp/nist.md   # a quick look
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import math
import multiprocessing
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import sp80022suite
from scipy import special, stats

from gnau_service.fairness.encoding import CURRENT_VERSION

sys.path.insert(0, str(Path(__file__).resolve().parent))
from drbg_stream import DEFAULT_GENERATES, GENERATE_BYTES, raw_round_bytes

SEQUENCE_BITS: Final = 1_000_000
DEFAULT_SEQUENCES: Final = 1000
DEFAULT_SEED_HEX: Final = "00"
ALPHA: Final = 0.01
UNIFORMITY_ALPHA: Final = 0.0001
UNIFORMITY_MIN_SEQUENCES: Final = 55
"""SP 800-22 4.2.2: at least 55 sequences for the uniformity check to mean anything."""
BLOCK_FREQUENCY_M: Final = 128
TEMPLATE_M: Final = 9
APPROXIMATE_ENTROPY_M: Final = 10
SERIAL_M: Final = 16
LINEAR_COMPLEXITY_M: Final = 500
TEMPLATE_BLOCKS: Final = 8
EXCURSION_STATES: Final = (-4, -3, -2, -1, 1, 2, 3, 4)
VARIANT_STATES: Final = (*range(-9, 0), *range(1, 10))
MIN_CYCLES: Final = 500
ROUND_BYTES: Final = GENERATE_BYTES * DEFAULT_GENERATES


# --- the bits -------------------------------------------------------------------------------


def stream_bytes(master_seed: bytes, start: int, stop: int) -> bytes:
    """Bytes ``start .. stop-1`` of the raw DRBG stream (``drbg_stream.raw_round_bytes``)."""
    first, last = start // ROUND_BYTES, -(-stop // ROUND_BYTES)
    joined = b"".join(raw_round_bytes(master_seed, index) for index in range(first, last))
    offset = first * ROUND_BYTES
    return joined[start - offset : stop - offset]


def sequence_bits(master_seed: bytes, index: int, bits: int = SEQUENCE_BITS) -> np.ndarray:
    """Sequence ``index``: one 0/1 byte per bit, most significant bit of each byte first."""
    if bits % 8:
        raise ValueError(f"sequence length must be whole bytes, got {bits} bits")
    size = bits // 8
    raw = stream_bytes(master_seed, index * size, (index + 1) * size)
    return np.unpackbits(np.frombuffer(raw, dtype=np.uint8))


# --- the five tests with several p-values (SP 800-22 sections 2.13, 2.7, 2.14, 2.15, 2.11) ---


def _c_div(a: float, b: float) -> int:
    """C's integer division of the reference code's ``int`` expressions (toward zero)."""
    return int(a / b)


def _cusum_p(z: int, n: int) -> float:
    root = math.sqrt(n)
    k_range1 = range(_c_div(_c_div(-n, z) + 1, 4), _c_div(_c_div(n, z) - 1, 4) + 1)
    k_range2 = range(_c_div(_c_div(-n, z) - 3, 4), _c_div(_c_div(n, z) - 1, 4) + 1)
    sum1 = sum(
        special.ndtr((4 * k + 1) * z / root) - special.ndtr((4 * k - 1) * z / root)
        for k in k_range1
    )
    sum2 = sum(
        special.ndtr((4 * k + 3) * z / root) - special.ndtr((4 * k + 1) * z / root)
        for k in k_range2
    )
    return float(1.0 - sum1 + sum2)


def cumulative_sums(bits: np.ndarray) -> list[float]:
    """Section 2.13: [forward, reverse]."""
    walk = np.cumsum(2 * bits.astype(np.int64) - 1)
    top, bottom, end = max(0, int(walk.max())), min(0, int(walk.min())), int(walk[-1])
    forward = max(top, -bottom)
    reverse = max(top - end, end - bottom)
    return [_cusum_p(forward, len(bits)), _cusum_p(reverse, len(bits))]


def _pattern_counts(bits: np.ndarray, m: int) -> np.ndarray:
    """Counts of the overlapping m-bit patterns, the sequence wrapped around (section 2.11)."""
    if m == 0:
        return np.zeros(1)
    extended = np.concatenate([bits, bits[: m - 1]]).astype(np.int64)
    n = len(bits)
    values = np.zeros(n, dtype=np.int64)
    for offset in range(m):
        values = (values << 1) | extended[offset : offset + n]
    return np.bincount(values, minlength=1 << m).astype(float)


def _psi_squared(bits: np.ndarray, m: int) -> float:
    if m == 0:
        return 0.0
    counts = _pattern_counts(bits, m)
    n = len(bits)
    return float((1 << m) / n * np.sum(counts**2) - n)


def serial(bits: np.ndarray, m: int = SERIAL_M) -> list[float]:
    """Section 2.11: [P-value1, P-value2]."""
    psi_m, psi_m1, psi_m2 = (_psi_squared(bits, m - drop) for drop in (0, 1, 2))
    delta1 = psi_m - psi_m1
    delta2 = psi_m - 2 * psi_m1 + psi_m2
    return [
        float(special.gammaincc(2 ** (m - 1) / 2, delta1 / 2)),
        float(special.gammaincc(2 ** (m - 2) / 2, delta2 / 2)),
    ]


def aperiodic_templates(m: int) -> list[int]:
    """The m-bit templates that cannot overlap themselves (no proper prefix is also a suffix),
    ascending: NIST's ``templates/template<m>`` files (148 of them for m = 9)."""
    found = []
    for value in range(1 << m):
        text = format(value, f"0{m}b")
        if all(text[:size] != text[m - size :] for size in range(1, m)):
            found.append(value)
    return found


def non_overlapping_templates(
    bits: np.ndarray, m: int = TEMPLATE_M, blocks: int = TEMPLATE_BLOCKS
) -> list[float]:
    """Section 2.7, every aperiodic template, in NIST's order.

    An aperiodic template cannot overlap itself, so its non-overlapping matches are all its
    matches: the count of each template in a block is a count of window values.
    """
    n = len(bits)
    block = n // blocks
    mean = (block - m + 1) / 2**m
    variance = block * (1 / 2**m - (2 * m - 1) / 2 ** (2 * m))
    windows = np.zeros(block - m + 1, dtype=np.int64)
    counts = np.zeros((blocks, 1 << m))
    for index in range(blocks):
        part = bits[index * block : (index + 1) * block].astype(np.int64)
        windows[:] = 0
        for offset in range(m):
            windows = (windows << 1) | part[offset : offset + block - m + 1]
        counts[index] = np.bincount(windows, minlength=1 << m)
    templates = aperiodic_templates(m)
    chi2 = np.sum((counts[:, templates] - mean) ** 2, axis=0) / variance
    return [float(p) for p in special.gammaincc(blocks / 2, chi2 / 2)]


def _walk_cycles(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The random walk, each position's cycle number, and the number of cycles J."""
    walk = np.cumsum(2 * bits.astype(np.int64) - 1)
    zeros = walk == 0
    cycle = np.concatenate([[0], np.cumsum(zeros)[:-1]])
    cycles = int(np.count_nonzero(zeros)) + (1 if walk[-1] != 0 else 0)
    return walk, cycle, cycles


def _excursion_pi(x: int) -> list[float]:
    """Section 3.14: the probabilities of 0..4 and 5 or more visits to state x in a cycle."""
    a = abs(x)
    return [
        1 - 1 / (2 * a),
        *(1 / (4 * a * a) * (1 - 1 / (2 * a)) ** (k - 1) for k in range(1, 5)),
        1 / (2 * a) * (1 - 1 / (2 * a)) ** 4,
    ]


def random_excursions(bits: np.ndarray) -> list[float] | None:
    """Section 2.14: one p-value per state -4..-1, 1..4; None under 500 cycles (the test
    does not apply to the sequence)."""
    walk, cycle, cycles = _walk_cycles(bits)
    if cycles < max(0.005 * math.sqrt(len(bits)), MIN_CYCLES):
        return None
    out = []
    for x in EXCURSION_STATES:
        visits = np.bincount(cycle[walk == x], minlength=cycles)[:cycles]
        nu = np.bincount(np.minimum(visits, 5), minlength=6).astype(float)
        expected = cycles * np.array(_excursion_pi(x))
        chi2 = float(np.sum((nu - expected) ** 2 / expected))
        out.append(float(special.gammaincc(2.5, chi2 / 2)))
    return out


def random_excursions_variant(bits: np.ndarray) -> list[float] | None:
    """Section 2.15: one p-value per state -9..-1, 1..9; None under 500 cycles."""
    walk, _, cycles = _walk_cycles(bits)
    if cycles < max(0.005 * math.sqrt(len(bits)), MIN_CYCLES):
        return None
    out = []
    for x in VARIANT_STATES:
        count = int(np.count_nonzero(walk == x))
        denominator = math.sqrt(2.0 * cycles * (4.0 * abs(x) - 2))
        out.append(float(math.erfc(abs(count - cycles) / denominator)))
    return out


# --- the suite ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SuiteTest:
    name: str
    rows: tuple[str, ...]
    """The name of each p-value it gives (NIST's finalAnalysisReport rows)."""
    run: Callable[[np.ndarray], list[float] | None]
    reference: Callable[[bytes], float] | None = None
    """For the numpy tests: NIST's C code, whose answer is the smallest of our p-values."""


def _c(function: Callable[..., float], *parameters: int) -> Callable[[np.ndarray], list[float]]:
    return lambda bits: [function(*parameters, bits.tobytes())]


def _reference(function: Callable[..., float], *parameters: int) -> Callable[[bytes], float]:
    return lambda data: function(*parameters, data)


SUITE: Final = (
    SuiteTest("Frequency", ("Frequency",), _c(sp80022suite.frequency)),
    SuiteTest(
        "BlockFrequency",
        ("BlockFrequency",),
        _c(sp80022suite.block_frequency, BLOCK_FREQUENCY_M),
    ),
    SuiteTest(
        "CumulativeSums",
        ("CumulativeSums forward", "CumulativeSums reverse"),
        cumulative_sums,
        _reference(sp80022suite.cumulative_sums),
    ),
    SuiteTest("Runs", ("Runs",), _c(sp80022suite.runs)),
    SuiteTest("LongestRun", ("LongestRun",), _c(sp80022suite.longest_run_of_ones)),
    SuiteTest("Rank", ("Rank",), _c(sp80022suite.rank)),
    SuiteTest("FFT", ("FFT",), _c(sp80022suite.discrete_fourier_transform)),
    SuiteTest(
        "NonOverlappingTemplate",
        tuple(
            f"NonOverlappingTemplate {value:0{TEMPLATE_M}b}"
            for value in aperiodic_templates(TEMPLATE_M)
        ),
        non_overlapping_templates,
        _reference(sp80022suite.non_overlapping_template_matchings, TEMPLATE_M),
    ),
    SuiteTest(
        "OverlappingTemplate",
        ("OverlappingTemplate",),
        _c(sp80022suite.overlapping_template_matchings, TEMPLATE_M),
    ),
    SuiteTest("Universal", ("Universal",), _c(sp80022suite.universal)),
    SuiteTest(
        "ApproximateEntropy",
        ("ApproximateEntropy",),
        _c(sp80022suite.approximate_entropy, APPROXIMATE_ENTROPY_M),
    ),
    SuiteTest(
        "RandomExcursions",
        tuple(f"RandomExcursions x = {x:+d}" for x in EXCURSION_STATES),
        random_excursions,
        _reference(sp80022suite.random_excursions),
    ),
    SuiteTest(
        "RandomExcursionsVariant",
        tuple(f"RandomExcursionsVariant x = {x:+d}" for x in VARIANT_STATES),
        random_excursions_variant,
        _reference(sp80022suite.random_excursions_variant),
    ),
    SuiteTest(
        "Serial",
        ("Serial P-value1", "Serial P-value2"),
        serial,
        _reference(sp80022suite.serial, SERIAL_M),
    ),
    SuiteTest(
        "LinearComplexity",
        ("LinearComplexity",),
        _c(sp80022suite.linear_complexity, LINEAR_COMPLEXITY_M),
    ),
)

REFERENCE_TOLERANCE: Final = 1e-6
"""SP 800-22 prints six decimals; NIST's code rounds the random excursions probabilities to ten
(section 3.14's table), which moves its p-values by about 1e-9."""


class ReferenceMismatchError(AssertionError):
    """Our p-values of a test disagree with NIST's C code on a sequence."""


def write_template_file(directory: Path, m: int = TEMPLATE_M) -> None:
    """NIST's C code reads ``templates/template<m>`` from the working directory."""
    folder = directory / "templates"
    folder.mkdir(parents=True, exist_ok=True)
    lines = (" ".join(format(value, f"0{m}b")) for value in aperiodic_templates(m))
    (folder / f"template{m}").write_text("\n".join(lines) + "\n", encoding="ascii")


REFERENCE_EVERY: Final = 10
"""The numpy tests are checked against NIST's C code on every tenth sequence (the C template
scan costs as much as all the tests together)."""


def run_suite(bits: np.ndarray, *, check_reference: bool = True) -> list[float | None]:
    """Every row's p-value on one sequence (``None``: the test does not apply to it). With
    ``check_reference``, the working directory must hold NIST's template file
    (``write_template_file``)."""
    out: list[float | None] = []
    data = bits.tobytes()
    for test in SUITE:
        values = test.run(bits)
        if check_reference and test.reference is not None:
            _check_reference(test, values, data)
        out.extend([None] * len(test.rows) if values is None else values)
    return out


def _check_reference(test: SuiteTest, values: list[float] | None, data: bytes) -> None:
    assert test.reference is not None
    try:
        reference: float | None = test.reference(data)
    except ValueError:  # the C code refuses a sequence with too few cycles
        reference = None
    ours = None if values is None else min(values)
    agree = (
        reference is None
        if ours is None
        else reference is not None and math.isclose(ours, reference, abs_tol=REFERENCE_TOLERANCE)
    )
    if not agree:
        raise ReferenceMismatchError(f"{test.name}: ours {ours}, NIST's C code {reference}")


ROWS: Final = tuple(row for test in SUITE for row in test.rows)


def _init_worker(directory: str) -> None:
    os.chdir(directory)


def _one_sequence(arguments: tuple[bytes, int, int]) -> list[float | None]:
    master_seed, index, bits = arguments
    bits_of = sequence_bits(master_seed, index, bits)
    return run_suite(bits_of, check_reference=index % REFERENCE_EVERY == 0)


def run_sequences(
    master_seed: bytes,
    sequences: int,
    bits: int = SEQUENCE_BITS,
    workers: int = 2,
    cache: Path | None = None,
) -> tuple[np.ndarray, int]:
    """A (sequences x rows) array of p-values, NaN where a test does not apply, and how many
    of its rows were read from ``cache``. With ``cache``, each sequence's row is appended to a
    file there as it is done, and rows already there are not computed again: an interrupted
    run resumes."""
    results: list[list[float]] = []
    kept = None
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        kept = cache / f"nist-{master_seed.hex()}-{bits}.tsv"
        if kept.exists():
            lines = kept.read_text(encoding="ascii").splitlines()
            results = [[float(v) for v in line.split("\t")] for line in lines[:sequences]]
    cached = len(results)
    tasks = [(master_seed, index, bits) for index in range(len(results), sequences)]
    with tempfile.TemporaryDirectory() as directory:
        write_template_file(Path(directory))
        with (
            multiprocessing.Pool(max(1, workers), _init_worker, (directory,)) as pool,
            open(kept, "a", encoding="ascii") if kept else contextlib.nullcontext() as out,
        ):
            for row in pool.imap(_one_sequence, tasks):
                values = [math.nan if value is None else value for value in row]
                results.append(values)
                if out is not None:
                    out.write("\t".join(repr(v) for v in values) + "\n")
                    out.flush()
                if len(results) % max(1, sequences // 20) == 0:
                    print(
                        f"  {len(results):,}/{sequences:,} sequences", file=sys.stderr, flush=True
                    )
    return np.array(results, dtype=float).reshape(sequences, len(ROWS)), cached


# --- section 4.2 ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RowResult:
    row: str
    sequences: int
    """Sequences the test applied to."""
    passed: int
    bins: tuple[int, ...]
    uniformity_p: float

    @property
    def proportion(self) -> float:
        return self.passed / self.sequences if self.sequences else math.nan

    @property
    def proportion_ok(self) -> bool:
        low, high = proportion_range(self.sequences)
        return self.sequences > 0 and low <= self.proportion <= high

    @property
    def uniformity_ok(self) -> bool:
        return self.sequences < UNIFORMITY_MIN_SEQUENCES or self.uniformity_p >= UNIFORMITY_ALPHA


def proportion_range(sequences: int, alpha: float = ALPHA) -> tuple[float, float]:
    """SP 800-22 4.2.1: p^ +/- 3 sqrt(p^ (1 - p^) / m), p^ = 1 - alpha."""
    p_hat = 1 - alpha
    margin = 3 * math.sqrt(p_hat * (1 - p_hat) / sequences)
    return p_hat - margin, p_hat + margin


def uniformity(p_values: np.ndarray) -> tuple[tuple[int, ...], float]:
    """SP 800-22 4.2.2: counts in [0, 0.1), ..., [0.9, 1.0] and P-value_T."""
    bins = np.minimum((p_values * 10).astype(int), 9)
    counts = np.bincount(bins, minlength=10)
    expected = len(p_values) / 10
    chi2 = float(np.sum((counts - expected) ** 2 / expected)) if len(p_values) else 0.0
    return tuple(int(c) for c in counts), float(special.gammaincc(9 / 2, chi2 / 2))


def analyse(p_values: np.ndarray) -> list[RowResult]:
    out = []
    for column, row in enumerate(ROWS):
        values = p_values[:, column]
        values = values[~np.isnan(values)]
        bins, p_t = uniformity(values)
        out.append(RowResult(row, len(values), int(np.count_nonzero(values >= ALPHA)), bins, p_t))
    return out


def chance_failures(rows: Sequence[RowResult]) -> tuple[float, float]:
    """How many rows a perfect generator is expected to put outside the proportion range, and
    outside the uniformity bound, by chance (exact binomial tails; rows are not independent)."""
    proportion = 0.0
    for row in rows:
        if row.sequences == 0:
            continue
        low, high = proportion_range(row.sequences)
        dist = stats.binom(row.sequences, 1 - ALPHA)
        below = dist.cdf(math.ceil(low * row.sequences - 1e-9) - 1)
        above = dist.sf(math.floor(high * row.sequences + 1e-9))
        proportion += float(below + above)
    uniform = sum(UNIFORMITY_ALPHA for row in rows if row.sequences >= UNIFORMITY_MIN_SEQUENCES)
    return proportion, uniform


# --- the report -----------------------------------------------------------------------------


def render_report(
    rows: Sequence[RowResult],
    *,
    seed_hex: str,
    sequences: int,
    bits: int,
    seconds: float,
    workers: int,
    command: str,
    cached_sequences: int = 0,
) -> str:
    low, high = proportion_range(sequences)
    expected_proportion, expected_uniform = chance_failures(rows)
    proportion_failed = [row for row in rows if not row.proportion_ok]
    uniform_failed = [row for row in rows if not row.uniformity_ok]
    excursion_sequences = next(row.sequences for row in rows if row.row.startswith("RandomEx"))
    lines = [
        "# NIST SP 800-22 Rev. 1a on the shuffle's DRBG output",
        "",
        f"- Data: {sequences:,} sequences of {bits:,} bits ({sequences * bits / 8e6:,.1f} MB): "
        "the stream of `bench/drbg_stream.py` (round *i*'s shuffle HMAC_DRBG, committed and "
        "locked through the real pipeline, fairness construction "
        f"{CURRENT_VERSION.name.lower()}, its first four `Generate(64)` outputs), master seed "
        f"`{seed_hex}`, in the DRBG's byte order, most significant bit first: the bits of the "
        "words the shuffle draws. Sequence *j* is bits *j·n* to *(j+1)·n - 1*.",
        f"- Software: `sp80022suite` {_version('sp80022suite')} (PyPI: NIST's `sts` C "
        "reference code as a Python extension) for 10 tests; for the 5 tests with several "
        "p-values, whose C functions there return only the smallest, every p-value is computed by "
        "`bench/nist_sts.py` with numpy "
        f"{_version('numpy')} and scipy {_version('scipy')}, and on every tenth sequence "
        "their smallest was checked equal (to 1e-6) to NIST's C code's answer. All 15 are checked "
        "against SP 800-22's worked examples in `tests/evidence/test_nist_known_answers.py`.",
        "- Parameters (NIST's `assess` defaults): block frequency M = 128; templates m = 9 (all "
        "148 aperiodic ones); approximate entropy m = 10; serial m = 16; linear complexity "
        "M = 500.",
        f"- Checks (section 4.2), per row: proportion of sequences with p ≥ {ALPHA} within "
        f"[{low:.4f}, {high:.4f}] (0.99 ± 3·sqrt(0.99·0.01/{sequences})); uniformity "
        f"P-value_T ≥ {UNIFORMITY_ALPHA} (chi-square of 10 bins, 9 df). The random excursion "
        f"tests apply to sequences with at least {MIN_CYCLES} cycles: {excursion_sequences:,} "
        f"of the {sequences:,}.",
        f"- Command: `{command}`; {seconds / 60:.1f} min on {workers} worker processes "
        f"({platform.machine()}, {os.cpu_count()} cores shared with other work, so an upper "
        f"bound), {datetime.datetime.now(datetime.UTC):%Y-%m-%d}"
        + (
            f"; {cached_sequences:,} of the sequences' p-values were computed by an earlier "
            "run of the same command and read from its `--cache`."
            if cached_sequences
            else "."
        ),
        "",
        f"**{len(rows)} rows: {len(rows) - len(proportion_failed)} within the proportion range "
        f"({len(proportion_failed)} outside; {expected_proportion:.1f} expected by chance), "
        f"{len(rows) - len(uniform_failed)} uniform ({len(uniform_failed)} below "
        f"{UNIFORMITY_ALPHA}; {expected_uniform:.2f} expected by chance).**",
        "",
        "## Per test",
        "",
        "| test | rows | sequences | lowest proportion | rows outside the range | lowest "
        "P-value_T | rows below 0.0001 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for test in SUITE:
        mine = [row for row in rows if row.row in test.rows]
        worst = min(mine, key=lambda row: row.proportion)
        least = min(mine, key=lambda row: row.uniformity_p)
        lines.append(
            f"| {test.name} | {len(mine)} | {worst.sequences:,} | {worst.proportion:.4f} "
            f"| {sum(not row.proportion_ok for row in mine)} | {least.uniformity_p:.6f} "
            f"| {sum(not row.uniformity_ok for row in mine)} |"
        )
    lines += [
        "",
        "## Every row (NIST's finalAnalysisReport layout)",
        "",
        "C1 to C10: how many sequences' p-values fell in [0, 0.1), ..., [0.9, 1].",
        "",
        "| row | C1 | C2 | C3 | C4 | C5 | C6 | C7 | C8 | C9 | C10 | P-value_T | proportion | |",
        "|---|" + "---:|" * 12 + "---|",
    ]
    for row in rows:
        flags = []
        if not row.proportion_ok:
            flags.append("proportion")
        if not row.uniformity_ok:
            flags.append("uniformity")
        lines.append(
            f"| {row.row} | "
            + " | ".join(str(count) for count in row.bins)
            + f" | {row.uniformity_p:.6f} | {row.passed}/{row.sequences} | "
            + (f"**outside: {', '.join(flags)}**" if flags else "")
            + " |"
        )
    lines += [
        "",
        "## What this shows, and what it does not",
        "",
        f"- Each row's checks are at 3 sigma and 0.0001, but there are {len(rows)} rows (148 "
        "of them templates): a perfect generator puts a few rows outside the proportion range "
        "by chance (the expected number is above, from the exact binomial tails). A defect "
        "shows as many more rows than that, or as one test's rows failing together, or as a "
        "failure that recurs on another master seed (`--seed`).",
        "- It shows that the bits the shuffle draws show none of the defects these 15 tests "
        "look for, at this sample size, if the counts above are as chance predicts. It does "
        "not show that the DRBG is unpredictable: that rests on HMAC_DRBG (NIST SP 800-90A), "
        "its known-answer vectors and the secrecy of the seed.",
        "- The deck itself (rather than the bits) is tested in `fairness_stats.md`; dieharder's "
        "battery on the same stream is in `dieharder.md`.",
        "",
    ]
    return "\n".join(lines)


def _version(package: str) -> str:
    return importlib.metadata.version(package)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="NIST SP 800-22 on the shuffle DRBG's output.")
    parser.add_argument("--sequences", type=int, default=DEFAULT_SEQUENCES)
    parser.add_argument("--bits", type=int, default=SEQUENCE_BITS, help="bits per sequence")
    parser.add_argument("--seed", default=DEFAULT_SEED_HEX, help="master seed, hex (default 00)")
    parser.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--out", type=Path, required=True, help="the Markdown report")
    parser.add_argument(
        "--cache", type=Path, help="keep each sequence's p-values here; a rerun resumes from it"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    p_values, cached = run_sequences(
        bytes.fromhex(args.seed), args.sequences, args.bits, args.workers, args.cache
    )
    seconds = time.perf_counter() - started
    rows = analyse(p_values)
    command = (
        f".venv/bin/python bench/nist_sts.py --sequences {args.sequences} --seed {args.seed}"
        + (f" --bits {args.bits}" if args.bits != SEQUENCE_BITS else "")
        + f" --out {args.out}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        render_report(
            rows,
            seed_hex=args.seed,
            sequences=args.sequences,
            bits=args.bits,
            seconds=seconds,
            workers=args.workers,
            command=command,
            cached_sequences=cached,
        ),
        encoding="utf-8",
    )
    outside = sum(not row.proportion_ok for row in rows)
    uneven = sum(not row.uniformity_ok for row in rows)
    print(
        f"wrote {args.out} in {seconds / 60:.1f} min: {outside} rows outside the proportion "
        f"range, {uneven} below the uniformity bound, of {len(rows)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
