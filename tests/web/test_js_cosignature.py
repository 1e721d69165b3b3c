"""The page's cosignature count (``cosignature.js``) against the service's implementation
(``gnau_service.audit.cosignature``): for notes cosigned by any choice of three witnesses, with
forged, moved, foreign and duplicated lines, and for the Go vectors' keys, node says what the
service says."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.checkpoint import Checkpoint, sign_checkpoint
from gnau_service.audit.cosignature import WitnessKey, WitnessSigner, cosign, cosigners
from gnau_service.audit.note import NoteError, NoteSignature, SignedNote, Signer
from tests.audit.vectors import COSIGNATURE
from tests.web.nodejs import run_module_script

JS = Path(__file__).parents[2] / "gnau_service" / "web" / "js"
LOG = Signer("gnau-dealer/js", Ed25519PrivateKey.from_private_bytes(bytes(32)))
WITNESSES = [
    WitnessSigner(f"witness.js/w{n}", Ed25519PrivateKey.from_private_bytes(bytes([n]) * 32))
    for n in (1, 2, 3)
]

COUNT = """
import { cosigners, parseWitnessVkey } from %s;
import { parseSignedNote } from %s;
let input = "";
for await (const chunk of process.stdin) input += chunk;
const { vkeys, notes, probes } = JSON.parse(input);
const keys = [];
for (const vkey of vkeys) keys.push(await parseWitnessVkey(vkey));
const counted = [];
for (const note of notes) {
  counted.push((await cosigners(parseSignedNote(note), keys)).map((key) => key.name));
}
const read = [];
for (const vkey of probes) {
  try {
    read.push((await parseWitnessVkey(vkey)).keyId);
  } catch {
    read.push(null);
  }
}
process.stdout.write(JSON.stringify({ counted, read }));
"""


def notes(seed: int) -> list[str]:
    rng = random.Random(seed)
    made = []
    for case in range(60):
        signed = sign_checkpoint(Checkpoint(LOG.name, case, rng.randbytes(32)), LOG)
        chosen = [rng.choice(WITNESSES) for _ in range(rng.randrange(4))]
        lines = [cosign(w, signed.text, rng.randrange(2**63)) for w in chosen]
        if lines and case % 3 == 0:  # forge one: a changed signature byte
            bad = lines[0]
            lines[0] = NoteSignature(bad.name, bad.key_id, bad.signature[:-1] + b"\xff")
        if case % 5 == 0:  # a cosignature of another checkpoint, moved onto this one
            other = sign_checkpoint(Checkpoint(LOG.name, case + 1, bytes(32)), LOG)
            lines.append(cosign(WITNESSES[case % 3], other.text, 1))
        made.append(str(SignedNote(signed.text, signed.signatures + tuple(lines))))
    return made


def test_the_page_counts_the_cosignatures_the_service_counts() -> None:
    made = notes(20261130)
    probes = [case["vkey"] for case in COSIGNATURE["go_vkeys"]]
    payload = {"vkeys": [w.vkey for w in WITNESSES], "notes": made, "probes": probes}
    script = COUNT % (
        json.dumps((JS / "cosignature.js").as_uri()),
        json.dumps((JS / "note.js").as_uri()),
    )
    answer: dict[str, Any] = run_module_script(script, payload)
    keys = [w.key for w in WITNESSES]
    expected = [[c.key.name for c in cosigners(SignedNote.parse(n), keys)] for n in made]
    assert answer["counted"] == expected
    assert any(len(names) >= 2 for names in expected) and any(not n for n in expected)

    def key_id(vkey: str) -> str | None:
        try:
            return WitnessKey.from_vkey(vkey).key_id.hex()
        except NoteError:
            return None

    assert answer["read"] == [key_id(vkey) for vkey in probes]
    assert [r is not None for r in answer["read"]] == [c["valid"] for c in COSIGNATURE["go_vkeys"]]
