"""The JSON Schemas of docs/schemas/ against real outputs of a real service, and against
hand-made documents each schema must refuse.

The schemas are written by hand from the docs; the service's outputs are the evidence that the
docs (and so the schemas) describe what it writes, and the refused samples that the schemas
check what they say they check.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from gnau_service.audit.entries import EntryKind
from tests.fairness.conftest import FAIRNESS_VECTORS, load_json
from tests.independent import handmade_cases
from tests.schemas.served import Served
from tests.schemas.validation import BASE, error_paths, errors, load, registry, schema_files

PAYLOAD_SCHEMAS = {
    "ROUND_COMMITTED": "payload-round-committed.schema.json",
    "ROUND_DEALT": "payload-round-dealt.schema.json",
    "ROUND_REVEALED": "payload-round-revealed.schema.json",
    "ROUND_SETTLED": "payload-round-settled.schema.json",
    "ROUND_VOIDED": "payload-round-voided.schema.json",
    "SERVICE_STARTED": "payload-service-started.schema.json",
    "SERVICE_STOPPED": "payload-service-stopped.schema.json",
    "CONFIG_CHANGED": "payload-config-changed.schema.json",
    "TOKENS_CHANGED": "payload-tokens-changed.schema.json",
    "KEY_ROTATED": "payload-key-rotated.schema.json",
    "PLAYER_FORGOTTEN": "payload-player-forgotten.schema.json",
    "TABLE_CHANGED": "payload-table-changed.schema.json",
    "OPERATOR_CHANGED": "payload-operator-changed.schema.json",
    "GAMING_CHANGED": "payload-gaming-changed.schema.json",
    "SOFTWARE_VERIFIED": "payload-software-verified.schema.json",
}
#: Entry kinds with a schema before the service writes them (issue 21 adds PLAYER_FORGOTTEN to
#: EntryKind in another change); once it is an EntryKind this set adds nothing.
SCHEMA_BEFORE_KIND = {"PLAYER_FORGOTTEN"}


# -- the schemas themselves -----------------------------------------------------------------------


def test_there_is_a_schema_for_every_format_and_payload_kind() -> None:
    names = {path.name for path in schema_files()}
    assert set(PAYLOAD_SCHEMAS) == {str(kind) for kind in EntryKind} | SCHEMA_BEFORE_KIND
    assert set(PAYLOAD_SCHEMAS.values()) <= names
    assert {
        "revealed-round.schema.json",
        "receipt.schema.json",
        "bundle-line.schema.json",
        "checkpoint.schema.json",
        "key-rotation.schema.json",
        "log-entry.schema.json",
    } <= names


@pytest.mark.parametrize("path", schema_files(), ids=lambda path: path.name)
def test_each_schema_is_draft_2020_12_under_its_own_id(path: Any) -> None:
    schema = load(path)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == BASE + path.name
    assert schema["title"] and len(schema["description"]) > 80


def _walk(node: object, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        found.append((path, node))
        for key, value in node.items():
            found += _walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for position, value in enumerate(node):
            found += _walk(value, f"{path}/{position}")
    return found


@pytest.mark.parametrize("path", schema_files(), ids=lambda path: path.name)
def test_every_reference_resolves_within_the_directory(path: Any) -> None:
    schema = load(path)
    resolver = registry().resolver(base_uri=schema["$id"])
    references = [node["$ref"] for _, node in _walk(schema) if "$ref" in node]
    for reference in references:
        assert resolver.lookup(reference).contents is not None, reference


@pytest.mark.parametrize("path", schema_files(), ids=lambda path: path.name)
def test_every_member_a_schema_names_says_what_it_is(path: Any) -> None:
    """For a stranger: each property is described where it is declared, or is a reference to a
    described definition. Conditions (if/then/else) only narrow members declared elsewhere."""
    schema = load(path)
    resolver = registry().resolver(base_uri=schema["$id"])
    undescribed = []
    for where, node in _walk(schema):
        if any(part in ("if", "then", "else") for part in where.split("/")):
            continue
        for name, member in node.get("properties", {}).items():
            described = "description" in member or (
                "$ref" in member and "description" in resolver.lookup(member["$ref"]).contents
            )
            if not described and not _narrows(where, schema):
                undescribed.append(f"{where}/properties/{name}")
    assert not undescribed


def _narrows(where: str, schema: dict[str, Any]) -> bool:
    """A subschema beside a $ref (or a oneOf of them) that only tightens what the reference
    declares (the stake limit of a log entry's seats, of either fairness version)."""
    parent = schema
    parts = [part for part in where.split("/") if part]
    for part in parts[:-1]:
        parent = parent[int(part)] if isinstance(parent, list) else parent[part]
    return parts[-1:] == ["items"] and ("$ref" in parent or "oneOf" in parent)


# -- real outputs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", FAIRNESS_VECTORS, ids=lambda path: path.stem)
def test_the_fairness_vectors_are_revealed_rounds(path: Any) -> None:
    assert errors("revealed-round.schema.json", load_json(path)["revealed_round"]) == []


def test_served_receipts_validate_with_every_entry_in_them(served: Served) -> None:
    assert set(served.receipts) >= {"settled", "voided_shuffled", "voided_dealt"}
    for story, text in [*served.receipts.items(), ("pinned", served.pinned_receipt)]:
        receipt = json.loads(text)
        assert errors("receipt.schema.json", receipt) == [], story
        assert (receipt["round"] is None) == story.endswith("voided_shuffled")
        for item in receipt["entries"]:
            assert errors("log-entry.schema.json", json.loads(item["entry"])) == [], story
        for note in receipt["key_rotations"]:
            assert errors("key-rotation.schema.json", note) == []
        assert errors("checkpoint.schema.json", receipt["checkpoint"]) == []
    assert json.loads(served.pinned_receipt)["consistency"] is not None
    assert json.loads(served.receipts["settled_after_rotation"])["key_rotations"]


def test_rounds_from_get_round_validate(served: Served) -> None:
    """The form ``gnau round get --json`` writes: revealed_round_from_proto of GetRound."""
    assert len(served.rounds) >= 5
    for story, document in served.rounds.items():
        assert errors("revealed-round.schema.json", document) == [], story


def _bundle_lines(served: Served) -> list[dict[str, Any]]:
    return [json.loads(line) for line in served.bundle.splitlines()]


def test_every_line_of_an_exported_bundle_validates(served: Served) -> None:
    lines = _bundle_lines(served)
    assert errors("bundle-line.schema.json", lines[0], "#/$defs/header") == []
    checkpoints = [line["checkpoint"] for line in lines if "checkpoint" in line]
    entries = [json.loads(line["entry"]) for line in lines if "entry" in line]
    assert len(checkpoints) > 1 and len(entries) == lines[0]["size"]
    for number, line in enumerate(lines, start=1):
        assert errors("bundle-line.schema.json", line) == [], f"line {number}"
    for note in checkpoints:
        assert errors("checkpoint.schema.json", note) == []
    for entry in entries:
        assert errors("log-entry.schema.json", entry) == [], entry["kind"]


def test_each_payload_kind_the_service_writes_validates_on_its_own(served: Served) -> None:
    payloads: dict[str, list[dict[str, Any]]] = {}
    for line in _bundle_lines(served):
        if "entry" in line:
            entry = json.loads(line["entry"])
            payloads.setdefault(entry["kind"], []).append(entry["payload"])
    # Everything but what the served stories do not do: forget a player
    # (test_a_player_forgotten_entry_names_no_one), change the token file, stop (the bundle is
    # exported while the service runs); the hand-made log below holds all three. A service with
    # no software manifest writes no SOFTWARE_VERIFIED (tests/schemas/test_software_verified.py).
    written = set(PAYLOAD_SCHEMAS) - {"TOKENS_CHANGED", "SERVICE_STOPPED", "SOFTWARE_VERIFIED"}
    assert set(payloads) - SCHEMA_BEFORE_KIND == written - SCHEMA_BEFORE_KIND
    assert {payload["state"] for payload in payloads["ROUND_VOIDED"]} == {
        "SHUFFLED",
        "DEALT",
        "REVEALED",
    }
    for kind, found in payloads.items():
        for payload in found:
            assert errors(PAYLOAD_SCHEMAS[kind], payload) == [], kind
        for other, name in PAYLOAD_SCHEMAS.items():
            if other not in (kind, "CONFIG_CHANGED"):
                assert errors(name, found[0]), f"a {kind} payload passes for {other}"
    for payload in payloads["KEY_ROTATED"]:
        assert errors("key-rotation.schema.json", payload["rotation"]) == []
    # Issue 37: every entry names its actor, and a void after the deal pays.
    assert all("actor" in payload for found in payloads.values() for payload in found)
    paying = [v for v in payloads["ROUND_VOIDED"] if v["state"] != "SHUFFLED"]
    assert paying and all({"result", "paid"} <= set(v) for v in paying)


def test_a_dealt_stake_is_bounded_by_the_entry_limit_in_the_payload_schema_too(
    served: Served,
) -> None:
    payload = _entry(served, "ROUND_DEALT")["payload"]
    assert errors("payload-round-dealt.schema.json", payload) == []
    too_big = _set(payload, "seats.0.stake", 2**53)
    assert _refused_at("payload-round-dealt.schema.json", too_big, "seats.0.stake")
    revealed = load_json(FAIRNESS_VECTORS[0])["revealed_round"]
    assert errors("revealed-round.schema.json", _set(revealed, "seats.0.stake", 2**53)) == []


def test_config_changed_takes_any_object_within_the_entry_limits() -> None:
    entry = {
        "index": 7,
        "key_id": "0c787b25",
        "kind": "CONFIG_CHANGED",
        "payload": {"change": "max_stake", "from": 10**12, "to": 5 * 10**12, "by": ["ops"]},
        "prev_hash": "ab" * 32,
        "round_id": None,
        "signature": "cd" * 64,
        "time": "2026-11-29T12:00:01.000000Z",
    }
    assert errors("log-entry.schema.json", entry) == []
    for payload in ({"ratio": 0.5}, {"nested": [{"big": 2**53}]}, {"low": -(2**53)}):
        assert errors("log-entry.schema.json", {**entry, "payload": payload}), payload
    # An actor, where there is one, is one (issue 37); the settings the service writes.
    assert errors("log-entry.schema.json", {**entry, "payload": {"actor": "root"}})
    settings = {"max_stake": 0, "deal_deadline_seconds": 600, "settle_deadline_seconds": 3600}
    assert errors("log-entry.schema.json", {**entry, "payload": {"settings": settings}})


def test_a_player_forgotten_entry_names_no_one() -> None:
    entry = {
        "index": 9,
        "key_id": "0c787b25",
        "kind": "PLAYER_FORGOTTEN",
        "payload": {},
        "prev_hash": "ab" * 32,
        "round_id": None,
        "signature": "cd" * 64,
        "time": "2026-12-02T08:00:00.000000Z",
    }
    assert errors("log-entry.schema.json", entry) == []
    assert errors("log-entry.schema.json", {**entry, "payload": {"actor": "console"}}) == []
    for payload in (
        {"player_id": "alice"},
        {"player_ref": "p-" + "0" * 32},
        {"count": 2},
        {"actor": "console", "player_id": "alice"},
        {"actor": "alice"},
    ):
        assert errors("log-entry.schema.json", {**entry, "payload": payload}), payload
    assert errors("log-entry.schema.json", {**entry, "round_id": "r-1"})
    for name in set(PAYLOAD_SCHEMAS.values()) - {"payload-player-forgotten.schema.json"}:
        if name != "payload-config-changed.schema.json":  # which takes any object
            assert errors(name, {}), f"an empty payload passes for {name}"


# -- documents each schema must refuse ------------------------------------------------------------

Mutation = Callable[[dict[str, Any]], object]


def _receipt(served: Served, story: str = "settled") -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(served.receipts[story])
    return loaded


def _entry(served: Served, kind: str) -> dict[str, Any]:
    for line in _bundle_lines(served):
        if "entry" in line and json.loads(line["entry"])["kind"] == kind:
            loaded: dict[str, Any] = json.loads(line["entry"])
            return loaded
    raise AssertionError(f"no {kind} entry")


def _refused_at(name: str, document: object, path: str, pointer: str = "") -> bool:
    """Whether the schema refuses ``document`` with an error at ``path`` (``seats.0.stake``), in
    it, or at a member on the way to it (a missing or unknown member is its parent's error)."""
    where = "$" + "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in path.split("."))
    return any(
        where.startswith(found) or found.startswith(where)
        for found in error_paths(name, document, pointer)
    )


def _set(document: dict[str, Any], path: str, value: object) -> dict[str, Any]:
    """A copy of ``document`` with the member at ``path`` (``a.0.b``) set, or removed when
    ``value`` is ``...``."""
    changed = copy.deepcopy(document)
    *parents, last = path.split(".")
    target: Any = changed
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    key: Any = int(last) if isinstance(target, list) else last
    if value is ...:
        del target[key]
    else:
        target[key] = value
    return changed


V1_SEAT = {"seat_number": 1, "player_id": "alice", "stake": 1, "client_seed": ""}
V2_SEAT = {"seat_number": 1, "player_ref": "p-" + "0" * 32, "stake": 1, "client_seed": ""}
REVEALED_ROUND_REFUSALS: list[tuple[str, str, object]] = [
    ("another format", "format", "gnau-dealer/revealed-round/v4"),
    ("a v1 round with a v2 seat", "seats.0", V2_SEAT),
    ("a missing member", "server_seed", ...),
    ("an unknown member", "table_id", "table-1"),
    ("a card that is not one", "deck.0", "1X"),
    ("a lower-case card", "dealer_hand.0", "ah"),
    ("10 for T", "hands.0.cards.0", "10H"),
    ("a hand of four", "hands.0.cards", ["AS", "2S", "3S", "4S"]),
    ("a deck of 51 cards", "deck", ["AS"] * 51),
    ("a stake of 0", "seats.0.stake", 0),
    ("a stake beyond 2^63-1", "seats.0.stake", 2**63),
    ("a fractional stake", "seats.0.stake", 1.5),
    ("a stake as text", "seats.0.stake", "100"),
    ("a boolean stake", "seats.0.stake", True),
    ("seat number 0", "seats.0.seat_number", 0),
    ("seat number 2^31", "seats.0.seat_number", 2**31),
    ("an empty player id", "seats.0.player_id", ""),
    ("a client seed of 65 bytes", "seats.0.client_seed", "00" * 65),
    ("an odd number of hex digits", "seats.0.client_seed", "abc"),
    ("upper-case hex", "commitment", "AB" * 32),
    ("a 31-byte seed", "server_seed", "ab" * 31),
    ("a hash with a newline after it", "transcript_hash", "ab" * 32 + "\n"),
    ("9 decks", "house_rules.decks", 9),
    ("an unknown tie rule", "house_rules.tie", "house"),
    ("a rule as text", "house_rules.five_small", "true"),
    ("a missing house rule", "house_rules.payout", ...),
    ("an unknown house rule", "house_rules.jokers", True),
    ("a beacon without a value", "beacon", {"label": "drand/1"}),
    ("an empty beacon value", "beacon", {"label": "drand/1", "value": ""}),
    ("no seats", "seats", []),
    ("an empty round id", "round_id", ""),
    ("a round id of 129 characters", "round_id", "r" * 129),
]


@pytest.mark.parametrize(
    ("why", "path", "value"), REVEALED_ROUND_REFUSALS, ids=[r[0] for r in REVEALED_ROUND_REFUSALS]
)
def test_the_revealed_round_schema_refuses(why: str, path: str, value: object) -> None:
    revealed = load_json(FAIRNESS_VECTORS[0])["revealed_round"]
    assert errors("revealed-round.schema.json", revealed) == []
    assert _refused_at("revealed-round.schema.json", _set(revealed, path, value), path), why


def as_v2(revealed: dict[str, Any], version: int = 2) -> dict[str, Any]:
    """A v1 round's fields in the v2 (or v3) form (format, and a reference for each player id):
    the schema checks the form only, not the hashes."""
    seats = [
        {
            "seat_number": seat["seat_number"],
            "player_ref": f"p-{seat['seat_number']:032x}",
            "stake": seat["stake"],
            "client_seed": seat["client_seed"],
        }
        for seat in revealed["seats"]
    ]
    return {**revealed, "format": f"gnau-dealer/revealed-round/v{version}", "seats": seats}


V2_REVEALED_ROUND_REFUSALS: list[tuple[str, str, object]] = [
    ("a player id for a reference", "seats.0.player_ref", "alice"),
    ("an upper-case reference", "seats.0.player_ref", "p-" + "A" * 32),
    ("a reference of 31 bytes", "seats.0.player_ref", "p-" + "0" * 62),
    ("a reference with a newline after it", "seats.0.player_ref", "p-" + "0" * 32 + "\n"),
    ("a reference without its p-", "seats.0.player_ref", "0" * 32),
    ("a seat without its reference", "seats.0.player_ref", ...),
    ("a seat with the player id too", "seats.0.player_id", "alice"),
    ("a v1 seat", "seats.0", V1_SEAT),
    ("a stake of 0", "seats.0.stake", 0),
    ("a client seed of 65 bytes", "seats.0.client_seed", "00" * 65),
]


@pytest.mark.parametrize(
    ("why", "path", "value"),
    V2_REVEALED_ROUND_REFUSALS,
    ids=[r[0] for r in V2_REVEALED_ROUND_REFUSALS],
)
@pytest.mark.parametrize("version", [2, 3])
def test_the_revealed_round_schema_refuses_in_v2_and_v3(
    why: str, path: str, value: object, version: int
) -> None:
    """A v3 round's seats have the members of a v2 round's (only what is hashed differs)."""
    for vector in FAIRNESS_VECTORS:
        revealed = load_json(vector)["revealed_round"]
        same = revealed["format"].endswith(f"/v{version}")
        referenced = revealed if same else as_v2(revealed, version)
        assert errors("revealed-round.schema.json", referenced) == [], vector.name
    assert _refused_at("revealed-round.schema.json", _set(referenced, path, value), path), why


RECEIPT_REFUSALS: list[tuple[str, str, object]] = [
    ("another format", "format", "gnau-dealer/round-receipt/v2"),
    ("a missing member", "consistency", ...),
    ("an unknown member", "state", "settled"),
    ("no entries", "entries", []),
    ("a proof hash of 63 digits", "entries.0.inclusion_proof.0", "a" * 63),
    ("an upper-case proof hash", "entries.0.inclusion_proof.0", "A" * 64),
    ("a proof of 65 hashes", "entries.0.inclusion_proof", ["a" * 64] * 65),
    ("an index as text", "entries.0.index", "1"),
    ("a negative index", "entries.0.index", -1),
    ("an entry as an object", "entries.0.entry", {"index": 1}),
    ("an entry with a member more", "entries.0.proof", []),
    ("a round that is not one", "round", {"format": "gnau-dealer/revealed-round/v1"}),
    ("a rotation that is not a note", "key_rotations", ["old key, new key"]),
    ("a consistency proof from size 0", "consistency", {"first_size": 0, "proof": ["a" * 64]}),
    ("an empty consistency proof", "consistency", {"first_size": 3, "proof": []}),
    ("a checkpoint that is not a note", "checkpoint", "gnau-dealer/local\n5\n"),
]


@pytest.mark.parametrize(
    ("why", "path", "value"), RECEIPT_REFUSALS, ids=[r[0] for r in RECEIPT_REFUSALS]
)
def test_the_receipt_schema_refuses(served: Served, why: str, path: str, value: object) -> None:
    receipt = _receipt(served)
    assert errors("receipt.schema.json", receipt) == []
    assert _refused_at("receipt.schema.json", _set(receipt, path, value), path), why


def test_the_receipt_schema_refuses_five_entries(served: Served) -> None:
    receipt = _receipt(served)
    assert len(receipt["entries"]) == 4
    receipt["entries"].append(receipt["entries"][0])
    assert errors("receipt.schema.json", receipt)


def _checkpoint_edits(note: str) -> list[tuple[str, str]]:
    origin, size, root, blank, signature, end = note.split("\n")
    assert blank == end == ""
    return [
        ("CRLF line ends", note.replace("\n", "\r\n")),
        ("a hyphen for the em dash", note.replace("\u2014", "-")),
        ("no final newline", note[:-1]),
        ("a blank line more at the end", note + "\n"),
        ("a size with a leading zero", note.replace(f"\n{size}\n", f"\n0{size}\n")),
        ("a negative size", note.replace(f"\n{size}\n", f"\n-{size}\n")),
        ("a root of 31 bytes", note.replace(root, "A" * 40 + "AA==")),
        ("a root in non-canonical base64", note.replace(root, root[:42] + "B=")),
        ("no signature line", f"{origin}\n{size}\n{root}\n\n"),
        ("no blank line", note.replace("\n\n", "\n")),
        ("another origin prefix", note.replace("gnau-dealer/", "example.com/", 1)),
        ("a tab in an extension line", note.replace(f"{root}\n", f"{root}\nx\ty\n")),
        ("a signature not in base64", note.replace(signature, signature[:-4] + "!!!=")),
        ("a key name with a plus", note.replace("\u2014 gnau-dealer/", "\u2014 gnau+dealer/")),
    ]


def test_the_checkpoint_schema_takes_extension_and_witness_lines_and_refuses_the_rest(
    served: Served,
) -> None:
    note = _receipt(served)["checkpoint"]
    assert errors("checkpoint.schema.json", note) == []
    origin, size, root, _, signature, _ = note.split("\n")
    witnessed = (
        f"{origin}\n{size}\n{root}\next\n\n{signature}\n\u2014 witness.example {'A' * 102}==\n"
    )
    assert errors("checkpoint.schema.json", witnessed) == []
    for why, edited in _checkpoint_edits(note):
        assert errors("checkpoint.schema.json", edited), why


def test_the_key_rotation_schema_refuses_what_is_not_a_rotation(served: Served) -> None:
    note = _receipt(served, "settled_after_rotation")["key_rotations"][0]
    assert errors("key-rotation.schema.json", note) == []
    header, old, new, time, *_ = note.split("\n")
    for why, edited in [
        ("another header", note.replace(header, "gnau-dealer/key-rotation/v2")),
        ("the lines swapped", note.replace(f"{old}\n{new}", f"{new}\n{old}")),
        ("a time with an offset", note.replace(time, time.replace("Z", "+00:00"))),
        ("a vkey of another type", note.replace(old, old[:-44] + "B" + old[-43:])),
        ("no signature", f"{header}\n{old}\n{new}\n{time}\n\n"),
        ("a checkpoint", _receipt(served)["checkpoint"]),
    ]:
        assert errors("key-rotation.schema.json", edited), why


ENTRY_REFUSALS: list[tuple[str, str, str, object]] = [
    ("a round event without a round", "ROUND_DEALT", "round_id", None),
    ("a start with a round", "SERVICE_STARTED", "round_id", "r-1"),
    ("an unknown kind", "ROUND_DEALT", "kind", "ROUND_SHUFFLED"),
    ("a dealt payload under another kind", "ROUND_DEALT", "kind", "ROUND_REVEALED"),
    ("an index beyond 2^53-1", "ROUND_DEALT", "index", 2**53),
    ("a key ID in upper case", "ROUND_DEALT", "key_id", "0C787B25"),
    ("a short signature", "ROUND_DEALT", "signature", "ab" * 63),
    ("a time with an offset", "ROUND_DEALT", "time", "2026-11-29T12:00:00+00:00"),
    ("a time with 7 fraction digits", "ROUND_DEALT", "time", "2026-11-29T12:00:00.1234567Z"),
    ("month 13", "ROUND_DEALT", "time", "2026-13-01T12:00:00Z"),
    ("a lower-case t", "ROUND_DEALT", "time", "2026-11-29t12:00:00Z"),
    ("a prev_hash of 63 digits", "ROUND_DEALT", "prev_hash", "0" * 63),
    ("a ninth member", "ROUND_DEALT", "note", "hello"),
    ("a float in a payload", "ROUND_SETTLED", "payload.dealer.delta", 1.5),
    ("a dealt stake beyond 2^53-1", "ROUND_DEALT", "payload.seats.0.stake", 2**53),
    ("a dealt payload without its beacon", "ROUND_DEALT", "payload.beacon", ...),
    ("a dealt payload with the seed", "ROUND_DEALT", "payload.server_seed", "ab" * 32),
    ("a commitment payload with a round id", "ROUND_COMMITTED", "payload.round_id", "r-1"),
    ("a table id with a space at its end", "ROUND_COMMITTED", "payload.table_id", "table "),
    ("a table id with a control character", "ROUND_COMMITTED", "payload.table_id", "t\u0085"),
    ("a revealed payload without its deck", "ROUND_REVEALED", "payload.deck", ...),
    ("an outcome that is not one", "ROUND_SETTLED", "payload.players.0.outcome", "DRAW"),
    ("a settled stake of 0", "ROUND_SETTLED", "payload.players.0.stake", 0),
    ("a player without a delta", "ROUND_SETTLED", "payload.players.0.delta", ...),
    ("a dealer with a stake", "ROUND_SETTLED", "payload.dealer.stake", 5),
    ("an unknown category", "ROUND_SETTLED", "payload.dealer.category", "ROYAL_OX"),
    ("points of 11", "ROUND_SETTLED", "payload.dealer.points.0", 11),
    ("a strength of 27", "ROUND_SETTLED", "payload.dealer.strength", 27),
    ("a description of another form", "ROUND_SETTLED", "payload.dealer.description", "Ox!"),
    ("a void without a reason", "ROUND_VOIDED", "payload.reason", ...),
    ("a void with a control character", "ROUND_VOIDED", "payload.reason", "a\u0007b"),
    ("a void with a reason code of no list", "ROUND_VOIDED", "payload.reason_code", "WHIM"),
    (
        "a void before the deal that pays",
        "ROUND_VOIDED",
        "payload.paid",
        {"dealer_delta": 0, "players": [{"seat": 1, "stake": 1, "delta": 0}]},
    ),
    ("an actor of no form", "ROUND_DEALT", "payload.actor", "token:"),
    ("a start by a token", "SERVICE_STARTED", "payload.actor", "token:ops"),
    ("a deal's software of no digest", "ROUND_DEALT", "payload.software.sha256", "5E" * 32),
    ("a void from a state that cannot be voided", "ROUND_VOIDED", "payload.state", "SETTLED"),
    ("a start without its key", "SERVICE_STARTED", "payload.key", ...),
    ("a start of other software", "SERVICE_STARTED", "payload.software.name", "other"),
    ("a start with a bad origin", "SERVICE_STARTED", "payload.origin", "gnau-dealer/Prod"),
    ("a rotation that is not a note", "KEY_ROTATED", "payload.rotation", "old → new"),
    ("a fairness version 1 (absent means 1)", "ROUND_COMMITTED", "payload.fairness_version", 1),
    ("a fairness version 4", "ROUND_COMMITTED", "payload.fairness_version", 4),
    ("a fairness version as text", "ROUND_COMMITTED", "payload.fairness_version", "2"),
    ("a dealt seat of two versions", "ROUND_DEALT", "payload.seats.0.player_ref", "alice"),
]


@pytest.mark.parametrize(
    ("why", "kind", "path", "value"), ENTRY_REFUSALS, ids=[r[0] for r in ENTRY_REFUSALS]
)
def test_the_log_entry_schema_refuses(
    served: Served, why: str, kind: str, path: str, value: object
) -> None:
    entry = _entry(served, kind)
    assert errors("log-entry.schema.json", entry) == []
    # A payload of one kind under another kind is refused in its payload.
    where = "payload" if why.endswith("under another kind") else path
    assert _refused_at("log-entry.schema.json", _set(entry, path, value), where), why


def _evaluation(served: Served, category: str) -> dict[str, Any] | None:
    for line in _bundle_lines(served):
        if "entry" in line and json.loads(line["entry"])["kind"] == "ROUND_SETTLED":
            payload = json.loads(line["entry"])["payload"]
            for found in [payload["dealer"], *payload["players"]]:
                if found["category"] == category and found["value"] != 1:
                    extra = ("seat", "stake", "outcome", "delta")
                    return {key: value for key, value in found.items() if key not in extra}
    return None


EVALUATION_REFUSALS: list[tuple[str, dict[str, object]]] = [
    ("a Single-Ox of value 10", {"value": 10}),
    ("a Single-Ox without a value", {"value": None}),
    ("a Single-Ox of strength 0", {"strength": 0}),
    ("a Single-Ox without its ox", {"ox": [], "power": []}),
    ("ox without power", {"power": []}),
    ("an ox of two cards", {"ox": ["AS", "2S"]}),
    ("a No Ox description", {"description": "No Ox  AS 2S 3S 4S 5S"}),
    ("a Nenku that is not Single-Ox 1", {"nenku": True}),
    ("a Double-Ox category with a single's value range", {"category": "DOUBLE_OX", "value": 0}),
    ("Five Dukes with a value", {"category": "FIVE_DUKES", "strength": 26}),
]


@pytest.mark.parametrize(
    ("why", "change"), EVALUATION_REFUSALS, ids=[r[0] for r in EVALUATION_REFUSALS]
)
def test_the_settlement_schema_ties_each_evaluation_together(
    served: Served, why: str, change: dict[str, object]
) -> None:
    single = _evaluation(served, "SINGLE_OX")
    assert single is not None, "no seat of the served rounds holds a Single-Ox"
    payload = {"dealer": {**single, "delta": 0}, "players": []}
    payload["players"] = [{**single, "seat": 1, "stake": 5, "outcome": "TIE", "delta": 0}]
    assert errors("payload-round-settled.schema.json", payload) == []
    payload["players"][0].update(change)  # type: ignore[index]
    assert errors("payload-round-settled.schema.json", payload), why


BUNDLE_LINE_REFUSALS: list[tuple[str, object]] = [
    ("two members on a line", {"entry": "{}", "checkpoint": "x"}),
    ("an entry as an object", {"entry": {"index": 0}}),
    ("an empty object", {}),
    ("a line that is an array", [{"entry": "{}"}]),
]


@pytest.mark.parametrize(
    ("why", "line"), BUNDLE_LINE_REFUSALS, ids=[r[0] for r in BUNDLE_LINE_REFUSALS]
)
def test_the_bundle_line_schema_refuses(why: str, line: object) -> None:
    assert errors("bundle-line.schema.json", line), why


HEADER_REFUSALS: list[tuple[str, str, object]] = [
    ("another format", "format", "gnau-dealer/audit-bundle/v2"),
    ("a negative first index", "first_index", -1),
    ("size 0", "size", 0),
    ("size beyond 2^53", "size", 2**53 + 1),
    ("no public key", "public_keys", []),
    ("a key that is not a vkey", "public_keys", ["gnau-dealer/local+0c787b25"]),
    ("a frontier hash in upper case", "left_frontier", ["AB" * 32]),
    ("an origin of another form", "origin", "gnau-dealer/-prod"),
    ("a seventh member", "entries", 3),
]


@pytest.mark.parametrize(
    ("why", "path", "value"), HEADER_REFUSALS, ids=[r[0] for r in HEADER_REFUSALS]
)
def test_the_bundle_header_schema_refuses(
    served: Served, why: str, path: str, value: object
) -> None:
    header = _bundle_lines(served)[0]
    assert errors("bundle-line.schema.json", header) == []
    assert errors("bundle-line.schema.json", _set(header, path, value)), why
    assert _refused_at("bundle-line.schema.json", _set(header, path, value), path, "#/$defs/header")


def test_a_dealt_payload_holds_seats_of_one_version(served: Served) -> None:
    dealt = _entry(served, "ROUND_DEALT")["payload"]
    v1_seats = [
        {
            "seat_number": seat["seat_number"],
            "player_id": seat.get("player_id", "alice"),
            "stake": seat["stake"],
            "client_seed": seat["client_seed"],
        }
        for seat in dealt["seats"]
    ]
    v2_seats: list[dict[str, Any]] = as_v2({"seats": v1_seats})["seats"]
    assert errors("payload-round-dealt.schema.json", {**dealt, "seats": v1_seats}) == []
    assert errors("payload-round-dealt.schema.json", {**dealt, "seats": v2_seats}) == []
    mixed = [v1_seats[0], *v2_seats[1:]] if len(v1_seats) > 1 else [*v1_seats, *v2_seats]
    assert errors("payload-round-dealt.schema.json", {**dealt, "seats": mixed})
    committed = _entry(served, "ROUND_COMMITTED")["payload"]
    for version in (2, 3):
        with_version = {**committed, "fairness_version": version}
        assert errors("payload-round-committed.schema.json", with_version) == []


# -- the forms of issue 37, on the hand-made log ------------------------------------------------


def test_every_entry_of_the_hand_made_log_validates() -> None:
    """tests/independent/handmade_cases.py: a start, its settings, an old void before the deal,
    a void after the reveal that pays, a forget, a change of tokens, a stop."""
    for kind, round_id, payload in handmade_cases.story():
        assert errors(PAYLOAD_SCHEMAS[kind], payload) == [], kind
        entry = {
            "index": 3,
            "key_id": "0c787b25",
            "kind": kind,
            "payload": payload,
            "prev_hash": "ab" * 32,
            "round_id": round_id,
            "signature": "cd" * 64,
            "time": "2026-12-01T10:00:00.000000Z",
        }
        assert errors("log-entry.schema.json", entry) == [], kind


VOID = "payload-round-voided.schema.json"
VOID_REFUSALS: list[tuple[str, str, object]] = [
    ("a seat paid less than nothing", "paid.players.2.delta", -75),
    ("the dealer winning from a void", "paid.dealer_delta", 75),
    ("no result", "result", ...),
    ("no paid", "paid", ...),
    ("no reason code", "reason_code", ...),
    ("a result naming its actor", "result.actor", "service"),
    ("a paid seat with its outcome", "paid.players.0.outcome", "WIN"),
    ("the deadline code after the deal", "reason_code", "DEAL_DEADLINE_PASSED"),
    ("a reason of 1025 characters", "reason", "x" * 1025),
    ("an actor of no form", "actor", "casino"),
]


@pytest.mark.parametrize(("why", "path", "value"), VOID_REFUSALS, ids=[r[0] for r in VOID_REFUSALS])
def test_the_void_schema_refuses_after_the_deal(why: str, path: str, value: object) -> None:
    assert errors(VOID, handmade_cases.FAIR_VOID) == []
    assert errors(VOID, {**handmade_cases.FAIR_VOID, "state": "DEALT"}) == []
    # One change to a valid void: whatever the schema refuses, it refuses for that change.
    assert errors(VOID, _set(handmade_cases.FAIR_VOID, path, value)), why


def test_the_void_schema_takes_the_old_form_before_the_deal_only() -> None:
    listed = handmade_cases.story()
    old = next(p for k, r, p in listed if k == "ROUND_VOIDED" and r == handmade_cases.B)
    assert "reason_code" not in old and errors(VOID, old) == []
    assert errors(VOID, {**old, "state": "REVEALED"})
    assert errors(VOID, {**old, "reason": " "})
    deadline = {**old, "reason_code": "DEAL_DEADLINE_PASSED", "reason": ""}
    assert errors(VOID, deadline) == []
    assert errors(VOID, {**deadline, "actor": "service"}) == []
    assert errors(VOID, {**deadline, "actor": "token:casino-a-platform"})
