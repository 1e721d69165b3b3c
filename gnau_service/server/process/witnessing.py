"""The log's side of witnessing: ask each witness to cosign the latest checkpoint.

A witness (C2SP tlog-witness, https://c2sp.org/tlog-witness) keeps, for each log it knows, the
largest checkpoint it has cosigned. The log sends it a newer checkpoint with a consistency proof
from that size (``POST <prefix>/add-checkpoint``); the witness checks the proof and answers with
its cosignature lines (C2SP tlog-cosignature), which the log verifies against the witness's
pinned key and keeps beside the checkpoint (:mod:`gnau_service.store.cosignatures`).

Each witness has a task of its own, so a witness that is down or slow holds up nobody: not the
rounds (the store never waits for a witness), not the other witnesses. A task waits until the
log holds a checkpoint larger than the one its witness last cosigned and at least the interval
(``--witness-interval-ms``) has passed since its last submission, then submits the latest
checkpoint:

- 200: the cosignature lines; each that verifies against the witness's key is kept;
- 409 (``text/x.tlog.size``): the witness holds another size than the log thought (a first
  contact, a lost reply, a restore of the log): submit again at once, from that size. A 409 for
  the very size submitted means that the witness holds another root for it: a fork, logged as
  an error and retried only after a back-off;
- anything else, a timeout or no answer: back off, doubling from the interval up to
  :data:`MAX_BACKOFF_SECONDS`, and try again.

Each cosignature is also a reading of the witness's clock against this service's, which stamps
the log's entries (:mod:`gnau_service.audit.clock_drift`): the service reads its clock just before
it sends a checkpoint and once the answer is in, and the witness's time must lie between, up to
the clocks' offset. A reading whose whole interval lies beyond ``--witness-clock-bound-seconds``,
or whose checkpoint's newest entry claims a time past the cosignature by more than it, is drift:
logged as an error once as it begins (``witness clock drift``), and once as it ends.

How far each witness lags, how its submissions ended and how its clock stands are kept in a
:class:`WitnessStatus` that the metrics read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

import aiohttp
import structlog

from gnau_service.audit.checkpoint import Checkpoint
from gnau_service.audit.clock_drift import (
    DEFAULT_BOUND_SECONDS,
    ClockOffset,
    Drift,
    cosignature_offset,
    drift,
    entry_lead,
)
from gnau_service.audit.cosignature import verify_cosignature
from gnau_service.audit.note import NoteError, NoteSignature, SignedNote
from gnau_service.audit.timestamps import parse_utc_timestamp
from gnau_service.audit.witness_protocol import (
    SIZE_CONTENT_TYPE,
    encode_add_checkpoint,
    parse_size_response,
)
from gnau_service.server.process.witness_endpoints import WitnessEndpoint
from gnau_service.store import LogTail, Store, StoreError
from gnau_service.store.cosignatures import add_cosignature, witness_progress

#: Seconds a submission may take, connection included, before it counts as a failure.
SUBMIT_TIMEOUT_SECONDS: Final = 10.0
#: The longest wait between two failed submissions to one witness.
MAX_BACKOFF_SECONDS: Final = 60.0
#: The largest witness answer read: a few signature lines are a few hundred bytes.
MAX_RESPONSE_BYTES: Final = 64 * 1024
#: Submissions in a row answered 409 before backing off (each 409 names a new size to try).
MAX_CONFLICTS_IN_A_ROW: Final = 3

log = structlog.get_logger("gnau.witnessing")


class Submission(StrEnum):
    """How one add-checkpoint request ended (the metric's ``result`` label)."""

    COSIGNED = "cosigned"  # 200 with at least one valid cosignature
    CONFLICT = "conflict"  # 409: the witness holds another size; retried from it
    FORK = "fork"  # 409 for the size submitted: the witness holds another root for it
    REFUSED = "refused"  # another 4xx (403: it does not trust the key; 422: bad proof ...)
    INVALID = "invalid"  # 200 without a valid cosignature from the pinned key
    UNREACHABLE = "unreachable"  # no answer in time, a network failure, or a 5xx


@dataclass
class WitnessStatus:
    """One witness as the log knows it: what it holds, what the log holds from it, and how its
    submissions ended. Changed only on the event loop; read by the metrics."""

    endpoint: WitnessEndpoint
    #: The size the witness last said it holds (what the next request's ``old`` line says).
    witness_size: int = 0
    #: The largest checkpoint size the log holds a cosignature of from this witness.
    cosigned_size: int = 0
    #: The POSIX time inside that cosignature; None if the log holds none.
    cosigned_at: int | None = None
    submissions: Counter[Submission] = field(default_factory=Counter)
    #: The witness's clock less this service's, from its latest cosignature this process
    #: received; None before the first.
    clock_offset: ClockOffset | None = None
    #: What that cosignature said of the clocks; anything but NONE is drift.
    drift: Drift = Drift.NONE
    #: How many times the clocks went into drift (from no drift), since this process started.
    drifts: int = 0

    @property
    def name(self) -> str:
        return self.endpoint.key.name


class Witnessing:
    """The background tasks that ask each witness to cosign; start and stop it on one loop."""

    def __init__(
        self,
        store: Store,
        tail: LogTail,
        endpoints: Sequence[WitnessEndpoint],
        *,
        interval_seconds: float,
        clock_bound_seconds: float = DEFAULT_BOUND_SECONDS,
    ) -> None:
        self._store = store
        self._tail = tail
        self._interval = interval_seconds
        self._clock_bound = clock_bound_seconds
        self.statuses = tuple(WitnessStatus(endpoint) for endpoint in endpoints)
        self._session: aiohttp.ClientSession | None = None
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Learn from the store how far each witness has cosigned, then start asking."""
        for status in self.statuses:
            progress = await asyncio.to_thread(
                witness_progress, self._store, status.endpoint.key.vkey
            )
            if progress is not None:
                status.cosigned_size = status.witness_size = progress.size
                status.cosigned_at = progress.timestamp
        # Keep-alive connections, as the spec asks of clients; a slow witness times out.
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=SUBMIT_TIMEOUT_SECONDS),
            headers={"User-Agent": "gnau-dealer"},
        )
        self._tasks = [
            asyncio.create_task(self._run(status), name=f"gnau-witness-{status.name}")
            for status in self.statuses
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _run(self, status: WitnessStatus) -> None:
        backoff = 0.0
        conflicts = 0
        while True:
            await self._tail.wait_beyond(status.witness_size)
            started = time.monotonic()
            try:
                result = await self.submit(status)
            except StoreError as error:  # the store's outage is reported where calls fail
                log.warning(
                    "witnessing: cannot read the log", witness=status.name, error=str(error)
                )
                result = Submission.UNREACHABLE
            status.submissions[result] += 1
            if result is Submission.CONFLICT and conflicts < MAX_CONFLICTS_IN_A_ROW:
                conflicts += 1
                continue  # at once, from the size the witness named
            conflicts = 0
            if result is Submission.COSIGNED:
                backoff = 0.0
                wait = self._interval - (time.monotonic() - started)
            else:
                backoff = min(max(backoff * 2, self._interval, 0.1), MAX_BACKOFF_SECONDS)
                wait = backoff
            if wait > 0:
                await asyncio.sleep(wait)

    async def submit(self, status: WitnessStatus) -> Submission:
        """Submit the log's latest checkpoint to one witness, once, and learn from its answer."""
        latest = await asyncio.to_thread(_latest_checkpoint, self._store)
        if latest is None:
            return Submission.UNREACHABLE  # nothing signed yet: nothing to ask, try later
        note, newest_entry_time = latest
        text = SignedNote.parse(note).text
        size = Checkpoint.parse(text).size
        old = status.witness_size
        if old > size:
            # The witness holds a larger tree than this log: another writer of the same log
            # got there first, or this database was restored from an older backup.
            log.warning(
                "witness holds a larger checkpoint than the log",
                witness=status.name,
                witness_size=old,
                log_size=size,
            )
            return Submission.REFUSED
        proof = (
            await asyncio.to_thread(self._store.consistency_proof, old, size)
            if 0 < old < size
            else []
        )
        body = encode_add_checkpoint(old, proof, note)
        assert self._session is not None, "start() first"
        endpoint = status.endpoint
        sent = time.time()  # the dealer's clock, as the entries have it
        try:
            async with self._session.post(endpoint.add_checkpoint_url, data=body) as response:
                answer = await _read_at_most(response, MAX_RESPONSE_BYTES)
                code, content_type = response.status, response.content_type
            received = time.time()
        except (aiohttp.ClientError, TimeoutError) as error:
            log.warning(
                "witness unreachable", witness=status.name, error=str(error) or type(error).__name__
            )
            return Submission.UNREACHABLE
        if code == 200:
            return await self._cosigned(
                status, size, text, answer, sent=sent, received=received, entry=newest_entry_time
            )
        if code == 409 and content_type == SIZE_CONTENT_TYPE:
            try:
                held: int | None = parse_size_response(answer)
            except ValueError:
                held = None
            if held is not None and held != old:
                if held > size:
                    # Not this log's history as this database holds it: a restore from an older
                    # backup, or another writer. Asked again only once the log is larger.
                    log.error(
                        "witness holds a larger checkpoint than the log",
                        witness=status.name,
                        witness_size=held,
                        log_size=size,
                    )
                status.witness_size = held
                return Submission.CONFLICT
            if held == old:
                log.error(
                    "witness holds another root for this size: a fork, or the witness's error",
                    witness=status.name,
                    size=old,
                )
                return Submission.FORK
        log.warning(
            "witness refused the checkpoint",
            witness=status.name,
            status=code,
            size=size,
            old=old,
            answer=answer[:200].decode("utf-8", "replace"),
        )
        return Submission.UNREACHABLE if code >= 500 else Submission.REFUSED

    async def _cosigned(
        self,
        status: WitnessStatus,
        size: int,
        text: str,
        answer: bytes,
        *,
        sent: float,
        received: float,
        entry: float | None,
    ) -> Submission:
        """Keep the cosignatures in a 200 answer that verify against the witness's key, and read
        the witness's clock from the one kept (``sent`` and ``received`` by this service's clock;
        ``entry``, the time of the checkpoint's newest entry)."""
        # The witness now holds this size, whatever its lines say.
        status.witness_size = size
        key = status.endpoint.key
        kept: list[tuple[str, int]] = []
        for line in answer.decode("utf-8", "replace").splitlines():
            with contextlib.suppress(NoteError):
                signature = NoteSignature.parse(line)
                timestamp = verify_cosignature(key, text, signature)
                if timestamp is not None:
                    kept.append((signature.line.removesuffix("\n"), timestamp))
        if not kept:
            log.warning("witness answered without a valid cosignature", witness=status.name)
            return Submission.INVALID
        line, timestamp = max(kept, key=lambda found: found[1])
        await self._store.run_async(lambda tx: add_cosignature(tx, size, key.vkey, line, timestamp))
        status.cosigned_size, status.cosigned_at = size, timestamp
        self._read_clock(status, timestamp, sent, received, entry)
        return Submission.COSIGNED

    def _read_clock(
        self,
        status: WitnessStatus,
        cosigned_at: int,
        sent: float,
        received: float,
        newest_entry_time: float | None,
    ) -> None:
        """Compare the witness's clock with this service's, and log each start and end of drift."""
        offset = cosignature_offset(cosigned_at, sent, received)
        lead = None if newest_entry_time is None else entry_lead(newest_entry_time, cosigned_at)
        found = drift(offset, self._clock_bound, lead)
        was = status.drift
        status.clock_offset, status.drift = offset, found
        facts = {
            "witness": status.name,
            "offset_seconds": round(offset.estimate, 3),
            "uncertainty_seconds": round(offset.uncertainty, 3),
            "entry_lead_seconds": None if lead is None else round(lead, 3),
            "bound_seconds": self._clock_bound,
            "size": status.cosigned_size,
        }
        if found is not Drift.NONE and was is Drift.NONE:
            status.drifts += 1
            log.error(
                "witness clock drift: the cosignature's time and the dealer's clock, or its "
                "entries' times, differ by more than the bound",
                drift=str(found),
                **facts,
            )
        elif found is Drift.NONE and was is not Drift.NONE:
            log.info("witness clock within the bound again", was=str(was), **facts)


def _latest_checkpoint(store: Store) -> tuple[str, float | None] | None:
    """The log's latest checkpoint note and its newest entry's time (POSIX seconds; None if it
    covers no entry); None if the log has signed none."""
    note = store.checkpoint()
    if note is None:
        return None
    size = Checkpoint.parse(SignedNote.parse(note).text).size
    newest = store.entries(size - 1, size) if size > 0 else []
    if not newest:
        return note, None
    moment = parse_utc_timestamp(str(json.loads(newest[0])["time"]))
    return note, moment.timestamp()


async def _read_at_most(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The response's body, cut at ``limit`` bytes: a witness answers a few lines, and a
    larger answer is not read further."""
    body = bytearray()
    async for chunk in response.content.iter_chunked(limit):
        body += chunk
        if len(body) >= limit:
            break
    return bytes(body[:limit])
