"""Several ``gnau serve`` replicas on one PostgreSQL log: rounds/s, CPU per round, lock waits.

Run: ``.venv/bin/python bench/bench_replicas.py [--replicas 1,2,4] [--tables 32 |
--tables-per-replica 32] [--seconds 10]``
(about 30 s per replica count). Needs PostgreSQL at ``--postgres-url`` (default the local one);
without it, it says so and exits 0.

For each replica count N, on a fresh scratch database:

1. N ``gnau serve`` processes (real processes, one log, one key: the first creates the key and
   the database, the others start on them) each listen on their own port.
2. The load generator in this process (``bench/bench_service.py``'s player: Shuffle, Deal with
   three seats, Reveal, Settle, each awaited) runs ``--tables`` tasks, each on its own table,
   table ``t`` served by replica ``t mod N``: the load spread evenly over the replicas, every
   table on one replica at a time. Before the clock starts, one round on each replica: each
   process computes its rule set's PAR sheet (about a CPU-second) at its first Shuffle, which is
   start-up, not a round's cost.
3. In the measured window: rounds/s, the p50/p99 of each call, and the CPU time of *every*
   service process (user + system, from ``/proc/PID/stat``) per round; PostgreSQL's own CPU is
   not in that figure (it runs as other processes).
4. Lock waits: a thread samples ``pg_stat_activity`` every ``--sample-ms`` for the scratch
   database's sessions with ``wait_event_type = 'Lock'``; each waiting session in a sample
   stands for one sample interval of waiting. The sum, divided by the steps (4 per round) played
   in the window, is the lock-wait time per step, printed with the wait events seen
   (``transactionid``, ``tuple``, ``advisory``...). An ``advisory`` wait is reported apart: a
   replica that idles on a leader lock waits there by design, not on a step.
5. The added latency of waiting for integration: each replica runs ``gnau serve`` through this
   file (``--timed-serve``), which times, for every step whose caller waits for the sequencer,
   from the moment the step registers its caller (just before its COMMIT) to the moment its
   events are integrated under a signed checkpoint (by its own process's sequencer or, heard
   through NOTIFY, another's); p50/p99 per step over the window. Without a sequencer (before
   issue 12) steps are sequenced inside their own transaction, and there is nothing to time.
6. After each run the log is exported and verified offline with the log key
   (``gnau audit verify``): VALID, every round played settled.

The figures to compare are in one run: CPU per round at N replicas over CPU per round at one
(the target: at most 1.10 at 4 replicas), and the lock-wait time per step. This 2-core machine
cannot show a many-core speed-up: rounds/s of several replicas share the same two cores with
PostgreSQL and the load generator.

With ``--tables`` the total load is fixed, so each of N replicas sees 1/N of it: its step
batches are smaller, and a step costs more (a transaction's fixed statements shared by fewer
steps), as it would in one process at that load. ``--tables-per-replica K`` grows the load with
the replicas (K tables each, as when replicas are added for more tables), so that the ratio
shows what the replicas themselves cost.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import grpc
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_service import (  # a sibling script, found through sys.path above
    CLOCK_TICKS,
    DEFAULT_POSTGRES_URL,
    RPCS,
    Recorder,
    RoundPlayer,
    RunResult,
    ServerProcess,
    Verification,
    drive,
    drop_postgres,
    free_port,
    real_player,
    scratch_postgres,
    serve_arguments,
    verify_log,
)

TARGET_GROWTH: Final = 1.10
STEPS_PER_ROUND: Final = len(RPCS)


class Replicas:
    """N ``gnau serve`` processes on one database; their CPU is summed (as
    :func:`bench_service.drive` reads one server's)."""

    def __init__(self, count: int, database: str, directory: Path) -> None:
        self.data_dir = directory / "data"
        self.ports = [free_port() for _ in range(count)]
        self.waits = [directory / f"replica-{n}.waits.json" for n in range(count)]
        self.processes = [
            ServerProcess(
                f"replica-{n}",
                [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "--timed-serve",
                    str(self.waits[n]),
                    *serve_arguments(port, self.data_dir, database),
                ],
                directory,
            )
            for n, port in enumerate(self.ports)
        ]

    def integration_waits(self, start: float, end: float) -> dict[str, list[float]] | None:
        """Every replica's integration waits (seconds) that ended in [start, end] (monotonic
        clock), by step; ``None`` if the store has no sequencer to wait for."""
        waits: dict[str, list[float]] = {}
        for path in self.waits:
            if not path.exists():
                return None
            for step, at, seconds in json.loads(path.read_text(encoding="utf-8")):
                if start <= at <= end:
                    waits.setdefault(step, []).append(seconds)
        return waits

    async def start(self) -> str:
        """Start the first (it creates the schema, the key and the token), then the others."""
        vkey = await self.processes[0].start()
        await asyncio.gather(*(process.start() for process in self.processes[1:]))
        return vkey

    def cpu_seconds(self) -> float:
        return sum(process.cpu_seconds() for process in self.processes)

    def counters(self) -> list[ProcessCounters]:
        """Each replica's CPU and context switches so far."""
        return [
            ProcessCounters.of(process.process.pid) for process in self.processes if process.process
        ]

    def stop(self) -> list[int | None]:
        return [process.stop() for process in self.processes]


@dataclass(frozen=True)
class ProcessCounters:
    """A process's CPU seconds (user + system) and its threads' context switches, so far."""

    cpu: float
    voluntary: int
    involuntary: int

    @classmethod
    def of(cls, pid: int) -> ProcessCounters:
        fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
        voluntary = involuntary = 0
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                for line in (task / "status").read_text(encoding="ascii").splitlines():
                    if line.startswith("voluntary_ctxt_switches"):
                        voluntary += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        involuntary += int(line.split()[1])
        return cls((int(fields[11]) + int(fields[12])) / CLOCK_TICKS, voluntary, involuntary)

    def __sub__(self, other: ProcessCounters) -> ProcessCounters:
        return ProcessCounters(
            self.cpu - other.cpu,
            self.voluntary - other.voluntary,
            self.involuntary - other.involuntary,
        )


def postgres_pids(url: str, database: str) -> list[int]:
    """The PostgreSQL backends serving ``database`` now (the replicas' sessions)."""
    with psycopg.connect(url, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        ).fetchall()
    return [int(row[0]) for row in rows]


def postgres_cpu(pids: Sequence[int]) -> float:
    """CPU seconds of those backends so far (those that ended are left out)."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += ProcessCounters.of(pid).cpu
    return total


@dataclass
class LockSamples:
    """What the sampler saw: samples taken, waiting sessions counted by wait event."""

    interval: float
    samples: int = 0
    waits: collections.Counter[str] = field(default_factory=collections.Counter)
    active: int = 0  # active sessions summed over the samples (the database's busy-ness)

    def seconds(self, *, advisory: bool) -> float:
        """Waiting time (session-seconds) on advisory locks, or on every other lock."""
        return self.interval * sum(
            count for event, count in self.waits.items() if (event == "advisory") == advisory
        )


class LockSampler:
    """A thread sampling ``pg_stat_activity`` for the sessions of one database that wait on a
    lock (``wait_event_type = 'Lock'``), between :meth:`start` and :meth:`stop`."""

    QUERY: Final = (
        "SELECT wait_event_type, wait_event, state FROM pg_stat_activity"
        " WHERE datname = %s AND pid <> pg_backend_pid()"
    )

    def __init__(self, url: str, database: str, interval: float) -> None:
        self.url, self.database = url, database
        self.result = LockSamples(interval)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lock-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> LockSamples:
        self._stopping.set()
        self._thread.join()
        return self.result

    def _run(self) -> None:
        result = self.result
        with psycopg.connect(self.url, autocommit=True) as connection:
            next_at = time.perf_counter()
            while not self._stopping.is_set():
                rows = connection.execute(self.QUERY, (self.database,)).fetchall()
                result.samples += 1
                for event_type, event, state in rows:
                    result.active += state == "active"
                    if event_type == "Lock":
                        result.waits[event or "?"] += 1
                next_at += result.interval
                self._stopping.wait(max(0.0, next_at - time.perf_counter()))


@dataclass
class ReplicaRun:
    replicas: int
    run: RunResult
    locks: LockSamples
    window_steps: int
    verification: Verification
    waits: dict[str, list[float]] | None  # integration waits by step; None: no sequencer
    processes: list[ProcessCounters]  # each replica's, over the window
    postgres_cpu: float  # the replicas' PostgreSQL backends' CPU seconds over the window

    def wait_ms(self, step: str, fraction: float) -> float:
        values = sorted((self.waits or {}).get(step, []))
        if not values:
            return float("nan")
        return 1000 * values[max(0, min(len(values) - 1, int(fraction * len(values) + 0.5) - 1))]

    @property
    def lock_ms_per_step(self) -> float:
        return 1000 * self.locks.seconds(advisory=False) / max(self.window_steps, 1)

    @property
    def advisory_ms_per_step(self) -> float:
        return 1000 * self.locks.seconds(advisory=True) / max(self.window_steps, 1)


STEP_OF_KIND: Final = {
    "ROUND_COMMITTED": "Shuffle",
    "ROUND_DEALT": "Deal",
    "ROUND_REVEALED": "Reveal",
    "ROUND_SETTLED": "Settle",
}


def timed_serve(arguments: Sequence[str]) -> int:
    """``gnau serve ARGUMENTS[1:]``, recording into the file ARGUMENTS[0], at exit, every wait
    for integration: [step, monotonic time it ended, seconds]. The store's ``Waiters`` are
    wrapped: ``add`` notes when a step registered its caller (just before its COMMIT) and
    ``resolve`` when the caller's events all had indices."""
    from gnau_service.cli.main import main as gnau_main  # noqa: PLC0415  (only in this mode)

    waits: list[tuple[str, float, float]] = []
    try:
        from gnau_service.store import waiting  # noqa: PLC0415  (only since issue 12)
    except ImportError:
        return gnau_main(["serve", *arguments[1:]])
    started: dict[int, tuple[str, float]] = {}
    add, resolve = waiting.Waiters.add, waiting.Waiters.resolve

    def timed_add(self: Any, pending: Any) -> None:
        kind = str(pending.entries[0].kind) if pending.entries else "?"
        started[id(pending.future)] = (STEP_OF_KIND.get(kind, kind), pending.since)
        add(self, pending)

    def timed_resolve(self: Any, indices: dict[int, int]) -> Any:
        outcomes = resolve(self, indices)
        now = time.monotonic()
        for future, *_ in outcomes:
            step, since = started.pop(id(future), ("?", now))
            waits.append((step, now, now - since))
        return outcomes

    waiting.Waiters.add = timed_add  # type: ignore[method-assign]
    waiting.Waiters.resolve = timed_resolve  # type: ignore[method-assign]
    try:
        return gnau_main(["serve", *arguments[1:]])
    finally:
        Path(arguments[0]).write_text(json.dumps(waits), encoding="utf-8")


def spread_player(players: Sequence[RoundPlayer]) -> RoundPlayer:
    """Table ``t`` on replica ``t mod N``."""

    async def play(table: int, recorder: Recorder) -> None:
        await players[table % len(players)](table, recorder)

    return play


async def bench_replicas(count: int, arguments: argparse.Namespace) -> ReplicaRun | str:
    scratch = scratch_postgres(arguments.postgres_url, "gnau_bench_replicas")
    if isinstance(scratch, str):
        return scratch
    name, url = scratch
    try:
        with tempfile.TemporaryDirectory(prefix="gnau-bench-replicas-") as temp:
            directory = Path(temp)
            replicas = Replicas(count, url, directory)
            try:
                vkey = await replicas.start()
                token = (replicas.data_dir / "operator-token").read_text(encoding="utf-8").strip()
                channels = [grpc.aio.insecure_channel(f"127.0.0.1:{p}") for p in replicas.ports]
                players = [real_player(channel, token, f"r{count}") for channel in channels]
                # A process computes its rule set's return to player (a PAR sheet: about a
                # CPU-second) at its first Shuffle. One round on each replica before the clock
                # starts keeps N replicas' start-up out of the window (it spilled into it).
                await asyncio.gather(*(play(k, Recorder()) for k, play in enumerate(players)))
                sampler = LockSampler(url, name, arguments.sample_ms / 1000)
                window_start = time.perf_counter() + arguments.warmup
                monotonic_start = time.monotonic() + arguments.warmup

                processes: list[ProcessCounters] = []
                backends_cpu = 0.0

                async def sample_window() -> LockSamples:
                    nonlocal processes, backends_cpu
                    await asyncio.sleep(max(0.0, window_start - time.perf_counter()))
                    sampler.start()
                    before = replicas.counters()
                    backends = postgres_pids(arguments.postgres_url, name)
                    backends_before = postgres_cpu(backends)
                    profilers = start_profilers(replicas, arguments, count)
                    await asyncio.sleep(arguments.seconds)
                    processes = [a - b for a, b in zip(replicas.counters(), before, strict=True)]
                    backends_cpu = postgres_cpu(backends) - backends_before
                    for profiler in profilers:
                        profiler.wait()
                    return sampler.stop()

                sampling = asyncio.create_task(sample_window())
                try:
                    run = await drive(
                        f"{count} replica{'s' if count > 1 else ''}",
                        spread_player(players),
                        replicas,  # type: ignore[arg-type]  # cpu_seconds() is all drive reads
                        tables=tables_for(count, arguments),
                        warmup=arguments.warmup,
                        seconds=arguments.seconds,
                    )
                    locks = await sampling
                finally:
                    for channel in channels:
                        await channel.close()
            finally:
                statuses = replicas.stop()
            if any(status not in (0, None) for status in statuses):
                print(f"  exit statuses {statuses}: {replicas.processes[0].tail()}")
            waits = replicas.integration_waits(monotonic_start, monotonic_start + arguments.seconds)
            verification = verify_log(
                url, vkey, directory / "log.bundle", run.rounds_played + count, starts=count
            )
    finally:
        drop_postgres(arguments.postgres_url, name)
    return ReplicaRun(
        count,
        run,
        locks,
        run.rounds_in_window * STEPS_PER_ROUND,
        verification,
        waits,
        processes,
        backends_cpu,
    )


def start_profilers(
    replicas: Replicas, arguments: argparse.Namespace, count: int
) -> list[subprocess.Popen[bytes]]:
    """With ``--profile DIR``: py-spy records each replica over the window, as collapsed stacks
    in ``DIR/replicas-N-K.txt`` (its sampling costs CPU: read the figures of a run without)."""
    if arguments.profile is None:
        return []
    arguments.profile.mkdir(parents=True, exist_ok=True)
    return [
        subprocess.Popen(
            [
                str(Path(sys.executable).parent / "py-spy"),
                "record",
                "--pid",
                str(process.process.pid),
                "--duration",
                str(int(arguments.seconds)),
                "--rate",
                "67",
                "--nonblocking",
                "--threads",
                "--format",
                "raw",
                "--output",
                str(arguments.profile / f"replicas-{count}-{k}.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for k, process in enumerate(replicas.processes)
        if process.process is not None
    ]


def integration_text(result: ReplicaRun) -> str:
    """The integration waits' p50 / p99 per step, or why there are none."""
    if result.waits is None:
        return "none: each step is sequenced in its own transaction"
    return ", ".join(
        f"{step} {result.wait_ms(step, 0.50):.1f} / {result.wait_ms(step, 0.99):.1f}"
        for step in RPCS
    )


def print_results(runs: Sequence[ReplicaRun]) -> None:
    base = runs[0].run.server_ms_per_round
    header = (
        "| replicas | rounds/s | service CPU ms/round | vs 1 replica | "
        "Shuffle / Deal / Reveal / Settle p50 ms | p99 ms | lock wait ms/step | "
        "lock waits seen | integration wait p50 / p99 ms | log verified |"
    )
    print(header)
    print("|---:|---:|---:|---:|---|---|---:|---|---|---|")
    for result in runs:
        run = result.run
        p50 = " / ".join(f"{run.percentile_ms(rpc, 0.50):.1f}" for rpc in range(len(RPCS)))
        p99 = " / ".join(f"{run.percentile_ms(rpc, 0.99):.1f}" for rpc in range(len(RPCS)))
        waits = ", ".join(f"{event} {n}" for event, n in result.locks.waits.most_common()) or "none"
        verified = result.verification
        check = (
            f"VALID, {verified.rounds_settled:,} rounds"
            if verified.ok
            else "FAILED: " + "; ".join(verified.problems)
        )
        print(
            f"| {result.replicas} | {run.rounds_per_second:,.0f} | "
            f"{run.server_ms_per_round:.2f} | {run.server_ms_per_round / base:.2f} | {p50} | "
            f"{p99} | {result.lock_ms_per_step:.2f} | {waits} ({result.locks.samples} samples) | "
            f"{integration_text(result)} | {check} |"
        )


def tables_for(replicas: int, arguments: argparse.Namespace) -> int:
    """The tables played against ``replicas`` replicas: ``--tables`` in all, or, with
    ``--tables-per-replica``, that many for each (the load growing with the replicas)."""
    if arguments.tables_per_replica is not None:
        return int(arguments.tables_per_replica * replicas)
    return int(arguments.tables)


async def run_all(arguments: argparse.Namespace) -> int:
    load = (
        f"{arguments.tables_per_replica} tables per replica"
        if arguments.tables_per_replica is not None
        else f"{arguments.tables} tables"
    )
    print(
        f"gnau serve replicas on one PostgreSQL log: {load}, "
        f"{arguments.seconds:g} s after {arguments.warmup:g} s warm-up, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    runs: list[ReplicaRun] = []
    for count in arguments.replicas:
        print(f"\n{count} replica(s):")
        result = await bench_replicas(count, arguments)
        if isinstance(result, str):
            print(f"  skipped: {result}")
            return 0
        run = result.run
        print(
            f"  {run.rounds_per_second:,.0f} rounds/s, {run.server_ms_per_round:.2f} ms of "
            f"service CPU per round ({run.server_cpu:.2f} cores), lock wait "
            f"{result.lock_ms_per_step:.2f} ms per step (advisory "
            f"{result.advisory_ms_per_step:.2f}), {len(run.errors)} errors, log "
            f"{'VALID' if result.verification.ok else 'FAILED'}"
        )
        print(f"  integration wait p50 / p99 ms: {integration_text(result)}")
        rounds = max(run.rounds_in_window, 1)
        print(
            f"  PostgreSQL backends {1000 * result.postgres_cpu / rounds:.2f} ms CPU per round;"
            " each replica's CPU ms / voluntary / involuntary context switches per round: "
            + ", ".join(
                f"{1000 * p.cpu / rounds:.2f} / {p.voluntary / rounds:.1f} / "
                f"{p.involuntary / rounds:.1f}"
                for p in result.processes
            )
        )
        for error in run.errors[:3]:
            print(f"  error: {error}")
        runs.append(result)
    print(f"\nResults (load average now {os.getloadavg()[0]:.1f}):\n")
    print_results(runs)
    last = runs[-1]
    growth = last.run.server_ms_per_round / runs[0].run.server_ms_per_round
    verdict = "meets" if growth <= TARGET_GROWTH else "MISSES"
    print(
        f"\nCPU per round at {last.replicas} replicas / at {runs[0].replicas}: {growth:.2f}, "
        f"{verdict} the target of at most {TARGET_GROWTH:.2f}"
    )
    failed = any(not r.verification.ok or r.run.errors for r in runs)
    return 1 if failed else 0


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument(
        "--replicas",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[1, 2, 4],
        help="replica counts, comma-separated (default 1,2,4; the first is the baseline)",
    )
    parser.add_argument("--tables", type=int, default=32, help="concurrent tables (default 32)")
    parser.add_argument(
        "--tables-per-replica",
        type=int,
        help="instead of --tables: this many tables for each replica, so that every process sees "
        "the same load at every replica count (scaling out with the load)",
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=3.0, help="warm-up seconds per run")
    parser.add_argument("--sample-ms", type=float, default=10.0, help="lock sampling interval")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument(
        "--profile",
        type=Path,
        help="py-spy (pip install py-spy) each replica over the window into this directory",
    )
    parser.add_argument("--timed-serve", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if min(arguments.replicas) < 1 or arguments.tables < max(arguments.replicas):
        parser.error("each replica count must be at least 1, and --tables at least the largest")
    if arguments.tables_per_replica is not None and arguments.tables_per_replica < 1:
        parser.error("--tables-per-replica must be at least 1")
    return arguments


def main(argv: Sequence[str] | None = None) -> None:
    arguments = parse_arguments(argv)
    if arguments.timed_serve is not None:
        sys.exit(timed_serve(arguments.timed_serve))
    sys.exit(asyncio.run(run_all(arguments)))


if __name__ == "__main__":
    main()
