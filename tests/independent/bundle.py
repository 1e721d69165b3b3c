"""An audit bundle (``gnau audit export``), verified from docs/audit.md, Bundles and offline
verification: its lines, every entry's signature by the key current at its place, the hash
chain, the Merkle root at every checkpoint, the checkpoints' signatures, a pinned checkpoint,
every round replayed, and the anchor."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tests.independent.common import SAFE, VerificationError, check, is_int, read_json
from tests.independent.entries import GENESIS, OPERATOR, TOKEN_NAME, Entry, read_entry
from tests.independent.merkle import Frontier
from tests.independent.notes import (
    ORIGIN,
    Checkpoint,
    Key,
    open_note,
    parse_checkpoint,
    parse_note,
    read_rotation,
    read_vkey,
)
from tests.independent.rounds import Replay

FORMAT = "gnau-dealer/audit-bundle/v1"
HEADER = {"format", "origin", "public_keys", "first_index", "size", "left_frontier"}
BLANK = re.compile(rb"[ \t]*")
HASH = re.compile(r"[0-9a-f]{64}")
ROLE = re.compile(r"[a-z]+")  # public, auditor, operator

VALID, INVALID, UNANCHORED, CANNOT_VERIFY = "VALID", "INVALID", "UNANCHORED", "CANNOT_VERIFY"
EXIT_STATUS = {VALID: 0, INVALID: 1, UNANCHORED: 1, CANNOT_VERIFY: 2}


@dataclass
class Verdict:
    status: str
    reason: str = ""
    line: int | None = None
    summary: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def exit_status(self) -> int:
        """As ``gnau audit verify`` without ``--allow-unanchored``."""
        return EXIT_STATUS[self.status]


class _StopError(Exception):
    def __init__(self, status: str, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.status, self.reason, self.line = status, reason, line


#: The events that hold exactly these members (docs/audit.md, TABLE_CHANGED and the three after
#: it).
EXACT_MEMBERS = {
    "TABLE_CHANGED": {"actor", "operator", "table_id", "version", "config"},
    "OPERATOR_CHANGED": {"actor", "operator", "config"},
    "GAMING_CHANGED": {"actor", "enabled"},
    "SOFTWARE_VERIFIED": {
        "actor", "result", "manifest_sha256", "mismatches", "mismatch_count", "detail",
    },
}  # fmt: skip


def _line_object(raw: bytes, number: int, status: str) -> dict[str, Any]:
    """One line: no CR, strict UTF-8, one JSON object with no member twice."""
    try:
        check(b"\r" not in raw, "a CR in the line")
        check(not BLANK.fullmatch(raw), "a blank line")
        value = read_json(raw.decode("utf-8"))
        check(isinstance(value, dict), "the line is not a JSON object")
    except UnicodeDecodeError:
        raise _StopError(status, "the line is not UTF-8", number) from None
    except VerificationError as error:
        raise _StopError(status, str(error), number) from None
    assert isinstance(value, dict)
    return value


def _header(value: dict[str, Any]) -> dict[str, Any]:
    check(set(value) == HEADER, "the header's members are not the six")
    check(value["format"] == FORMAT, f"the format is not {FORMAT}")
    check(isinstance(value["origin"], str) and ORIGIN.fullmatch(value["origin"]), "origin")
    keys = value["public_keys"]
    check(isinstance(keys, list) and keys, "public_keys is not a non-empty array")
    for key in keys:
        read_vkey(key)
    first, size = value["first_index"], value["size"]
    check(is_int(first) and 0 <= first <= SAFE, "first_index is not an integer in 0..2^53-1")
    check(
        is_int(size) and first < size <= SAFE + 1, "size is not an integer in first_index+1..2^53"
    )
    frontier = value["left_frontier"]
    check(
        isinstance(frontier, list)
        and all(isinstance(h, str) and HASH.fullmatch(h) for h in frontier),
        "left_frontier is not an array of hashes",
    )
    check(
        len(frontier) == bin(first).count("1"), "left_frontier has not popcount(first_index) hashes"
    )
    return value


@dataclass
class _Signed:
    line: int
    text: str
    checkpoint: Checkpoint


def verify_bundle(data: bytes, key: str | None = None, pinned: str | None = None) -> Verdict:
    """The verdict on a bundle's bytes, with ``key`` pinned (a vkey; without one, the bundle's
    first key is trusted) and optionally a checkpoint seen earlier."""
    try:
        return _verify(data, key, pinned)
    except _StopError as refused:
        return Verdict(refused.status, refused.reason, refused.line)


def _verify(data: bytes, key: str | None, pinned: str | None) -> Verdict:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the last line's LF
    while lines and BLANK.fullmatch(lines[-1]):
        lines.pop()  # blank lines at the end are ignored
    if not lines:
        raise _StopError(CANNOT_VERIFY, "the bundle is empty")
    try:
        header = _header(_line_object(lines[0], 1, CANNOT_VERIFY))
        origin, first, size = header["origin"], header["first_index"], header["size"]
        current = read_vkey(key if key is not None else header["public_keys"][0])
        pin = None
        if pinned is not None:
            pin_note = parse_note(pinned)
            pin = parse_checkpoint(pin_note.text)
            check(pin.origin == origin, "the pinned checkpoint is of another log")
    except VerificationError as error:
        raise _StopError(CANNOT_VERIFY, str(error), 1) from None

    keys = _Keys(current, [current])
    frontier = Frontier(first, [bytes.fromhex(h) for h in header["left_frontier"]])
    roots = {first: frontier.root()}
    replay = Replay(first)
    signed: list[_Signed] = []
    previous: Entry | None = None
    count = 0
    for number, raw in enumerate(lines[1:], start=2):
        item = _line_object(raw, number, INVALID)
        try:
            check(len(item) == 1 and set(item) <= {"checkpoint", "entry"}, "not a bundle line")
            ((kind, text),) = item.items()
            check(isinstance(text, str), f"the {kind} is not a string")
            if kind == "checkpoint":
                check(count == 0, "a checkpoint after the first entry")
                note = parse_note(text)
                checkpoint = parse_checkpoint(note.text)
                check(checkpoint.size > first, "a checkpoint of a size not above first_index")
                check(checkpoint.size <= size, "a checkpoint larger than the bundle's entries")
                signed.append(_Signed(number, text, checkpoint))
                continue
            try:
                entry = read_entry(text.encode("utf-8"))
            except UnicodeEncodeError:
                raise VerificationError("the entry holds a lone surrogate") from None
            index = first + count
            check(entry.index == index, f"entry {entry.index} stands at index {index}")
            if previous is not None:
                check(entry.prev_hash == previous.chain_hash, f"entry {index}: prev_hash")
            elif first == 0:
                check(entry.prev_hash == GENESIS, "entry 0: prev_hash is not the genesis")
            check(entry.signed_by(keys.current), f"entry {index}: not signed by the current key")
            if entry.kind == "KEY_ROTATED":
                keys.rotate(entry)
            check(
                entry.kind != "PLAYER_FORGOTTEN" or set(entry.payload) <= {"actor", "operator"},
                f"entry {index}: a PLAYER_FORGOTTEN payload names nothing but its actor and "
                "operator",
            )
            check(
                entry.kind != "SERVICE_STOPPED" or set(entry.payload) <= {"actor"},
                f"entry {index}: a SERVICE_STOPPED payload holds its actor alone",
            )
            if entry.kind == "TOKENS_CHANGED":
                check_token_change(entry.payload)
            if entry.kind in EXACT_MEMBERS:
                # docs/audit.md: a catalogue change or a software check holds exactly its own
                # members.
                check(
                    set(entry.payload) == EXACT_MEMBERS[entry.kind],
                    f"entry {index}: a {entry.kind}'s members",
                )
            replay.feed(entry)
            frontier.append(entry.leaf)
            count += 1
            roots[frontier.size] = frontier.root()
            previous = entry
        except VerificationError as error:
            raise _StopError(INVALID, str(error), number) from None
    if first + count != size:
        raise _StopError(INVALID, f"the header says {size - first} entries, the bundle has {count}")

    warnings = [f"the bundle starts at entry {first}: earlier rounds are not checked"] * (first > 0)
    anchored = False
    by_size: dict[int, bytes] = {}
    for s in signed:
        try:
            open_note(parse_note(s.text), keys.trusted)
            check(s.checkpoint.origin == origin, "a checkpoint of another log")
            check(roots[s.checkpoint.size] == s.checkpoint.root, "the entries give another root")
        except VerificationError as error:
            raise _StopError(INVALID, f"checkpoint {s.checkpoint.size}: {error}", s.line) from None
        check_fork = by_size.setdefault(s.checkpoint.size, s.checkpoint.root)
        if check_fork != s.checkpoint.root:
            raise _StopError(INVALID, f"a fork: two roots for size {s.checkpoint.size}", s.line)
        anchored |= s.checkpoint.size == size
    if pin is not None:
        try:
            open_note(pin_note, keys.trusted)
        except VerificationError as error:
            raise _StopError(INVALID, f"the pinned checkpoint: {error}") from None
        if pin.size > size:
            raise _StopError(INVALID, "the pinned checkpoint is larger than the log: truncation")
        if pin.size < first:
            warnings.append("the pinned checkpoint predates the bundle: not compared")
        elif roots[pin.size] != pin.root:
            raise _StopError(INVALID, "the pinned checkpoint's root differs: history rewritten")
        anchored |= pin.size == size
    summary = {"entries": count, "checkpoints": len(signed), **replay.summary()}
    if not anchored:
        reason = "no verified checkpoint has the bundle's size"
        return Verdict(UNANCHORED, reason, None, summary, warnings)
    return Verdict(VALID, "", None, summary, warnings)


def check_token_change(payload: dict[str, Any]) -> None:
    """The tokens a changed token file added and revoked, each by its name, role and (but for a
    public token's, or in an entry from before operators) operator only: an entry never holds a
    token or its hash."""
    check(set(payload) == {"actor", "added", "revoked"}, "a TOKENS_CHANGED's members")
    for member in ("added", "revoked"):
        tokens = payload[member]
        check(isinstance(tokens, list), f"TOKENS_CHANGED's {member} is not an array")
        for token in tokens:
            check(
                isinstance(token, dict)
                and set(token) - {"operator"} == {"name", "role"}
                and isinstance(token["name"], str)
                and TOKEN_NAME.fullmatch(token["name"])
                and isinstance(token["role"], str)
                and ROLE.fullmatch(token["role"])
                and (
                    "operator" not in token
                    or token["operator"] == "*"
                    or (
                        isinstance(token["operator"], str) and OPERATOR.fullmatch(token["operator"])
                    )
                ),
                f"TOKENS_CHANGED's {member} holds more than a token's name, role and operator",
            )


@dataclass
class _Keys:
    """The key current at each place: the pinned key, then each one a KEY_ROTATED entry hands
    over to (its rotation signed by the current key, later than the one before, none back)."""

    current: Key
    trusted: list[Key] = field(default_factory=list)
    last_rotation: datetime | None = None

    def rotate(self, entry: Entry) -> None:
        note = entry.payload.get("rotation")
        check(isinstance(note, str), "a KEY_ROTATED entry without its rotation note")
        rotation = read_rotation(note, self.current)
        check(all(k.vkey != rotation.new.vkey for k in self.trusted), "a key comes back")
        check(
            self.last_rotation is None or rotation.time > self.last_rotation,
            "a rotation not later than the one before",
        )
        self.current, self.last_rotation = rotation.new, rotation.time
        self.trusted.append(rotation.new)
