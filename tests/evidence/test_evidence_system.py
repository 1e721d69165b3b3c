"""A fixed-seed slice of each battery behind `make evidence`, run end to end in
`make test-system`: NIST SP 800-22 on three sequences, two dieharder tests on a short stream,
and the outcome tests on 20,000 dealt rounds. Fixed seeds, so a pass is always a pass; the full
sizes are `make evidence`'s (docs/evidence/README.md)."""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from tests.fairness.conftest import REPO_ROOT, load_script

pytestmark = pytest.mark.system

nist_sts: ModuleType = load_script(REPO_ROOT / "bench" / "nist_sts.py")
drbg_stream: ModuleType = load_script(REPO_ROOT / "bench" / "drbg_stream.py")
fairness_stats: ModuleType = load_script(REPO_ROOT / "bench" / "fairness_stats.py")

SEED = bytes.fromhex("00")
NIST_SEQUENCES = 3


def test_a_nist_slice_passes_and_reports_every_row() -> None:
    p_values, cached = nist_sts.run_sequences(SEED, NIST_SEQUENCES, workers=2)
    assert cached == 0  # no cache given: every sequence computed now
    assert p_values.shape == (NIST_SEQUENCES, 188)
    # Sequence 2 of this seed: every one of its 188 p-values passes at alpha = 0.01.
    assert all(value >= nist_sts.ALPHA for value in p_values[2] if not math.isnan(value))
    rows = nist_sts.analyse(p_values)
    outside = sum(not row.proportion_ok for row in rows)
    expected, _ = nist_sts.chance_failures(rows)
    assert outside <= expected + 3 * math.sqrt(expected)  # what chance gives, not a defect
    report = nist_sts.render_report(
        rows,
        seed_hex="00",
        sequences=NIST_SEQUENCES,
        bits=nist_sts.SEQUENCE_BITS,
        seconds=1.0,
        workers=2,
        command="slice",
    )
    assert "# NIST SP 800-22 Rev. 1a on the shuffle's DRBG output" in report
    table = [
        line
        for line in report.splitlines()
        if line.startswith(("| NonOverlappingTemplate 0", "| NonOverlappingTemplate 1"))
    ]
    assert len(table) == 148
    for name in ("Frequency", "Universal", "LinearComplexity", "RandomExcursionsVariant x = +9"):
        assert any(line.startswith(f"| {name} |") for line in report.splitlines()), name


def _dieharder() -> str:
    found = shutil.which("dieharder")
    if found is None:
        reason = "dieharder is not installed (Debian: apt-get install dieharder)"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the dieharder slice, but {reason}", pytrace=False)
        pytest.skip(reason)
    return found


@pytest.mark.parametrize(("number", "psamples"), [(100, 10), (101, 20)])  # monobit, runs
def test_a_dieharder_slice_passes(number: int, psamples: int) -> None:
    dieharder = _dieharder()
    test = drbg_stream.DieharderTest(number, psamples=psamples)
    run = drbg_stream.run_test(dieharder, test, "00", drbg_stream.DEFAULT_GENERATES, workers=2)
    assert [line.psamples for line in run.lines] == [psamples]
    assert [line.verdict for line in run.lines] == ["PASSED"]
    assert drbg_stream.ALPHA_WEAK <= run.lines[0].p_value <= 1 - drbg_stream.ALPHA_WEAK
    assert run.bytes_read >= psamples * 100_000 * 4  # psamples x tsamples words of 4 bytes


def test_an_outcome_slice_passes_and_writes_its_report(tmp_path: Path) -> None:
    arguments = ["--shuffles", "20000", "--seed", "00", "--workers", "2"]
    assert fairness_stats.main([*arguments, "--out-dir", str(tmp_path)]) == 0
    text = (tmp_path / "fairness_stats.md").read_text(encoding="utf-8")
    assert "**Overall: PASS**" in text
    assert text.count("| pass |") == 15
    assert "| hand categories, seat 9 |" in text
    assert "| serial hand categories, seat 1, consecutive rounds |" in text
    assert "## Hand categories, all seats" in text
