"""The logs a witness follows: ``LOGS.toml``, read once at start.

::

    # The URL path the add-checkpoint endpoint lives under ("" for the root): the
    # tlog-witness "submission prefix". POST <prefix>/add-checkpoint.
    prefix = "/witness"

    [[log]]
    origin = "gnau-dealer/eu-prod-1"
    # The log's verifier keys (signed-note vkeys, type 0x01). A checkpoint is accepted when any
    # one of them signed it: list the new key here before the log rotates to it.
    keys = ["gnau-dealer/eu-prod-1+1a2b3c4d+AT..."]

Each origin appears once; unknown keys (in the file or in a table) are refused, so a typo does
not silently leave a log unwitnessed.

>>> logs = parse_logs('''
... prefix = "/w"
... [[log]]
... origin = "example.com/foo"
... keys = ["example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"]
... ''')
>>> logs.prefix, [key.key_id.hex() for key in logs.keys_for("example.com/foo")]
('/w', ['530d903a'])
>>> logs.keys_for("example.com/bar") is None
True
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from gnau_service.audit.note import NoteError, Verifier

_PREFIX: Final = re.compile(r"(/[A-Za-z0-9._~-]+)*", re.ASCII)
_TOP_KEYS: Final = frozenset({"prefix", "log"})
_LOG_KEYS: Final = frozenset({"origin", "keys"})


class LogsFileError(ValueError):
    """A LOGS.toml that cannot be used; the message says where and why."""


@dataclass(frozen=True)
class TrustedLogs:
    """The submission prefix, and each followed log's origin with the keys trusted to sign it."""

    prefix: str
    logs: Mapping[str, tuple[Verifier, ...]]

    def keys_for(self, origin: str) -> tuple[Verifier, ...] | None:
        """The keys trusted for ``origin``; None if the witness does not follow that log."""
        return self.logs.get(origin)


def load_logs(path: str | Path) -> TrustedLogs:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise LogsFileError(f"cannot read {path}: {error}") from None
    try:
        return parse_logs(text)
    except LogsFileError as error:
        raise LogsFileError(f"{path}: {error}") from None


def parse_logs(text: str) -> TrustedLogs:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise LogsFileError(f"not valid TOML: {error}") from None
    _refuse_unknown(document, _TOP_KEYS, "the file")
    prefix = document.get("prefix", "")
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise LogsFileError(
            f"prefix {str(prefix)[:60]!r} must be empty or a path like '/witness' "
            "(no trailing slash)"
        )
    tables = document.get("log", [])
    if not isinstance(tables, list) or not tables:
        raise LogsFileError("no [[log]] tables: a witness must follow at least one log")
    logs: dict[str, tuple[Verifier, ...]] = {}
    for number, table in enumerate(tables, start=1):
        origin, keys = _log_table(table, number)
        if origin in logs:
            raise LogsFileError(f"[[log]] {number}: origin {origin!r} appears twice")
        logs[origin] = keys
    return TrustedLogs(prefix, logs)


def _log_table(table: Any, number: int) -> tuple[str, tuple[Verifier, ...]]:
    where = f"[[log]] {number}"
    if not isinstance(table, dict):
        raise LogsFileError(f"{where} is not a table")
    _refuse_unknown(table, _LOG_KEYS, where)
    origin, keys = table.get("origin"), table.get("keys")
    if not isinstance(origin, str) or not origin or "\n" in origin:
        raise LogsFileError(f"{where}: origin must be a non-empty one-line string")
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
        raise LogsFileError(f"{where} ({origin}): keys must be a non-empty list of vkey strings")
    try:
        verifiers = tuple(dict.fromkeys(Verifier.from_vkey(key) for key in keys))
    except NoteError as error:
        raise LogsFileError(f"{where} ({origin}): {error}") from None
    return origin, verifiers


def _refuse_unknown(table: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise LogsFileError(f"{where} has unknown keys: {', '.join(unknown)[:200]}")
