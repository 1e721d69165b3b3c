#!/usr/bin/env python3
"""A Kubernetes Deployment's pod, run by podman without a cluster: prints the podman commands.

``podman kube play`` cannot run deploy/kubernetes/gnau-dealer.yaml faithfully: it ignores
``fsGroup`` and ``runAsUser`` and does not mount Secret volumes the way the kubelet does, and
those are what the manifest's init container is about. So this reads the Deployment and writes
the equivalent pod as a shell script of podman commands, doing what the kubelet would:

- Secret volumes: a directory per volume, laid out as the kubelet does (each key a symlink into
  ``..data``), files owned by root and, with ``fsGroup``, by its group, and group-readable
  whatever ``defaultMode`` says (kubernetes#57923); mounted read-only.
- ConfigMap volumes: the ConfigMap's keys from the same manifest, owned the same way, 0644.
- emptyDir volumes: a tmpfs mounted on the host under ``--work`` (of ``sizeLimit``), mode 2777
  and group ``fsGroup``, bound into each container that mounts it (on the node's disk unless
  ``medium: Memory`` in Kubernetes; always in memory here). Unmount it after the pod.
- Init containers run to completion, in order, at each pod start (``--init-ctr always``);
  then the containers. ``command`` replaces the entrypoint, ``args`` the image's command.
- securityContext: ``runAsUser``/``runAsGroup`` as ``--user``, ``fsGroup`` as a supplementary
  group, ``readOnlyRootFilesystem`` as ``--read-only`` (without podman's extra tmpfs mounts),
  ``allowPrivilegeEscalation: false`` as ``no-new-privileges``, dropped and added capabilities;
  ``runAsNonRoot`` is checked here, as the kubelet checks it.
- ``env`` (``value``, and ``valueFrom.secretKeyRef`` as a podman secret given as an environment
  variable, so no secret is on a command line); ``resources.limits.memory`` as ``--memory``.
- The readiness probe's ``exec`` command as the container's health check (``podman healthcheck
  run NAME`` runs it); ``terminationGracePeriodSeconds`` as the stop timeout.
- Ports named in ``--publish NAME=HOST:PORT`` are published on the pod.

Usage (the secrets' files in one directory per Secret):

    deploy/test-images/kube_pod.py deploy/kubernetes/gnau-dealer.yaml --work /tmp/pod \\
        --secret gnau-secrets=DIR --secret gnau-tls=DIR --secret gnau-database=DIR \\
        --publish grpc=127.0.0.1:50051 > pod.sh && sh pod.sh

Then ``podman pod stop -t 30 gnau-dealer``, ``podman pod rm gnau-dealer``, and what the script's
last line names (the podman secrets, the tmpfs mounts). Run as root (the mounts, the owners).
Needs PyYAML.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

Manifest = Mapping[str, Any]
UNITS = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "k": 1000, "M": 1000**2, "G": 1000**3}


class ManifestError(Exception):
    """The manifest asks for something this translation cannot give (named in the message)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("manifest", type=Path)
    parser.add_argument("--deployment", help="its name (default: the manifest's only one)")
    parser.add_argument("--pod", help="the pod's name (default: the Deployment's)")
    parser.add_argument("--work", type=Path, required=True, help="where the volumes are staged")
    parser.add_argument("--secret", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--publish", action="append", default=[], metavar="PORT_NAME=HOST:PORT")
    parser.add_argument("--network", help="a podman network for the pod")
    parser.add_argument("--image", action="append", default=[], metavar="FROM=TO")
    args = parser.parse_args(argv)
    documents = [d for d in yaml.safe_load_all(args.manifest.read_text()) if d]
    try:
        script = pod_script(
            documents,
            deployment=args.deployment,
            pod=args.pod,
            work=args.work,
            secrets=dict(pair(item) for item in args.secret),
            publish=dict(pair(item) for item in args.publish),
            network=args.network,
            images=dict(pair(item) for item in args.image),
        )
    except ManifestError as error:
        sys.stderr.write(f"kube_pod: {error}\n")
        return 2
    sys.stdout.write(script + "\n")
    return 0


def pair(text: str) -> tuple[str, str]:
    name, separator, value = text.partition("=")
    if not separator:
        raise SystemExit(f"kube_pod: expected NAME=VALUE, got {text!r}")
    return name, value


def pod_script(
    documents: list[Manifest],
    *,
    deployment: str | None,
    pod: str | None,
    work: Path,
    secrets: Mapping[str, str],
    publish: Mapping[str, str],
    network: str | None,
    images: Mapping[str, str],
) -> str:
    """The shell script that runs the Deployment's pod; stages its volumes under ``work``."""
    found = [
        d
        for d in documents
        if d.get("kind") == "Deployment"
        and (deployment is None or d["metadata"]["name"] == deployment)
    ]
    if len(found) != 1:
        wanted = deployment or "(any)"
        raise ManifestError(f"expected one Deployment named {wanted}, found {len(found)}")
    template = found[0]["spec"]["template"]
    spec = template["spec"]
    name = pod or found[0]["metadata"]["name"]
    config_maps = {
        d["metadata"]["name"]: d.get("data", {}) for d in documents if d.get("kind") == "ConfigMap"
    }
    security = spec.get("securityContext", {})
    fs_group = security.get("fsGroup")
    source = found[0]["metadata"]["name"]
    lines = ["#!/bin/sh", f"# The pod of Deployment {source}, by kube_pod.py.", "set -eu"]
    made: list[str] = []

    create_pod = ["podman", "pod", "create", "--name", name, "--hostname", name]
    if network:
        create_pod += ["--network", network]
    ports = {
        port["name"]: port["containerPort"]
        for container in spec["containers"]
        for port in container.get("ports", [])
        if "name" in port
    }
    for port_name, host in publish.items():
        if port_name not in ports:
            raise ManifestError(f"no container port named {port_name!r}")
        create_pod += ["--publish", f"{host}:{ports[port_name]}"]
    lines.append(shlex.join(create_pod))
    made.append(f"pod {name}")

    mounts: dict[str, list[str]] = {}
    for volume in spec.get("volumes", []):
        volume_name = volume["name"]
        if "secret" in volume:
            source = volume["secret"]["secretName"]
            if source not in secrets:
                raise ManifestError(f"volume {volume_name}: pass --secret {source}=DIR")
            directory = stage(
                work / volume_name,
                files_of(Path(secrets[source])),
                mode=volume["secret"].get("defaultMode", 0o644),
                fs_group=fs_group,
            )
            mounts[volume_name] = ["--volume", f"{directory}:{{path}}:ro"]
        elif "configMap" in volume:
            source = volume["configMap"]["name"]
            if source not in config_maps:
                raise ManifestError(f"volume {volume_name}: no ConfigMap {source} in the manifest")
            contents = {key: value.encode() for key, value in config_maps[source].items()}
            directory = stage(
                work / volume_name,
                contents,
                mode=volume["configMap"].get("defaultMode", 0o644),
                fs_group=fs_group,
            )
            mounts[volume_name] = ["--volume", f"{directory}:{{path}}:ro"]
        elif "emptyDir" in volume:
            # One tmpfs for the pod's life, shared by its containers: a podman tmpfs volume
            # would be a new, empty file system for each container that mounts it.
            directory = work / volume_name
            options = ["mode=2777"]
            if fs_group is not None:
                options.append(f"gid={fs_group}")
            if "sizeLimit" in volume["emptyDir"]:
                options.append(f"size={quantity(volume['emptyDir']['sizeLimit'])}")
            lines.append(shlex.join(["mkdir", "-p", str(directory)]))
            lines.append(
                shlex.join(
                    ["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(directory)]
                )
            )
            made.append(f"tmpfs {directory} (umount it)")
            mounts[volume_name] = ["--volume", f"{directory}:{{path}}"]
        else:
            raise ManifestError(f"volume {volume_name}: only secret, configMap and emptyDir")

    containers = [(c, True) for c in spec.get("initContainers", [])]
    containers += [(c, False) for c in spec["containers"]]
    for container, is_init in containers:
        container_name = f"{name}-{container['name']}"
        create = ["podman", "create", "--pod", name, "--name", container_name]
        if is_init:
            create += ["--init-ctr", "always"]
        create += security_options(security, container.get("securityContext", {}), container_name)
        for mount in container.get("volumeMounts", []):
            option, template_text = mounts[mount["name"]]
            text = template_text.format(path=mount["mountPath"])
            if mount.get("readOnly") and not text.endswith(":ro"):
                text += ":ro"
            create += [option, text]
        for variable in container.get("env", []):
            if "value" in variable:
                create += ["--env", f"{variable['name']}={variable['value']}"]
                continue
            reference = variable.get("valueFrom", {}).get("secretKeyRef")
            if reference is None:
                raise ManifestError(f"env {variable['name']}: only value and secretKeyRef")
            if reference["name"] not in secrets:
                wanted = reference["name"]
                raise ManifestError(f"env {variable['name']}: pass --secret {wanted}=DIR")
            secret = f"{name}-{reference['name']}-{reference['key']}"
            source_file = Path(secrets[reference["name"]]) / reference["key"]
            lines.append(shlex.join(["podman", "secret", "create", secret, str(source_file)]))
            made.append(f"secret {secret}")
            create += ["--secret", f"{secret},type=env,target={variable['name']}"]
        memory = container.get("resources", {}).get("limits", {}).get("memory")
        if memory:
            create += ["--memory", str(quantity(memory))]
        probe = container.get("readinessProbe", {})
        if "exec" in probe:
            create += [
                "--health-cmd", json.dumps(probe["exec"]["command"]),
                "--health-interval", f"{probe.get('periodSeconds', 10)}s",
                "--health-timeout", f"{probe.get('timeoutSeconds', 1)}s",
                "--health-retries", str(probe.get("failureThreshold", 3)),
            ]  # fmt: skip
        if not is_init:
            create += ["--stop-timeout", str(spec.get("terminationGracePeriodSeconds", 30))]
        if "command" in container:
            create += ["--entrypoint", json.dumps(container["command"])]
        image = container["image"]
        create.append(images.get(image, image))
        create += [str(argument) for argument in container.get("args", [])]
        lines.append(shlex.join(create))
    lines.append(shlex.join(["podman", "pod", "start", name]))
    lines.append("# Made: " + "; ".join(made) + f"; and the volumes staged in {work}.")
    return "\n".join(lines)


def security_options(pod: Manifest, container: Manifest, name: str) -> list[str]:
    """podman options for a container's securityContext over the pod's."""
    merged = {**pod, **container}
    user = merged.get("runAsUser")
    if merged.get("runAsNonRoot") and user in (None, 0):
        # The kubelet checks the image's user when runAsUser is unset; say so rather than guess.
        raise ManifestError(f"{name}: runAsNonRoot needs a non-zero runAsUser here")
    options = []
    if user is not None:
        group = merged.get("runAsGroup")
        options += ["--user", f"{user}:{group}" if group is not None else str(user)]
    for group in [pod.get("fsGroup"), *pod.get("supplementalGroups", [])]:
        if group is not None:
            options += ["--group-add", str(group)]
    if container.get("readOnlyRootFilesystem"):
        options += ["--read-only", "--read-only-tmpfs=false"]
    if container.get("allowPrivilegeEscalation") is False:
        options += ["--security-opt", "no-new-privileges"]
    capabilities = container.get("capabilities", {})
    for capability in capabilities.get("drop", []):
        options += ["--cap-drop", capability]
    for capability in capabilities.get("add", []):
        options += ["--cap-add", capability]
    profile = merged.get("seccompProfile", {}).get("type", "RuntimeDefault")
    if profile == "Unconfined":
        options += ["--security-opt", "seccomp=unconfined"]
    elif profile != "RuntimeDefault":
        raise ManifestError(f"{name}: seccompProfile {profile} is not translated")
    return options


def files_of(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir()) if path.is_file()}


def stage(
    directory: Path, contents: Mapping[str, bytes], *, mode: int, fs_group: int | None
) -> Path:
    """A volume's files as the kubelet lays them out: ``..data`` -> a timestamped directory,
    each key a symlink through ``..data``; files root-owned, group ``fs_group`` and readable by
    it when set (the kubelet widens ``defaultMode`` so)."""
    if directory.exists():
        shutil.rmtree(directory)
    payload = directory / "..2026_01_01_00_00_00.000000000"
    payload.mkdir(parents=True)
    group = fs_group if fs_group is not None else 0
    file_mode = mode | 0o040 if fs_group is not None else mode
    for key, data in contents.items():
        path = payload / key
        path.write_bytes(data)
        own(path, group)
        path.chmod(file_mode)
        (directory / key).symlink_to(f"..data/{key}")
    (directory / "..data").symlink_to(payload.name)
    for folder in (directory, payload):
        own(folder, group)
    directory.chmod(0o1777)  # as the kubelet's volume root: sticky, group fsGroup
    payload.chmod(0o755)
    return directory


def own(path: Path, group: int) -> None:
    """root and ``group``, as the kubelet makes them (only root can give files to root)."""
    if os.geteuid() == 0:
        os.chown(path, 0, group)


def quantity(text: str | int) -> int:
    """A Kubernetes quantity (``64Mi``, ``1Gi``, ``512``) in bytes."""
    match = re.fullmatch(r"(\d+)([KMG]i?|k)?", str(text))
    if not match:
        raise ManifestError(f"quantity {text!r} is not translated")
    number, unit = match.groups()
    return int(number) * (UNITS[unit] if unit else 1)


if __name__ == "__main__":
    raise SystemExit(main())
