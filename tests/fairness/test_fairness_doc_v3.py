"""docs/fairness.md on v3 held to arithmetic and to the code: the table of orderings against the
DRBG's 2**256 seeds (*Reachability with more than one deck*), the v3 seat bytes it quotes, and
the table of the shuffle's inputs against what the transcript hashes."""

from __future__ import annotations

import math
import re

from gnau_service.fairness import FairnessVersion, LockedSeat
from gnau_service.fairness.transcript import transcript_preimage
from tests.references import ref
from tests.schemas.doc_tables import doc_text, table

from .conftest import VECTOR_DIR, load_json

SEED_BITS = 256


def _log2_distinct_orderings(decks: int) -> float:
    """log2 of (52 d)! / (d!)^52: the orders of d decks' cards, identical cards not told apart."""
    cards = 52 * decks
    return (math.lgamma(cards + 1) - 52 * math.lgamma(decks + 1)) / math.log(2)


TIMES = "\N{MULTIPLICATION SIGN}"


def _number(text: str) -> float:
    """The log10 of a number the doc writes as a mantissa, the multiplication sign and a power
    of 10 in superscript digits (``8.07 x 10`` to the 67th)."""
    superscripts = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789")
    match = re.fullmatch(rf"([\d.]+) {TIMES} 10([⁰¹²³⁴⁵⁶⁷⁸⁹]+)", text)
    assert match, text
    return math.log10(float(match[1])) + int(match[2].translate(superscripts))


def test_the_orderings_table_is_the_arithmetic() -> None:
    rows = table("fairness.md", "orderings and seeds")
    assert [int(r["decks"]) for r in rows] == [1, 2, 8]
    for r in rows:
        decks = int(r["decks"])
        bits = _log2_distinct_orderings(decks)
        assert int(r["cards"]) == 52 * decks
        assert r["as a power of 2"] == f"2^{bits:.2f}"
        log10 = bits * math.log10(2)
        assert abs(_number(r["distinct orderings"]) - log10) < 0.005, r
        share = r["share of them one locked round can reach (2²⁵⁶ seeds)"]
        if bits < SEED_BITS:
            assert f"2^{SEED_BITS - bits:.2f} per ordering" in share
        else:
            assert share == f"at most 1 in 2^{bits - SEED_BITS:.2f}"
    # One deck: 52! itself (no identical cards), just under 2**226.
    assert math.factorial(52) < 2**226 < 2**SEED_BITS < math.factorial(104) // 2**52


def test_the_quoted_v3_seat_is_the_vectors() -> None:
    """The v3 seat the doc writes out byte by byte, and the transcript preimage's opening."""
    text = " ".join(doc_text("fairness.md").split())
    seat = "0000001c | 00000008 0000000000000001 | 0000000c 616c6963652773206c75636b"
    assert f"bytes `{seat}`: no stake" in text
    vector = load_json(VECTOR_DIR / "fairness-round-v3-1deck-4seats-stake-500.json")
    preimage = vector["intermediate"]["transcript_preimage"]
    assert re.sub(r"[ |]", "", seat) in preimage
    opening = re.search(r"`(0000001c 676e61\.\.\.76332f6c6f636b \| [^`]*)`", text)
    assert opening, "the v3 transcript preimage's opening"
    for part in opening[1].replace(" ...", "").split(" | "):
        for piece in part.split():
            for known in piece.split("..."):
                assert known in preimage, known


def test_the_inputs_table_names_what_the_v3_lock_hashes() -> None:
    """Each input the doc says enters the transcript changes the v3 preimage; a stake and a
    player reference, which it says do not, leave it as it was."""
    inputs = {r["input"] for r in table("fairness.md", "inputs of the shuffle")}
    assert inputs == {"server seed", "commitment", "seat numbers", "client seeds", "beacon"}
    seat = LockedSeat(1, ref("ann"), 100, client_seed=b"x")
    v3 = FairnessVersion.V3

    def preimage(*seats: LockedSeat) -> bytes:
        return transcript_preimage(bytes(32), seats, None, v3)

    base = preimage(seat)
    assert preimage(LockedSeat(2, ref("ann"), 100, client_seed=b"x")) != base
    assert preimage(LockedSeat(1, ref("ann"), 100, client_seed=b"y")) != base
    assert preimage(LockedSeat(1, ref("ann"), 2**63 - 1, client_seed=b"x")) == base
    assert preimage(LockedSeat(1, ref("bob"), 100, client_seed=b"x")) == base
