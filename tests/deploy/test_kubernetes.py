"""The Kubernetes manifest: valid for the pinned Kubernetes version (offline, strict), within the
Pod Security "restricted" profile, consistent with the service's settings, and starting: the init
container's copy makes from a kubelet-shaped secret volume files that the service takes."""

from __future__ import annotations

import copy
import os
import socket
import stat
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from gnau_service.audit.signing import ensure_private_key, load_private_key
from gnau_service.cli.main import build_parser
from gnau_service.common.private_files import KeyFileError
from gnau_service.server.grpc.auth import AuthConfigError, Role
from gnau_service.server.process.config import load_settings
from gnau_service.server.process.tokens import read_token_file
from tests.deploy.manifests import KUBERNETES_MANIFEST, port_of, yaml_documents
from tests.identity import SERVICE_GID, SERVICE_UID, as_identity, require_root, shared_directory

#: The Kubernetes version the manifest is checked against (its schemas ship with the package).
KUBERNETES_VERSION = "1.31.0"
DOCUMENTS = yaml_documents(KUBERNETES_MANIFEST)


def only(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in DOCUMENTS if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''}"
    return found[0]


DEPLOYMENT = only("Deployment")
POD = DEPLOYMENT["spec"]["template"]["spec"]
(INIT,) = POD["initContainers"]
(DEALER,) = POD["containers"]


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to reach the network fails the test: the schemas must come with the package."""

    def refuse(*args: object) -> None:
        raise AssertionError(f"the validation tried to connect to {args[1:]}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


@pytest.mark.parametrize(
    "document", DOCUMENTS, ids=lambda d: f"{d['kind']}-{d['metadata']['name']}"
)
def test_valid_for_the_pinned_kubernetes_version(offline: None, document: dict[str, Any]) -> None:
    validated = kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    assert validated == "1.31"


def test_the_strict_validation_catches_a_misspelt_field(offline: None) -> None:
    broken = copy.deepcopy(DEPLOYMENT)
    broken["spec"]["template"]["spec"]["securityContext"]["runAsNonroot"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


# --- Pod Security Standards, "restricted" (kubernetes.io/docs/concepts/security/pod-security-
# standards): each rule of the profile, for the pod and every container in it.

RESTRICTED_VOLUME_TYPES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}  # fmt: skip


def test_the_pod_meets_the_restricted_profile() -> None:
    pod_context = POD["securityContext"]
    assert pod_context["runAsNonRoot"] is True
    assert pod_context["runAsUser"] == SERVICE_UID
    assert pod_context["seccompProfile"] == {"type": "RuntimeDefault"}
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        assert not POD.get(key)
    for volume in POD["volumes"]:
        assert set(volume) - {"name"} <= RESTRICTED_VOLUME_TYPES, volume
    for container in (INIT, DEALER):
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["readOnlyRootFilesystem"] is True
        assert context["runAsNonRoot"] is True
        assert context["runAsUser"] != 0
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}
        assert not context.get("privileged")
        assert all("hostPort" not in port for port in container.get("ports", []))


# --- Consistency with the service's settings -----------------------------------------------------


def mounted(container: dict[str, Any], path: str) -> dict[str, Any]:
    """The volume mount of ``container`` under which ``path`` lies."""
    (mount,) = [m for m in container["volumeMounts"] if path.startswith(m["mountPath"] + "/")]
    return mount


def dealer_settings(tmp_path: Path) -> Any:
    config = tmp_path / "gnau.toml"
    config.write_text(only("ConfigMap")["data"]["gnau.toml"], encoding="utf-8")
    environ = {e["name"]: e["value"] for e in DEALER["env"] if "value" in e}
    return load_settings(config, environ, {})


def test_settings_ports_and_paths_agree(tmp_path: Path) -> None:
    settings = dealer_settings(tmp_path)
    assert {e["name"] for e in DEALER["env"]} == {
        "GNAU_CONFIG",
        "GNAU_HTTP_LISTEN",
        "GNAU_DATABASE",
        "GNAU_WORKERS",
    }
    # One worker per core the pod requests.
    assert DEALER["resources"]["requests"]["cpu"] == str(settings.workers)
    config_mount = mounted(
        DEALER, next(e["value"] for e in DEALER["env"] if e["name"] == "GNAU_CONFIG")
    )
    assert config_mount["name"] == "config"
    ports = {p["name"]: p["containerPort"] for p in DEALER["ports"]}
    assert ports == {"grpc": port_of(settings.listen), "http": port_of(settings.http_listen)}
    annotations = DEPLOYMENT["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(ports["http"])
    assert annotations["prometheus.io/path"] == "/metrics"
    # Every secret the service reads is a private copy, made by the init container.
    copies = INIT["command"][4:]
    destinations = copies[1::2]
    for path in (settings.key_path, settings.tokens_path, settings.tls_cert, settings.tls_key):
        assert mounted(DEALER, str(path))["name"] == "private"
        assert str(path.parent) in destinations
    private = next(v for v in POD["volumes"] if v["name"] == "private")
    assert private["emptyDir"]["medium"] == "Memory"
    # The shutdown notice and grace fit in the termination grace period.
    grace = settings.shutdown_notice_seconds + settings.grace_seconds
    assert grace < POD["terminationGracePeriodSeconds"]


def test_services_and_budget_select_the_pods() -> None:
    labels = DEPLOYMENT["spec"]["template"]["metadata"]["labels"]
    named_ports = {p["name"] for p in DEALER["ports"]}
    headless = only("Service", "gnau-dealer-headless")
    assert headless["spec"]["clusterIP"] == "None"
    for service in (headless, only("Service", "gnau-dealer")):
        assert service["spec"]["selector"].items() <= labels.items()
        assert {p["targetPort"] for p in service["spec"]["ports"]} == named_ports
    budget = only("PodDisruptionBudget")
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert budget["spec"]["maxUnavailable"] < DEPLOYMENT["spec"]["replicas"]


def test_the_probes_are_gnau_health_commands_the_cli_accepts() -> None:
    for probe in ("readinessProbe", "livenessProbe"):
        command = DEALER[probe]["exec"]["command"]
        assert command[:2] == ["gnau", "health"]
        args = build_parser().parse_args(command[1:])
        assert str(args.tls_ca).startswith("/run/gnau/tls/")
        assert args.tls_server_name == "gnau-dealer-headless"
        assert DEALER[probe]["timeoutSeconds"] >= 5  # a Python start takes most of a second


# --- The init container's copy, run as the pod runs it ------------------------------------------


def kubelet_secret_volume(directory: Path, files: dict[str, bytes]) -> Path:
    """A secret volume as the kubelet writes it with fsGroup: the files in a timestamped
    directory, 0440 root:fsGroup, reached through the ``..data`` symlink."""
    directory.mkdir()
    data = directory / "..2026_11_30_12_00_00.000000001"
    data.mkdir()
    for name, content in files.items():
        (data / name).write_bytes(content)
        os.chown(data / name, 0, SERVICE_GID)
        (data / name).chmod(0o440)
        (directory / name).symlink_to(f"..data/{name}")
    (directory / "..data").symlink_to(data.name)
    os.chown(directory, 0, SERVICE_GID)
    os.chmod(directory, 0o3777)  # what the kubelet makes of a volume with fsGroup
    return directory


def run_init_container(mapping: list[Path]) -> subprocess.CompletedProcess[str]:
    """The manifest's init command, its directories replaced by ``mapping``, run as the pod's
    user with the pod's groups."""
    command = INIT["command"]
    assert len(command) == 4 + len(mapping)
    return subprocess.run(
        [*command[:4], *map(str, mapping)],
        user=SERVICE_UID, group=SERVICE_GID, extra_groups=[SERVICE_GID],
        capture_output=True, text=True, check=False, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def test_the_init_container_makes_copies_the_service_takes(tmp_path: Path) -> None:
    require_root()
    key_pem = ensure_private_key(tmp_path).path.read_bytes()
    tokens = b'{"tokens": {"t0k3n": "operator"}}'
    with shared_directory() as root:
        secrets = kubelet_secret_volume(
            root / "secrets", {"log-signing-key.pem": key_pem, "tokens.json": tokens}
        )
        tls = kubelet_secret_volume(
            root / "tls", {"tls.crt": b"cert", "tls.key": b"key", "ca.crt": b"ca"}
        )
        private = root / "private"
        private.mkdir()
        os.chown(private, 0, SERVICE_GID)
        os.chmod(private, 0o3777)  # an emptyDir with fsGroup
        # Straight from the secret volume, the service refuses to start: the crash loop.
        with as_identity(SERVICE_UID, SERVICE_GID, (SERVICE_GID,)), pytest.raises(KeyFileError):
            load_private_key(secrets / "log-signing-key.pem")

        copied = run_init_container([secrets, private / "secrets", tls, private / "tls"])
        assert copied.returncode == 0, copied.stderr
        assert "copy-secrets: " in copied.stdout and "t0k3n" not in copied.stdout
        names = {
            path.relative_to(private).as_posix(): path.lstat()
            for path in private.rglob("*")
            if path.is_file()
        }
        assert set(names) == {
            "secrets/log-signing-key.pem", "secrets/tokens.json",
            "tls/tls.crt", "tls/tls.key", "tls/ca.crt",
        }  # fmt: skip
        for status in names.values():
            assert stat.S_ISREG(status.st_mode)
            assert (stat.S_IMODE(status.st_mode), status.st_uid) == (0o600, SERVICE_UID)
        with as_identity(SERVICE_UID, SERVICE_GID, (SERVICE_GID,)):
            load_private_key(private / "secrets" / "log-signing-key.pem")
            tokens = read_token_file(private / "secrets" / "tokens.json")
            assert tokens.legacy_tokens == {"t0k3n": Role.OPERATOR}


def test_the_init_container_fails_on_a_missing_secret() -> None:
    require_root()
    with shared_directory() as root:
        empty = root / "secrets"
        empty.mkdir()
        tls = kubelet_secret_volume(root / "tls", {"tls.crt": b"cert"})
        private = root / "private"
        private.mkdir(mode=0o777)
        private.chmod(0o777)
        copied = run_init_container([empty, private / "secrets", tls, private / "tls"])
    assert copied.returncode == 1
    assert copied.stderr == f"copy-secrets: no files in {empty}: is its secret created?\n"


def test_a_token_file_on_the_secret_volume_is_refused_with_the_remedy() -> None:
    require_root()
    with shared_directory() as root:
        secrets = kubelet_secret_volume(root / "secrets", {"tokens.json": b"{}"})
        with (
            as_identity(SERVICE_UID, SERVICE_GID, (SERVICE_GID,)),
            pytest.raises(AuthConfigError) as caught,
        ):
            read_token_file(secrets / "tokens.json")
    assert "init container" in str(caught.value)
