"""Reports for auditors over the API (issue 38): ``gnau report``'s rows, computed by the service
from its own log, for the rounds the caller may see.

The rows are :mod:`gnau_service.audit.report`'s, read exactly as ``gnau report --database``
reads them (each entry's signature and chain checked), so an auditor gets the same text from the
RPC as from the command on an export. A report reads the whole log, so the service bounds it:
one report at a time in each process (another is refused at once, ``REPORT_BUSY``), within the
caller's deadline (the work stops when it passes), and at most :data:`MAX_REPORT_BYTES` of text
(``REPORT_TOO_LARGE``: narrow it by operator, table or dates).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date
from time import monotonic

from gnau_service.audit.entries import LogEntry
from gnau_service.audit.note import Verifier
from gnau_service.audit.report import LogReport, Period, csv_text, json_text
from gnau_service.audit.report_reading import log_entries
from gnau_service.rounds.limits import MAX_REPORT_BYTES
from gnau_service.rounds.refusals import ReportBusy, ReportPastDeadline, ReportTooLarge
from gnau_service.store import Store

#: How often (in entries) a report looks at the clock.
_CLOCK_EVERY = 1024


@dataclass(frozen=True)
class ReportQuery:
    """What a report covers, as ``gnau report``'s options say it."""

    period: Period
    since: date | None
    until: date | None
    #: Whose rounds: None for every operator's.
    operators: frozenset[str] | None
    tables: frozenset[str] | None
    form: str  # "csv" or "json"


@dataclass
class Reporting:
    """Runs one report at a time for this process."""

    store: Store
    _running: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def report(self, query: ReportQuery, *, deadline: float | None) -> tuple[str, int]:
        """The report's text and the log size it covers; refused while another runs."""
        if self._running.locked():
            raise ReportBusy
        async with self._running:
            return await asyncio.to_thread(self._compute, query, deadline)

    def _compute(self, query: ReportQuery, deadline: float | None) -> tuple[str, int]:
        size = self.store.size()
        keys = self.store.public_keys()
        report = LogReport(
            query.period,
            since=query.since,
            until=query.until,
            operators=query.operators,
            tables=query.tables,
        )
        # The log's own first key: the service reads its own store (the caller checks the log
        # against the key it pinned with gnau audit verify).
        pinned = [Verifier.from_vkey(keys[0])] if keys else []
        # An entry of its own log that does not count is a fault of the service (INTERNAL).
        checked = log_entries(self.store.iter_entries(0, size), size, keys, pinned)
        report.add_all(_within(checked.entries(jobs=1), deadline))
        rows = report.rows()
        text = csv_text(rows) if query.form == "csv" else json_text(report, rows)
        if len(text.encode("utf-8")) > MAX_REPORT_BYTES:
            raise ReportTooLarge(MAX_REPORT_BYTES)
        return text, size


def _within(entries: Iterable[LogEntry], deadline: float | None) -> Iterator[LogEntry]:
    for count, entry in enumerate(entries):
        if deadline is not None and count % _CLOCK_EVERY == 0 and monotonic() > deadline:
            raise ReportPastDeadline
        yield entry
