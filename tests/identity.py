"""Running as another user, for the tests of file permissions: the tests run as root here.

:func:`as_identity` changes only the *effective* ids of this process (the real uid stays 0, so
they can be given back), which is what the kernel checks when a file is opened: the code under
test then meets the files exactly as a service running as that user would. Threads share the
ids, so these tests start none. :func:`shared_directory` is a directory such a user can enter
(pytest's own temporary directories are private to root).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

SERVICE_UID = 10001  # the image's and the manifests' service user
SERVICE_GID = 10001
OTHER_GID = 20002  # a supplementary group of the service user in some tests
STRANGER_UID = 30003  # someone else entirely


def require_root() -> None:
    if os.geteuid() != 0:
        reason = "changing the owner of files and the process's identity needs root"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the permission tests, but {reason}", pytrace=False)
        pytest.skip(reason)


@contextmanager
def as_identity(uid: int, gid: int, groups: tuple[int, ...] = ()) -> Iterator[None]:
    """Effective uid ``uid``, group ``gid`` and supplementary ``groups`` until the block ends."""
    require_root()
    saved = os.getgroups()
    os.setgroups(list(groups))
    os.setegid(gid)
    os.seteuid(uid)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)
        os.setgroups(saved)


@contextmanager
def shared_directory() -> Iterator[Path]:
    """A fresh directory (mode 0755) that other users can enter and read; removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="gnau-perm-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def write_owned(path: Path, data: bytes, mode: int, uid: int, gid: int) -> Path:
    path.write_bytes(data)
    os.chown(path, uid, gid)
    path.chmod(mode)
    return path
