"""Write the fairness test vectors, published beside the text that describes them
(``docs/fairness.md``, section 4): ``docs/vectors/fairness-round-*.json`` and
``docs/vectors/player-ref-v1.json``.

Each vector is one complete round from fixed inputs (the server seeds below are constants,
drawn once from ``secrets.token_hex(32)``), with every intermediate value a re-implementation
needs to find where it parts ways: the commitment and transcript preimages, the DRBG's input
and first outputs, the Fisher-Yates picks, the deck, the hands and the cards set aside.

The vectors were generated once and are checked in; ``tests/fairness/test_vectors.py`` checks
them against this package *and* against an independent re-implementation written in the test.
The first four are v1 rounds (each seat's player id in the transcript), the rounds logged
before player references; the ``fairness-round-v2-*`` ones are v2 rounds, whose seats name each
player by a reference (here computed with keys derived from the player's name, so that they
are fixed) that the transcript leaves out; the ``fairness-round-v3-*`` ones are v3 rounds,
whose transcript leaves the stakes out too. Two of those are one round locked with different
stakes, which deal the same cards. ``player-ref-v1.json`` gives the v2 round's references, and
a few more, with the HMAC's input and output. Regenerate only when the construction changes on
purpose (and then add a version: the domain tags and the JSON format name it)::

    .venv/bin/python tests/vectors/make_fairness_vectors.py          # write the files
    .venv/bin/python tests/vectors/make_fairness_vectors.py --check  # exit 1 if they differ

One vector must make the rejection sampler discard a word, or an implementation that takes
``w mod n`` without rejecting would pass them all; no fixed seed drawn at random does that
(about 1 round in 7 million with 1 deck, 1 in 100,000 with 8). Its server seed was found by a
deterministic search, repeatable with::

    .venv/bin/python tests/vectors/make_fairness_vectors.py --search-rejection

which tries ``SHA-256(REJECTION_SEARCH_TAG || uint64(i))`` for ``i = 0, 1, ...`` as the seed of
that vector's round and prints the first one whose shuffle rejects a word.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gnau_service.fairness import Beacon, CommittedRound, LockedSeat
from gnau_service.fairness.commitment import commitment_preimage
from gnau_service.fairness.encoding import (
    PLAYER_REF_TAG,
    SHUFFLE_TAG,
    FairnessVersion,
    frames,
    uint64,
    utf8,
)
from gnau_service.fairness.player_refs import player_ref
from gnau_service.fairness.shuffle import GENERATE_BYTES, accept_word, drbg_words, shuffle_drbg
from gnau_service.fairness.transcript import transcript_preimage
from gnau_service.rules.house_rules import HouseRules, PayoutTable, TieRule

VECTOR_DIR = Path(__file__).resolve().parents[2] / "docs" / "vectors"
GENERATED_BY = "tests/vectors/make_fairness_vectors.py"
DRBG_OUTPUTS_SHOWN = 2
REJECTION_SEARCH_TAG = b"gnau-dealer/vectors/rejection-search"
REJECTION_SEARCH_INDEX = 106_949
"""What ``--search-rejection`` finds: the first seed index whose round rejects a word."""


@dataclass(frozen=True)
class VectorSpec:
    file_name: str
    description: str
    round_id: str
    rules: HouseRules
    server_seed_hex: str
    seats: tuple[LockedSeat, ...]
    beacon: Beacon | None = None
    version: FairnessVersion = FairnessVersion.V1


def vector_player_key(name: str) -> bytes:
    """The key of the vectors' player ``name``: SHA-256 of ``vector player key `` and the name,
    so that the vectors are fixed (the service draws each player's key at random)."""
    return hashlib.sha256(b"vector player key " + name.encode()).digest()


def referenced(round_id: str, seats: dict[int, tuple[str, int, bytes]]) -> tuple[LockedSeat, ...]:
    """v2 seats: ``{seat number: (player's name, stake, client seed)}``, each player named by
    the reference under a key derived from their name."""
    return tuple(
        LockedSeat(
            number,
            player_ref(vector_player_key(name), round_id, number),
            stake,
            client_seed=client_seed,
        )
        for number, (name, stake, client_seed) in seats.items()
    )


V2_SPECS = (
    VectorSpec(
        file_name="fairness-round-v2-1deck-3seats-beacon.json",
        description=(
            "v2: 1 deck, 3 seats (one player at two of them: two references), client seeds, "
            "an external beacon."
        ),
        round_id="r-5f0c2a9e4b7d1c3e8a6f0b2d",
        rules=HouseRules(),
        server_seed_hex="7d3f0e9a2c5b8d1e4f6a9c0b3e5d7f1a2c4e6b8d0f1a3c5e7b9d2f4a6c8e0b1d",
        seats=referenced(
            "r-5f0c2a9e4b7d1c3e8a6f0b2d",
            {1: ("alice", 100, b"alice's luck"), 2: ("bob", 250, b""), 4: ("alice", 75, b"\x01")},
        ),
        beacon=Beacon(
            label="drand/quicknet/round/23456789",
            value=bytes.fromhex("5a" * 32),
        ),
        version=FairnessVersion.V2,
    ),
    VectorSpec(
        file_name="fairness-round-v2-2decks-12seats-client-seeds.json",
        description=(
            "v2: 2 decks, 12 seats numbered 1-13 without 7 (locked from a list in descending "
            "order; listed by seat number, as every revealed round), client seeds of 0, 1, 5, 32 "
            "and 64 bytes, non-default house rules."
        ),
        round_id="r-00ff00ff00ff00ff00ff00ff",
        rules=HouseRules(
            ten_is_duke=True,
            tie=TieRule.PUSH,
            payout=PayoutTable.MULTIPLIER,
            suited_double=True,
            decks=2,
        ),
        server_seed_hex="e1c3a5b7d9f0e2c4a6b8d0f1e3c5a7b9d1f3e5c7a9b0d2f4e6c8a0b1d3f5e7c9",
        seats=tuple(
            reversed(
                referenced(
                    "r-00ff00ff00ff00ff00ff00ff",
                    {
                        number: (f"player-{number}", 10 * number, bytes(range(size)))
                        for number, size in zip(
                            (1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13),
                            (0, 1, 5, 32, 64, 0, 1, 5, 32, 64, 0, 1),
                            strict=True,
                        )
                    },
                )
            )
        ),
        version=FairnessVersion.V2,
    ),
)


V3_ROUND_ID = "r-422ca18c0bce9f40537301f1"
V3_STAKE_PAIR_SEED = "4c33f561efc8586a1d1930e621fe70a17bff1808ab645c4250e0faafa5c4af7e"
V3_BEACON = Beacon(label="drand/quicknet/round/34567890", value=bytes.fromhex("c3" * 48))


def v3_stake_pair_spec(stake_of_seat_1: int, stake_of_seat_2: int) -> VectorSpec:
    """The v3 round of the stake pair: one round id, seed, seats, client seeds and beacon, with
    the given stakes at seats 1 and 2 (seats 3 and 5 stake 2,500 and 1)."""
    return VectorSpec(
        file_name=f"fairness-round-v3-1deck-4seats-stake-{stake_of_seat_1}.json",
        description=(
            f"v3: 1 deck, 4 seats, client seeds, a beacon; seat 1 stakes {stake_of_seat_1:,} "
            f"and seat 2 {stake_of_seat_2:,}. The stake pair: "
            "fairness-round-v3-1deck-4seats-stake-500.json and "
            "fairness-round-v3-1deck-4seats-stake-501.json are one round (round id, seed, seats, "
            "client seeds, beacon) locked with different stakes, and have the same transcript "
            "hash, deck and hands: a v3 transcript does not hash the stakes."
        ),
        round_id=V3_ROUND_ID,
        rules=HouseRules(),
        server_seed_hex=V3_STAKE_PAIR_SEED,
        seats=referenced(
            V3_ROUND_ID,
            {
                1: ("alice", stake_of_seat_1, b"alice's luck"),
                2: ("bob", stake_of_seat_2, b""),
                3: ("carol", 2_500, b"\x00\x01"),
                5: ("dave", 1, bytes(range(64))),
            },
        ),
        beacon=V3_BEACON,
        version=FairnessVersion.V3,
    )


V3_SPECS = (
    v3_stake_pair_spec(500, 100),
    v3_stake_pair_spec(501, 1_000_000),
    VectorSpec(
        file_name="fairness-round-v3-2decks-12seats-client-seeds.json",
        description=(
            "v3: 2 decks, 12 seats numbered 1-13 without 7 (locked from a list in descending "
            "order; listed by seat number, as every revealed round), client seeds of 0, 1, 5, 32 "
            "and 64 bytes, non-default house rules, no beacon."
        ),
        round_id="r-0f1e2d3c4b5a69788796a5b4",
        rules=HouseRules(
            three_six_pair=True,
            tie=TieRule.HIGH_CARD,
            payout=PayoutTable.MULTIPLIER,
            five_small=False,
            decks=2,
        ),
        server_seed_hex="41dad8f82759cc5986e6f3f28686067dba79e2cfa1f0f135d47a8ae22f1c8f9f",
        seats=tuple(
            reversed(
                referenced(
                    "r-0f1e2d3c4b5a69788796a5b4",
                    {
                        number: (f"player-{number}", 7 * number, bytes(range(size)))
                        for number, size in zip(
                            (1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13),
                            (64, 32, 5, 1, 0, 64, 32, 5, 1, 0, 64, 32),
                            strict=True,
                        )
                    },
                )
            )
        ),
        version=FairnessVersion.V3,
    ),
)


SPECS = (
    VectorSpec(
        file_name="fairness-round-1deck-2seats.json",
        description="1 deck, 2 seats, default house rules, no client seeds, no beacon.",
        round_id="table-1/round-000001",
        rules=HouseRules(),
        server_seed_hex="ec0e4b4e033de2fbed7af0bdbb3575e1e1feb1a1e1bc381108679fe0a9ff993a",
        seats=(LockedSeat(1, "alice", 100), LockedSeat(2, "bob", 250)),
    ),
    VectorSpec(
        file_name="fairness-round-1deck-9seats-beacon.json",
        description="1 deck, 9 seats (a full table: 50 of 52 cards dealt), an external beacon.",
        round_id="table-2/round-000042",
        rules=HouseRules(),
        server_seed_hex="b0adf01c00f3dc8b42733485b538f7b6bcdbeeca3427b966df9ccf4b65ea2f67",
        seats=tuple(LockedSeat(n, f"player-{n}", 100 * n) for n in range(1, 10)),
        beacon=Beacon(
            label="drand/quicknet/round/12345678",
            value=bytes.fromhex("330b60a791afbd005f98c41cc9a5126a9a5c0252910ee69c293b6254979f67b3"),
        ),
    ),
    VectorSpec(
        file_name="fairness-round-2decks-12seats-client-seeds.json",
        description=(
            "2 decks, 12 seats numbered 1-13 without 7 (locked from a list with seat 13 first; "
            "listed by seat number, as every revealed round), client seeds of 0, 1, 5, 6, 32 and "
            "64 bytes, a non-ASCII player id, and non-default house rules."
        ),
        round_id="table-3/round-007",
        rules=HouseRules(
            ten_is_duke=True,
            tie=TieRule.PUSH,
            payout=PayoutTable.MULTIPLIER,
            suited_double=True,
            decks=2,
        ),
        server_seed_hex="4ad7c6e1cad1f531f907c88b5c5fe40c61731274504c9bfd9893a48d3167622c",
        seats=(
            LockedSeat(13, "mallory", 5_000, client_seed=bytes(range(64))),
            LockedSeat(1, "zoë", 1, client_seed=b"\x00"),
            LockedSeat(2, "carol", 20, client_seed=b"lucky"),
            LockedSeat(3, "dave", 300),
            LockedSeat(4, "erin", 4_000, client_seed=bytes.fromhex("ff" * 32)),
            LockedSeat(5, "frank", 50),
            LockedSeat(6, "grace", 600, client_seed=b"seven"),
            LockedSeat(8, "heidi", 80),
            LockedSeat(9, "ivan", 9, client_seed=b"9"),
            LockedSeat(10, "judy", 1_000),
            LockedSeat(11, "ken", 11),
            LockedSeat(12, "leo", 1_200, client_seed=b"twelve"),
        ),
    ),
)


def rejection_spec(server_seed_hex: str) -> VectorSpec:
    """The round of the rejection vector, with the given seed (the search tries many)."""
    return VectorSpec(
        file_name="fairness-round-8decks-82seats-rejection.json",
        description=(
            "8 decks, 82 seats (the largest table: 415 of 416 cards dealt), and a shuffle that "
            "rejects a word: see intermediate.fisher_yates.rejected_words. An implementation "
            "that takes w mod n without rejecting deals a different deck."
        ),
        round_id="table-8/round-000416",
        rules=HouseRules(decks=8),
        server_seed_hex=server_seed_hex,
        seats=tuple(LockedSeat(n, f"player-{n:02d}", 25 * n) for n in range(1, 83)),
    )


def rejection_search_seed(index: int) -> bytes:
    """The ``index``-th server seed the rejection search tries."""
    return hashlib.sha256(REJECTION_SEARCH_TAG + index.to_bytes(8, "big")).digest()


@dataclass(frozen=True)
class Walk:
    """Fisher-Yates as it reads the word stream: the picks and every rejected word."""

    picks: list[int]
    words_used: int
    rejected_words: list[dict[str, int]]
    """``{"pick": k, "n": n, "word_index": i, "word": w}``: while making ``picks[k]``, a draw
    below ``n``, the ``i``-th word of the stream (0-based) was ``w`` and was discarded."""


def walk_fisher_yates(words: Iterator[int], deck_size: int) -> Walk:
    """The picks of a shuffle of ``deck_size`` cards, recording each rejected word."""
    picks: list[int] = []
    rejected: list[dict[str, int]] = []
    used = 0
    for n in range(deck_size, 1, -1):
        while True:
            word = next(words)
            used += 1
            drawn = accept_word(word, n)
            if drawn is not None:
                picks.append(drawn)
                break
            rejected.append({"pick": len(picks), "n": n, "word_index": used - 1, "word": word})
    return Walk(picks, used, rejected)


def search_rejection(start: int = 0, stop: int = 10_000_000) -> int | None:
    """The first index from ``start`` whose seed makes the rejection vector's shuffle reject a
    word, or ``None`` if none below ``stop`` does."""
    template = rejection_spec("00" * 32)
    for index in range(start, stop):
        seed = rejection_search_seed(index)
        locked = CommittedRound(template.round_id, template.rules, seed, template.version).lock(
            template.seats
        )
        words = drbg_words(shuffle_drbg(seed, locked.transcript_hash))
        if walk_fisher_yates(words, 52 * template.rules.decks).rejected_words:
            return index
    return None


REJECTION_SPEC = rejection_spec(rejection_search_seed(REJECTION_SEARCH_INDEX).hex())
ALL_SPECS = (*SPECS, REJECTION_SPEC, *V2_SPECS, *V3_SPECS)


def build_vector(spec: VectorSpec) -> dict[str, object]:
    """One vector: the revealed round and the intermediate values that lead to it."""
    server_seed = bytes.fromhex(spec.server_seed_hex)
    committed = CommittedRound(spec.round_id, spec.rules, server_seed, spec.version)
    locked = committed.lock(spec.seats, spec.beacon)
    dealt = locked.deal()

    drbg = shuffle_drbg(server_seed, locked.transcript_hash)
    first_outputs = [drbg.generate(GENERATE_BYTES).hex() for _ in range(DRBG_OUTPUTS_SHOWN)]
    walk = walk_fisher_yates(
        drbg_words(shuffle_drbg(server_seed, locked.transcript_hash)), len(dealt.deck)
    )

    return {
        "description": spec.description,
        "generated_by": GENERATED_BY,
        "revealed_round": dealt.reveal().to_json(),
        "intermediate": {
            "commitment_preimage": commitment_preimage(
                spec.round_id, spec.rules, server_seed, spec.version
            ).hex(),
            "transcript_preimage": transcript_preimage(
                committed.commitment, locked.seats, locked.beacon, spec.version
            ).hex(),
            "drbg": {
                "entropy_input": server_seed.hex(),
                "nonce": locked.transcript_hash.hex(),
                "personalization_string": SHUFFLE_TAG.hex(),
                "generate_bytes": GENERATE_BYTES,
                "first_outputs": first_outputs,
            },
            "fisher_yates": {
                "picks": walk.picks,
                "words_used": walk.words_used,
                "rejected_words": walk.rejected_words,
            },
            "set_aside": [str(card) for card in dealt.deal.set_aside],
        },
    }


PLAYER_REF_FILE = "player-ref-v1.json"
#: The references of the player-reference vector: ``(player key, round id, seat number)``.
PLAYER_REF_CASES: tuple[tuple[bytes, str, int], ...] = (
    (bytes(range(32)), "r-1", 1),
    (bytes(range(32)), "r-1", 2),
    (bytes(range(32)), "r-2", 1),
    (bytes(32), "r-\u00e9t\u00e9/round-\U0001f0a1", 2**31 - 1),
    *(
        (vector_player_key(name), "r-5f0c2a9e4b7d1c3e8a6f0b2d", number)
        for number, name in ((1, "alice"), (2, "bob"), (4, "alice"))
    ),
)


def build_player_ref_vector() -> dict[str, object]:
    """Player references (docs/fairness.md, *Fairness versions*): each case's key, round id
    and seat number, the HMAC's input and output, and the reference. The last three are the
    references of ``fairness-round-v2-1deck-3seats-beacon.json``."""
    cases = []
    for key, round_id, seat_number in PLAYER_REF_CASES:
        message = frames(PLAYER_REF_TAG, utf8(round_id), uint64(seat_number))
        cases.append(
            {
                "key": key.hex(),
                "round_id": round_id,
                "seat_number": seat_number,
                "hmac_input": message.hex(),
                "hmac_sha256": _hmac(key, message).hex(),
                "player_ref": player_ref(key, round_id, seat_number),
            }
        )
    return {
        "description": (
            "Player references of fairness v2 rounds: p- and the first 16 bytes, in lower-case "
            "hex, of HMAC-SHA-256 under the player's 32-byte key of frames(tag, utf8(round_id), "
            "uint64(seat_number)). The last three cases are the references of "
            "fairness-round-v2-1deck-3seats-beacon.json, whose players' keys are SHA-256 of "
            "'vector player key ' and the name (alice, bob, alice)."
        ),
        "generated_by": GENERATED_BY,
        "tag": PLAYER_REF_TAG.decode("ascii"),
        "cases": cases,
    }


def _hmac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def render(vector: dict[str, object]) -> str:
    """Indented JSON, but each array of plain values (cards, picks, hex) on one line."""
    text = json.dumps(vector, indent=2, ensure_ascii=False)
    return _FLAT_ARRAY.sub(lambda match: "[" + _ITEM_BREAK.sub(", ", match[1]) + "]", text) + "\n"


_FLAT_ARRAY = re.compile(r"\[\s*([^\[\]{}]*?)\s*\]")
_ITEM_BREAK = re.compile(r",\s*\n\s*")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the fairness test vectors.")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    parser.add_argument(
        "--search-rejection",
        action="store_true",
        help="find the first seed whose 8-deck round rejects a word, instead of writing",
    )
    args = parser.parse_args(argv)
    if args.search_rejection:
        found = search_rejection()
        if found is None:
            print("no seed below the search limit rejects a word", file=sys.stderr)
            return 1
        print(f"index {found}: server seed {rejection_search_seed(found).hex()}")
        return 0
    stale = []
    documents = [(spec.file_name, build_vector(spec)) for spec in ALL_SPECS]
    documents.append((PLAYER_REF_FILE, build_player_ref_vector()))
    for file_name, document in documents:
        path = VECTOR_DIR / file_name
        text = render(document)
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path.name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    if stale:
        print(f"vectors differ from the code: {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
