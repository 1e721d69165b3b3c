"""The software manifest: every file the package ships and every installed distribution, each
with its SHA-256, in a C2SP signed note signed by a release key (docs/software.md).

Software authentication, as gaming laboratories ask for it (GLI-19 §2.3), is "the installation
is byte for byte what was released": ``gnau software manifest`` writes the manifest of an
installation at release, and ``gnau software verify`` (and the service, at its start, daily and
on an operator's request) compares the installation with it. The note's text is::

    gnau-dealer/software-manifest/v1
    name gnau-service
    version 0.1.0
    file <sha256 hex> gnau_service/__init__.py
    ...
    distribution <sha256 hex> <name> <version>
    ...

``file`` lines in the byte order of their paths, ``distribution`` lines in the order of their
names; the manifest's digest is the SHA-256 of that text (what the signatures cover).

>>> from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
>>> signer = Signer("gnau-release", Ed25519PrivateKey.generate())
>>> manifest = Manifest("gnau-service", "0.1.0", {"gnau_service/a.py": "ab" * 32}, {})
>>> text = manifest.text()
>>> text.splitlines()[3]
'file abababababababababababababababababababababababababababababababab gnau_service/a.py'
>>> read_manifest(sign_manifest(manifest, signer), signer.verifier) == manifest
True
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Final

import gnau_service
from gnau_service.audit.entries import JsonValue, is_hash_hex
from gnau_service.audit.note import NoteError, SignedNote, Signer, Verifier, sign_note

HEADER: Final = "gnau-dealer/software-manifest/v1"
#: The distribution of this package, the manifest's ``name``, and the package's directory.
PACKAGE_DISTRIBUTION: Final = "gnau-service"
PACKAGE_DIRECTORY: Final = "gnau_service"
#: The digest of a file that RECORD lists and that is not there (no SHA-256 is this word).
ABSENT: Final = "absent"
_CHUNK: Final = 1 << 20
_NAME: Final = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
_VERSION: Final = re.compile(r"\S+")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


class ManifestError(ValueError):
    """A manifest that cannot be used: unreadable, malformed, or not signed by the release key."""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def normalized_name(name: str) -> str:
    """A distribution's name as PEP 503 compares them.

    >>> normalized_name("Typing_Extensions"), normalized_name("zope.interface")
    ('typing-extensions', 'zope-interface')
    """
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Installation:
    """What is installed: the package's directory (``gnau_service``), whose files all ship, and
    the distributions installed beside it. A parameter, so that tests check a copy."""

    package_root: Path
    distributions: tuple[importlib.metadata.Distribution, ...] = field(repr=False)

    @classmethod
    def running(cls) -> Installation:
        """This process's: the imported package and every distribution on ``sys.path``."""
        return cls(Path(gnau_service.__file__).parent, tuple(importlib.metadata.distributions()))

    def files(self) -> dict[str, str]:
        """Every regular file under the package root but bytecode caches, by its path from the
        root's parent (``gnau_service/web/index.html``), with its SHA-256."""
        found: dict[str, str] = {}
        prefix = self.package_root.name
        for directory, subdirectories, names in os.walk(self.package_root):
            subdirectories[:] = [name for name in subdirectories if name != "__pycache__"]
            for name in names:
                path = Path(directory, name)
                if path.is_file():
                    relative = path.relative_to(self.package_root).as_posix()
                    found[f"{prefix}/{relative}"] = file_sha256(path)
        return found

    def distribution_versions(self) -> dict[str, tuple[importlib.metadata.Distribution, str]]:
        """Each distribution, this package's too (its console scripts, its metadata), by its
        normalized name, with its version. Of several with one name, the first on the path that
        has a RECORD, else the first (a source checkout's ``*.egg-info``, on the path when
        Python runs there, beside the installed ``*.dist-info``)."""
        found: dict[str, tuple[importlib.metadata.Distribution, str]] = {}
        for distribution in self.distributions:
            name = distribution.metadata["Name"]
            if not name:
                continue
            key = normalized_name(name)
            if key not in found or (not _has_record(found[key][0]) and _has_record(distribution)):
                found[key] = (distribution, distribution.version)
        return found


def distribution_digest(distribution: importlib.metadata.Distribution) -> str:
    """SHA-256 of the lines ``<sha256 hex>  <path>\\n`` (two spaces, as ``sha256sum`` writes
    them), one for each file the distribution's RECORD lists, in the byte order of the paths as
    RECORD writes them, leaving out RECORD itself and bytecode (``.pyc`` files and whatever is
    under ``__pycache__``, which Python may rewrite), and, of this package's distribution, the
    files under ``gnau_service/`` (each has its own ``file`` line). A listed file that is not
    there has the word ``absent`` for its hash. A distribution without a RECORD has no lines:
    the SHA-256 of nothing."""
    own = normalized_name(distribution.metadata["Name"] or "") == PACKAGE_DISTRIBUTION
    lines = []
    # Only a RECORD: an egg-info's file lists (SOURCES.txt) name a source tree's files.
    for listed in (distribution.files if _has_record(distribution) else None) or ():
        path = str(listed)
        if _left_out(path) or (own and path.startswith(f"{PACKAGE_DIRECTORY}/")):
            continue
        located = Path(str(distribution.locate_file(listed)))
        sha256 = file_sha256(located) if located.is_file() else ABSENT
        lines.append((path.encode("utf-8", "surrogateescape"), sha256))
    digest = hashlib.sha256()
    for path_bytes, sha256 in sorted(lines):
        digest.update(sha256.encode() + b"  " + path_bytes + b"\n")
    return digest.hexdigest()


def _has_record(distribution: importlib.metadata.Distribution) -> bool:
    return distribution.read_text("RECORD") is not None


def _left_out(path: str) -> bool:
    parts = path.split("/")
    return (parts[-1] == "RECORD" and parts[0].endswith(".dist-info")) or (
        path.endswith(".pyc") or "__pycache__" in parts
    )


@dataclass(frozen=True)
class Distribution:
    version: str
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """A manifest's content: the package's name and version, each file's SHA-256 by its path,
    each distribution's version and digest by its normalized name."""

    name: str
    version: str
    files: Mapping[str, str]
    distributions: Mapping[str, Distribution]

    @classmethod
    def of(cls, installation: Installation) -> Manifest:
        """The manifest of ``installation`` as it is now."""
        distributions = {
            name: Distribution(version, distribution_digest(distribution))
            for name, (distribution, version) in installation.distribution_versions().items()
        }
        return cls(
            PACKAGE_DISTRIBUTION, gnau_service.__version__, installation.files(), distributions
        )

    def text(self) -> str:
        """The note text the release key signs (the module's docstring shows it)."""
        lines = [HEADER, f"name {self.name}", f"version {self.version}"]
        for path in sorted(self.files, key=lambda path: path.encode("utf-8", "surrogateescape")):
            _check_path(path)
            lines.append(f"file {self.files[path]} {path}")
        for name in sorted(self.distributions):
            distribution = self.distributions[name]
            lines.append(f"distribution {distribution.sha256} {name} {distribution.version}")
        return "\n".join(lines) + "\n"

    @property
    def sha256(self) -> str:
        """The manifest's digest: SHA-256 of its text's UTF-8 bytes."""
        return hashlib.sha256(self.text().encode("utf-8")).hexdigest()


def _check_path(path: str) -> None:
    if _CONTROL.search(path) or not path.isprintable():
        raise ManifestError(f"a shipped file's path holds a character a manifest cannot: {path!r}")


def sign_manifest(manifest: Manifest, signer: Signer) -> bytes:
    """The manifest file: its text signed by ``signer``, as a C2SP signed note."""
    return sign_note(manifest.text(), signer).encode()


def read_manifest(data: bytes, release_key: Verifier) -> Manifest:
    """The manifest in ``data``, once the release key's signature on it verifies. Raises
    :class:`ManifestError` saying why not."""
    try:
        note = SignedNote.parse(data)
        note.verify([release_key])
    except NoteError as error:
        raise ManifestError(f"the manifest does not verify: {error}") from None
    return _parse_text(note.text)


def _parse_text(text: str) -> Manifest:
    lines = text.removesuffix("\n").split("\n")
    if len(lines) < 3 or lines[0] != HEADER:
        raise ManifestError(f"the manifest does not start with {HEADER}, name and version")
    name, version = _value(lines[1], "name"), _value(lines[2], "version")
    files: dict[str, str] = {}
    distributions: dict[str, Distribution] = {}
    for number, line in enumerate(lines[3:], start=4):
        word, _, rest = line.partition(" ")
        sha256, _, rest = rest.partition(" ")
        if not is_hash_hex(sha256) or not rest:
            raise ManifestError(f"manifest line {number} is not WORD SHA256 NAME")
        if word == "file" and rest not in files:
            files[rest] = sha256
            continue
        dist_name, _, dist_version = rest.partition(" ")
        if not (
            word == "distribution"
            and _NAME.fullmatch(dist_name)
            and _VERSION.fullmatch(dist_version)
            and dist_name not in distributions
        ):
            raise ManifestError(f"manifest line {number} is not a new file or distribution")
        distributions[dist_name] = Distribution(dist_version, sha256)
    return Manifest(name, version, files, distributions)


def _value(line: str, word: str) -> str:
    found, _, value = line.partition(" ")
    if found != word or not value:
        raise ManifestError(f"the manifest's {word} line is missing")
    return value


# --- Verification ---------------------------------------------------------------------------


class Problem(StrEnum):
    CHANGED = "changed"
    MISSING = "missing"
    EXTRA = "extra"


class Part(StrEnum):
    FILE = "file"
    DISTRIBUTION = "distribution"
    VERSION = "version"


@dataclass(frozen=True, order=True)
class Mismatch:
    """One difference between the manifest and the installation: a shipped file (by its path),
    a distribution (by its normalized name) or the package's version that is changed, missing
    or extra."""

    part: Part
    name: str
    problem: Problem

    def describe(self) -> str:
        return f"{self.problem} {self.part} {printable_name(self.name)}"

    def listed(self) -> dict[str, str]:
        """The mismatch as an entry, an answer and ``--json`` list it, its name printable."""
        return {
            "part": str(self.part),
            "name": printable_name(self.name),
            "problem": str(self.problem),
        }


def compare(manifest: Manifest, installation: Installation) -> tuple[Mismatch, ...]:
    """Every difference between ``manifest`` and ``installation``, sorted; empty when they
    match. A distribution is hashed only when its name and version match the manifest's."""
    mismatches = [
        Mismatch(Part.FILE, path, problem)
        for path, problem in _differences(manifest.files, installation.files())
    ]
    installed = installation.distribution_versions()
    for name, problem in _differences(
        {name: listed.version for name, listed in manifest.distributions.items()},
        {name: version for name, (_, version) in installed.items()},
    ):
        mismatches.append(Mismatch(Part.DISTRIBUTION, name, problem))
    for name, listed in manifest.distributions.items():
        found = installed.get(name)
        if (
            found is not None
            and found[1] == listed.version
            and distribution_digest(found[0]) != listed.sha256
        ):
            mismatches.append(Mismatch(Part.DISTRIBUTION, name, Problem.CHANGED))
    if manifest.version != gnau_service.__version__:
        mismatches.append(Mismatch(Part.VERSION, manifest.name, Problem.CHANGED))
    return tuple(sorted(mismatches))


def _differences(
    expected: Mapping[str, str], found: Mapping[str, str]
) -> Iterable[tuple[str, Problem]]:
    for name, value in expected.items():
        if name not in found:
            yield name, Problem.MISSING
        elif found[name] != value:
            yield name, Problem.CHANGED
    for name in found.keys() - expected.keys():
        yield name, Problem.EXTRA


# --- A check and its entry ------------------------------------------------------------------


class Outcome(StrEnum):
    """What a check found: the installation matches its manifest, or not; the manifest (or the
    release key) could not be read or does not verify; or no manifest is configured."""

    MATCHED = "MATCHED"
    MISMATCHED = "MISMATCHED"
    UNVERIFIED = "UNVERIFIED"
    NO_MANIFEST = "NO_MANIFEST"


#: The most mismatches a SOFTWARE_VERIFIED entry lists (it counts them all).
MAX_LISTED_MISMATCHES: Final = 100
#: The most characters of a name an entry lists (an extra file's name is anyone's choice).
MAX_NAME_CHARACTERS: Final = 300


@dataclass(frozen=True)
class SoftwareCheck:
    """The result of comparing an installation with its manifest."""

    outcome: Outcome
    manifest_sha256: str | None = None
    mismatches: tuple[Mismatch, ...] = ()
    detail: str = ""

    @property
    def alarming(self) -> bool:
        """Whether a manifest is configured and the installation does not verify against it."""
        return self.outcome in (Outcome.MISMATCHED, Outcome.UNVERIFIED)

    def payload(self, actor: str) -> dict[str, JsonValue]:
        """The payload of the SOFTWARE_VERIFIED entry that records this check, by ``actor``
        (docs/schemas/payload-software-verified.schema.json)."""
        listed: list[JsonValue] = [dict(mismatch) for mismatch in self.listed()]
        return {
            "actor": actor,
            "result": str(self.outcome),
            "manifest_sha256": self.manifest_sha256,
            "mismatches": listed,
            "mismatch_count": len(self.mismatches),
            "detail": self.detail,
        }

    def listed(self) -> list[dict[str, str]]:
        """The mismatches an entry lists: the first :data:`MAX_LISTED_MISMATCHES`, each's name
        as an entry can hold it."""
        return [mismatch.listed() for mismatch in self.mismatches[:MAX_LISTED_MISMATCHES]]

    def lines(self) -> list[str]:
        """The check as ``gnau software verify`` prints it: the result, then each mismatch."""
        head = f"{self.outcome}" + (f": {self.detail}" if self.detail else "")
        if self.manifest_sha256 is not None:
            head += f" (manifest sha256 {self.manifest_sha256})"
        return [head, *(mismatch.describe() for mismatch in self.mismatches)]


def printable_name(name: str) -> str:
    """``name`` as an entry (or a line of output) can hold it: undecodable bytes of a file name
    and control characters written ``\\xNN``, clipped to :data:`MAX_NAME_CHARACTERS`.

    >>> printable_name("gnau_service/a\\nb.py")
    'gnau_service/a\\\\x0ab.py'
    """
    try:
        text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no undecodable byte stands for
        text = name.encode("utf-8", "backslashreplace").decode("utf-8")
    text = _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)
    return text if len(text) <= MAX_NAME_CHARACTERS else text[:MAX_NAME_CHARACTERS] + "…"


def read_release_key(path: Path) -> Verifier:
    """The release key's verifier, from a file holding its verifier key (``NAME+ID+KEY``) on
    one line. Raises :class:`ManifestError`."""
    try:
        return Verifier.from_vkey(path.read_text(encoding="utf-8").strip())
    except (OSError, UnicodeDecodeError) as error:
        raise ManifestError(f"cannot read the release key {path}: {error}") from None
    except NoteError as error:
        raise ManifestError(f"the release key {path} is not a verifier key: {error}") from None


def check_software(
    manifest_path: Path | None, release_key_path: Path | None, installation: Installation
) -> SoftwareCheck:
    """Compare ``installation`` with the manifest at ``manifest_path``, signed by the release
    key in ``release_key_path``. Reads every shipped file and every distribution's files: run it
    off an event loop."""
    if manifest_path is None or release_key_path is None:
        return SoftwareCheck(Outcome.NO_MANIFEST, detail="no software manifest is configured")
    try:
        release_key = read_release_key(release_key_path)
        try:
            data = manifest_path.read_bytes()
        except OSError as error:
            raise ManifestError(f"cannot read the manifest {manifest_path}: {error}") from None
        manifest = read_manifest(data, release_key)
    except ManifestError as error:
        return SoftwareCheck(Outcome.UNVERIFIED, detail=str(error))
    mismatches = compare(manifest, installation)
    outcome = Outcome.MISMATCHED if mismatches else Outcome.MATCHED
    return SoftwareCheck(outcome, manifest.sha256, mismatches)
