"""Who may call what: bearer tokens (or mTLS identities) mapped to roles, and one policy table.

- ``operator``: every DealerService mutation and forgetting a player, and every read but the
  log's entries, which hold every operator's rounds;
- ``auditor``: every read: rounds, log entries (an auditor of every operator's only), proofs,
  keys, round verification, and the mapping between player ids and player references
  (LookupPlayer); and, with the operator, software authentication on demand (VerifySoftware,
  which logs its check);
- ``public`` (no credentials): checkpoints, proofs, keys, hand evaluation, and a round (and
  its receipt) whose seed is already public, by its id (the servicer checks the round's state);
  it lists rounds only if ``public_round_listing`` is on (the servicer checks that too).

Tokens live in a JSON file (mode 0600, like the log key) that keeps only each token's SHA-256
hash, with a name, a role and a creation time; :mod:`~gnau_service.server.process.tokens` reads and
writes it (and still reads the older ``{"tokens": {"<token>": "<role>"}}``), and ``gnau token
add|list|revoke`` manages it. On first start the service creates one with a fresh operator
token's hash, and puts the token itself in ``<data dir>/operator-token`` (0600) for the local
command line, which the server never reads. A running service rereads the file on SIGHUP and
when it changes (:mod:`~gnau_service.server.process.token_reload`): a revoked token is refused from
the next call.

Each operator and auditor credential belongs to one operator
(:mod:`~gnau_service.audit.operators`), or an auditor's to every operator (a regulator): a caller
of one operator reaches only that operator's tables, rounds and players (the dealer answers
another's round as one that does not exist), and may not read the audit log's entries
(:data:`EVERY_OPERATOR_METHODS`), which hold every operator's rounds.

A presented token is hashed and compared, in constant time, with every known hash.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from gnau_service.audit.operators import ALL_OPERATORS, DEFAULT_OPERATOR, check_operator


class Role(StrEnum):
    PUBLIC = "public"
    AUDITOR = "auditor"
    OPERATOR = "operator"


_EVERYONE: Final = frozenset(Role)
_READERS: Final = frozenset({Role.AUDITOR, Role.OPERATOR})
_AUDITORS: Final = frozenset({Role.AUDITOR})
_OPERATORS: Final = frozenset({Role.OPERATOR})

#: Which roles may call each method; a method not listed is refused to everyone.
POLICY: Final[dict[str, frozenset[Role]]] = {
    "/gnau.v1.DealerService/Shuffle": _OPERATORS,
    "/gnau.v1.DealerService/Deal": _OPERATORS,
    "/gnau.v1.DealerService/Reveal": _OPERATORS,
    "/gnau.v1.DealerService/Settle": _OPERATORS,
    "/gnau.v1.DealerService/VoidRound": _OPERATORS,
    "/gnau.v1.DealerService/GetRound": _EVERYONE,  # public: revealed rounds only
    "/gnau.v1.DealerService/ListRounds": _EVERYONE,  # public: only if public_round_listing
    "/gnau.v1.DealerService/GetRoundReceipt": _EVERYONE,  # public: revealed rounds only
    "/gnau.v1.DealerService/EvaluateHand": _EVERYONE,
    "/gnau.v1.DealerService/GetHouseRulesInfo": _EVERYONE,
    "/gnau.v1.DealerService/ForgetPlayer": _OPERATORS,
    "/gnau.v1.DealerService/PutTable": _OPERATORS,
    "/gnau.v1.DealerService/SetTableEnabled": _OPERATORS,
    "/gnau.v1.DealerService/ListTables": _READERS,
    "/gnau.v1.AuditService/GetCheckpoint": _EVERYONE,
    "/gnau.v1.AuditService/GetCheckpoints": _EVERYONE,
    "/gnau.v1.AuditService/GetInclusionProof": _EVERYONE,
    "/gnau.v1.AuditService/GetConsistencyProof": _EVERYONE,
    "/gnau.v1.AuditService/GetPublicKeys": _EVERYONE,
    # Every operator's entries: an auditor's of every operator (EVERY_OPERATOR_METHODS).
    "/gnau.v1.AuditService/GetEntries": _AUDITORS,
    "/gnau.v1.AuditService/WatchEntries": _AUDITORS,
    "/gnau.v1.AuditService/VerifyRound": _READERS,
    "/gnau.v1.AuditService/LookupPlayer": _READERS,  # maps player ids and references
    "/gnau.v1.AuditService/GetReport": _AUDITORS,  # one operator's rows, or every operator's
    # Software authentication on demand: a regulator's (auditor's) or the operator's.
    "/gnau.v1.AuditService/VerifySoftware": _READERS,
}

#: The methods that read every operator's data at once (the log's entries, which is what an
#: audit export reads): only for a caller of every operator, an auditor of all of them.
EVERY_OPERATOR_METHODS: Final = frozenset(
    {"/gnau.v1.AuditService/GetEntries", "/gnau.v1.AuditService/WatchEntries"}
)

#: Infrastructure every client may use: health checks and (if enabled) reflection.
OPEN_PREFIXES: Final = ("/grpc.health.v1.", "/grpc.reflection.")


class AuthConfigError(ValueError):
    """A token file or mTLS mapping the service cannot use; the message names it."""


def hash_token(token: str) -> str:
    """The SHA-256 of a token's UTF-8 bytes, in lowercase hex: what the token file keeps.

    >>> hash_token("abc")
    'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad'
    """
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Caller:
    """Who a call comes from: its role, the actor the log names for what its call changes
    (:mod:`gnau_service.audit.actors`; empty for the public), and the operator whose tables,
    rounds and players it reaches (:mod:`gnau_service.audit.operators`), or None for every
    operator: an auditor of all of them, or the public (who reach only what is public)."""

    role: Role
    actor: str
    operator: str | None


#: A call without credentials.
PUBLIC_CALLER: Final = Caller(Role.PUBLIC, "", None)


def caller_of(role: Role, actor: str, stated: str | None) -> Caller:
    """The caller a credential makes. ``stated`` is the operator its token record or mTLS
    mapping names: an operator id, or :data:`~gnau_service.audit.operators.ALL_OPERATORS` (an
    auditor's only), or None where it names none (a file or mapping from before operators):
    then an operator's credential belongs to the default operator and an auditor's to every
    operator, as each saw before operators existed. A public token reaches only what is public,
    whatever it states.

    >>> caller_of(Role.OPERATOR, "token:ops", None).operator
    'default'
    >>> caller_of(Role.AUDITOR, "token:audit", None).operator is None
    True
    >>> caller_of(Role.AUDITOR, "token:audit", "casino-a").operator
    'casino-a'
    >>> caller_of(Role.OPERATOR, "token:ops", "*")
    Traceback (most recent call last):
    ...
    gnau_service.server.grpc.auth.AuthConfigError: only an auditor may be of all operators ('*')
    """
    if role is Role.PUBLIC:
        return Caller(role, actor, None)
    if stated is None:
        return Caller(role, actor, DEFAULT_OPERATOR if role is Role.OPERATOR else None)
    if stated == ALL_OPERATORS:
        if role is Role.OPERATOR:
            raise AuthConfigError(f"only an auditor may be of all operators ({ALL_OPERATORS!r})")
        return Caller(role, actor, None)
    problem = check_operator(stated)
    if problem is not None:
        raise AuthConfigError(problem)
    return Caller(role, actor, stated)


@dataclass(frozen=True)
class Credentials:
    """Known bearer tokens (by SHA-256 hex, see :func:`hash_token`) and mTLS common names, each
    with its caller."""

    tokens: Mapping[str, Caller]
    common_names: Mapping[str, Caller]

    def identify_token(self, token: str) -> Caller | None:
        """The token's caller, or None for an unknown token."""
        # Compare with every known hash, in constant time, so timing reveals nothing of them.
        presented = hash_token(token).encode()
        found = None
        for known, caller in self.tokens.items():
            if hmac.compare_digest(known.encode(), presented):
                found = caller
        return found

    def identify_common_name(self, common_name: str) -> Caller | None:
        """The caller of a client certificate's common name, or None for one not mapped."""
        return self.common_names.get(common_name)


def allowed(method: str, role: Role) -> bool:
    if method.startswith(OPEN_PREFIXES):
        return True
    return role in POLICY.get(method, frozenset())
