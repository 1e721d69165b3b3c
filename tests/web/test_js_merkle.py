"""The page's Merkle proof checks against proofs the log's own tree makes: every inclusion and
consistency proof of a tree of 33 leaves verifies in ``merkle.js``, and a proof with one hash
changed, one hash missing, or for the wrong index, does not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gnau_service.audit.merkle import MemoryTree, leaf_hash
from tests.web.nodejs import run_module_script

# make test-system: the page's JavaScript, run by Node.js.
pytestmark = pytest.mark.system

MERKLE_MODULE = Path(__file__).parents[2] / "gnau_service" / "web" / "js" / "merkle.js"
LEAVES = 33

CHECK_ALL = """
import { verifyInclusion, verifyConsistency, ProofError } from %s;
const bytes = (hex) => Uint8Array.from(hex.match(/../g) ?? [], (pair) => parseInt(pair, 16));
let input = "";
for await (const chunk of process.stdin) input += chunk;
const verdicts = [];
for (const c of JSON.parse(input)) {
  try {
    if (c.kind === "inclusion") {
      await verifyInclusion(bytes(c.leaf), c.index, c.size, c.proof.map(bytes), bytes(c.root));
    } else {
      await verifyConsistency(c.size1, c.size2, c.proof.map(bytes), bytes(c.root1), bytes(c.root2));
    }
    verdicts.push(true);
  } catch (error) {
    if (!(error instanceof ProofError)) throw error;
    verdicts.push(false);
  }
}
process.stdout.write(JSON.stringify(verdicts));
"""


def _flip(hex_hash: str) -> str:
    return ("1" if hex_hash[0] == "0" else "0") + hex_hash[1:]


def test_the_pages_proof_checks_agree_with_the_logs_proofs() -> None:
    tree = MemoryTree()
    leaves = [leaf_hash(f"entry {n}".encode()) for n in range(LEAVES)]
    for leaf in leaves:
        tree.append(leaf)
    cases: list[dict[str, object]] = []
    expected: list[bool] = []
    for size in range(1, LEAVES + 1):
        root = tree.root(size).hex()
        for index in range(size):
            proof = [node.hex() for node in tree.inclusion_proof(index, size)]
            good = {"kind": "inclusion", "leaf": leaves[index].hex(), "index": index, "size": size}
            cases.append({**good, "proof": proof, "root": root})
            expected.append(True)
            if proof:
                cases.append({**good, "proof": [_flip(proof[0]), *proof[1:]], "root": root})
                cases.append({**good, "proof": proof[:-1], "root": root})
                expected += [False, False]
            if size > 1:
                cases.append({**good, "index": (index + 1) % size, "proof": proof, "root": root})
                expected.append(False)
        for size1 in range(1, size):
            proof = [node.hex() for node in tree.consistency_proof(size1, size)]
            good = {
                "kind": "consistency",
                "size1": size1,
                "size2": size,
                "root1": tree.root(size1).hex(),
            }
            cases.append({**good, "proof": proof, "root2": root})
            cases.append({**good, "proof": [*proof[:-1], _flip(proof[-1])], "root2": root})
            cases.append({**good, "proof": proof, "root2": _flip(root)})
            expected += [True, False, False]
    script = CHECK_ALL % json.dumps(MERKLE_MODULE.as_uri())
    verdicts = run_module_script(script, cases)
    wrong = [
        cases[n]
        for n, (ours, theirs) in enumerate(zip(verdicts, expected, strict=True))
        if ours != theirs
    ]
    assert not wrong, wrong[:3]
    assert len(verdicts) == len(expected) > 3000
