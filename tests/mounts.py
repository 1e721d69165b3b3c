"""Small real filesystems for tests of a full or read-only disk: tmpfs mounts.

Mounting needs root (or CAP_SYS_ADMIN). Elsewhere the tests that need it are skipped with the
reason; in CI (``CI`` set) they must run, so a failed mount fails them instead.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(path: Path, *, size: str = "4m", read_only: bool = False) -> Iterator[Path]:
    """A fresh tmpfs of ``size`` mounted at ``path`` (created), unmounted afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size},mode=0700" + (",ro" if read_only else "")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        reason = f"cannot mount a tmpfs here: {mounted.stderr.strip()}"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the disk tests, but {reason}", pytrace=False)
        pytest.skip(reason)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path) -> Path:
    """Fill the filesystem of ``directory`` to the last byte; return the file that did it."""
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as file:
        for block in (1 << 16, 1):  # big blocks, then the last bytes one at a time
            with contextlib.suppress(OSError):
                while True:
                    file.write(b"\0" * block)
    return filler
