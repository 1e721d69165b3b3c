"""Who may call what: bearer tokens (or mTLS identities) mapped to roles, and one policy table.

- ``operator``: everything, including every DealerService mutation;
- ``auditor``: every read: rounds, log entries, proofs, keys, round verification;
- ``public`` (no credentials): checkpoints, proofs, keys, hand evaluation, and rounds (and
  their receipts) whose seed is already public (the servicer checks the round's state).

Tokens live in a JSON file ``{"tokens": {"<token>": "operator", ...}}`` that must not be readable
by others, like the log key. On first start the service creates one with a fresh operator token.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

from gnau_service.audit.signing import KeyFileError, read_private_file


class Role(StrEnum):
    PUBLIC = "public"
    AUDITOR = "auditor"
    OPERATOR = "operator"


_EVERYONE: Final = frozenset(Role)
_READERS: Final = frozenset({Role.AUDITOR, Role.OPERATOR})
_OPERATORS: Final = frozenset({Role.OPERATOR})

#: Which roles may call each method; a method not listed is refused to everyone.
POLICY: Final[dict[str, frozenset[Role]]] = {
    "/gnau.v1.DealerService/Shuffle": _OPERATORS,
    "/gnau.v1.DealerService/Deal": _OPERATORS,
    "/gnau.v1.DealerService/Reveal": _OPERATORS,
    "/gnau.v1.DealerService/Settle": _OPERATORS,
    "/gnau.v1.DealerService/VoidRound": _OPERATORS,
    "/gnau.v1.DealerService/GetRound": _EVERYONE,  # public: revealed rounds only
    "/gnau.v1.DealerService/ListRounds": _EVERYONE,  # public: revealed rounds only
    "/gnau.v1.DealerService/GetRoundReceipt": _EVERYONE,  # public: revealed rounds only
    "/gnau.v1.DealerService/EvaluateHand": _EVERYONE,
    "/gnau.v1.AuditService/GetCheckpoint": _EVERYONE,
    "/gnau.v1.AuditService/GetCheckpoints": _EVERYONE,
    "/gnau.v1.AuditService/GetInclusionProof": _EVERYONE,
    "/gnau.v1.AuditService/GetConsistencyProof": _EVERYONE,
    "/gnau.v1.AuditService/GetPublicKeys": _EVERYONE,
    "/gnau.v1.AuditService/GetEntries": _READERS,
    "/gnau.v1.AuditService/WatchEntries": _READERS,
    "/gnau.v1.AuditService/VerifyRound": _READERS,
}

#: Infrastructure every client may use: health checks and (if enabled) reflection.
OPEN_PREFIXES: Final = ("/grpc.health.v1.", "/grpc.reflection.")


class AuthConfigError(ValueError):
    """A token file or mTLS mapping the service cannot use; the message names it."""


@dataclass(frozen=True)
class Credentials:
    """Known bearer tokens and mTLS common names, each with its role."""

    tokens: dict[str, Role]
    mtls_names: dict[str, Role]

    def role_of_token(self, token: str) -> Role | None:
        # Compare every token in constant time, so timing reveals nothing about them.
        found = None
        for known, role in self.tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = role
        return found


def allowed(method: str, role: Role) -> bool:
    if method.startswith(OPEN_PREFIXES):
        return True
    return role in POLICY.get(method, frozenset())


def load_tokens(path: Path) -> dict[str, Role]:
    """Read a token file, refusing one that group or others may read."""
    try:
        text = read_private_file(path, "token file").decode("utf-8")
    except (KeyFileError, UnicodeDecodeError) as error:
        raise AuthConfigError(str(error)) from None
    try:
        tokens = json.loads(text)["tokens"]
        return {str(token): Role(role) for token, role in tokens.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise AuthConfigError(
            f'token file {path} must be {{"tokens": {{"<token>": "operator|auditor|public"}}}}: '
            f"{error}"
        ) from None


def ensure_token_file(path: Path) -> str | None:
    """Create ``path`` with a fresh operator token unless it exists; return the new token."""
    if path.exists():
        return None
    token = secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        json.dump({"tokens": {token: str(Role.OPERATOR)}}, file, indent=2)
        file.write("\n")
    return token
