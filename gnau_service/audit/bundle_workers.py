"""Where a bundle's costly checks run: decoding entries (canonical JSON, Ed25519) and round
checks (fairness verifier, re-settlement), in this process for a short bundle and in a pool of
worker processes for a long one (:mod:`gnau_service.audit.bundle_verification` drives them)."""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Iterable, Iterator
from itertools import islice
from multiprocessing.pool import AsyncResult
from typing import Any, Final

from gnau_service.audit.bundle import EntryItem
from gnau_service.audit.bundle_report import Failure
from gnau_service.audit.entries import EntryError, LogEntry, decode_entry
from gnau_service.audit.note import Verifier
from gnau_service.audit.replay import RoundCheck, run_check

CHUNK: Final = 2_000
CHECK_BATCH: Final = 500
PARALLEL_FROM: Final = 20_000


class Workers:
    """Where the costly work runs: decoding entries (canonical JSON, Ed25519) and round checks
    (fairness verifier, re-settlement). Short bundles stay in this process; long ones go to
    worker processes, a bounded window of tasks at a time, while this process checks the chain,
    the tree and the order of events. Results come back in submission order, so the first
    failure found is always the earliest."""

    def __init__(self, vkeys: list[str], count: int, jobs: int | None) -> None:
        self.pool: Any = None
        self.window = 1
        self._batch: list[tuple[int, RoundCheck]] = []
        self._checks: deque[tuple[list[int], AsyncResult[list[str | None]]]] = deque()
        # Short bundles are not worth starting processes for, unless jobs are asked for by number.
        if jobs == 1 or (jobs is None and count < PARALLEL_FROM):
            _init_worker(vkeys)
            return
        workers = jobs or os.cpu_count() or 1
        self.window = 4 * workers
        context = multiprocessing.get_context("spawn")
        self.pool = context.Pool(workers, initializer=_init_worker, initargs=(vkeys,))

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()

    def decoded(self, items: Iterable[EntryItem]) -> Iterator[tuple[EntryItem, LogEntry | str]]:
        """(item, entry or the reason it was refused) for each entry line, in order."""
        chunks = _chunks(items, CHUNK)
        if self.pool is None:
            for chunk in chunks:
                yield from zip(chunk, _decode_chunk(chunk), strict=True)
            return
        window: deque[tuple[list[EntryItem], AsyncResult[list[LogEntry | str]]]] = deque()
        for chunk in chunks:
            window.append((chunk, self.pool.apply_async(_decode_chunk, (chunk,))))
            if len(window) >= self.window:
                done, result = window.popleft()
                yield from zip(done, result.get(), strict=True)
        while window:
            done, result = window.popleft()
            yield from zip(done, result.get(), strict=True)

    def check(self, index: int, check: RoundCheck) -> Failure | None:
        """Run (or queue) the round check of entry ``index``; a failure found so far, if any."""
        if self.pool is None:
            reason = run_check(check)
            return None if reason is None else Failure(reason, index)
        # One task per batch: a task per check would spend the saving on pickling and queues.
        self._batch.append((index, check))
        if len(self._batch) >= CHECK_BATCH:
            self._submit()
            if len(self._checks) >= self.window:
                return self._collect()
        return None

    def drain(self) -> Failure | None:
        """Wait for every queued check; the earliest failure, if any."""
        if self._batch:
            self._submit()
        while self._checks:
            failed = self._collect()
            if failed is not None:
                self._checks.clear()
                return failed
        return None

    def _submit(self) -> None:
        indices = [index for index, _ in self._batch]
        result = self.pool.apply_async(_run_checks, ([check for _, check in self._batch],))
        self._checks.append((indices, result))
        self._batch = []

    def _collect(self) -> Failure | None:
        indices, result = self._checks.popleft()
        for index, reason in zip(indices, result.get(), strict=True):
            if reason is not None:
                return Failure(reason, index)
        return None


def _run_checks(checks: list[RoundCheck]) -> list[str | None]:
    return [run_check(check) for check in checks]


_WORKER_KEYS: list[Verifier] = []


def _init_worker(vkeys: list[str]) -> None:
    _WORKER_KEYS[:] = [Verifier.from_vkey(vkey) for vkey in vkeys]


def _decode_chunk(chunk: list[EntryItem]) -> list[LogEntry | str]:
    results: list[LogEntry | str] = []
    for data in chunk:
        if isinstance(data, str):  # a line that holds no entry: its reason stands for it
            results.append(data)
            continue
        try:
            results.append(decode_entry(data, *_WORKER_KEYS))
        except EntryError as error:
            # The failure names the entry by its position: the reason alone, not the message.
            results.append(error.reason)
    return results


def _chunks(items: Iterable[EntryItem], size: int) -> Iterator[list[EntryItem]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk
