"""bench/drbg_stream.py: the bytes it feeds dieharder are the words the shuffle draws.

No dieharder run here (it reads gigabytes: `make dieharder-evidence`); only the stream's
definition, its plumbing and the parsing of dieharder's table."""

from __future__ import annotations

import hashlib
import io
import struct
from types import ModuleType

from gnau_service.fairness import CommittedRound
from gnau_service.fairness.shuffle import fisher_yates
from gnau_service.rules.cards import standard_deck

from .conftest import REPO_ROOT, load_script

drbg_stream: ModuleType = load_script(REPO_ROOT / "bench" / "drbg_stream.py")


def test_round_seeds_are_as_documented() -> None:
    expected = hashlib.sha256(
        b"gnau-dealer/bench/drbg-stream" + bytes.fromhex("ab") + (7).to_bytes(8, "big")
    ).digest()
    assert drbg_stream.round_seed(bytes.fromhex("ab"), 7) == expected


def test_the_stream_is_the_words_the_shuffle_draws() -> None:
    """Round 3's 256 bytes, read as little-endian words, shuffle a deck into exactly the deck
    the real pipeline deals for that round."""
    master = bytes.fromhex("00")
    data = drbg_stream.round_bytes(master, 3)
    assert len(data) == 256
    words = struct.unpack("<64I", data)
    seed = drbg_stream.round_seed(master, 3)
    dealt = CommittedRound("drbg-stream/3", drbg_stream.RULES, seed).lock(drbg_stream.SEATS).deal()
    assert tuple(fisher_yates(standard_deck(1), iter(words))) == dealt.deck


def test_more_generates_extend_the_same_drbg() -> None:
    master = bytes.fromhex("01")
    four = drbg_stream.round_bytes(master, 0, generates=4)
    six = drbg_stream.round_bytes(master, 0, generates=6)
    assert six[:256] == four
    assert len(six) == 384


def test_workers_give_the_same_stream_in_the_same_order() -> None:
    master = bytes.fromhex("02")
    serial = drbg_stream.stream_chunks(master, generates=2048, workers=1)
    parallel = drbg_stream.stream_chunks(master, generates=2048, workers=2)
    try:
        first = [next(serial) for _ in range(3)]
        assert [next(parallel) for _ in range(3)] == first
    finally:
        serial.close()
        parallel.close()
    # 2048 Generate(64) calls are 128 KiB: four rounds to a 512 KiB chunk, rounds 0 to 3 first.
    assert first[0] == b"".join(drbg_stream.round_bytes(master, i, 2048) for i in range(4))


def test_the_writer_stops_at_the_limit() -> None:
    out = io.BytesIO()
    chunks = iter([b"abc", b"defg", b"hij"])
    assert drbg_stream.write_stream(out, chunks, limit=5) == (5, False)
    assert out.getvalue() == b"abcde"


def test_the_writer_stops_when_the_reader_closes() -> None:
    class ClosesAfterOne(io.BytesIO):
        def write(self, data: bytes) -> int:  # type: ignore[override]
            if self.tell():
                raise BrokenPipeError
            return super().write(data)

    out = ClosesAfterOne()
    assert drbg_stream.write_stream(out, iter([b"ab", b"cd", b"ef"])) == (2, True)


DIEHARDER_OUTPUT = """\
#=============================================================================#
#            dieharder version 3.31.1 Copyright 2003 Robert G. Brown          #
#=============================================================================#
   rng_name    |rands/second|   Seed   |
stdin_input_raw|  1.55e+07  | 549960115|
#=============================================================================#
        test_name   |ntup| tsamples |psamples|  p-value |Assessment
#=============================================================================#
   diehard_birthdays|   0|       100|     100|0.05818172|  PASSED  
          sts_serial|   3|    100000|     100|0.99879950|   WEAK   
rgb_minimum_distance|   0|     10000|    1000|0.00000000|  FAILED  
"""  # noqa: W291  (dieharder pads its verdicts with spaces)


def test_dieharder_table_is_parsed() -> None:
    lines = drbg_stream.parse_dieharder(DIEHARDER_OUTPUT)
    assert [(line.name, line.ntuple, line.p_value, line.verdict) for line in lines] == [
        ("diehard_birthdays", 0, 0.05818172, "PASSED"),
        ("sts_serial", 3, 0.99879950, "WEAK"),
        ("rgb_minimum_distance", 0, 0.0, "FAILED"),
    ]
    assert lines[0].tsamples == 100
    assert lines[2].psamples == 1000


def test_each_row_of_the_table_has_its_own_command() -> None:
    test = drbg_stream.DieharderTest(201, ntuple=2)
    assert drbg_stream.repeat_command(test, "00", 4) == (
        ".venv/bin/python bench/drbg_stream.py --seed 00 \\| dieharder -g 200 -d 201 -n 2"
    )


def _run(test: int, seed: str, *verdicts: str) -> object:
    lines = [
        drbg_stream.DieharderLine("a_test", n, 100, 100, 0.5 if v == "PASSED" else 0.001, v)
        for n, v in enumerate(verdicts)
    ]
    return drbg_stream.BatteryRun(drbg_stream.DieharderTest(test), seed, lines, 1000, 1.0)


def _render(runs: list[object], rechecks: list[object]) -> str:
    text: str = drbg_stream.render_battery(
        runs, rechecks=rechecks, seed_hex="00", generates=4, version="3.31.1", seconds=60.0
    )
    return text


def test_a_weak_that_does_not_recur_is_reported_with_its_rechecks() -> None:
    runs = [_run(0, "00", "PASSED"), _run(208, "00", "WEAK", "PASSED")]
    rechecks = [_run(208, "01", "PASSED", "PASSED"), _run(208, "02", "PASSED", "PASSED")]
    text = _render(runs, rechecks)
    assert "**2 tests, 3 p-values: 2 PASSED, 1 WEAK, 0 FAILED.**" in text
    assert "4 p-values: 4 PASSED, 0 WEAK, 0 FAILED (below)" in text
    assert "## Rechecks on fresh streams" in text
    assert "--seed 02 \\| dieharder -g 200 -d 208`" in text
    assert "show none of the defects these tests look for" in text


def test_a_weak_that_recurs_is_not_called_a_pass() -> None:
    runs = [_run(208, "00", "WEAK")]
    rechecks = [_run(208, "01", "WEAK"), _run(208, "02", "PASSED")]
    text = _render(runs, rechecks)
    assert "**A test FAILED, or a WEAK recurred on a fresh stream**" in text
    assert "show none of the defects" not in text


def test_a_failure_is_not_called_a_pass() -> None:
    text = _render([_run(0, "00", "FAILED")], [])
    assert "**A test FAILED" in text
    assert "## Rechecks" not in text


def test_a_partial_whole_battery_says_so() -> None:
    lines = drbg_stream.parse_dieharder(DIEHARDER_OUTPUT)
    run = drbg_stream.WholeRun(lines, 2_000_000_000, 600.0, complete=False)
    text = drbg_stream.render_whole(run, seed_hex="00", generates=4, version="3.31.1")
    assert "**Partial run: stopped by its time limit after 3 tests (3 p-values).**" in text
    assert "**3 p-values: 1 PASSED, 1 WEAK, 1 FAILED**" in text
    assert "| sts_serial | 3 | 100,000 | 100 | 0.99879950 | WEAK |" in text
    whole = drbg_stream.render_whole(
        drbg_stream.WholeRun(lines, 1, 1.0, complete=True), seed_hex="00", generates=4, version="x"
    )
    assert "Partial" not in whole


def test_a_slice_asks_dieharder_for_fewer_samples() -> None:
    test = drbg_stream.DieharderTest(100, psamples=10)
    assert test.arguments() == ["-g", "200", "-d", "100", "-p", "10"]
