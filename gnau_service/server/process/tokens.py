"""The token file: each bearer token's SHA-256 hash, with a name, a role, an operator and when
it was made.

The file (mode 0600) holds no token itself, only hashes::

    {"tokens": [
      {"name": "ci-audit", "role": "auditor", "operator": "casino-a",
       "sha256": "<64 hex digits: SHA-256 of the token's UTF-8 bytes>",
       "created": "2026-11-30T19:04:05Z"}
    ]}

Names are unique, 1 to 64 characters of letters, digits, ``.``, ``_`` and ``-``, starting with a
letter or digit. ``created`` may be null (a token from the older format). ``operator``
(:mod:`~gnau_service.audit.operators`) is the operator whose tables, rounds and players the token
reaches: an operator id, or ``"*"`` for an auditor of every operator (a regulator); an operator
token belongs to exactly one operator, and a public token to none (it has no ``operator``). A
record without it, from before operators, reads as it worked then: an operator token belongs to
``default``, an auditor token to every operator; the next ``gnau token`` command writes it out.

The older format, ``{"tokens": {"<token>": "<role>"}}`` (which a service still writes on its
first start, so that ``gnau play`` finds the local operator token), is read too: each token is
hashed on load and named ``legacy-`` and the first 8 hex digits of its hash. The next
``gnau token`` command rewrites the file in the format above.

Changes are written whole (:func:`~gnau_service.common.private_files.write_private_file`) under
:func:`~gnau_service.common.private_files.exclusive_lock`, so a server rereading the file sees
the old list or the new, and two ``gnau token`` commands at once lose neither change.

No error message here quotes a value from the file: a malformed file may hold a token in any
place, and these messages go to logs.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from gnau_service.audit.actors import CONSOLE, token_actor
from gnau_service.audit.entries import JsonValue, is_hash_hex
from gnau_service.audit.operators import ALL_OPERATORS, DEFAULT_OPERATOR, OPERATOR_FIELD
from gnau_service.audit.timestamps import format_utc_timestamp
from gnau_service.common.private_files import (
    KeyFileError,
    create_private_file,
    exclusive_lock,
    read_private_file,
    write_private_file,
)
from gnau_service.common.strict_json import JsonTextError, read_json
from gnau_service.server.grpc.auth import AuthConfigError, Caller, Role, caller_of, hash_token

NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
LEGACY_PREFIX: Final = "legacy-"


class TokenNotFound(LookupError):  # noqa: N818  (a lookup that found nothing)
    """No token of that name."""


@dataclass(frozen=True)
class TokenRecord:
    """One token as the file keeps it: never the token, only its hash."""

    name: str
    role: Role
    sha256: str
    created: str | None
    #: An operator id, or :data:`~gnau_service.audit.operators.ALL_OPERATORS` (an auditor's);
    #: None for a public token (see :func:`token_operator`).
    operator: str | None

    @property
    def caller(self) -> Caller:
        """Who a call with this token comes from: the log names it by the token's name."""
        return caller_of(self.role, token_actor(self.name), self.operator)

    def to_json(self) -> dict[str, str | None]:
        held = {"name": self.name, "role": str(self.role)}
        if self.operator is not None:
            held[OPERATOR_FIELD] = self.operator
        return {**held, "sha256": self.sha256, "created": self.created}


@dataclass(frozen=True)
class TokenFile:
    """A token file's records; ``legacy_tokens`` are the tokens themselves, when the file is in
    the older format (for ``gnau play``'s local operator token), else empty."""

    records: tuple[TokenRecord, ...]
    legacy_tokens: dict[str, Role] = field(default_factory=dict, repr=False)

    @property
    def hashes(self) -> dict[str, Role]:
        """Each token hash and its role."""
        return {record.sha256: record.role for record in self.records}

    @property
    def callers(self) -> dict[str, Caller]:
        """Each token hash and its caller, for
        :class:`~gnau_service.server.grpc.auth.Credentials`."""
        return {record.sha256: record.caller for record in self.records}


def read_token_file(path: Path) -> TokenFile:
    """Read a token file in either format; :class:`AuthConfigError` names what is wrong."""
    try:
        document = read_json(read_private_file(path, "token file"))
    except KeyFileError as error:
        raise AuthConfigError(str(error)) from None
    except JsonTextError as error:  # it gives a line and column, never the text
        raise AuthConfigError(f"token file {path} is {error}") from None
    tokens = document.get("tokens") if isinstance(document, dict) else None
    if isinstance(tokens, dict):
        return _legacy(path, tokens)
    if isinstance(tokens, list):
        return TokenFile(_records(path, tokens))
    raise AuthConfigError(
        f'token file {path} must be {{"tokens": [{{"name": ..., "role": ..., "sha256": ..., '
        '"created": ...}, ...]} (see docs/configuration.md)'
    )


def token_operator(role: Role, stated: str | None) -> str | None:
    """The operator a token record of ``role`` keeps, from the one ``stated`` (in the file, or
    by ``gnau token add --operator``; None where none is): see the module's text.
    :class:`AuthConfigError` says why a stated one cannot be.

    >>> token_operator(Role.OPERATOR, None), token_operator(Role.AUDITOR, None)
    ('default', '*')
    >>> token_operator(Role.AUDITOR, "casino-a"), token_operator(Role.PUBLIC, None)
    ('casino-a', None)
    >>> token_operator(Role.PUBLIC, "casino-a")
    Traceback (most recent call last):
    ...
    gnau_service.server.grpc.auth.AuthConfigError: a public token has no operator
    """
    if role is Role.PUBLIC:
        if stated is not None:
            raise AuthConfigError("a public token has no operator")
        return None
    if stated is None:
        return DEFAULT_OPERATOR if role is Role.OPERATOR else ALL_OPERATORS
    caller_of(role, "", stated)  # refuses an operator id that is none, and "*" for an operator
    return stated


def _role(path: Path, where: str, value: object) -> Role:
    if isinstance(value, str) and value in _ROLE_VALUES:
        return Role(value)
    raise AuthConfigError(f"token file {path}: {where}: the role must be one of {_ROLES}")


_ROLE_VALUES: Final = frozenset(role.value for role in Role)
_ROLES: Final = ", ".join(Role)


def _legacy(path: Path, tokens: dict[object, object]) -> TokenFile:
    plain: dict[str, Role] = {}
    records = []
    for number, (token, role) in enumerate(tokens.items(), start=1):
        if not isinstance(token, str) or not token:
            raise AuthConfigError(f"token file {path}: token {number} is empty")
        plain[token] = _role(path, f"token {number}", role)
        digest = hash_token(token)
        name = LEGACY_PREFIX + digest[:8]
        operator = token_operator(plain[token], None)
        records.append(TokenRecord(name, plain[token], digest, None, operator))
    return TokenFile(tuple(records), plain)


def _records(path: Path, items: list[object]) -> tuple[TokenRecord, ...]:
    records = []
    names: set[str] = set()
    for number, item in enumerate(items, start=1):
        where = f"token {number}"
        if not isinstance(item, dict):
            raise AuthConfigError(f"token file {path}: {where} is not an object")
        name, digest, created = item.get("name"), item.get("sha256"), item.get("created")
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise AuthConfigError(f"token file {path}: {where}: the name is not a valid name")
        if name in names:
            raise AuthConfigError(f"token file {path}: the name {name} is used twice")
        if not is_hash_hex(digest):
            raise AuthConfigError(
                f"token file {path}: {where}: sha256 must be 64 lowercase hex digits"
            )
        if created is not None and not isinstance(created, str):
            raise AuthConfigError(f"token file {path}: {where}: created must be a time or null")
        role = _role(path, where, item.get("role"))
        stated = item.get(OPERATOR_FIELD)
        if stated is not None and not isinstance(stated, str):
            raise AuthConfigError(f"token file {path}: {where}: the operator is not a string")
        try:
            operator = token_operator(role, stated)
        except AuthConfigError:  # the reason may quote the value: say it without
            raise AuthConfigError(
                f"token file {path}: {where}: the operator must be an operator id (1 to 64 of "
                "a-z, 0-9, '.', '_', '-', starting with a letter or digit), or '*' for an "
                "auditor of every operator; a public token has none"
            ) from None
        names.add(name)
        records.append(TokenRecord(name, role, digest, created, operator))
    return tuple(records)


def token_changes(
    before: Iterable[TokenRecord], after: Iterable[TokenRecord]
) -> dict[str, JsonValue] | None:
    """The payload of a TOKENS_CHANGED entry for a token file that went from ``before`` to
    ``after``, or None if no token was added or revoked. A token is its hash, name, role and
    operator: one whose name, role or operator changed is listed as revoked and added. The entry
    names each by its name, role and operator (a public token's by its name and role) alone,
    never the token or its hash; the token file is changed by ``gnau token`` on the service's
    host, so the actor is the console.

    >>> old = TokenRecord("ci-audit", Role.AUDITOR, "ab" * 32, None, "*")
    >>> new = TokenRecord("ci-audit", Role.OPERATOR, "cd" * 32, "2026-12-01T00:00:00Z", "casino-a")
    >>> changes = token_changes([old], [new])
    >>> changes["actor"]
    'console'
    >>> changes["added"]
    [{'name': 'ci-audit', 'role': 'operator', 'operator': 'casino-a'}]
    >>> changes["revoked"]
    [{'name': 'ci-audit', 'role': 'auditor', 'operator': '*'}]
    >>> token_changes([old], [old]) is None
    True
    """

    def held(records: Iterable[TokenRecord]) -> set[tuple[str, str, str, str]]:
        return {
            (record.name, str(record.role), record.operator or "", record.sha256)
            for record in records
        }

    was, now = held(before), held(after)
    if was == now:
        return None

    def listed(tokens: set[tuple[str, str, str, str]]) -> list[JsonValue]:
        return [
            {"name": name, "role": role, **({OPERATOR_FIELD: operator} if operator else {})}
            for name, role, operator, _ in sorted(tokens)
        ]

    return {"actor": CONSOLE, "added": listed(now - was), "revoked": listed(was - now)}


def write_token_file(path: Path, records: tuple[TokenRecord, ...]) -> None:
    """Replace the token file with ``records`` in the current format (atomic, 0600)."""
    write_private_file(path, _document(records))


def _document(records: tuple[TokenRecord, ...]) -> bytes:
    return (json.dumps({"tokens": [r.to_json() for r in records]}, indent=2) + "\n").encode()


#: The name of the operator token a first start makes.
LOCAL_OPERATOR: Final = "local-operator"


def first_start_tokens(path: Path, token_path: Path) -> str | None:
    """On a first start (no token file at ``path`` yet): create it with one operator token's
    hash, named ``local-operator``, of the default operator, and write the token itself to
    ``token_path`` (0600) for the local command line (``gnau play`` reads it; the server never
    does). Returns the token; None if the token file exists (or a process starting beside this
    one has just made it).

    The token file is created first, and only by one process (it is linked into place, never
    replaced); a crash before ``token_path`` is written loses that token, which ``gnau token
    add`` replaces."""
    if path.exists():
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    token = new_token()
    created = format_utc_timestamp(datetime.now(UTC))
    record = TokenRecord(
        LOCAL_OPERATOR, Role.OPERATOR, hash_token(token), created, DEFAULT_OPERATOR
    )
    if not create_private_file(path, _document((record,))):
        return None
    write_private_file(token_path, (token + "\n").encode())
    return token


def _existing(path: Path) -> tuple[TokenRecord, ...]:
    return read_token_file(path).records if path.exists() else ()


def new_token() -> str:
    """A fresh bearer token: 256 random bits, URL-safe, never starting with ``-``: a command
    line's ``--token TOKEN`` would read such a token as an option (1 token in 64)."""
    while True:
        token = secrets.token_urlsafe(32)
        if not token.startswith("-"):
            return token


def default_name(role: Role) -> str:
    """A name for a token added without one: its role and 8 random hex digits."""
    return f"{role}-{secrets.token_hex(4)}"


def add_token(
    path: Path,
    role: Role,
    name: str,
    hand_over: Callable[[str], None] = lambda token: None,
    *,
    operator: str | None = None,
) -> tuple[TokenRecord, str]:
    """Add a fresh token to the file (creating it if need be): its record, and the token, which
    exists nowhere else. ``operator``: the one it belongs to, as :func:`token_operator` takes it
    (None: the default operator's operator token, or an auditor of every operator).
    ``hand_over(token)`` runs before the file is written (to put the token somewhere safe); if it
    raises, nothing is added."""
    try:
        kept_operator = token_operator(role, operator)
    except AuthConfigError as error:  # a command line's value, not a file's: say it
        raise ValueError(str(error)) from None
    if not NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"the name {name[:64]!r} is not valid: use 1 to 64 letters, digits, '.', '_' or "
            "'-', starting with a letter or digit"
        )
    with exclusive_lock(path):
        records = _existing(path)
        if any(record.name == name for record in records):
            raise ValueError(f"there is already a token named {name}")
        token = new_token()
        hand_over(token)
        created = format_utc_timestamp(datetime.now(UTC))
        record = TokenRecord(name, role, hash_token(token), created, kept_operator)
        write_token_file(path, (*records, record))
    return record, token


def revoke_token(path: Path, name: str) -> TokenRecord:
    """Remove the token named ``name``; :class:`TokenNotFound` if there is none."""
    with exclusive_lock(path):
        records = _existing(path)
        kept = tuple(record for record in records if record.name != name)
        if len(kept) == len(records):
            raise TokenNotFound(name)
        write_token_file(path, kept)
    return next(record for record in records if record.name == name)


def list_tokens(path: Path) -> tuple[TokenRecord, ...]:
    """The file's tokens, rewriting an older-format file in the current format first."""
    with exclusive_lock(path):
        token_file = read_token_file(path)
        if token_file.legacy_tokens:
            write_token_file(path, token_file.records)
    return token_file.records
