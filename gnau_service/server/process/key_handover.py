"""How a new log key reaches the key file, and how a running process finds it there.

``gnau key rotate`` never lets the log name a key that exists nowhere but in its memory:

1. the new key is written, atomically at 0600, to the *staged* file ``<key file>.next``;
2. the rotation entry (signed by the old key) is appended, which makes the new key current;
3. the staged file is renamed over the key file.

A crash after step 1 leaves a staged key that the log does not name (the next rotation replaces
it); a crash after step 2 leaves the current key staged, and ``gnau key rotate`` run again
finishes step 3. A running process that finds the log's key changed looks for the current key
with :func:`key_file_source`: in the key file, then in the staged file (so the moment between
steps 2 and 3 refuses nothing).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.note import KeyFormatError
from gnau_service.audit.signing import LogSigner, private_key_pem
from gnau_service.common.private_files import KeyFileError, sync_directory, write_private_file

STAGED_SUFFIX: Final = ".next"


def staged_key_path(key_path: str | os.PathLike[str]) -> Path:
    """Where a rotation stages the new key: beside the key file, so a rename installs it.

    >>> staged_key_path("/var/lib/gnau/log-signing-key.pem")
    PosixPath('/var/lib/gnau/log-signing-key.pem.next')
    """
    path = Path(key_path)
    return path.with_name(path.name + STAGED_SUFFIX)


def write_key_file(path: str | os.PathLike[str], key: Ed25519PrivateKey) -> None:
    """Write ``key`` as an unencrypted PKCS#8 PEM file, atomically, at mode 0600."""
    write_private_file(path, private_key_pem(key))


def install_staged_key(key_path: str | os.PathLike[str]) -> None:
    """Rename the staged key over the key file (atomic: a reader sees one key or the other)."""
    path = Path(key_path)
    os.replace(staged_key_path(path), path)
    sync_directory(path.parent)


def key_file_source(
    origin: str, key_path: str | os.PathLike[str]
) -> Callable[[str], LogSigner | None]:
    """A store's ``key_source``: the signer of the wanted key (a verifier key string) from the
    key file or its staged successor, read afresh on each call; None if neither holds it.

    Raises :class:`~gnau_service.common.private_files.KeyFileError` if neither holds it and the key
    file cannot be used (unsafe mode, not a key), so the operator learns why."""
    paths = (Path(key_path), staged_key_path(key_path))

    def find(wanted: str) -> LogSigner | None:
        problem: Exception | None = None
        for path in paths:
            if not path.exists():
                continue
            try:
                signer = LogSigner.from_key_file(origin, path)
            except (KeyFileError, KeyFormatError) as error:
                problem = problem or error
                continue
            if signer.vkey == wanted:
                return signer
        if problem is not None:
            raise problem
        return None

    return find
