"""The tamper catalogue: every kind of hostile bundle, through the real ``gnau audit verify``.

Each row is a named tampering of a real exported bundle (honest rounds, a void, checkpoints), the
exit status that docs/audit.md's rule gives it (2 only when verification cannot start: the file,
its header line or an argument is unusable; 1 for anything wrong after the header, and for an
unanchored bundle; 0 valid), and a substring of the reason printed. No run may print a traceback.

The base bundle (``honest()``): line 1 the header, lines 2-7 checkpoints of sizes 1, 5, 9, 13,
17 and 21, lines 8-28 entries 0 to 20 (a start, four settled rounds of four entries each, and one
round voided after its deal: committed, dealt, revealed by the void's step, voided).
"""

from __future__ import annotations

import functools
import io
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import rfc8785

from gnau_service.audit.bundle import write_bundle
from gnau_service.audit.entries import EntryKind, JsonValue, encode_entry
from gnau_service.audit.merkle import leaf_hash
from gnau_service.audit.note import sign_note
from gnau_service.audit.signing import KeyRotation
from gnau_service.cli.main import main
from tests.audit.logs import MemoryLog, honest_log, new_signer, play_round

REPOSITORY = Path(__file__).resolve().parents[2]
HEADER, FIRST_CHECKPOINT, LAST_CHECKPOINT, FIRST_ENTRY = 0, 1, 6, 7  # positions in the line list
SIZE = 21


@dataclass(frozen=True)
class Tampered:
    """What one run is given: the bundle's bytes, the key to pin, a pinned checkpoint, options."""

    bundle: bytes
    key: str | None
    pin: bytes | None = None
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Tamper:
    name: str
    make: Callable[[], Tampered]
    status: int
    reason: str


@functools.cache
def honest() -> MemoryLog:
    log = honest_log(rounds=4)
    assert len(log.entries) == SIZE
    return log


def lines(log: MemoryLog | None = None) -> list[str]:
    """A fresh copy of a log's bundle lines (the base log's by default), as text."""
    return (log or honest()).bundle_lines()


def exported(log: MemoryLog, end: int) -> list[str]:
    out = io.StringIO()
    write_bundle(log, out, first_index=0, end=end)
    return out.getvalue().splitlines(keepends=True)


def bundle(text_lines: list[str], log: MemoryLog | None = None, **options: Any) -> Tampered:
    """The lines as a bundle, pinning the key of ``log`` (the base log's by default)."""
    return Tampered("".join(text_lines).encode(), (log or honest()).signer.vkey, **options)


def raw(data: bytes, **options: Any) -> Tampered:
    return Tampered(data, honest().signer.vkey, **options)


def base_bytes() -> bytes:
    return "".join(lines()).encode()


def replaced(position: int, new_line: str) -> Tampered:
    text = lines()
    text[position] = new_line
    return bundle(text)


def entry_text(position: int) -> str:
    text: str = json.loads(lines()[position])["entry"]
    return text


def header_with(**changes: object) -> Tampered:
    text = lines()
    header = json.loads(text[HEADER])
    header.update(changes)
    text[HEADER] = json.dumps(header) + "\n"
    return bundle(text)


def header_without(name: str) -> Tampered:
    text = lines()
    header = json.loads(text[HEADER])
    del header[name]
    text[HEADER] = json.dumps(header) + "\n"
    return bundle(text)


def header_text(old: str, new: str) -> Tampered:
    text = lines()
    assert old in text[HEADER]
    text[HEADER] = text[HEADER].replace(old, new, 1)
    return bundle(text)


def moved(source: int, target: int) -> Tampered:
    text = lines()
    text.insert(target, text.pop(source))
    return bundle(text)


def inserted(position: int, new_line: str) -> Tampered:
    text = lines()
    text.insert(position, new_line)
    return bundle(text)


def deleted(*positions: int) -> Tampered:
    text = lines()
    for position in sorted(positions, reverse=True):
        del text[position]
    return bundle(text)


def checkpoint_edited(edit: Callable[[str], str], position: int = 3) -> Tampered:
    note = json.loads(lines()[position])["checkpoint"]
    assert "\n9\n" in note
    return replaced(position, json.dumps({"checkpoint": edit(note)}) + "\n")


def root_flipped(note: str) -> str:
    body = note.split("\n")
    body[2] = ("B" if body[2][0] != "B" else "C") + body[2][1:]
    return "\n".join(body)


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


# -- logs that lie -------------------------------------------------------------------------------

Payload = dict[str, Any]


def with_entry(payload_text: str) -> Tampered:
    """The base log's rounds plus one CONFIG_CHANGED entry whose payload is ``payload_text``
    exactly, signed by the log key by hand, and a checkpoint over it."""
    log = honest_log(rounds=1)
    log.append_signed_bytes(EntryKind.CONFIG_CHANGED, payload_text)
    log.checkpoint()
    return bundle(lines(log), log)


def cheating(kind: EntryKind, edit: Callable[[Payload], Payload], **round_options: Any) -> Tampered:
    """An honest log, then one round whose ``kind`` event's payload is edited before logging."""
    log = honest_log(rounds=1)

    def append(event: EntryKind, payload: dict[str, JsonValue], round_id: str | None) -> None:
        if event is kind:
            payload = edit(json.loads(json.dumps(payload)))
        log.append(event, payload, round_id)

    play_round(append, "round-cheat", **round_options)
    log.checkpoint()
    return bundle(lines(log), log)


def settlement_changed(payload: Payload) -> Payload:
    payload["players"][0]["delta"] += 1
    payload["dealer"]["delta"] -= 1
    return payload


def void_paying_the_result(payload: Payload) -> Payload:
    """A void after the deal that pays each seat its result: a losing seat loses instead of
    getting its stake back. Where the deal made every seat win, paying the result is honest, so
    seat 1 is made to lose its stake instead."""
    players = payload["paid"]["players"]
    result = payload["result"]["players"]
    losing = [position for position, seat in enumerate(result) if seat["delta"] < 0]
    for position in losing:
        players[position]["delta"] = result[position]["delta"]
    if not losing:  # every seat won: pay seat 1 less than its win, as if it had lost its stake
        players[0]["delta"] = -players[0]["stake"]
    payload["paid"]["dealer_delta"] = -sum(player["delta"] for player in players)
    return payload


def commitment_after_deal() -> Tampered:
    log = honest_log(rounds=1)
    held: list[tuple[EntryKind, dict[str, JsonValue], str | None]] = []

    def append(kind: EntryKind, payload: dict[str, JsonValue], round_id: str | None) -> None:
        if kind is EntryKind.ROUND_COMMITTED:
            held.append((kind, payload, round_id))
            return
        log.append(kind, payload, round_id)
        if kind is EntryKind.ROUND_DEALT:
            log.append(*held.pop())

    play_round(append, "round-late")
    log.checkpoint()
    return bundle(lines(log), log)


def table_reopened_before_its_round_ended() -> Tampered:
    """Issue 23's log: a table's next round committed, then its previous round settled."""
    log = honest_log(rounds=1)
    held: list[tuple[EntryKind, dict[str, JsonValue], str | None]] = []

    def append(kind: EntryKind, payload: dict[str, JsonValue], round_id: str | None) -> None:
        if kind is EntryKind.ROUND_SETTLED and round_id == "round-earlier":
            held.append((kind, payload, round_id))
            return
        log.append(kind, payload, round_id)
        if kind is EntryKind.ROUND_COMMITTED and held:
            log.append(*held.pop())

    play_round(append, "round-earlier", table_id="shared1")
    play_round(append, "round-later", table_id="shared1")
    log.checkpoint()
    return bundle(lines(log), log)


def settled_twice() -> Tampered:
    log = honest_log(rounds=1)
    play_round(log.append, "round-twice")
    settled = json.loads(log.entries[-1])
    log.append(EntryKind.ROUND_SETTLED, settled["payload"], "round-twice")
    log.checkpoint()
    return bundle(lines(log), log)


def rotated(by_intruder: bool) -> Tampered:
    old, new, intruder = new_signer(), new_signer(), new_signer()
    log = honest_log(rounds=1, signer=old)
    statement = KeyRotation(old.verifier, new.verifier, "2026-11-29T13:00:00Z")
    note = sign_note(statement.to_note_text(), intruder.signer if by_intruder else old.signer)
    log.append(EntryKind.KEY_ROTATED, {"rotation": str(note)})
    log.appender.signer = new
    play_round(log.append, "after-rotation")
    log.checkpoint()
    text = lines(log)
    header = json.loads(text[HEADER])
    header["public_keys"] = [old.vkey, new.vkey]
    text[HEADER] = json.dumps(header) + "\n"
    return bundle(text, log)


def wrong_index() -> Tampered:
    log = honest_log(rounds=1)
    data = encode_entry(
        log.signer.signer,
        index=99,
        kind=EntryKind.CONFIG_CHANGED,
        time=log.time,
        payload={},
        prev_hash=log.appender.head.prev_hash,
    )
    text = lines(log)
    text.append(json.dumps({"entry": data.decode()}) + "\n")
    header = json.loads(text[HEADER])
    header["size"] += 1
    text[HEADER] = json.dumps(header) + "\n"
    return bundle(text, log)


def rolled_back() -> Tampered:
    # The log served again as it was at size 9, to an auditor who saw size 21.
    return bundle(exported(honest(), 9), pin=honest().notes[-1].encode())


def rewritten() -> Tampered:
    signer = new_signer()
    seen = honest_log(rounds=2, signer=signer)
    other = honest_log(rounds=3, signer=signer)  # same key, other rounds
    return bundle(lines(other), other, pin=seen.notes[2].encode())


def forked() -> Tampered:
    signer = new_signer()
    log, other = honest_log(rounds=2, signer=signer), honest_log(rounds=2, signer=signer)
    text = lines(log)
    text.insert(FIRST_CHECKPOINT + 2, json.dumps({"checkpoint": other.notes[2]}) + "\n")
    return bundle(text, log)


def unknown_key_only() -> Tampered:
    stranger = MemoryLog(new_signer())
    stranger.appender.head = honest().appender.head
    return inserted(FIRST_CHECKPOINT, json.dumps({"checkpoint": stranger.checkpoint()}) + "\n")


def non_canonical() -> Tampered:
    entry = json.loads(entry_text(FIRST_ENTRY + 3))
    return replaced(FIRST_ENTRY + 3, json.dumps({"entry": json.dumps(entry, indent=1)}) + "\n")


def flipped_byte() -> Tampered:
    # A hex digit of entry 1's commitment changed: still canonical, no longer what was signed.
    text = entry_text(FIRST_ENTRY + 1)
    at = text.index('"commitment":"') + len('"commitment":"')
    changed = text[:at] + ("1" if text[at] != "1" else "2") + text[at + 1 :]
    return replaced(FIRST_ENTRY + 1, json.dumps({"entry": changed}, ensure_ascii=False) + "\n")


def pinned_by_another_key() -> Tampered:
    stranger = MemoryLog(new_signer())
    stranger.appender.head = honest().appender.head
    return bundle(lines(), pin=stranger.checkpoint().encode())


def lone_surrogate_in_checkpoint() -> Tampered:
    note = json.loads(lines()[3])["checkpoint"]
    return replaced(3, json.dumps({"checkpoint": note.replace("\n9\n", "\n9\ud800\n")}) + "\n")


def surrogate_inside_entry_string() -> Tampered:
    text = entry_text(FIRST_ENTRY + 2)
    return replaced(FIRST_ENTRY + 2, json.dumps({"entry": "\ud800" + text}) + "\n")


def header_key_with_lone_surrogate() -> Tampered:
    vkey = honest().signer.vkey
    return header_with(public_keys=["\ud800" + vkey[vkey.index("+") :]])


def entry_line_bytes(position: int, old: bytes, new: bytes) -> Tampered:
    data = base_bytes().split(b"\n")
    assert old in data[position]
    data[position] = data[position].replace(old, new, 1)
    return raw(b"\n".join(data))


def line_ends(ending: bytes, *, keep_header_lf: bool = False) -> Tampered:
    data = base_bytes()
    if not keep_header_lf:
        return raw(data.replace(b"\n", ending))
    header, rest = data.split(b"\n", 1)
    return raw(header + b"\n" + rest.replace(b"\n", ending))


def first_index_moved() -> Tampered:
    text = lines()
    del text[FIRST_CHECKPOINT]  # the checkpoint of size 1, which a bundle from 1 cannot hold
    header = json.loads(text[HEADER])
    header.update(first_index=1, left_frontier=["ab" * 32])
    text[HEADER] = json.dumps(header) + "\n"
    return bundle(text)


def pinned(note: str, edit: Callable[[str], str] = lambda text: text) -> Tampered:
    return bundle(lines(), pin=edit(note).encode())


def last_checkpoint_removed(**options: Any) -> Tampered:
    return bundle([line for i, line in enumerate(lines()) if i != LAST_CHECKPOINT], **options)


def no_checkpoints(*options: str) -> Tampered:
    return bundle(
        [line for line in lines() if not line.startswith('{"checkpoint"')], options=options
    )


MAX = 2**53 - 1
ENTRY_MEMBERS_RULE = 'must be {"checkpoint": text} or {"entry": text}'

CATALOGUE = [
    Tamper("untouched", lambda: bundle(lines()), 0, "result: VALID"),
    # -- entries: the kinds of tests/audit/test_bundle.py ------------------------------------------
    Tamper("flipped byte", flipped_byte, 1, "entry 1: the signature does not verify"),
    Tamper(
        "deleted entry",
        lambda: deleted(FIRST_ENTRY + 5),
        1,
        "the entry says index 6 but stands where 5 belongs",
    ),
    Tamper(
        "inserted entry",
        lambda: inserted(FIRST_ENTRY + 5, lines()[FIRST_ENTRY + 2]),
        1,
        "the entry says index 2 but stands where 5 belongs",
    ),
    Tamper(
        "duplicated entry",
        lambda: inserted(FIRST_ENTRY + 5, lines()[FIRST_ENTRY + 5]),
        1,
        "entry 6: the entry says index 5 but stands where 6 belongs",
    ),
    Tamper(
        "swapped entries",
        lambda: moved(FIRST_ENTRY + 6, FIRST_ENTRY + 5),
        1,
        "entry 5: the entry says index 6 but stands where 5 belongs",
    ),
    Tamper(
        "index is not the position (validly signed)",
        wrong_index,
        1,
        "entry 9: the entry says index 99 but stands where 9 belongs",
    ),
    Tamper(
        "non-canonical entry bytes",
        non_canonical,
        1,
        "entry 3: bytes are not RFC 8785 canonical JSON",
    ),
    Tamper(
        "entries cut off the end",
        lambda: deleted(27, 26),
        1,
        "the header announces entries 0 to 20, but the bundle holds entries 0 to 18 (truncated or",
    ),
    Tamper(
        "file cut inside the last line",
        lambda: raw(base_bytes()[:-40]),
        1,
        "entry 20: line 28 is not JSON",
    ),
    Tamper(
        "rolled back, against a pinned checkpoint",
        rolled_back,
        1,
        "the pinned checkpoint covers 21 entries but the log now has 9: the log was truncated",
    ),
    Tamper("rewritten history, against a pinned checkpoint", rewritten, 1, "the log was rewritten"),
    Tamper(
        "fork: two signed roots for one size",
        forked,
        1,
        "the log signed two different roots for size 9",
    ),
    Tamper(
        "checkpoint size edited",
        lambda: checkpoint_edited(lambda t: t.replace("\n9\n", "\n10\n", 1)),
        1,
        "line 4: checkpoint refused: signature by gnau-dealer/test",
    ),
    Tamper(
        "checkpoint origin edited",
        lambda: checkpoint_edited(
            lambda t: t.replace("gnau-dealer/test\n", "gnau-dealer/other\n", 1)
        ),
        1,
        "line 4: checkpoint refused",
    ),
    Tamper(
        "checkpoint root edited",
        lambda: checkpoint_edited(root_flipped),
        1,
        "line 4: checkpoint refused: signature by",
    ),
    Tamper(
        "checkpoint hyphen for the em dash",
        lambda: checkpoint_edited(lambda t: t.replace("—", "-")),
        1,
        "line 4: checkpoint refused: signature line",
    ),
    Tamper(
        "checkpoint CRLF",
        lambda: checkpoint_edited(lambda t: t.replace("\n", "\r\n")),
        1,
        "line 4: checkpoint refused: note contains control character U+000D",
    ),
    Tamper(
        "checkpoint signed only by an unknown key",
        unknown_key_only,
        1,
        "line 2: checkpoint refused: no signature from a known key",
    ),
    Tamper(
        "wrong settlement",
        lambda: cheating(EntryKind.ROUND_SETTLED, settlement_changed),
        1,
        "round round-cheat: the logged settlement does not follow from the dealt hands",
    ),
    Tamper(
        "seed not matching the commitment",
        lambda: cheating(EntryKind.ROUND_REVEALED, lambda p: {**p, "server_seed": "00" * 32}),
        1,
        "round round-cheat: commitment: ",
    ),
    Tamper(
        "commitment after the deal",
        commitment_after_deal,
        1,
        "round round-late: ROUND_DEALT before anything else",
    ),
    Tamper(
        "void before the deal revealing another seed",
        lambda: cheating(
            EntryKind.ROUND_VOIDED,
            lambda p: {**p, "server_seed": "11" * 32},
            void_after=EntryKind.ROUND_COMMITTED,
        ),
        1,
        "round round-cheat: the seed revealed by its void does not match its commitment",
    ),
    Tamper(
        "void after the deal revealing another seed than its reveal",
        lambda: cheating(
            EntryKind.ROUND_VOIDED,
            lambda p: {**p, "server_seed": "11" * 32},
            void_after=EntryKind.ROUND_DEALT,
        ),
        1,
        "round round-cheat: the seed of its void is not the seed its reveal published",
    ),
    Tamper(
        "void after the deal paying each seat its result, not the better of it and a refund",
        lambda: cheating(
            EntryKind.ROUND_VOIDED, void_paying_the_result, void_after=EntryKind.ROUND_DEALT
        ),
        1,
        "round round-cheat: its void does not pay every seat the better of its result and a "
        "refund of its stake",
    ),
    Tamper(
        "void after the deal in the form from before reason codes",
        lambda: cheating(
            EntryKind.ROUND_VOIDED,
            lambda p: {"reason": p["reason"], "state": p["state"], "server_seed": p["server_seed"]},
            void_after=EntryKind.ROUND_DEALT,
        ),
        1,
        "round round-cheat: its void after the deal settles nothing",
    ),
    Tamper(
        "void reason_code a list (validly signed)",
        lambda: cheating(
            EntryKind.ROUND_VOIDED,
            lambda p: {**p, "reason_code": []},
            void_after=EntryKind.ROUND_COMMITTED,
        ),
        1,
        "round round-cheat: ROUND_VOIDED's reason_code [] is not one of PLATFORM_FAILURE,",
    ),
    Tamper(
        "round event naming an actor of a bad form",
        lambda: cheating(EntryKind.ROUND_DEALT, lambda p: {**p, "actor": "root"}),
        1,
        "round round-cheat: ROUND_DEALT's actor 'root' is not service, console, token:NAME or "
        "cert:CN",
    ),
    Tamper("round settled twice", settled_twice, 1, "ROUND_SETTLED after ROUND_SETTLED"),
    Tamper(
        "a table's next round committed before its previous round ends",
        table_reopened_before_its_round_ended,
        1,
        "round round-later: ROUND_COMMITTED for table 'shared1' while its round round-earlier is"
        " neither settled nor voided",
    ),
    Tamper(
        "rotation signed by the old key (control)",
        lambda: rotated(by_intruder=False),
        0,
        "result: VALID",
    ),
    Tamper(
        "rotation not signed by the current key",
        lambda: rotated(by_intruder=True),
        1,
        "key rotation refused",
    ),
    Tamper(
        "another key pinned",
        lambda: Tampered(base_bytes(), new_signer().vkey),
        1,
        "entry 0: signed by key",
    ),
    # -- replay of hostile payloads ----------------------------------------------------------------
    Tamper(
        "stake a string",
        lambda: cheating(
            EntryKind.ROUND_DEALT,
            lambda p: {**p, "seats": [{**p["seats"][0], "stake": "10"}, *p["seats"][1:]]},
        ),
        1,
        "seats[0].stake must be an integer, got a string",
    ),
    Tamper(
        "seats an object",
        lambda: cheating(EntryKind.ROUND_DEALT, lambda p: {**p, "seats": {"1": p["seats"][0]}}),
        1,
        "seats must be a JSON array",
    ),
    Tamper(
        "committed house rules a list",
        lambda: cheating(
            EntryKind.ROUND_COMMITTED,
            lambda p: {**p, "house_rules": [1]},
            void_after=EntryKind.ROUND_COMMITTED,
        ),
        1,
        "the committed house_rules are [1], not a JSON object",
    ),
    Tamper(
        "commitment naming another round",
        lambda: cheating(EntryKind.ROUND_COMMITTED, lambda p: {**p, "round_id": "round-0"}),
        1,
        "ROUND_COMMITTED must carry exactly table_id, house_rules, commitment",
    ),
    # -- deep nesting, lone surrogates, bytes that are not UTF-8 -----------------------------------
    Tamper(
        "deep nesting in a line",
        lambda: replaced(FIRST_ENTRY + 2, '{"entry": ' + nested(100_000) + "}\n"),
        1,
        "entry 2: line 10 is not JSON this reader accepts: nested too deeply",
    ),
    Tamper(
        "deep nesting in the header line",
        lambda: header_text('"left_frontier": []', '"left_frontier": ' + nested(100_000)),
        2,
        "line 1 is not JSON this reader accepts: nested too deeply",
    ),
    Tamper(
        "nesting of 33 levels in a payload (validly signed)",
        lambda: with_entry('{"x":' + nested(31) + "}"),
        1,
        "entry 9: nested more than 32 levels deep",
    ),
    Tamper(
        "nesting of 32 levels in a payload (validly signed)",
        lambda: with_entry('{"x":' + nested(30) + "}"),
        0,
        "result: VALID",
    ),
    Tamper(
        "deep nesting in a payload (validly signed)",
        lambda: with_entry('{"x":' + nested(32_000) + "}"),
        1,
        "entry 9: nested more than 32 levels deep",
    ),
    Tamper(
        "lone surrogate as a line's entry",
        lambda: replaced(FIRST_ENTRY + 2, '{"entry": "\\ud800"}\n'),
        1,
        "line 10: the entry holds a lone surrogate",
    ),
    Tamper(
        "lone surrogate added to an entry string",
        surrogate_inside_entry_string,
        1,
        "line 10: the entry holds a lone surrogate",
    ),
    Tamper(
        "lone surrogate escaped inside an entry (validly signed)",
        lambda: with_entry('{"x":"\\ud800"}'),
        1,
        "not representable as RFC 8785 JSON",
    ),
    Tamper(
        "lone surrogate in a payload key (validly signed)",
        lambda: with_entry('{"\\udc00":1}'),
        1,
        "not representable as RFC 8785 JSON",
    ),
    Tamper(
        "lone surrogate in a checkpoint",
        lone_surrogate_in_checkpoint,
        1,
        "line 4: checkpoint refused: note is not valid Unicode",
    ),
    Tamper(
        "lone surrogate in the header origin",
        lambda: header_with(origin="gnau-dealer/\ud800"),
        2,
        "header origin 'gnau-dealer/\\ud800' is not gnau-dealer/<deployment name>",
    ),
    Tamper(
        "lone surrogate in a header key name",
        header_key_with_lone_surrogate,
        2,
        "header public_keys: ",
    ),
    Tamper(
        "encoded surrogate bytes in an entry line",
        lambda: entry_line_bytes(9, b'{"entry": "', b'{"entry": "\xed\xa0\x80'),
        1,
        "entry 2: line 10 is not UTF-8: byte 0xed at offset 11",
    ),
    Tamper(
        "invalid UTF-8 in an entry line",
        lambda: entry_line_bytes(9, b"seats", b"\xffseats"),
        1,
        "entry 2: line 10 is not UTF-8: byte 0xff",
    ),
    Tamper(
        "invalid UTF-8 in a checkpoint line",
        lambda: entry_line_bytes(3, b'{"checkpoint"', b'\xc0{"checkpoint"'),
        1,
        "line 4 is not UTF-8: byte 0xc0 at offset 0",
    ),
    Tamper(
        "invalid UTF-8 in the header",
        lambda: entry_line_bytes(0, b"gnau-dealer/test", b"gnau-dealer/t\xffst"),
        2,
        "line 1 is not UTF-8: byte 0xff",
    ),
    Tamper("byte-order mark", lambda: raw(b"\xef\xbb\xbf" + base_bytes()), 2, "line 1 is not JSON"),
    # -- line ends ---------------------------------------------------------------------------------
    Tamper(
        "CRLF line ends",
        lambda: line_ends(b"\r\n"),
        2,
        "line 1 holds a carriage return: lines end in LF alone",
    ),
    Tamper("CR-only line ends", lambda: line_ends(b"\r"), 2, "line 1 holds a carriage return"),
    Tamper(
        "CRLF after the header",
        lambda: line_ends(b"\r\n", keep_header_lf=True),
        1,
        "line 2 holds a carriage return",
    ),
    Tamper(
        "CRLF pinned checkpoint",
        lambda: pinned(honest().notes[2], lambda t: t.replace("\n", "\r\n")),
        2,
        "pinned checkpoint: note contains control character U+000D",
    ),
    Tamper("pinned checkpoint (control)", lambda: pinned(honest().notes[2]), 0, "result: VALID"),
    Tamper(
        "pinned checkpoint with a hyphen for the em dash",
        lambda: pinned(honest().notes[2], lambda t: t.replace("—", "-")),
        2,
        "pinned checkpoint: signature line",
    ),
    Tamper(
        "pinned checkpoint of another log",
        lambda: pinned(MemoryLog(new_signer("gnau-dealer/other")).checkpoint()),
        2,
        "pinned checkpoint is of the log 'gnau-dealer/other'",
    ),
    Tamper(
        "pinned checkpoint that is not a note",
        lambda: bundle(lines(), pin=b"9\n"),
        2,
        "pinned checkpoint: note has no blank line",
    ),
    Tamper(
        "pinned checkpoint signed by another key",
        pinned_by_another_key,
        1,
        "the pinned checkpoint does not verify: no signature from a known key",
    ),
    # -- anchoring ---------------------------------------------------------------------------------
    Tamper(
        "no checkpoints",
        no_checkpoints,
        1,
        "unanchored: no signed root covers entries 0 to 20 (no checkpoint was verified",
    ),
    Tamper(
        "no checkpoints, --allow-unanchored",
        lambda: no_checkpoints("--allow-unanchored"),
        0,
        "warning: accepted although unanchored",
    ),
    Tamper(
        "last checkpoint removed",
        last_checkpoint_removed,
        1,
        "no signed root covers entries 17 to 20 (the largest verified checkpoint is of size 17",
    ),
    Tamper(
        "last checkpoint removed, anchored by the pin",
        lambda: last_checkpoint_removed(pin=honest().notes[-1].encode()),
        0,
        "result: VALID",
    ),
    Tamper(
        "an earlier checkpoint removed",
        lambda: deleted(FIRST_CHECKPOINT + 2),
        0,
        "checkpoints: 5 verified",
    ),
    Tamper(
        "checkpoint moved after the entries",
        lambda: moved(FIRST_CHECKPOINT, 27),
        1,
        "line 28: a checkpoint after the first entry",
    ),
    Tamper(
        "checkpoint moved among the entries",
        lambda: moved(LAST_CHECKPOINT, 12),
        1,
        "entry 6: line 13: a checkpoint after the first entry",
    ),
    # -- blank lines and members -------------------------------------------------------------------
    Tamper(
        "blank line among the entries",
        lambda: inserted(FIRST_ENTRY + 4, "\n"),
        1,
        "entry 4: line 12 is blank (blank lines are allowed only at the end of the file)",
    ),
    Tamper(
        "blank line after the header",
        lambda: inserted(FIRST_CHECKPOINT, "\n"),
        1,
        "line 2 is blank",
    ),
    Tamper(
        "line of spaces among the entries",
        lambda: inserted(FIRST_ENTRY + 4, "  \t \n"),
        1,
        "line 12 is blank",
    ),
    Tamper("blank first line", lambda: inserted(HEADER, "\n"), 2, "line 1 is blank"),
    Tamper(
        "blank lines at the end (allowed)",
        lambda: raw(base_bytes() + b"\n \n\n"),
        0,
        "result: VALID",
    ),
    Tamper("no final newline (allowed)", lambda: raw(base_bytes()[:-1]), 0, "result: VALID"),
    Tamper(
        "unknown member in an entry line",
        lambda: replaced(
            FIRST_ENTRY + 4, lines()[FIRST_ENTRY + 4].replace('{"entry"', '{"note": 1, "entry"', 1)
        ),
        1,
        f"line 12 {ENTRY_MEMBERS_RULE}, but its members are ['entry', 'note']",
    ),
    Tamper(
        "unknown member in a checkpoint line",
        lambda: replaced(2, lines()[2].replace('{"checkpoint"', '{"x": null, "checkpoint"', 1)),
        1,
        f"line 3 {ENTRY_MEMBERS_RULE}",
    ),
    Tamper(
        "checkpoint and entry in one line",
        lambda: replaced(
            FIRST_ENTRY + 4,
            lines()[FIRST_ENTRY + 4].replace('{"entry"', '{"checkpoint": "x", "entry"', 1),
        ),
        1,
        f"line 12 {ENTRY_MEMBERS_RULE}",
    ),
    Tamper(
        "empty object line",
        lambda: replaced(FIRST_ENTRY + 4, "{}\n"),
        1,
        f"line 12 {ENTRY_MEMBERS_RULE}, but its members are []",
    ),
    Tamper(
        "member twice in an entry line",
        lambda: replaced(
            FIRST_ENTRY + 4,
            lines()[FIRST_ENTRY + 4].replace('{"entry"', '{"entry": "x", "entry"', 1),
        ),
        1,
        "line 12 has the member 'entry' twice",
    ),
    Tamper(
        "unknown header member",
        lambda: header_with(comment="hi"),
        2,
        "header members must be exactly format, origin, public_keys, first_index, size, "
        "left_frontier; missing [], unknown ['comment']",
    ),
    Tamper(
        "member twice in the header",
        lambda: header_text('{"format"', '{"size": 1, "format"'),
        2,
        "line 1 has the member 'size' twice",
    ),
    *(
        Tamper(
            f"{kind} line",
            lambda text=text: replaced(FIRST_ENTRY + 4, text + "\n"),
            1,
            f"line 12 is {kind}, not a JSON object",
        )
        for kind, text in [
            ("an array", '["entry"]'),
            ("a string", '"entry"'),
            ("a number", "12"),
            ("null", "null"),
            ("a boolean", "true"),
        ]
    ),
    Tamper(
        "header an array",
        lambda: replaced(HEADER, '["gnau-dealer/audit-bundle/v1"]\n'),
        2,
        "line 1 is an array, not a JSON object",
    ),
    # -- wrong JSON types in the header and in line values -----------------------------------------
    Tamper(
        "header format another",
        lambda: header_with(format="gnau-dealer/audit-bundle/v2"),
        2,
        "format is 'gnau-dealer/audit-bundle/v2'",
    ),
    Tamper("header format a number", lambda: header_with(format=1), 2, "format is 1"),
    Tamper("header without size", lambda: header_without("size"), 2, "missing ['size']"),
    *(
        Tamper(
            f"header {name} {value!r}"[:60],
            lambda name=name, value=value: header_with(**{name: value}),
            2,
            reason,
        )
        for name, value, reason in [
            ("origin", 5, "header origin 5 is not gnau-dealer/<deployment name>"),
            ("origin", ["gnau-dealer/test"], "header origin ['gnau-dealer/test'] is not"),
            ("origin", "gnau-dealer/Test", "header origin 'gnau-dealer/Test' is not"),
            ("public_keys", "k", "header public_keys must be a non-empty list, not 'k'"),
            ("public_keys", [], "header public_keys must be a non-empty list, not []"),
            ("public_keys", [1], "header public_keys: 1 is not a vkey string"),
            (
                "public_keys",
                ["not-a-vkey"],
                "header public_keys: verifier key 'not-a-vkey' is not name+keyid+key",
            ),
            ("public_keys", None, "header public_keys must be a non-empty list, not None"),
            (
                "first_index",
                "0",
                "header first_index must be an integer in 0..9,007,199,254,740,991, not '0'",
            ),
            (
                "first_index",
                0.0,
                "header first_index must be an integer in 0..9,007,199,254,740,991, not 0.0",
            ),
            ("first_index", False, "not False"),
            ("first_index", -1, "not -1"),
            ("first_index", 2**53, "not 9007199254740992"),
            (
                "first_index",
                1,
                "header left_frontier has 0 hashes, but a frontier of 1 entries has 1",
            ),
            ("size", "21", "header size must be an integer in 1..9,007,199,254,740,992, not '21'"),
            ("size", 21.0, "not 21.0"),
            ("size", None, "not None"),
            ("size", True, "not True"),
            ("size", 0, "not 0"),
            ("size", 2**53 + 1, "not 9007199254740993"),
            ("size", 10**30, "not 1000000000000000000000000000000"),
            ("size", [21], "not [21]"),
            (
                "left_frontier",
                "",
                "header left_frontier must be a list of 64-hex-digit hashes, not ''",
            ),
            (
                "left_frontier",
                [1],
                "header left_frontier must be a list of 64-hex-digit hashes, not [1]",
            ),
            ("left_frontier", ["AB" * 32], "not ['ABABAB"),
            ("left_frontier", {}, "not {}"),
        ]
    ),
    Tamper(
        "header size of 5000 digits",
        lambda: header_text('"size": 21', '"size": ' + "9" * 5000),
        2,
        "line 1 is not JSON this reader accepts: an integer of over 4300 digits",
    ),
    Tamper(
        "header size 1e400",
        lambda: header_text('"size": 21', '"size": 1e400'),
        2,
        "header size must be an integer in 1..9,007,199,254,740,992, not inf",
    ),
    Tamper(
        "header size one more than the entries",
        lambda: header_with(size=SIZE + 1),
        1,
        "the header announces entries 0 to 21, but the bundle holds entries 0 to 20",
    ),
    Tamper(
        "header size one fewer than the entries",
        lambda: header_with(size=SIZE - 1),
        1,
        "the header announces entries 0 to 19, but the bundle holds entries 0 to 20",
    ),
    Tamper(
        "header first_index 1, entry 0 still there",
        first_index_moved,
        1,
        "entry 1: the entry says index 0 but stands where 1 belongs",
    ),
    Tamper(
        "header first_index 1, checkpoint of size 1 kept",
        lambda: header_with(first_index=1, left_frontier=["ab" * 32]),
        1,
        "line 2: a checkpoint of size 1 covers no entry of this bundle, which starts at 1",
    ),
    Tamper(
        "header origin of another log",
        lambda: header_with(origin="gnau-dealer/other"),
        1,
        "line 2: checkpoint refused: checkpoint is for origin 'gnau-dealer/test', "
        "expected 'gnau-dealer/other'",
    ),
    *(
        Tamper(
            f"{member} value {kind}",
            lambda member=member, value=value: replaced(
                FIRST_ENTRY + 4 if member == "entry" else 2, json.dumps({member: value}) + "\n"
            ),
            1,
            f"{member} must be a string, not {kind}",
        )
        for member, value, kind in [
            ("entry", 5, "a number"),
            ("entry", None, "null"),
            ("entry", ["{}"], "an array"),
            ("entry", {"index": 4}, "an object"),
            ("entry", True, "a boolean"),
            ("checkpoint", 5, "a number"),
            ("checkpoint", [], "an array"),
        ]
    ),
    Tamper(
        "checkpoint text not a note",
        lambda: replaced(2, '{"checkpoint": "9"}\n'),
        1,
        "line 3: checkpoint refused: note does not end in a newline",
    ),
    Tamper(
        "checkpoint of size 0",
        lambda: inserted(
            FIRST_CHECKPOINT,
            json.dumps({"checkpoint": MemoryLog(honest().signer).checkpoint()}) + "\n",
        ),
        1,
        "line 2: a checkpoint of size 0 covers no entry of this bundle",
    ),
    # -- numbers in entries ------------------------------------------------------------------------
    Tamper(
        "payload integer 2^53-1 (validly signed)",
        lambda: with_entry(f'{{"n":{MAX}}}'),
        0,
        "result: VALID",
    ),
    Tamper(
        "payload integer -(2^53-1) (validly signed)",
        lambda: with_entry(f'{{"n":-{MAX}}}'),
        0,
        "result: VALID",
    ),
    Tamper(
        "payload integer 2^53 (validly signed)",
        lambda: with_entry(f'{{"n":{MAX + 1}}}'),
        1,
        "entry 9: holds the number '9007199254740992': every number in an entry must be an "
        "integer within ±(2**53-1)",
    ),
    Tamper(
        "payload integer -2^53 (validly signed)",
        lambda: with_entry(f'{{"n":-{MAX + 1}}}'),
        1,
        "entry 9: holds the number '-9007199254740992'",
    ),
    Tamper(
        "payload number 1e21 (validly signed)",
        lambda: with_entry('{"n":1e21}'),
        1,
        "entry 9: holds the number '1e21'",
    ),
    Tamper(
        "payload number 1.5 (validly signed)",
        lambda: with_entry('{"n":1.5}'),
        1,
        "entry 9: holds the number '1.5'",
    ),
    Tamper(
        "payload integer of 5000 digits (validly signed)",
        lambda: with_entry('{"n":' + "7" * 5000 + "}"),
        1,
        "…(+4963 chars): every number",
    ),
    # -- what there is to read at all --------------------------------------------------------------
    Tamper("empty file", lambda: raw(b""), 2, "the bundle is empty"),
    Tamper("only blank lines", lambda: raw(b"\n\n  \n"), 2, "the bundle is empty"),
    Tamper(
        "header only",
        lambda: bundle(lines()[:1]),
        1,
        "the header announces entries 0 to 20, but the bundle holds no entries",
    ),
    Tamper(
        "header and checkpoints only",
        lambda: bundle(lines()[:FIRST_ENTRY]),
        1,
        "the header announces entries 0 to 20, but the bundle holds no entries",
    ),
    Tamper(
        "key that is not a vkey",
        lambda: Tampered(base_bytes(), "not-a-vkey"),
        2,
        "--key: verifier key 'not-a-vkey' is not name+keyid+key",
    ),
    Tamper(
        "no key pinned (warned)",
        lambda: Tampered(base_bytes(), None),
        0,
        "warning: no key was pinned",
    ),
]


def verify_cli(tampered: Tampered, directory: Path) -> list[str]:
    bundle_path = directory / "bundle.jsonl"
    bundle_path.write_bytes(tampered.bundle)
    args = ["audit", "verify", str(bundle_path), *tampered.options]
    if tampered.key is not None:
        args += ["--key", tampered.key]
    if tampered.pin is not None:
        pin_path = directory / "pinned.txt"
        pin_path.write_bytes(tampered.pin)
        args += ["--checkpoint", str(pin_path)]
    return args


@pytest.mark.parametrize("tamper", CATALOGUE, ids=[tamper.name for tamper in CATALOGUE])
def test_tamper_catalogue(
    tamper: Tamper, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(verify_cli(tamper.make(), tmp_path))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert (status, tamper.reason in out + err) == (tamper.status, True), out + err
    if status == 2:
        assert err.startswith("gnau audit: cannot verify") and not out, err
    else:
        verdict = {0: "result: VALID", 1: "result: "}[status]
        assert out.splitlines()[-1].startswith(verdict), out
        assert "result: VALID" not in out or status == 0


def test_the_catalogue_names_are_unique() -> None:
    names = [tamper.name for tamper in CATALOGUE]
    assert len(names) == len(set(names))


@pytest.mark.parametrize(
    "tamper",
    [
        t
        for t in CATALOGUE
        if t.name
        in {
            "deep nesting in a line",
            "lone surrogate as a line's entry",
            "CRLF pinned checkpoint",
            "no checkpoints",
        }
    ],
    ids=lambda tamper: tamper.name,
)
def test_a_real_process_prints_no_traceback(tamper: Tamper, tmp_path: Path) -> None:
    args = verify_cli(tamper.make(), tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "gnau_service.cli.main", *args],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in done.stdout + done.stderr
    assert done.returncode == tamper.status, done.stdout + done.stderr
    assert tamper.reason in done.stdout + done.stderr


def test_entries_are_exactly_what_the_catalogue_base_assumes() -> None:
    text = lines()
    assert json.loads(text[HEADER])["size"] == SIZE
    checkpoints = [json.loads(line)["checkpoint"] for line in text[FIRST_CHECKPOINT:FIRST_ENTRY]]
    assert [int(note.split("\n")[1]) for note in checkpoints] == [1, 5, 9, 13, 17, 21]
    entries = [json.loads(line)["entry"].encode() for line in text[FIRST_ENTRY:]]
    assert entries == honest().entries
    assert [json.loads(data)["index"] for data in entries] == list(range(SIZE))
    assert leaf_hash(entries[0]) and rfc8785.dumps(json.loads(entries[0])) == entries[0]
