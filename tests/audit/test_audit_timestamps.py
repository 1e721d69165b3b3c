"""The one RFC 3339 UTC spelling the audit log accepts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from gnau_service.audit.timestamps import (
    TimestampError,
    format_utc_timestamp,
    parse_utc_timestamp,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-03-01T12:00:00Z", datetime(2025, 3, 1, 12, tzinfo=UTC)),
        ("2025-03-01T12:00:00.5Z", datetime(2025, 3, 1, 12, 0, 0, 500000, tzinfo=UTC)),
        ("2024-02-29T23:59:59.123456Z", datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=UTC)),
    ],
)
def test_accepted_timestamps(text: str, expected: datetime) -> None:
    assert parse_utc_timestamp(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "2025-03-01T12:00:00",  # no zone
        "2025-03-01T12:00:00+00:00",  # offset instead of Z
        "2025-03-01t12:00:00z",  # lower case
        "2025-03-01 12:00:00Z",  # space
        "2025-03-01T12:00:00.1234567Z",  # more than microseconds
        "2025-03-01T12:00Z",  # no seconds
        "2025-3-01T12:00:00Z",  # short month
        "2025-02-29T12:00:00Z",  # not a leap year
        "2016-12-31T23:59:60Z",  # leap second
        "\uff12\uff10\uff12\uff15-03-01T12:00:00Z",  # full-width digits
        "",
    ],
)
def test_refused_timestamps(text: str) -> None:
    with pytest.raises(TimestampError):
        parse_utc_timestamp(text)


def test_format_converts_to_utc_and_round_trips() -> None:
    moment = datetime(2025, 3, 1, 13, 30, tzinfo=timezone(timedelta(hours=1, minutes=30)))
    assert format_utc_timestamp(moment) == "2025-03-01T12:00:00.000000Z"
    assert parse_utc_timestamp(format_utc_timestamp(moment)) == moment
    with pytest.raises(TimestampError, match="naive"):
        format_utc_timestamp(datetime(2025, 3, 1))
