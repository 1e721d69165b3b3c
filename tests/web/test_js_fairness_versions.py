"""The page's modules on every fairness version, under Node.js: every fairness vector (v1, v2
and v3) verifies with ``fairness.js``, a v3 round with another stake too, a v2 round so changed
or a round read as another version not; both example receipts (v2 ``receipt.json``, v1
``receipt-v1.json``) verify with ``receipt.js``; each tampered v2 receipt fails at the step the
Python reference names; and ``findSeat`` finds a player's seat by reference or seat number."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fairness.conftest import FAIRNESS_VECTORS, load_json
from tests.references import ref
from tests.schemas.example_receipts import (
    EXAMPLE_VKEY,
    V1_RECEIPT,
    V2_RECEIPT,
    V2_TAMPERINGS,
    reference_step,
    tampered_v2,
)
from tests.web.nodejs import run_module_script

JS = Path(__file__).parents[2] / "gnau_service" / "web" / "js"

VERIFY_ALL = """
import { verifyDocument } from %(receipt)s;
let input = "";
for await (const chunk of process.stdin) input += chunk;
const { vkey, documents } = JSON.parse(input);
const verdicts = {};
for (const [name, text] of Object.entries(documents)) {
  try {
    const report = await verifyDocument(text, { vkeys: [vkey] });
    const version = report.round ? report.round.version : null;
    const { step = null, reason = "" } = report.failure ?? {};
    verdicts[name] = { step, reason, version };
  } catch (error) {
    verdicts[name] = { step: "unreadable", reason: String(error.message), version: null };
  }
}
process.stdout.write(JSON.stringify(verdicts));
"""

FIND_SEATS = """
import { findSeat, readRevealedRound } from %(fairness)s;
let input = "";
for await (const chunk of process.stdin) input += chunk;
const { rounds, queries } = JSON.parse(input);
const found = rounds.map((document) => {
  const round = readRevealedRound(document);
  return queries.map((query) => findSeat(round, query)?.seat_number ?? null);
});
process.stdout.write(JSON.stringify(found));
"""


def verdicts(documents: dict[str, str]) -> dict[str, dict[str, object]]:
    script = VERIFY_ALL % {"receipt": json.dumps((JS / "receipt.js").as_uri())}
    found: dict[str, dict[str, object]] = run_module_script(
        script, {"vkey": EXAMPLE_VKEY, "documents": documents}
    )
    return found


def test_every_fairness_vector_of_every_version_verifies() -> None:
    documents = {
        path.name: json.dumps(load_json(path)["revealed_round"]) for path in FAIRNESS_VECTORS
    }
    found = verdicts(documents)
    versions = {name: verdict["version"] for name, verdict in found.items()}
    assert sorted(set(versions.values())) == [1, 2, 3], versions
    assert all(verdict["step"] is None for verdict in found.values()), found


def _first_of(version: int) -> dict[str, object]:
    path = next(
        path
        for path in FAIRNESS_VECTORS
        if load_json(path)["revealed_round"]["format"].endswith(f"/v{version}")
    )
    revealed: dict[str, object] = load_json(path)["revealed_round"]
    return revealed


def test_a_stake_moves_no_v3_card_but_breaks_a_v2_lock() -> None:
    """docs/fairness.md, *What the lock covers*: a v3 stake is not locked, a v2 stake is; and a
    round read as another version breaks its commitment."""
    documents = {}
    for version in (2, 3):
        changed: Any = _first_of(version)
        changed["seats"][0]["stake"] += 1
        documents[f"v{version} stake"] = json.dumps(changed)
        relabelled: Any = _first_of(version)
        relabelled["format"] = f"gnau-dealer/revealed-round/v{5 - version}"
        documents[f"v{version} read as v{5 - version}"] = json.dumps(relabelled)
    found = verdicts(documents)
    assert found["v3 stake"] == {"step": None, "reason": "", "version": 3}
    assert found["v2 stake"]["step"] == "fairness"
    assert "lock" in str(found["v2 stake"]["reason"])
    for name in ("v2 read as v3", "v3 read as v2"):
        assert found[name]["step"] == "fairness", (name, found[name])
        assert "commitment" in str(found[name]["reason"]), (name, found[name])


def test_both_example_receipts_verify_and_tampered_v2_ones_fail_where_the_reference_does() -> None:
    documents = {
        "v2": V2_RECEIPT.read_text(encoding="utf-8"),
        "v1": V1_RECEIPT.read_text(encoding="utf-8"),
    }
    tampered = tampered_v2()
    documents |= {name: json.dumps(receipt) for name, receipt in tampered.items()}
    found = verdicts(documents)
    assert found["v2"] == {"step": None, "reason": "", "version": 2}
    assert found["v1"] == {"step": None, "reason": "", "version": 1}
    for name, (_, step) in V2_TAMPERINGS.items():
        assert reference_step(tampered[name]) == step, name
        assert found[name]["step"] == step, (name, found[name])
    assert "lock:" in str(found["a stake"]["reason"])
    assert "player reference" in str(found["a player id for a reference"]["reason"])
    assert "seats differs" in str(found["another well-formed reference"]["reason"])


def test_a_player_finds_their_seat_by_reference_or_seat_number() -> None:
    v2 = json.loads(V2_RECEIPT.read_text(encoding="utf-8"))["round"]
    v1 = json.loads(V1_RECEIPT.read_text(encoding="utf-8"))["round"]
    second = v2["seats"][1]
    queries = [
        second["player_ref"],
        f"  {second['player_ref'].upper().replace('P-', 'p-')} ",  # pasted with spaces, in caps
        str(second["seat_number"]),
        ref("nobody"),
        "999",
        v1["seats"][1]["player_id"],
        "",
    ]
    script = FIND_SEATS % {"fairness": json.dumps((JS / "fairness.js").as_uri())}
    found = run_module_script(script, {"rounds": [v2, v1], "queries": queries})
    number = second["seat_number"]
    assert found[0] == [number, number, number, None, None, None, None]
    # A v1 round's seats name player ids: found by the id as the platform sent it.
    assert found[1][2] == number and found[1][5] == v1["seats"][1]["seat_number"]
    assert found[1][0] is None
