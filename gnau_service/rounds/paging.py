"""Pages of a table's rounds: their size, and the token that asks for the next one (AIP-158).

A token holds the table it was returned for and the position after the page's last round (its
creation time and id), so a token is refused for another table.

>>> token = next_page_token("table 7", "2026-01-02T03:04:05.000000Z", "r-1")
>>> read_page_token(token, "table 7")
('2026-01-02T03:04:05.000000Z', 'r-1')
>>> page_limit(0), page_limit(20), page_limit(10**6)
(50, 20, 1000)
"""

from __future__ import annotations

import base64
import binascii
import json

from gnau_service.audit.timestamps import parse_utc_timestamp
from gnau_service.rounds.limits import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, MAX_PAGE_TOKEN_CHARS
from gnau_service.rounds.refusals import InvalidRequest
from gnau_service.rounds.requests import check_round_id


def page_limit(page_size: int) -> int:
    """How many rounds a page holds when ``page_size`` are asked for (0: the default)."""
    if page_size < 0:
        raise InvalidRequest([("page_size", "must not be negative")])
    return min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


def next_page_token(table_id: str, created_at: str, round_id: str) -> str:
    """The token of the page after the round ``round_id`` (created at ``created_at``)."""
    # The table is inside, so a token is refused for another table (AIP-158).
    return base64.urlsafe_b64encode(json.dumps([table_id, created_at, round_id]).encode()).decode()


def read_page_token(token: str, table_id: str) -> tuple[str, str]:
    """The position (creation time, round id) a token returned for ``table_id`` names."""
    try:
        if len(token) > MAX_PAGE_TOKEN_CHARS:
            raise ValueError("too long")
        token_table, created_at, round_id = json.loads(base64.urlsafe_b64decode(token.encode()))
        if not all(isinstance(value, str) for value in (token_table, created_at, round_id)):
            raise TypeError("not a token")
        parse_utc_timestamp(created_at)
        check_round_id(round_id)
    except (ValueError, TypeError, binascii.Error, InvalidRequest):
        raise InvalidRequest([("page_token", "is not a token this service returned")]) from None
    if token_table != table_id:
        raise InvalidRequest(
            [("page_token", "was returned for another table_id; page with the same table_id")]
        )
    return created_at, round_id
