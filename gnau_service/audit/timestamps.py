"""RFC 3339 UTC timestamps, in the one spelling the audit log writes and accepts.

``YYYY-MM-DDTHH:MM:SS[.fraction]Z``: upper-case ``T`` and ``Z``, UTC only, 1 to 6 fraction
digits, no leap second (Python's datetime has none). One fixed shape is easy to check and to read
in signed bytes, and the pure core never reads a clock: callers pass the time in.

>>> format_utc_timestamp(parse_utc_timestamp("2025-03-01T12:00:00.5Z"))
'2025-03-01T12:00:00.500000Z'
>>> parse_utc_timestamp("2025-03-01 12:00:00+01:00")
Traceback (most recent call last):
...
gnau_service.audit.timestamps.TimestampError: '2025-03-01 12:00:00+01:00' is not an RFC 3339 UTC ...
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Final

_UTC_TIMESTAMP: Final = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z", re.ASCII)


class TimestampError(ValueError):
    """A timestamp that is not in the audit log's RFC 3339 UTC spelling, or not a real instant."""


def parse_utc_timestamp(text: str) -> datetime:
    """The instant ``text`` names, as an aware UTC datetime."""
    if not _UTC_TIMESTAMP.fullmatch(text):
        raise TimestampError(f"{text!r} is not an RFC 3339 UTC timestamp like 2025-03-01T12:00:00Z")
    try:
        return datetime.fromisoformat(text)
    except ValueError as error:  # e.g. February 30th, or second 60
        raise TimestampError(f"{text!r} is not a real instant: {error}") from error


def format_utc_timestamp(moment: datetime) -> str:
    """``moment`` (timezone-aware) in UTC with microseconds: ``2025-03-01T12:00:00.000000Z``."""
    if moment.tzinfo is None:
        raise TimestampError("a naive datetime has no defined instant; pass a timezone-aware one")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
