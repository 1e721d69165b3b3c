"""The metrics of ``gnau serve --workers N``: every worker's, on whichever worker a scrape reaches.

The workers share the HTTP ports (``SO_REUSEPORT``), so a scrape of ``/metrics`` lands on one of
them at random. Each worker therefore also serves its own metrics on a Unix socket of its own in the
supervisor's run directory (:meth:`~gnau_service.server.process.workers.WorkerRole.metrics_socket`),
and the worker a scrape reaches reads its siblings' there and answers with all of them, each sample
labelled ``worker="K"``, plus ``gnau_worker_up`` (1 for each worker that answered within
:data:`SIBLING_SECONDS`). So one scrape target sees every worker, counters never mix two processes'
lifetimes (a restarted worker's counters start again at 0 under its own label, which ``rate()``
understands), and the gauges that a worker computes when scraped (streams open, the log's progress)
stay each worker's own. prometheus-client's multiprocess mode could do neither: it sums counters in
files and cannot run a collector in another process.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable, Iterator
from typing import Final

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from gnau_service.server.process.metrics import Metrics
from gnau_service.server.process.workers import WorkerRole

#: How long a scrape waits for all the other workers' metrics together (seconds); a worker that
#: has not answered by then (frozen, busy) is reported down for that scrape.
SIBLING_SECONDS: Final = 2.0
#: The largest exposition read from one worker.
MAX_EXPOSITION_BYTES: Final = 16 * 1024 * 1024


class WorkerCollector(Collector):
    """What a worker says of itself: how many times its slot was started again."""

    def __init__(self, role: WorkerRole) -> None:
        self._role = role

    def collect(self) -> Iterable[Metric]:
        yield CounterMetricFamily(
            "gnau_worker_restarts",
            "Times the supervisor started this worker's slot again after its worker died.",
            value=self._role.restarts,
        )


class WorkerMetrics:
    """Every worker's metrics, read from the worker a scrape reached (see the module's text)."""

    def __init__(self, own: Metrics, role: WorkerRole) -> None:
        self._own = own
        self._role = role

    def exposition(self) -> bytes:
        """Every worker's metrics, labelled (reads sockets and the database: off the loop)."""
        role = self._role
        texts: dict[int, str | None] = {role.index: self._own.exposition().decode()}
        deadline = time.monotonic() + SIBLING_SECONDS
        for index in range(role.count):
            if index != role.index:
                texts[index] = read_exposition(str(role.metrics_socket(index)), deadline)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Merged(texts))
        return generate_latest(registry)


class _Merged(Collector):
    def __init__(self, texts: dict[int, str | None]) -> None:
        self._texts = texts

    def collect(self) -> Iterator[Metric]:
        return iter(merge(self._texts))


def merge(texts: dict[int, str | None]) -> list[Metric]:
    """The metric families of every worker's exposition (by worker; None: it did not answer),
    each sample labelled with its worker, and ``gnau_worker_up``.

    >>> text = "# TYPE jobs counter\\njobs_total 3.0\\n"
    >>> [(s.name, s.labels, s.value) for f in merge({0: text, 1: None}) for s in f.samples]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('jobs_total', {'worker': '0'}, 3.0),
     ('gnau_worker_up', {'worker': '0'}, 1.0), ('gnau_worker_up', {'worker': '1'}, 0.0)]
    """
    families: dict[str, Metric] = {}
    up = GaugeMetricFamily(
        "gnau_worker_up", "Whether each worker answered this scrape.", labels=["worker"]
    )
    for index, text in sorted(texts.items()):
        worker = str(index)
        up.add_metric([worker], 0.0 if text is None else 1.0)
        for family in [] if text is None else text_string_to_metric_families(text):
            merged = families.setdefault(
                family.name, Metric(family.name, family.documentation, family.type, family.unit)
            )
            merged.samples.extend(
                Sample(s.name, {**s.labels, "worker": worker}, s.value, s.timestamp, s.exemplar)
                for s in family.samples
            )
    return [*families.values(), up]


def read_exposition(path: str, deadline: float) -> str | None:
    """``GET /metrics`` from the worker at the Unix socket ``path``; None if it does not answer
    in full, with status 200, by ``deadline`` (``time.monotonic()``)."""
    response = bytearray()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(max(0.001, deadline - time.monotonic()))
            connection.connect(path)
            connection.sendall(b"GET /metrics HTTP/1.0\r\nHost: worker\r\n\r\n")
            while len(response) <= MAX_EXPOSITION_BYTES:
                connection.settimeout(max(0.001, deadline - time.monotonic()))
                chunk = connection.recv(65536)
                if not chunk:
                    break
                response += chunk
    except OSError:
        return None
    head, _, body = bytes(response).partition(b"\r\n\r\n")
    if len(response) > MAX_EXPOSITION_BYTES or not head.startswith(b"HTTP/1.1 200"):
        return None
    return body.decode("utf-8", errors="replace")
