"""The standalone receipt verifier of docs/receipts.md on the receipts of issue 37 written out
by hand (tests/independent/handmade_cases.py): voids after the deal that pay each seat the
better of its result and a refund, and every other void refused at step outcome; actors of a
bad form refused at step entries; old entries without actors still valid. Each verdict and
failing step is the one written in the case; one receipt of each verdict also runs as a
reader runs the script, in an isolated interpreter."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.independent.handmade import VKEY
from tests.independent.handmade_cases import CASES, A, Case, round_document

REPO_ROOT = Path(__file__).resolve().parents[2]
_SNIPPET = re.compile(
    r"<!-- receipt-verifier:begin -->\s*```python\n(.*?)```\s*<!-- receipt-verifier:end -->",
    re.DOTALL,
)


def docs_script() -> str:
    match = _SNIPPET.search((REPO_ROOT / "docs" / "receipts.md").read_text(encoding="utf-8"))
    assert match, "docs/receipts.md lost its standalone verifier"
    return match[1]


@pytest.fixture(scope="module")
def script() -> dict[str, Any]:
    """The script's functions, loaded without running it as a program."""
    namespace: dict[str, Any] = {"__name__": "verify_receipt"}
    exec(compile(docs_script(), "verify_receipt.py", "exec"), namespace)
    return namespace


def verdict(script: dict[str, Any], text: str) -> tuple[str, str, str]:
    """(VALID or INVALID, the failing step, the reason), as the script's verify gives them."""
    receipt = json.loads(text, object_pairs_hook=script["unique"])
    script["check_readable"](receipt)
    try:
        script["verify"](receipt, VKEY)
    except ValueError as failure:
        match = re.fullmatch(r"INVALID at step (\w+): (.*)", str(failure), re.DOTALL)
        assert match, failure
        return "INVALID", match[1], match[2]
    return "VALID", "", ""


RECEIPTS = [(case, round_id) for case in CASES for round_id in case.receipts]


@pytest.mark.parametrize(
    ("case", "round_id"), RECEIPTS, ids=[f"{case.name}, {round_id}" for case, round_id in RECEIPTS]
)
def test_the_script_gives_each_receipt_its_written_verdict(
    script: dict[str, Any], case: Case, round_id: str
) -> None:
    text = case.log().receipt(round_id, round_document(round_id))
    status, step, reason = verdict(script, text)
    assert (status, step) == case.receipts[round_id], reason


AS_A_PROGRAM = [
    ("as written", (0, "VALID: fairness, entries, round, outcome, checkpoint, inclusion")),
    ("a seat paid its result minus 1", (1, "INVALID at step outcome: a void after the deal")),
    ("a token actor without a name", (1, "INVALID at step entries: entry ")),
]


@pytest.mark.parametrize(("name", "expected"), AS_A_PROGRAM, ids=[n for n, _ in AS_A_PROGRAM])
def test_the_script_run_as_a_program(tmp_path: Path, name: str, expected: tuple[int, str]) -> None:
    case = next(case for case in CASES if case.name == name)
    path = tmp_path / "verify_receipt.py"
    path.write_text(docs_script(), encoding="utf-8")
    document = tmp_path / "receipt.json"
    document.write_text(case.log().receipt(A, round_document(A)), encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-I", str(path), str(document), VKEY],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=tmp_path,
    )
    status, text = expected
    assert run.returncode == status, run.stdout + run.stderr
    assert run.stdout.startswith(f"round {A}: {text}"), run.stdout
