"""Log entries: the byte format, strict decoding, and the hash chain."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import example, given
from hypothesis import strategies as st

from gnau_service.audit.entries import (
    GENESIS_PREV_HASH,
    MAX_INDEX,
    MAX_INTEGER,
    MAX_NESTING,
    EntryError,
    EntryKind,
    chain_hash,
    decode_entry,
    encode_entry,
    event_payload,
    sign_event,
)
from gnau_service.audit.note import Signer
from tests.audit.logs import chain_failure

LOG = Signer("gnau-dealer/test", Ed25519PrivateKey.from_private_bytes(b"\x05" * 32))
OTHER = Signer("gnau-dealer/test", Ed25519PrivateKey.from_private_bytes(b"\x06" * 32))
TIME = "2025-03-01T12:00:00Z"


def entry_bytes(index: int = 0, signer: Signer = LOG, **overrides: Any) -> bytes:
    fields: dict[str, Any] = {
        "kind": EntryKind.SERVICE_STARTED,
        "time": TIME,
        "payload": {"version": "0.1.0"},
        "prev_hash": GENESIS_PREV_HASH,
    }
    return encode_entry(signer, index=index, **(fields | overrides))


# --- The byte format, checked against a hand-written template -------------------------------------


def test_entry_bytes_are_the_documented_canonical_json() -> None:
    data = entry_bytes(
        7,
        kind=EntryKind.ROUND_DEALT,
        round_id="r-42",
        payload={"seats": [1, -2], "deck": "AS KD\n", "b": True, "a": None},
        prev_hash="ab" * 32,
    )
    key_id = LOG.key_id.hex()
    members = (
        f'"index":7,"key_id":"{key_id}","kind":"ROUND_DEALT",'
        '"payload":{"a":null,"b":true,"deck":"AS KD\\n","seats":[1,-2]},'
        f'"prev_hash":"{"ab" * 32}","round_id":"r-42"'
    )
    unsigned = ("{" + members + ',"time":"2025-03-01T12:00:00Z"}').encode()
    # Ed25519 is deterministic: the signature is the library's signature of the unsigned bytes.
    signature = LOG.private_key.sign(unsigned).hex()
    expected = "{" + members + f',"signature":"{signature}","time":"2025-03-01T12:00:00Z"' + "}"
    assert data == expected.encode()
    assert b"\n" not in data  # so an entry signature can never pass for a signed note's


def test_the_merkle_leaf_and_chain_hash_are_over_the_exact_bytes() -> None:
    data = entry_bytes()
    assert chain_hash(data) == hashlib.sha256(b"\x00" + data).hexdigest()


def test_round_trip() -> None:
    data = entry_bytes(3, kind=EntryKind.ROUND_SETTLED, round_id="r-1", prev_hash="cd" * 32)
    entry = decode_entry(data, LOG.verifier)
    assert (entry.index, entry.kind, entry.time, entry.round_id) == (
        3,
        EntryKind.ROUND_SETTLED,
        TIME,
        "r-1",
    )
    assert (entry.payload, entry.prev_hash, entry.key_id) == (
        {"version": "0.1.0"},
        "cd" * 32,
        LOG.key_id.hex(),
    )
    assert entry.encode() == data


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-MAX_INTEGER, MAX_INTEGER) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.text(), JSON_VALUES, max_size=5))
@example({"largest": 9007199254740991, "smallest": -9007199254740991})  # the range's ends
def test_any_json_payload_round_trips(payload: dict[str, Any]) -> None:
    data = entry_bytes(payload=payload)
    decoded = decode_entry(data, LOG.verifier)
    assert decoded.payload == payload
    assert decoded.encode() == data
    assert b"\n" not in data


# --- Strict decoding: every rejection -------------------------------------------------------------

GOOD = entry_bytes()
GOOD_OBJECT = json.loads(GOOD)


def reencoded(obj: dict[str, Any], **json_options: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, **json_options).encode()


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        pytest.param(GOOD.replace(b'{"index"', b'{ "index"'), "canonical", id="whitespace"),
        pytest.param(GOOD + b"\n", "canonical", id="trailing-newline"),
        pytest.param(
            reencoded(dict(reversed(GOOD_OBJECT.items())), separators=(",", ":")),
            "canonical",
            id="unsorted",
        ),
        pytest.param(GOOD.replace(b'"0.1.0"', b'"\\u0030.1.0"'), "canonical", id="escaped-char"),
        pytest.param(GOOD.replace(b'"index":0', b'"index":0.0'), "integer", id="float-index"),
        pytest.param(GOOD.replace(b'"index":0', b'"index":-0'), "canonical", id="minus-zero"),
        pytest.param(GOOD.replace(b"{", b'{"index":0,', 1), "canonical", id="duplicate-member"),
        pytest.param(b"\xef\xbb\xbf" + GOOD, "JSON", id="byte-order-mark"),
        pytest.param(GOOD.replace(b"0.1.0", b"0.1.\xff"), "UTF-8", id="not-utf8"),
        pytest.param(GOOD[:-1], "JSON", id="truncated"),
        pytest.param(b"[]", "not a JSON object", id="array"),
        pytest.param(GOOD.replace(b'"version":"0.1.0"', b'"v":NaN'), "JSON", id="nan"),
        pytest.param(
            GOOD.replace(b'"version":"0.1.0"', b'"v":9007199254740993'), "integer", id="inexact"
        ),
    ],
)
def test_non_canonical_or_broken_bytes_are_refused(data: bytes, reason: str) -> None:
    assert data != GOOD
    with pytest.raises(EntryError, match=reason):
        decode_entry(data, LOG.verifier)


def with_member(name: str, value: object) -> bytes:
    """GOOD with one member changed, re-encoded canonically (and so with a stale signature)."""
    return rfc8785.dumps({**GOOD_OBJECT, name: value})


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        pytest.param(with_member("index", -1), "not an integer", id="negative-index"),
        pytest.param(with_member("index", True), "not an integer", id="bool-index"),
        pytest.param(with_member("index", "0"), "not an integer", id="string-index"),
        pytest.param(with_member("kind", "ROUND_EXPLODED"), "unknown kind", id="unknown-kind"),
        pytest.param(with_member("time", "2025-03-01 12:00:00"), "RFC 3339", id="bad-time"),
        pytest.param(with_member("time", 1740830400), "time must be a string", id="numeric-time"),
        pytest.param(with_member("round_id", "r-1"), "must have round_id null", id="stray-round"),
        pytest.param(with_member("payload", [1]), "JSON object", id="payload-array"),
        pytest.param(with_member("prev_hash", "AB" * 32), "prev_hash", id="upper-hex"),
        pytest.param(with_member("prev_hash", "ab"), "prev_hash", id="short-prev-hash"),
        pytest.param(with_member("key_id", "xyz"), "key_id", id="bad-key-id"),
        pytest.param(with_member("signature", "00"), "signature must be", id="short-signature"),
        pytest.param(with_member("extra", 1), "unknown members \\['extra'\\]", id="extra-member"),
    ],
)
def test_malformed_fields_are_refused(data: bytes, reason: str) -> None:
    with pytest.raises(EntryError, match=reason):
        decode_entry(data, LOG.verifier)


def test_missing_members_are_named() -> None:
    obj = dict(GOOD_OBJECT)
    del obj["round_id"]
    with pytest.raises(EntryError, match="missing members \\['round_id'\\]"):
        decode_entry(rfc8785.dumps(obj), LOG.verifier)


def test_a_changed_field_breaks_the_signature() -> None:
    tampered = with_member("time", "2025-03-01T12:00:01Z")
    with pytest.raises(EntryError, match="signature does not verify"):
        decode_entry(tampered, LOG.verifier)


def test_a_flipped_signature_bit_is_refused() -> None:
    signature = GOOD_OBJECT["signature"]
    flipped = signature[:10] + ("1" if signature[10] == "0" else "0") + signature[11:]
    with pytest.raises(EntryError, match="signature does not verify"):
        decode_entry(GOOD.replace(signature.encode(), flipped.encode()), LOG.verifier)


def test_an_entry_by_an_untrusted_key_is_refused() -> None:
    with pytest.raises(EntryError, match="not trusted"):
        decode_entry(entry_bytes(signer=OTHER), LOG.verifier)


def test_claiming_another_trusted_keys_id_does_not_help() -> None:
    # Signed by OTHER but labelled with LOG's key ID: the signature check uses LOG's key.
    by_other = json.loads(entry_bytes(signer=OTHER))
    assert by_other["key_id"] == OTHER.key_id.hex() != LOG.key_id.hex()
    forged = rfc8785.dumps({**by_other, "key_id": LOG.key_id.hex()})
    with pytest.raises(EntryError, match="signature does not verify"):
        decode_entry(forged, LOG.verifier, OTHER.verifier)


def test_any_of_several_trusted_keys_will_do() -> None:
    assert decode_entry(entry_bytes(signer=OTHER), LOG.verifier, OTHER.verifier).index == 0
    with pytest.raises(ValueError, match="at least one trusted key"):
        decode_entry(GOOD)


def test_a_round_id_is_limited_in_bytes_as_its_commitment_takes_it() -> None:
    data = entry_bytes(kind=EntryKind.ROUND_DEALT, round_id="é" * 64)  # 128 bytes of UTF-8
    assert decode_entry(data, LOG.verifier).round_id == "é" * 64


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        pytest.param({"kind": EntryKind.ROUND_DEALT}, "needs a round_id", id="round-without-id"),
        pytest.param({"kind": EntryKind.ROUND_DEALT, "round_id": ""}, "needs", id="empty-round"),
        pytest.param(
            {"kind": EntryKind.ROUND_DEALT, "round_id": "é" * 65},  # 65 characters, 130 bytes
            "1-128 bytes of UTF-8",
            id="round-id-over-128-bytes",
        ),
        pytest.param({"round_id": "r-1"}, "round_id null", id="service-event-with-round"),
        pytest.param({"index": MAX_INDEX + 1}, "2\\*\\*53", id="index-too-large"),
        pytest.param({"kind": "SERVICE_STARTED"}, "not an EntryKind", id="plain-string-kind"),
        pytest.param({"time": "2025-02-30T00:00:00Z"}, "real instant", id="impossible-date"),
        pytest.param({"payload": {"x": float("nan")}}, "integer within", id="nan-payload"),
        pytest.param({"payload": {"x": 2**60}}, "integer within", id="huge-int-payload"),
        pytest.param({"payload": {1: "x"}}, "JSON object", id="non-string-key"),
        pytest.param({"prev_hash": "0" * 63}, "prev_hash", id="short-prev-hash"),
    ],
)
def test_encode_refuses_invalid_events(overrides: dict[str, Any], reason: str) -> None:
    with pytest.raises(EntryError, match=reason):
        entry_bytes(**overrides)


# --- The hash chain -------------------------------------------------------------------------------


def build_chain(
    count: int, first_index: int = 0, prev_hash: str = GENESIS_PREV_HASH
) -> list[bytes]:
    chain = []
    for index in range(first_index, first_index + count):
        data = entry_bytes(index, payload={"n": index}, prev_hash=prev_hash)
        chain.append(data)
        prev_hash = chain_hash(data)
    return chain


CHAIN = build_chain(6)


def test_an_intact_chain_passes() -> None:
    assert chain_failure(CHAIN, LOG.verifier) is None


def test_a_segment_is_checked_from_its_first_index() -> None:
    assert chain_failure(CHAIN[2:], LOG.verifier, earlier=CHAIN[:2]) is None
    found = chain_failure(CHAIN[2:], LOG.verifier)  # presented as the log from its start
    assert found is not None and found.index == 0
    assert "says index 2 but stands where 0 belongs" in found.reason


def flip_byte_in_payload(data: bytes) -> bytes:
    return data.replace(b'"n":', b'"m":')


@pytest.mark.parametrize(
    ("entries", "index", "reason"),
    [
        pytest.param(
            [*CHAIN[:3], flip_byte_in_payload(CHAIN[3]), *CHAIN[4:]], 3, "signature", id="flip"
        ),
        pytest.param([*CHAIN[:5], flip_byte_in_payload(CHAIN[5])], 5, "signature", id="flip-last"),
        pytest.param([*CHAIN[:2], *CHAIN[3:]], 2, "index 3 but stands where 2", id="deleted"),
        pytest.param(
            [*CHAIN[:3], CHAIN[2], *CHAIN[3:]], 3, "index 2 but stands where 3", id="duplicated"
        ),
        pytest.param([*CHAIN[:2], CHAIN[3], CHAIN[2], *CHAIN[4:]], 2, "index 3", id="swapped"),
        pytest.param(CHAIN[1:], 0, "index 1 but stands where 0", id="first-missing"),
    ],
)
def test_chain_damage_is_reported_where_it_shows(
    entries: list[bytes], index: int, reason: str
) -> None:
    found = chain_failure(entries, LOG.verifier)
    assert found is not None
    assert found.index == index
    assert reason in found.reason


def test_an_inserted_entry_signed_by_the_log_key_breaks_the_chain() -> None:
    # Even with the key, an insertion must either reuse an index or break the prev_hash link.
    inserted = entry_bytes(3, payload={"n": "inserted"}, prev_hash=chain_hash(CHAIN[2]))
    found = chain_failure([*CHAIN[:3], inserted, *CHAIN[3:]], LOG.verifier)
    assert found is not None and found.index == 4
    assert "index 3 but stands where 4" in found.reason


def test_a_re_signed_entry_with_a_wrong_link_is_reported() -> None:
    relinked = entry_bytes(3, payload={"n": 3}, prev_hash=chain_hash(CHAIN[1]))
    found = chain_failure([*CHAIN[:3], relinked], LOG.verifier)
    assert found is not None and found.index == 3
    assert f"prev_hash {chain_hash(CHAIN[1])} is not the previous entry's hash" in found.reason


def test_an_index_that_differs_from_its_position_is_reported() -> None:
    claims_five = entry_bytes(5, payload={"n": 3}, prev_hash=chain_hash(CHAIN[2]))
    found = chain_failure([*CHAIN[:3], claims_five], LOG.verifier)
    assert found is not None and found.index == 3
    assert found.reason.startswith("the entry says index 5 but stands where 3 belongs")


def test_a_chain_entry_by_an_untrusted_key_is_reported() -> None:
    foreign = entry_bytes(2, signer=OTHER, payload={"n": 2}, prev_hash=chain_hash(CHAIN[1]))
    found = chain_failure([*CHAIN[:2], foreign], LOG.verifier)
    assert found is not None and found.index == 2 and "not trusted" in found.reason


# --- Numbers, nesting and text that no entry may hold ---------------------------------------------


def signed_with_payload_text(payload_text: str) -> bytes:
    """A canonical entry whose payload is exactly ``payload_text``, validly signed by LOG: what
    an operator holding the key could write by hand, past encode_entry's own refusals."""
    members = (
        f'"index":0,"key_id":"{LOG.key_id.hex()}","kind":"SERVICE_STARTED",'
        f'"payload":{payload_text},"prev_hash":"{GENESIS_PREV_HASH}","round_id":null'
    )
    unsigned = ("{" + members + f',"time":"{TIME}"' + "}").encode()
    signature = LOG.private_key.sign(unsigned).hex()
    return ("{" + members + f',"signature":"{signature}","time":"{TIME}"' + "}").encode()


@pytest.mark.parametrize("number", ["9007199254740991", "-9007199254740991", "0", "-1"], ids=str)
def test_integers_within_the_range_are_read(number: str) -> None:
    entry = decode_entry(signed_with_payload_text(f'{{"n":{number}}}'), LOG.verifier)
    assert entry.payload == {"n": int(number)}


@pytest.mark.parametrize(
    "number",
    [
        "9007199254740992",  # 2**53
        "-9007199254740992",
        "1e21",  # what a double 1e21 canonicalises to
        "1.5",
        "1E2",
        "9" * 5000,  # beyond int()'s own digit limit
    ],
    ids=lambda number: number[:20],
)
def test_any_other_number_is_refused_even_when_validly_signed(number: str) -> None:
    with pytest.raises(EntryError, match=r"must be an integer within ±\(2\*\*53-1\)") as raised:
        decode_entry(signed_with_payload_text(f'{{"n":[{number}]}}'), LOG.verifier)
    assert len(str(raised.value)) < 200  # the 5000 digits are quoted, not echoed


@pytest.mark.parametrize(
    "payload",
    [{"n": 1.5}, {"n": 2**53}, {"n": [-(2**53)]}, {"n": {"m": 1e21}}, {"n": 1.0}],
    ids=["fraction", "2**53", "-2**53 in a list", "1e21 in an object", "1.0"],
)
def test_encode_refuses_any_number_but_an_integer_within_the_range(
    payload: dict[str, Any],
) -> None:
    with pytest.raises(EntryError, match=r"integer within ±\(2\*\*53-1\)"):
        entry_bytes(payload=payload)


def nested(levels: int) -> str:
    """JSON text of ``levels`` nested arrays."""
    return "[" * levels + "]" * levels


def test_nesting_up_to_the_limit_is_read_and_beyond_it_refused() -> None:
    # The entry is level 1 and the payload level 2, so the payload may hold MAX_NESTING - 2 more.
    deepest = signed_with_payload_text(f'{{"x":{nested(MAX_NESTING - 2)}}}')
    assert decode_entry(deepest, LOG.verifier).index == 0
    too_deep = signed_with_payload_text(f'{{"x":{nested(MAX_NESTING - 1)}}}')
    with pytest.raises(EntryError, match=f"nested more than {MAX_NESTING} levels"):
        decode_entry(too_deep, LOG.verifier)
    with pytest.raises(EntryError, match=f"nested more than {MAX_NESTING} levels"):
        entry_bytes(payload={"x": json.loads(nested(MAX_NESTING - 1))})


@pytest.mark.parametrize(
    ("payload", "named"),
    [
        ({"a": 1.5, "b": json.loads(nested(MAX_NESTING))}, "nested more than 32 levels deep"),
        ({"a": json.loads(nested(MAX_NESTING)), "b": 1.5}, "integer within ±(2**53-1), not 1.5"),
        ({"a": [2**60, [1.5]]}, "not 1.5"),
    ],
    ids=["deep last", "float last", "nested list last"],
)
def test_of_several_faults_the_last_member_s_is_named(payload: dict[str, Any], named: str) -> None:
    # The payload is read last member first, depth first (as the earlier explicit-stack walk
    # did), so which fault a message names does not depend on how the walk is written.
    with pytest.raises(EntryError) as raised:
        entry_bytes(payload=payload)
    assert str(raised.value).endswith(named)


@pytest.mark.parametrize("levels", [900, 32_000], ids=["under json's limit", "over it"])
def test_very_deep_nesting_is_refused_not_a_recursion_error(levels: int) -> None:
    with pytest.raises(EntryError, match="nested more than"):
        decode_entry(signed_with_payload_text(f'{{"x":{nested(levels)}}}'), LOG.verifier)


@pytest.mark.parametrize(
    "payload_text",
    ['{"x":"\\ud800"}', '{"\\ud800":1}', '{"x":"\\udfff\\ud800"}'],
    ids=["in a value", "in a key", "reversed pair"],
)
def test_a_lone_surrogate_is_refused_as_not_canonical(payload_text: str) -> None:
    with pytest.raises(EntryError, match="RFC 8785"):
        decode_entry(signed_with_payload_text(payload_text), LOG.verifier)


def test_a_hostile_member_is_quoted_not_echoed() -> None:
    data = rfc8785.dumps({**GOOD_OBJECT, "index": "9" * 10_000, "x" * 10_000: 1})
    with pytest.raises(EntryError) as raised:
        decode_entry(data, LOG.verifier)
    assert len(str(raised.value)) < 300


@given(
    st.binary(max_size=300)
    | st.builds(
        lambda at, junk: GOOD[:at] + junk + GOOD[at:],
        st.integers(0, len(GOOD)),
        st.binary(max_size=8),
    )
)
def test_any_bytes_decode_or_raise_entry_error_only(data: bytes) -> None:
    try:
        entry = decode_entry(data, LOG.verifier)
    except EntryError as error:
        assert len(str(error)) < 400
    else:
        assert entry.encode() == data


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-1],  # not JSON
        lambda data: b"[]",
        lambda data: data.replace(b'"index":', b'"index_":'),
        lambda data: data.replace(b'"kind":"', b'"kind":"X'),
        lambda data: data.replace(b'"signature":"', b'"signature":"0', 1)[:-3] + b'"}',
        lambda data: data.replace(b"0.1.0", b"6.6.6"),
    ],
)
def test_an_entry_error_names_the_entry_once(damage: Callable[[bytes], bytes]) -> None:
    """A regression: callers that name the entry themselves quote ``reason``, which must not
    name it again (bundles printed "entry 2: entry 2: the signature does not verify")."""
    signer = Signer("gnau-dealer/test", Ed25519PrivateKey.generate())
    data = encode_entry(
        signer,
        index=2,
        kind=EntryKind.SERVICE_STARTED,
        time="2025-03-01T12:00:00Z",
        payload={"version": "0.1.0"},
        prev_hash=GENESIS_PREV_HASH,
    )
    with pytest.raises(EntryError) as raised:
        decode_entry(damage(data), signer.verifier)
    error = raised.value
    assert not error.reason.startswith("entry"), error.reason
    assert str(error) in (f"entry 2: {error.reason}", f"entry: {error.reason}")
    assert str(error).count("entry 2") <= 1


# --- The sequencer's path: a payload made canonical when committed, spliced into the entry -------

ROUND_IDS = st.one_of(st.none(), st.text(min_size=1, max_size=12))
PAYLOAD_KEYS = st.one_of(
    st.text(max_size=6), st.sampled_from(["é", "\ue000", "\U0001f0a1", "\x7f"])
)
PAYLOADS = st.dictionaries(
    PAYLOAD_KEYS,
    st.recursive(
        st.none() | st.booleans() | st.integers(-MAX_INTEGER, MAX_INTEGER) | st.text(),
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(PAYLOAD_KEYS, children, max_size=4)
        ),
        max_leaves=12,
    ),
    max_size=5,
)


@given(
    payload=PAYLOADS,
    round_id=ROUND_IDS,
    index=st.integers(0, MAX_INDEX),
    prev_hash=st.binary(min_size=32, max_size=32).map(bytes.hex),
)
@example(
    payload={"\ue000": 1, "\U0001f0a1": 2, "a": '"\\\n\x1f'},  # UTF-16 order, escapes
    round_id='r-"\u2028',
    index=MAX_INDEX,
    prev_hash=GENESIS_PREV_HASH,
)
def test_spliced_entries_equal_an_independent_rfc8785_encoding(
    payload: dict[str, Any], round_id: str | None, index: int, prev_hash: str
) -> None:
    kind = EntryKind.SERVICE_STARTED if round_id is None else EntryKind.ROUND_DEALT
    try:
        payload_json = event_payload(kind, payload, time=TIME, round_id=round_id)
    except EntryError:
        # Refused when committed only if the reference cannot write it either (a lone surrogate).
        with pytest.raises((rfc8785.CanonicalizationError, UnicodeEncodeError)):
            rfc8785.dumps({"payload": payload, "round_id": round_id})
        return
    assert payload_json == rfc8785.dumps(payload)
    signed = {
        "index": index,
        "kind": str(kind),
        "time": TIME,
        "round_id": round_id,
        "payload": payload,
        "prev_hash": prev_hash,
        "key_id": LOG.key_id.hex(),
    }
    # The oracle: rfc8785 encodes, OpenSSL (cryptography) signs.
    signature = LOG.private_key.sign(rfc8785.dumps(signed)).hex()
    expected = rfc8785.dumps({**signed, "signature": signature})
    spliced = sign_event(
        LOG,
        index=index,
        kind=kind,
        time=TIME,
        payload_json=payload_json,
        prev_hash=prev_hash,
        round_id=round_id,
    )
    assert spliced == expected
    assert (
        encode_entry(
            LOG,
            index=index,
            kind=kind,
            time=TIME,
            payload=payload,
            prev_hash=prev_hash,
            round_id=round_id,
        )
        == expected
    )
    assert decode_entry(spliced, LOG.verifier).payload == payload


@pytest.mark.parametrize(
    ("fields", "digest"),
    [
        (
            {"index": 0, "kind": EntryKind.SERVICE_STARTED, "payload": {"version": "0.1.0"}},
            "2f63ed261e60f663800c2a0b3ebec61ed4e926ab92a232a0f4c3b84236251d0a",
        ),
        (
            {
                "index": 41,
                "kind": EntryKind.ROUND_SETTLED,
                "time": "2026-12-01T00:00:00Z",
                "round_id": 'r-"é\u2028\U0001f0a1\n',
                "payload": {
                    "é": [1, -2, None, True, {"\U0001f0a1": "x\x7f\x00", "\ue000": MAX_INTEGER}],
                    "a": "",
                },
                "prev_hash": "ab" * 32,
            },
            "3206cf682d389233e0ef599318037fcc1d7fc90bfc11987046a688e056f4fe4c",
        ),
    ],
)
def test_entries_are_byte_identical_to_those_of_earlier_releases(
    fields: dict[str, Any], digest: str
) -> None:
    # Digests of the bytes the encoder wrote for these inputs before the sequencer spliced
    # payloads and libsodium signed (a full encoding, signed by OpenSSL): entries already in
    # logs are what today's code writes.
    assert hashlib.sha256(entry_bytes(**fields)).hexdigest() == digest


@pytest.mark.parametrize(
    ("kind", "payload", "round_id", "reason"),
    [
        (EntryKind.SERVICE_STARTED, {"x": 1.5}, None, "payload: every number"),
        (EntryKind.SERVICE_STARTED, {"x": 2**53}, None, "payload: every number"),
        (EntryKind.SERVICE_STARTED, {"x": float("nan")}, None, "payload: every number"),
        (EntryKind.SERVICE_STARTED, {"x": "\ud800"}, None, "not representable"),
        (EntryKind.SERVICE_STARTED, {}, "r-1", "must have round_id null"),
        (EntryKind.ROUND_DEALT, {}, None, "needs a round_id"),
        (EntryKind.ROUND_DEALT, {}, "r\ud800", "round_id is not valid Unicode"),
    ],
)
def test_an_event_no_entry_may_hold_is_refused_before_it_has_an_index(
    kind: EntryKind, payload: dict[str, Any], round_id: str | None, reason: str
) -> None:
    with pytest.raises(EntryError, match=reason) as refused:
        event_payload(kind, payload, time=TIME, round_id=round_id)
    assert refused.value.index is None


def test_a_payload_nested_too_deep_is_refused_before_it_has_an_index() -> None:
    nested: dict[str, Any] = {}
    for _ in range(MAX_NESTING):
        nested = {"x": nested}
    with pytest.raises(EntryError, match="nested more than"):
        event_payload(EntryKind.SERVICE_STARTED, nested, time=TIME)


def test_an_entry_over_the_bundle_limit_is_refused_before_it_is_read() -> None:
    # A tile bundle's length prefix is 16 bits: 65535 bytes at most (c2sp.org/tlog-tiles).
    with pytest.raises(EntryError, match="at most 65535 bytes, not 65536"):
        decode_entry(b" " * 65_536, LOG.verifier)
