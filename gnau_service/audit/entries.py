"""The audit log entry: one signed, canonical JSON object per event. Its bytes are the Merkle leaf.

An entry is an RFC 8785 (JCS) canonical JSON object with exactly these members::

    {"index":0,"key_id":"1a2b3c4d","kind":"SERVICE_STARTED","payload":{},
     "prev_hash":"000...000","round_id":null,"signature":"<128 hex>","time":"2025-03-01T12:00:00Z"}

(shown wrapped; the real bytes have no whitespace). ``signature`` is the log key's Ed25519
signature over the canonical JSON of the other seven members; ``key_id`` is that key's C2SP key ID;
``prev_hash`` is the hex RFC 6962 leaf hash of the previous entry's bytes (64 zeros for entry 0).
Decoding re-encodes and compares, so each entry has exactly one valid byte form.

>>> from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
>>> from gnau_service.audit.note import Signer
>>> signer = Signer("gnau-dealer/test", Ed25519PrivateKey.generate())
>>> data = encode_entry(
...     signer, index=0, kind=EntryKind.SERVICE_STARTED, time="2025-03-01T12:00:00Z",
...     payload={"version": "0.1.0"}, prev_hash=GENESIS_PREV_HASH,
... )
>>> entry = decode_entry(data, signer.verifier)
>>> entry.kind, entry.payload
(<EntryKind.SERVICE_STARTED: 'SERVICE_STARTED'>, {'version': '0.1.0'})
>>> decode_entry(data.replace(b'"0.1.0"', b'"6.6.6"'), signer.verifier)
Traceback (most recent call last):
...
gnau_service.audit.entries.EntryError: entry 0: the signature does not verify
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from json.encoder import encode_basestring
from typing import Any, Final, TypeAlias, TypeGuard

import rfc8785

from gnau_service.audit.merkle import leaf_hash
from gnau_service.audit.note import Signer, Verifier
from gnau_service.audit.timestamps import TimestampError, parse_utc_timestamp
from gnau_service.common.quoting import quoted
from gnau_service.common.strict_json import (
    DuplicateMemberError,
    JsonTextError,
    MembersError,
    NestingError,
    read_json,
    read_object,
)

JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None

GENESIS_PREV_HASH: Final = "0" * 64
MAX_INDEX: Final = 2**53 - 1  # the largest integer every IEEE 754 double reader keeps exact
MAX_INTEGER: Final = MAX_INDEX  # every number in an entry is an integer within ±MAX_INTEGER
#: The most bytes an entry may take: a C2SP tlog-tiles bundle prefixes each entry with its
#: length as a big-endian uint16 (:mod:`gnau_service.audit.tiles`). Every event is held to it
#: when it is committed (:func:`event_payload`), so the log never signs one it cannot publish.
MAX_ENTRY_BYTES: Final = 2**16 - 1
MAX_NESTING: Final = 32  # levels of objects and arrays in an entry, the entry itself being 1
#: A round id is at most this many bytes of UTF-8, as its commitment takes it
#: (:data:`gnau_service.fairness.commitment.MAX_ROUND_ID_BYTES`).
MAX_ROUND_ID_BYTES: Final = 128
# An integer of more digits is out of range whatever it says: refused before int() reads it.
_MAX_INTEGER_DIGITS: Final = len(str(MAX_INTEGER))

_SIGNED_FIELDS: Final = frozenset(
    {"index", "kind", "time", "round_id", "payload", "prev_hash", "key_id"}
)
_ALL_FIELDS: Final = _SIGNED_FIELDS | {"signature"}
_HASH_HEX: Final = re.compile(r"[0-9a-f]{64}")
_KEY_ID_HEX: Final = re.compile(r"[0-9a-f]{8}")
_SIGNATURE_HEX: Final = re.compile(r"[0-9a-f]{128}")


def is_hash_hex(value: object) -> TypeGuard[str]:
    """Whether ``value`` is a SHA-256 written as the log writes one (a chain hash, a tree node):
    64 lower-case hex digits.

    >>> is_hash_hex("ab" * 32), is_hash_hex("AB" * 32), is_hash_hex("ab" * 31), is_hash_hex(None)
    (True, False, False, False)
    """
    return isinstance(value, str) and _HASH_HEX.fullmatch(value) is not None


class EntryKind(StrEnum):
    """What happened. ``ROUND_*`` events belong to a round and carry its ``round_id``; the others
    have ``round_id`` null. ``PLAYER_FORGOTTEN``: a player's key was deleted (crypto-shredding);
    its payload is ``{}``, naming neither the player nor any of their references.
    ``SERVICE_STOPPED``: a process stopped cleanly. ``TOKENS_CHANGED``: a process took up a changed
    token file; the payload names the tokens added and revoked, by name and role only.
    ``TABLE_CHANGED``, ``OPERATOR_CHANGED``, ``GAMING_CHANGED``: the table catalogue changed
    (:mod:`gnau_service.rounds.catalogue`): a table's new version, an operator's configuration,
    or all gaming turned on or off, each naming its actor. ``SOFTWARE_VERIFIED``: the installed
    software was compared with its signed manifest
    (:mod:`gnau_service.audit.software_manifest`), and what that found."""

    ROUND_COMMITTED = "ROUND_COMMITTED"
    ROUND_DEALT = "ROUND_DEALT"
    ROUND_REVEALED = "ROUND_REVEALED"
    ROUND_SETTLED = "ROUND_SETTLED"
    ROUND_VOIDED = "ROUND_VOIDED"
    SERVICE_STARTED = "SERVICE_STARTED"
    CONFIG_CHANGED = "CONFIG_CHANGED"
    KEY_ROTATED = "KEY_ROTATED"
    PLAYER_FORGOTTEN = "PLAYER_FORGOTTEN"
    SERVICE_STOPPED = "SERVICE_STOPPED"
    TOKENS_CHANGED = "TOKENS_CHANGED"
    TABLE_CHANGED = "TABLE_CHANGED"
    OPERATOR_CHANGED = "OPERATOR_CHANGED"
    GAMING_CHANGED = "GAMING_CHANGED"
    SOFTWARE_VERIFIED = "SOFTWARE_VERIFIED"

    @property
    def is_round_event(self) -> bool:
        return self.name.startswith("ROUND_")


class EntryError(ValueError):
    """An entry that is refused: ``reason`` states the rule it breaks, ``index`` names the entry
    when it is known. The message is ``entry INDEX: REASON`` (``entry: REASON`` before an index
    is read); a caller that names the entry itself (a bundle's position, a receipt's listing)
    quotes ``reason`` alone, so that no message names the entry twice.

    >>> error = EntryError("the signature does not verify", 2)
    >>> str(error), error.reason
    ('entry 2: the signature does not verify', 'the signature does not verify')
    >>> str(EntryError("not a JSON object"))
    'entry: not a JSON object'
    """

    def __init__(self, reason: str, index: object = None) -> None:
        label = "entry" if index is None else f"entry {_index_text(index)}"
        super().__init__(f"{label}: {reason}")
        self.reason = reason
        self.index = index


def clip(message: str, limit: int = 300) -> str:
    """``message`` cut to ``limit`` characters, saying how many were cut: for a lower layer's
    message, which may quote hostile input at any length."""
    if len(message) <= limit:
        return message
    return f"{message[:limit]}…(+{len(message) - limit} chars)"


@dataclass(frozen=True)
class LogEntry:
    """A decoded, verified entry. Build entries with :func:`encode_entry`, read them with
    :func:`decode_entry`; the constructor checks every field's type and form."""

    index: int
    kind: EntryKind
    time: str
    round_id: str | None
    payload: dict[str, JsonValue] = field(hash=False)
    prev_hash: str
    key_id: str
    signature: str

    def __post_init__(self) -> None:
        _check_signed_fields(self.signed_fields())
        if not (isinstance(self.signature, str) and _SIGNATURE_HEX.fullmatch(self.signature)):
            raise EntryError("signature must be 128 lower-case hex digits", self.index)

    def signed_fields(self) -> dict[str, JsonValue]:
        """The members the signature covers: all but ``signature``."""
        return {name: getattr(self, name) for name in _SIGNED_FIELDS}

    def encode(self) -> bytes:
        """The stored bytes: canonical JSON of every member. Equal to what was decoded."""
        return rfc8785.dumps({**self.signed_fields(), "signature": self.signature})


def _check_signed_fields(fields: Mapping[str, object]) -> None:
    # Also runs on values straight from JSON, so every type is checked at run time.
    index, payload = fields["index"], fields["payload"]
    prev_hash, key_id = fields["prev_hash"], fields["key_id"]
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index <= MAX_INDEX:
        raise EntryError(f"index {quoted(index)} is not an integer in 0..2**53-1")
    _check_event(fields["kind"], fields["time"], fields["round_id"], index)
    _check_payload_object(payload, index)
    if not is_hash_hex(prev_hash):
        raise EntryError("prev_hash must be 64 lower-case hex digits", index)
    if not (isinstance(key_id, str) and _KEY_ID_HEX.fullmatch(key_id)):
        raise EntryError("key_id must be 8 lower-case hex digits", index)


def _check_payload_object(payload: object, index: object) -> None:
    if not (isinstance(payload, dict) and all(isinstance(key, str) for key in payload)):
        raise EntryError("payload must be a JSON object", index)


def _check_event(kind: object, time: object, round_id: object, index: object) -> None:
    """The members an event brings, whatever its place in the log: kind, time and round."""
    if not isinstance(kind, EntryKind):
        raise EntryError(f"kind {quoted(kind)} is not an EntryKind", index)
    if not isinstance(time, str):
        raise EntryError("time must be a string", index)
    try:
        parse_utc_timestamp(time)
    except TimestampError:
        raise EntryError(
            f"time {quoted(time)} is not an RFC 3339 UTC timestamp of a real instant, like "
            "2025-03-01T12:00:00Z",
            index,
        ) from None
    if kind.is_round_event:
        if not isinstance(round_id, str):
            raise EntryError(f"a {kind} entry needs a round_id", index)
        try:
            encoded = round_id.encode("utf-8")
        except UnicodeEncodeError:
            raise EntryError("round_id is not valid Unicode (a lone surrogate)", index) from None
        if not 0 < len(encoded) <= MAX_ROUND_ID_BYTES:
            raise EntryError(
                f"a {kind} entry needs a round_id of 1-{MAX_ROUND_ID_BYTES} bytes of UTF-8", index
            )
    elif round_id is not None:
        raise EntryError(f"a {kind} entry must have round_id null", index)


class _NotEntryJson(Exception):  # noqa: N818  (a refusal, reworded by each caller)
    """What no entry may hold, found by :func:`_json_shape`: ``reason`` names it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_NUMBER_RULE: Final = "every number in an entry must be an integer within ±(2**53-1)"
_NESTING_RULE: Final = f"nested more than {MAX_NESTING} levels deep"


def _json_shape(value: object, depth: int) -> bool:
    """One pass over ``value``, at nesting level ``depth``: whether json.dumps writes it as RFC
    8785 does (see :func:`canonical_json`), and a refusal (:class:`_NotEntryJson`) of what no
    entry may hold: nesting beyond :data:`MAX_NESTING`, and any number but an integer within
    ±:data:`MAX_INTEGER`.

    Children are visited last first, so that of several faults the one named is the same as
    when this was a walk with an explicit stack. The recursion is as deep as the value's
    nesting, which is refused beyond :data:`MAX_NESTING` before it descends."""
    # Exact str first: most values of an entry are strings (cards, hex), and this runs on each.
    if type(value) is str or value is None or isinstance(value, str | bool):
        return True
    if isinstance(value, int):
        if abs(value) > MAX_INTEGER:
            raise _NotEntryJson(f"{_NUMBER_RULE}, not {quoted(value)}")
        return True
    if isinstance(value, float):
        raise _NotEntryJson(f"{_NUMBER_RULE}, not {quoted(value)}")
    if isinstance(value, dict):
        plain = all(type(key) is str and key.isascii() for key in value)
        children: Iterable[object] = reversed(value.values())
    elif isinstance(value, list):
        plain, children = True, reversed(value)
    else:
        return False
    if depth > MAX_NESTING:
        raise _NotEntryJson(_NESTING_RULE)
    for child in children:
        # Strings and plain integers, most of the children, are settled here without a call.
        kind = type(child)
        if kind is str or (kind is int and -MAX_INTEGER <= child <= MAX_INTEGER):  # type: ignore[operator]
            continue
        if not _json_shape(child, depth + 1):
            plain = False
    return plain


# The encoder json.dumps would build on every call with these arguments.
_JSON_ENCODER: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(
    value: dict[str, JsonValue], index: object, *, plain: bool | None = None
) -> bytes:
    """The RFC 8785 bytes of a JSON object (``index`` names the entry in errors). ``plain``:
    what :func:`_json_shape` said of ``value``, if the caller asked it already.

    >>> canonical_json({"b": [1, "é"], "a": None}, index=0).decode()
    '{"a":null,"b":[1,"é"]}'
    """
    if plain if plain is not None else _plain(value):
        # For these values json.dumps writes exactly the RFC 8785 bytes: ASCII keys sort the
        # same by code point as by UTF-16 unit, integers within 2**53 print alike, and both
        # escape only '"', '\\' and control characters (short forms, else lower-case \u00xx).
        # A property test holds the two equal; anything else takes the rfc8785 path.
        text = _JSON_ENCODER.encode(value)
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            pass  # a lone surrogate: let rfc8785 refuse it with its reason
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, UnicodeEncodeError) as error:
        # rfc8785 sorts keys by their UTF-16 form, which a lone surrogate in a key does not have.
        raise EntryError(f"not representable as RFC 8785 JSON: {clip(str(error))}", index) from None


def _plain(value: object) -> bool:
    """Whether ``value`` holds only what json.dumps writes canonically (see canonical_json)."""
    try:
        return _json_shape(value, depth=1)
    except _NotEntryJson:
        return False  # rfc8785 writes it, or refuses it with its own reason


def chain_hash(entry_bytes: bytes) -> str:
    """The ``prev_hash`` the next entry must carry: the hex RFC 6962 leaf hash of these bytes."""
    return leaf_hash(entry_bytes).hex()


def encode_entry(
    signer: Signer,
    *,
    index: int,
    kind: EntryKind,
    time: str,
    payload: dict[str, JsonValue],
    prev_hash: str,
    round_id: str | None = None,
) -> bytes:
    """Sign an event with the log key and return the entry's stored bytes (= its Merkle leaf).

    ``time`` is passed in (RFC 3339 UTC, see :mod:`~gnau_service.audit.timestamps`); ``prev_hash``
    is :func:`chain_hash` of the previous entry's bytes, or :data:`GENESIS_PREV_HASH` for entry 0.
    Every member is checked: this is :func:`event_payload` then :func:`sign_event`.
    """
    _check_signed_fields(
        {
            "index": index,
            "kind": kind,
            "time": time,
            "round_id": round_id,
            "payload": payload,
            "prev_hash": prev_hash,
            "key_id": signer.key_id.hex(),
        }
    )
    payload_json = _canonical_payload(payload, index)
    _check_entry_size(kind, time, round_id, payload_json, index)
    return sign_event(
        signer,
        index=index,
        kind=kind,
        time=time,
        payload_json=payload_json,
        prev_hash=prev_hash,
        round_id=round_id,
    )


def event_payload(
    kind: EntryKind, payload: dict[str, JsonValue], *, time: str, round_id: str | None = None
) -> bytes:
    """Check that an event can be an entry wherever it lands in the log, and return its
    payload's RFC 8785 bytes, for :func:`sign_event`. Raises :class:`EntryError` for what
    :func:`encode_entry` would refuse of these members (so a store refuses the event when it is
    committed, not when the sequencer reaches it).

    >>> event_payload(EntryKind.CONFIG_CHANGED, {"b": 1, "a": "é"}, time="2026-12-01T00:00:00Z")
    b'{"a":"\xc3\xa9","b":1}'
    """
    _check_event(kind, time, round_id, None)
    _check_payload_object(payload, None)
    payload_json = _canonical_payload(payload, None)
    _check_entry_size(kind, time, round_id, payload_json, None)
    return payload_json


def _check_entry_size(
    kind: EntryKind, time: str, round_id: str | None, payload_json: bytes, index: object
) -> None:
    """Refuse an event whose entry could be over :data:`MAX_ENTRY_BYTES` at any index."""
    round_json = "null" if round_id is None else encode_basestring(round_id)
    # The members around the payload at their widest: the largest index, and a key id, a
    # chain hash and a signature, which have fixed lengths.
    envelope = (
        (
            f'{{"index":{MAX_INDEX},"key_id":"{"0" * 8}","kind":"{kind}","payload":'
            f',"prev_hash":"{"0" * 64}","round_id":{round_json},'
        ).encode()
        + _signature_member("0" * 128)
        + _time_member(time)
    )
    size = len(envelope) + len(payload_json)
    if size > MAX_ENTRY_BYTES:
        raise EntryError(
            f"the entry would take {size} bytes, more than the {MAX_ENTRY_BYTES} a log entry "
            "may take (the length of an entry in a tile bundle is a 16-bit number)",
            index,
        )


def _canonical_payload(payload: dict[str, JsonValue], index: object) -> bytes:
    # Refuse here what decode_entry refuses, so the log never writes an entry it cannot read.
    try:
        plain = _json_shape(payload, depth=2)
    except _NotEntryJson as refused:
        raise EntryError(f"payload: {refused.reason}", index) from None
    return canonical_json(payload, index, plain=plain)


def sign_event(
    signer: Signer,
    *,
    index: int,
    kind: EntryKind,
    time: str,
    payload_json: bytes,
    prev_hash: str,
    round_id: str | None = None,
) -> bytes:
    """The entry of an event that :func:`event_payload` accepted (``payload_json`` is what it
    returned for these ``kind``, ``time`` and ``round_id``), at ``index`` after ``prev_hash``.

    Nothing is checked here: the caller vouches for the event, for ``index`` (0 to
    :data:`MAX_INDEX`) and ``prev_hash`` (64 lower-case hex digits). This is the sequencer's
    path, one call per entry.

    An entry's members in RFC 8785 order are index, key_id, kind, payload, prev_hash, round_id,
    signature, time, and each but the payload is ASCII that needs no escaping, or a round id
    (escaped as canonical JSON escapes a string) or null. So the canonical bytes are the payload's
    canonical bytes between fixed pieces: nothing is parsed or re-encoded. The signed message is
    the same without the signature member. A property test holds both equal to a full RFC 8785
    encoding.
    """
    key_id = signer.key_id.hex()
    # encode_basestring is json.dumps's string writer (ensure_ascii=False): canonical for strings.
    round_json = "null" if round_id is None else encode_basestring(round_id)
    head = f'{{"index":{index:d},"key_id":"{key_id}","kind":"{kind}","payload":'.encode()
    middle = f',"prev_hash":"{prev_hash}","round_id":{round_json},'.encode()
    tail = _time_member(time)
    signature = signer.sign(b"".join((head, payload_json, middle, tail))).hex()
    return b"".join((head, payload_json, middle, _signature_member(signature), tail))


def _time_member(time: str) -> bytes:
    # The last member of an entry; the time was checked to be ASCII that needs no escaping.
    return b'"time":"' + time.encode("ascii") + b'"}'


def _signature_member(signature_hex: str) -> bytes:
    return b'"signature":"' + signature_hex.encode("ascii") + b'",'


def _read_integer(text: str) -> int:
    # Counting digits first keeps int() from reading thousands of them (and from its own limit).
    if len(text.removeprefix("-")) > _MAX_INTEGER_DIGITS or abs(value := int(text)) > MAX_INTEGER:
        raise JsonTextError(f"holds the number {quoted(text)}: {_NUMBER_RULE}")
    return value


def _refuse_fraction(text: str) -> Any:
    # Called for every number with a fraction or an exponent: 1.5, 1e21 and 1.0 alike.
    raise JsonTextError(f"holds the number {quoted(text)}: {_NUMBER_RULE}")


def _index_text(index: object) -> str:
    """How a message names an entry whose index is not yet checked (it may be anything)."""
    return str(index) if type(index) is int else f"(index {quoted(index)})"


def decode_entry(data: bytes, *trusted: Verifier) -> LogEntry:
    """Parse, check and verify an entry's stored bytes against the trusted log keys.

    Raises :class:`EntryError`, and nothing else, if the bytes are over :data:`MAX_ENTRY_BYTES`,
    are not UTF-8 JSON, hold a number that is not an integer within ±(2**53-1) or nest more than
    :data:`MAX_NESTING` levels, are not an object, miss a member or have an unknown one, are not
    byte-for-byte RFC 8785 canonical (whitespace, member order, escapes, number spelling,
    duplicate members, a lone surrogate), have a field of the wrong type or form (see
    :class:`LogEntry`), name a key none of ``trusted`` has, or carry a signature that does not
    verify.
    """
    if not trusted:
        raise ValueError("decode_entry needs at least one trusted key")
    if len(data) > MAX_ENTRY_BYTES:
        raise EntryError(f"an entry takes at most {MAX_ENTRY_BYTES} bytes, not {len(data)}")
    try:
        obj = read_json(data, parse_int=_read_integer, parse_float=_refuse_fraction)
    except NestingError:
        raise EntryError(_NESTING_RULE) from None
    except DuplicateMemberError as error:
        # One member twice has no canonical form: the encoder writes each member once.
        raise EntryError(
            "bytes are not RFC 8785 canonical JSON: the member "
            f"{quoted(error.member)} appears twice"
        ) from None
    except JsonTextError as error:
        raise EntryError(clip(str(error))) from None
    # The parser refused every number out of range; the walk bounds the nesting.
    try:
        plain = _json_shape(obj, depth=1)
    except _NotEntryJson as refused:
        raise EntryError(refused.reason) from None
    if not isinstance(obj, dict):
        raise EntryError("not a JSON object")
    index = obj.get("index")
    try:
        read_object(obj, _ALL_FIELDS)
    except MembersError as error:
        raise EntryError(str(error), index) from None
    if canonical_json(obj, index, plain=plain) != data:
        raise EntryError("bytes are not RFC 8785 canonical JSON", index)
    try:
        kind = EntryKind(obj["kind"])
    except ValueError:
        raise EntryError(f"unknown kind {quoted(obj['kind'])}", index) from None
    entry = LogEntry(**{**obj, "kind": kind})
    # The signed bytes are the (canonical) entry without its signature member; see encode_entry.
    tail = _time_member(entry.time)
    message = data[: -len(tail) - len(_signature_member(entry.signature))] + tail
    signature = bytes.fromhex(entry.signature)
    candidates = [key for key in trusted if key.key_id.hex() == entry.key_id]
    if not candidates:
        raise EntryError(f"signed by key {entry.key_id}, which is not trusted", index)
    if not any(key.verify(message, signature) for key in candidates):
        raise EntryError("the signature does not verify", index)
    return entry
