"""Who made a change: the ``actor`` member an entry's payload carries (issue 37).

Every entry the service writes names its actor, a string in one of four forms:

========================  ================================================================
``token:NAME``            a bearer token, by its name in the token file
                          (``[A-Za-z0-9][A-Za-z0-9._-]{0,63}``)
``cert:CN``               a client certificate, by the subject common name the mTLS mapping
                          names it by
``service``               the service itself: starting, stopping, its settings, and the rounds
                          it completes at their deadline
``console``               an act on the host with the service's files and no credential
                          (``gnau key rotate``, ``gnau token add`` and ``revoke``)
========================  ================================================================

An actor is at most :data:`MAX_ACTOR_BYTES` bytes of UTF-8 and holds no control character
(U+0000..U+001F, U+007F). Older logs have no actor, so readers take the member as optional, but
one that is present must pass :func:`check_actor`.

>>> token_actor("casino-a-platform"), cert_actor("platform.casino-a.example")
('token:casino-a-platform', 'cert:platform.casino-a.example')
>>> check_actor(SERVICE) is None, check_actor("token:casino-a-platform") is None
(True, True)
>>> check_actor("root")
"actor 'root' is not service, console, token:NAME or cert:CN"
"""

from __future__ import annotations

import re
from typing import Final

from gnau_service.common.quoting import quoted

SERVICE: Final = "service"
CONSOLE: Final = "console"
TOKEN_PREFIX: Final = "token:"  # noqa: S105  (a label, not a secret)
CERT_PREFIX: Final = "cert:"
#: The most bytes of UTF-8 an actor may take, prefix included.
MAX_ACTOR_BYTES: Final = 256

# The token file's name rule (gnau_service.server.process.tokens.NAME_PATTERN): the audit layer
# reads logs on machines without the server, so it keeps its own copy; a test holds them equal.
TOKEN_NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: The control characters no actor, and no reason of a void, may hold (C0 and DEL).
CONTROL_CHARACTER: Final = re.compile(r"[\x00-\x1f\x7f]")


def check_actor(value: object) -> str | None:
    """Why ``value`` is not an actor, or None when it is one. A reader calls this on the
    ``actor`` member of a payload that has one.

    >>> check_actor(CONSOLE) is None, check_actor("cert:platform.example") is None
    (True, True)
    >>> check_actor(7)
    'actor 7 is not a string'
    >>> check_actor("token:-x")
    "actor 'token:-x' names a token by something that is not a token name"
    >>> check_actor("cert:")
    "actor 'cert:' names no certificate"
    >>> check_actor("cert:a\\nb")
    "actor 'cert:a\\\\nb' holds a control character"
    """
    if not isinstance(value, str):
        return f"actor {quoted(value)} is not a string"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return f"actor {quoted(value)} is not valid Unicode (a lone surrogate)"
    if size > MAX_ACTOR_BYTES:
        return f"actor {quoted(value)} is longer than {MAX_ACTOR_BYTES} bytes of UTF-8"
    if CONTROL_CHARACTER.search(value):
        return f"actor {quoted(value)} holds a control character"
    if value in (SERVICE, CONSOLE):
        return None
    if value.startswith(TOKEN_PREFIX):
        if TOKEN_NAME_PATTERN.fullmatch(value.removeprefix(TOKEN_PREFIX)) is None:
            return f"actor {quoted(value)} names a token by something that is not a token name"
        return None
    if value.startswith(CERT_PREFIX):
        if not value.removeprefix(CERT_PREFIX):
            return f"actor {quoted(value)} names no certificate"
        return None
    return f"actor {quoted(value)} is not service, console, token:NAME or cert:CN"


def token_actor(name: str) -> str:
    """The actor of a request made with the bearer token named ``name``. Raises ValueError for
    a name the token file could not hold.

    >>> token_actor("Alice Smith")
    Traceback (most recent call last):
    ...
    ValueError: actor 'token:Alice Smith' names a token by something that is not a token name
    """
    return _checked(TOKEN_PREFIX + name)


def cert_actor(common_name: str) -> str:
    """The actor of a request made with a client certificate whose subject common name the mTLS
    mapping names as ``common_name``. Raises ValueError for a name no actor may hold (empty,
    too long, or with a control character): the mapping's names are the operator's, so this is
    a configuration fault to refuse at start, not a request's.
    """
    return _checked(CERT_PREFIX + common_name)


def _checked(actor: str) -> str:
    problem = check_actor(actor)
    if problem is not None:
        raise ValueError(problem)
    return actor
