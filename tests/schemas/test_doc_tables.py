"""Every table of members, tags and versions in docs/fairness.md, docs/audit.md and
docs/receipts.md, held to what a real service wrote for live fairness v1, v2 and v3 rounds
(``tests/schemas/served.py``: settled and voided rounds of every version) and to the JSON
schemas of docs/schemas/; and the standalone verifier of docs/fairness.md run on those rounds.

The expected values come from the docs, read as a stranger reads them (``doc_tables``), and
the hashing here is written from the docs with ``hashlib`` alone: a change of format on either
side fails here until the other follows it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest
from gnau.v1 import round_pb2

from gnau_service.audit.entries import EntryKind
from gnau_service.audit.replay import ReplayError, RoundReplay
from gnau_service.fairness.reveal import RevealedRound
from gnau_service.fairness.verifier import verify_revealed_round
from tests.audit.test_audit_docs import doc_example
from tests.fairness.conftest import FAIRNESS_VECTORS, PLAYER_REF_VECTOR, VECTOR_DIR, load_json
from tests.fairness.test_vectors import _docs_script, _IndependentHmacDrbg, _IndependentWords
from tests.references import ref
from tests.schemas.doc_tables import code, doc_text, row, section, table, top_level_code
from tests.schemas.served import Served
from tests.schemas.test_receipt_script import docs_script as receipt_script
from tests.schemas.validation import SCHEMA_DIR, errors, load

#: The tables say what every backend writes alike: the SQLite service's rounds are enough.
on_one_backend = pytest.mark.parametrize("served", ["sqlite"], indirect=True)

Json = dict[str, Any]


def version_of(story: str) -> int:
    """The fairness version a story of ``served`` was played in (tests/schemas/served.py)."""
    return int(story[1]) if story.startswith(("v1_", "v2_")) else 3


VERSIONS = {1, 2, 3}


def logged(served: Served, story: str) -> list[Json]:
    """The round's log entries, as its receipt carries them."""
    return [json.loads(item["entry"]) for item in json.loads(served.receipts[story])["entries"]]


# -- hashing, written from docs/fairness.md -------------------------------------------------------


def _frame(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def _sha(*fields: bytes) -> str:
    return hashlib.sha256(b"".join(map(_frame, fields))).hexdigest()


def _rule_text(value: object) -> bytes:
    return (json.dumps(value) if not isinstance(value, str) else value).encode()


def commitment(round_id: str, rules: Json, seed: str, tag: str) -> str:
    encoded = b"".join(_frame(k.encode()) + _frame(_rule_text(rules[k])) for k in sorted(rules))
    decks = rules["decks"].to_bytes(8, "big")
    return _sha(tag.encode(), round_id.encode(), encoded, decks, bytes.fromhex(seed))


def seat_bytes(expression: str, seat: Json) -> bytes:
    """A seat encoded by the expression of docs/fairness.md's versions table, such as
    ``frames(uint64(seat_number), uint64(stake), client_seed)``."""
    match = re.fullmatch(r"frames\((.*)\)", expression)
    assert match, expression
    encoded = b""
    for part in (p.strip() for p in match[1].split(",")):
        if number := re.fullmatch(r"uint64\((\w+)\)", part):
            value = seat[number[1]].to_bytes(8, "big")
        elif text := re.fullmatch(r"utf8\((\w+)\)", part):
            value = seat[text[1]].encode()
        else:  # a binary member, written in hex
            value = bytes.fromhex(seat[part])
        encoded += _frame(value)
    return encoded


def expression_members(expression: str) -> set[str]:
    return set(re.findall(r"\b(seat_number|player_id|player_ref|stake|client_seed)\b", expression))


def transcript(revealed: Json, tag: str, expression: str) -> str:
    seats = sorted(revealed["seats"], key=lambda seat: seat["seat_number"])
    locked = b"".join(_frame(seat_bytes(expression, seat)) for seat in seats)
    beacon = revealed["beacon"]
    encoded_beacon = (
        b"\x00"
        if beacon is None
        else b"\x01" + _frame(beacon["label"].encode()) + _frame(bytes.fromhex(beacon["value"]))
    )
    return _sha(tag.encode(), bytes.fromhex(revealed["commitment"]), locked, encoded_beacon)


def shuffled(revealed: Json, tag: str) -> list[str]:
    drbg = _IndependentHmacDrbg(
        bytes.fromhex(revealed["server_seed"]),
        bytes.fromhex(revealed["transcript_hash"]),
        tag.encode(),
    )
    words = _IndependentWords(drbg)
    deck = [rank + suit for suit in "CDHS" for rank in "A23456789TJQK"] * revealed["house_rules"][
        "decks"
    ]
    for top in range(len(deck) - 1, 0, -1):
        n = top + 1
        word = next(words)
        while word >= 2**32 - 2**32 % n:
            word = next(words)
        deck[top], deck[word % n] = deck[word % n], deck[top]
    return deck


# -- docs/fairness.md ----------------------------------------------------------------------------


def versions_column(version: int) -> dict[str, str]:
    """docs/fairness.md's *Fairness versions* table: each row's cell for ``version``."""
    return {r[""]: r[f"v{version}"] for r in table("fairness.md", "fairness versions")}


def only(spans: list[str]) -> str:
    assert len(spans) == 1, spans
    return spans[0]


def test_the_tag_table_spells_every_tag_and_names_each_one_used() -> None:
    rows = table("fairness.md", "tags")
    for r in rows:
        assert bytes.fromhex(only(code(r["bytes (hex)"]))) == only(code(r["tag"])).encode()
    named = {only(code(r["tag"])) for r in rows}
    used = {
        span
        for version in VERSIONS
        for cell in versions_column(version).values()
        for span in code(cell)
        if span.startswith("gnau-dealer/fairness/")
    }
    assert used <= named
    assert named - used == {load_json(PLAYER_REF_VECTOR)["tag"]}


@on_one_backend
def test_the_versions_table_recomputes_live_rounds_of_every_version(served: Served) -> None:
    seen = set()
    for story, revealed in served.rounds.items():
        version = version_of(story)
        seen.add(version)
        column = versions_column(version)
        assert revealed["format"] == only(code(column["revealed-round `format`"]))
        player = code(column["a seat names its player by"])[0]
        for seat in revealed["seats"]:
            assert set(seat) == {"seat_number", player, "stake", "client_seed"}, story
        rules, seed = revealed["house_rules"], revealed["server_seed"]
        tag = only(code(column["commitment tag"]))
        assert commitment(revealed["round_id"], rules, seed, tag) == revealed["commitment"]
        expression = only(code(column["a seat in the lock"]))
        lock_tag = only(code(column["lock tag"]))
        assert transcript(revealed, lock_tag, expression) == revealed["transcript_hash"], story
        assert shuffled(revealed, only(code(column["shuffle tag"]))) == revealed["deck"]
        payload = logged(served, story)[0]["payload"]
        stated = code(column["the log's `ROUND_COMMITTED` entry"])
        if any(":" in span for span in stated):
            assert (
                payload["fairness_version"]
                == json.loads("{" + only(stated) + "}")["fairness_version"]
            )
        else:
            assert stated == ["fairness_version"] and "fairness_version" not in payload
        api = only(code(column["the API's `Round.fairness_version`"]))
        assert served.messages[story].fairness_version == int(api)
    assert seen == VERSIONS


def _changed(revealed: Json, member: str) -> Json:
    """``revealed`` with one member of its first seat changed to another valid value."""
    changed = copy.deepcopy(revealed)
    seat = changed["seats"][0]
    if member == "seat_number":
        new = max(s["seat_number"] for s in changed["seats"]) + 1
        hand = next(h for h in changed["hands"] if h["seat_number"] == seat["seat_number"])
        seat["seat_number"] = hand["seat_number"] = new
    elif member == "player_id":
        seat["player_id"] += "-else"
    elif member == "player_ref":
        seat["player_ref"] = ref("a player at no seat of this round")
    elif member == "stake":
        seat["stake"] += 1
    else:
        seat[member] = "ff" if seat[member] != "ff" else "fe"
    return changed


@on_one_backend
def test_the_lock_covers_the_seat_members_its_table_says(served: Served) -> None:
    """docs/fairness.md, *Verifying a round*: a locked member changed fails the lock; a v2 or v3
    player reference, or a v3 stake, changed fails no check of the revealed round (its log entry
    binds it)."""
    rows = {only(code(r["seat member"])): r for r in table("fairness.md", "what the lock covers")}
    for version in sorted(VERSIONS):
        story = next(story for story in served.rounds if version_of(story) == version)
        revealed = served.rounds[story]
        column = {member: r[f"v{version}"] for member, r in rows.items()}
        present = {member for member, says in column.items() if says != "(no such member)"}
        assert present == set(revealed["seats"][0])
        locked = {member for member, says in column.items() if says == "locked"}
        assert locked == expression_members(
            only(code(versions_column(version)["a seat in the lock"]))
        )
        for member in present:
            report = verify_revealed_round(RevealedRound.from_json(_changed(revealed, member)))
            if column[member] == "locked":
                failure = report.first_failure
                assert failure is not None and failure.check == "lock", (version, member)
            else:
                assert column[member] == "not locked" and report.ok, (version, member)


def test_the_revealed_round_table_is_the_schema() -> None:
    rows = table("fairness.md", "revealed round")
    fields = [only(code(r["field"])) for r in rows]
    schema = load(SCHEMA_DIR / "revealed-round.schema.json")
    assert fields == list(schema["properties"])
    seats = row(rows, "field", "`seats`")["meaning"]
    defs = load(SCHEMA_DIR / "defs.schema.json")["$defs"]
    for version, definition in (("v1", "seat"), ("v2", "seat_v2"), ("v3", "seat_v2")):
        shape = re.search(rf"{version}: `\{{([^`]*)\}}`", seats)
        assert shape, version
        assert re.findall(r'"(\w+)":', shape[1]) == list(defs[definition]["properties"])


@on_one_backend
def test_every_live_round_has_the_members_of_the_revealed_round_table(served: Served) -> None:
    fields = [only(code(r["field"])) for r in table("fairness.md", "revealed round")]
    assert {version_of(story) for story in served.rounds} == VERSIONS
    for story, revealed in served.rounds.items():
        assert list(revealed) == fields, story
        assert errors("revealed-round.schema.json", revealed) == [], story


def _example(name: str) -> Json:
    found = re.search(
        rf"<!-- example: {name} -->\n```json\n(.*?)```", doc_text("fairness.md"), re.DOTALL
    )
    assert found, name
    example: Json = json.loads(found[1])
    return example


@pytest.mark.parametrize(
    ("name", "vector"),
    [
        ("revealed round v1", "fairness-round-1deck-2seats.json"),
        ("revealed round v2", "fairness-round-v2-1deck-3seats-beacon.json"),
    ],
)
def test_the_revealed_round_examples_are_their_vectors_whole(name: str, vector: str) -> None:
    """Every member of each example, in full but for the deck, which is cut where it says
    ``"..."``: no member stands for another round's values."""
    shown, whole = _example(name), load_json(VECTOR_DIR / vector)["revealed_round"]
    assert vector in doc_text("fairness.md")
    cut = shown["deck"].index("...")
    tail = len(shown["deck"]) - cut - 1
    assert (
        shown["deck"][:cut]
        + whole["deck"][cut : len(whole["deck"]) - tail]
        + (shown["deck"][cut + 1 :])
        == whole["deck"]
    )
    assert {**shown, "deck": whole["deck"]} == whole


def documented_default_rules() -> Json:
    """docs/fairness.md's table of house rules: each rule's default, as JSON."""
    return {
        only(code(r["key"])): json.loads(only(code(r["default"])))
        for r in table("fairness.md", "house rules")
    }


def test_the_house_rules_table_is_the_schema_and_the_live_rules() -> None:
    rules = load(SCHEMA_DIR / "defs.schema.json")["$defs"]["house_rules"]
    defaults = documented_default_rules()
    assert list(defaults) == sorted(rules["properties"])  # the table is in the hashed order
    assert set(rules["required"]) == set(defaults)
    assert errors("defs.schema.json", defaults, "#/$defs/house_rules") == []


def _claims(text: str) -> Json:
    """What a vector's description says of its round, in the words docs/fairness.md uses."""
    version = re.match(r"v(\d):", text)
    claims: Json = {"version": int(version[1]) if version else 1}
    claims["decks"] = int(re.search(r"(\d+) decks?\b", text)[1])  # type: ignore[index]
    claims["seats"] = int(re.search(r"(\d+) seats\b", text)[1])  # type: ignore[index]
    if numbered := re.search(r"numbered (\d+)[\u2013-](\d+) without (\d+)", text):
        first, last, missing = map(int, numbered.groups())
        claims["numbers"] = set(range(first, last + 1)) - {missing}
    if sizes := re.search(r"client seeds of ([\d, and]+) bytes", text):
        claims["client seed sizes"] = set(map(int, re.findall(r"\d+", sizes[1])))
    elif re.search(r"no client seeds?\b", text):
        claims["client seed sizes"] = {0}
    if re.search(r"no beacon", text):
        claims["beacon"] = False
    elif re.search(r"\bbeacon\b", text):
        claims["beacon"] = True
    claims["out of order"] = "out of order" in text
    if rules := re.search(r"non-default house rules \(([^)]*)\)", text):
        claims["rules"] = dict([*span.split("="), "true"][:2] for span in code(rules[1]))
    elif re.search(r"(?<!non-)default house rules", text):
        claims["rules"] = {}
    return claims


def _facts(revealed: Json) -> Json:
    numbers = [seat["seat_number"] for seat in revealed["seats"]]
    defaults = documented_default_rules()
    return {
        "version": int(revealed["format"][-1]),
        "decks": revealed["house_rules"]["decks"],
        "seats": len(numbers),
        "numbers": set(numbers),
        "client seed sizes": {len(seat["client_seed"]) // 2 for seat in revealed["seats"]},
        "beacon": revealed["beacon"] is not None,
        "out of order": numbers != sorted(numbers),
        "rules": {
            key: _rule_text(value).decode()
            for key, value in revealed["house_rules"].items()
            if value != defaults[key] and key != "decks"
        },
    }


def test_the_vector_table_describes_every_published_vector_as_it_is() -> None:
    rows = table("fairness.md", "vectors")
    files = [only(code(r["file"])) for r in rows]
    assert sorted(files) == sorted(path.name for path in VECTOR_DIR.glob("*.json"))
    assert {path.name for path in FAIRNESS_VECTORS} | {PLAYER_REF_VECTOR.name} == set(files)
    for r in rows:
        path = VECTOR_DIR / only(code(r["file"]))
        if path == PLAYER_REF_VECTOR:
            continue
        vector = load_json(path)
        facts = _facts(vector["revealed_round"])
        for text in (r["what it covers"], vector["description"]):
            for claim, value in _claims(text).items():
                assert facts[claim] == value, (path.name, claim, text)
    # "Each vector lists its seats in ascending seat number": the vectors do.
    assert "lists its seats in ascending seat number" in section(
        "fairness.md", "## 4. Test vectors"
    )
    assert not any(
        _facts(load_json(path)["revealed_round"])["out of order"] for path in FAIRNESS_VECTORS
    )


def _round_message_section() -> str:
    return section("fairness.md", "## 6. From the API's `Round` message")


def test_the_round_message_table_accounts_for_every_field_of_round() -> None:
    rows = table("fairness.md", "from the Round message")
    mapped = {code(r["from `Round`"])[0] for r in rows}
    rest = re.search(
        r"Not part of the revealed round: (.*?)\.", _round_message_section(), re.DOTALL
    )
    assert rest
    not_part = set(code(rest[1]))
    fields = {field.name for field in round_pb2.Round.DESCRIPTOR.fields}
    assert mapped | not_part == fields
    assert not mapped & not_part
    revealed = [only(code(r["revealed round"])) for r in rows]
    assert revealed == list(load(SCHEMA_DIR / "revealed-round.schema.json")["properties"])
    # The mapping is the doc's own, not a pointer into the project's code.
    assert not re.search(r"gnau_service/|\.py\b|_from_proto", _round_message_section())


@on_one_backend
def test_the_round_message_table_maps_live_rounds_of_every_version(served: Served) -> None:
    rows = table("fairness.md", "from the Round message")
    formats = dict(
        re.findall(r'`(\d+)` → `"([^"]+)"`', row(rows, "from `Round`", "`fairness_version`")["how"])
    )
    assert set(formats) == {"1", "2", "3"}
    seats = row(rows, "revealed round", "`seats`")["how"]
    members = {
        int(version): re.findall(r'"(\w+)"', shape)
        for version, shape in re.findall(r"v(\d): `\{([^`]*)\}`", seats)
    }
    assert set(members) == VERSIONS
    seen = set()
    for story, revealed in served.rounds.items():
        message, version = served.messages[story], version_of(story)
        seen.add(version)
        assert message.fairness_version == version
        assert formats[str(message.fairness_version)] == revealed["format"]
        # A service older than the field leaves it 0: the doc's rule for that reads the seats
        # (such a service made no v3 round).
        before = 2 if message.seats and all(seat.player_ref for seat in message.seats) else 1
        assert (formats[str(before)] == revealed["format"]) == (version < 3)
        player = members[version][1]
        for seat, sent in zip(revealed["seats"], message.seats, strict=True):
            assert list(seat) == members[version]
            assert seat[player] == getattr(sent, player) != ""
        assert revealed == json.loads(served.receipts[story])["round"]
    assert seen == VERSIONS


@on_one_backend
def test_the_docs_standalone_verifier_verifies_live_rounds_of_every_version(
    served: Served,
) -> None:
    assert {version_of(story) for story in served.rounds} == VERSIONS
    for story, revealed in served.rounds.items():
        result = subprocess.run(
            [sys.executable, "-I", "-c", _docs_script()],
            input=json.dumps(revealed),
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert result.returncode == 0, (story, result.stderr)
        # And a v2 round relabelled v1, or the other way round, or a v3 round relabelled v2,
        # does not.
        other = copy.deepcopy(revealed)
        relabelled_as = {1: 2, 2: 1, 3: 2}[version_of(story)]
        other["format"] = revealed["format"][:-1] + str(relabelled_as)
        if 1 in (version_of(story), relabelled_as):
            names = ("player_id", "player_ref")[:: 1 if version_of(story) == 1 else -1]
            for seat in other["seats"]:
                seat[names[1]] = ref(seat.pop(names[0]))
        relabelled = subprocess.run(
            [sys.executable, "-I", "-c", _docs_script()],
            input=json.dumps(other),
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert relabelled.returncode != 0, story


# -- docs/audit.md --------------------------------------------------------------------------------

PAYLOAD_SCHEMAS = {
    "ROUND_COMMITTED": "payload-round-committed.schema.json",
    "ROUND_DEALT": "payload-round-dealt.schema.json",
    "ROUND_REVEALED": "payload-round-revealed.schema.json",
    "ROUND_SETTLED": "payload-round-settled.schema.json",
    "ROUND_VOIDED": "payload-round-voided.schema.json",
}


def payload_members() -> dict[str, tuple[set[str], set[str]]]:
    """docs/audit.md's *Rounds in the log*: each event's members, always and optional."""
    return {
        only(code(r["event"])): (
            set(top_level_code(r["members, always"])),
            set(top_level_code(r["members some entries carry"])),
        )
        for r in table("audit.md", "round payloads")
    }


def test_the_round_payload_table_is_every_round_event_and_its_schema() -> None:
    members = payload_members()
    assert set(members) == {kind.name for kind in EntryKind if kind.is_round_event}
    for kind, (always, optional) in members.items():
        schema = load(SCHEMA_DIR / PAYLOAD_SCHEMAS[kind])
        assert set(schema["properties"]) == always | optional, kind
        assert set(schema["required"]) == always, kind


@on_one_backend
def test_the_round_payload_table_is_what_the_service_logs_in_every_version(served: Served) -> None:
    members = payload_members()
    carried: dict[str, set[str]] = defaultdict(set)
    kinds = set()
    for story in served.receipts:
        for entry in logged(served, story):
            always, optional = members[entry["kind"]]
            assert always <= set(entry["payload"]) <= always | optional, (story, entry["kind"])
            assert errors(PAYLOAD_SCHEMAS[entry["kind"]], entry["payload"]) == []
            carried[entry["kind"]] |= set(entry["payload"]) - always
            kinds.add((entry["kind"], version_of(story)))
    assert {kind for kind, _ in kinds} == set(members)
    for kind, (_, optional) in members.items():
        assert carried[kind] == optional, kind  # each optional member is one the service writes


@on_one_backend
def test_the_example_log_carries_every_member_a_live_v2_round_does(served: Served) -> None:
    example = {
        entry["kind"]: entry
        for entry in map(json.loads, doc_example("entries").splitlines())
        if entry["kind"].startswith("ROUND_")
    }
    members = payload_members()
    live = {entry["kind"]: entry for entry in logged(served, "settled")}
    assert set(example) == set(live)
    for kind, entry in example.items():
        always, optional = members[kind]
        assert set(entry["payload"]) == set(live[kind]["payload"]), kind
        assert always <= set(entry["payload"]) <= always | optional
    assert set(example["ROUND_COMMITTED"]["payload"]) >= members["ROUND_COMMITTED"][1]


def log_versions() -> dict[int, dict[str, str]]:
    return {int(r["version"]): r for r in table("audit.md", "fairness versions in the log")}


@on_one_backend
def test_the_log_versions_table_reads_and_hashes_live_rounds_and_voids(served: Served) -> None:
    """Per version: what ROUND_COMMITTED says, the seats' members, the format the round is read
    in, and the commitment tag under which a reveal's or a void's seed gives the commitment."""
    rows = log_versions()
    assert set(rows) == VERSIONS
    voids = set()
    for story in served.receipts:
        version = version_of(story)
        r, column = rows[version], versions_column(version)
        for name in ("commitment tag", "lock tag", "revealed-round `format`"):
            assert code(r[name]) == code(column[name]), name  # as docs/fairness.md says
        entries = logged(served, story)
        committed = entries[0]["payload"]
        stated = r["`fairness_version` of `ROUND_COMMITTED`"]
        if stated == "(absent)":
            assert "fairness_version" not in committed
        else:
            assert committed["fairness_version"] == json.loads(only(code(stated)))
        seat_members = set(code(r["members of a `ROUND_DEALT` seat"]))
        tag = only(code(r["commitment tag"]))
        other_tags = [only(code(rows[other]["commitment tag"])) for other in VERSIONS - {version}]
        for entry in entries:
            payload = entry["payload"]
            if entry["kind"] == "ROUND_DEALT":
                assert all(set(seat) == seat_members for seat in payload["seats"])
            if entry["kind"] in ("ROUND_REVEALED", "ROUND_VOIDED"):
                rules, seed = committed["house_rules"], payload["server_seed"]
                assert commitment(entry["round_id"], rules, seed, tag) == committed["commitment"]
                for other_tag in other_tags:
                    assert (
                        commitment(entry["round_id"], rules, seed, other_tag)
                        != committed["commitment"]
                    )
            if entry["kind"] == "ROUND_VOIDED":
                voids.add(version)
        receipt_round = json.loads(served.receipts[story])["round"]
        if receipt_round is not None:
            assert receipt_round["format"] == only(code(r["revealed-round `format`"]))
    assert voids == VERSIONS


@on_one_backend
def test_the_entry_and_bundle_header_tables_are_the_schemas_and_the_live_log(
    served: Served,
) -> None:
    members = [only(code(r["member"])) for r in table("audit.md", "entry")]
    assert members == list(load(SCHEMA_DIR / "log-entry.schema.json")["properties"])
    kinds = code(row(table("audit.md", "entry"), "member", "`kind`")["content"])
    assert kinds == [kind.name for kind in EntryKind]
    header = [only(code(r["member"])) for r in table("audit.md", "bundle header")]
    schema = load(SCHEMA_DIR / "bundle-line.schema.json")["$defs"]["header"]
    assert header == list(schema["properties"])
    lines = [json.loads(line) for line in served.bundle.splitlines()]
    assert list(lines[0]) == header
    entries = [json.loads(line["entry"]) for line in lines[1:] if "entry" in line]
    assert all(sorted(entry) == members for entry in entries)
    committed = [entry for entry in entries if entry["kind"] == "ROUND_COMMITTED"]
    assert {"fairness_version" in entry["payload"] for entry in committed} == {True, False}


#: The optional members that a committed entry carries together or not at all.
TOGETHER = {"table_version", "currency"}


def _fed(
    entries: list[Json], upto: int, payload: Json, without: Collection[str] = frozenset()
) -> None:
    """Replay ``entries[:upto]`` (each without the members ``without``) and then entry ``upto``
    with ``payload``; ReplayError if replay refuses it."""
    replay = RoundReplay()
    for entry in entries[:upto]:
        earlier = {k: v for k, v in entry["payload"].items() if k not in without}
        replay.stage(EntryKind[entry["kind"]], entry["round_id"], earlier)
    entry = entries[upto]
    replay.stage(EntryKind[entry["kind"]], entry["round_id"], payload)


@on_one_backend
def test_replay_takes_exactly_the_members_the_table_lists(served: Served) -> None:
    """docs/audit.md, *Every rejection*: a payload without exactly its members is refused; the
    optional ones may be there or not (an operator on all of a round's entries or on none)."""
    members = payload_members()
    for story in ("settled", "v1_settled"):
        entries = logged(served, story)
        for position, entry in enumerate(entries):
            if entry["kind"] not in ("ROUND_COMMITTED", "ROUND_DEALT", "ROUND_REVEALED"):
                continue
            always, optional = members[entry["kind"]]
            _fed(entries, position, entry["payload"])
            for member in always:
                lacking = {k: v for k, v in entry["payload"].items() if k != member}
                with pytest.raises(ReplayError, match=r"must carry exactly|missing"):
                    _fed(entries, position, lacking)
            with pytest.raises(ReplayError, match="must carry exactly"):
                _fed(entries, position, {**entry["payload"], "player_id": "alice"})
            for member in optional & set(entry["payload"]):
                # The table's version and currency come together: one goes with the other.
                gone = TOGETHER if member in TOGETHER else {member}
                payload = {k: v for k, v in entry["payload"].items() if k not in gone}
                _fed(entries, position, payload, without=gone)
            for member in TOGETHER & set(entry["payload"]):
                alone = {k: v for k, v in entry["payload"].items() if k != member}
                with pytest.raises(ReplayError, match="together or neither"):
                    _fed(entries, position, alone)


def test_the_round_replay_rejections_name_the_versions_and_the_optional_members() -> None:
    rejections = section("audit.md", "### Round replay (`ReplayError`)")
    for name in (
        "`fairness_version`",
        "`return_to_player`",
        "*Rounds in the log*",
        "`client_seed`",
    ):
        assert name in rejections, name
    assert "commitment tag of the committed version" in rejections


@on_one_backend
def test_every_other_fairness_version_the_doc_names_is_refused(served: Served) -> None:
    text = section("audit.md", "## Rounds in the log")
    refused = re.search(
        r"No other value is valid: a `fairness_version` of (.*?) is refused", text, re.DOTALL
    )
    assert refused
    values = [json.loads(span) for span in code(refused[1])]
    assert len(values) >= 4
    entries = logged(served, "settled")
    for value in values:
        with pytest.raises(ReplayError, match="fairness_version"):
            _fed(entries, 0, {**entries[0]["payload"], "fairness_version": value})
    _fed(entries, 0, entries[0]["payload"])


@on_one_backend
def test_the_log_holds_one_form_as_the_schemas_and_replay_agree(served: Served) -> None:
    """docs/audit.md, *One form in the log*: a logged seat always carries its client seed and
    the committed rules name every rule; the schemas require both and replay refuses either
    left out, though a revealed round handed to a verifier may leave both out."""
    for story in ("settled", "v1_settled"):
        entries = logged(served, story)
        committed, dealt = entries[0]["payload"], entries[1]["payload"]
        for rule in committed["house_rules"]:
            rules = {k: v for k, v in committed["house_rules"].items() if k != rule}
            assert errors(PAYLOAD_SCHEMAS["ROUND_COMMITTED"], {**committed, "house_rules": rules})
            with pytest.raises(ReplayError, match=f"missing: {rule}"):
                _fed(entries, 0, {**committed, "house_rules": rules})
        bare = copy.deepcopy(dealt)
        del bare["seats"][0]["client_seed"]
        assert errors(PAYLOAD_SCHEMAS["ROUND_DEALT"], bare)
        with pytest.raises(ReplayError, match=r"seats\[0\]\.client_seed is missing"):
            _fed(entries, 1, bare)
        # A revealed round of default rules, given by hand, may leave out both.
        revealed = copy.deepcopy(served.rounds[story])
        assert (
            revealed["house_rules"]
            == RevealedRound.from_json({**revealed, "house_rules": {}}).to_json()["house_rules"]
        )
        revealed["house_rules"] = {}
        for seat in revealed["seats"]:
            if seat["client_seed"] == "":
                del seat["client_seed"]
        assert any("client_seed" not in seat for seat in revealed["seats"])
        assert RevealedRound.from_json(revealed).to_json() == served.rounds[story]


# -- docs/receipts.md -----------------------------------------------------------------------------


def _receipt_script_namespace() -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "verify_receipt"}
    exec(compile(receipt_script(), "verify_receipt.py", "exec"), namespace)
    return namespace


def test_the_receipt_checks_name_the_members_of_the_audit_table() -> None:
    """docs/receipts.md, step entries, names the members docs/audit.md lists, and so does the
    page's standalone script."""
    members = payload_members()
    kinds = ("ROUND_COMMITTED", "ROUND_DEALT", "ROUND_REVEALED")
    step = (
        section("receipts.md", "## The checks").split("2. **`entries`**", 1)[1].split("3. **", 1)[0]
    )
    listed = re.search(r"lists as always there \(([^)]*)\)", step)
    assert listed, step
    assert set(code(listed[1])) == set().union(*(members[kind][0] for kind in kinds))
    for member in members["ROUND_COMMITTED"][1]:
        assert f"`{member}`" in step
    namespace = _receipt_script_namespace()
    assert {kind: set(names) for kind, names in namespace["EXACT"].items()} == {
        kind: members[kind][0] for kind in kinds
    }
    assert {kind: set(names) for kind, names in namespace["OPTIONAL"].items()} == {
        kind: members[kind][1] for kind in kinds
    }
    published = namespace["PUBLISHES"]
    fields = [only(code(r["field"])) for r in table("fairness.md", "revealed round")]
    assert set().union(*map(set, published.values())) == set(fields) - {"format", "round_id"}


@on_one_backend
def test_the_receipt_table_is_the_schema_and_what_the_service_serves(served: Served) -> None:
    rows = table("receipts.md", "receipt")
    top = [only(code(r["member"])) for r in rows if "." not in r["member"]]
    schema = load(SCHEMA_DIR / "receipt.schema.json")
    assert top == list(schema["properties"])
    items = {only(code(r["member"])).split(".")[1] for r in rows if "." in r["member"]}
    assert {version_of(story) for story in served.receipts} == VERSIONS
    for story, text in served.receipts.items():
        receipt = json.loads(text)
        assert list(receipt) == top, story
        assert all(set(item) == items for item in receipt["entries"]), story


def test_the_published_vectors_are_under_docs_beside_their_text() -> None:
    assert Path(VECTOR_DIR).parent == SCHEMA_DIR.parent
    assert "docs/vectors/" in doc_text("fairness.md")
    assert not list((SCHEMA_DIR.parents[1] / "tests" / "vectors").glob("fairness-round-*.json"))


def test_the_reveal_says_a_reference_is_the_one_lower_case_exception() -> None:
    """Hex is read in either case; a v2 reference is refused in upper case (a name compared
    as text, not bytes): docs/fairness.md says both, and the field table agrees."""
    step = section("fairness.md", "### Step 4: reveal")
    assert "a reader must accept either case" in step
    assert re.search(r"`player_ref` is the one exception: .*? lower case only", step, re.DOTALL)
    rows = table("fairness.md", "revealed round")
    assert "no two seats with one `player_ref`" in row(rows, "field", "`seats`")["meaning"]
    field_rules = section("fairness.md", "### Step 2: lock")
    assert "never upper case; unique in the round" in field_rules


@on_one_backend
def test_replay_refuses_a_logged_v2_round_whose_seats_share_a_reference(served: Served) -> None:
    """docs/audit.md, *Every rejection*: two seats with one reference do not form a round."""
    entries = logged(served, "settled")
    dealt = copy.deepcopy(entries[1]["payload"])
    dealt["seats"][1]["player_ref"] = dealt["seats"][0]["player_ref"]
    replay = RoundReplay()
    for entry, payload in zip(
        entries[:3], (entries[0]["payload"], dealt, entries[2]["payload"]), strict=True
    ):
        check = replay.stage(EntryKind[entry["kind"]], entry["round_id"], payload)
    assert check is not None
    with pytest.raises(ReplayError, match=r"seats\[1\]\.player_ref is seats\[0\]\.player_ref too"):
        check.run()
