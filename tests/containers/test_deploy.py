"""deploy/ for real, under podman (make test-deploy): the base image from Debian's packages, the
project's image from deploy/Dockerfile unchanged, the image alone, deploy/compose.yaml under
podman-compose, and the Kubernetes Deployment's pod generated from deploy/kubernetes.

The phases run in order on one private image store, each timed; the store and everything in
it are removed at the end, and the last check is that nothing was left. Docker's commands
are the same as podman's here (docs/operations.md gives both).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gnau_service.audit.signing import private_key_pem
from tests.containers.podman import FIGURES, REPO, TEST_IMAGES, Podman, phase, require_tools
from tests.server.test_tls_and_config import write_tls_files
from tests.serving import free_port, gnau

pytestmark = pytest.mark.containers

DEALER_IMAGE = "gnau-dealer:0.1.0"  # deploy/compose.yaml's and deploy/kubernetes's image
#: What the image's build wrote (deploy/Dockerfile; docs/software.md).
SOFTWARE_MANIFEST = "/opt/gnau/share/gnau/software.manifest"
RELEASE_KEY = "/opt/gnau/share/gnau/release.vkey"
STAND_INS = {"postgres": "postgres:15", "prometheus": "prom/prometheus:v2.55.1"}
COMPOSE_FILE = REPO / "deploy" / "compose.yaml"
KUBERNETES_FILE = REPO / "deploy" / "kubernetes" / "gnau-dealer.yaml"
#: Networks podman keeps outside the store: the Compose project's, and the pod test's own.
NETWORKS = ("gnau_default", "gnau-kube-test")
SERVICE_UID = 10001


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Podman]:
    require_tools()
    root = Path(tmp_path_factory.mktemp("podman"))
    podman = Podman.private(root)
    try:
        yield podman
    finally:
        with phase("clean up"):
            podman.remove_everything(NETWORKS)
            left = podman.made()
            networks = podman.podman("network", "ls", "--format", "{{.Name}}").stdout.split()
            podman.podman("system", "reset", "--force", check=False)
            shutil.rmtree(root, ignore_errors=True)
        assert not any(left.values()), f"left behind: {left}"
        assert not set(NETWORKS) & set(networks), f"networks left behind: {networks}"


@pytest.fixture(scope="module")
def images(engine: Podman) -> Podman:
    """The base from Debian's packages, then the dealer's image and the two stand-ins."""
    with phase("base image (mmdebstrap)"):
        made = engine.run(str(REPO / "deploy" / "base-image.sh"), timeout=600)
        assert "base-image: python:3.11-slim from Debian bookworm" in made.stdout, made.stdout
        FIGURES["base image"] = f"{engine.image_mb('python:3.11-slim')} MB"
    with phase("images (dealer, postgres, prometheus)"):
        # The stand-ins build beside the dealer's image: their time is apt's, not the CPU's.
        failures: list[str] = []
        stand_ins = [
            threading.Thread(target=build_stand_in, args=(engine, name, tag, failures))
            for name, tag in STAND_INS.items()
        ]
        for thread in stand_ins:
            thread.start()
        try:
            build_dealer(engine)
        finally:
            for thread in stand_ins:
                thread.join()
        assert not failures, failures
    return engine


def build_stand_in(engine: Podman, name: str, tag: str, failures: list[str]) -> None:
    try:
        engine.podman(
            "build", "--quiet", "--file", str(TEST_IMAGES / name / "Containerfile"),
            "--tag", tag, str(TEST_IMAGES / name), timeout=600,
        )  # fmt: skip
    except AssertionError as error:
        failures.append(str(error))


def build_dealer(engine: Podman) -> None:
    """deploy/Dockerfile, unchanged, in Docker's format (the OCI format drops HEALTHCHECK).
    pip inside the build trusts the host's CA bundle: this network intercepts TLS."""
    pip_conf = engine.root / "pip.conf"
    pip_conf.write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n")
    engine.podman(
        "build", "--quiet", "--format", "docker", "--file", "deploy/Dockerfile",
        "--tag", DEALER_IMAGE,
        "--volume", "/etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro",
        "--volume", f"{pip_conf}:/etc/pip.conf:ro",
        ".", cwd=REPO, timeout=600,
    )  # fmt: skip
    FIGURES["dealer image"] = f"{engine.image_mb(DEALER_IMAGE)} MB"


def test_the_image_keeps_its_healthcheck_and_user(images: Podman) -> None:
    image = images.inspect("image", DEALER_IMAGE)
    # In the OCI format (podman's and buildah's default) HEALTHCHECK is dropped with a warning.
    assert image.get("Healthcheck", {}).get("Test") == ["CMD", "gnau", "health"], image
    assert image["Config"]["User"] == f"{SERVICE_UID}:{SERVICE_UID}"
    assert image["Config"]["Entrypoint"] == ["gnau", "serve"]


def test_the_image_alone(images: Podman, tmp_path: Path) -> None:
    port = free_port()
    name = "gnau-alone"
    with phase("image alone: start, play, restart, stop"):
        images.podman("volume", "create", "gnau-alone-data")
        images.podman(
            "run", "--detach", "--name", name, "--publish", f"127.0.0.1:{port}:50051",
            "--volume", "gnau-alone-data:/var/lib/gnau", DEALER_IMAGE,
        )  # fmt: skip
        serving = images.wait_for_log(name, '"serving"')
        FIGURES["container start to serving"] = f"{serving:.1f} s"
        images.wait_healthy(name)
        key = serving_key(images.logs(name))
        # The start authenticated the software against the manifest its build wrote.
        assert '"software matches its manifest"' in images.logs(name), images.logs(name)[-4000:]
        token = images.podman("exec", name, "cat", "/var/lib/gnau/operator-token").stdout.strip()
        assert images.podman("exec", name, "id", "-u").stdout.strip() == str(SERVICE_UID)
        listing = images.podman(
            "exec", name, "stat", "-c", "%a %u %n", "/var/lib/gnau/log-signing-key.pem",
            "/var/lib/gnau/tokens.json", "/var/lib/gnau/operator-token", "/var/lib/gnau/gnau.db",
        ).stdout.splitlines()  # fmt: skip
        assert all(line.startswith(f"600 {SERVICE_UID} ") for line in listing), listing
        play(f"127.0.0.1:{port}", token, rounds=2)

        images.podman("stop", "--time", "30", name)
        assert images.exit_code(name) == 0, images.logs(name)[-4000:]
        images.podman("start", name)
        images.wait_healthy(name)
        assert serving_key(images.logs(name), last=True) == key, "a restart kept the key"
        play(f"127.0.0.1:{port}", token, rounds=1)
        # The log is an auditor of every operator's to export: the running dealer takes up the
        # token added to its file within a second, and says so.
        reloads = images.logs(name).count("tokens reloaded")
        images.podman(
            "exec", name, "gnau", "token", "add", "--role", "auditor", "--all-operators",
            "--name", "audit", "--tokens", "/var/lib/gnau/tokens.json",
            "--out", "/var/lib/gnau/auditor-token",
        )  # fmt: skip
        auditor = images.podman("exec", name, "cat", "/var/lib/gnau/auditor-token").stdout.strip()
        deadline = time.monotonic() + 30
        while images.logs(name).count("tokens reloaded") == reloads:
            assert time.monotonic() < deadline, images.logs(name)[-4000:]
            time.sleep(0.1)
        _, settled = export_and_verify(port, auditor, key, tmp_path / "alone")
        assert settled == 3, "the rounds before the restart are in the log"
        images.podman("stop", "--time", "30", name)
        assert images.exit_code(name) == 0


def test_the_image_verifies_its_software_and_a_changed_byte_fails(images: Podman) -> None:
    verify = ["gnau", "software", "verify", "--manifest", SOFTWARE_MANIFEST]
    verify += ["--release-key", RELEASE_KEY, "--json"]
    with phase("image alone: software authentication"):
        done = images.podman(
            "run", "--rm", "--entrypoint", verify[0], DEALER_IMAGE, *verify[1:], check=False
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["result"] == "MATCHED"
        # One byte of a shipped JavaScript module changed, as root, in a throwaway container.
        flip = (
            "import gnau_service, pathlib; "
            "p = pathlib.Path(gnau_service.__file__).parent / 'web/js/receipt.js'; "
            "b = bytearray(p.read_bytes()); b[0] ^= 1; p.write_bytes(bytes(b))"
        )
        changed = images.podman(
            "run", "--rm", "--user", "0", "--entrypoint", "sh", DEALER_IMAGE, "-c",
            f"python -c \"{flip}\" && {' '.join(verify)}", check=False,
        )  # fmt: skip
    assert changed.returncode == 1, changed.stdout + changed.stderr
    found = json.loads(changed.stdout)
    assert found["result"] == "MISMATCHED"
    assert found["mismatches"] == [
        {"part": "file", "name": "gnau_service/web/js/receipt.js", "problem": "changed"}
    ]


@pytest.mark.parametrize(
    ("owner", "mode", "says"),
    [
        ((0, SERVICE_UID), 0o440, "so every member of group 10001 may access it"),
        ((SERVICE_UID, SERVICE_UID), 0o644, "which lets group or others access it; run: chmod 600"),
    ],
)
def test_a_secret_file_with_the_wrong_owner_or_mode_is_refused(
    images: Podman, tmp_path: Path, owner: tuple[int, int], mode: int, says: str
) -> None:
    with phase("image alone: secret files refused"):
        key = tmp_path / "log-signing-key.pem"
        key.write_bytes(ed25519_pem())
        os.chown(key, *owner)
        key.chmod(mode)
        done = images.podman(
            "run", "--rm", "--volume", f"{key}:/run/secrets/log-signing-key:ro",
            "--env", "GNAU_KEY=/run/secrets/log-signing-key", DEALER_IMAGE, check=False,
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    (refusal,) = [json.loads(line) for line in done.stderr.splitlines() if "cannot start" in line]
    assert says in refusal["error"] and refusal["level"] == "error", refusal
    assert "BEGIN PRIVATE KEY" not in done.stderr


def test_the_compose_stack(images: Podman, tmp_path: Path) -> None:
    ports = {
        name: free_port()
        for name in (
            "GNAU_DEALER_1_GRPC_PORT", "GNAU_DEALER_1_HTTP_PORT", "GNAU_DEALER_2_GRPC_PORT",
            "GNAU_DEALER_2_HTTP_PORT", "GNAU_PROMETHEUS_PORT",
        )
    }  # fmt: skip
    images.env.update({name: str(port) for name, port in ports.items()})
    secrets = COMPOSE_FILE.parent / "secrets"
    made_secrets = not secrets.exists()
    # podman-compose takes the project's name only from the command line; compose.podman.yaml
    # sets this host's process limit beside compose.yaml's (deploy/test-images says why).
    compose = (
        "podman-compose", "--project-name", "gnau", "--file", str(COMPOSE_FILE),
        "--file", str(TEST_IMAGES / "compose.podman.yaml"),
    )  # fmt: skip
    dealers = {1: "gnau_dealer-1_1", 2: "gnau_dealer-2_1"}
    try:
        with phase("compose: up"):
            images.run("/bin/sh", str(COMPOSE_FILE.parent / "compose-secrets.sh"), str(secrets))
            images.run(*compose, "up", "--detach", timeout=300)
            for container in dealers.values():
                images.wait_healthy(container, timeout=120)
        token = (secrets / "operator-token").read_text().strip()
        auditor = (secrets / "auditor-token").read_text().strip()
        with phase("compose: rounds on both dealers, export, verify"):
            key = serving_key(images.logs(dealers[1]))
            assert serving_key(images.logs(dealers[2])) == key, "both dealers sign one log"
            for number in dealers:
                play(f"127.0.0.1:{ports[f'GNAU_DEALER_{number}_GRPC_PORT']}", token, rounds=2)
            first, settled = export_and_verify(
                ports["GNAU_DEALER_2_GRPC_PORT"], auditor, key, tmp_path / "a"
            )
            assert settled == 4, "the rounds of both dealers are in one log"
        with phase("compose: prometheus targets and rules"):
            prometheus = f"http://127.0.0.1:{ports['GNAU_PROMETHEUS_PORT']}"
            targets = wait_for_targets_up(prometheus, 2)
            assert sorted(t["labels"]["instance"] for t in targets) == [
                "dealer-1:8080",
                "dealer-2:8080",
            ]
            rules = get_json(f"{prometheus}/api/v1/rules")["data"]["groups"]
            alerts = {rule["name"] for group in rules for rule in group["rules"]}
            assert "GnauLogStalled" in alerts, alerts
        with phase("compose: down, up, the same log goes on"):
            images.run(*compose, "down", timeout=300)
            images.run(*compose, "up", "--detach", timeout=300)
            for container in dealers.values():
                images.wait_healthy(container, timeout=120)
            play(f"127.0.0.1:{ports['GNAU_DEALER_1_GRPC_PORT']}", token, rounds=1)
            second, settled = export_and_verify(
                ports["GNAU_DEALER_1_GRPC_PORT"], auditor, key, tmp_path / "b"
            )
            assert second > first and settled == 5, f"the log went on: {first}, then {second}"
    finally:
        images.run(*compose, "down", "--volumes", check=False, timeout=300)
        if made_secrets:
            shutil.rmtree(secrets, ignore_errors=True)


def test_the_kubernetes_pod(images: Podman, tmp_path: Path) -> None:
    secrets = {name: tmp_path / name for name in ("gnau-secrets", "gnau-tls", "gnau-database")}
    for directory in secrets.values():
        directory.mkdir()
    (secrets["gnau-secrets"] / "log-signing-key.pem").write_bytes(ed25519_pem())
    added = gnau(
        "token", "add", "--role", "operator", "--name", "ops",
        "--tokens", str(secrets["gnau-secrets"] / "tokens.json"),
        "--out", str(tmp_path / "operator.token"),
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    token = (tmp_path / "operator.token").read_text().strip()
    # As kubectl create secret --from-file=tokens.json: the file alone, not its lock.
    (secrets["gnau-secrets"] / "tokens.json.lock").unlink(missing_ok=True)
    write_tls_files(secrets["gnau-tls"], ("gnau-dealer-headless", "localhost"))
    password = os.urandom(16).hex()
    (secrets["gnau-database"] / "url").write_text(
        f"postgresql://gnau:{password}@gnau-kube-postgres:5432/gnau"
    )
    (tmp_path / "postgres-password").write_text(password)
    port = free_port()
    pod = "gnau-dealer"
    try:
        with phase("kubernetes pod: generate, start, play over TLS"):
            images.podman("network", "create", "gnau-kube-test")
            images.podman(
                "run", "--detach", "--name", "gnau-kube-postgres", "--network", "gnau-kube-test",
                "--env", "POSTGRES_USER=gnau", "--env", "POSTGRES_PASSWORD_FILE=/run/secrets/pw",
                "--volume", f"{tmp_path / 'postgres-password'}:/run/secrets/pw:ro",
                STAND_INS["postgres"],
            )  # fmt: skip
            script = images.run(
                "python3", str(TEST_IMAGES / "kube_pod.py"), str(KUBERNETES_FILE),
                "--work", str(tmp_path / "volumes"), "--network", "gnau-kube-test",
                "--publish", f"grpc=127.0.0.1:{port}",
                *[f"--secret={name}={directory}" for name, directory in secrets.items()],
            ).stdout  # fmt: skip
            assert password not in script and token not in script
            # The Secret volumes as the kubelet mounts them with fsGroup: root:10001, 0440.
            volumes = tmp_path / "volumes"
            staged = sorted([*volumes.glob("secrets/..data/*"), *volumes.glob("tls/..data/*")])
            assert {p.name for p in staged} >= {"log-signing-key.pem", "tokens.json", "tls.key"}
            for path in staged:
                mode = path.stat()
                assert (mode.st_uid, mode.st_gid, mode.st_mode & 0o777) == (0, SERVICE_UID, 0o440)
            images.run("/bin/sh", "-c", script)
            images.wait_for_log(f"{pod}-dealer", '"serving"', timeout=120)
            copied = images.logs(f"{pod}-private-secrets")
            for file in ("secrets/log-signing-key.pem", "secrets/tokens.json", "tls/tls.key"):
                assert f"copy-secrets: /run/gnau/{file} (0600, uid {SERVICE_UID})" in copied, copied
            probe = images.wait_healthy(f"{pod}-dealer", timeout=60)
            FIGURES["pod: probe passing after serving"] = f"{probe:.1f} s"
            play(
                f"127.0.0.1:{port}", token, rounds=2,
                tls=("--tls-ca", str(secrets["gnau-tls"] / "ca.crt"),
                     "--tls-server-name", "gnau-dealer-headless"),
            )  # fmt: skip
            # The copies live in memory (emptyDir, medium Memory: a tmpfs volume), 0600, 10001.
            mounts = images.podman("exec", f"{pod}-dealer", "cat", "/proc/mounts").stdout
            assert any(" /run/gnau tmpfs " in line for line in mounts.splitlines()), mounts
            listing = images.podman(
                "exec", f"{pod}-dealer", "stat", "-c", "%a %u %n", "/run/gnau/secrets/tokens.json",
                "/run/gnau/secrets/log-signing-key.pem", "/run/gnau/tls/tls.key",
            ).stdout.splitlines()  # fmt: skip
            assert all(line.startswith(f"600 {SERVICE_UID} ") for line in listing), listing
        with phase("kubernetes pod: graceful stop"):
            grace = 30  # the manifest's terminationGracePeriodSeconds
            started = time.monotonic()
            images.podman("pod", "stop", "--time", str(grace), pod, timeout=grace + 30)
            stopped = time.monotonic() - started
            FIGURES["pod: graceful stop"] = f"{stopped:.1f} s (grace {grace} s)"
            assert stopped < grace
            assert images.exit_code(f"{pod}-dealer") == 0, images.logs(f"{pod}-dealer")[-4000:]
    finally:
        images.podman("pod", "rm", "--force", pod, check=False)
        images.podman("rm", "--force", "--time", "0", "gnau-kube-postgres", check=False)
        volumes = tmp_path / "volumes"
        for line in Path("/proc/mounts").read_text().splitlines():
            if line.split()[1].startswith(f"{volumes}/"):
                images.run("umount", line.split()[1])


# -- helpers -----------------------------------------------------------------------------------


def serving_key(log: str, *, last: bool = False) -> str:
    """The log key in a dealer's JSON "serving" line (the first, or the last)."""
    keys = [
        json.loads(line)["key"]
        for line in log.splitlines()
        if line.startswith("{") and '"event": "serving"' in line
    ]
    assert keys, f"no serving line:\n{log[-4000:]}"
    return str(keys[-1] if last else keys[0])


def play(target: str, token: str, *, rounds: int, tls: tuple[str, ...] = ()) -> None:
    done = gnau("play", "--target", target, "--token", token, "--rounds", str(rounds),
                "--tables", "1", *tls)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{rounds} of {rounds} rounds verified independently" in done.stdout, done.stdout


def export_and_verify(port: int, token: str, key: str, directory: Path) -> tuple[int, int]:
    """Export the log over gRPC and verify it offline with the pinned key: its entries and
    its rounds settled and replayed."""
    directory.mkdir()
    bundle = directory / "log.bundle"
    exported = gnau("audit", "export", "--target", f"127.0.0.1:{port}", "--token", token,
                    "--out", str(bundle))  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    verified = gnau("audit", "verify", str(bundle), "--key", key)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    entries = re.search(r"entries: ([\d,]+) verified", verified.stdout)
    settled = re.search(r"rounds: ([\d,]+) settled and replayed", verified.stdout)
    assert entries and settled, verified.stdout
    return int(entries[1].replace(",", "")), int(settled[1].replace(",", ""))


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def wait_for_targets_up(prometheus: str, count: int, timeout: float = 60) -> list[Any]:
    """Prometheus' active targets once ``count`` are up (its first scrape is within 15 s)."""
    started = time.monotonic()
    while True:
        try:
            targets = get_json(f"{prometheus}/api/v1/targets")["data"]["activeTargets"]
        except OSError:
            targets = []
        if sum(t["health"] == "up" for t in targets) >= count:
            return list(targets)
        assert time.monotonic() - started < timeout, json.dumps(targets)[:4000]
        time.sleep(1)


def ed25519_pem() -> bytes:
    return private_key_pem(Ed25519PrivateKey.generate())
