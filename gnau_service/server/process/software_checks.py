"""Software authentication while the service runs (docs/software.md): the installation is
compared with its signed manifest at start, every :data:`DAILY_SECONDS` after, and when an
operator or auditor asks (``AuditService.VerifySoftware``).

Each check is recorded in a ``SOFTWARE_VERIFIED`` entry naming its actor (``service`` for the
checks at start and every day, the caller for one asked for). A check that finds a mismatch, or
a manifest that does not verify, is an alert: an ERROR line in the process's log and
``gnau_software_mismatch`` at 1 until a check matches again. Without a manifest configured
nothing is checked: the start logs a WARNING saying so, and VerifySoftware is refused
(``SOFTWARE_MANIFEST_NOT_CONFIGURED``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Final

import structlog

from gnau_service.audit.actors import SERVICE
from gnau_service.audit.entries import EntryKind
from gnau_service.audit.software_manifest import Installation, SoftwareCheck, check_software
from gnau_service.store import Store, StoreError

#: How long between two checks of a running service.
DAILY_SECONDS: Final = 86_400.0

log = structlog.get_logger("gnau.software")


class SoftwareChecks:
    """The checks of one service process against the manifest at ``manifest``, signed by the
    release key in ``release_key`` (a file holding its verifier key)."""

    def __init__(
        self,
        store: Store,
        manifest: Path,
        release_key: Path,
        *,
        installation: Callable[[], Installation] = Installation.running,
        interval_seconds: float = DAILY_SECONDS,
    ) -> None:
        self._store = store
        self._manifest = manifest
        self._release_key = release_key
        self._installation = installation
        self._interval = interval_seconds
        # One check at a time: each reads every shipped file, and each is one entry.
        self._running = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self.last: SoftwareCheck | None = None

    @property
    def alarming(self) -> bool:
        """Whether the last check found a mismatch or an unverifiable manifest."""
        return self.last is not None and self.last.alarming

    async def check(self, actor: str) -> tuple[SoftwareCheck, int]:
        """Check the installation now, record it as a SOFTWARE_VERIFIED entry by ``actor``, and
        return the check and the entry's index. Raises the store's errors (the check is then
        not recorded, but it still sets the alert)."""
        async with self._running:
            found = await asyncio.to_thread(
                check_software, self._manifest, self._release_key, self._installation()
            )
            self.last = found
            if found.alarming:
                log.error(
                    "software does not match its manifest",
                    result=str(found.outcome),
                    manifest_sha256=found.manifest_sha256,
                    mismatch_count=len(found.mismatches),
                    first=[mismatch.describe() for mismatch in found.mismatches[:5]],
                    detail=found.detail,
                    actor=actor,
                )
            else:
                log.info(
                    "software matches its manifest",
                    manifest_sha256=found.manifest_sha256,
                    actor=actor,
                )
            payload = found.payload(actor)
            pending = await self._store.run_async(
                lambda tx: tx.append(EntryKind.SOFTWARE_VERIFIED, payload)
            )
            return found, pending.index

    def start(self) -> None:
        """Check every ``interval_seconds`` from now on (the start's own check is the caller's,
        before it serves)."""
        self._task = asyncio.create_task(self._daily(), name="gnau-software-checks")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _daily(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.check(SERVICE)
            except StoreError as error:
                # The check itself ran (and alerted if it must); its entry waits for the next.
                log.warning("software check not recorded", error=str(error) or type(error).__name__)
