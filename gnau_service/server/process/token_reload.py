"""A running service rereads its token file: on SIGHUP, and when the file changes.

The file is checked every :data:`POLL_SECONDS` (a ``stat``: its device, inode, size and
modification time; following symlinks, so a Kubernetes secret update, which swaps a symlink, is
seen too) and on SIGHUP. A good file replaces the credentials at once: the next call is checked
against the new tokens, and calls and streams already admitted go on. A file that cannot be used
(missing, unsafe mode, malformed) leaves the previous tokens in force and is logged once, in one
line that names the file and the problem and quotes nothing from it.

A good file that adds or revokes a token is recorded in the audit log: a ``TOKENS_CHANGED``
entry names the tokens by name and role
(:func:`~gnau_service.server.process.tokens.token_changes`). Each process that takes the change
up writes its own, as each one's credentials change then.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any, Final

import structlog

from gnau_service.audit.entries import JsonValue
from gnau_service.server.grpc.auth import AuthConfigError, Caller, Credentials
from gnau_service.server.process.tokens import TokenRecord, read_token_file, token_changes

POLL_SECONDS: Final = 1.0

log = structlog.get_logger("gnau.tokens")

#: What identifies one version of a file, as cheaply as a stat can say it.
FileVersion = tuple[int, int, int, int] | None
#: Records a change of the tokens (a TOKENS_CHANGED payload) in the audit log.
ChangeRecorder = Callable[[dict[str, JsonValue]], Coroutine[Any, Any, None]]


def file_version(path: Path) -> FileVersion:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


class TokenReload:
    """Rereads ``path`` and hands each good version to ``apply`` as new credentials. ``read``
    is the version of the file already in force (taken before it was read), so a change made
    since is reread at the first poll. ``in_force``: the tokens read from it, which the first
    change is told from; ``record``, when given, records each change in the audit log
    (and answers when it is written or given up)."""

    def __init__(
        self,
        path: Path,
        common_names: Mapping[str, Caller],
        apply: Callable[[Credentials], None],
        *,
        read: FileVersion,
        in_force: tuple[TokenRecord, ...] = (),
        record: ChangeRecorder | None = None,
    ) -> None:
        self._path = path
        self._common_names = common_names
        self._apply = apply
        self._version = read
        self._records = in_force
        self._record = record
        self._task: asyncio.Task[None] | None = None
        self._recording: set[asyncio.Task[None]] = set()

    def reload(self, trigger: str) -> bool:
        """Read the file now; True if its tokens are now in force."""
        self._version = file_version(self._path)
        try:
            token_file = read_token_file(self._path)
        except AuthConfigError as error:
            log.error(
                "token file unusable; keeping the previous tokens",
                path=str(self._path),
                trigger=trigger,
                error=str(error),
            )
            return False
        self._apply(Credentials(token_file.callers, self._common_names))
        log.info(
            "tokens reloaded", path=str(self._path), trigger=trigger, tokens=len(token_file.records)
        )
        changes = token_changes(self._records, token_file.records)
        self._records = token_file.records
        if changes is not None and self._record is not None:
            # Called from a signal handler too: the entry is written beside, not awaited here.
            task = asyncio.get_running_loop().create_task(
                self._record(changes), name="gnau-tokens-changed"
            )
            self._recording.add(task)
            task.add_done_callback(self._recording.discard)
        return True

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name="gnau-token-watch")

    async def stop(self) -> None:
        """Stop watching. An entry still being written is given up, with a WARNING: the stop's
        time is bounded, and a log that has not written it by now is stalled."""
        if self._recording:
            log.warning("token change not recorded in the audit log: the service is stopping")
        for task in (self._task, *self._recording):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(POLL_SECONDS)
            if file_version(self._path) != self._version:
                self.reload("file changed")
