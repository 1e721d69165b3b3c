"""A file that cannot be read or written is named once in the command's message (a regression:
"cannot verify r.json: [Errno 2] No such file or directory: 'r.json'")."""

from __future__ import annotations

from pathlib import Path

from tests.audit.logs import new_signer
from tests.cli.test_audit_commands import Gnau
from tests.conftest import Run


def once(run: Run, path: Path) -> str:
    assert run.status == 2, run
    (line,) = run.err.splitlines()
    assert line.count(path.name) == 1, line
    assert "Errno" not in line, line
    return line


def test_a_missing_bundle_is_named_once(gnau: Gnau, tmp_path: Path) -> None:
    bundle = tmp_path / "log.jsonl"
    line = once(gnau("audit", "verify", str(bundle)), bundle)
    assert line == f"gnau audit: cannot verify {bundle}: No such file or directory"


def test_a_missing_receipt_is_named_once(gnau: Gnau, tmp_path: Path) -> None:
    receipt = tmp_path / "r.json"
    vkey = new_signer().vkey
    line = once(gnau("receipt", "verify", str(receipt), "--key", vkey), receipt)
    assert line.endswith(f"cannot verify {receipt}: No such file or directory"), line


def test_a_missing_pinned_checkpoint_is_named_and_not_blamed_on_the_receipt(
    gnau: Gnau, tmp_path: Path
) -> None:
    receipt, pin = tmp_path / "r.json", tmp_path / "pin.txt"
    receipt.write_text("{}")
    vkey = new_signer().vkey
    run = gnau("receipt", "verify", str(receipt), "--key", vkey, "--checkpoint", str(pin))
    line = once(run, pin)
    assert line.endswith(f"cannot verify {receipt}: {pin}: No such file or directory"), line
