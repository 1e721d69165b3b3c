"""Pages of a table's rounds: their size, and the token that asks for the next one (AIP-158).

A token holds the table and the operator it was returned for (None: every operator's) and the
position after the page's last round (its creation time and id), so a token is refused for
another table or another operator.

>>> token = next_page_token("table 7", "casino-a", "2026-01-02T03:04:05.000000Z", "r-1")
>>> read_page_token(token, "table 7", "casino-a")
('2026-01-02T03:04:05.000000Z', 'r-1')
>>> read_page_token(token, "table 7", None)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
gnau_service.rounds.refusals.InvalidRequest: ...
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


def next_page_token(table_id: str, operator: str | None, created_at: str, round_id: str) -> str:
    """The token of the page after the round ``round_id`` (created at ``created_at``) of a
    listing of ``table_id`` at ``operator``."""
    # The table and the operator are inside, so a token is refused for others (AIP-158).
    position = [table_id, created_at, round_id, operator]
    return base64.urlsafe_b64encode(json.dumps(position).encode()).decode()


def read_page_token(token: str, table_id: str, operator: str | None) -> tuple[str, str]:
    """The position (creation time, round id) a token returned for ``table_id`` at
    ``operator`` names."""
    try:
        if len(token) > MAX_PAGE_TOKEN_CHARS:
            raise ValueError("too long")
        token_table, created_at, round_id, token_operator = json.loads(
            base64.urlsafe_b64decode(token.encode())
        )
        if not all(isinstance(value, str) for value in (token_table, created_at, round_id)):
            raise TypeError("not a token")
        if token_operator is not None and not isinstance(token_operator, str):
            raise TypeError("not a token")
        parse_utc_timestamp(created_at)
        check_round_id(round_id)
    except (ValueError, TypeError, binascii.Error, InvalidRequest):
        raise InvalidRequest([("page_token", "is not a token this service returned")]) from None
    if token_table != table_id:
        raise InvalidRequest(
            [("page_token", "was returned for another table_id; page with the same table_id")]
        )
    if token_operator != operator:
        raise InvalidRequest(
            [("page_token", "was returned for another operator; page as the same operator")]
        )
    return created_at, round_id
