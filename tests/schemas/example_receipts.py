"""The example receipts of docs/schemas/examples/ (a fairness v2 round, ``receipt.json``, and the
v1 receipt the service wrote before player references, ``receipt-v1.json``), and tamperings of
the v2 one that every verifier (``gnau receipt verify``, the standalone script of
docs/receipts.md, the page) must refuse at the same step.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gnau_service.audit.entries import decode_entry, encode_entry
from gnau_service.audit.note import Verifier
from gnau_service.audit.receipts import Receipt, verify_receipt
from tests.audit.doc_examples import signer
from tests.references import ref

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "schemas" / "examples"
#: The example key of docs/audit.md, which signed the example log.
EXAMPLE_VKEY = "gnau-dealer/example+ce9c202d+AQOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4"
V2_RECEIPT = EXAMPLES / "receipt.json"
V1_RECEIPT = EXAMPLES / "receipt-v1.json"

#: The example key's signer, to sign entries a dishonest key holder would write.
EXAMPLE_SIGNER = signer().signer

Receipts = dict[str, Any]


def load_example(path: Path) -> Receipts:
    loaded: Receipts = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def reference_step(receipt: Receipts, vkey: str = EXAMPLE_VKEY) -> str | None:
    """The step ``gnau receipt verify``'s reference fails the receipt at; None if valid."""
    report = verify_receipt(Receipt.from_json(receipt), [Verifier.from_vkey(vkey)])
    return None if report.failure is None else str(report.failure.step)


def _stake(receipt: Receipts) -> None:
    receipt["round"]["seats"][1]["stake"] += 1


def _client_seed(receipt: Receipts) -> None:
    receipt["round"]["seats"][0]["client_seed"] = "ff"


def _player_id_for_ref(receipt: Receipts) -> None:
    receipt["round"]["seats"][0]["player_ref"] = "alice"


def _player_id_beside_ref(receipt: Receipts) -> None:
    receipt["round"]["seats"][0]["player_id"] = "alice"


def _upper_case_ref(receipt: Receipts) -> None:
    seat = receipt["round"]["seats"][0]
    seat["player_ref"] = "p-" + seat["player_ref"][2:].upper()


def _another_ref(receipt: Receipts) -> None:
    # Well formed, and not in the lock: the fairness chain still holds, but the signed
    # ROUND_DEALT entry binds each reference to its seat.
    receipt["round"]["seats"][0]["player_ref"] = ref("mallory")


def _swapped_refs(receipt: Receipts) -> None:
    seats = receipt["round"]["seats"]
    seats[0]["player_ref"], seats[1]["player_ref"] = seats[1]["player_ref"], seats[0]["player_ref"]


def _shared_ref(receipt: Receipts) -> None:
    seats = receipt["round"]["seats"]
    seats[1]["player_ref"] = seats[0]["player_ref"]


def _resigned(receipt: Receipts, kind: str, change: Callable[[dict[str, Any]], None]) -> None:
    """Change the payload of the receipt's ``kind`` entry and sign it again with the example
    key, as a dishonest holder of the log key would: the entry is then well signed, and only
    its form is wrong."""
    for item in receipt["entries"]:
        entry = decode_entry(item["entry"].encode(), EXAMPLE_SIGNER.verifier)
        if entry.kind == kind:
            payload = copy.deepcopy(entry.payload)
            change(payload)
            data = encode_entry(
                EXAMPLE_SIGNER,
                index=entry.index,
                kind=entry.kind,
                time=entry.time,
                payload=payload,
                prev_hash=entry.prev_hash,
                round_id=entry.round_id,
            )
            item["entry"] = data.decode("utf-8")
            return
    raise AssertionError(f"the receipt has no {kind} entry")


def _logged_seat_without_client_seed(receipt: Receipts) -> None:
    _resigned(receipt, "ROUND_DEALT", lambda payload: payload["seats"][1].pop("client_seed"))


def _logged_rules_without_one(receipt: Receipts) -> None:
    _resigned(receipt, "ROUND_COMMITTED", lambda payload: payload["house_rules"].pop("tie"))


def _relabelled_v1(receipt: Receipts) -> None:
    round_ = receipt["round"]
    round_["format"] = "gnau-dealer/revealed-round/v1"
    for seat in round_["seats"]:
        seat["player_id"] = seat.pop("player_ref")


V2_TAMPERINGS: dict[str, tuple[Callable[[Receipts], None], str]] = {
    # what is changed: (how, the step every verifier must fail it at)
    "a stake": (_stake, "fairness"),
    "a client seed": (_client_seed, "fairness"),
    "a player id for a reference": (_player_id_for_ref, "fairness"),
    "a player id beside the reference": (_player_id_beside_ref, "fairness"),
    "an upper-case reference": (_upper_case_ref, "fairness"),
    "another well-formed reference": (_another_ref, "round"),
    "two references swapped": (_swapped_refs, "round"),
    "the round relabelled v1": (_relabelled_v1, "fairness"),
    "two seats with one reference": (_shared_ref, "fairness"),
    "a logged seat without its client seed": (_logged_seat_without_client_seed, "entries"),
    "a logged rule set without one rule": (_logged_rules_without_one, "entries"),
}


def tampered_v2() -> dict[str, Receipts]:
    """Each tampering of V2_TAMPERINGS applied to the v2 example receipt."""
    original = load_example(V2_RECEIPT)
    found = {}
    for name, (tamper, _) in V2_TAMPERINGS.items():
        receipt = copy.deepcopy(original)
        tamper(receipt)
        found[name] = receipt
    return found
