"""Database URLs in messages: never with their password."""

from __future__ import annotations

import urllib.parse


def redacted_url(url: str) -> str:
    """A database URL without its password, in the user part or the query, for any message.

    >>> redacted_url("postgresql://gnau:s3cret@db:5432/gnau?password=s3cret&sslmode=require")
    'postgresql://gnau:***@db:5432/gnau?password=***&sslmode=require'
    >>> redacted_url("sqlite:///gnau-data/gnau.db")
    'sqlite:///gnau-data/gnau.db'
    """
    parts = urllib.parse.urlsplit(url)
    query = [item.partition("=") for item in parts.query.split("&") if item]
    if parts.password is None and all(key.lower() != "password" for key, _, _ in query):
        return url  # nothing to hide (and urlunsplit would respell sqlite:/// as sqlite:/)
    netloc = parts.netloc
    if parts.password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}:***@{host}"
    hidden = "&".join(
        f"{key}=***" if key.lower() == "password" else f"{key}{sep}{value}"
        for key, sep, value in query
    )
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=hidden))
