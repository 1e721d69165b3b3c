"""deploy/compose.yaml agrees with the service's settings, the image and Prometheus' targets, and
deploy/compose-secrets.sh makes secret files that the dealer, as uid 10001, takes."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gnau_service.audit.signing import load_private_key
from gnau_service.cli.health_commands import default_target
from gnau_service.cli.main import build_parser
from gnau_service.server.grpc.auth import Role
from gnau_service.server.process.config import SETTINGS, load_settings
from gnau_service.server.process.tokens import read_token_file
from tests.deploy.manifests import COMPOSE_FILE, DEPLOY, port_of, yaml_documents
from tests.deploy.test_docker import instructions
from tests.identity import (
    SERVICE_GID,
    SERVICE_UID,
    as_identity,
    require_root,
    shared_directory,
)

(COMPOSE,) = yaml_documents(COMPOSE_FILE)
SERVICES: dict[str, Any] = COMPOSE["services"]
DEALERS = ["dealer-1", "dealer-2"]
VARIABLES = {setting.variable for setting in SETTINGS.values()}


def image_environment() -> dict[str, str]:
    (env,) = instructions("ENV")
    return dict(item.split("=", 1) for item in env if "=" in item)


def environment(name: str) -> dict[str, str]:
    """What the dealer process sees: the image's ENV, then the service's environment."""
    return {**image_environment(), **SERVICES[name]["environment"]}


def published(name: str) -> dict[int, tuple[str, int]]:
    """container port -> (host address, host port), with the host ports' defaults."""
    mapping = {}
    for text in SERVICES[name]["ports"]:
        with_defaults = re.sub(r"\$\{[A-Z0-9_]+:-(\d+)\}", r"\1", text)
        address, host_port, container_port = with_defaults.split(":")
        mapping[int(container_port)] = (address, int(host_port))
    return mapping


def test_the_services() -> None:
    assert set(SERVICES) == {"postgres", *DEALERS, "prometheus"}
    for name in DEALERS:
        dealer = SERVICES[name]
        assert dealer["image"] == "gnau-dealer:0.1.0"
        build = dealer["build"]
        assert (COMPOSE_FILE.parent / build["context"] / build["dockerfile"]).resolve() == (
            DEPLOY / "Dockerfile"
        )
        assert dealer["depends_on"] == {"postgres": {"condition": "service_healthy"}}
        assert dealer["read_only"] is True and dealer["cap_drop"] == ["ALL"]
    assert SERVICES["postgres"]["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]


@pytest.mark.parametrize("name", DEALERS)
def test_each_dealer_agrees_with_the_settings(name: str) -> None:
    environ = environment(name)
    gnau_variables = {variable for variable in environ if variable.startswith("GNAU_")}
    assert gnau_variables <= VARIABLES, gnau_variables - VARIABLES
    settings = load_settings(None, environ, {})
    ports = published(name)
    assert set(ports) == {port_of(settings.listen), port_of(settings.http_listen)}
    assert {address for address, _ in ports.values()} == {"127.0.0.1"}
    # Secrets: each setting's file is a secret this dealer has, defined at the top level.
    mounted = {f"/run/secrets/{secret}" for secret in SERVICES[name]["secrets"]}
    assert {str(settings.key_path), str(settings.tokens_path), environ["PGPASSFILE"]} == mounted
    for secret in SERVICES[name]["secrets"]:
        assert COMPOSE["secrets"][secret]["file"].startswith("./secrets/")
    # The health check is `gnau health` as the CLI parses it, at this dealer's gRPC port.
    test = SERVICES[name]["healthcheck"]["test"]
    assert test[:2] == ["CMD", "gnau"]
    assert build_parser().parse_args(test[2:]).run.__name__ == "run_health"
    assert default_target(environ) == f"127.0.0.1:{port_of(settings.listen)}"
    # The data directory is a volume of this dealer's own.
    (volume,) = SERVICES[name]["volumes"]
    source, target = volume.split(":")
    assert target == str(settings.data_dir) and source in COMPOSE["volumes"]


def test_one_log_for_both_dealers() -> None:
    first, second = (load_settings(None, environment(name), {}) for name in DEALERS)
    assert first.database_url == second.database_url
    assert first.origin == second.origin and first.key_path == second.key_path
    # The database is the postgres service, and the URL holds no password (libpq's PGPASSFILE).
    assert re.fullmatch(r"postgresql://gnau@postgres:5432/gnau", first.database_url)
    postgres = SERVICES["postgres"]["environment"]
    assert (postgres["POSTGRES_USER"], postgres["POSTGRES_DB"]) == ("gnau", "gnau")
    assert len({volume for name in DEALERS for volume in SERVICES[name]["volumes"]}) == 2
    host_ports = [port for name in DEALERS for _, port in published(name).values()]
    assert len(set(host_ports)) == len(host_ports)


def test_prometheus_scrapes_both_dealers_http_ports() -> None:
    prometheus = SERVICES["prometheus"]
    config_mount = next(v for v in prometheus["volumes"] if v.startswith("./prometheus.yml:"))
    (config,) = yaml_documents(COMPOSE_FILE.parent / config_mount.split(":")[0])
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    (static,) = job["static_configs"]
    expected = {
        f"{name}:{port_of(load_settings(None, environment(name), {}).http_listen)}"
        for name in DEALERS
    }
    assert set(static["targets"]) == expected


# --- The secret files -------------------------------------------------------------------------


def make_secrets(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", str(DEPLOY / "compose-secrets.sh"), str(directory)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def owner_and_mode(path: Path) -> tuple[int, int]:
    status = path.stat()
    return status.st_uid, stat.S_IMODE(status.st_mode)


def test_compose_secrets_are_what_the_dealer_takes() -> None:
    require_root()
    with shared_directory() as root:
        check_compose_secrets(root / "secrets")


def check_compose_secrets(directory: Path) -> None:
    made = make_secrets(directory)
    assert made.returncode == 0, made.stderr
    files = {path.name: owner_and_mode(path) for path in directory.iterdir()}
    assert files == {
        "log-signing-key.pem": (SERVICE_UID, 0o600),
        "tokens.json": (SERVICE_UID, 0o600),
        "pgpass": (SERVICE_UID, 0o600),
        "postgres-password": (0, 0o600),
        "operator-token": (0, 0o600),
        "auditor-token": (0, 0o600),
    }
    password = (directory / "postgres-password").read_text().strip()
    assert re.fullmatch(r"[0-9a-f]{64}", password)
    assert (directory / "pgpass").read_text() == f"postgres:5432:gnau:gnau:{password}\n"
    # The dealer's user reads them. Compose mounts the files alone, not their directory (0700,
    # root's), so here the directory is opened up to stand for that.
    os.chmod(directory, 0o755)
    with as_identity(SERVICE_UID, SERVICE_GID, (SERVICE_GID,)):
        load_private_key(directory / "log-signing-key.pem")
        tokens = read_token_file(directory / "tokens.json")
    token = (directory / "operator-token").read_text().strip()
    auditor = (directory / "auditor-token").read_text().strip()
    assert len(token) == len(auditor) == 43 and tokens.legacy_tokens == {}  # hashes only
    assert tokens.hashes == {
        hashlib.sha256(token.encode()).hexdigest(): Role.OPERATOR,
        hashlib.sha256(auditor.encode()).hexdigest(): Role.AUDITOR,
    }
    # The operator token deals for the operator "default"; the auditor's reads every operator's
    # log (gnau audit export takes no other).
    assert {record.name: record.operator for record in tokens.records} == {
        "operator": "default",
        "auditor": "*",
    }
    for secret in (token, auditor, password):
        assert secret not in (directory / "tokens.json").read_text()
        assert secret not in made.stdout + made.stderr

    # Run again: nothing replaced, a widened mode narrowed back.
    before = {path.name: path.read_bytes() for path in directory.iterdir()}
    (directory / "tokens.json").chmod(0o644)
    again = make_secrets(directory)
    assert again.returncode == 0, again.stderr
    assert {path.name: path.read_bytes() for path in directory.iterdir()} == before
    assert owner_and_mode(directory / "tokens.json") == (SERVICE_UID, 0o600)


def test_the_operator_token_never_starts_with_a_dash(tmp_path: Path) -> None:
    """A token starting with "-" reads as an option after --token (1 in 64 draws): the script
    draws again. An openssl whose first random draw gives such a token stands in for bad luck;
    every other call goes to the real one."""
    require_root()
    real = shutil.which("openssl")
    assert real is not None
    fake = tmp_path / "bin" / "openssl"
    fake.parent.mkdir()
    marker = tmp_path / "drawn-once"
    fake.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = rand ] && [ "$2" = -base64 ] && [ ! -e {marker} ]; then\n'
        f"    touch {marker}; echo '+AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA='; exit 0\n"
        "fi\n"
        f'exec {real} "$@"\n'
    )
    fake.chmod(0o755)
    with shared_directory() as root:
        made = subprocess.run(
            ["/bin/sh", str(DEPLOY / "compose-secrets.sh"), str(root / "secrets")],
            capture_output=True, text=True, check=False,
            env={**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"},
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        token = (root / "secrets" / "operator-token").read_text().strip()
    assert marker.exists(), "the first draw was the dashed one"
    assert not token.startswith("-") and len(token) == 43
