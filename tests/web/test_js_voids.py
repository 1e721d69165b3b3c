"""The page's receipt checks on the receipts of issue 37 written out by hand
(tests/independent/handmade_cases.py), under Node.js: a void after the deal is valid only when
it follows the reveal and pays each seat the better of its result and a refund, and nothing
else; a void of the old form only before the deal; an actor of a bad form fails the entries,
one of a good form or none passes; an operator that is no operator id, or that changes, appears
or disappears within the round, fails the entries. Each verdict and failing step is the one
written in the case. And the page shows what a void after the deal paid, its reason code, and
the round's operator."""

from __future__ import annotations

import json
from pathlib import Path

from tests.independent.handmade import VKEY
from tests.independent.handmade_cases import CASES, OPERATOR, A, B, round_document
from tests.web.nodejs import run_module_script

RECEIPT_MODULE = Path(__file__).parents[2] / "gnau_service" / "web" / "js" / "receipt.js"

VERIFY_ALL = """
import { summaryOf, verifyDocument } from %s;
let input = "";
for await (const chunk of process.stdin) input += chunk;
const { vkey, documents } = JSON.parse(input);
const verdicts = {};
for (const [name, text] of Object.entries(documents)) {
  try {
    const report = await verifyDocument(text, { vkeys: [vkey] });
    const { step = "", reason = "" } = report.failure ?? {};
    const seats = report.settlement?.seats ?? null;
    const paid = seats ? seats.map((seat) => String(seat.delta)) : null;
    verdicts[name] = {
      status: report.failure ? "INVALID" : "VALID",
      step,
      reason,
      state: report.state,
      voidReason: report.voidReason,
      paid,
      dealer: report.settlement ? String(report.settlement.dealerDelta) : null,
      operator: report.operator,
      summary: summaryOf(report),
    };
  } catch (error) {
    verdicts[name] = { status: "UNREADABLE", step: "", reason: String(error.message) };
  }
}
process.stdout.write(JSON.stringify(verdicts));
"""


def page_verdicts(documents: dict[str, str]) -> dict[str, dict[str, object]]:
    script = VERIFY_ALL % json.dumps(RECEIPT_MODULE.as_uri())
    found: dict[str, dict[str, object]] = run_module_script(
        script, {"vkey": VKEY, "documents": documents}
    )
    return found


def test_the_page_gives_every_receipt_its_written_verdict() -> None:
    documents, expected = {}, {}
    for case in CASES:
        log = case.log()
        for round_id, verdict in case.receipts.items():
            name = f"{case.name}, {round_id}"
            documents[name] = log.receipt(round_id, round_document(round_id))
            expected[name] = verdict
    found = page_verdicts(documents)
    assert {name: (v["status"], v["step"]) for name, v in found.items()} == expected, {
        name: v["reason"] for name, v in found.items() if (v["status"], v["step"]) != expected[name]
    }


def test_the_page_shows_what_a_void_after_the_deal_paid() -> None:
    log = CASES[0].log()
    found = page_verdicts(
        {"after the deal": log.receipt(A, round_document(A)), "before": log.receipt(B, None)}
    )
    after, before = found["after the deal"], found["before"]
    assert (after["status"], after["state"]) == ("VALID", "voided")
    assert after["voidReason"] == "PLATFORM_FAILURE: wallet timeout"
    assert (after["paid"], after["dealer"]) == (["100", "250", "0"], "-350")
    assert (before["status"], before["voidReason"], before["paid"]) == (
        "VALID",
        "the shoe was dropped",
        None,
    )


def test_the_page_shows_the_rounds_operator_or_none() -> None:
    log = CASES[0].log()
    found = page_verdicts(
        {"of an operator": log.receipt(A, round_document(A)), "older": log.receipt(B, None)}
    )
    named, older = found["of an operator"], found["older"]
    assert (named["status"], named["operator"]) == ("VALID", OPERATOR)
    assert str(named["summary"]).endswith(f"; operator {OPERATOR}")
    assert (older["status"], older["operator"]) == ("VALID", None)
    assert "operator" not in str(older["summary"])


def test_the_page_names_the_operator_that_changed() -> None:
    case = next(case for case in CASES if case.name == "the operator changed at the reveal")
    found = page_verdicts({"changed": case.log().receipt(A, round_document(A))})["changed"]
    assert (found["status"], found["step"]) == ("INVALID", "entries")
    assert found["reason"] == (
        f'round {A}: ROUND_REVEALED names operator "casino-b", its ROUND_COMMITTED operator '
        f'"{OPERATOR}": every entry of a round names the same operator, or none does'
    )
