"""A running service rereads its token file: on SIGHUP, and when the file changes.

The file is checked every :data:`POLL_SECONDS` (a ``stat``: its device, inode, size and
modification time; following symlinks, so a Kubernetes secret update, which swaps a symlink, is
seen too) and on SIGHUP. A good file replaces the credentials at once: the next call is checked
against the new tokens, and calls and streams already admitted go on. A file that cannot be used
(missing, unsafe mode, malformed) leaves the previous tokens in force and is logged once, in one
line that names the file and the problem and quotes nothing from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

import structlog

from gnau_service.server.grpc.auth import AuthConfigError, Credentials, Role
from gnau_service.server.process.tokens import read_token_file

POLL_SECONDS: Final = 1.0

log = structlog.get_logger("gnau.tokens")

#: What identifies one version of a file, as cheaply as a stat can say it.
FileVersion = tuple[int, int, int, int] | None


def file_version(path: Path) -> FileVersion:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


class TokenReload:
    """Rereads ``path`` and hands each good version to ``apply`` as new credentials. ``read``
    is the version of the file already in force (taken before it was read), so a change made
    since is reread at the first poll."""

    def __init__(
        self,
        path: Path,
        mtls_names: Mapping[str, Role],
        apply: Callable[[Credentials], None],
        *,
        read: FileVersion,
    ) -> None:
        self._path = path
        self._mtls_names = mtls_names
        self._apply = apply
        self._version = read
        self._task: asyncio.Task[None] | None = None

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
        self._apply(Credentials(token_file.hashes, self._mtls_names, token_file.names))
        log.info(
            "tokens reloaded", path=str(self._path), trigger=trigger, tokens=len(token_file.records)
        )
        return True

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name="gnau-token-watch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(POLL_SECONDS)
            if file_version(self._path) != self._version:
                self.reload("file changed")
