"""The shuffle's HMAC_DRBG output as raw bytes, for a standard statistical battery.

**What the stream is.** Round ``i`` of a run with master seed ``M`` is dealt as the service
deals it, up to the shuffle:

- ``server_seed_i = SHA-256("gnau-dealer/bench/drbg-stream" || M || uint64(i))``;
- the round is committed and locked through the real pipeline (``CommittedRound``, round id
  ``drbg-stream/<i>``, default house rules, 9 seats ``player-1`` .. ``player-9`` staking 100,
  no client seed, no beacon), which gives its ``transcript_hash_i``;
- its DRBG is ``shuffle_drbg(server_seed_i, transcript_hash_i)``, the very call the shuffle
  makes: ``gnau_service.fairness.drbg.HmacDrbg`` instantiated with entropy input = the seed,
  nonce = the transcript hash, personalization string = ``gnau-dealer/fairness/v1/shuffle``;
- the round contributes ``G`` successive ``Generate(64 bytes)`` outputs (``--generates``,
  default 4: the 256 bytes a one-deck shuffle reads its 51 words from).

The stream is round 0's bytes, then round 1's, and so on. The shuffle reads each 4 bytes as a
big-endian word; they are written little-endian, so that ``dieharder -g 200`` (raw 32-bit
unsigned integers in the machine's byte order) on a little-endian machine (x86-64, ARM64)
tests exactly the words the shuffle draws. ``--generates 1048576`` gives 64 MiB from each
instantiation instead: long runs of one DRBG.

    .venv/bin/python bench/drbg_stream.py --seed 00 | dieharder -g 200 -d 0
    .venv/bin/python bench/drbg_stream.py --seed 00 --bytes 1000000 > drbg.bin
    .venv/bin/python bench/drbg_stream.py --dieharder docs/evidence/dieharder.md   # the table

``--dieharder`` runs the battery below, each test on the stream from round 0 (so each line of
the table is repeated by its own command), counts the bytes each one read, and writes the
table. Writing stops when dieharder closes the pipe; the count is of the whole chunks (512 KiB)
written into the pipe before then: what dieharder read, to within one chunk.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import hashlib
import multiprocessing
import multiprocessing.pool
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

from gnau_service.fairness import CommittedRound, LockedSeat
from gnau_service.fairness.shuffle import GENERATE_BYTES, shuffle_drbg
from gnau_service.rules.house_rules import HouseRules

STREAM_TAG: Final = b"gnau-dealer/bench/drbg-stream"
RULES: Final = HouseRules()
# v2 rounds: each seat names its player by a reference (fixed ones here; the service's are keyed).
SEATS: Final = tuple(LockedSeat(number, f"p-{number:032x}", 100) for number in range(1, 10))
DEFAULT_GENERATES: Final = 4
DEFAULT_SEED_HEX: Final = "00"
WORDS_PER_GENERATE: Final = GENERATE_BYTES // 4
CHUNK_BYTES: Final = 1 << 19
"""About how much one worker task produces (whole rounds)."""
ALPHA_WEAK: Final = 0.005
"""dieharder calls a p-value WEAK below 0.005 or above 0.995, FAILED below 1e-6 or above
1 - 1e-6 (its defaults)."""


def round_seed(master_seed: bytes, index: int) -> bytes:
    return hashlib.sha256(STREAM_TAG + master_seed + index.to_bytes(8, "big")).digest()


def raw_round_bytes(master_seed: bytes, index: int, generates: int = DEFAULT_GENERATES) -> bytes:
    """Round ``index``'s ``generates`` outputs of its shuffle DRBG, as the DRBG returns them
    (the shuffle reads each 4 bytes as a big-endian word)."""
    seed = round_seed(master_seed, index)
    locked = CommittedRound(f"drbg-stream/{index}", RULES, seed).lock(SEATS)
    drbg = shuffle_drbg(seed, locked.transcript_hash)
    return b"".join(drbg.generate(GENERATE_BYTES) for _ in range(generates))


def round_bytes(master_seed: bytes, index: int, generates: int = DEFAULT_GENERATES) -> bytes:
    """Round ``index``'s contribution: ``raw_round_bytes`` with each 32-bit big-endian word
    rewritten little-endian."""
    words = WORDS_PER_GENERATE * generates
    raw = raw_round_bytes(master_seed, index, generates)
    return struct.pack(f"<{words}I", *struct.unpack(f">{words}I", raw))


def _rounds_bytes(arguments: tuple[bytes, int, int, int]) -> bytes:
    master_seed, start, stop, generates = arguments
    return b"".join(round_bytes(master_seed, index, generates) for index in range(start, stop))


def stream_chunks(
    master_seed: bytes,
    *,
    generates: int = DEFAULT_GENERATES,
    start_round: int = 0,
    workers: int = 2,
) -> Generator[bytes, None, None]:
    """The endless stream, in order, as chunks of whole rounds; ``workers`` processes make
    them, a few chunks ahead of the reader (never an unbounded queue)."""
    per_chunk = max(1, CHUNK_BYTES // (GENERATE_BYTES * generates))

    def tasks() -> Iterator[tuple[bytes, int, int, int]]:
        start = start_round
        while True:
            yield (master_seed, start, start + per_chunk, generates)
            start += per_chunk

    if workers <= 1:
        yield from map(_rounds_bytes, tasks())
        return
    with multiprocessing.Pool(workers) as pool:
        pending: collections.deque[multiprocessing.pool.AsyncResult[bytes]] = collections.deque()
        for task in tasks():
            pending.append(pool.apply_async(_rounds_bytes, (task,)))
            if len(pending) >= 3 * workers:
                yield pending.popleft().get()


def write_stream(
    out: IO[bytes], chunks: Iterator[bytes], limit: int | None = None
) -> tuple[int, bool]:
    """Write chunks until ``limit`` bytes or until the reader closes: (bytes written, closed)."""
    written = 0
    for whole in chunks:
        chunk = whole if limit is None else whole[: limit - written]
        try:
            out.write(chunk)
            out.flush()
        except BrokenPipeError:
            return written, True
        written += len(chunk)
        if limit is not None and written >= limit:
            break
    return written, False


# --- the battery ----------------------------------------------------------------------------


@dataclass(frozen=True)
class DieharderTest:
    number: int
    ntuple: int | None = None
    psamples: int | None = None
    """None: dieharder's default; fewer for a quick slice (``tests/evidence``)."""

    def arguments(self) -> list[str]:
        extra = [] if self.ntuple is None else ["-n", str(self.ntuple)]
        if self.psamples is not None:
            extra += ["-p", str(self.psamples)]
        return ["-g", "200", "-d", str(self.number), *extra]


BATTERY: Final = (
    DieharderTest(0),  # diehard_birthdays
    DieharderTest(3),  # diehard_rank_6x8: linear structure over GF(2)
    DieharderTest(4),  # diehard_bitstream
    DieharderTest(8),  # diehard_count_1s_str
    DieharderTest(10),  # diehard_parking_lot
    DieharderTest(11),  # diehard_2dsphere
    DieharderTest(12),  # diehard_3dsphere
    DieharderTest(15),  # diehard_runs
    DieharderTest(100),  # sts_monobit
    DieharderTest(101),  # sts_runs
    DieharderTest(102),  # sts_serial, 1 to 16 bits
    DieharderTest(201, ntuple=2),  # rgb_minimum_distance in 2 dimensions
    DieharderTest(204),  # rgb_kstest_test
    DieharderTest(206),  # dab_dct
    DieharderTest(208),  # dab_filltree2
)
"""The subset run: the dieharder tests rated "Good" whose default run reads under about
300 MB (measured on /dev/urandom: 45 to 281 MB each, 1.45 GB in all), at 1.4 to 2 MB/s of
stream from Python on 2 cores. ``rgb_minimum_distance`` runs in 2 dimensions, as ``-a`` does
(its default, 0, is not a valid dimension). Left out for the data they need: diehard_operm5
(440 MB), diehard_rank_32x32 (550 MB), diehard_count_1s_byte (550 MB), diehard_squeeze
(960 MB), diehard_craps (580 MB), marsaglia_tsang_gcd (8 GB), rgb_bitdist (0.7 to 1 GB per
width), rgb_permutations, rgb_lagged_sum (up to several GB), dab_bytedistrib (650 MB),
dab_filltree (490 MB), dab_monobit2 (300 MB); and the tests dieharder itself rates "Suspect"
(OPSO, OQSO, DNA) or "Do Not Use" (sums)."""

_RESULT_LINE: Final = re.compile(
    r"^\s*(?P<name>\w+)\|\s*(?P<ntup>\d+)\|\s*(?P<tsamples>\d+)\|\s*(?P<psamples>\d+)\|"
    r"\s*(?P<p>[0-9.]+)\|\s*(?P<verdict>PASSED|WEAK|FAILED)\s*$"
)


@dataclass(frozen=True)
class DieharderLine:
    name: str
    ntuple: int
    tsamples: int
    psamples: int
    p_value: float
    verdict: str


def parse_dieharder(output: str) -> list[DieharderLine]:
    """The result lines of dieharder's default table output."""
    return [
        DieharderLine(
            match["name"],
            int(match["ntup"]),
            int(match["tsamples"]),
            int(match["psamples"]),
            float(match["p"]),
            match["verdict"],
        )
        for match in map(_RESULT_LINE.match, output.splitlines())
        if match
    ]


RECHECK_SEEDS: Final = ("01", "02")
"""Master seeds of the fresh streams on which a test with a WEAK or FAILED line is run again."""


@dataclass(frozen=True)
class BatteryRun:
    test: DieharderTest
    seed_hex: str
    lines: list[DieharderLine]
    bytes_read: int
    seconds: float

    @property
    def flagged(self) -> bool:
        return any(line.verdict != "PASSED" for line in self.lines)


def run_test(
    dieharder: str, test: DieharderTest, seed_hex: str, generates: int, workers: int
) -> BatteryRun:
    master_seed = bytes.fromhex(seed_hex)
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as output:
        with subprocess.Popen(
            [dieharder, *test.arguments()], stdin=subprocess.PIPE, stdout=output, stderr=output
        ) as process:
            assert process.stdin is not None
            chunks = stream_chunks(master_seed, generates=generates, workers=workers)
            written, _ = write_stream(process.stdin, chunks)
            chunks.close()
            with contextlib.suppress(BrokenPipeError):
                process.stdin.close()
        output.seek(0)
        text = output.read()
    lines = parse_dieharder(text)
    if process.returncode != 0 or not lines:
        raise RuntimeError(f"dieharder {' '.join(test.arguments())} gave no result:\n{text}")
    return BatteryRun(test, seed_hex, lines, written, time.perf_counter() - started)


def repeat_command(test: DieharderTest, seed_hex: str, generates: int) -> str:
    stream = f".venv/bin/python bench/drbg_stream.py --seed {seed_hex}"
    if generates != DEFAULT_GENERATES:
        stream += f" --generates {generates}"
    return f"{stream} \\| dieharder {' '.join(test.arguments())}"


def dieharder_version(dieharder: str) -> str:
    banner = subprocess.run([dieharder, "-l"], capture_output=True, text=True, check=False)
    found = re.search(r"dieharder version (\S+)", banner.stdout + banner.stderr)
    return found[1] if found else "unknown"


def _table(runs: Sequence[BatteryRun], generates: int) -> list[str]:
    out = [
        "| test | ntup | tsamples | psamples | p-value | verdict | bytes read | command |",
        "|---|---:|---:|---:|---:|---|---:|---|",
    ]
    for run in runs:
        command = f"`{repeat_command(run.test, run.seed_hex, generates)}`"
        for position, line in enumerate(run.lines):
            first = position == 0
            out.append(
                f"| {line.name} | {line.ntuple} | {line.tsamples:,} | {line.psamples:,} "
                f"| {line.p_value:.8f} | {line.verdict} "
                f"| {f'{run.bytes_read:,}' if first else ''} | {command if first else ''} |"
            )
    return out


def _verdicts(runs: Sequence[BatteryRun]) -> str:
    lines = [line for run in runs for line in run.lines]
    counts = Counter(line.verdict for line in lines)
    return (
        f"{len(lines)} p-values: {counts['PASSED']} PASSED, {counts['WEAK']} WEAK, "
        f"{counts['FAILED']} FAILED"
    )


def render_battery(
    runs: Sequence[BatteryRun],
    *,
    rechecks: Sequence[BatteryRun],
    seed_hex: str,
    generates: int,
    version: str,
    seconds: float,
) -> str:
    lines_run = [line for run in runs for line in run.lines]
    failed = sum(line.verdict == "FAILED" for line in lines_run)
    confirmed = failed > 0 or any(run.flagged for run in rechecks)
    total_bytes = sum(run.bytes_read for run in (*runs, *rechecks))
    rounds_note = (
        f"{generates} `Generate(64)` calls ({64 * generates} bytes) from each round's own DRBG"
    )
    out = [
        "# The shuffle's DRBG output through dieharder",
        "",
        "- Stream: `bench/drbg_stream.py` (its docstring defines it byte by byte): round *i*'s "
        'server seed is `SHA-256("gnau-dealer/bench/drbg-stream" || master seed || '
        "uint64(i))`, the round is committed and locked through the real pipeline, and its "
        "shuffle DRBG (`shuffle_drbg(seed, transcript_hash)`, the HMAC_DRBG the shuffle uses) "
        f"gives {rounds_note}. Master seed `{seed_hex}`. Each 32-bit word is written "
        "little-endian, so dieharder's unsigned integers are the shuffle's words.",
        f"- Tool: dieharder {version} (Debian package `dieharder`), generator 200 "
        "(`stdin_input_raw`), default sample sizes, its default verdicts: WEAK for a p-value "
        "below 0.005 or above 0.995, FAILED beyond 1e-6.",
        f"- Machine: {platform.machine()}, Python {platform.python_version()}; "
        f"{total_bytes / 1e9:.2f} GB of stream in {seconds / 60:.1f} min (2 cores, shared "
        "with other work: the time is an upper bound).",
        "- Each test reads the stream from round 0: each row is repeated exactly by its own "
        "command. *Bytes* counts the whole 512 KiB chunks written into dieharder's pipe "
        "before it closed it: what dieharder read, to within one chunk.",
        "- Rerun everything with `make dieharder-evidence` (about "
        f"{seconds / 60:.0f} minutes on 2 cores).",
        "",
        f"**{len(runs)} tests, {_verdicts(runs)}.**"
        + (
            f" Each test with a WEAK or FAILED line was run again on fresh streams (master "
            f"seeds {', '.join(RECHECK_SEEDS)}): {_verdicts(rechecks)} (below)."
            if rechecks
            else ""
        ),
        "",
        *_table(runs, generates),
        "",
        "sts_serial's 1-bit line is the monobit test again, on the same data: it repeats "
        "sts_monobit's p-value.",
    ]
    if rechecks:
        out += [
            "",
            "## Rechecks on fresh streams",
            "",
            "A p-value in the outer 1% is expected about once in 100 by chance. dieharder's "
            "own advice for a WEAK is to look again with more data; here the same test reads "
            "other streams, from other master seeds. A defect recurs; chance does not.",
            "",
            *_table(rechecks, generates),
        ]
    out += [
        "",
        "## What this shows, and what it does not",
        "",
        "- With about "
        f"{len(lines_run)} p-values, a perfect generator gets on average "
        f"{len(lines_run) * 2 * ALPHA_WEAK:.2f} WEAK by chance (two tails of 0.5% each); a "
        "WEAK is a reason to rerun that test on fresh data (another `--seed`), not a verdict.",
        (
            "- It shows that the words the shuffle draws, taken the way the shuffle takes them "
            "(a fresh DRBG per round, its first outputs), show none of the defects these tests "
            "look for, at these sample sizes: bias in bits and in runs of bits, correlation "
            "between neighbouring words, linear structure (binary rank), bad spacing of points "
            "in 2 and 3 dimensions."
            if not confirmed
            else "- **A test FAILED, or a WEAK recurred on a fresh stream**: the stream, or the "
            "way it is produced, may have a defect these tests see, to be found before "
            "anything else here is relied on."
        ),
        "- It does not show that the DRBG is unpredictable: a statistical battery cannot, and a "
        "fully predictable generator (a counter through a good hash, with the key public) "
        "passes it too. The shuffle's security rests on HMAC_DRBG's design (NIST SP 800-90A), "
        "its known-answer vectors (`tests/vectors/hmac-drbg-sha256.json`) and the secrecy of "
        "the seed, not on this table.",
        "- It is a subset of `dieharder -a`: tests needing far more data than Python produces in "
        "minutes (marsaglia_tsang_gcd alone reads about 8 GB) were left out; the list is in "
        "`BATTERY` in `bench/drbg_stream.py`; `dieharder_all.md` is `-a` itself. "
        "dieharder's sts_monobit, sts_runs and sts_serial are its versions of three NIST "
        "SP 800-22 tests; the whole of SP 800-22 is in `nist_sp800_22.md`.",
        "- The uniformity of the *deck* (rather than of the words) is tested separately, "
        "in `fairness_stats.md`.",
        "",
    ]
    return "\n".join(out)


# --- the whole battery: dieharder -a -----------------------------------------------------------

WHOLE_BATTERY_ARGUMENTS: Final = ("-g", "200", "-a")


@dataclass(frozen=True)
class WholeRun:
    lines: list[DieharderLine]
    bytes_read: int
    seconds: float
    complete: bool
    """False when the time limit stopped dieharder before it finished ``-a``."""


def run_whole(
    dieharder: str, seed_hex: str, generates: int, workers: int, seconds_limit: float | None
) -> WholeRun:
    """``dieharder -g 200 -a`` on one stream from round 0 (each test reads on from where the
    one before stopped), stopped after ``seconds_limit`` if given."""
    started = time.monotonic()
    # dieharder writes through C stdio: line-buffered, each finished test survives a stop.
    line_buffered = ["stdbuf", "-oL"] if shutil.which("stdbuf") else []
    stopped = False
    written = 0
    with tempfile.TemporaryFile("w+") as output:
        with subprocess.Popen(
            [*line_buffered, dieharder, *WHOLE_BATTERY_ARGUMENTS],
            stdin=subprocess.PIPE,
            stdout=output,
            stderr=output,
        ) as process:
            assert process.stdin is not None
            chunks = stream_chunks(bytes.fromhex(seed_hex), generates=generates, workers=workers)
            for chunk in chunks:
                if seconds_limit is not None and time.monotonic() - started > seconds_limit:
                    stopped = True
                    break
                try:
                    process.stdin.write(chunk)
                    process.stdin.flush()
                except BrokenPipeError:
                    break
                written += len(chunk)
            chunks.close()
            if stopped:
                process.terminate()
            with contextlib.suppress(BrokenPipeError):
                process.stdin.close()
        output.seek(0)
        text = output.read()
    return WholeRun(parse_dieharder(text), written, time.monotonic() - started, not stopped)


def render_whole(
    run: WholeRun, *, seed_hex: str, generates: int, version: str, command: str = ""
) -> str:
    lines_run = run.lines
    counts = Counter(line.verdict for line in lines_run)
    tests = list(dict.fromkeys(line.name for line in lines_run))
    rate = run.bytes_read / run.seconds if run.seconds else 0.0
    out = [
        "# The shuffle's DRBG output through `dieharder -a`",
        "",
        "- Stream: `bench/drbg_stream.py`, master seed "
        f"`{seed_hex}`, {generates} `Generate(64)` calls from each round's own shuffle DRBG "
        "(the stream of `dieharder.md`, whose docstring defines it byte by byte), each 32-bit "
        "word little-endian, piped into one `dieharder -g 200 -a` (every test, dieharder's "
        "default sizes; each test reads on from where the one before stopped).",
        f"- Tool: dieharder {version} (Debian package `dieharder`); verdicts are dieharder's: "
        "WEAK below 0.005 or above 0.995, FAILED beyond 1e-6.",
        f"- Command: `{command or 'make dieharder-all-evidence'}`; "
        f"{run.bytes_read / 1e9:.2f} GB of stream in "
        f"{run.seconds / 60:.1f} min ({rate / 1e6:.2f} MB/s, {platform.machine()}, "
        f"{os.cpu_count()} cores shared with other work), "
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d}.",
        "",
    ]
    if not run.complete:
        out += [
            f"**Partial run: stopped by its time limit after {len(tests)} tests "
            f"({len(lines_run)} p-values).** The rest of `-a` was not run for this report: at "
            "this rate the whole battery (about 250 GB of stream) takes days on 2 cores; "
            "`make dieharder-all-evidence DIEHARDER_ALL_SECONDS=` runs it to the end.",
            "",
        ]
    out += [
        f"**{len(lines_run)} p-values: {counts['PASSED']} PASSED, {counts['WEAK']} WEAK, "
        f"{counts['FAILED']} FAILED** ({len(lines_run) * 2 * ALPHA_WEAK:.2f} WEAK expected "
        "by chance).",
        "",
        "| test | ntup | tsamples | psamples | p-value | assessment |",
        "|---|---:|---:|---:|---:|---|",
        *(
            f"| {line.name} | {line.ntuple} | {line.tsamples:,} | {line.psamples:,} "
            f"| {line.p_value:.8f} | {line.verdict} |"
            for line in lines_run
        ),
        "",
        "A WEAK is a reason to look again on fresh data (another `--seed`), not a verdict; a "
        "FAILED, or a WEAK that recurs, is a defect to find. Like every statistical battery, "
        "this cannot show that the DRBG is unpredictable (`dieharder.md` says why).",
        "",
    ]
    return "\n".join(out)


def run_whole_battery(
    out_path: Path, seed_hex: str, generates: int, workers: int, seconds_limit: float | None
) -> int:
    dieharder = shutil.which("dieharder")
    if dieharder is None:
        print("dieharder is not installed: apt-get install dieharder", file=sys.stderr)
        return 2
    run = run_whole(dieharder, seed_hex, generates, workers, seconds_limit)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    command = (
        f".venv/bin/python bench/drbg_stream.py --seed {seed_hex} --generates {generates} "
        f"--workers {workers} --dieharder-all {out_path}"
        + ("" if seconds_limit is None else f" --time-limit {seconds_limit:g}")
    )
    text = render_whole(
        run,
        seed_hex=seed_hex,
        generates=generates,
        version=dieharder_version(dieharder),
        command=command,
    )
    out_path.write_text(text, encoding="utf-8")
    print(f"wrote {out_path}: {len(run.lines)} p-values in {run.seconds / 60:.1f} min")
    return 0


def run_battery(
    out_path: Path, seed_hex: str, generates: int, workers: int, tests: Sequence[DieharderTest]
) -> int:
    dieharder = shutil.which("dieharder")
    if dieharder is None:
        print("dieharder is not installed: apt-get install dieharder", file=sys.stderr)
        return 2
    started = time.perf_counter()

    def run_and_print(test: DieharderTest, seed: str) -> BatteryRun:
        run = run_test(dieharder, test, seed, generates, workers)
        for line in run.lines:
            print(
                f"{line.verdict:6}  p={line.p_value:.8f}  {line.name} n={line.ntuple}  "
                f"seed {seed}, {run.bytes_read:,} bytes, {run.seconds:.0f} s",
                flush=True,
            )
        return run

    runs = [run_and_print(test, seed_hex) for test in tests]
    rechecks = [
        run_and_print(run.test, seed)
        for run in runs
        if run.flagged
        for seed in RECHECK_SEEDS
        if seed != seed_hex
    ]
    seconds = time.perf_counter() - started
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(
        render_battery(
            runs,
            rechecks=rechecks,
            seed_hex=seed_hex,
            generates=generates,
            version=dieharder_version(dieharder),
            seconds=seconds,
        ),
        encoding="utf-8",
    )
    print(f"wrote {out_path} in {seconds / 60:.1f} min")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The shuffle DRBG's output, raw, on stdout.")
    parser.add_argument("--seed", default=DEFAULT_SEED_HEX, help="master seed, hex (default 00)")
    parser.add_argument(
        "--generates",
        type=int,
        default=DEFAULT_GENERATES,
        help="Generate(64) calls per round's DRBG (default 4)",
    )
    parser.add_argument("--start-round", type=int, default=0, help="first round (default 0)")
    parser.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--bytes", type=int, help="stop after this many bytes (default: never)")
    parser.add_argument(
        "--dieharder",
        type=Path,
        metavar="REPORT",
        help="run the dieharder battery on the stream and write its table to REPORT",
    )
    parser.add_argument(
        "--dieharder-all",
        type=Path,
        metavar="REPORT",
        help="run dieharder -a on the stream and write every result line to REPORT",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        metavar="SECONDS",
        help="with --dieharder-all: stop after this long and report the tests finished",
    )
    parser.add_argument(
        "--test",
        type=int,
        action="append",
        help="with --dieharder: only this dieharder test number (repeatable)",
    )
    args = parser.parse_args(argv)
    if args.generates < 1:
        parser.error("--generates must be at least 1")
    bytes.fromhex(args.seed)
    if args.dieharder_all is not None:
        return run_whole_battery(
            args.dieharder_all, args.seed, args.generates, args.workers, args.time_limit
        )
    if args.dieharder is not None:
        tests = [test for test in BATTERY if not args.test or test.number in args.test]
        return run_battery(args.dieharder, args.seed, args.generates, args.workers, tests)
    chunks = stream_chunks(
        bytes.fromhex(args.seed),
        generates=args.generates,
        start_round=args.start_round,
        workers=args.workers,
    )
    written, closed = write_stream(sys.stdout.buffer, chunks, args.bytes)
    chunks.close()
    if closed:
        # The reader is gone: keep Python from complaining as it flushes stdout on exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    rounds = written / (GENERATE_BYTES * args.generates)
    print(f"drbg_stream: wrote {written:,} bytes ({rounds:,.0f} rounds)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
