"""Prometheus metrics of one service, in its own registry, served at ``/metrics``.

Every metric is listed, with its labels, meaning and suggested alerts, in
``docs/operations.md`` (monitoring). They come from four places:

- the call interceptor, through :class:`~gnau_service.server.grpc.call_observer.CallObserver`: every
  call, refusals included, under go-grpc-prometheus's names and labels (``grpc_server_*``), and each
  refusal by its ErrorInfo reason;
- the store, through its batch observer (:mod:`~gnau_service.store.batches`): batch sizes,
  commit latency, the time in COMMIT, the entries appended and so the rounds' transitions;
- reads made when ``/metrics`` is scraped (:mod:`~gnau_service.store.gauges`): the log's size,
  its checkpoint's age and the open rounds, from the database, so every replica agrees;
- the service's parts: streams open, an outage of the store, whether it is serving;
- the witnesses (:mod:`~gnau_service.server.process.witnessing`): how far each lags behind the
log, how its submissions ended, and how its clock stands from this service's. A witness appears
  by its key name (one series per ``--witness``).
The registry is the service's own, never prometheus_client's global one, so that several
services in one process (tests, benchmarks) count apart. No label holds a round id, a token, a
seed or a password; ``table_id`` (chosen by operators) appears only on the open-round gauges,
for at most :data:`MAX_TABLE_SERIES` tables at a time, and ``operator`` only on the
per-operator round counter, for at most
:data:`~gnau_service.server.process.operator_labels.MAX_OPERATOR_SERIES` operators.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Final

import grpc
import structlog
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gnau_service.audit.clock_drift import Drift
from gnau_service.audit.entries import EntryKind
from gnau_service.audit.timestamps import format_utc_timestamp, parse_utc_timestamp
from gnau_service.edge.http import EdgeServer
from gnau_service.rounds.planning import PlanCounts
from gnau_service.server.grpc.auth import Credentials
from gnau_service.server.grpc.call_observer import CallName, CallWatch, Context
from gnau_service.server.grpc.interceptors import current_operator
from gnau_service.server.process.operator_labels import OperatorLabels
from gnau_service.server.process.witnessing import Submission, WitnessStatus
from gnau_service.store import LogReader, Store, StoreError
from gnau_service.store.batches import CommittedBatch
from gnau_service.store.gauges import (
    log_gauges,
    longest_open_rounds,
    open_rounds_by_state,
    overdue_rounds,
)

#: At most this many tables appear by name on the open-round gauges: those whose open round has
#: waited longest. ``gnau_rounds_open`` counts every table's.
MAX_TABLE_SERIES: Final = 100
#: A round open this long past its deadline counts on ``gnau_rounds_overdue``: well beyond the
#: completion's slack (a sweep interval and one step), short of a page's patience.
OVERDUE_SECONDS: Final = 30.0
#: The round state each round entry moves its round into.
TRANSITIONS: Final = {
    EntryKind.ROUND_COMMITTED: "SHUFFLED",
    EntryKind.ROUND_DEALT: "DEALT",
    EntryKind.ROUND_REVEALED: "REVEALED",
    EntryKind.ROUND_SETTLED: "SETTLED",
    EntryKind.ROUND_VOIDED: "VOIDED",
}
#: The state each DealerService method answered OK moves its round into, for the per-operator
#: counter (the service's own completions are no operator's call).
CALL_TRANSITIONS: Final = {
    "Shuffle": "SHUFFLED",
    "Deal": "DEALT",
    "Reveal": "REVEALED",
    "Settle": "SETTLED",
    "VoidRound": "VOIDED",
}
DEALER_SERVICE: Final = "gnau.v1.DealerService"

#: Seconds: from well under a millisecond (a read from memory) to a long stream.
RPC_BUCKETS: Final = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0,
)  # fmt: skip
COMMIT_BUCKETS: Final = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
)  # fmt: skip
#: Units of work per batch: powers of two up to the store's largest batch (512).
BATCH_BUCKETS: Final = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)

_CALL_LABELS: Final = ("grpc_type", "grpc_service", "grpc_method")

log = structlog.get_logger("gnau.metrics")


class Metrics:
    """The service's metrics: a call observer, a store batch observer, and the registry."""

    def __init__(
        self,
        store: LogReader,
        *,
        streams_open: Callable[[], int],
        streams_limit: int,
        storage_failing: Callable[[], bool],
        serving: Callable[[], bool],
        witnesses: Sequence[WitnessStatus] = (),
        log_size: Callable[[], int] = lambda: 0,
        log_stalled: Callable[[], bool] = lambda: False,
        credentials: Callable[[], Credentials] | None = None,
        plans: PlanCounts | None = None,
        software_mismatch: Callable[[], bool] = lambda: False,
    ) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=True)
        self.started = Counter(
            "grpc_server_started",
            "RPCs started on the server.",
            _CALL_LABELS,
            registry=registry,
        )
        self.handled = Counter(
            "grpc_server_handled",
            "RPCs completed on the server, whatever their status code.",
            (*_CALL_LABELS, "grpc_code"),
            registry=registry,
        )
        self.handling = Histogram(
            "grpc_server_handling_seconds",
            "Seconds from an RPC's start to its end (a stream's whole life).",
            _CALL_LABELS,
            buckets=RPC_BUCKETS,
            registry=registry,
        )
        self.refusals = Counter(
            "gnau_refusals",
            "RPCs refused with a status and an ErrorInfo reason (auth, bad requests, state, "
            "limits, storage, shutdown).",
            ("grpc_service", "grpc_method", "grpc_code", "reason"),
            registry=registry,
        )
        self.transitions = Counter(
            "gnau_round_transitions",
            "Rounds that moved into a state, counted when the move is durable.",
            ("state",),
            registry=registry,
        )
        self.operator_transitions = Counter(
            "gnau_operator_round_transitions",
            "Rounds an operator's calls moved into a state: Shuffle, Deal, Reveal, Settle and "
            "VoidRound answered OK, by the caller's operator (at most 100, the rest as other).",
            ("operator", "state"),
            registry=registry,
        )
        self.operator_labels = OperatorLabels(credentials)
        self.entries = Counter(
            "gnau_log_entries_appended",
            "Audit log entries this process appended, by kind.",
            ("kind",),
            registry=registry,
        )
        self.batch_units = Histogram(
            "gnau_store_batch_units",
            "Units of work per committed batch (group commit).",
            buckets=BATCH_BUCKETS,
            registry=registry,
        )
        self.batch_seconds = Histogram(
            "gnau_store_batch_seconds",
            "Seconds per committed batch, from taking the write lock to the end of COMMIT.",
            buckets=COMMIT_BUCKETS,
            registry=registry,
        )
        self.commit_seconds = Histogram(
            "gnau_store_commit_seconds",
            "Seconds in COMMIT per batch: the database making it durable (fsync, WAL flush).",
            buckets=COMMIT_BUCKETS,
            registry=registry,
        )
        self.storage_errors = Counter(
            "gnau_storage_errors",
            "Calls refused UNAVAILABLE (STORAGE_UNAVAILABLE) because the store could not be used.",
            registry=registry,
        )
        # Each labelled child looked up once, not at every call (labels() takes a lock).
        self._per_kind = {
            kind: (self.entries.labels(str(kind)), _transition(self.transitions, kind))
            for kind in EntryKind
        }
        self._per_call: dict[CallName, _CallChildren] = {}
        Gauge(
            "gnau_storage_failing",
            "1 while the store cannot be used (an outage: health says NOT_SERVING), else 0.",
            registry=registry,
        ).set_function(lambda: float(storage_failing()))
        Gauge(
            "gnau_serving",
            "1 while the dealer's health is SERVING, 0 while NOT_SERVING (a store outage, or "
            "shutting down).",
            registry=registry,
        ).set_function(lambda: float(serving()))
        Gauge(
            "gnau_streams_open",
            "WatchEntries (and other server-streaming) calls open now.",
            registry=registry,
        ).set_function(lambda: float(streams_open()))
        Gauge(
            "gnau_streams_limit",
            "The most streams allowed open at once (--max-streams).",
            registry=registry,
        ).set(streams_limit)
        Gauge(
            "gnau_software_mismatch",
            "1 while the last software check found the installation not as its signed manifest "
            "lists it (or could not verify the manifest), else 0 (docs/software.md).",
            registry=registry,
        ).set_function(lambda: float(software_mismatch()))
        registry.register(_StoreGauges(store))
        if isinstance(store, Store):
            registry.register(_SequencerGauges(store, log_stalled))
        if plans is not None:
            registry.register(_PlanCounters(plans))
        self._http_ports: dict[str, EdgeServer] = {}
        registry.register(_HttpGauges(self._http_ports))
        if witnesses:
            registry.register(_WitnessGauges(witnesses, log_size))
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)

    def watch_http_port(self, port: str, edge: EdgeServer) -> None:
        """Report an HTTP port's connections and refusals (``page`` or ``metrics``)."""
        self._http_ports[port] = edge

    def exposition(self) -> bytes:
        """The text exposition of every metric (reads the database: call it off the loop)."""
        return generate_latest(self.registry)

    # -- calls (a CallObserver) -----------------------------------------------------------------

    def start(self, call: CallName, context: Context) -> CallWatch:
        children = self._per_call.get(call)
        if children is None:
            children = self._per_call[call] = _CallChildren(self, call)
        children.started.inc()
        return _CallTimer(children)

    # -- the store (a BatchObserver) and its health ---------------------------------------------

    def batch_committed(self, batch: CommittedBatch) -> None:
        self.batch_units.observe(batch.units)
        self.batch_seconds.observe(batch.seconds)
        self.commit_seconds.observe(batch.commit_seconds)
        for kind in batch.kinds:
            appended, moved = self._per_kind[kind]
            appended.inc()
            if moved is not None:
                moved.inc()

    def storage_failed(self) -> None:
        self.storage_errors.inc()


def _transition(transitions: Counter, kind: EntryKind) -> Counter | None:
    state = TRANSITIONS.get(kind)
    return None if state is None else transitions.labels(state)


class _CallChildren:
    """One method's labelled metrics, and its handled counters by code as they appear."""

    def __init__(self, metrics: Metrics, call: CallName) -> None:
        self.metrics = metrics
        self.call = call
        self.labels = (str(call.kind), call.service, call.method)
        self.started = metrics.started.labels(*self.labels)
        self.handling = metrics.handling.labels(*self.labels)
        self._handled: dict[grpc.StatusCode, Counter] = {}
        self.moves_to = (
            CALL_TRANSITIONS.get(call.method) if call.service == DEALER_SERVICE else None
        )
        self._moved: dict[str, Counter] = {}

    def handled(self, code: grpc.StatusCode) -> Counter:
        counter = self._handled.get(code)
        if counter is None:
            counter = self._handled[code] = self.metrics.handled.labels(*self.labels, code.name)
        return counter

    def moved(self, state: str) -> None:
        """Count a round this call moved into ``state``, under the caller's operator (the
        interceptor set it in this call's context before the handler ran)."""
        operator = self.metrics.operator_labels.label(current_operator.get())
        counter = self._moved.get(operator)
        if counter is None:
            counter = self._moved[operator] = self.metrics.operator_transitions.labels(
                operator, state
            )
        counter.inc()


class _CallTimer:
    """One call's watch: its duration and how it ended."""

    __slots__ = ("_children", "_started")

    def __init__(self, children: _CallChildren) -> None:
        self._children = children
        self._started = time.perf_counter()

    def end(self, code: grpc.StatusCode, reason: str) -> None:
        children = self._children
        children.handling.observe(time.perf_counter() - self._started)
        children.handled(code).inc()
        if code is grpc.StatusCode.OK and children.moves_to is not None:
            children.moved(children.moves_to)
        if reason and code is not grpc.StatusCode.INTERNAL:
            call = children.call
            children.metrics.refusals.labels(call.service, call.method, code.name, reason).inc()


class _SequencerGauges(Collector):
    """Whether the log makes progress, from what this process's sequencer last read (no query
    at a scrape): the integration wait, the stall, and the lease (PostgreSQL only)."""

    def __init__(self, store: Store, stalled: Callable[[], bool]) -> None:
        self._store = store
        self._stalled = stalled

    def describe(self) -> Iterable[Metric]:
        return ()

    def collect(self) -> Iterable[Metric]:
        store = self._store
        gauges = [
            _gauge(
                "gnau_log_integration_wait_seconds",
                "How long the oldest committed change not yet in the log has waited, in any"
                " replica as far as this one can tell (0 if none waits).",
                store.integration_wait(),
            ),
            _gauge(
                "gnau_log_stalled",
                "1 while the log is stalled (a change waited longer than the stall bound:"
                " health says NOT_SERVING), else 0.",
                float(self._stalled()),
            ),
            _gauge(
                "gnau_sequencer_leading",
                "1 while this process is the log's sequencer, else 0.",
                float(store.leading),
            ),
        ]
        progress = store.log_progress()
        if progress is not None:
            since_read = time.monotonic() - progress.read_at
            gauges += [
                _gauge(
                    "gnau_sequencer_lease_age_seconds",
                    "Seconds since the log's sequencer last renewed its lease, which it does in"
                    " every integration: its last progress.",
                    progress.lease_age + since_read,
                ),
                _gauge(
                    "gnau_sequencer_epoch",
                    "The sequencer lease's epoch: one more at each takeover.",
                    float(progress.epoch),
                ),
            ]
        return gauges


class _PlanCounters(Collector):
    """The round steps planned ahead of the writers' turn, by how the plan went."""

    def __init__(self, plans: PlanCounts) -> None:
        self._plans = plans

    def describe(self) -> Iterable[Metric]:
        return ()

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(
            "gnau_step_plans",
            "Round steps computed ahead of the writers' turn (SQLite under --workers), by "
            "outcome: used, or recomputed in the turn because another step moved the round "
            "meanwhile.",
            labels=("outcome",),
        )
        family.add_metric(("used",), self._plans.used)
        family.add_metric(("recomputed",), self._plans.recomputed)
        return [family]


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation)
    family.add_metric((), value)
    return family


class _StoreGauges(Collector):
    """The log's size and checkpoint age and the open rounds, read from the database at each
    scrape. If it cannot be read, ``gnau_store_readable`` says 0 and the rest are left out (a
    gap, rather than a stale value)."""

    def __init__(self, store: LogReader) -> None:
        self._store = store

    def describe(self) -> Iterable[Metric]:
        return ()  # read only at a scrape, never while registering

    def collect(self) -> Iterable[Metric]:
        readable = GaugeMetricFamily(
            "gnau_store_readable", "1 if this scrape could read the database, else 0."
        )
        try:
            gauges = self._read()
        except Exception as error:  # any failure to read: the rest of the scrape still counts
            cause = str(error) if isinstance(error, StoreError) else type(error).__name__
            log.warning("metrics: cannot read the store", cause=cause)
            readable.add_metric((), 0)
            return [readable]
        readable.add_metric((), 1)
        return [readable, *gauges]

    def _read(self) -> list[Metric]:
        store = self._store
        head = log_gauges(store)
        size = GaugeMetricFamily("gnau_log_size", "Entries in the audit log.")
        size.add_metric((), head.size)
        found: list[Metric] = [size]
        if head.last_time is not None:
            age = GaugeMetricFamily(
                "gnau_log_checkpoint_age_seconds",
                "Seconds since the newest signed checkpoint (the last batch that grew the log).",
            )
            signed = parse_utc_timestamp(head.last_time)
            age.add_metric((), max((datetime.now(UTC) - signed).total_seconds(), 0.0))
            found.append(age)
        by_state = GaugeMetricFamily(
            "gnau_rounds_open", "Unfinished rounds, by state.", labels=("state",)
        )
        for state, count in open_rounds_by_state(store).items():
            by_state.add_metric((state,), count)
        overdue = GaugeMetricFamily(
            "gnau_rounds_overdue",
            f"Open rounds whose deadline passed more than {OVERDUE_SECONDS:g} s ago: the service"
            " completes a round within a second or two of its deadline, so any is a fault (the"
            " completion stopped, or the log is stalled).",
        )
        late = datetime.now(UTC) - timedelta(seconds=OVERDUE_SECONDS)
        overdue.add_metric((), overdue_rounds(store, format_utc_timestamp(late)))
        found.append(overdue)
        per_table = GaugeMetricFamily(
            "gnau_table_rounds_open",
            f"1 for each table with an unfinished round, by its state; at most "
            f"{MAX_TABLE_SERIES} tables, those whose round has waited longest.",
            labels=("table_id", "state"),
        )
        idle = GaugeMetricFamily(
            "gnau_table_round_idle_seconds",
            "Seconds since the table's unfinished round last moved (same tables).",
            labels=("table_id",),
        )
        now = datetime.now(UTC)
        for open_round in longest_open_rounds(store, MAX_TABLE_SERIES):
            per_table.add_metric((open_round.table_id, open_round.state), 1)
            moved = parse_utc_timestamp(open_round.updated_at)
            idle.add_metric((open_round.table_id,), max((now - moved).total_seconds(), 0.0))
        return [*found, by_state, per_table, idle]


class _HttpGauges(Collector):
    """Each HTTP port's connections and the refusals its clients caused, from its edge."""

    def __init__(self, ports: Mapping[str, EdgeServer]) -> None:
        self._ports = ports

    def describe(self) -> Iterable[Metric]:
        return ()

    def collect(self) -> Iterable[Metric]:
        connections = GaugeMetricFamily(
            "gnau_http_connections", "Connections open on the HTTP port.", labels=("port",)
        )
        limit = GaugeMetricFamily(
            "gnau_http_connections_limit",
            "The most connections the HTTP port holds (from the descriptor limit).",
            labels=("port",),
        )
        refusals = CounterMetricFamily(
            "gnau_http_refusals",
            "Requests and connections the HTTP port refused for the client's doing: over a "
            "connection cap, too slow, malformed, a body where none is taken.",
            labels=("port",),
        )
        for port, edge in self._ports.items():
            connections.add_metric((port,), edge.budget.open)
            limit.add_metric((port,), edge.budget.cap)
            refusals.add_metric((port,), edge.warnings.total)
        return [connections, limit, refusals]


class _WitnessGauges(Collector):
    """Each witness's lag and submissions, from the witnessing tasks' own state (no database
    read): the log's size as this process knows it, less the largest size the witness cosigned."""

    def __init__(
        self,
        witnesses: Sequence[WitnessStatus],
        log_size: Callable[[], int],
    ) -> None:
        self._witnesses = witnesses
        self._log_size = log_size
        self._since = datetime.now(UTC)

    def describe(self) -> Iterable[Metric]:
        return ()

    def collect(self) -> Iterable[Metric]:
        lag = GaugeMetricFamily(
            "gnau_witness_lag_entries",
            "Entries in the log beyond the largest checkpoint the witness has cosigned.",
            labels=("witness",),
        )
        age = GaugeMetricFamily(
            "gnau_witness_cosignature_age_seconds",
            "Seconds since the time in the witness's latest cosignature (since the service "
            "started, if it holds none).",
            labels=("witness",),
        )
        submissions = CounterMetricFamily(
            "gnau_witness_submissions",
            "add-checkpoint requests to the witness, by how they ended.",
            labels=("witness", "result"),
        )
        offset = GaugeMetricFamily(
            "gnau_witness_clock_offset_seconds",
            "The witness's clock less this service's, estimated from its latest cosignature's "
            "time and the request's round trip (absent before the first).",
            labels=("witness",),
        )
        uncertainty = GaugeMetricFamily(
            "gnau_witness_clock_offset_uncertainty_seconds",
            "How far the offset estimate may be off: half the round trip plus half a second "
            "(the cosignature's resolution).",
            labels=("witness",),
        )
        drifting = GaugeMetricFamily(
            "gnau_witness_clock_drift",
            "1 while the latest cosignature shows clock drift beyond --witness-clock-bound-seconds"
            " (the witness's clock, or the checkpoint's newest entry time), else 0.",
            labels=("witness",),
        )
        drifts = CounterMetricFamily(
            "gnau_witness_clock_drifts",
            "Times the witness's cosignatures went from no drift into drift.",
            labels=("witness",),
        )
        size = self._log_size()
        now = datetime.now(UTC)
        for status in self._witnesses:
            lag.add_metric((status.name,), max(size - status.cosigned_size, 0))
            if status.cosigned_at is None:
                since = (now - self._since).total_seconds()
            else:
                since = now.timestamp() - status.cosigned_at
            age.add_metric((status.name,), max(since, 0.0))
            for result in Submission:
                submissions.add_metric((status.name, str(result)), status.submissions[result])
            if status.clock_offset is not None:
                offset.add_metric((status.name,), status.clock_offset.estimate)
                uncertainty.add_metric((status.name,), status.clock_offset.uncertainty)
            drifting.add_metric((status.name,), float(status.drift is not Drift.NONE))
            drifts.add_metric((status.name,), status.drifts)
        return [lag, age, submissions, offset, uncertainty, drifting, drifts]
