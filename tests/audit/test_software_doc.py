"""docs/software.md against the code: its standard-tools check runs as written on a manifest the
code wrote, and fails on a changed byte; its example text has the code's format line."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import gnau_service
from gnau_service.audit.note import Signer
from gnau_service.audit.software_manifest import HEADER, Installation, Manifest, sign_manifest
from tests.schemas.validation import errors

DOC = Path(__file__).resolve().parents[2] / "docs" / "software.md"
TOOLS = ("bash", "openssl", "xxd", "sha256sum", "base64", "sed")


def section(title: str) -> str:
    return DOC.read_text(encoding="utf-8").split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def block(text: str, language: str) -> str:
    return text.split(f"```{language}\n", 1)[1].split("```", 1)[0]


def test_the_example_entry_is_a_payload_the_schema_takes() -> None:
    example = json.loads(block(section("In the running service"), "json"))
    assert errors("payload-software-verified.schema.json", example) == []
    assert example["mismatch_count"] == len(example["mismatches"])


def test_the_example_text_starts_with_the_format_line() -> None:
    example = block(section("The manifest"), "text").splitlines()
    assert example[0] == HEADER
    assert example[1] == "name gnau-service"


@pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in TOOLS), reason="needs bash, openssl 3 and xxd"
)
def test_the_standard_tools_check_runs_as_written(tmp_path: Path) -> None:
    root = tmp_path / "site"
    package = root / "gnau_service"
    shutil.copytree(
        Path(gnau_service.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__")
    )
    signer = Signer("gnau-release", Ed25519PrivateKey.generate())
    while "+" not in signer.verifier.vkey.split("+", 2)[2]:  # a key whose base64 holds a "+"
        signer = Signer("gnau-release", Ed25519PrivateKey.generate())
    manifest = tmp_path / "software.manifest"
    manifest.write_bytes(sign_manifest(Manifest.of(Installation(package, ())), signer))
    vkey = tmp_path / "release.vkey"
    vkey.write_text(signer.verifier.vkey + "\n")
    script = block(section("Checking it with standard tools"), "sh")
    work = tmp_path / "work"
    work.mkdir()

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", script],
            cwd=work,
            env={
                **os.environ,
                "MANIFEST": str(manifest),
                "VKEY_FILE": str(vkey),
                "ROOT": str(root),
            },
            capture_output=True,
            text=True,
            check=False,
        )

    done = run()
    assert done.returncode == 0, done.stderr
    data = manifest.read_bytes()
    text = data[: data.index(b"\n\n") + 1]
    assert done.stdout.splitlines()[0] == hashlib.sha256(text).hexdigest()
    assert "Signature Verified Successfully" in done.stdout
    other = Signer("gnau-release", Ed25519PrivateKey.generate())
    vkey.write_text(other.verifier.vkey + "\n")
    assert run().returncode != 0, "a manifest checked with another release key"
    vkey.write_text(signer.verifier.vkey + "\n")
    receipt = package / "web" / "js" / "receipt.js"
    receipt.write_bytes(receipt.read_bytes() + b" ")
    failed = run()
    assert failed.returncode != 0
    assert "gnau_service/web/js/receipt.js: FAILED" in failed.stdout
