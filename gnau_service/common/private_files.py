"""Secret files (keys, token lists): read only if private, written whole at mode 0600, one
writer at a time.

A secret file is replaced by writing a temporary file in the same directory (created with
``O_EXCL`` at 0600, synced) and renaming it over the old one, so a reader (a server rereading
its tokens, say) sees the old file or the new one, never half of one. Commands that read, change
and write a file hold :func:`exclusive_lock` on a ``.lock`` file beside it, so that two of them
at once cannot lose each other's change. :func:`read_private_file` reads them, refusing one
that group or others may access.

The same whole, durable writes serve files that are public by design at another mode
(:func:`create_file`, :func:`replace_file`: the log's published tiles).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from gnau_service.common.secret_files import refusal, secret_file_problem

PRIVATE_MODE: Final = 0o600


class KeyFileError(ValueError):
    """A secret file (a key, a token list) that cannot be used: unsafe permissions, not a file,
    unreadable, or (a key file) not the key it must hold."""


def read_private_file(path: str | os.PathLike[str], what: str = "key file") -> bytes:
    """The bytes of a secret file (a key, a token list), refused if group or others have access.

    The mode is checked on the opened file (not the path), so a swap between check and read does
    not matter; symlinks are followed, as secret mounts use them.
    """
    where = os.fspath(path)
    try:
        fd = os.open(where, os.O_RDONLY)
    except OSError as error:
        if isinstance(error, PermissionError):
            with contextlib.suppress(OSError):  # a directory on the way may hide it: say that
                _refuse_unless_private(what, where, os.stat(where))
        raise KeyFileError(f"cannot open {what} {where}: {error.strerror}") from error
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise KeyFileError(f"{what} {where} is not a regular file")
        _refuse_unless_private(what, where, status)
        with os.fdopen(fd, "rb", closefd=False) as file:
            return file.read()
    finally:
        os.close(fd)


def _refuse_unless_private(what: str, where: str, status: os.stat_result) -> None:
    """Raise :class:`KeyFileError` telling the operator what to run, unless this process may use
    the file (see :mod:`gnau_service.common.secret_files`)."""
    uid, groups = os.geteuid(), {os.getegid(), *os.getgroups()}
    mode = stat.S_IMODE(status.st_mode)
    problem = secret_file_problem(mode, status.st_uid, status.st_gid, uid, groups)
    if problem is not None:
        raise KeyFileError(
            refusal(
                what,
                where,
                problem,
                mode=mode,
                owner_uid=status.st_uid,
                owner_gid=status.st_gid,
                uid=uid,
            )
        )


def write_private_file(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace (or create) ``path`` with ``data``, atomically and durably, at mode 0600."""
    replace_file(path, data, PRIVATE_MODE)


def create_private_file(path: str | os.PathLike[str], data: bytes) -> bool:
    """Create ``path`` with ``data`` at mode 0600, whole or not at all, unless it exists: an
    existing file (or one a concurrent process has just created) is never replaced. True if
    this call created it."""
    return create_file(path, data, PRIVATE_MODE)


def replace_file(path: str | os.PathLike[str], data: bytes, mode: int) -> None:
    """Replace (or create) ``path`` with ``data`` at ``mode``, atomically and durably."""
    target = Path(path)
    with _synced_temporary(target, data, mode) as temporary:
        os.replace(temporary, target)
    sync_directory(target.parent)


def create_file(path: str | os.PathLike[str], data: bytes, mode: int) -> bool:
    """Create ``path`` with ``data`` at ``mode``, whole or not at all, unless it exists (it is
    then never replaced); durably. True if this call created it."""
    target = Path(path)
    with _synced_temporary(target, data, mode) as temporary:
        try:
            os.link(temporary, target)  # unlike a rename, fails rather than overwrite
        except FileExistsError:
            return False
    sync_directory(target.parent)
    return True


@contextlib.contextmanager
def _synced_temporary(target: Path, data: bytes, mode: int) -> Iterator[Path]:
    """``data`` in a new file at ``mode`` beside ``target``, synced; removed when the block
    ends. It is created at 0600 whatever ``mode``, so nobody reads it half-written."""
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE)
    try:
        with os.fdopen(fd, "wb") as file:
            os.fchmod(file.fileno(), mode)  # the umask can only narrow it: be exact
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        yield temporary
    finally:
        temporary.unlink(missing_ok=True)


def sync_directory(directory: str | os.PathLike[str]) -> None:
    """Make the names in ``directory`` (a rename into it, say) durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def lock_path(path: str | os.PathLike[str]) -> Path:
    """The lock file that guards ``path``: ``<path>.lock`` in the same directory.

    >>> lock_path("/etc/gnau/tokens.json")
    PosixPath('/etc/gnau/tokens.json.lock')
    """
    target = Path(path)
    return target.with_name(target.name + ".lock")


@contextlib.contextmanager
def exclusive_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<path>.lock`` (created at 0600) for the ``with`` block,
    waiting for any other holder. The lock goes with the process, so a crash never leaves it
    held; the lock file itself stays (removing it would let two holders lock different files)."""
    lock = lock_path(path)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, PRIVATE_MODE)
    except OSError as error:
        raise OSError(f"cannot create the lock file {lock}: {error.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock
