"""The page's receipt verifier (``receipt.js``, run by Node.js) and the Python reference agree
on every receipt: the same verdict, the same first failing step. Real receipts from a real
service: settled, revealed, voided before and after the deal, from before a key rotation, and
each tampering of ``tests/server/test_receipts.py``."""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.receipts import Receipt, verify_receipt
from gnau_service.audit.signing import LogSigner
from tests.server.conftest import Service
from tests.server.test_receipts import TAMPERED, _signature, receipt_of
from tests.server.test_service import deal, play, shuffle, void
from tests.web.nodejs import node

# make test-system: the page's JavaScript, run by Node.js.
pytestmark = pytest.mark.system

JS = Path(__file__).parents[2] / "gnau_service" / "web" / "js"
#: The tables the tests deal at, each in the default operator's catalogue (issue 38).
TABLES = ("agree", "agree-void-early", "agree-void-late", "agree-after-rotation", "named-once")


VERIFY_ALL = """
import { readReceipt, verifyReceipt } from %(receipt)s;
import { parseVkey } from %(note)s;
let input = "";
for await (const chunk of process.stdin) input += chunk;
const { vkey, receipts } = JSON.parse(input);
const pin = await parseVkey(vkey);
const verdicts = [];
for (const document of receipts) {
  const report = await verifyReceipt(readReceipt(document), [pin]);
  verdicts.push(report.failure === null ? "valid" : report.failure[%(member)s]);
}
process.stdout.write(JSON.stringify(verdicts));
"""


#: Catalogued by the service fixtures (tests/catalogued.py, catalogue_module_tables).
CATALOGUED = TABLES


def javascript_verdicts(
    vkey: str, receipts: list[dict[str, Any]], member: str = "step"
) -> list[str]:
    """The page's verdict on each receipt: "valid", or its failure's ``member`` (the step, or
    the reason)."""
    script = VERIFY_ALL % {
        "receipt": json.dumps((JS / "receipt.js").as_uri()),
        "note": json.dumps((JS / "note.js").as_uri()),
        "member": json.dumps(member),
    }
    result = subprocess.run(
        [node(), "--input-type=module", "-e", script],
        input=json.dumps({"vkey": vkey, "receipts": receipts}),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    verdicts: list[str] = json.loads(result.stdout)
    return verdicts


def rid() -> str:
    return str(uuid.uuid4())


async def test_the_page_and_the_reference_agree_on_every_receipt(service: Service) -> None:
    old_key = service.app.store.signer
    receipts = [await receipt_of(service, (await play(service, "agree")).round_id)]
    for tamper in (tamper for _, tamper, _, _ in TAMPERED):
        tampered = copy.deepcopy(receipts[0])
        tamper(tampered)
        receipts.append(tampered)
    early = await shuffle(service, "agree-void-early")
    await void(service, early.round_id, "x")
    late = await shuffle(service, "agree-void-late")
    await deal(service, late.round_id)
    await void(service, late.round_id, "y")
    await asyncio.to_thread(
        service.app.store.rotate_key,
        LogSigner.from_private_key(old_key.origin, Ed25519PrivateKey.generate()),
    )
    after = await play(service, "agree-after-rotation")
    for round_id in (early.round_id, late.round_id, after.round_id):
        receipts.append(await receipt_of(service, round_id))

    python = []
    for document in receipts:
        report = verify_receipt(Receipt.from_json(copy.deepcopy(document)), [old_key.verifier])
        python.append("valid" if report.failure is None else str(report.failure.step))
    assert python.count("valid") == 4, python  # the untouched, the two voided, the rotated
    assert javascript_verdicts(old_key.vkey, receipts) == python


async def test_the_page_names_a_bad_entry_once_as_the_reference_does(service: Service) -> None:
    """A regression: the entry's label was added by the decoder and again by the step."""
    document = await receipt_of(service, (await play(service, "named-once")).round_id)
    tampered = copy.deepcopy(document)
    _signature(tampered)
    index = tampered["entries"][1]["index"]
    expected = f"entry {index}: the signature does not verify"
    key = service.app.store.signer
    python = verify_receipt(Receipt.from_json(copy.deepcopy(tampered)), [key.verifier]).failure
    assert python is not None and python.reason == expected
    assert javascript_verdicts(key.vkey, [tampered], member="reason") == [expected]
