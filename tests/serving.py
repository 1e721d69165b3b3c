"""A real ``gnau serve`` process for end-to-end tests: started on a free port, stopped with
SIGTERM, and asked to have exited cleanly."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Served:
    target: str
    data_dir: Path
    token: str
    vkey: str

    @property
    def database(self) -> str:
        return f"sqlite:///{self.data_dir / 'gnau.db'}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def gnau(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run the ``gnau`` command in a subprocess and capture its output."""
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-m", "gnau_service.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        **kwargs,
    )


@contextmanager
def served(data_dir: Path, *extra: str) -> Iterator[Served]:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable, "-m", "gnau_service.cli.main", "serve",
            "--listen", f"127.0.0.1:{port}", "--data-dir", str(data_dir),
            "--log-format", "json", *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert process.stdout is not None
    lines = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("gnau: log key "):
            break
    if not lines or not lines[-1].startswith("gnau: log key "):
        process.kill()
        raise AssertionError(
            f"gnau serve did not start: {lines} {process.stderr.read() if process.stderr else ''}"
        )
    vkey = lines[-1].removeprefix("gnau: log key ").strip()
    tokens = json.loads((data_dir / "tokens.json").read_text())["tokens"]
    token = next(token for token, role in tokens.items() if role == "operator")
    try:
        yield Served(f"127.0.0.1:{port}", data_dir, token, vkey)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            status = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
        assert status == 0, f"gnau serve exited with {status}"
