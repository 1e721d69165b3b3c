"""podman for the deployment tests: a private image store (so a run starts from nothing and
leaves nothing), this repository's containers.conf, each phase timed, and every command's
output kept for the failure message."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
TEST_IMAGES = REPO / "deploy" / "test-images"
TOOLS = ("podman", "buildah", "podman-compose", "mmdebstrap", "runc")
#: Every phase's seconds, in order, for the summary that make test-deploy prints.
PHASES: dict[str, float] = {}
#: Figures the summary prints beside the phases (image sizes, start times).
FIGURES: dict[str, str] = {}


def require_tools() -> None:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if os.geteuid() != 0:
        missing.append("root (podman-compose, mmdebstrap and the image's uid 10001 volumes)")
    if not missing:
        return
    reason = f"make test-deploy needs {', '.join(missing)}"
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the deployment tests, but {reason}", pytrace=False)
    pytest.skip(f"{reason}: apt-get install podman buildah podman-compose mmdebstrap runc")


@contextmanager
def phase(name: str) -> Iterator[None]:
    started = time.monotonic()
    try:
        yield
    finally:
        PHASES[name] = time.monotonic() - started


@dataclass
class Podman:
    """podman, buildah and podman-compose on a store of the test's own."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def private(cls, root: Path) -> Podman:
        storage = root / "storage.conf"
        storage.write_text(
            "[storage]\n"
            'driver = "overlay"\n'
            f'graphroot = "{root / "graph"}"\n'
            f'runroot = "{root / "run"}"\n'
        )
        env = {
            **os.environ,
            "CONTAINERS_CONF": str(TEST_IMAGES / "containers.conf"),
            "CONTAINERS_STORAGE_CONF": str(storage),
        }
        return cls(root, env)

    def run(
        self, *args: str, check: bool = True, timeout: float = 300, **kwargs: Any
    ) -> subprocess.CompletedProcess[str]:
        """A command with this store; on failure (when ``check``), its output in the error."""
        done = subprocess.run(
            list(args), env=self.env, capture_output=True, text=True, timeout=timeout,
            check=False, **kwargs,
        )  # fmt: skip
        if check and done.returncode != 0:
            raise AssertionError(
                f"{' '.join(args[:4])}... exited {done.returncode}:\n"
                f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
            )
        return done

    def podman(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.run("podman", *args, **kwargs)

    def inspect(self, kind: str, name: str) -> dict[str, Any]:
        (found,) = json.loads(self.podman(kind, "inspect", name).stdout)
        return dict(found)

    def image_mb(self, name: str) -> int:
        return int(self.inspect("image", name)["Size"]) // 1_000_000

    def logs(self, container: str) -> str:
        done = self.podman("logs", container, check=False)
        return done.stdout + done.stderr

    def wait_for_log(self, container: str, text: str, timeout: float = 90) -> float:
        """Seconds until ``text`` is in the container's log."""
        started = time.monotonic()
        while text not in self.logs(container):
            state = self.inspect("container", container)["State"]
            assert state["Running"] or state["Restarting"], (
                f"{container} stopped ({state['ExitCode']}):\n{self.logs(container)[-4000:]}"
            )
            assert time.monotonic() - started < timeout, self.logs(container)[-4000:]
            time.sleep(0.1)
        return time.monotonic() - started

    def wait_healthy(self, container: str, timeout: float = 90) -> float:
        """Seconds until the image's (or the pod's) health check command passes."""
        started = time.monotonic()
        while self.podman("healthcheck", "run", container, check=False).returncode != 0:
            assert time.monotonic() - started < timeout, (
                f"{container} never healthy:\n{self.logs(container)[-4000:]}"
            )
            time.sleep(0.5)
        return time.monotonic() - started

    def exit_code(self, container: str) -> int:
        return int(self.inspect("container", container)["State"]["ExitCode"])

    def made(self) -> dict[str, list[str]]:
        """What is left in the store: containers, pods, volumes, images, secrets."""
        listing = {
            "containers": ("ps", "--all", "--format", "{{.Names}}"),
            "pods": ("pod", "ps", "--format", "{{.Name}}"),
            "volumes": ("volume", "ls", "--format", "{{.Name}}"),
            "images": ("images", "--all", "--format", "{{.Repository}}:{{.Tag}}"),
            "secrets": ("secret", "ls", "--format", "{{.Name}}"),
        }
        return {kind: self.podman(*command).stdout.split() for kind, command in listing.items()}

    def remove_everything(self, networks: Sequence[str]) -> None:
        for command in (
            ("pod", "rm", "--all", "--force"),
            ("rm", "--all", "--force", "--time", "0"),
            ("volume", "rm", "--all", "--force"),
            ("secret", "rm", "--all"),
            ("rmi", "--all", "--force"),
        ):
            self.podman(*command, check=False)
        for network in networks:
            self.podman("network", "rm", "--force", network, check=False)


def summary_lines() -> list[str]:
    if not PHASES:
        return []
    width = max(len(name) for name in PHASES)
    lines = ["make test-deploy: each phase's time"]
    lines += [f"  {name:<{width}}  {seconds:6.1f} s" for name, seconds in PHASES.items()]
    lines.append(f"  {'in all':<{width}}  {sum(PHASES.values()):6.1f} s")
    lines += [f"  {name}: {value}" for name, value in FIGURES.items()]
    return lines
