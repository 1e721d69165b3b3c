"""The failover drill: two ``gnau serve`` replicas under load on a replicated PostgreSQL
pair (tests/replication.py), the primary killed with SIGKILL, the standby promoted; then what
the clients saw is held against the log.

Each replica has a player: a client that plays rounds step by step (Shuffle, Deal, Reveal,
Settle) and, on ``UNAVAILABLE`` or a lost deadline, sends the same request again with the same
request id until it is acknowledged. It records every acknowledged step, and when each was
first sent. A watcher saves the checkpoints the replicas hand out.

Used by tests/server/test_failover.py (asserts) and bench/bench_failover.py (prints).
"""

from __future__ import annotations

import io
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

import grpc
from gnau.v1 import dealer_pb2, round_pb2
from gnau_client import GnauClient, Seat

from gnau_service.audit.bundle import write_bundle
from gnau_service.audit.bundle_verification import verify_bundle
from gnau_service.audit.entries import EntryKind, decode_entry
from gnau_service.audit.note import Verifier
from gnau_service.cli.remote_log import checkpoint_size
from gnau_service.store import open_reader
from tests.replication import Pair, replicated_pair
from tests.serving import Served, gnau, served, table_config_message

SEATS: Final = [Seat(seat_number=n, player_id=f"player-{n}", stake=10 * n) for n in (1, 2, 3)]
CALL_SECONDS: Final = 5.0  # each attempt's deadline
GIVE_UP_SECONDS: Final = 90.0  # a step still refused after this long is a failure of the drill
STOPPING_SECONDS: Final = 10.0
RETRY_PAUSE: Final = 0.1
RETRIED: Final = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
CHECKPOINT_PAUSE: Final = 0.2
#: The log entry each acknowledged step must have written.
STEP_ENTRY: Final = {
    "Shuffle": EntryKind.ROUND_COMMITTED,
    "Deal": EntryKind.ROUND_DEALT,
    "Reveal": EntryKind.ROUND_REVEALED,
    "Settle": EntryKind.ROUND_SETTLED,
}


@dataclass(frozen=True)
class Ack:
    """One acknowledged step: the round, the step, when it was first sent and when it was
    acknowledged (``time.monotonic()``)."""

    round_id: str
    step: str
    sent: float
    acknowledged: float


@dataclass
class Player:
    """What one replica's client saw."""

    name: str
    acks: list[Ack] = field(default_factory=list)
    retries: int = 0
    failures: list[str] = field(default_factory=list)

    def first_ack_sent_after(self, moment: float) -> float | None:
        """When the first step first sent after ``moment`` was acknowledged."""
        times = [ack.acknowledged for ack in self.acks if ack.sent > moment]
        return min(times, default=None)

    def rounds_settled(self) -> int:
        return sum(ack.step == "Settle" for ack in self.acks)

    def steps_between(self, start: float, end: float) -> int:
        return sum(start <= ack.acknowledged < end for ack in self.acks)


T = TypeVar("T")


def _until_acknowledged(player: Player, call: Callable[[], T], stop: threading.Event) -> T:
    """The call, again and again (its request id fixed by ``call``) until acknowledged; a drill
    that has stopped (it failed elsewhere) waits for it a short while only."""
    sent = time.monotonic()
    while True:
        try:
            return call()
        except grpc.RpcError as error:
            waited = time.monotonic() - sent
            if (
                error.code() not in RETRIED
                or waited > GIVE_UP_SECONDS
                or (stop.is_set() and waited > STOPPING_SECONDS)
            ):
                raise
            player.retries += 1
            time.sleep(RETRY_PAUSE)


def play(service: Served, player: Player, stop: threading.Event) -> None:
    """Play whole rounds until ``stop``; a round under way is always finished. The player's
    table is first put in its operator's catalogue (a round is dealt only at a catalogued
    table), under tests/serving.py's :func:`table_config_message`: PutTable is idempotent, so
    it too is sent again until acknowledged."""
    table = f"table-{player.name}"
    config = table_config_message()
    # No gRPC retries: the drill retries by itself, and counts.
    with GnauClient(service.target, token=service.token, retry=None) as client:

        def put() -> dealer_pb2.Table:
            return client.put_table(table, config, timeout=CALL_SECONDS)

        try:  # its retries, if any, are not counted as the player's: those are its steps'
            _until_acknowledged(Player(player.name), put, stop)
        except grpc.RpcError as error:
            player.failures.append(f"PutTable: {error.code().name}: {error.details()}")
            return
        while not stop.is_set():
            try:
                round_id, step = "", "Shuffle"
                for step in STEP_ENTRY:
                    request_id = str(uuid.uuid4())
                    sent = time.monotonic()
                    call = _step_call(client, step, table, round_id, request_id)
                    round_ = _until_acknowledged(player, call, stop)
                    round_id = round_.round_id
                    player.acks.append(Ack(round_id, step, sent, time.monotonic()))
            except grpc.RpcError as error:
                player.failures.append(f"{step}: {error.code().name}: {error.details()}")
                return


def start_players(
    services: list[Served], names: list[str], stop: threading.Event
) -> tuple[list[Player], list[threading.Thread]]:
    """A player on each service, each on a thread of its own, started: they play until
    ``stop``."""
    players = [Player(name) for name in names]
    threads = [
        threading.Thread(target=play, args=(service, player, stop))
        for service, player in zip(services, players, strict=True)
    ]
    for thread in threads:
        thread.start()
    return players, threads


def _step_call(
    client: GnauClient, step: str, table: str, round_id: str, request_id: str
) -> Callable[[], round_pb2.Round]:
    timeout = CALL_SECONDS
    if step == "Shuffle":
        return lambda: client.shuffle(table, request_id=request_id, timeout=timeout)
    if step == "Deal":
        return lambda: client.deal(round_id, SEATS, request_id=request_id, timeout=timeout)
    if step == "Reveal":
        return lambda: client.reveal(round_id, request_id=request_id, timeout=timeout)
    return lambda: client.settle(round_id, request_id=request_id, timeout=timeout)


@dataclass
class Checkpoints:
    """Every distinct checkpoint the replicas handed out, with when it was received."""

    seen: dict[str, float] = field(default_factory=dict)

    def before(self, moment: float) -> list[str]:
        return [note for note, when in self.seen.items() if when < moment]


def watch_checkpoints(
    services: list[Served], checkpoints: Checkpoints, stop: threading.Event
) -> None:
    with ExitStack() as stack:
        clients = [
            stack.enter_context(GnauClient(s.target, token=s.token, retry=None)) for s in services
        ]
        while not stop.wait(CHECKPOINT_PAUSE):
            for client in clients:
                try:
                    note = client.get_checkpoint(timeout=CALL_SECONDS)
                except grpc.RpcError:
                    continue  # refused during the outage: the players count that
                checkpoints.seen.setdefault(note, time.monotonic())


@dataclass(frozen=True)
class Outcome:
    """The drill's figures and findings."""

    players: list[Player]
    started: float  # the load
    killed: float
    promoted: float
    recovered: list[float]  # per player: kill to its first acknowledged step sent after it
    acknowledged_steps: int
    lost: list[str]  # acknowledged steps whose entry is not in the log
    log_size: int
    rounds_settled_in_log: int
    rounds_open_in_log: int
    verify_output: str
    verify_status: int
    checkpoints_checked: list[int]  # their sizes
    checkpoint_failures: list[str]
    replica_output: list[str]

    @property
    def promote_seconds(self) -> float:
        return self.promoted - self.killed

    @property
    def recovery_seconds(self) -> float:
        """Kill to the moment every replica had rounds flowing again."""
        return max(self.recovered)


@contextmanager
def replicas(pair: Pair, work: Path) -> Iterator[list[Served]]:
    """Two ``gnau serve`` on the pair's multi-host URL: one log, one key, one token file."""
    with served(work / "replica-a", "--database", pair.url) as first:
        key = first.data_dir / "log-signing-key.pem"
        tokens = first.data_dir / "tokens.json"
        with served(
            work / "replica-b", "--database", pair.url, "--key", str(key), "--tokens", str(tokens)
        ) as second:
            second.token = first.token
            yield [first, second]


def run_drill(
    work: Path,
    *,
    warm_up_seconds: float = 3.0,
    after_seconds: float = 3.0,
    promote_delay: float = 0.0,
) -> Outcome:
    """Load, kill the primary, promote the standby, load again; then check the log."""
    with replicated_pair() as pair:
        with replicas(pair, work) as services:
            vkey = services[0].vkey
            stop = threading.Event()
            checkpoints = Checkpoints()
            watcher = threading.Thread(target=watch_checkpoints, args=(services, checkpoints, stop))
            started = time.monotonic()
            players, threads = start_players(services, ["a", "b"], stop)
            watcher.start()
            threads.append(watcher)
            try:
                time.sleep(warm_up_seconds)
                pair.primary.kill()
                # After the kill returns: a step sent while it ran may have reached the primary.
                killed = time.monotonic()
                time.sleep(promote_delay)
                pair.standby.promote()
                promoted = time.monotonic()
                _wait_for_recovery(players, killed)
                time.sleep(after_seconds)
            finally:
                stop.set()
                for thread in threads:
                    thread.join(timeout=GIVE_UP_SECONDS + 30)
        # All of each replica's log (``Served.output`` keeps only its end).
        replica_output = [
            service.stderr_path.read_text(encoding="utf-8", errors="replace")
            for service in services
        ]
        recovered = [
            (player.first_ack_sent_after(killed) or float("inf")) - killed for player in players
        ]
        return _check(
            pair,
            work,
            vkey=vkey,
            players=players,
            checkpoints=checkpoints.before(killed),
            moments=(started, killed, promoted),
            recovered=recovered,
            replica_output=replica_output,
        )


def _wait_for_recovery(players: list[Player], killed: float) -> None:
    deadline = time.monotonic() + GIVE_UP_SECONDS
    while time.monotonic() < deadline:
        if all(player.first_ack_sent_after(killed) is not None for player in players):
            return
        if all(player.failures for player in players):
            return
        time.sleep(0.05)


def _check(
    pair: Pair,
    work: Path,
    *,
    vkey: str,
    players: list[Player],
    checkpoints: list[str],
    moments: tuple[float, float, float],
    recovered: list[float],
    replica_output: list[str],
) -> Outcome:
    verifier = Verifier.from_vkey(vkey)
    # The new primary alone: the old one is gone for good.
    url = pair.standby.url()
    with open_reader(url) as reader:
        size = reader.size()
        written = {
            (entry.round_id, entry.kind)
            for entry in (decode_entry(data, verifier) for data in reader.iter_entries(0, size))
        }
        bundle_text = io.StringIO()
        write_bundle(reader, bundle_text, end=size)
    acks = [ack for player in players for ack in player.acks]
    lost = [
        f"{ack.round_id} {ack.step}"
        for ack in acks
        if (ack.round_id, STEP_ENTRY[ack.step]) not in written
    ]
    report = verify_bundle(io.BytesIO(bundle_text.getvalue().encode()), pinned_keys=[verifier])
    # The operator's path too: export with the command line, verify with the public key alone.
    bundle = work / "after-failover.bundle"
    exported = gnau("audit", "export", "--database", url, "--out", str(bundle))
    assert exported.returncode == 0, exported.stdout + exported.stderr
    verified = gnau("audit", "verify", str(bundle), "--key", vkey, "--jobs", "1")
    checked, failures = _check_checkpoints(work, bundle, vkey, checkpoints)
    started, killed, promoted = moments
    return Outcome(
        players=players,
        started=started,
        killed=killed,
        promoted=promoted,
        recovered=recovered,
        acknowledged_steps=len(acks),
        lost=lost,
        log_size=size,
        rounds_settled_in_log=report.rounds_settled if report.ok else -1,
        rounds_open_in_log=report.rounds_open if report.ok else -1,
        verify_output=verified.stdout + verified.stderr,
        verify_status=verified.returncode,
        checkpoints_checked=checked,
        checkpoint_failures=failures,
        replica_output=replica_output,
    )


def _check_checkpoints(
    work: Path, bundle: Path, vkey: str, checkpoints: list[str], most: int = 4
) -> tuple[list[int], list[str]]:
    """The bundle, verified against checkpoints seen before the kill: the last one (the log as
    it was when the primary died), the first, and evenly between; each one a consistency proof
    from that tree to the final one."""
    by_size = sorted({checkpoint_size(note): note for note in checkpoints}.items())
    if len(by_size) > most:
        step = (len(by_size) - 1) / (most - 1)
        by_size = [by_size[round(i * step)] for i in range(most)]
    failures = []
    for size, note in by_size:
        pinned = work / f"checkpoint-{size}.txt"
        pinned.write_text(note, encoding="utf-8")
        done = gnau(
            "audit", "verify", str(bundle), "--key", vkey, "--checkpoint", str(pinned),
            "--jobs", "1",
        )  # fmt: skip
        if done.returncode != 0:
            failures.append(f"size {size}: {done.stdout}{done.stderr}")
    return [size for size, _ in by_size], failures
