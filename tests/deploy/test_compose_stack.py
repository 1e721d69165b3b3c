"""The Compose stack (deploy/compose.yaml), run as the processes it starts: this machine has no
Docker daemon, so each dealer service becomes a ``gnau serve`` with that service's environment,
with secret files made by deploy/compose-secrets.sh, on this machine's PostgreSQL. Then the stack
is checked the way it checks itself: each dealer's health check passes, Prometheus' scrape
configuration finds ``/metrics`` on both, and rounds played on both dealers land in one log that
verifies.

What is substituted, and only this: the ``postgres`` host and its database become a fresh
database here (trust authentication, so no ``PGPASSFILE``); ``/run/secrets/NAME`` becomes the
file the compose file's ``secrets`` maps NAME to; ports become free ones; the image's user (uid
10001) becomes this test's own (the script's ``GNAU_SERVICE_UID``), since this machine's Python
lives where uid 10001 cannot run it (tests/deploy/test_compose.py reads the files as 10001).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml

from gnau_service.server.process.config import SETTINGS
from tests.deploy.manifests import COMPOSE_FILE
from tests.deploy.test_compose import COMPOSE, DEALERS, environment
from tests.identity import require_root, shared_directory
from tests.postgres import fresh_database
from tests.server.test_metrics import scrape
from tests.serving import Served, free_port, gnau, served

# make test-system: the Compose stack's `gnau serve` processes.
pytestmark = pytest.mark.system

FLAGS = {setting.variable: setting.flag for setting in SETTINGS.values()}
#: Set by tests.serving.served itself: the gRPC port (a free one) and the data directory.
SET_BY_SERVED = {"GNAU_LISTEN", "GNAU_DATA_DIR"}


def per_worker(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float],
    name: str,
    labels: set[tuple[str, str]],
) -> list[float]:
    """``name``'s samples with ``labels``, one for each worker (``GNAU_WORKERS`` is auto)."""
    return [
        value
        for (sample, their), value in samples.items()
        if sample == name and {label for label in their if label[0] != "worker"} == labels
    ]


def dealer_flags(name: str, database: str, secrets: Path, http_port: int) -> list[str]:
    """The dealer's environment as ``gnau serve`` flags, with the substitutions above."""
    secret_files = {
        f"/run/secrets/{secret}": secrets / Path(COMPOSE["secrets"][secret]["file"]).name
        for secret in COMPOSE["secrets"]
    }
    replaced = {"GNAU_DATABASE": database, "GNAU_HTTP_LISTEN": f"127.0.0.1:{http_port}"}
    flags = []
    for variable, value in environment(name).items():
        if variable.startswith("GNAU_") and variable not in SET_BY_SERVED:
            given = replaced.get(variable, value)
            flags += [FLAGS[variable], str(secret_files.get(given, given))]
    return flags


def test_the_compose_stack_serves_one_log_from_two_dealers() -> None:
    require_root()
    (job,) = yaml.safe_load((COMPOSE_FILE.parent / "prometheus.yml").read_text())["scrape_configs"]
    with fresh_database() as database, shared_directory() as root:
        made = subprocess.run(
            ["/bin/sh", str(COMPOSE_FILE.parent / "compose-secrets.sh"), str(root / "secrets")],
            env={**os.environ, "GNAU_SERVICE_UID": str(os.getuid())},
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        (root / "secrets").chmod(0o755)  # compose mounts the files alone, not their directory
        token = (root / "secrets" / "operator-token").read_text().strip()
        http_ports = {name: free_port() for name in DEALERS}
        dealers: dict[str, Served] = {}
        with ExitStack() as running:  # stops both dealers, each required to exit 0
            for name in DEALERS:
                flags = dealer_flags(name, database, root / "secrets", http_ports[name])
                dealers[name] = running.enter_context(served(root / f"{name}-data", *flags))
            for dealer in dealers.values():
                health = gnau("health", "--target", dealer.target)
                assert health.returncode == 0, health.stdout + health.stderr
                play = gnau("play", "--target", dealer.target, "--token", token, "--rounds", "2")
                assert play.returncode == 0, play.stdout + play.stderr + dealer.output()
            assert len({dealer.vkey for dealer in dealers.values()}) == 1  # one log, one key

            # Prometheus' targets are "<service>:<container port>": each is a dealer's HTTP port.
            (static,) = job["static_configs"]
            assert job["metrics_path"] == "/metrics"
            sizes = []
            for target in static["targets"]:
                service, _ = target.split(":")
                samples = asyncio.run(scrape(http_ports[service]))
                settled = {
                    ("grpc_type", "unary"),
                    ("grpc_service", "gnau.v1.DealerService"),
                    ("grpc_method", "Settle"),
                    ("grpc_code", "OK"),
                }
                # Each dealer settled its own two rounds, whichever of its workers did.
                assert per_worker(samples, "grpc_server_handled_total", settled), service
                assert sum(per_worker(samples, "grpc_server_handled_total", settled)) == 2
                sizes.append(max(per_worker(samples, "gnau_log_size", set())))
            # Both read one log: two starts and four rounds of four entries each, at least.
            assert sizes[0] == sizes[1] >= 2 + 4 * 4

            bundle = root / "log.jsonl"
            export = gnau("audit", "export", "--database", database, "--out", str(bundle))
            assert export.returncode == 0, export.stderr
            vkey = dealers[DEALERS[0]].vkey
            verify = gnau("audit", "verify", str(bundle), "--key", vkey)
            assert verify.returncode == 0, verify.stdout + verify.stderr
            assert "result: VALID" in verify.stdout
