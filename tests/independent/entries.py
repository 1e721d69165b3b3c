"""A log entry: its canonical bytes, its fields, its signature (docs/audit.md, Entries, and
Every rejection: Entries)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import rfc8785

from tests.independent.common import (
    SAFE,
    VerificationError,
    check,
    is_int,
    is_lower_hex,
    read_entry_json,
    read_time,
    utf8,
)
from tests.independent.merkle import leaf_hash
from tests.independent.notes import Key

ROUND_KINDS = ("ROUND_COMMITTED", "ROUND_DEALT", "ROUND_REVEALED", "ROUND_SETTLED", "ROUND_VOIDED")
OTHER_KINDS = (
    "SERVICE_STARTED",
    "SERVICE_STOPPED",
    "CONFIG_CHANGED",
    "TOKENS_CHANGED",
    "KEY_ROTATED",
    "PLAYER_FORGOTTEN",
    "TABLE_CHANGED",
    "OPERATOR_CHANGED",
    "GAMING_CHANGED",
    "SOFTWARE_VERIFIED",
)
MEMBERS = ("index", "key_id", "kind", "payload", "prev_hash", "round_id", "signature", "time")
GENESIS = "0" * 64
#: Who made a change, as a payload's ``actor`` names them (docs/audit.md, The actor).
ACTORS = ("service", "console")
TOKEN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_ACTOR_BYTES = 256
#: Whose round, or whose forgotten player, a payload's ``operator`` names (docs/audit.md, The
#: operator).
OPERATOR = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def canonical(value: Any) -> bytes:
    """RFC 8785 (JCS) canonical JSON."""
    try:
        return rfc8785.dumps(value)
    except Exception as error:  # the library's errors: a lone surrogate, a float, ...
        raise VerificationError(f"cannot be canonical JSON: {error}") from None


@dataclass(frozen=True)
class Entry:
    data: bytes  # the stored bytes, the Merkle leaf
    index: int
    key_id: str
    kind: str
    payload: dict[str, Any]
    prev_hash: str
    round_id: str | None
    signature: bytes
    time: datetime
    time_text: str

    @property
    def leaf(self) -> bytes:
        return leaf_hash(self.data)

    @property
    def chain_hash(self) -> str:
        return self.leaf.hex()

    def signed_by(self, key: Key) -> bool:
        unsigned = read_entry_json(self.data.decode())
        del unsigned["signature"]
        return key.key_id.hex() == self.key_id and key.verifies(self.signature, canonical(unsigned))


def read_entry(data: bytes) -> Entry:
    """An entry's bytes, strictly, but for its signature (see :meth:`Entry.signed_by`)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise VerificationError("the entry is not UTF-8") from None
    value = read_entry_json(text)
    check(isinstance(value, dict), "the entry is not an object")
    check(sorted(value) == list(MEMBERS), f"the entry's members are not {', '.join(MEMBERS)}")
    check(canonical(value) == data, "the entry's bytes are not its canonical JSON")
    kind, index, round_id = value["kind"], value["index"], value["round_id"]
    check(kind in ROUND_KINDS + OTHER_KINDS, f"{kind!r:.60} is not an entry kind")
    check(is_int(index) and 0 <= index <= SAFE, "the index is not an integer in 0..2^53-1")
    check(is_lower_hex(value["key_id"], 8), "key_id is not 8 lower-case hex digits")
    if kind in ROUND_KINDS:
        check(
            isinstance(round_id, str) and 1 <= len(round_id.encode("utf-8", "replace")) <= 128,
            f"a {kind} needs a round_id of 1 to 128 bytes of UTF-8",
        )
    else:
        check(round_id is None, f"a {kind} has no round_id")
    check(isinstance(value["payload"], dict), "the payload is not an object")
    if "actor" in value["payload"]:  # older entries name none
        check_actor(value["payload"]["actor"])
    if "operator" in value["payload"]:  # nor an operator
        check_operator(value["payload"]["operator"])
    check(is_lower_hex(value["prev_hash"], 64), "prev_hash is not 64 lower-case hex digits")
    check(is_lower_hex(value["signature"], 128), "the signature is not 128 lower-case hex digits")
    return Entry(
        data=data,
        index=index,
        key_id=value["key_id"],
        kind=kind,
        payload=value["payload"],
        prev_hash=value["prev_hash"],
        round_id=round_id,
        signature=bytes.fromhex(value["signature"]),
        time=read_time(value["time"]),
        time_text=value["time"],
    )


def check_operator(operator: object) -> None:
    """1 to 64 of a-z, 0-9, ``.``, ``_``, ``-``, starting with a letter or digit."""
    check(
        isinstance(operator, str) and OPERATOR.fullmatch(operator) is not None,
        f"the operator {operator!r:.80} is not an operator id",
    )


def check_actor(actor: object) -> None:
    """``service``, ``console``, ``token:NAME`` (a token file's name) or ``cert:CN`` (a client
    certificate's common name, not empty): at most 256 bytes of UTF-8, no control character."""
    check(isinstance(actor, str), "the actor is not a string")
    assert isinstance(actor, str)
    check(len(utf8(actor, "the actor")) <= MAX_ACTOR_BYTES, "the actor is over 256 bytes")
    check(not CONTROL.search(actor), "the actor holds a control character")
    kind, colon, name = actor.partition(":")
    check(
        actor in ACTORS
        or (colon and kind == "token" and TOKEN_NAME.fullmatch(name))
        or (colon and kind == "cert" and name),
        f"the actor {actor!r:.80} is not service, console, token:NAME or cert:CN",
    )
