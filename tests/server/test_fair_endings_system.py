"""Rounds always end fairly (issue 37), across real processes: ``gnau serve --workers 2`` on
SQLite, and two ``gnau serve`` replicas on one PostgreSQL database.

- An operator voids dealt and revealed rounds over gRPC: every seat is paid the better of its
  result and a refund.
- Rounds abandoned in every open state expire under load while workers and replicas are killed
  with SIGKILL: each is completed once, by the service, within its deadline plus the slack.
- The platform's ``Settle`` races the service's completion at the settle deadline from another
  process: it answers the one settlement there is.

Expected payouts come from the independent rules (tests/independent/rules.py), from the hands
the platform was dealt and the rules the round committed to, never from the service's code.
The lateness of the service's completions is printed (run with ``-s``) and recorded as the
tests' ``record_property``.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import grpc
import pytest
from gnau.v1 import round_pb2, types_pb2
from gnau_client import GnauClient, Seat
from google.protobuf.timestamp_pb2 import Timestamp
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from gnau_service.audit.entries import LogEntry
from tests.failover_drill import start_players
from tests.frozen_leader import lease
from tests.independent.rules import settle as independent_settle
from tests.independent.test_live_rounds import APPROVED, EVERY_RULE, PUSH
from tests.log_checks import verified_log
from tests.postgres import fresh_database
from tests.server.test_workers import PATIENCE_SECONDS, until
from tests.serving import Served, served, worker_pids

# make test-system: worker and replica processes, killed and restarted, on real timers.
pytestmark = pytest.mark.system

BACKENDS: Final = ["sqlite-workers", "postgresql-replicas"]
#: The token a first start makes (docs/configuration.md), as the log names its holder.
OPERATOR: Final = "token:local-operator"
SEATS: Final = [Seat(seat_number=n, player_id=f"player-{n}", stake=10 * n) for n in range(1, 7)]
#: House rules the rounds cycle through: the defaults, and two that change how hands rank, tie
#: and pay. Every table of the tests approves these three (APPROVED: the same rule sets).
RULES: Final = [types_pb2.HouseRules(), PUSH, EVERY_RULE]
OPERATOR_CODES: Final = [
    round_pb2.VOID_REASON_PLATFORM_FAILURE,
    round_pb2.VOID_REASON_STAKE_REJECTED,
    round_pb2.VOID_REASON_GAME_MALFUNCTION,
    round_pb2.VOID_REASON_TABLE_CLOSED,
    round_pb2.VOID_REASON_REGULATOR_ORDER,
]
#: The shortest deadlines the settings allow (docs/configuration.md), so rounds expire within
#: the test; the settle deadline a second longer, so an abandoned DEALT round is not due with
#: the SHUFFLED ones of its wave.
DEAL_DEADLINE: Final = 1
SETTLE_DEADLINE: Final = 2
DEADLINE_FLAGS: Final = (
    "--deal-deadline", str(DEAL_DEADLINE), "--settle-deadline", str(SETTLE_DEADLINE),
)  # fmt: skip
#: docs/api.md, Deadlines: every process looks for due rounds every second.
SWEEP_SECONDS: Final = 1.0
#: The slack on top of the sweep interval that the test allows a completion (docs/api.md: "one
#: step", plus the stall): the steps of the other rounds due in the same sweep (one process
#: completes its due rounds one after another), a sweep of a process killed half-way redone by
#: another, on a machine of two cores running the service's processes, the database and the
#: test.
STEP_SLACK_SECONDS: Final = 2.0
CALL_SECONDS: Final = 10.0


# -- the deployments ------------------------------------------------------------------------------


@dataclass
class Deployment:
    """The processes of one backend: ``gnau serve --workers 2`` on SQLite (one port, two worker
    processes behind it), or two ``gnau serve`` replicas on one PostgreSQL database (a port
    each). A call made with a fresh client (its own connection) may reach any worker.

    The PostgreSQL replica that :meth:`kill_one` kills (the second of :attr:`processes`) is
    started first, so it holds the log's sequencer lease when it is first killed: that kill
    stalls the log until the other replica takes the lease over."""

    backend: str
    url: str
    work: Path
    stack: ExitStack
    flags: tuple[str, ...]
    processes: list[Served] = field(default_factory=list)
    #: What each kill killed: "worker", "sequencer" or "replica".
    killed: list[str] = field(default_factory=list)

    def stop(self) -> None:
        """Stop every process (SIGTERM; each must exit 0, or as the test killed it)."""
        self.stack.close()

    @property
    def token(self) -> str:
        return self.processes[0].token

    @property
    def vkey(self) -> str:
        return self.processes[0].vkey

    def target(self, n: int) -> str:
        """The ``n``-th process's port (SQLite: the workers' one port)."""
        return self.processes[n % len(self.processes)].target

    def other_target(self, n: int) -> str:
        """A port of another process than :meth:`target`'s (SQLite: the one port, where a new
        connection reaches either worker)."""
        return self.target(n + 1)

    def client(self, n: int) -> GnauClient:
        return GnauClient(self.target(n), token=self.token, timeout=CALL_SECONDS)

    def call(self, n: int, method: str, *args: Any, **kwargs: Any) -> Any:
        """The client's ``method`` on a fresh client of the ``n``-th process, sent again on a
        new connection while it is UNAVAILABLE (a connection to a worker killed meanwhile), as
        a platform would: with the same ``request_id``, so the service acts once."""
        deadline = time.monotonic() + PATIENCE_SECONDS
        while True:
            with self.client(n) as client:
                try:
                    return getattr(client, method)(*args, **kwargs)
                except grpc.RpcError as error:
                    if error.code() != grpc.StatusCode.UNAVAILABLE:
                        raise
                    assert time.monotonic() < deadline, f"unavailable for too long: {error}"
            time.sleep(0.1)

    def catalogue(self, tables: list[str]) -> None:
        """Put ``tables`` in the operator's catalogue (issue 38: a round is dealt only at a
        catalogued table), each approving :data:`RULES` with any stake and seat count, through
        the first process (never killed)."""
        self.processes[0].put_tables(tables, *APPROVED)

    def kill_one(self, chooser: random.Random) -> None:
        """SIGKILL a worker (its supervisor starts another) or the second replica (started
        again here, on a new port)."""
        if self.backend == "sqlite-workers":
            supervisor = self.processes[0].process.pid
            until(lambda: len(worker_pids(supervisor)) == 2, "two workers running")
            os.kill(chooser.choice(worker_pids(supervisor)), signal.SIGKILL)
            self.killed.append("worker")
            return
        victim = self.processes[1]
        leading = lease(self.url)[1] == victim.process.pid
        victim.process.kill()
        victim.expected_status = victim.process.wait(timeout=10)
        assert victim.expected_status == -signal.SIGKILL
        self.killed.append("sequencer" if leading else "replica")
        self.processes[1] = self.start_replica(f"replica-b{len(self.killed)}")

    def start_replica(self, name: str) -> Served:
        """Another PostgreSQL replica, in data directory ``name``, with the key, the token file
        and the operator's token of the first replica started (``replica-b``)."""
        first = self.work / "replica-b"
        started = self.stack.enter_context(
            served(
                self.work / name,
                "--database", self.url,
                "--key", str(first / "log-signing-key.pem"),
                "--tokens", str(first / "tokens.json"),
                *self.flags,
            )
        )  # fmt: skip
        started.token = (first / "operator-token").read_text(encoding="utf-8").strip()
        return started


@contextmanager
def deployment(backend: str, work: Path, *flags: str) -> Iterator[Deployment]:
    """The backend's processes with ``flags``. :meth:`Deployment.stop` (or the exit) stops them
    (SIGTERM, exit 0 unless the test killed them); the database lasts until the exit."""
    with ExitStack() as database:
        if backend == "sqlite-workers":
            url = f"sqlite:///{work / 'data' / 'gnau.db'}"
        else:
            url = database.enter_context(fresh_database())
        with ExitStack() as stack:
            deployed = Deployment(backend, url, work, stack, flags)
            if backend == "sqlite-workers":
                deployed.processes.append(
                    stack.enter_context(served(work / "data", "--workers", "2", *flags))
                )
            else:
                # The first start makes the key, the token file and the operator's token.
                victim = stack.enter_context(served(work / "replica-b", "--database", url, *flags))
                deployed.processes += [deployed.start_replica("replica-a"), victim]
            yield deployed


# -- what the log says, and what the rules say it should ------------------------------------------


def by_round(entries: list[LogEntry]) -> dict[str, list[LogEntry]]:
    rounds: dict[str, list[LogEntry]] = {}
    for entry in entries:
        if entry.round_id is not None:
            rounds.setdefault(entry.round_id, []).append(entry)
    return rounds


def kinds(entries: list[LogEntry]) -> list[str]:
    return [str(entry.kind) for entry in entries]


def payload(entries: list[LogEntry], kind: str) -> dict[str, Any]:
    (found,) = [entry.payload for entry in entries if str(entry.kind) == kind]
    return dict(found)


def fair_settlement(entries: list[LogEntry], dealt: round_pb2.Round) -> dict[str, Any]:
    """The round's settlement by the independent rules: the hands the platform was dealt
    (``dealt``, the Deal's answer), the stakes it sent, the rules the round committed to in the
    log."""
    rules = payload(entries, "ROUND_COMMITTED")["house_rules"]
    hands = {hand.seat_number: list(hand.cards) for hand in dealt.hands}
    logged = payload(entries, "ROUND_DEALT")
    assert {hand["seat_number"]: hand["cards"] for hand in logged["hands"]} == hands
    assert logged["dealer_hand"] == list(dealt.dealer_hand)
    seats = [{"seat_number": seat.seat_number, "stake": seat.stake} for seat in SEATS]
    return independent_settle(rules, seats, hands, list(dealt.dealer_hand))


def fair_results(entries: list[LogEntry], dealt: round_pb2.Round) -> dict[int, int]:
    """Each seat's result against the dealer, by :func:`fair_settlement`."""
    return logged_deltas(fair_settlement(entries, dealt))


def deltas(settlement: round_pb2.Settlement) -> dict[int, int]:
    return {seat.seat_number: seat.delta for seat in settlement.seat_results}


def logged_deltas(settled: dict[str, Any]) -> dict[int, int]:
    """The seat deltas of a settlement in the log's form: a ROUND_SETTLED payload, a void's
    ``result``, or :func:`fair_settlement`."""
    return {player["seat"]: player["delta"] for player in settled["players"]}


def refusal_of(error: grpc.RpcError) -> tuple[grpc.StatusCode, str, str]:
    """A refusal's code, its ErrorInfo reason and the state that info names."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    reason, state = "", ""
    for detail in status.details if status is not None else []:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reason, state = info.reason, info.metadata.get("state", "")
    return error.code(), reason, state


def listed_by_service(deployed: Deployment, since: datetime) -> list[round_pb2.Round]:
    """Every round ListRounds says the service completed at ``since`` or later, page by page."""
    found: list[round_pb2.Round] = []
    token = ""
    while True:
        page = deployed.call(
            0, "list_rounds",
            page_size=10, page_token=token, completed_by="service", completed_since=since,
        )  # fmt: skip
        found += page.rounds
        token = page.next_page_token
        if not token:
            return found


def seconds(timestamp: Timestamp) -> float:
    return timestamp.seconds + timestamp.nanos / 1e9


def lateness_figures(late: list[float]) -> str:
    if not late:
        return "no rounds"
    return f"max {max(late):.3f} s, median {statistics.median(late):.3f} s over {len(late)} rounds"


# -- 1. an operator voids dealt and revealed rounds -----------------------------------------------

VOIDED_ROUNDS: Final = 12


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_operator_voids_dealt_and_revealed_rounds_paying_each_seat_the_better_of(
    backend: str, tmp_path: Path
) -> None:
    """Each step of a round from another process than the one before; half the rounds are
    revealed before the void. Every void pays each seat max(result, 0), the answer and the log
    alike; the log verifies."""
    dealt: dict[str, round_pb2.Round] = {}
    voided: dict[str, round_pb2.Round] = {}
    tables = [f"void-{n}" for n in range(VOIDED_ROUNDS)]
    with deployment(backend, tmp_path, *DEADLINE_FLAGS) as deployed:
        deployed.catalogue(tables)
        for n, table in enumerate(tables):
            with deployed.client(n) as client:
                round_id = client.shuffle(table, RULES[n % len(RULES)]).round_id
            with deployed.client(n + 1) as client:
                dealt[round_id] = client.deal(round_id, SEATS)
            if n % 2:
                with deployed.client(n) as client:
                    client.reveal(round_id)
            with deployed.client(n + 1) as client:
                code = OPERATOR_CODES[n % len(OPERATOR_CODES)]
                voided[round_id] = client.void_round(round_id, code, f"test void {n}")
        for n, round_id in enumerate(voided):
            with deployed.client(n) as client:
                assert client.get_round(round_id) == voided[round_id], "another process differs"
        deployed.stop()
        log = verified_log(deployed.url, tmp_path, deployed.vkey)
    assert log.report.rounds_voided == VOIDED_ROUNDS and log.report.rounds_open == 0
    rounds = by_round(log.entries)
    results: list[int] = []
    for n, (round_id, answer) in enumerate(voided.items()):
        entries = rounds[round_id]
        assert kinds(entries) == [
            "ROUND_COMMITTED", "ROUND_DEALT", "ROUND_REVEALED", "ROUND_VOIDED",
        ]  # fmt: skip
        fair = fair_settlement(entries, dealt[round_id])
        result = logged_deltas(fair)
        results += result.values()
        paid = {seat: max(delta, 0) for seat, delta in result.items()}
        assert answer.state == round_pb2.ROUND_STATE_VOIDED
        assert answer.void_reason_code == OPERATOR_CODES[n % len(OPERATOR_CODES)]
        assert answer.completed_by == OPERATOR and not answer.HasField("settlement")
        assert answer.server_seed and len(answer.deck) >= 52  # the void revealed the round
        assert deltas(answer.void_settlement) == paid
        assert answer.void_settlement.dealer_delta == -sum(paid.values())
        # Each seat's outcome is its result's, though a lost stake is refunded.
        outcomes = [round_pb2.Outcome.Name(s.outcome) for s in answer.void_settlement.seat_results]
        assert outcomes == [f"OUTCOME_{player['outcome']}" for player in fair["players"]]
        void = payload(entries, "ROUND_VOIDED")
        assert void["actor"] == OPERATOR and void["state"] == ("REVEALED" if n % 2 else "DEALT")
        assert logged_deltas(void["result"]) == result
        assert void["paid"] == {
            "dealer_delta": -sum(paid.values()),
            "players": [
                {"seat": seat.seat_number, "stake": seat.stake, "delta": paid[seat.seat_number]}
                for seat in SEATS
            ],
        }
    # The rounds held both wins and losses: the better-of was put to the test.
    assert min(results) < 0 < max(results), results


# -- 2. rounds expire under load while processes are killed ---------------------------------------

#: Rounds abandoned in each open state per wave, and the waves (a kill after each but the last).
ABANDONED_PER_STATE: Final = 4
WAVES: Final = 3
WAVE_SECONDS: Final = 1.2


@dataclass(frozen=True)
class Abandoned:
    """A round the platform left open: the state it left it in, and its deadline then."""

    state: str
    due: float  # seconds since the epoch
    dealt: round_pb2.Round | None


ABANDONED_STATES: Final = ("SHUFFLED", "DEALT", "REVEALED")


def abandoned_table(wave: int, state: str, n: int) -> str:
    return f"abandoned-{wave}-{state.lower()}-{n}"


def abandon_wave(deployed: Deployment, wave: int) -> dict[str, Abandoned]:
    """Rounds left SHUFFLED, DEALT and REVEALED, each step through another process."""
    left: dict[str, Abandoned] = {}
    for state in ABANDONED_STATES:
        for n in range(ABANDONED_PER_STATE):
            table = abandoned_table(wave, state, n)
            rules = RULES[n % len(RULES)]
            shuffle_id, deal_id, reveal_id = (str(uuid.uuid4()) for _ in range(3))
            shuffled = deployed.call(n, "shuffle", table, rules, request_id=shuffle_id)
            round_id = shuffled.round_id
            if state == "SHUFFLED":
                left[round_id] = Abandoned(state, seconds(shuffled.due_time), None)
                continue
            dealt = deployed.call(n + 1, "deal", round_id, SEATS, request_id=deal_id)
            if state == "REVEALED":
                revealed = deployed.call(n, "reveal", round_id, request_id=reveal_id)
                assert revealed.due_time == dealt.due_time  # a reveal keeps the deadline
            left[round_id] = Abandoned(state, seconds(dealt.due_time), dealt)
    return left


@pytest.mark.parametrize("backend", BACKENDS)
def test_abandoned_rounds_expire_under_load_while_processes_are_killed(
    backend: str, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    chooser = random.Random(os.environ.get("GNAU_KILL_SEED", "37"))
    abandoned: dict[str, Abandoned] = {}
    with deployment(backend, tmp_path, *DEADLINE_FLAGS) as deployed:
        deployed.catalogue(
            [
                abandoned_table(wave, state, n)
                for wave in range(WAVES)
                for state in ABANDONED_STATES
                for n in range(ABANDONED_PER_STATE)
            ]
        )
        # The players play whole rounds on a process never killed: SQLite's port (a killed
        # worker's calls are retried on the other), PostgreSQL's first replica.
        started = datetime.now(UTC)
        stop = threading.Event()
        players, threads = start_players([deployed.processes[0]] * 2, ["a", "b"], stop)
        try:
            for wave in range(WAVES):
                began = time.monotonic()
                abandoned |= abandon_wave(deployed, wave)
                if wave < WAVES - 1:
                    # Killed while the earlier waves' rounds come due and are being completed.
                    time.sleep(max(0.0, began + WAVE_SECONDS - time.monotonic()))
                    deployed.kill_one(chooser)

            def all_final() -> bool:
                return all(
                    deployed.call(0, "get_round", round_id).state
                    in (round_pb2.ROUND_STATE_SETTLED, round_pb2.ROUND_STATE_VOIDED)
                    for round_id in abandoned
                )

            until(all_final, "every abandoned round completed")
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=60)
        listed = listed_by_service(deployed, started)
        final = {r: deployed.call(1, "get_round", r) for r in abandoned}
        deployed.stop()
        for player in players:
            assert not player.failures, player.failures
        log = verified_log(deployed.url, tmp_path, deployed.vkey, players)
    assert sum(player.rounds_settled() for player in players) > 0
    assert len(deployed.killed) == WAVES - 1
    if backend == "postgresql-replicas":
        assert "sequencer" in deployed.killed, "the log's sequencer was never killed"
    # Exactly the abandoned rounds were completed by the service: none the players played.
    assert sorted(r.round_id for r in listed) == sorted(abandoned)
    assert log.report.rounds_open == 0
    rounds = by_round(log.entries)
    for round_id, round_entries in rounds.items():
        endings = kinds(round_entries).count("ROUND_SETTLED") + kinds(round_entries).count(
            "ROUND_VOIDED"
        )
        assert endings == 1, (round_id, kinds(round_entries))

    late = []
    for round_id, left in abandoned.items():
        completed = final[round_id]
        entries = rounds[round_id]
        assert completed.completed_by == "service" and not completed.HasField("due_time")
        assert entries[-1].payload["actor"] == "service"
        lateness = seconds(completed.complete_time) - left.due
        assert 0 <= lateness <= SWEEP_SECONDS + STEP_SLACK_SECONDS, (round_id, lateness)
        late.append(lateness)
        if left.state == "SHUFFLED":
            assert completed.state == round_pb2.ROUND_STATE_VOIDED
            assert completed.void_reason_code == round_pb2.VOID_REASON_DEAL_DEADLINE_PASSED
            assert kinds(entries) == ["ROUND_COMMITTED", "ROUND_VOIDED"]
            continue
        assert left.dealt is not None
        assert completed.state == round_pb2.ROUND_STATE_SETTLED
        assert kinds(entries) == [
            "ROUND_COMMITTED", "ROUND_DEALT", "ROUND_REVEALED", "ROUND_SETTLED",
        ]  # fmt: skip
        result = fair_results(entries, left.dealt)
        assert deltas(completed.settlement) == result
        assert logged_deltas(payload(entries, "ROUND_SETTLED")) == result
    figures = lateness_figures(late)
    record_property("lateness_max_seconds", round(max(late), 3))
    record_property("lateness_median_seconds", round(statistics.median(late), 3))
    print(
        f"\n{backend}: deal deadline {DEAL_DEADLINE} s, settle deadline {SETTLE_DEADLINE} s,"
        f" sweep {SWEEP_SECONDS} s, killed {deployed.killed}; completed past the deadline by"
        f" {figures}"
    )


# -- 3. Settle races the service's completion ---------------------------------------------------

RACED_ROUNDS: Final = 16
#: The platform's Settle of each round is sent at its deadline plus an offset, spread evenly
#: over this window: from before the deadline to past the sweep after it.
RACE_WINDOW: Final = (-0.3, SWEEP_SECONDS + 0.3)


@dataclass
class Raced:
    dealt: round_pb2.Round
    due: float
    answers: list[round_pb2.Round | tuple[grpc.StatusCode, str, str]] = field(default_factory=list)
    #: The platform's VoidRound after its Settle: refused, the round being settled.
    void: round_pb2.Round | tuple[grpc.StatusCode, str, str] | None = None


@pytest.mark.parametrize("backend", BACKENDS)
def test_settle_racing_the_services_completion_answers_the_one_settlement(
    backend: str, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    raced: dict[str, Raced] = {}
    tables = [f"raced-{n}" for n in range(RACED_ROUNDS)]
    with deployment(backend, tmp_path, *DEADLINE_FLAGS) as deployed:
        deployed.catalogue(tables)
        with deployed.client(0) as client:
            for n, table in enumerate(tables):
                round_id = client.shuffle(table, RULES[n % len(RULES)]).round_id
                dealt = client.deal(round_id, SEATS)
                client.reveal(round_id)
                raced[round_id] = Raced(dealt, seconds(dealt.due_time))
        low, high = RACE_WINDOW

        def settle(n: int, round_id: str) -> None:
            race = raced[round_id]
            offset = low + (high - low) * n / (RACED_ROUNDS - 1)
            time.sleep(max(0.0, race.due + offset - time.time()))
            request_id = str(uuid.uuid4())
            # The platform's Settle, then its retry with the same request id: from another
            # process than the one that dealt the round.
            with GnauClient(
                deployed.other_target(0), token=deployed.token, timeout=CALL_SECONDS
            ) as platform:
                for _ in range(2):
                    try:
                        race.answers.append(platform.settle(round_id, request_id=request_id))
                    except grpc.RpcError as error:
                        race.answers.append(refusal_of(error))
                code = round_pb2.VOID_REASON_PLATFORM_FAILURE
                try:
                    race.void = platform.void_round(round_id, code, "after the settle")
                except grpc.RpcError as error:
                    race.void = refusal_of(error)

        with ThreadPoolExecutor(RACED_ROUNDS) as pool:
            list(pool.map(settle, range(RACED_ROUNDS), raced))
        deployed.stop()
        log = verified_log(deployed.url, tmp_path, deployed.vkey)
    assert log.report.rounds_open == 0
    rounds = by_round(log.entries)
    winners: dict[str, int] = {}
    late: list[float] = []
    for round_id, race in raced.items():
        entries = rounds[round_id]
        # Never two settlements, nor two reveals.
        assert kinds(entries) == [
            "ROUND_COMMITTED", "ROUND_DEALT", "ROUND_REVEALED", "ROUND_SETTLED",
        ]  # fmt: skip
        settled = payload(entries, "ROUND_SETTLED")
        result = fair_results(entries, race.dealt)
        assert logged_deltas(settled) == result
        settled_by = settled["actor"]
        assert settled_by in ("service", OPERATOR)
        winners[settled_by] = winners.get(settled_by, 0) + 1
        first, retried = race.answers
        # Whoever settled it, the platform's Settle answers the settlement in the log
        # (docs/api.md, Deadlines), and its retry the same.
        assert isinstance(first, round_pb2.Round), (round_id, settled_by, first)
        assert first.state == round_pb2.ROUND_STATE_SETTLED
        assert first.completed_by == settled_by
        assert deltas(first.settlement) == result
        assert first.settlement.dealer_delta == settled["dealer"]["delta"]
        assert retried == first
        assert race.void == (grpc.StatusCode.FAILED_PRECONDITION, "ROUND_STATE", "SETTLED")
        if settled_by == "service":
            lateness = seconds(first.complete_time) - race.due
            assert 0 <= lateness <= SWEEP_SECONDS + STEP_SLACK_SECONDS, (round_id, lateness)
            late.append(lateness)
    record_property("lateness_max_seconds", round(max(late, default=0.0), 3))
    print(
        f"\n{backend}: {RACED_ROUNDS} Settles raced the service; settled by {winners};"
        f" the service's past the deadline by {lateness_figures(late)}"
    )
    # The offsets put the Settles on both sides of the service's completions.
    assert set(winners) == {"service", OPERATOR}, winners
