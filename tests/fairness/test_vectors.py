"""The published vectors (docs/vectors/), checked three ways: by this package, by an independent
re-implementation written here with hashlib/hmac only, and by the docs' standalone script.
(The Node.js client's ``clients/node/fairness.test.mjs`` reads the same directory: a fourth.)"""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

from gnau_service.fairness import RevealedRound, verify_revealed_round
from gnau_service.fairness.commitment import commitment_preimage
from gnau_service.fairness.shuffle import GENERATE_BYTES, shuffle_drbg
from gnau_service.fairness.transcript import transcript_preimage

from .conftest import (
    FAIRNESS_VECTORS,
    PLAYER_REF_VECTOR,
    REPO_ROOT,
    TEST_VECTOR_DIR,
    VECTOR_DIR,
    load_json,
    load_script,
)

make_fairness_vectors = load_script(TEST_VECTOR_DIR / "make_fairness_vectors.py")


REJECTION_VECTOR = VECTOR_DIR / "fairness-round-8decks-82seats-rejection.json"
#: The v3 stake pair: one round locked with different stakes.
STAKE_500 = VECTOR_DIR / "fairness-round-v3-1deck-4seats-stake-500.json"
STAKE_501 = VECTOR_DIR / "fairness-round-v3-1deck-4seats-stake-501.json"


def test_the_required_rounds_are_there() -> None:
    shapes = set()
    for path in FAIRNESS_VECTORS:
        revealed = json.loads(path.read_text(encoding="utf-8"))["revealed_round"]
        shapes.add((revealed["house_rules"]["decks"], len(revealed["seats"])))
    assert {(1, 2), (1, 9), (2, 12), (8, 82), (1, 3)} <= shapes
    formats = {
        json.loads(path.read_text(encoding="utf-8"))["revealed_round"]["format"]
        for path in FAIRNESS_VECTORS
    }
    assert formats == {
        "gnau-dealer/revealed-round/v1",
        "gnau-dealer/revealed-round/v2",
        "gnau-dealer/revealed-round/v3",
    }
    assert REJECTION_VECTOR in FAIRNESS_VECTORS
    assert {STAKE_500, STAKE_501} <= set(FAIRNESS_VECTORS)


def test_the_generator_still_produces_the_checked_in_files() -> None:
    assert make_fairness_vectors.main(["--check"]) == 0


def test_the_rejection_vector_rejects_the_word_it_says() -> None:
    """Pick 11 of 8 decks is a draw below 416 - 11 = 405; 2**32 = 10,604,857 * 405 + 211, so
    the accepted words are 0 .. 4,294,967,084 and the 12th word, 4,294,967,136, is discarded."""
    vector = json.loads(REJECTION_VECTOR.read_text(encoding="utf-8"))
    walk = vector["intermediate"]["fisher_yates"]
    assert walk["rejected_words"] == [
        {"pick": 11, "n": 405, "word_index": 11, "word": 4_294_967_136}
    ]
    assert 10_604_857 * 405 + 211 == 2**32
    assert walk["words_used"] == len(walk["picks"]) + 1 == 416
    assert vector["revealed_round"]["server_seed"] == (
        "63cb3eb0a700d1521b03feb953b31b78887e30e3c93615fe1d1ee4779212d9bd"
    )


def test_words_used_counts_the_picks_and_the_rejections(vector: dict[str, Any]) -> None:
    walk = vector["intermediate"]["fisher_yates"]
    assert walk["words_used"] == len(walk["picks"]) + len(walk["rejected_words"])
    if vector["revealed_round"]["house_rules"]["decks"] != 8:
        assert walk["rejected_words"] == []


def test_the_search_finds_the_rejection_seed_first() -> None:
    index = make_fairness_vectors.REJECTION_SEARCH_INDEX
    assert make_fairness_vectors.search_rejection(index - 3, index + 1) == index
    assert make_fairness_vectors.rejection_search_seed(index).hex() == (
        "63cb3eb0a700d1521b03feb953b31b78887e30e3c93615fe1d1ee4779212d9bd"
    )


def test_the_generator_records_rejected_words() -> None:
    # n = 3: 2**32 mod 3 = 1, so only 2**32 - 1 is rejected; 5 mod 3 = 2; then 7 mod 2 = 1.
    walk = make_fairness_vectors.walk_fisher_yates(iter([2**32 - 1, 5, 7]), 3)
    assert walk.picks == [2, 1]
    assert walk.words_used == 3
    assert walk.rejected_words == [{"pick": 0, "n": 3, "word_index": 0, "word": 2**32 - 1}]


def test_the_package_verifies_every_vector(vector: dict[str, Any]) -> None:
    revealed = RevealedRound.from_json(vector["revealed_round"])
    assert verify_revealed_round(revealed).ok
    intermediate = vector["intermediate"]
    assert (
        commitment_preimage(
            revealed.round_id, revealed.rules, revealed.server_seed, revealed.version
        ).hex()
        == intermediate["commitment_preimage"]
    )
    assert (
        transcript_preimage(
            revealed.commitment, revealed.seats, revealed.beacon, revealed.version
        ).hex()
        == intermediate["transcript_preimage"]
    )
    drbg = shuffle_drbg(revealed.server_seed, revealed.transcript_hash)
    first = [drbg.generate(GENERATE_BYTES).hex() for _ in intermediate["drbg"]["first_outputs"]]
    assert first == intermediate["drbg"]["first_outputs"]


# ---------------------------------------------------------------------------------------------
# An independent re-implementation, written from docs/fairness.md, that imports nothing from
# the package: if the package and this agree on the vectors, the vectors are not merely what
# the code under test happened to compute.


def _frame(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def _u64(value: int) -> bytes:
    return value.to_bytes(8, "big")


def _rule_value(value: object) -> bytes:
    if value is True or value is False:
        return b"true" if value else b"false"
    return str(value).encode()


def _version(revealed: dict[str, Any]) -> str:
    return {
        "gnau-dealer/revealed-round/v1": "v1",
        "gnau-dealer/revealed-round/v2": "v2",
        "gnau-dealer/revealed-round/v3": "v3",
    }[revealed["format"]]


def _independent_commitment_preimage(revealed: dict[str, Any]) -> bytes:
    rules = revealed["house_rules"]
    encoded_rules = b"".join(
        _frame(key.encode()) + _frame(_rule_value(rules[key])) for key in sorted(rules)
    )
    return b"".join(
        _frame(field)
        for field in (
            f"gnau-dealer/fairness/{_version(revealed)}/commitment".encode(),
            revealed["round_id"].encode("utf-8"),
            encoded_rules,
            _u64(rules["decks"]),
            bytes.fromhex(revealed["server_seed"]),
        )
    )


def _independent_transcript_preimage(revealed: dict[str, Any]) -> bytes:
    version = _version(revealed)
    seats = b""
    for seat in sorted(revealed["seats"], key=lambda seat: seat["seat_number"]):
        # v2 and v3 leave the player (a reference) out of the transcript; v1 hashed the player
        # id. v3 leaves the stake out too.
        player = b"" if version != "v1" else _frame(seat["player_id"].encode("utf-8"))
        stake = b"" if version == "v3" else _frame(_u64(seat["stake"]))
        encoded = (
            _frame(_u64(seat["seat_number"]))
            + player
            + stake
            + _frame(bytes.fromhex(seat["client_seed"]))
        )
        seats += _frame(encoded)
    beacon_json = revealed["beacon"]
    beacon = (
        b"\x00"
        if beacon_json is None
        else b"\x01"
        + _frame(beacon_json["label"].encode("utf-8"))
        + _frame(bytes.fromhex(beacon_json["value"]))
    )
    return b"".join(
        _frame(field)
        for field in (
            f"gnau-dealer/fairness/{version}/lock".encode(),
            bytes.fromhex(revealed["commitment"]),
            seats,
            beacon,
        )
    )


class _IndependentHmacDrbg:
    """SP 800-90A 10.1.2, straight from the standard's pseudocode."""

    def __init__(self, entropy: bytes, nonce: bytes, personalization: bytes) -> None:
        self.key = b"\x00" * 32
        self.value = b"\x01" * 32
        self._update(entropy + nonce + personalization)

    def _update(self, data: bytes) -> None:
        self.key = hmac.new(self.key, self.value + b"\x00" + data, hashlib.sha256).digest()
        self.value = hmac.new(self.key, self.value, hashlib.sha256).digest()
        if data:
            self.key = hmac.new(self.key, self.value + b"\x01" + data, hashlib.sha256).digest()
            self.value = hmac.new(self.key, self.value, hashlib.sha256).digest()

    def generate(self, size: int) -> bytes:
        output = b""
        while len(output) < size:
            self.value = hmac.new(self.key, self.value, hashlib.sha256).digest()
            output += self.value
        self._update(b"")
        return output[:size]


class _IndependentWords:
    def __init__(self, drbg: _IndependentHmacDrbg) -> None:
        self.drbg = drbg
        self.buffer = b""
        self.used = 0

    def __iter__(self) -> Iterator[int]:
        return self

    def __next__(self) -> int:
        if not self.buffer:
            self.buffer = self.drbg.generate(64)
        word, self.buffer = int.from_bytes(self.buffer[:4], "big"), self.buffer[4:]
        self.used += 1
        return word


def _independent_round(revealed: dict[str, Any], *, reject: bool = True) -> dict[str, Any]:
    """The round recomputed from the docs; ``reject=False`` is the classic mistake of taking
    ``w mod n`` for every word, with no rejection."""
    commitment_bytes = _independent_commitment_preimage(revealed)
    commitment = hashlib.sha256(commitment_bytes).digest()
    transcript_bytes = _independent_transcript_preimage(revealed)
    transcript = hashlib.sha256(transcript_bytes).digest()
    seed = bytes.fromhex(revealed["server_seed"])

    def new_drbg() -> _IndependentHmacDrbg:
        return _IndependentHmacDrbg(seed, transcript, b"gnau-dealer/fairness/v1/shuffle")

    first_drbg = new_drbg()
    first_outputs = [first_drbg.generate(64).hex(), first_drbg.generate(64).hex()]

    words = _IndependentWords(new_drbg())
    decks = revealed["house_rules"]["decks"]
    deck = [rank + suit for suit in "CDHS" for rank in "A23456789TJQK"] * decks
    picks: list[int] = []
    rejected = []
    for top in range(len(deck) - 1, 0, -1):
        n = top + 1
        limit = (2**32 // n) * n if reject else 2**32
        word = next(words)
        while word >= limit:
            rejected.append(
                {"pick": len(picks), "n": n, "word_index": words.used - 1, "word": word}
            )
            word = next(words)
        pick = word % n
        picks.append(pick)
        deck[top], deck[pick] = deck[pick], deck[top]

    seat_numbers = sorted(seat["seat_number"] for seat in revealed["seats"])
    receivers: list[int | None] = [*seat_numbers, None]  # None: the dealer
    hands: dict[int | None, list[str]] = {receiver: [] for receiver in receivers}
    position = 0
    for _pass in range(5):
        for receiver in receivers:
            hands[receiver].append(deck[position])
            position += 1
    return {
        "commitment_preimage": commitment_bytes.hex(),
        "commitment": commitment.hex(),
        "transcript_preimage": transcript_bytes.hex(),
        "transcript_hash": transcript.hex(),
        "first_outputs": first_outputs,
        "picks": picks,
        "words_used": words.used,
        "rejected_words": rejected,
        "deck": deck,
        "hands": [{"seat_number": seat, "cards": hands[seat]} for seat in seat_numbers],
        "dealer_hand": hands[None],
        "set_aside": deck[position:],
    }


def test_an_independent_implementation_reproduces_every_vector(vector: dict[str, Any]) -> None:
    revealed, intermediate = vector["revealed_round"], vector["intermediate"]
    mine = _independent_round(revealed)
    assert mine["commitment_preimage"] == intermediate["commitment_preimage"]
    assert mine["commitment"] == revealed["commitment"]
    assert mine["transcript_preimage"] == intermediate["transcript_preimage"]
    assert mine["transcript_hash"] == revealed["transcript_hash"]
    assert mine["first_outputs"] == intermediate["drbg"]["first_outputs"]
    assert mine["picks"] == intermediate["fisher_yates"]["picks"]
    assert mine["words_used"] == intermediate["fisher_yates"]["words_used"]
    assert mine["rejected_words"] == intermediate["fisher_yates"]["rejected_words"]
    assert mine["deck"] == revealed["deck"]
    assert mine["hands"] == revealed["hands"]
    assert mine["dealer_hand"] == revealed["dealer_hand"]
    assert mine["set_aside"] == intermediate["set_aside"]


def test_an_implementation_without_rejection_fails_the_rejection_vector(
    vector: dict[str, Any],
) -> None:
    """``w mod n`` on every word agrees with the three vectors that reject nothing (so they
    cannot catch it) and deals another deck for the one that does."""
    revealed = vector["revealed_round"]
    careless = _independent_round(revealed, reject=False)
    if vector["intermediate"]["fisher_yates"]["rejected_words"]:
        assert careless["deck"] != revealed["deck"]
        assert careless["words_used"] == len(careless["picks"])
    else:
        assert careless["deck"] == revealed["deck"]


def test_the_independent_drbg_matches_a_nist_vector() -> None:
    """Guards the guard: the re-implementation above is itself right (NIST CAVP, no_reseed,
    COUNT 0, no personalization)."""
    drbg = _IndependentHmacDrbg(
        bytes.fromhex("ca851911349384bffe89de1cbdc46e6831e44d34a4fb935ee285dd14b71a7488"),
        bytes.fromhex("659ba96c601dc69fc902940805ec0ca8"),
        b"",
    )
    drbg.generate(128)
    assert drbg.generate(128).hex().startswith("e528e9abf2dece54d47c7e75e5fe3021")


# ---------------------------------------------------------------------------------------------
# The docs' standalone script, run as a reader would run it.

_SNIPPET = re.compile(
    r"<!-- standalone-verifier:begin -->\s*```python\n(.*?)```\s*<!-- standalone-verifier:end -->",
    re.DOTALL,
)


def _docs_script() -> str:
    match = _SNIPPET.search((REPO_ROOT / "docs" / "fairness.md").read_text(encoding="utf-8"))
    assert match, "docs/fairness.md lost its standalone verifier"
    return match[1]


def _run_docs_script(revealed: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-c", _docs_script()],
        input=json.dumps(revealed),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_the_docs_script_uses_only_the_standard_library() -> None:
    imports = re.findall(r"^import (.+)$", _docs_script(), re.MULTILINE)
    assert imports == ["hashlib, hmac, json, sys"]
    assert not re.findall(r"^\s*from ", _docs_script(), re.MULTILINE)


def test_the_docs_script_verifies_every_vector(vector: dict[str, Any]) -> None:
    result = _run_docs_script(vector["revealed_round"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"round {vector['revealed_round']['round_id']} verifies"


# The defaults as docs/fairness.md lists them, written out here rather than read from the code.
DOCUMENTED_DEFAULT_RULES = {
    "decks": 1,
    "five_small": True,
    "payout": "points",
    "suited_double": False,
    "ten_is_duke": False,
    "three_six_pair": False,
    "tie": "dealer",
    "trips_make_ox": True,
}


def _as_another_writer_might_write_it(revealed: dict[str, Any]) -> dict[str, Any]:
    """The same round in the other spellings the format allows: upper-case hex, ``10`` for
    ``T`` and lower-case cards, default rules and empty client seeds and a null beacon left
    out, and the seats and hands in no particular order."""
    other = json.loads(json.dumps(revealed))

    def card(text: str) -> str:
        return text.replace("T", "10").lower() if text[0] in "T2468" else text

    for key in ("commitment", "transcript_hash", "server_seed"):
        other[key] = other[key].upper()
    other["house_rules"] = {
        key: value
        for key, value in other["house_rules"].items()
        if DOCUMENTED_DEFAULT_RULES[key] != value
    }
    for seat in other["seats"]:
        if seat["client_seed"]:
            seat["client_seed"] = seat["client_seed"].upper()
        else:
            del seat["client_seed"]
    if other["beacon"] is None:
        del other["beacon"]
    else:
        other["beacon"]["value"] = other["beacon"]["value"].upper()
    other["deck"] = [card(text) for text in other["deck"]]
    other["dealer_hand"] = [card(text) for text in other["dealer_hand"]]
    for hand in other["hands"]:
        hand["cards"] = [card(text) for text in hand["cards"]]
    generator = random.Random(len(other["seats"]))
    generator.shuffle(other["seats"])
    generator.shuffle(other["hands"])
    return other


def test_the_other_spellings_are_the_format(vector: dict[str, Any]) -> None:
    """The package reads them as the same round: they are the format, not an extension."""
    other = _as_another_writer_might_write_it(vector["revealed_round"])
    assert other != vector["revealed_round"]
    assert "10" in json.dumps(other["deck"])
    assert RevealedRound.from_json(other) == RevealedRound.from_json(vector["revealed_round"])


def test_the_docs_script_accepts_every_spelling_the_format_allows(vector: dict[str, Any]) -> None:
    other = _as_another_writer_might_write_it(vector["revealed_round"])
    result = _run_docs_script(other)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"round {other['round_id']} verifies"


def test_the_docs_script_reads_a_left_out_rule_as_its_default(
    vector: dict[str, Any],
) -> None:
    """Leaving a rule out means its default, so dropping a non-default rule breaks the
    commitment."""
    other = _as_another_writer_might_write_it(vector["revealed_round"])
    if other["house_rules"] == {}:
        other["house_rules"] = {"ten_is_duke": True}
    else:
        other["house_rules"].popitem()
    result = _run_docs_script(other)
    assert result.returncode != 0
    assert "AssertionError" in result.stderr


def test_the_docs_script_rejects_a_tampered_hand(vector: dict[str, Any]) -> None:
    tampered = json.loads(json.dumps(vector["revealed_round"]))
    hand = tampered["hands"][-1]["cards"]
    hand[0], hand[1] = hand[1], hand[0]
    result = _run_docs_script(tampered)
    assert result.returncode != 0
    assert "AssertionError" in result.stderr


def test_the_player_ref_vector_is_the_documented_hmac() -> None:
    """Each reference recomputed from docs/fairness.md with hmac alone, and the references of
    the v2 vector found among them under the keys its description gives."""
    vector = load_json(PLAYER_REF_VECTOR)
    tag = vector["tag"].encode("ascii")
    assert tag == b"gnau-dealer/player-ref/v1"
    for case in vector["cases"]:
        message = b"".join(
            map(_frame, (tag, case["round_id"].encode("utf-8"), _u64(case["seat_number"])))
        )
        assert message.hex() == case["hmac_input"]
        digest = hmac.new(bytes.fromhex(case["key"]), message, hashlib.sha256).digest()
        assert digest.hex() == case["hmac_sha256"]
        assert case["player_ref"] == "p-" + digest[:16].hex()
    assert any(not case["round_id"].isascii() for case in vector["cases"])
    assert max(case["seat_number"] for case in vector["cases"]) == 2**31 - 1
    v2 = load_json(VECTOR_DIR / "fairness-round-v2-1deck-3seats-beacon.json")["revealed_round"]
    keys = {
        name: hashlib.sha256(b"vector player key " + name.encode()).hexdigest()
        for name in ("alice", "bob")
    }
    by_seat = {
        case["seat_number"]: (case["key"], case["player_ref"])
        for case in vector["cases"]
        if case["round_id"] == v2["round_id"]
    }
    assert by_seat == {
        seat["seat_number"]: (keys[name], seat["player_ref"])
        for seat, name in zip(v2["seats"], ("alice", "bob", "alice"), strict=True)
    }


# ---------------------------------------------------------------------------------------------
# v3: the stake is not an input of the shuffle.


def test_the_v3_stake_pair_differs_in_stakes_only_and_deals_the_same_cards() -> None:
    """The two vectors are one round locked with other stakes: everything else is equal,
    the transcript hash, the deck and every hand included."""
    low, high = (load_json(path)["revealed_round"] for path in (STAKE_500, STAKE_501))
    assert low["format"] == high["format"] == "gnau-dealer/revealed-round/v3"
    assert [seat["stake"] for seat in low["seats"]] != [seat["stake"] for seat in high["seats"]]
    assert low["seats"][0]["stake"] == 500
    assert high["seats"][0]["stake"] == 501

    def without_stakes(seats: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in seat.items() if k != "stake"} for seat in seats]

    assert without_stakes(low["seats"]) == without_stakes(high["seats"])
    assert {k: v for k, v in low.items() if k != "seats"} == {
        k: v for k, v in high.items() if k != "seats"
    }
    assert low["beacon"] is not None
    assert all(seat["client_seed"] for seat in low["seats"][:1])


def test_the_v3_transcript_hash_by_hand() -> None:
    """The stake-500 vector's transcript hash, from bytes written out here frame by frame (the
    client seeds, the beacon and the commitment as the vector publishes them): no stake is
    among them, and the result is the published hash of both vectors of the pair."""
    revealed = load_json(STAKE_500)["revealed_round"]
    seat_1 = bytes.fromhex("00000008 0000000000000001 0000000c 616c6963652773206c75636b")
    seat_2 = bytes.fromhex("00000008 0000000000000002 00000000")  # no client seed
    seat_3 = bytes.fromhex("00000008 0000000000000003 00000002 0001")
    seat_5 = bytes.fromhex("00000008 0000000000000005 00000040") + bytes(range(64))
    assert [len(seat) for seat in (seat_1, seat_2, seat_3, seat_5)] == [28, 16, 18, 80]
    seats = (
        bytes.fromhex("0000001c")
        + seat_1
        + bytes.fromhex("00000010")
        + seat_2
        + bytes.fromhex("00000012")
        + seat_3
        + bytes.fromhex("00000050")
        + seat_5
    )
    beacon = (
        bytes.fromhex("01 0000001d")
        + b"drand/quicknet/round/34567890"
        + bytes.fromhex("00000030")
        + b"\xc3" * 48
    )
    commitment = "9c283340afc33fb8bef73f78f1d1bea115afa81ff215fc6621918b5b687ec02b"
    preimage = (
        bytes.fromhex("0000001c")
        + b"gnau-dealer/fairness/v3/lock"
        + bytes.fromhex("00000020" + commitment)
        + bytes.fromhex("0000009e")  # 4 frames: 4 * 4 + 28 + 16 + 18 + 80 = 158 bytes
        + seats
        + bytes.fromhex("00000056")  # 1 + 4 + 29 + 4 + 48 = 86 bytes
        + beacon
    )
    assert revealed["commitment"] == commitment
    assert load_json(STAKE_500)["intermediate"]["transcript_preimage"] == preimage.hex()
    assert hashlib.sha256(preimage).hexdigest() == revealed["transcript_hash"]
    assert load_json(STAKE_501)["revealed_round"]["transcript_hash"] == revealed["transcript_hash"]


def test_the_stake_still_moves_a_v2_deck() -> None:
    """The v2 vector with seat 1's stake one more: v2 hashed stakes, so the independent
    re-implementation finds another transcript hash and another deck than the vector's."""
    revealed = load_json(VECTOR_DIR / "fairness-round-v2-1deck-3seats-beacon.json")[
        "revealed_round"
    ]
    assert revealed["seats"][0]["stake"] == 100
    changed = json.loads(json.dumps(revealed))
    changed["seats"][0]["stake"] = 101
    assert _independent_round(revealed)["deck"] == revealed["deck"]
    mine = _independent_round(changed)
    assert mine["transcript_hash"] != revealed["transcript_hash"]
    assert mine["deck"] != revealed["deck"]
    assert not verify_revealed_round(RevealedRound.from_json(changed)).ok


def test_the_stake_moves_no_v3_card() -> None:
    """The same change in a v3 vector: the same transcript hash, the same deck, and the round
    still verifies (its stakes are bound by the signed log, not by the transcript)."""
    revealed = load_json(STAKE_500)["revealed_round"]
    changed = json.loads(json.dumps(revealed))
    changed["seats"][0]["stake"] = 101
    mine = _independent_round(changed)
    assert mine["transcript_hash"] == revealed["transcript_hash"]
    assert mine["deck"] == revealed["deck"]
    assert verify_revealed_round(RevealedRound.from_json(changed)).ok
