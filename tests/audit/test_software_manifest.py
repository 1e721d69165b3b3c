"""The software manifest (issue 42, docs/software.md): its text, its signature, and the check of
an installation against it. Every check runs on a copy of the package in a temporary directory
(and on distributions made there), never on the installed one. Expected digests are computed
here with hashlib from the format the doc gives, never by the code under test."""

from __future__ import annotations

import hashlib
import importlib.metadata
import shutil
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

import gnau_service
from gnau_service.audit.note import SignedNote, Signer, sign_note
from gnau_service.audit.software_manifest import (
    MAX_LISTED_MISMATCHES,
    Distribution,
    Installation,
    Manifest,
    ManifestError,
    Mismatch,
    Outcome,
    Part,
    Problem,
    SoftwareCheck,
    check_software,
    distribution_digest,
    read_manifest,
    sign_manifest,
)

PACKAGE = Path(gnau_service.__file__).parent
RELEASE = Signer("gnau-release", Ed25519PrivateKey.generate())


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A copy of the installed package, as a release ships it (no bytecode)."""
    copy = tmp_path / "site" / "gnau_service"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def make_distribution(site: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    """A distribution installed under ``site``: its files and a RECORD listing them (and itself,
    and a bytecode file, as pip writes them)."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    listed = {**files, f"{info.name}/METADATA": (info / "METADATA").read_bytes()}
    for path, data in files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_bytes(data)
    record = [f"{path},sha256=x,{len(data)}" for path, data in listed.items()]
    record += [f"{info.name}/RECORD,,", f"{name}/__pycache__/m.cpython-311.pyc,,"]
    (info / "RECORD").write_text("\n".join(record) + "\n")
    return info


def installation(package: Path, *infos: Path) -> Installation:
    return Installation(package, tuple(importlib.metadata.PathDistribution(i) for i in infos))


def signed(manifest: Manifest, tmp_path: Path, signer: Signer = RELEASE) -> tuple[Path, Path]:
    manifest_path, key_path = tmp_path / "manifest", tmp_path / "release.vkey"
    manifest_path.write_bytes(sign_manifest(manifest, signer))
    key_path.write_text(RELEASE.verifier.vkey + "\n")
    return manifest_path, key_path


# -- the format -----------------------------------------------------------------------------------


def test_the_text_is_the_documented_lines_and_its_digest_is_their_sha256(tmp_path: Path) -> None:
    root = tmp_path / "gnau_service"
    (root / "web" / "js").mkdir(parents=True)
    (root / "__init__.py").write_bytes(b"x = 1\n")
    (root / "web" / "js" / "a.js").write_bytes(b"export {};\n")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "x.pyc").write_bytes(b"bytecode")
    site = tmp_path / "site"
    info = make_distribution(site, "Some_Lib", "1.2", {"some_lib/__init__.py": b"y = 2\n"})
    manifest = Manifest.of(installation(root, info))
    # The distribution's digest: sha256sum lines of its files, sorted by path, RECORD and
    # bytecode left out.
    metadata = (info / "METADATA").read_bytes()
    lines = sorted(
        [
            (f"{info.name}/METADATA", sha256(metadata)),
            ("some_lib/__init__.py", sha256(b"y = 2\n")),
        ]
    )
    library = sha256("".join(f"{digest}  {path}\n" for path, digest in lines).encode())
    expected = (
        "gnau-dealer/software-manifest/v1\n"
        "name gnau-service\n"
        f"version {gnau_service.__version__}\n"
        f"file {sha256(b'x = 1' + bytes([10]))} gnau_service/__init__.py\n"
        f"file {sha256(b'export {};' + bytes([10]))} gnau_service/web/js/a.js\n"
        f"distribution {library} some-lib 1.2\n"
    )
    assert manifest.text() == expected
    assert manifest.sha256 == sha256(expected.encode())
    note = SignedNote.parse(sign_manifest(manifest, RELEASE))
    assert note.text == expected
    assert note.verify([RELEASE.verifier]) == (RELEASE.verifier,)


def test_a_manifest_reads_back_as_written(package: Path) -> None:
    manifest = Manifest.of(installation(package))
    assert len(manifest.files) > 200
    assert "gnau_service/web/index.html" in manifest.files
    assert any(path.endswith(".sql") for path in manifest.files)
    assert any(path.endswith(".js") for path in manifest.files)
    assert any(path.endswith(".css") for path in manifest.files)
    assert "gnau_service/rules/return_to_player.csv" in manifest.files
    assert read_manifest(sign_manifest(manifest, RELEASE), RELEASE.verifier) == manifest


def test_a_bytecode_change_is_not_a_mismatch(package: Path, tmp_path: Path) -> None:
    manifest_path, key = signed(Manifest.of(installation(package)), tmp_path)
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"rewritten by Python")
    assert check_software(manifest_path, key, installation(package)).outcome is Outcome.MATCHED


# -- what a check finds ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shipped",
    [
        "gnau_service/fairness/shuffle.py",
        "gnau_service/store/migrations/0001_sqlite.sql",
        "gnau_service/web/js/receipt.js",
        "gnau_service/web/index.html",
    ],
)
def test_one_changed_byte_of_a_shipped_file_fails_the_check(
    package: Path, tmp_path: Path, shipped: str
) -> None:
    path = package.parent / shipped
    if not path.exists():  # the migrations' names: take the first SQL file there is
        path = sorted(path.parent.glob(f"*{path.suffix}"))[0]
        shipped = path.relative_to(package.parent).as_posix()
    manifest_path, key = signed(Manifest.of(installation(package)), tmp_path)
    assert check_software(manifest_path, key, installation(package)).outcome is Outcome.MATCHED
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    found = check_software(manifest_path, key, installation(package))
    assert found.outcome is Outcome.MISMATCHED
    assert found.mismatches == (Mismatch(Part.FILE, shipped, Problem.CHANGED),)
    assert found.alarming


def test_a_missing_and_an_extra_file_are_each_named(package: Path, tmp_path: Path) -> None:
    manifest_path, key = signed(Manifest.of(installation(package)), tmp_path)
    (package / "web" / "index.html").unlink()
    (package / "web" / "js" / "extra.js").write_text("alert(1)\n")
    found = check_software(manifest_path, key, installation(package))
    assert found.mismatches == (
        Mismatch(Part.FILE, "gnau_service/web/index.html", Problem.MISSING),
        Mismatch(Part.FILE, "gnau_service/web/js/extra.js", Problem.EXTRA),
    )
    assert found.lines()[1:] == [
        "missing file gnau_service/web/index.html",
        "extra file gnau_service/web/js/extra.js",
    ]


def test_distributions_changed_missing_extra_and_of_another_version(
    package: Path, tmp_path: Path
) -> None:
    site = tmp_path / "libs"
    kept = make_distribution(site, "kept", "1.0", {"kept/a.py": b"a = 1\n"})
    changed = make_distribution(site, "changed", "1.0", {"changed/a.py": b"a = 1\n"})
    gone = make_distribution(site, "gone", "1.0", {"gone/a.py": b"a = 1\n"})
    upgraded = make_distribution(site, "upgraded", "1.0", {"upgraded/a.py": b"a = 1\n"})
    manifest_path, key = signed(
        Manifest.of(installation(package, kept, changed, gone, upgraded)), tmp_path
    )
    (site / "changed" / "a.py").write_bytes(b"a = 2\n")
    shutil.rmtree(upgraded)
    newer = make_distribution(site, "upgraded", "2.0", {})
    added = make_distribution(site, "added", "0.1", {"added/a.py": b""})
    found = check_software(manifest_path, key, installation(package, kept, changed, newer, added))
    assert found.mismatches == (
        Mismatch(Part.DISTRIBUTION, "added", Problem.EXTRA),
        Mismatch(Part.DISTRIBUTION, "changed", Problem.CHANGED),
        Mismatch(Part.DISTRIBUTION, "gone", Problem.MISSING),
        Mismatch(Part.DISTRIBUTION, "upgraded", Problem.CHANGED),
    )


def test_a_file_a_record_lists_and_that_is_gone_changes_its_distribution(tmp_path: Path) -> None:
    info = make_distribution(tmp_path, "lib", "1.0", {"lib/a.py": b"a\n", "lib/b.py": b"b\n"})
    distribution = importlib.metadata.PathDistribution(info)
    before = distribution_digest(distribution)
    (tmp_path / "lib" / "b.py").unlink()
    metadata = (info / "METADATA").read_bytes()
    lines = sorted(
        [
            (f"{info.name}/METADATA", sha256(metadata)),
            ("lib/a.py", sha256(b"a\n")),
            ("lib/b.py", "absent"),
        ]
    )
    assert distribution_digest(distribution) == sha256(
        "".join(f"{digest}  {path}\n" for path, digest in lines).encode()
    )
    assert distribution_digest(distribution) != before


def test_the_packages_own_distribution_leaves_its_listed_files_to_their_lines(
    tmp_path: Path,
) -> None:
    files = {"gnau_service/a.py": b"a\n", "../../bin/gnau": b"#!python\n"}
    info = make_distribution(tmp_path / "lib" / "site", "gnau_service", "0.1.0", files)
    distribution = importlib.metadata.PathDistribution(info)
    metadata = (info / "METADATA").read_bytes()
    lines = sorted(
        [
            (f"{info.name}/METADATA", sha256(metadata)),
            ("../../bin/gnau", sha256(files["../../bin/gnau"])),
        ]
    )
    expected = sha256("".join(f"{digest}  {path}\n" for path, digest in lines).encode())
    assert distribution_digest(distribution) == expected
    (tmp_path / "lib" / "site" / "gnau_service" / "a.py").write_bytes(b"changed\n")
    assert distribution_digest(distribution) == expected
    (tmp_path / "bin" / "gnau").write_bytes(b"#!/bin/sh\nevil\n")
    assert distribution_digest(distribution) != expected


# -- signatures and keys --------------------------------------------------------------------------


def test_a_manifest_signed_by_another_key_does_not_verify(package: Path, tmp_path: Path) -> None:
    impostor = Signer("gnau-release", Ed25519PrivateKey.generate())
    manifest_path, key = signed(Manifest.of(installation(package)), tmp_path, impostor)
    found = check_software(manifest_path, key, installation(package))
    assert found.outcome is Outcome.UNVERIFIED
    assert found.manifest_sha256 is None and found.alarming
    assert "does not verify" in found.detail


def test_an_edited_manifest_does_not_verify(package: Path, tmp_path: Path) -> None:
    manifest_path, key = signed(Manifest.of(installation(package)), tmp_path)
    text = manifest_path.read_bytes()
    (package / "__init__.py").write_bytes(b"changed = True\n")
    forged = Manifest.of(installation(package))
    # The forger's text under the release key's signature lines.
    signature_lines = text[text.rindex(b"\n\n") :]
    manifest_path.write_bytes(forged.text().encode().rstrip(b"\n") + signature_lines)
    found = check_software(manifest_path, key, installation(package))
    assert found.outcome is Outcome.UNVERIFIED
    assert "signature" in found.detail


@pytest.mark.parametrize(
    ("content", "said"),
    [(None, "cannot read the release key"), ("not a key\n", "is not a verifier key")],
)
def test_a_release_key_that_cannot_be_used_is_unverified(
    package: Path, tmp_path: Path, content: str | None, said: str
) -> None:
    manifest_path, key = signed(Manifest.of(installation(package)), tmp_path)
    if content is None:
        key.unlink()
    else:
        key.write_text(content)
    found = check_software(manifest_path, key, installation(package))
    assert found.outcome is Outcome.UNVERIFIED and said in found.detail


@pytest.mark.parametrize(
    "text",
    [
        "gnau-dealer/software-manifest/v2\nname n\nversion 1\n",
        "gnau-dealer/software-manifest/v1\nname n\n",
        "gnau-dealer/software-manifest/v1\nname n\nversion 1\nfile abc gnau_service/a.py\n",
        "gnau-dealer/software-manifest/v1\nname n\nversion 1\n" + f"file {'a' * 64} x\n" * 2,
        "gnau-dealer/software-manifest/v1\nname n\nversion 1\n"
        + f"distribution {'a' * 64} Not_Normal 1\n",
        "gnau-dealer/software-manifest/v1\nname n\nversion 1\n" + f"binary {'a' * 64} x\n",
    ],
)
def test_a_malformed_manifest_is_refused_even_when_signed(text: str) -> None:
    with pytest.raises(ManifestError):
        read_manifest(sign_note(text, RELEASE).encode(), RELEASE.verifier)


def test_no_manifest_configured_is_its_own_result(package: Path) -> None:
    found = check_software(None, None, installation(package))
    assert found.outcome is Outcome.NO_MANIFEST and not found.alarming


# -- the entry ------------------------------------------------------------------------------------


def test_the_entry_lists_at_most_100_mismatches_and_counts_them_all() -> None:
    many = tuple(Mismatch(Part.FILE, f"gnau_service/x{n:03}.py", Problem.EXTRA) for n in range(150))
    payload = SoftwareCheck(Outcome.MISMATCHED, "ab" * 32, many).payload("service")
    assert payload["mismatch_count"] == 150
    assert isinstance(payload["mismatches"], list)
    assert len(payload["mismatches"]) == MAX_LISTED_MISMATCHES == 100
    assert payload["mismatches"][0] == {
        "part": "file",
        "name": "gnau_service/x000.py",
        "problem": "extra",
    }


def test_an_undecodable_file_name_is_escaped_in_the_entry() -> None:
    name = b"gnau_service/\xff.py".decode("utf-8", "surrogateescape")
    mismatch = Mismatch(Part.FILE, name, Problem.EXTRA)
    payload = SoftwareCheck(Outcome.MISMATCHED, "ab" * 32, (mismatch,)).payload("service")
    assert payload["mismatches"] == [
        {"part": "file", "name": "gnau_service/\\xff.py", "problem": "extra"}
    ]


# -- invariants -----------------------------------------------------------------------------------

_HEX = st.text("0123456789abcdef", min_size=64, max_size=64)
_PATH = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x2FF, exclude_characters="\x7f\x85\xa0"),
    min_size=1,
    max_size=40,
).map(lambda name: f"gnau_service/{name}")
_NAME = st.from_regex(r"[a-z0-9]+(-[a-z0-9]+)*", fullmatch=True)
_VERSION = st.from_regex(r"[0-9A-Za-z.+!-]{1,12}", fullmatch=True)


@given(
    files=st.dictionaries(_PATH, _HEX, max_size=8),
    distributions=st.dictionaries(_NAME, st.builds(Distribution, _VERSION, _HEX), max_size=5),
)
def test_any_manifest_reads_back_as_written_and_its_digest_is_its_texts(
    files: dict[str, str], distributions: dict[str, Distribution]
) -> None:
    files = {path: digest for path, digest in files.items() if path.isprintable()}
    manifest = Manifest("gnau-service", "0.1.0", files, distributions)
    signed_bytes = sign_manifest(manifest, RELEASE)
    assert read_manifest(signed_bytes, RELEASE.verifier) == manifest
    text = signed_bytes[: signed_bytes.index(b"\n\n") + 1]
    assert manifest.sha256 == sha256(text)
