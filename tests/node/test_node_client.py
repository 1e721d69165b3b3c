"""The contract, proved by a client in another language: ``clients/node`` (Node.js, grpc-js and
proto-loader reading ``proto/`` at run time) plays full rounds against a real ``gnau serve``.

Needs ``node`` (20 or newer) on PATH and ``npm ci --prefix clients/node`` (``make test`` runs it).
Without node the test is skipped on a developer machine, but fails in CI (``CI`` set), so the
contract check can never silently drop out of the build.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serving import Served, served

# make test-system: the Node.js client, run against `gnau serve`.
pytestmark = pytest.mark.system

REPO = Path(__file__).resolve().parents[2]
NODE_CLIENT = REPO / "clients" / "node"
NODE_MAJOR = 20
NODE_TIMEOUT = 120.0  # seconds for the whole `node --test` run


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in {"", "0", "false", "no"}


def node_executable() -> str:
    node = shutil.which("node")
    if node is None:
        reason = "node is not on PATH: the Node.js contract test (clients/node) needs Node.js 20+"
        if in_ci():
            pytest.fail(f"{reason}; CI must run it, so this is a failure, not a skip")
        pytest.skip(reason)
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True)
    major = int(version.stdout.strip().lstrip("v").split(".")[0])
    assert major >= NODE_MAJOR, f"{node} is Node.js {version.stdout.strip()}; 20 or newer needed"
    for package in ("@grpc/grpc-js", "@grpc/proto-loader"):
        if not (NODE_CLIENT / "node_modules" / package / "package.json").is_file():
            pytest.fail(
                f"{package} is not installed in clients/node/node_modules: "
                "run `npm ci --prefix clients/node` (make test does it)"
            )
    return node


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Served]:
    with served(tmp_path / "data") as started:
        yield started


def summary(output: str, name: str) -> int | None:
    """A count from the summary of node's TAP output (`# pass 15`)."""
    found = re.search(rf"^# {name} (\d+)$", output, re.MULTILINE)
    return int(found.group(1)) if found else None


@pytest.fixture
def node() -> str:
    return node_executable()


def run_node_tests(node: str, server: Served) -> tuple[int, str]:
    """Runs `node --test` in clients/node against ``server``: (exit code, output)."""
    env = {**os.environ, "TARGET": server.target, "TOKEN": server.token, "NO_COLOR": "1"}
    env.pop("FORCE_COLOR", None)
    env.pop("NODE_OPTIONS", None)
    # Its own process group: node runs each test file in a child, and a timeout must end them all.
    with subprocess.Popen(
        [node, "--test", "--test-reporter=tap"],
        cwd=NODE_CLIENT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            output, _ = process.communicate(timeout=NODE_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            pytest.fail(
                f"node --test did not finish in {NODE_TIMEOUT:.0f} s:\n{output}\n"
                f"--- server ---\n{server.output()}"
            )
    return process.returncode, output


def test_node_client_plays_a_round_against_the_server(node: str, server: Served) -> None:
    code, output = run_node_tests(node, server)
    assert code == 0, (
        f"node --test failed (exit {code}):\n{output}\n--- server ---\n{server.output()}"
    )
    passed = summary(output, "pass")
    assert passed, f"no Node test passed:\n{output}"
    assert summary(output, "fail") == 0, output
    assert summary(output, "cancelled") == 0, output
    assert re.search(r"^ +ok \d+ - plays a full round", output, re.MULTILINE), output

    server.stop()  # the service must also shut down cleanly after the run
