"""What every verifier here shares: the failure, strict JSON, hex, times (docs/audit.md, Entries;
docs/fairness.md, Step 4: reveal)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

#: Every number of a log entry is an integer within ±(2^53 - 1) (docs/audit.md, Entries).
SAFE = 2**53 - 1
#: Objects and arrays nest at most this deep in an entry, the entry itself being level 1.
MAX_DEPTH = 32


class VerificationError(Exception):
    """A check failed; the message says which and why."""


def check(ok: object, reason: str) -> None:
    if not ok:
        raise VerificationError(reason)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    names = [name for name, _ in pairs]
    check(len(set(names)) == len(names), "a member appears twice")
    return dict(pairs)


def _no_constant(name: str) -> None:
    raise VerificationError(f"{name} is not JSON")


def read_json(text: str) -> Any:
    """RFC 8259 JSON, strictly: no member twice, no NaN or Infinity. Anything the reader cannot
    take (too deep, an integer of thousands of digits) is refused the same way."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except VerificationError:
        raise
    except (ValueError, RecursionError) as error:
        raise VerificationError(f"not JSON: {type(error).__name__}") from None


def _safe_integer(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise VerificationError("an integer too long to read") from None
    check(-SAFE <= value <= SAFE, f"the number {text[:30]} is beyond ±(2^53-1)")
    return value


def _not_an_integer(text: str) -> None:
    raise VerificationError(f"the number {text[:30]} is not an integer")


def read_entry_json(text: str) -> Any:
    """An entry's JSON: as :func:`read_json`, and every number an integer within ±(2^53-1)
    written as one (``1.0`` and ``1e2`` are refused), nested at most 32 levels."""
    try:
        value = json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_no_constant,
            parse_int=_safe_integer,
            parse_float=_not_an_integer,
        )
    except VerificationError:
        raise
    except (ValueError, RecursionError) as error:
        raise VerificationError(f"not JSON: {type(error).__name__}") from None
    check(depth(value) <= MAX_DEPTH, f"nested deeper than {MAX_DEPTH} levels")
    return value


def depth(value: Any) -> int:
    """Nesting levels of objects and arrays; a scalar is 0."""
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


def is_int(value: object) -> bool:
    """A JSON integer (a boolean is not one)."""
    return type(value) is int


HEX = re.compile(r"(?:[0-9a-fA-F]{2})*")
LOWER_HEX = re.compile(r"[0-9a-f]*")


def read_hex(value: object, path: str, *, size: int | None = None, limit: int = 1 << 30) -> bytes:
    """Hex bytes, either case (docs/fairness.md, Step 4: reveal)."""
    check(isinstance(value, str) and HEX.fullmatch(value), f"{path} is not hex")
    assert isinstance(value, str)
    data = bytes.fromhex(value)
    check(size is None or len(data) == size, f"{path} is not {size} bytes")
    check(len(data) <= limit, f"{path} is more than {limit} bytes")
    return data


def is_lower_hex(value: object, digits: int) -> bool:
    return isinstance(value, str) and len(value) == digits and bool(LOWER_HEX.fullmatch(value))


TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?Z")


def read_time(value: object) -> datetime:
    """The log's one RFC 3339 UTC spelling, a real instant (no February 30, no second 60)."""
    check(isinstance(value, str) and TIME.fullmatch(value), f"{value!r:.60} is not a log time")
    assert isinstance(value, str)
    try:
        return datetime.fromisoformat(value[:-1]).replace(tzinfo=UTC)
    except ValueError:
        raise VerificationError(f"{value!r} is not a real instant") from None


def utf8(text: str, path: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise VerificationError(f"{path} holds a lone surrogate") from None
