"""The independent verifiers on the logs of issue 37 written out by hand (handmade_cases.py):
voids after the deal that pay every seat the better of its result and a refund, and nothing
else; voids of the old form, valid before the deal only; actors of every form, and of none;
the new entry kinds. Each verdict, and each failing step, is written in the case."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.independent.bundle import verify_bundle
from tests.independent.handmade import DEALT_ROUND, VKEY, VOID_RESULT
from tests.independent.handmade_cases import (
    CASES,
    FAIR_PAID,
    OPERATOR,
    RESULT_DELTAS,
    A,
    B,
    Case,
    find,
    round_document,
    story,
)
from tests.independent.receipt import verify_receipt
from tests.independent.test_live_rounds import commands


def test_the_void_result_is_the_settlement_of_the_vector() -> None:
    """The handmade result is the vector's round settled: the deltas the cases are written
    from, and the hands of the dealt round."""
    deltas = [p["delta"] for p in VOID_RESULT["players"]], VOID_RESULT["dealer"]["delta"]
    assert deltas == RESULT_DELTAS
    hands = {h["seat_number"]: h["cards"] for h in DEALT_ROUND["hands"]}
    assert {p["seat"]: p["cards"] for p in VOID_RESULT["players"]} == hands
    assert VOID_RESULT["dealer"]["cards"] == DEALT_ROUND["dealer_hand"]
    assert [p["stake"] for p in FAIR_PAID["players"]] == [s["stake"] for s in DEALT_ROUND["seats"]]


def test_the_story_holds_every_new_form() -> None:
    listed = story()
    kinds = {kind for kind, _, _ in listed}
    assert {"SERVICE_STOPPED", "TOKENS_CHANGED", "PLAYER_FORGOTTEN", "CONFIG_CHANGED"} <= kinds
    assert "software" in find(listed, "ROUND_DEALT", DEALT_ROUND["round_id"])
    assert all(
        "actor" in payload
        for kind, round_id, payload in listed
        if round_id != "table-1/round-000001"
    )
    # Round A and the forget name their operator; round B was logged before operators.
    assert [payload.get("operator") for _, round_id, payload in listed if round_id != B] == [
        None,
        None,
        OPERATOR,
        OPERATOR,
        OPERATOR,
        OPERATOR,
        OPERATOR,
        None,
        None,
    ]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_bundle_verifier(case: Case) -> None:
    verdict = verify_bundle(case.log().bundle, VKEY)
    assert verdict.status == case.bundle, verdict.reason


@pytest.mark.parametrize(
    ("case", "round_id"),
    [(case, round_id) for case in CASES for round_id in case.receipts],
    ids=[f"{case.name}, {round_id}" for case in CASES for round_id in case.receipts],
)
def test_the_receipt_verifier(case: Case, round_id: str) -> None:
    receipt = case.log().receipt(round_id, round_document(round_id))
    verdict = verify_receipt(receipt, [VKEY])
    assert (verdict.status, verdict.step) == case.receipts[round_id], verdict.reason


def test_a_void_after_the_deal_has_its_receipt_of_four_entries() -> None:
    round_id = DEALT_ROUND["round_id"]
    receipt = json.loads(CASES[0].log().receipt(round_id, round_document(round_id)))
    kinds = [json.loads(item["entry"])["kind"] for item in receipt["entries"]]
    assert kinds == ["ROUND_COMMITTED", "ROUND_DEALT", "ROUND_REVEALED", "ROUND_VOIDED"]


def test_the_services_commands_give_the_same_verdicts(tmp_path: Path) -> None:
    """``gnau audit verify`` and ``gnau receipt verify`` (the service's readers) on the same
    hand-made logs: the written verdicts, and the same failing step of a receipt."""
    calls, expected = [], []
    for n, case in enumerate(CASES):
        log = case.log()
        bundle = tmp_path / f"bundle-{n}.jsonl"
        bundle.write_bytes(log.bundle)
        calls.append(["audit", "verify", str(bundle), "--key", VKEY, "--jobs", "1"])
        expected.append((case.name, 0 if case.bundle == "VALID" else 1, ""))
        for round_id, (status, step) in case.receipts.items():
            receipt = tmp_path / f"receipt-{n}-{len(calls)}.json"
            receipt.write_text(log.receipt(round_id, round_document(round_id)), "utf-8")
            calls.append(["receipt", "verify", str(receipt), "--key", VKEY])
            failing = f"INVALID at step {step}:" if step else ""
            expected.append((f"{case.name}, {round_id}", 0 if status == "VALID" else 1, failing))
    found = commands(calls)
    wrong = [
        (name, status, output.strip()[-300:])
        for (name, status, failing), (got, output) in zip(expected, found, strict=True)
        if got != status or failing not in output
    ]
    assert not wrong, wrong


def test_a_valid_receipt_names_its_rounds_operator_or_none() -> None:
    log = CASES[0].log()
    of_a = verify_receipt(log.receipt(A, round_document(A)), [VKEY])
    of_b = verify_receipt(log.receipt(B, None), [VKEY])
    assert (of_a.status, of_a.operator) == ("VALID", OPERATOR)
    assert (of_b.status, of_b.operator) == ("VALID", None)


@pytest.mark.parametrize(
    "name",
    [
        "the operator changed at the reveal",
        "the deal naming no operator",
        "an old round's void naming an operator",
        "an operator in capitals",
        "an operator that is a number",
    ],
)
def test_a_receipt_is_refused_for_its_operator(name: str) -> None:
    case = next(case for case in CASES if case.name == name)
    ((round_id, _),) = case.receipts.items()
    verdict = verify_receipt(case.log().receipt(round_id, round_document(round_id)), [VKEY])
    assert "operator" in verdict.reason, verdict.reason


def test_gnau_receipt_verify_names_the_rounds_operator(tmp_path: Path) -> None:
    log = CASES[0].log()
    calls = []
    for round_id, document in ((A, round_document(A)), (B, None)):
        receipt = tmp_path / f"receipt-{len(calls)}.json"
        receipt.write_text(log.receipt(round_id, document), "utf-8")
        calls.append(["receipt", "verify", str(receipt), "--key", VKEY])
    (status_a, of_a), (status_b, of_b) = commands(calls)
    assert status_a == 0 and of_a.strip().endswith(f"; operator {OPERATOR}"), of_a
    assert status_b == 0 and "operator" not in of_b, of_b
