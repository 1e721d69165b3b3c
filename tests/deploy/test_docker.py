"""The image's inputs: the build context .dockerignore leaves (Docker's own matching, from the
docker package), the hash-pinned lock the Dockerfile installs, and the Dockerfile's settings.
No Docker daemon runs here, so the image itself is not built by these tests."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from docker.utils.build import exclude_paths
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.deploy.manifests import DEPLOY, REPO, port_of

DOCKERFILE = DEPLOY / "Dockerfile"
LOCK = DEPLOY / "requirements.lock"


def dockerignore_patterns() -> list[str]:
    """As the Docker client reads the file: stripped lines, without blanks and comments."""
    lines = (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def context(root: Path) -> set[str]:
    """The files of ``root`` that go into the build context (directories left out)."""
    kept = exclude_paths(str(root), dockerignore_patterns(), dockerfile="deploy/Dockerfile")
    return {path for path in kept if (root / path).is_file()}


def instructions(name: str) -> list[list[str]]:
    """The arguments of each ``name`` instruction, continuation lines joined."""
    text = DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    return [line.split()[1:] for line in text.splitlines() if line.startswith(f"{name} ")]


def copied_sources() -> list[str]:
    """What the Dockerfile copies from the build context (not ``--from`` another stage)."""
    return [
        source
        for arguments in instructions("COPY")
        if not arguments[0].startswith("--from")
        for source in arguments[:-1]
    ]


SECRET_AND_BULKY = [
    ".git/config",
    ".venv/bin/python",
    "gnau-data/log-signing-key.pem",
    "gnau-data/tokens.json",
    "clients/node/node_modules/@grpc/grpc-js/index.js",
    "clients/python/.venv/lib/site.py",
    "clients/python/node_modules/x/index.js",
    "gnau_service/.git/HEAD",
    "clients/python/src/gnau_client.egg-info/PKG-INFO",
    "gnau_service/__pycache__/app.cpython-311.pyc",
    "gnau_service/gnau-data/log-signing-key.pem",
    "deploy/secrets/log-signing-key.pem",
    "deploy/compose.yaml",
    ".pytest_cache/v/cache/lastfailed",
    ".mypy_cache/3.11/x.json",
    ".ruff_cache/0.6/x",
    ".hypothesis/examples/x",
    "bench/results/report.md",
    "tests/conftest.py",
    ".env",
]
NEEDED = [
    "pyproject.toml",
    "README.md",
    "gnau_service/server/process/app.py",
    "gnau_service/web/index.html",
    "clients/python/pyproject.toml",
    "clients/python/src/gnau_client/client.py",
    "deploy/requirements.lock",
]


def test_the_context_leaves_out_secrets_and_caches(tmp_path: Path) -> None:
    for path in SECRET_AND_BULKY + NEEDED:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x", encoding="utf-8")
    kept = context(tmp_path)
    assert kept == set(NEEDED)


def test_the_context_of_this_checkout_is_what_the_dockerfile_copies() -> None:
    """This tree holds .venv, node_modules and .git (and gnau-data after `make serve`)."""
    kept = context(REPO) - {".dockerignore", "deploy/Dockerfile"}  # Docker always sends these
    sources = copied_sources()
    assert sources == [
        "deploy/requirements.lock", "pyproject.toml", "README.md", "gnau_service",
        "clients/python",
    ]  # fmt: skip
    for source in sources:
        assert any(path == source or path.startswith(source + "/") for path in kept), source
    for path in kept:
        assert any(path == source or path.startswith(source + "/") for source in sources), path
    assert "gnau_service/server/process/app.py" in kept
    assert not any(part in path for path in kept for part in (".venv", "node_modules", ".git/"))


# --- The lock ---------------------------------------------------------------------------------

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", re.MULTILINE)


def locked() -> dict[str, tuple[Version, list[str]]]:
    """Each locked package: its version and its sha256 hashes."""
    text = LOCK.read_text(encoding="utf-8")
    entries = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        pin = PIN.match(block)
        if pin is not None:
            hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", block)
            entries[canonicalize_name(pin[1])] = (Version(pin[2]), hashes)
    return entries


def runtime_requirements() -> list[Requirement]:
    requirements = []
    for pyproject in (REPO / "pyproject.toml", REPO / "clients/python/pyproject.toml"):
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        requirements += [Requirement(text) for text in project["project"]["dependencies"]]
        requirements += [Requirement(text) for text in project["build-system"]["requires"]]
    return requirements


def test_the_lock_pins_every_runtime_dependency_with_hashes() -> None:
    entries = locked()
    assert len(entries) > 20
    for requirement in runtime_requirements():
        name = canonicalize_name(requirement.name)
        assert name in entries, f"{name} is missing from {LOCK.name}: refresh it"
        version, _ = entries[name]
        assert requirement.specifier.contains(version), f"{name} {version} {requirement}"
        for extra in requirement.extras:  # psycopg[binary] needs psycopg-binary too
            assert canonicalize_name(f"{name}-{extra}") in entries
    for name, (_, hashes) in entries.items():
        assert hashes, f"{name} has no hash"


def test_the_dockerfile_installs_from_the_lock_only() -> None:
    runs = " ".join(" ".join(arguments) for arguments in instructions("RUN"))
    assert "--require-hashes" in runs and "-r deploy/requirements.lock" in runs
    # The local packages bring nothing unpinned: no dependencies, no index, no build isolation.
    local = next(arguments for arguments in instructions("RUN") if "./clients/python" in arguments)
    assert {"--no-deps", "--no-index", "--no-build-isolation"} <= set(local)


@pytest.mark.parametrize("setting", ["GNAU_LISTEN", "GNAU_DATA_DIR"])
def test_the_dockerfile_settings_agree(setting: str) -> None:
    (env,) = instructions("ENV")
    values = dict(item.split("=", 1) for item in env if "=" in item)
    if setting == "GNAU_LISTEN":
        assert str(port_of(values[setting])) in instructions("EXPOSE")[0]
    else:
        (volume,) = instructions("VOLUME")
        assert volume == [f'["{values[setting]}"]']
    assert instructions("USER") == [["10001:10001"]]
    (healthcheck,) = instructions("HEALTHCHECK")
    assert healthcheck[-3:] == ["CMD", '["gnau",', '"health"]']
