"""The independent verifiers on what the docs themselves publish (the example log, checkpoint
and key of docs/audit.md, the example receipts, the fairness vectors), and its rules core held
to ``gnau evaluate`` and ``gnau settle`` run as commands on random hands; and the package's
independence: it imports nothing of the project."""

from __future__ import annotations

import ast
import hashlib
import hmac
import json
import random
import re
import sys
from pathlib import Path

import pytest

from tests.independent import fairness, rules
from tests.independent.bundle import verify_bundle
from tests.independent.common import VerificationError
from tests.independent.forge import write_bundle
from tests.independent.receipt import verify_receipt
from tests.serving import gnau

HERE = Path(__file__).parent
DOCS = HERE.parents[1] / "docs"
AUDIT = (DOCS / "audit.md").read_text(encoding="utf-8")


def doc_example(name: str) -> str:
    """The block after ``<!-- example: NAME -->`` in docs/audit.md."""
    match = re.search(rf"<!-- example: {name} -->\n```\w+\n(.*?)```", AUDIT, re.DOTALL)
    assert match, name
    return match.group(1)


EXAMPLE_KEY = doc_example("vkey").strip()


def example_bundle() -> bytes:
    """docs/audit.md's example log and checkpoint, as ``gnau audit export`` would write them."""
    header = {
        "format": "gnau-dealer/audit-bundle/v1",
        "origin": "gnau-dealer/example",
        "public_keys": [EXAMPLE_KEY],
        "first_index": 0,
        "size": 5,
        "left_frontier": [],
    }
    entries = [line.encode() for line in doc_example("entries").splitlines()]
    return write_bundle(header, [doc_example("checkpoint")], entries)


def test_the_example_log_of_audit_md_verifies(tmp_path: Path) -> None:
    verdict = verify_bundle(example_bundle(), EXAMPLE_KEY)
    assert (verdict.status, verdict.summary["settled"]) == ("VALID", 1), verdict
    path = tmp_path / "example.jsonl"
    path.write_bytes(example_bundle())
    assert gnau("audit", "verify", str(path), "--key", EXAMPLE_KEY).returncode == 0


def test_the_example_log_with_a_changed_byte_does_not() -> None:
    changed = example_bundle().replace(b'\\"stake\\":250', b'\\"stake\\":205')
    assert verify_bundle(changed, EXAMPLE_KEY).status == "INVALID"
    cut = b"\n".join(example_bundle().split(b"\n")[:-2])  # the last entry removed
    assert verify_bundle(cut, EXAMPLE_KEY).status == "INVALID"


@pytest.mark.parametrize("name", ["receipt.json", "receipt-v1.json"])
def test_the_example_receipts_verify(name: str) -> None:
    text = (DOCS / "schemas" / "examples" / name).read_text(encoding="utf-8")
    verdict = verify_receipt(text, [EXAMPLE_KEY])
    assert verdict.status == "VALID", verdict
    assert verdict.passed == ("fairness", "entries", "round", "outcome", "checkpoint", "inclusion")


VECTORS = sorted((DOCS / "vectors").glob("fairness-round-*.json"))


@pytest.mark.parametrize("path", VECTORS, ids=lambda p: p.stem)
def test_the_fairness_vectors_verify(path: Path) -> None:
    vector = json.loads(path.read_text(encoding="utf-8"))
    r = fairness.verify_revealed(vector["revealed_round"])
    drbg = vector["intermediate"]["drbg"]
    ours = fairness.HmacDrbg(r["server_seed"], r["transcript_hash"], fairness.tag("shuffle", 1))
    given = [bytes.fromhex(drbg[k]) for k in ("entropy_input", "nonce", "personalization_string")]
    assert given == [r["server_seed"], r["transcript_hash"], fairness.tag("shuffle", 1)]
    outputs = [ours.generate(64).hex() for _ in drbg["first_outputs"]]
    assert outputs == drbg["first_outputs"]


@pytest.mark.parametrize("path", VECTORS[:1] + VECTORS[-1:], ids=lambda p: p.stem)
def test_a_changed_vector_names_the_broken_link(path: Path) -> None:
    revealed = json.loads(path.read_text(encoding="utf-8"))["revealed_round"]
    seat = revealed["seats"][0]
    seat["client_seed"] = "fe" if seat["client_seed"] == "ff" else "ff"
    with pytest.raises(VerificationError, match=r"^lock"):
        fairness.verify_revealed(revealed)


@pytest.mark.parametrize("path", VECTORS, ids=lambda p: p.stem)
def test_a_changed_stake_breaks_the_lock_before_v3_only(path: Path) -> None:
    """docs/fairness.md, *Fairness versions*: v1 and v2 hash each stake, v3 none."""
    revealed = json.loads(path.read_text(encoding="utf-8"))["revealed_round"]
    revealed["seats"][0]["stake"] += 1
    if revealed["format"] == "gnau-dealer/revealed-round/v3":
        fairness.verify_revealed(revealed)
    else:
        with pytest.raises(VerificationError, match=r"^lock"):
            fairness.verify_revealed(revealed)


def test_the_player_reference_vector() -> None:
    vector = json.loads((DOCS / "vectors" / "player-ref-v1.json").read_text(encoding="utf-8"))
    tag = vector["tag"].encode()
    for case in vector["cases"]:
        message = fairness.frames(
            tag, case["round_id"].encode(), fairness.uint64(case["seat_number"])
        )
        digest = hmac.digest(bytes.fromhex(case["key"]), message, hashlib.sha256)
        assert (message.hex(), digest.hex()) == (case["hmac_input"], case["hmac_sha256"])
        assert "p-" + digest[:16].hex() == case["player_ref"]


# -- the rules core, against the service's commands -------------------------------------------

RULE_SETS = [
    {},
    {"ten_is_duke": True, "three_six_pair": True, "tie": "high_card", "suited_double": True},
    {"trips_make_ox": False, "five_small": False, "tie": "push", "payout": "multiplier"},
]
DECK = [rank + suit for suit in fairness.SUITS for rank in fairness.RANKS]
#: Hands rich in what the choices of docs/rules.md turn on: 3s and 6s, aces, dukes, tens.
RICH = [card for card in DECK if card[0] in "A36TJQK4"]


def _tables(seed: int, count: int) -> list[tuple[list[str], list[tuple[int, list[str], int]]]]:
    """Random tables of two decks: the dealer's hand, then (seat, hand, stake) for 1 to 4
    seats; some from a pool of rich cards, some of one suit."""
    rng = random.Random(seed)
    tables = []
    for _ in range(count):
        pool = rng.choice([DECK, RICH, [c for c in DECK if c[1] == "H"]]) * 2
        seats = sorted(rng.sample(range(1, 30), rng.randint(1, 4)))
        cards = rng.sample(pool, 5 * (len(seats) + 1))
        hands = [cards[5 * k + 5 : 5 * k + 10] for k in range(len(seats))]
        tables.append(
            (cards[:5], [(s, h, rng.randint(1, 999)) for s, h in zip(seats, hands, strict=True)])
        )
    return tables


def _rule_arguments(rule_set: dict[str, object]) -> list[str]:
    given = {**rule_set, "decks": 2}
    return [a for k, v in given.items() for a in ("--rule", f"{k}={fairness.value_text(v)}")]


@pytest.mark.parametrize("rule_set", RULE_SETS, ids=lambda r: ",".join(r) or "defaults")
def test_settlement_agrees_with_gnau_settle(rule_set: dict[str, object]) -> None:
    """Every evaluation member (readings and description included) and every outcome and
    delta, as the log's ROUND_SETTLED holds them, on 400 random tables."""
    tables = _tables(len(rule_set), 400)
    lines = [
        json.dumps(
            {
                "dealer": " ".join(dealer),
                "players": [{"seat": s, "cards": " ".join(h), "stake": k} for s, h, k in seats],
            }
        )
        for dealer, seats in tables
    ]
    run = gnau("settle", *_rule_arguments(rule_set), input="\n".join(lines))
    assert run.returncode == 0, run.stderr
    theirs = [json.loads(line) for line in run.stdout.splitlines()]
    house_rules = {**fairness.DEFAULTS, **rule_set, "decks": 2}
    ours = [
        rules.settle(
            house_rules,
            [{"seat_number": s, "stake": k} for s, _, k in seats],
            {s: h for s, h, _ in seats},
            dealer,
        )
        for dealer, seats in tables
    ]
    assert len(theirs) == len(ours)
    for our, their in zip(ours, theirs, strict=True):
        assert our == their


# -- independence ------------------------------------------------------------------------------

STANDARD = set(sys.stdlib_module_names)
ALLOWED = {"cryptography", "rfc8785", "tests"}


def test_the_verifiers_import_nothing_of_the_project() -> None:
    """Every module here but the tests imports the standard library, cryptography, rfc8785 and
    its own modules only."""
    for path in sorted(HERE.glob("*.py")):
        if path.name.startswith("test_"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            for name in names:
                top = name.split(".")[0]
                assert top in STANDARD | ALLOWED, f"{path.name} imports {name}"
                assert top != "tests" or name.startswith("tests.independent"), (path.name, name)
