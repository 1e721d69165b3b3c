"""``gnau software keygen | manifest | verify`` (issue 42, docs/software.md), in-process, on a
copy of the package (``--package-root``) and with no distributions on the path, so that a test
changes no installed file and hashes no virtual environment."""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import stat
from pathlib import Path

import pytest

import gnau_service
from gnau_service.audit.note import Verifier
from gnau_service.cli.main import main


@pytest.fixture(autouse=True)
def no_distributions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.metadata, "distributions", lambda: iter(()))


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the package, and ``gnau software manifest`` made to list it."""
    copy = tmp_path / "site" / "gnau_service"
    shutil.copytree(
        Path(gnau_service.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__")
    )
    monkeypatch.setattr(gnau_service, "__file__", str(copy / "__init__.py"))
    return copy


def test_keygen_writes_a_private_key_and_prints_its_verifier_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = tmp_path / "release.pem"
    assert main(["software", "keygen", "--key", str(key), "--name", "casino-release"]) == 0
    vkey = capsys.readouterr().out.strip()
    assert Verifier.from_vkey(vkey).name == "casino-release"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert "PRIVATE KEY" in key.read_text() and "PRIVATE" not in vkey
    before = key.read_bytes()
    assert main(["software", "keygen", "--key", str(key)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert key.read_bytes() == before


def test_manifest_then_verify_then_a_changed_byte(
    package: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key, vkey, manifest = tmp_path / "r.pem", tmp_path / "r.vkey", tmp_path / "m"
    assert main(["software", "keygen", "--key", str(key)]) == 0
    vkey.write_text(capsys.readouterr().out)
    assert main(["software", "manifest", "--key", str(key), "--output", str(manifest)]) == 0
    said = capsys.readouterr().err
    assert said.startswith("manifest sha256 ") and "0 distributions" in said
    verify = ["software", "verify", "--manifest", str(manifest), "--release-key", str(vkey)]
    verify += ["--package-root", str(package)]
    assert main(verify) == 0
    assert capsys.readouterr().out.startswith("MATCHED (manifest sha256 ")
    migration = sorted((package / "store" / "migrations").glob("*.sql"))[0]
    migration.write_bytes(migration.read_bytes().replace(b"CREATE", b"CREATe", 1))
    (package / "web" / "js" / "app.js").unlink()
    assert main([*verify, "--json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert found["result"] == "MISMATCHED" and found["mismatch_count"] == 2
    assert found["mismatches"] == [
        {
            "part": "file",
            "name": f"gnau_service/store/migrations/{migration.name}",
            "problem": "changed",
        },
        {"part": "file", "name": "gnau_service/web/js/app.js", "problem": "missing"},
    ]
    assert main(verify) == 1
    assert capsys.readouterr().out.splitlines()[1:] == [
        f"changed file gnau_service/store/migrations/{migration.name}",
        "missing file gnau_service/web/js/app.js",
    ]


def test_verify_with_another_release_key_is_1_and_unreadable_input_is_2(
    package: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key, other, manifest = tmp_path / "r.pem", tmp_path / "other.pem", tmp_path / "m"
    main(["software", "keygen", "--key", str(key)])
    main(["software", "keygen", "--key", str(other)])
    vkeys = capsys.readouterr().out.split()
    (tmp_path / "other.vkey").write_text(vkeys[1])
    main(["software", "manifest", "--key", str(key), "--output", str(manifest)])
    verify = ["software", "verify", "--manifest", str(manifest), "--package-root", str(package)]
    assert main([*verify, "--release-key", str(tmp_path / "other.vkey"), "--json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert found["result"] == "UNVERIFIED" and found["manifest_sha256"] is None
    assert main([*verify, "--release-key", str(tmp_path / "missing.vkey")]) == 2
    assert "cannot read" in capsys.readouterr().err
    (tmp_path / "bad.vkey").write_text("not a key\n")
    assert main([*verify, "--release-key", str(tmp_path / "bad.vkey")]) == 2
    assert "is not a verifier key" in capsys.readouterr().err
