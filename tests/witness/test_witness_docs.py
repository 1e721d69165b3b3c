"""docs/witness.md and deploy/gnau-witness.service agree with the code, and the worked example's
bytes check out with pyca/cryptography alone."""

from __future__ import annotations

import base64
import hashlib
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from gnau_service.audit.checkpoint import Checkpoint
from gnau_service.audit.cosignature import WitnessSigner, cosign, cosignature_message
from gnau_service.audit.merkle import leaf_hash
from gnau_service.audit.witness_protocol import MAX_PROOF_LINES, MAX_REQUEST_BYTES
from gnau_service.cli.main import build_parser
from gnau_service.witness.logs import parse_logs
from gnau_service.witness.state import MAX_EVIDENCE_PER_ORIGIN, MAX_EVIDENCE_TOTAL

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "witness.md").read_text(encoding="utf-8")
UNIT = REPO / "deploy" / "gnau-witness.service"
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


def example(name: str) -> str:
    match = re.search(rf"<!-- example: {name} -->\n```\w*\n(.*?)```", DOC, re.DOTALL)
    assert match, name
    return match.group(1)


def test_worked_example_bytes() -> None:
    seed = bytes(range(32))
    vkey, skey = example("witness-keys").splitlines()
    public_key = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw()
    name, id_hex, blob = vkey.split("+", 2)
    assert base64.b64decode(blob) == b"\x04" + public_key
    assert (
        bytes.fromhex(id_hex) == hashlib.sha256(name.encode() + b"\n\x04" + public_key).digest()[:4]
    )
    assert skey == f"PRIVATE+KEY+{name}+{id_hex}+" + base64.b64encode(b"\x04" + seed).decode()
    message = example("cosigned-message").encode()
    line = example("cosignature-line").removesuffix("\n")
    assert line.startswith(f"\u2014 {name} ")
    raw = base64.b64decode(line.split(" ")[-1])
    assert raw[:4].hex() == id_hex and raw[4:12] == (1700000000).to_bytes(8, "big")
    Ed25519PublicKey.from_public_bytes(public_key).verify(raw[12:], message)
    # And the code produces exactly these bytes.
    signer = WitnessSigner.from_skey(skey)
    body = Checkpoint("gnau-dealer/example", 1, leaf_hash(b"hello")).to_note_text()
    assert (signer.vkey, cosignature_message(body, 1700000000)) == (vkey, message)
    assert cosign(signer, body, 1700000000).line == line + "\n"


def test_every_status_and_limit_is_documented() -> None:
    table = DOC[DOC.index("| status | when |") :]
    statuses = {int(s) for s in re.findall(r"^\| (\d{3}) \|", table, re.MULTILINE)}
    assert statuses == {200, 400, 403, 404, 408, 409, 413, 415, 417, 422, 429, 503}
    assert f"{MAX_REQUEST_BYTES:,} bytes" in DOC
    assert f"more than {MAX_PROOF_LINES} proof lines" in DOC
    for refusal in ("old_size_too_large", "old_size_mismatch", "root_mismatch", "inconsistent"):
        assert f"`{refusal}`" in DOC


def test_the_stop_ends_before_the_unit_kills_it() -> None:
    """The grace for requests in flight, then the close, come before systemd's SIGKILL."""
    from gnau_service.witness.server import GRACE_SECONDS

    timeout = next(ln for ln in UNIT.read_text().splitlines() if ln.startswith("TimeoutStopSec="))
    assert float(timeout.removeprefix("TimeoutStopSec=")) > GRACE_SECONDS + 2
    assert f"gives requests in flight {GRACE_SECONDS:g} s" in DOC
    assert "LimitNOFILE=" in UNIT.read_text()


def test_the_evidence_caps_are_documented() -> None:
    section = DOC[DOC.index("## Evidence") : DOC.index("## Keys and state")]
    assert f"at most {MAX_EVIDENCE_PER_ORIGIN:,} rows per log" in section
    assert f"{MAX_EVIDENCE_TOTAL:,} in all" in section
    assert "never deleted" in section


def test_the_logs_toml_example_parses() -> None:
    toml = re.search(r"```toml\n(.*?)```", DOC, re.DOTALL)
    assert toml is not None
    logs = parse_logs(re.sub(r"^ {3}", "", toml.group(1), flags=re.MULTILINE))
    assert list(logs.logs) == ["gnau-dealer/eu-prod-1"]


def exec_start() -> list[str]:
    line = next(ln for ln in UNIT.read_text().splitlines() if ln.startswith("ExecStart="))
    return shlex.split(line.removeprefix("ExecStart="))


def test_the_unit_runs_a_command_the_cli_accepts() -> None:
    command = exec_start()
    assert command[:3] == ["/opt/gnau/bin/gnau", "witness", "serve"]
    args = build_parser().parse_args(command[1:])
    assert args.database == "sqlite:////var/lib/gnau-witness/witness.db"
    assert str(args.key).startswith("/var/lib/gnau-witness/")
    text = UNIT.read_text()
    for setting in ("UMask=0077", "StateDirectoryMode=0700", "ProtectSystem=strict",
                    "ReadWritePaths=/var/lib/gnau-witness", "NoNewPrivileges=true"):  # fmt: skip
        assert f"\n{setting}\n" in text, setting


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verify_and_exposure(tmp_path: Path) -> None:
    assert SYSTEMD_ANALYZE is not None
    gnau = Path(sys.executable).parent / "gnau"
    copy = tmp_path / UNIT.name
    copy.write_text(UNIT.read_text().replace("/opt/gnau/bin/gnau", str(gnau)))
    verified = subprocess.run(
        [SYSTEMD_ANALYZE, "verify", str(copy)], capture_output=True, text=True, check=False
    )
    assert (verified.returncode, verified.stdout, verified.stderr) == (0, "", "")
    rated = subprocess.run(
        [SYSTEMD_ANALYZE, "security", "--offline=true", str(copy)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    found = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", rated.stdout)
    assert found is not None and float(found[1]) <= 2.0, rated.stdout
