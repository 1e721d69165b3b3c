"""The witness key file: one ``PRIVATE+KEY+<name>+<key ID>+<base64>`` line, mode 0600.

The same rules as the log key (:mod:`gnau_service.audit.signing`): created whole, at 0600, never
over an existing file (:func:`~gnau_service.common.private_files.create_private_file`), and
refused on load if group or others may read it
(:func:`~gnau_service.common.private_files.read_private_file`). The line is the skey form of
:class:`~gnau_service.audit.cosignature.WitnessSigner`, which Go witness tooling reads too.
"""

from __future__ import annotations

import os
from pathlib import Path

from gnau_service.audit.cosignature import WitnessSigner
from gnau_service.audit.note import KeyFormatError
from gnau_service.common.private_files import KeyFileError, create_private_file, read_private_file


def create_witness_key(path: str | os.PathLike[str], name: str) -> WitnessSigner:
    """A new witness key named ``name``, written to ``path`` (0600); refuses to replace a file."""
    signer = WitnessSigner.generate(name)
    if not create_private_file(path, (signer.skey + "\n").encode("ascii")):
        raise KeyFileError(f"{os.fspath(path)} exists: a witness key is never overwritten")
    return signer


def load_witness_key(path: str | os.PathLike[str]) -> WitnessSigner:
    """The witness key in ``path``, refused if group or others may access the file (see
    :mod:`~gnau_service.common.secret_files`)."""
    data = read_private_file(path, what="witness key file")
    try:
        return WitnessSigner.from_skey(data.decode("ascii").strip())
    except (UnicodeDecodeError, KeyFormatError) as error:
        # The message never quotes the file: it holds the private key.
        reason = "not ASCII" if isinstance(error, UnicodeDecodeError) else str(error)
        raise KeyFileError(f"witness key file {Path(path)}: {reason}") from None
