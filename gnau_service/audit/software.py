"""What software is running: the version and a hash of the installed package's source.

A ``SERVICE_STARTED`` entry records both, so the log shows which code produced every entry after
it, as gaming regulators ask of significant events and software changes.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import gnau_service
from gnau_service.audit.entries import JsonValue


def package_digest(root: Path | None = None) -> str:
    """SHA-256 over every ``.py`` file of the package: its path relative to the package and its
    bytes, each length-prefixed, in path order. Bytecode caches and data files do not count."""
    root = root or Path(gnau_service.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py"), key=lambda p: p.relative_to(root).as_posix()):
        name = path.relative_to(root).as_posix().encode()
        data = path.read_bytes()
        digest.update(len(name).to_bytes(4, "big") + name + len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


@functools.cache
def software_identity() -> dict[str, JsonValue]:
    """The ``software`` member of a SERVICE_STARTED entry and of every ROUND_DEALT entry. Read
    once: the installed files do not change under a running process. Callers must not mutate
    the dict (each entry's payload copies it)."""
    return {"name": "gnau-service", "version": gnau_service.__version__, "sha256": package_digest()}
