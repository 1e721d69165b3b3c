"""Publishing the log as static tiles (``gnau tiles publish``): tiles per second, and bytes per
million rounds, to a directory and to a real S3-compatible bucket (SeaweedFS's ``weed mini`` on
loopback), on SQLite and on PostgreSQL.

Run: ``.venv/bin/python bench/bench_tiles.py [--rounds N] [--entries N]`` (about a minute with
the defaults; ``--large`` multiplies both by ten). Two logs per database:

1. **Real rounds** (``--rounds``, default 500: shuffled, dealt, revealed and settled by the
   Dealer at 100 tables at once): what a round costs in published bytes, by kind of tile, and
   so per million rounds. Bytes are exact; they do not depend on the machine.
2. **Throughput** (``--entries``, default 40,000 plain entries padded to the real rounds' mean
   entry size, appended in bulk): tiles per second of a first pass, beside the same-run
   baseline of *rendering* every tile from the store without writing it (``read_tile`` alone);
   then the cost of a pass with nothing new (what ``--follow`` does when the log is idle).

Compare ratios to the baseline, not absolute rates across runs: the machine is shared. The last
thing printed is a markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gnau_service.audit.entries import EntryKind
from gnau_service.audit.operators import DEFAULT_OPERATOR
from gnau_service.audit.tiles import tiles_of
from gnau_service.rules.house_rules import HouseRules
from gnau_service.store import Store
from gnau_service.store.tiles import read_tile
from gnau_service.tiles.publisher import PublishReport, publish_once
from gnau_service.tiles.targets import DirectoryTarget, S3Target, Target
from tests.catalogued import catalogued
from tests.dealers import fresh
from tests.postgres import unavailable_reason
from tests.steps import run_steps
from tests.tiles.conftest import SeaweedUnavailable, weed_mini
from tests.tiles.logs import PLATFORM, SEATS, Log, opened_log

TABLES: Final = [f"bench-{i}" for i in range(100)]


@dataclass
class Summary:
    rows: list[tuple[str, ...]] = field(default_factory=list)

    def add(self, *row: str) -> None:
        self.rows.append(row)

    def markdown(self) -> str:
        lines = [
            "| Database | Log | Target | Measure | Result | Baseline (same run) | Ratio |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join(lines)


def heading(text: str) -> None:
    print(f"\n{text}", flush=True)


def report(label: str, value: str, note: str = "") -> None:
    print(f"  {label:<46} {value:>20}  {note}".rstrip(), flush=True)


def status(text: str) -> None:
    """Progress on stderr, so that stdout holds only the figures."""
    print(f"    ... {text}", file=sys.stderr, flush=True)


# --- The logs -------------------------------------------------------------------------------------


def play_rounds(log: Log, count: int) -> None:
    """``count`` whole rounds, one at each of 100 tables at a time."""
    dealer = log.dealer

    async def one(table: str) -> None:
        shuffled = await dealer.shuffle(
            table, HouseRules(), fresh(), operator=DEFAULT_OPERATOR, actor=PLATFORM
        )
        round_id = shuffled.record.round_id
        for step in ("deal", "reveal", "settle"):
            if step == "deal":
                await dealer.deal(
                    round_id, SEATS, None, fresh(), operator=DEFAULT_OPERATOR, actor=PLATFORM
                )
            else:
                await getattr(dealer, step)(
                    round_id, fresh(), operator=DEFAULT_OPERATOR, actor=PLATFORM
                )

    async def all_of_them() -> None:
        for start in range(0, count, len(TABLES)):
            await asyncio.gather(*(one(table) for table in TABLES[: min(100, count - start)]))

    catalogued(log.store, TABLES)
    asyncio.run(all_of_them())


def append_padded(store: Store, count: int, entry_bytes: int) -> None:
    """``count`` entries of no round, each about ``entry_bytes`` long, in batches."""
    padding = "x" * max(0, entry_bytes - 330)  # an empty CONFIG_CHANGED entry is ~330 bytes
    for start in range(0, count, 1000):
        units = [
            lambda tx, i=i: tx.append(EntryKind.CONFIG_CHANGED, {"i": i, "pad": padding})
            for i in range(start, min(count, start + 1000))
        ]
        run_steps(store, units)


# --- The targets ----------------------------------------------------------------------------------


@dataclass
class Targets:
    """A fresh target of each kind for each run: a directory, and a bucket if SeaweedFS runs."""

    scratch: Path
    seaweed: object | None
    made: int = 0

    def kinds(self) -> list[str]:
        return ["directory"] + (["SeaweedFS S3"] if self.seaweed is not None else [])

    def fresh(self, kind: str) -> Target:
        self.made += 1
        if kind == "directory":
            return DirectoryTarget(self.scratch / f"tiles-{self.made}")
        from tests.tiles.conftest import Seaweed  # noqa: PLC0415

        assert isinstance(self.seaweed, Seaweed)
        return S3Target(self.seaweed.bucket(), "log", self.seaweed.client)


@contextmanager
def seaweed_or_none(directory: Path) -> Iterator[object | None]:
    try:
        with weed_mini(directory) as seaweed:
            yield seaweed
    except SeaweedUnavailable as error:
        status(f"no S3 target: {error}")
        yield None


def timed(action: Callable[[], PublishReport]) -> tuple[PublishReport, float]:
    started = time.perf_counter()
    result = action()
    return result, time.perf_counter() - started


# --- The measurements -----------------------------------------------------------------------------


def bench_rounds(summary: Summary, database: str, log: Log, rounds: int, targets: Targets) -> float:
    """Bytes per round; returns the mean entry size."""
    entries = log.entries()
    size = len(entries)
    mean_entry = sum(map(len, entries)) / size
    heading(f"{database}: {rounds:,} real rounds, {size:,} entries ({mean_entry:,.0f} bytes each)")
    published, seconds = timed(lambda: publish_once(log.store, targets.fresh("directory")))
    hashes = sum(32 * ref.width for ref in tiles_of(size) if ref.level is not None)
    bundles = published.bytes_written - hashes
    report("tiles written", f"{published.written:,}", f"in {seconds:.2f} s")
    for what, count in (("hash tiles", hashes), ("bundles", bundles)):
        report(f"{what}: bytes per round", f"{count / rounds:,.0f}")
    per_million = published.bytes_written / rounds * 1e6
    report("bytes per million rounds", f"{per_million / 1e9:,.2f} GB", "(all tiles, once)")
    raw = sum(map(len, entries)) / rounds * 1e6
    summary.add(
        database,
        f"{rounds:,} rounds",
        "any",
        "bytes per million rounds",
        f"{per_million / 1e9:,.2f} GB",
        f"{raw / 1e9:,.2f} GB (the entries alone)",
        f"{per_million / raw:.3f}",
    )
    return mean_entry


def bench_throughput(summary: Summary, database: str, store: Store, targets: Targets) -> None:
    size = store.size()
    heading(f"{database}: throughput, {size:,} entries")
    refs = list(tiles_of(size))
    started = time.perf_counter()
    rendered = sum(len(read_tile(store, ref, public=True, covered_size=size)) for ref in refs)
    baseline = len(refs) / (time.perf_counter() - started)
    report(
        "render only (read_tile, no write): baseline",
        f"{baseline:,.0f} tiles/s",
        f"{len(refs):,} tiles, {rendered / 1e6:,.1f} MB",
    )
    for kind in targets.kinds():
        target = targets.fresh(kind)
        first, seconds = timed(lambda: publish_once(store, target))  # noqa: B023
        rate = first.written / seconds
        report(
            f"{kind}: first pass",
            f"{rate:,.0f} tiles/s",
            f"{first.bytes_written / seconds / 1e6:,.1f} MB/s, {seconds:.2f} s",
        )
        summary.add(
            database,
            f"{size:,} entries",
            kind,
            "first pass, tiles/s",
            f"{rate:,.0f}",
            f"{baseline:,.0f} (render only)",
            f"{rate / baseline:.2f}",
        )
        idle = [timed(lambda: publish_once(store, target))[1] for _ in range(5)]  # noqa: B023
        best = min(idle) * 1e3
        report(f"{kind}: a pass with nothing new", f"{best:,.1f} ms", "(best of 5)")
        summary.add(database, f"{size:,} entries", kind, "idle pass", f"{best:,.1f} ms", "", "")
        append_padded(store, 300, 1000)
        grown, seconds = timed(lambda: publish_once(store, target))  # noqa: B023
        report(
            f"{kind}: a pass after 300 more entries",
            f"{seconds * 1e3:,.1f} ms",
            f"{grown.written} tiles",
        )
        summary.add(
            database,
            "+300 entries",
            kind,
            "incremental pass",
            f"{seconds * 1e3:,.1f} ms",
            "",
            "",
        )


def bench_database(
    summary: Summary, database: str, backend: str, arguments: argparse.Namespace, targets: Targets
) -> None:
    with tempfile.TemporaryDirectory(prefix="gnau-bench-tiles-") as scratch:
        status(f"{database}: playing {arguments.rounds:,} rounds")
        with opened_log(backend, Path(scratch)) as log:
            play_rounds(log, arguments.rounds)
            mean_entry = bench_rounds(summary, database, log, arguments.rounds, targets)
        status(f"{database}: appending {arguments.entries:,} entries of {mean_entry:,.0f} bytes")
        with opened_log(backend, Path(scratch) / "throughput") as log:
            append_padded(log.store, arguments.entries, round(mean_entry))
            bench_throughput(summary, database, log.store, targets)


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=500, help="real rounds (default 500)")
    parser.add_argument(
        "--entries", type=int, default=40_000, help="throughput log's entries (default 40,000)"
    )
    parser.add_argument("--large", action="store_true", help="ten times both sizes")
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL")
    parser.add_argument("--no-s3", action="store_true", help="skip SeaweedFS")
    arguments = parser.parse_args(argv)
    if arguments.large:
        arguments.rounds *= 10
        arguments.entries *= 10
    return arguments


def main(argv: list[str] | None = None) -> None:
    arguments = parse_arguments(argv)
    started = time.perf_counter()
    summary = Summary()
    print(
        f"Gnau Dealer tiles publishing benchmark: {os.cpu_count()} cores, "
        f"Python {sys.version.split()[0]}"
    )
    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gnau-bench-")))
        seaweed = None
        if not arguments.no_s3:
            (scratch / "seaweed").mkdir()
            seaweed = stack.enter_context(seaweed_or_none(scratch / "seaweed"))
        targets = Targets(scratch, seaweed)
        bench_database(summary, "SQLite", "sqlite", arguments, targets)
        reason = "--no-postgres" if arguments.no_postgres else unavailable_reason()
        if reason is None:
            bench_database(summary, "PostgreSQL", "postgresql", arguments, targets)
        else:
            heading(f"PostgreSQL: skipped ({reason})")
    heading(f"Summary ({time.perf_counter() - started:,.0f} s in all)")
    print(summary.markdown())


if __name__ == "__main__":
    main()
