"""The standalone receipt verifier of docs/receipts.md (*Verifying by hand*), run as a reader
would run it, beside the reference (``verify_receipt``, and ``gnau receipt verify``): on
receipts a real service served, valid, and tampered in every way a receipt can be. Each tampered
receipt must fail both at the step written here, by hand, from docs/receipts.md.

Some tampering needs the log key (a dishonest dealer logging a settlement the rules do not
give): those entries are signed with the service's own key, as the service would.
"""

from __future__ import annotations

import ast
import json
import random
import re
import subprocess
import sys
from collections.abc import Callable
from itertools import product
from pathlib import Path
from typing import Any

import pytest

from gnau_service.audit.entries import EntryKind, encode_entry
from gnau_service.audit.note import Verifier
from gnau_service.audit.receipts import Receipt, ReceiptFormatError, verify_receipt
from gnau_service.rules.cards import parse_cards, standard_deck
from gnau_service.rules.evaluation import Evaluator, class_multisets, class_representative
from gnau_service.rules.house_rules import HouseRules
from gnau_service.rules.settlement import PlayerHand, settle
from tests.conftest import Run
from tests.references import ref
from tests.schemas.example_receipts import (
    EXAMPLE_VKEY,
    V1_RECEIPT,
    V2_RECEIPT,
    V2_TAMPERINGS,
    reference_step,
    tampered_v2,
)
from tests.schemas.served import Served

Gnau = Callable[..., Run]

REPO_ROOT = Path(__file__).resolve().parents[2]
STEPS = ["fairness", "entries", "round", "outcome", "checkpoint", "inclusion", "consistency"]
_SNIPPET = re.compile(
    r"<!-- receipt-verifier:begin -->\s*```python\n(.*?)```\s*<!-- receipt-verifier:end -->",
    re.DOTALL,
)


def docs_script() -> str:
    match = _SNIPPET.search((REPO_ROOT / "docs" / "receipts.md").read_text(encoding="utf-8"))
    assert match, "docs/receipts.md lost its standalone verifier"
    return match[1]


Receipts = dict[str, Any]


def run_script(
    tmp_path: Path, receipt: Receipts | str, vkey: str, pin: str | None = None
) -> tuple[int, str]:
    """Run the docs' script in an isolated interpreter (no PYTHONPATH, no project on the path):
    its exit status and its output."""
    script = tmp_path / "verify_receipt.py"
    script.write_text(docs_script(), encoding="utf-8")
    document = tmp_path / "receipt.json"
    document.write_text(receipt if isinstance(receipt, str) else json.dumps(receipt), "utf-8")
    arguments = [sys.executable, "-I", str(script), str(document), vkey]
    if pin is not None:
        (tmp_path / "pin.txt").write_bytes(pin.encode())
        arguments.append(str(tmp_path / "pin.txt"))
    result = subprocess.run(
        arguments, capture_output=True, text=True, check=False, timeout=120, cwd=tmp_path
    )
    return result.returncode, (result.stdout + result.stderr).strip()


def script_step(output: str) -> str | None:
    match = re.search(r"INVALID at step (\w+): (.*)", output)
    return match[1] if match else None


def reference(receipt: Receipts, vkey: str, pin: str | None = None) -> tuple[str | None, str]:
    """The reference verdict: the failing step (None if valid) and the summary line."""
    report = verify_receipt(Receipt.from_json(receipt), [Verifier.from_vkey(vkey)], pin)
    return (None if report.failure is None else str(report.failure.step)), report.summary()


#: The many tampering tests run on the SQLite service's receipts only: a receipt's form does not
#: depend on the backend (the valid receipts of both are checked above them).
on_one_backend = pytest.mark.parametrize("served", ["sqlite"], indirect=True)


def load(served: Served, story: str) -> Receipts:
    loaded: Receipts = json.loads(served.receipts[story])
    return loaded


# -- what the script is ---------------------------------------------------------------------------


def test_the_script_needs_only_the_standard_library_and_cryptography() -> None:
    modules = set()
    for node in ast.walk(ast.parse(docs_script())):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            modules.add(node.module or "")
    roots = {module.split(".")[0] for module in modules}
    assert "cryptography" in roots
    assert roots - {"cryptography"} <= set(sys.stdlib_module_names), roots
    assert "gnau" not in docs_script().replace("gnau-dealer/", "")


def test_the_script_names_the_steps_of_the_reference_in_its_order() -> None:
    named = re.findall(r'step(?:, \w+)? = "(\w+)"', docs_script())
    assert named == STEPS


# -- valid receipts -------------------------------------------------------------------------------


def test_every_served_receipt_is_valid_to_both(served: Served, tmp_path: Path) -> None:
    assert len(served.receipts) == 13
    for story in served.receipts:
        receipt = load(served, story)
        step, summary = reference(receipt, served.vkey)
        assert step is None, summary
        status, output = run_script(tmp_path, receipt, served.vkey)
        assert status == 0, output
        assert output == (
            f"round {receipt['round_id']}: VALID: fairness, entries, round, outcome, checkpoint, "
            "inclusion"
        ), story


def test_a_receipt_with_a_pinned_checkpoint_is_valid_to_both(
    served: Served, tmp_path: Path
) -> None:
    receipt = json.loads(served.pinned_receipt)
    assert receipt["consistency"] is not None
    assert reference(receipt, served.vkey, served.pin)[0] is None
    status, output = run_script(tmp_path, receipt, served.vkey, served.pin)
    assert status == 0, output
    assert output.endswith("checkpoint, inclusion, consistency")


@pytest.mark.parametrize("path", [V2_RECEIPT, V1_RECEIPT], ids=["v2", "v1"])
def test_the_example_receipts_of_the_docs_are_valid_to_the_script(
    tmp_path: Path, path: Path
) -> None:
    """docs/schemas/examples/receipt.json (a fairness v2 round) and receipt-v1.json (as the
    service wrote receipts before player references), with the example key of docs/audit.md."""
    receipt = path.read_text("utf-8")
    version = json.loads(receipt)["round"]["format"].rpartition("/")[2]
    assert version == path.stem.rpartition("-")[2].replace("receipt", "v2")
    assert reference(json.loads(receipt), EXAMPLE_VKEY)[0] is None
    status, output = run_script(tmp_path, receipt, EXAMPLE_VKEY)
    assert status == 0, output
    tampered = json.loads(receipt)
    tampered["round"]["seats"][1]["stake"] += 1
    assert reference(tampered, EXAMPLE_VKEY)[0] == "fairness"
    assert script_step(run_script(tmp_path, tampered, EXAMPLE_VKEY)[1]) == "fairness"
    if version == "v1":
        tampered = json.loads(receipt)
        tampered["round"]["seats"][1]["player_id"] = "mallory"  # hashed into a v1 lock
        assert reference(tampered, EXAMPLE_VKEY)[0] == "fairness"
        assert ": lock:" in run_script(tmp_path, tampered, EXAMPLE_VKEY)[1]


@pytest.mark.parametrize("name", list(V2_TAMPERINGS))
def test_a_tampered_v2_receipt_fails_at_the_step_of_the_reference(
    tmp_path: Path, name: str
) -> None:
    receipt = tampered_v2()[name]
    step = V2_TAMPERINGS[name][1]
    assert reference_step(receipt) == step
    status, output = run_script(tmp_path, receipt, EXAMPLE_VKEY)
    assert (status, script_step(output)) == (1, step), output


def test_gnau_receipt_verify_agrees_on_a_valid_and_a_tampered_receipt(
    gnau: Gnau, served: Served, tmp_path: Path
) -> None:
    receipt = load(served, "settled")
    valid = tmp_path / "valid.json"
    valid.write_text(served.receipts["settled"], encoding="utf-8")
    receipt["round"]["seats"][0]["client_seed"] = "ff"
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(receipt), encoding="utf-8")
    outputs = []
    for path in (valid, tampered):
        result = gnau("receipt", "verify", str(path), "--key", served.vkey)
        outputs.append((result.status, result.out))
    assert outputs[0][0] == 0 and "VALID (settled)" in outputs[0][1]
    assert outputs[1][0] == 1 and "INVALID at step fairness: lock:" in outputs[1][1]
    status, output = run_script(tmp_path, receipt, served.vkey)
    assert (status, script_step(output)) == (1, "fairness") and ": lock:" in output


# -- tampered receipts ----------------------------------------------------------------------------


def _flip_hex(text: str, position: int) -> str:
    digit = text[position]
    return text[:position] + ("0" if digit != "0" else "1") + text[position + 1 :]


def _flip_signature(entry: str) -> str:
    return _flip_hex(entry, entry.index('"signature":"') + len('"signature":"') + 20)


def _flip_base64(text: str, position: int) -> str:
    char = text[position]
    return text[:position] + ("B" if char != "B" else "C") + text[position + 1 :]


def _entry_of(receipt: Receipts, kind: str) -> dict[str, Any]:
    for item in receipt["entries"]:
        if json.loads(item["entry"])["kind"] == kind:
            found: dict[str, Any] = item
            return found
    raise AssertionError(f"no {kind} entry")


def _forge(
    served: Served,
    receipt: Receipts,
    kind: str,
    change: Callable[[Any], None],
    key_vkey: str | None = None,
) -> None:
    """Re-sign the round's ``kind`` entry, its payload changed, with the log's real key (or
    the key of ``key_vkey``): what a dishonest dealer holding the key could log."""
    item = _entry_of(receipt, kind)
    entry = json.loads(item["entry"])
    change(entry["payload"])
    signer = (
        served.signers[entry["key_id"]]
        if key_vkey is None
        else next(signer for signer in served.signers.values() if signer.vkey == key_vkey)
    )
    data = encode_entry(
        signer.signer,
        index=entry["index"],
        kind=EntryKind(entry["kind"]),
        time=entry["time"],
        payload=entry["payload"],
        prev_hash=entry["prev_hash"],
        round_id=entry["round_id"],
    )
    item["entry"] = data.decode("utf-8")


def _retired_key_resigns(served: Served, receipt: Receipts) -> None:
    """The key the log rotated away from, stolen, re-signs an entry of a later round as it
    stands: the signature verifies, but that key was not the log's at the entry's time."""
    _forge(served, receipt, "ROUND_DEALT", lambda payload: None, key_vkey=served.vkey)


def _swap(cards: list[str], first: int, second: int) -> None:
    cards[first], cards[second] = cards[second], cards[first]


def _checkpoint_line(receipt: Receipts, line: int, edit: Callable[[str], str]) -> None:
    lines = receipt["checkpoint"].split("\n")
    lines[line] = edit(lines[line])
    receipt["checkpoint"] = "\n".join(lines)


def _resize(text: str) -> str:
    return str(int(text) + 1)


def _other_player(payload: dict[str, Any]) -> None:
    seat = payload["seats"][0]
    if "player_ref" in seat:  # a v2 round: another well-formed reference, which is not hashed
        seat["player_ref"] = ref("mallory")
    else:
        seat["player_id"] = "mallory"


def _paid_more(payload: dict[str, Any]) -> None:
    payload["players"][0]["delta"] += 1
    payload["dealer"]["delta"] -= 1


def _described_otherwise(payload: dict[str, Any]) -> None:
    payload["dealer"]["description"] += " "


def _other_seed(payload: dict[str, Any]) -> None:
    payload["server_seed"] = _flip_hex(payload["server_seed"], 5)


def _drop_reveal(receipt: Receipts) -> None:
    receipt["entries"].remove(_entry_of(receipt, "ROUND_REVEALED"))


def _swap_entries(receipt: Receipts) -> None:
    _swap(receipt["entries"], 1, 2)


#: (why, the served round's story, the tampering, the step docs/receipts.md says fails, and for
#: the fairness step the link it names).
Tampering = Callable[[Receipts, Served], None]
TAMPERINGS: list[tuple[str, str, Tampering, str, str]] = [
    (
        "a card of a hand in round",
        "settled",
        lambda r, s: _swap(r["round"]["hands"][0]["cards"], 0, 1),
        "fairness",
        "hand of seat 1",
    ),
    (
        "a card of the deck in round",
        "settled",
        lambda r, s: _swap(r["round"]["deck"], -1, -2),
        "fairness",
        "deck",
    ),
    (
        "the dealer's hand in round",
        "settled",
        lambda r, s: _swap(r["round"]["dealer_hand"], 0, 4),
        "fairness",
        "dealer hand",
    ),
    (
        # A v2 lock hashes the stakes.
        "a stake in a v2 round",
        "v2_settled",
        lambda r, s: r["round"]["seats"][1].update(stake=r["round"]["seats"][1]["stake"] * 10),
        "fairness",
        "lock",
    ),
    (
        # A v3 lock does not: the signed ROUND_DEALT entry binds the stake (step round).
        "a stake in a v3 round",
        "settled",
        lambda r, s: r["round"]["seats"][1].update(stake=r["round"]["seats"][1]["stake"] * 10),
        "round",
        "",
    ),
    (
        "a client seed in round",
        "settled",
        lambda r, s: r["round"]["seats"][0].update(client_seed=""),
        "fairness",
        "lock",
    ),
    (
        "the seed in round",
        "settled",
        lambda r, s: r["round"].update(server_seed=_flip_hex(r["round"]["server_seed"], 0)),
        "fairness",
        "commitment",
    ),
    (
        "a house rule in round",
        "settled",
        lambda r, s: r["round"]["house_rules"].update(tie="push"),
        "fairness",
        "commitment",
    ),
    (
        "another round's round",
        "settled",
        lambda r, s: r.update(round=json.loads(s.receipts["settled_after_rotation"])["round"]),
        "fairness",
        "",
    ),
    (
        "a hex digit of an entry's signature",
        "settled",
        lambda r, s: r["entries"][1].update(entry=_flip_signature(r["entries"][1]["entry"])),
        "entries",
        "",
    ),
    (
        "a stake in a logged entry",
        "settled",
        lambda r, s: r["entries"][1].update(
            entry=r["entries"][1]["entry"].replace('"stake":250', '"stake":2500')
        ),
        "entries",
        "",
    ),
    (
        "an entry listed at another index",
        "settled",
        lambda r, s: r["entries"][0].update(index=r["entries"][0]["index"] + 1),
        "entries",
        "",
    ),
    ("the reveal left out", "settled", lambda r, s: _drop_reveal(r), "entries", ""),
    ("two entries swapped", "settled", lambda r, s: _swap_entries(r), "entries", ""),
    (
        "the key rotation left out",
        "settled_after_rotation",
        lambda r, s: r.update(key_rotations=[]),
        "entries",
        "",
    ),
    (
        "an entry re-signed by the retired key",
        "settled_after_rotation",
        lambda r, s: _retired_key_resigns(s, r),
        "entries",
        "",
    ),
    (
        "a deal logged with another player",
        "settled",
        lambda r, s: _forge(s, r, "ROUND_DEALT", _other_player),
        "round",
        "",
    ),
    (
        "a void logged with another seed after the deal",
        "voided_dealt",
        lambda r, s: _forge(s, r, "ROUND_VOIDED", _other_seed),
        "round",
        "",
    ),
    (
        "a dealt round's receipt without its round",
        "voided_dealt",
        lambda r, s: r.update(round=None),
        "round",
        "",
    ),
    (
        "a settlement logged paying a seat more",
        "settled",
        lambda r, s: _forge(s, r, "ROUND_SETTLED", _paid_more),
        "outcome",
        "",
    ),
    (
        "a settlement logged with another description",
        "settled_all_rules",
        lambda r, s: _forge(s, r, "ROUND_SETTLED", _described_otherwise),
        "outcome",
        "",
    ),
    (
        "a void logged with another seed before the deal",
        "voided_shuffled",
        lambda r, s: _forge(s, r, "ROUND_VOIDED", _other_seed),
        "outcome",
        "",
    ),
    (
        "the root line of the checkpoint",
        "settled",
        lambda r, s: _checkpoint_line(r, 2, lambda line: _flip_base64(line, 10)),
        "checkpoint",
        "",
    ),
    (
        "the size line of the checkpoint",
        "settled",
        lambda r, s: _checkpoint_line(r, 1, _resize),
        "checkpoint",
        "",
    ),
    (
        "the signature line of the checkpoint",
        "settled",
        lambda r, s: _checkpoint_line(r, 4, lambda line: _flip_base64(line, 40)),
        "checkpoint",
        "",
    ),
    (
        "the checkpoint of another log",
        "settled",
        lambda r, s: r.update(
            checkpoint=r["checkpoint"].replace("gnau-dealer/local", "gnau-dealer/x")
        ),
        "checkpoint",
        "",
    ),
    (
        "a proof hash",
        "settled",
        lambda r, s: r["entries"][0]["inclusion_proof"].__setitem__(
            0, _flip_hex(r["entries"][0]["inclusion_proof"][0], 7)
        ),
        "inclusion",
        "",
    ),
    (
        "a proof hash left out",
        "voided_revealed",
        lambda r, s: r["entries"][2]["inclusion_proof"].pop(),
        "inclusion",
        "",
    ),
]


@on_one_backend
@pytest.mark.parametrize("case", TAMPERINGS, ids=[case[0] for case in TAMPERINGS])
def test_a_tampered_receipt_fails_both_at_the_same_step(
    served: Served, tmp_path: Path, case: tuple[str, str, Tampering, str, str]
) -> None:
    _, story, tamper, step, link = case
    receipt = load(served, story)
    assert reference(receipt, served.vkey)[0] is None
    tamper(receipt, served)
    assert receipt != load(served, story), "the tampering changed nothing"
    found, summary = reference(receipt, served.vkey)
    assert found == step, summary
    status, output = run_script(tmp_path, receipt, served.vkey)
    assert (status, script_step(output)) == (1, step), output
    if link:
        assert f"INVALID at step fairness: {link}:" in summary
        assert f"INVALID at step fairness: {link}:" in output


PIN_TAMPERINGS: list[tuple[str, Callable[[Receipts, str], str]]] = [
    (
        "a hash of the consistency proof",
        lambda r, pin: (
            r["consistency"]["proof"].__setitem__(0, _flip_hex(r["consistency"]["proof"][0], 3))
            or pin
        ),
    ),
    ("a pin with CRLF line ends", lambda r, pin: pin.replace("\n", "\r\n")),
    ("a pin with another root", lambda r, pin: pin.replace(pin.split("\n")[2], "A" * 43 + "=")),
]


@on_one_backend
@pytest.mark.parametrize(("why", "tamper"), PIN_TAMPERINGS, ids=[t[0] for t in PIN_TAMPERINGS])
def test_a_receipt_and_a_pin_that_disagree_fail_both_at_consistency(
    served: Served, tmp_path: Path, why: str, tamper: Callable[[Receipts, str], str]
) -> None:
    receipt = json.loads(served.pinned_receipt)
    pin = tamper(receipt, served.pin)
    found, summary = reference(receipt, served.vkey, pin)
    assert found == "consistency", summary
    status, output = run_script(tmp_path, receipt, served.vkey, pin)
    assert (status, script_step(output)) == (1, "consistency"), output


@on_one_backend
@pytest.mark.parametrize("lacking", ["no proof", "a proof from another size"])
def test_a_receipt_without_the_pins_proof_cannot_be_checked_by_either(
    served: Served, tmp_path: Path, lacking: str
) -> None:
    receipt = json.loads(served.pinned_receipt)
    if lacking == "no proof":
        receipt["consistency"] = None
    else:
        receipt["consistency"]["first_size"] -= 1
    report = verify_receipt(
        Receipt.from_json(receipt), [Verifier.from_vkey(served.vkey)], served.pin
    )
    assert report.failure is None and report.unchecked is not None, report.summary()
    assert str(report.unchecked.step) == "consistency"
    status, output = run_script(tmp_path, receipt, served.vkey, served.pin)
    assert status == 2 and "CANNOT CHECK step consistency" in output, output
    assert script_step(output) is None


def test_another_pinned_key_fails_both_at_entries(served: Served, tmp_path: Path) -> None:
    receipt = load(served, "settled")
    other = next(signer.vkey for signer in served.signers.values() if signer.vkey != served.vkey)
    # The key the log rotated to, pinned for a round signed before the rotation.
    assert reference(receipt, other)[0] == "entries"
    status, output = run_script(tmp_path, receipt, other)
    assert (status, script_step(output)) == (1, "entries"), output


UNREADABLE: list[tuple[str, Callable[[Receipts], object]]] = [
    ("another format", lambda r: r.update(format="gnau-dealer/round-receipt/v2")),
    ("a member left out", lambda r: r.pop("consistency")),
    ("five entries", lambda r: r["entries"].append(r["entries"][0])),
    ("a proof hash of 63 digits", lambda r: r["entries"][0]["inclusion_proof"].append("a" * 63)),
    ("a round that is a list", lambda r: r.update(round=[])),
]


@on_one_backend
@pytest.mark.parametrize(("why", "tamper"), UNREADABLE, ids=[t[0] for t in UNREADABLE])
def test_a_document_that_is_not_a_receipt_is_unreadable_to_both(
    served: Served, tmp_path: Path, why: str, tamper: Callable[[Receipts], object]
) -> None:
    receipt = load(served, "settled")
    tamper(receipt)
    with pytest.raises(ReceiptFormatError):
        Receipt.from_json(receipt)
    status, output = run_script(tmp_path, receipt, served.vkey)
    assert status == 2, output


def test_a_member_given_twice_is_unreadable_to_both(served: Served, tmp_path: Path) -> None:
    text = served.receipts["settled"].replace('"round_id": ', '"round_id": "r-0", "round_id": ', 1)
    with pytest.raises(ReceiptFormatError):
        Receipt.from_text(text)
    status, output = run_script(tmp_path, text, served.vkey)
    assert status == 2, output


# -- the script's rules of the game, against the rules core ---------------------------------------


@pytest.fixture(scope="module")
def script_functions() -> dict[str, Any]:
    """The script's functions, loaded without running it as a program."""
    namespace: dict[str, Any] = {"__name__": "verify_receipt"}
    exec(compile(docs_script(), "verify_receipt.py", "exec"), namespace)
    return namespace


RULE_FLAGS = ["ten_is_duke", "three_six_pair", "trips_make_ox", "five_small"]


def _rules(**values: object) -> dict[str, Any]:
    return dict(HouseRules.from_mapping(values).as_dict())


def test_the_script_evaluates_every_class_of_hand_as_the_rules_core(
    script_functions: dict[str, Any],
) -> None:
    """Every multiset of ranks (the Ace of Spades apart) under the default rules, and 300 of
    them under each other setting of the rules that change evaluation: the whole evaluation,
    readings and description included."""
    evaluate = script_functions["evaluate"]
    every = list(class_multisets())
    generator = random.Random(5)
    for flags in product([False, True], repeat=len(RULE_FLAGS)):
        rules = _rules(**dict(zip(RULE_FLAGS, flags, strict=True)), decks=5)
        default = rules == _rules(decks=5)
        evaluator = Evaluator(HouseRules.from_mapping(rules))
        for classes in every if default else generator.sample(every, 300):
            cards = tuple(class_representative(c) for c in classes)
            expected = evaluator.evaluate(cards).to_json()
            assert evaluate([str(card) for card in cards], rules) == expected, (flags, cards)


def test_the_script_settles_random_tables_as_the_rules_core(
    script_functions: dict[str, Any],
) -> None:
    """Random deals, of shuffled cards in shuffled order, under random house rules."""
    generator = random.Random(20261129)
    for _ in range(1500):
        rules = _rules(
            **{flag: generator.random() < 0.5 for flag in RULE_FLAGS},
            tie=generator.choice(["dealer", "push", "high_card"]),
            payout=generator.choice(["points", "multiplier"]),
            suited_double=generator.random() < 0.5,
            decks=generator.choice([1, 2, 8]),
        )
        shoe = [str(card) for card in standard_deck(rules["decks"])]
        generator.shuffle(shoe)
        seats = generator.randint(1, 9)
        stakes = [generator.randint(1, 10**6) for _ in range(seats)]
        round_ = {
            "house_rules": rules,
            "seats": [{"seat_number": n + 1, "stake": stakes[n]} for n in range(seats)],
            "hands": [
                {"seat_number": n + 1, "cards": shoe[5 * n : 5 * n + 5]} for n in range(seats)
            ],
            "dealer_hand": shoe[5 * seats : 5 * seats + 5],
        }
        expected = settle(
            parse_cards(round_["dealer_hand"]),
            [
                PlayerHand(n + 1, parse_cards(shoe[5 * n : 5 * n + 5]), stakes[n])
                for n in range(seats)
            ],
            HouseRules.from_mapping(rules),
        ).to_json()
        assert script_functions["settle"](round_) == expected, round_


def test_the_script_keeps_the_reference_description_of_identical_threes(
    script_functions: dict[str, Any],
) -> None:
    """With two decks, two 3C may count 6 and 3; the reference's description shows the first
    one's points for both (docs/receipts.md says so), and the script must do the same."""
    rules = _rules(decks=2)
    cards = ["3C", "3C", "AD", "KH", "QS"]
    expected = Evaluator(HouseRules.from_mapping(rules)).evaluate(parse_cards(cards)).to_json()
    assert expected["points"] == [6, 3, 1, 10, 10]
    assert expected["description"] == "Single-Ox 0  ox 3C(6) 3C(6) AD  power KH QS"
    assert script_functions["evaluate"](cards, rules) == expected


def test_gnau_receipt_verify_shows_a_players_own_seat(gnau: Gnau, tmp_path: Path) -> None:
    """--seat: a player finds their seat of a valid receipt by reference or seat number (v2),
    or by player id (v1); nothing is shown of an invalid receipt, or of a seat not there."""
    v2 = json.loads(V2_RECEIPT.read_text("utf-8"))
    seat = v2["round"]["seats"][1]
    settled = json.loads(v2["entries"][-1]["entry"])["payload"]["players"]
    result = next(item for item in settled if item["seat"] == seat["seat_number"])
    expected = (
        f"seat {seat['seat_number']}: reference {seat['player_ref']}, stake {seat['stake']}, "
        f"{result['outcome']}, delta {result['delta']:+d}"
    )
    for query in (seat["player_ref"], seat["player_ref"].upper().replace("P-", "p-"), "2"):
        run = gnau("receipt", "verify", str(V2_RECEIPT), "--key", EXAMPLE_VKEY, "--seat", query)
        assert run.status == 0, run.err
        assert run.out.splitlines()[1:] == [expected], run.out
    absent = gnau(
        "receipt", "verify", str(V2_RECEIPT), "--key", EXAMPLE_VKEY, "--seat", "p-" + "0" * 32
    )
    assert absent.status == 1 and "no seat of this round" in absent.out
    v1 = json.loads(V1_RECEIPT.read_text("utf-8"))["round"]["seats"][0]
    run = gnau(
        "receipt", "verify", str(V1_RECEIPT), "--key", EXAMPLE_VKEY, "--seat", v1["player_id"]
    )
    assert run.status == 0 and f"seat {v1['seat_number']}: player {v1['player_id']}," in run.out
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(tampered_v2()["another well-formed reference"]), "utf-8")
    run = gnau("receipt", "verify", str(tampered), "--key", EXAMPLE_VKEY, "--seat", "1")
    assert run.status == 1 and "INVALID at step round" in run.out
    assert "seat 1:" not in run.out
