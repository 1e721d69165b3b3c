"""Database URLs in messages and logs: never with their password."""

from __future__ import annotations

import re
from typing import Final

#: The password of a URL's user part: from the user's colon to the last ``@`` of the authority
#: (which ends at the first ``/``, ``?`` or ``#``), so a password holding an ``@`` goes too.
_USER_PASSWORD: Final = re.compile(r"^([a-z][a-z0-9+.-]*://[^:@/?#]*):[^/?#]*@", re.IGNORECASE)
_PASSWORD_PARAMETER: Final = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def redacted_url(url: str) -> str:
    """``url`` without its password, in the user part or a ``password=`` parameter.

    >>> redacted_url("postgresql://gnau:s3cret@db:5432/gnau?password=s3cret&sslmode=require")
    'postgresql://gnau:***@db:5432/gnau?password=***&sslmode=require'
    >>> redacted_url("postgresql://gnau:p@ss@db.example/gnau?sslmode=require&Password=x")
    'postgresql://gnau:***@db.example/gnau?sslmode=require&Password=***'
    >>> redacted_url("postgresql://db:5432/gnau?user=a@b")
    'postgresql://db:5432/gnau?user=a@b'
    >>> redacted_url("sqlite:///gnau-data/gnau.db")
    'sqlite:///gnau-data/gnau.db'
    """
    return _PASSWORD_PARAMETER.sub(r"\1***", _USER_PASSWORD.sub(r"\1:***@", url))
